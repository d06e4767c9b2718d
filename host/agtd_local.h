/* The agtd of target local, on this machine: where `agt up` keeps its state, stopping it
 * (`agt down`), and removing its state (`agt delete`). */
#ifndef AGT_HOST_AGTD_LOCAL_H
#define AGT_HOST_AGTD_LOCAL_H

#include <stdint.h>

#include "error.h"

struct agt_ctx;

/* $AGT_AGTD_STATE, else /var/lib/agt: where `agt up` tells agtd to keep its state. */
const char *agt_local_state_dir(void);

/* $AGT_AGTD_LOG, else /var/log/agt/agtd.log: where the agtd `agt up` starts writes. */
const char *agt_local_log_file(void);

/* Stop the agtd answering on the target's socket: SIGTERM (agtd exits; its running jails
 * go on under their keepers, and the next agtd finds them), then wait at most timeout_s
 * for it to be gone.  *pid: its pid, 0 when none answered (not an error); *running: how
 * many of its jails were running. */
int agt_local_agtd_stop(struct agt_ctx *c, unsigned timeout_s, long *pid, long *running,
                        agt_error_t *err);

/* Remove a directory tree without crossing into other filesystems; *bytes: what its
 * files held (allocated blocks). */
int agt_local_rm_tree(const char *dir, uint64_t *bytes, agt_error_t *err);

#endif
