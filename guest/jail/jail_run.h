/* A jail's run, from agtd's side (jail_run.c): what a cold start and a prepared one share,
 * and finding a run again after agtd restarts. */
#ifndef AGT_JAIL_RUN_H
#define AGT_JAIL_RUN_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "jail.h"

/* The overlay's mount options for a jail directory. */
void agt_jail_overlay_opts(struct agtd_s *d, char *const *layers, const char *lower,
                           const char *dir, char *buf, size_t size);
/* The jail's init runs (pid): the record's run state, then its supervision. */
int agt_jail_begin_run(agt_jail_t *j, pid_t pid, int pidfd, int keep_fd, int keeper_pidfd,
                       int status_fd, agt_error_t *err);
/* The kernel's last capability. */
int agt_cap_last(void);
/* The PATH of an environment. */
const char *agt_env_path(char *const *env);
/* Network mode allow: the proxy in the jail's namespace (netns, or pid's when -1). */
int agt_jail_start_egress(agt_jail_t *j, int netns, pid_t pid, agt_error_t *err);
/* A jail whose record says it runs (agt_jail_load_all): its keeper found again and its run
 * supervised, or, the keeper gone, the exit it recorded (else a kill) written down. */
void agt_jail_find_again(agt_jail_t *j);

#endif
