/* jail.exec: run another command inside a running jail (its namespaces, cgroup, user,
 * rlimits, Landlock rules and seccomp filter).  The requesting connection becomes a stream
 * of the command's output ({"out": base64}) ending with {"exit": {"exit_code": N}}; closing
 * the connection kills the command.  With `stdin` the client's {"in"} frames are its stdin
 * ({"eof"} closes it); with `tty` it runs on a terminal of the jail's devpts, which {"in"}
 * and {"resize"} reach; {"detach"} leaves it running, its output dropped. */
#ifndef AGT_JAIL_EXEC_H
#define AGT_JAIL_EXEC_H

#include <jansson.h>
#include <stdint.h>

#include "error.h"

struct agt_jail_s;
struct agt_client_s;

int agt_jail_exec(struct agt_jail_s *j, struct agt_client_s *c, uint64_t id, json_t *params,
                  agt_error_t *err);

#endif
