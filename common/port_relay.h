/* The port relay of agt jail port and agtd ctl jail port: a listening socket on this
 * machine's 127.0.0.1, and for each connection accepted there a connection of its own to
 * agtd (a new SSH channel, or a new connection to the local socket: the caller's `open`)
 * that asks jail.port and then carries raw bytes both ways. */
#ifndef AGT_PORT_RELAY_H
#define AGT_PORT_RELAY_H

#include "error.h"
#include "rpc.h"

struct agt_portfwd {
  /* a new connection to agtd, for each connection accepted and for the jail's end */
  int (*open)(void *ctx, agt_rpc_t *rpc, agt_error_t *err);
  void *open_ctx;
  const char *prog; /* who says what happened on stderr: "agt", "agtd ctl" */
  const char *jail;
  unsigned guest_port;
  unsigned local_port; /* 0: any free port */
  int quiet;           /* no line per refused connection on stderr */
  /* called once the socket listens, with the port it got */
  void (*listening)(void *ctx, unsigned port);
  void *ctx;
};

/* Listen and relay until SIGINT or SIGTERM or the jail's end (then 0), or a failure of the
 * listening socket or of the connection to agtd. */
int agt_portfwd_run(struct agt_portfwd *p, agt_error_t *err);

#endif
