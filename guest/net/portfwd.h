/* Port forwarding into a jail: jail.port connects agtd to a TCP port on the jail's own
 * loopback (a socket made inside the jail's network namespace), and the requesting
 * connection then carries the raw bytes both ways (relay.h): an end of stream from either
 * side is passed on as a half-close, and both are closed once both directions ended. */
#ifndef AGT_PORTFWD_H
#define AGT_PORTFWD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "error.h"

struct agt_client_s;

/* The jail a port is forwarded into, as much as the forwarding needs of it. */
struct agt_portfwd_target {
  uv_loop_t *loop;
  const char *name; /* the jail's, for errors and the log */
  pid_t pid;        /* its init: the network namespace is /proc/<pid>/ns/net */
  int home_netns;   /* agtd's own network namespace, to return to */
};

/* Connect to 127.0.0.1:port in the jail; on success answer request id on the client and
 * switch it to raw relaying; on failure answer with the error. */
int agt_portfwd_open(const struct agt_portfwd_target *j, struct agt_client_s *c, uint64_t id,
                     unsigned port, agt_error_t *err);

#endif
