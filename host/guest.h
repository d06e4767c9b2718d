/* The machine agtd runs on (the "guest"), reached beyond agtd's protocol: a shell script
 * run there as root, a long-running process there whose life agt controls, and more
 * connections to agtd (a jail.exec stream needs one of its own).
 *
 *   target   the guest is              a script runs through
 *   local    this machine              /bin/sh
 *   lima     the Lima VM               limactl shell --workdir=/ NAME sh -c ...
 *   ssh://   that host                 the system's ssh, with agt's known_hosts and key
 *
 * Scripts run as root: directly when the login user is root, else through `sudo -n`
 * (Lima's user has passwordless sudo). `agt verify` and `agt doctor` use these. */
#ifndef AGT_HOST_GUEST_H
#define AGT_HOST_GUEST_H

#include <stddef.h>
#include <sys/types.h>

#include "agt.h"
#include "error.h"
#include "rpc.h"

/* Run `sh -c SCRIPT` on the guest as root.  Returns 0 when it ran (whatever its status,
 * in *exit_code), with its stdout in *out (NUL-terminated, caller frees) and its stderr in
 * *errout when errout is not NULL; -1 when it could not be run at all. */
int agt_guest_sh(struct agt_ctx *c, const char *script, char **out, char **errout, int *exit_code,
                 agt_error_t *err);

/* A process on the guest with its stdin and stdout (stderr merged) piped to agt. */
struct agt_guest_proc {
  pid_t pid; /* the local end: sh, limactl or ssh */
  int in_fd, out_fd;
  char buf[4096];
  size_t len;
};

/* Start `sh -c SCRIPT` on the guest (as the login user, not root).  The script must end
 * when its stdin ends (e.g. `... & cat >/dev/null; kill $!`): agt_guest_proc_end closes it,
 * and so does agt's death. */
int agt_guest_spawn(struct agt_ctx *c, const char *script, struct agt_guest_proc *p,
                    agt_error_t *err);
/* The next line of its output, without the newline, waiting at most timeout_ms.  Returns
 * 1 with a line, 0 at the end of its output, -1 on a timeout or an error. */
int agt_guest_proc_line(struct agt_guest_proc *p, char *line, size_t len, int timeout_ms,
                        agt_error_t *err);
/* Close its stdin and reap it (killing the local end after a few seconds). */
void agt_guest_proc_end(struct agt_guest_proc *p);

/* A new connection to agtd on the target, hello exchanged; agt_rpc_close() ends it.
 * Over SSH it is another channel of the target's connection. */
int agt_guest_rpc(struct agt_ctx *c, agt_rpc_t *r, agt_error_t *err);

/* 'it'\''s': one shell word. */
char *agt_sh_quote(const char *s);

#endif
