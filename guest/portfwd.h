/* Port forwarding into a jail: jail.port connects agtd to a TCP port on the jail's own
 * loopback (a socket made inside the jail's network namespace), and the requesting
 * connection then carries the raw bytes both ways until either side closes. */
#ifndef AGT_PORTFWD_H
#define AGT_PORTFWD_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct agt_jail_s;
struct agt_client_s;
struct agt_relay_s;

/* Connect to 127.0.0.1:port in the jail; on success answer request id on the client and
 * switch it to raw relaying; on failure answer with the error. */
int agt_portfwd_open(struct agt_jail_s *j, struct agt_client_s *c, uint64_t id, unsigned port,
                     agt_error_t *err);
/* Raw bytes from the client, and its going away. */
void agt_relay_from_client(struct agt_relay_s *r, const char *data, size_t len);
void agt_relay_close(struct agt_relay_s *r);
/* The client's queue drained: resume reading the jail's side. */
void agt_relay_drained(struct agt_relay_s *r);

#endif
