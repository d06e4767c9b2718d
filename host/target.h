/* Where agtd runs, and the connection to it.
 *
 *   lima:NAME               a Lima VM: state, SSH port and user from `limactl list --json`,
 *                           Lima's key $LIMA_HOME/_config/user, then SSH to 127.0.0.1
 *   ssh://USER@HOST[:PORT]  any Linux host running agtd; its host key must be in
 *                           known_hosts
 *   local                   this machine: agtd's unix socket, no SSH
 *
 * The connection is opened on the first call and kept for the next ones. */
#ifndef AGT_HOST_TARGET_H
#define AGT_HOST_TARGET_H

#include <jansson.h>

#include "config.h"
#include "error.h"
#include "lima.h"
#include "rpc.h"
#include "ssh.h"

enum agt_target_kind {
  AGT_TARGET_LIMA,
  AGT_TARGET_SSH,
  AGT_TARGET_LOCAL,
};

struct agt_target {
  enum agt_target_kind kind;
  char *spec;     /* as written */
  char *instance; /* lima */
  char *user;     /* ssh */
  char *host;     /* ssh */
  unsigned port;  /* ssh (22 when not given) */
  /* the connection */
  const struct agt_config *cfg;
  struct agt_lima *lima; /* borrowed; needed for lima targets */
  agt_ssh_t *ssh;        /* a connection of this process's own (ssh.persist 0) */
  char *kept_peer;       /* else through agt's connection keeper (mux.h): its "user@host:port" */
  char *dropped;         /* agt_target_dropped's answer */
  agt_rpc_t rpc;
  int connected;
  int quiet; /* no "reconnecting" notes on stderr */
};

/* Parse a target string.  A bare name is taken as lima:NAME. */
int agt_target_parse(const char *spec, struct agt_target *t, agt_error_t *err);
void agt_target_release(struct agt_target *t);

/* The target to use when none is configured: lima:<vm.name> when limactl is found, else
 * local on Linux.  *why says how it was chosen. */
int agt_target_default(const struct agt_config *cfg, char **spec, const char **why,
                       agt_error_t *err);

/* Connect (if not yet) and exchange hello. */
int agt_target_connect(struct agt_target *t, agt_error_t *err);
/* One request.  A request that changes nothing (hello, *.ls, *.inspect, jail.logs,
 * daemon.status) is sent again once over a new connection when the connection dropped;
 * other requests are not, since agtd may have acted on them. */
int agt_target_call(struct agt_target *t, const char *method, json_t *params, json_t **result,
                    agt_error_t *err);
void agt_target_disconnect(struct agt_target *t);
/* One more connection to agtd, hello exchanged: a new channel of the same SSH connection
 * (made again when it dropped), or a new connection to the local socket.  For streams
 * and forwarded ports, which take a connection each.  Release it with agt_rpc_close. */
int agt_target_open(struct agt_target *t, agt_rpc_t *rpc, agt_error_t *err);

/* Why the SSH connection under this target's connections dropped (its own, or the
 * keeper's), or NULL when it did not. */
const char *agt_target_dropped(struct agt_target *t);

/* "lima:agt_agent_sandbox (root@127.0.0.1:50022)" and the like, for messages. */
const char *agt_target_describe(struct agt_target *t, char *buf, size_t len);

#endif
