/* A jail's way out in network mode open: a network namespace of its own, joined to the
 * guest's bridge agt0 by a veth pair, with an address of agt0's network and a default route
 * through it.  What such a jail may reach (the internet, not the guest, its loopback, the
 * private, link-local and metadata addresses or other jails) is the machine's firewall, set
 * up with the bridge by lima/provision/machine.sh: agtd changes nothing machine-wide, it
 * only adds and configures each jail's veth pair, which the kernel removes with the jail's
 * namespace (docs/SECURITY.md, Network mode open). */
#ifndef AGT_JAIL_NET_H
#define AGT_JAIL_NET_H

#include <stdint.h>

#include "error.h"

#define AGT_OPEN_BRIDGE "agt0"
/* The resolvers machine.sh found for open jails: their /etc/resolv.conf. */
#define AGT_OPEN_RESOLV "/run/agt-open/resolv.conf"

struct agt_open_net {
  int bridge_index;
  uint32_t bridge_addr, mask; /* host byte order */
  char resolv[1024];          /* AGT_OPEN_RESOLV's text */
};

/* Whether the machine is set up for open jails (the bridge with an IPv4 address, IPv4
 * forwarding, the nftables tables `inet agt` and `ip agt_nat`, the resolvers); when not,
 * err says what is missing and what to run.  on may be NULL. */
int agt_open_net_check(struct agt_open_net *on, agt_error_t *err);

/* Give the network namespace netns_fd (a jail's, not yet running anything of the jail) its
 * way out: a veth pair whose guest end is an isolated port of agt0 and whose other end is
 * the namespace's eth0, an address and a default route.  home_fd is agtd's own network
 * namespace, to return to. */
int agt_jail_net_open(const struct agt_open_net *on, int netns_fd, int home_fd, agt_error_t *err);

#endif
