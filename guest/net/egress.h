/* A jail's way out: the egress proxy agtd serves on the jail's own loopback.
 *
 * Network modes (per jail):
 *   none   loopback only
 *   allow  loopback, plus an HTTP proxy at 127.0.0.1:3128 inside the jail's network
 *          namespace, served by agtd from outside it: CONNECT and plain-HTTP requests to
 *          hosts on the jail's allowlist are relayed; everything else gets 403 with a reason
 *   open   the guest's own network (no network namespace), for a user who asks by name
 *
 * agtd resolves names itself (the jail has no DNS), refuses loopback, private, link-local,
 * multicast and metadata addresses unless the allowlist names that address literally, and
 * writes every decision to the jail's network log (net.log, one JSON object a line). */
#ifndef AGT_EGRESS_H
#define AGT_EGRESS_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "error.h"

#define AGT_EGRESS_PORT 3128
#define AGT_EGRESS_ALLOW_MAX 256
#define AGT_EGRESS_DEFAULT_CONNS 64
#define AGT_EGRESS_DEFAULT_IDLE_MS (5 * 60 * 1000)

enum agt_net_mode { AGT_NET_NONE, AGT_NET_ALLOW, AGT_NET_OPEN };

struct agt_allow {
  char *host;    /* lowercase name, "*.suffix" wildcard, or an IP literal */
  uint16_t port; /* 0: any port */
  int wildcard;
  int literal; /* an IP address: private ranges are allowed only this way */
};

struct agt_net_policy {
  enum agt_net_mode mode;
  struct agt_allow *allow;
  size_t nallow;
  unsigned max_conns;
  uint64_t idle_ms;
};

struct agt_egress_s;
typedef struct agt_egress_s agt_egress_t;

/* Policy: parse {"mode": "...", "allow": ["host[:port]", ...], "max_conns": N, "idle_ms": N}
 * (absent: mode allow with an empty list). */
int agt_net_policy_from_json(json_t *obj, struct agt_net_policy *p, agt_error_t *err);
json_t *agt_net_policy_to_json(const struct agt_net_policy *p);
void agt_net_policy_release(struct agt_net_policy *p);
const char *agt_net_mode_name(enum agt_net_mode m);
/* The policy's decision for host:port before resolution (NULL: allowed) and for an
 * address after it.  Exposed for the unit tests. */
const char *agt_net_check_host(const struct agt_net_policy *p, const char *host, uint16_t port);
const char *agt_net_check_addr(const struct agt_net_policy *p, const struct sockaddr *sa,
                               const char *host, uint16_t port);

/* Serve the proxy on listen_fd (a listening TCP socket inside the jail's namespace, which
 * this takes).  Decisions go to log_path.  Returns NULL with *err on failure. */
agt_egress_t *agt_egress_start(uv_loop_t *loop, const char *jail, const struct agt_net_policy *p,
                               int listen_fd, const char *log_path, agt_error_t *err);
/* Close the listener and every connection; frees itself when all handles are closed. */
void agt_egress_stop(agt_egress_t *e);
/* How many connections this proxy refused by the policy (each one a "blocked" line of its
 * log) since it started; 0 for NULL. */
uint64_t agt_egress_blocked(const agt_egress_t *e);

/* How many connections the network log at path (net.log, what `agt jail net` reads) says
 * were refused by the policy (decision "blocked"); 0 when there is no log.  It reads the
 * whole file (rotation keeps it under 4 MiB): agtd counts a jail's once, when it loads the
 * jail, and counts in memory from then on (agt_egress_blocked). */
uint64_t agt_netlog_blocked(const char *path);

/* A listening socket on 127.0.0.1:AGT_EGRESS_PORT inside the network namespace netns_fd:
 * the calling thread enters it, makes the socket and returns to home_fd. */
int agt_egress_listen_in(int netns_fd, int home_fd, agt_error_t *err);

#endif
