/* Per-jail cgroups: memory, pids and cpu limits.  Two backends behind one interface:
 * cgroup v2 (the unified hierarchy of Lima's Ubuntu guests) in cgroup_v2.c and the v1
 * fallback (one hierarchy per controller) in cgroup_v1.c.  Each jail gets
 * <hierarchy>/<parent>/<jail>, where <parent> is agtd's (default "agt").  What the two
 * share is in cgroup_utils.c, below both. */
#ifndef AGT_CGROUP_H
#define AGT_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "cgroup_utils.h"
#include "error.h"

int agt_cgroup_root_init(struct agt_cgroup_root *r, const char *parent, agt_error_t *err);
/* The same with the mount point and version given (version 0: detect).  For tests. */
int agt_cgroup_root_init_at(struct agt_cgroup_root *r, const char *parent, const char *fsroot,
                            int version, agt_error_t *err);
/* An fd of the jail's cgroup directory for clone3(CLONE_INTO_CGROUP) (v2), or -1. */
int agt_cgroup_open(struct agt_cgroup_root *r, const char *jail);
/* Free r, and remove agtd's parent cgroup when no jail is left in it. */
void agt_cgroup_root_release(struct agt_cgroup_root *r);

/* Create the jail's cgroup(s) and write the limits. */
int agt_cgroup_create(struct agt_cgroup_root *r, const char *jail,
                      const struct agt_cgroup_limits *l, agt_error_t *err);
/* Give a prepared jail's cgroup(s) `from`, holding pid and limited by `have`, to the jail:
 * renamed (v1; the limits written when they differ) or pid moved into a new one (v2). */
int agt_cgroup_adopt(struct agt_cgroup_root *r, const char *from, const char *jail, pid_t pid,
                     const struct agt_cgroup_limits *l, const struct agt_cgroup_limits *have,
                     agt_error_t *err);
/* Move pid into the jail's cgroup(s). */
int agt_cgroup_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err);
/* Kill what is left in the jail's cgroup and remove it.  AGT_E_BUSY while processes are
 * still exiting: call again. */
int agt_cgroup_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err);
int agt_cgroup_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s);
/* cgroup v1 with RT group scheduling: give the jail's cgroup (NULL: agtd's parent) a
 * realtime budget of usec a second, 0 to take it back.  0 when there is no such thing to
 * give (cgroup v2, or no RT group scheduling): realtime tasks need no budget then. */
int agt_cgroup_rt_budget(struct agt_cgroup_root *r, const char *jail, uint64_t usec,
                         agt_error_t *err);
/* The directory of the jail's cgroup in the memory (v1) or unified (v2) hierarchy;
 * newly allocated. */
char *agt_cgroup_path(struct agt_cgroup_root *r, const char *jail);

/* Moving a process into a cgroup (a write to cgroup.procs, v1 or v2) waits for an RCU grace
 * period, milliseconds, unless the kernel's cgroup flag favordynmods is on.  agtd never turns
 * it on (it makes fork and exit dearer machine-wide and, from Linux 6.18, cannot be turned
 * off until reboot): the Lima guest's provisioning does (lima/provision/machine.sh).  1 when
 * a cgroup mount shows the flag. */
int agt_cgroup_favordynmods(void);

#endif
