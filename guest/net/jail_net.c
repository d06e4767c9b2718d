#include "jail_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define FIX                                                                                        \
  "as root, run lima/provision/machine.sh of agt's source tree (just machine), or in agt's "       \
  "VM: sudo systemctl restart agt-machine"

/* One netlink request, built in place: header, fixed part, attributes (nested ones too). */
struct nlreq {
  union {
    struct nlmsghdr h;
    char b[1024];
  } u;
};

static void nl_begin(struct nlreq *m, int type, int flags, const void *fixed, size_t len)
{
  memset(m, 0, sizeof *m);
  m->u.h.nlmsg_type = (uint16_t)type;
  m->u.h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags);
  m->u.h.nlmsg_len = NLMSG_LENGTH(len);
  memcpy(NLMSG_DATA(&m->u.h), fixed, len);
  m->u.h.nlmsg_len = NLMSG_ALIGN(m->u.h.nlmsg_len);
}

/* Attributes are small and few: the buffer is always large enough (checked all the same). */
static struct rtattr *nl_attr(struct nlreq *m, int type, const void *data, size_t len)
{
  struct rtattr *a = (struct rtattr *)(m->u.b + m->u.h.nlmsg_len);

  if (m->u.h.nlmsg_len + RTA_SPACE(len) > sizeof m->u.b)
    abort();
  a->rta_type = (unsigned short)type;
  a->rta_len = (unsigned short)RTA_LENGTH(len);
  if (len)
    memcpy(RTA_DATA(a), data, len);
  m->u.h.nlmsg_len += RTA_SPACE(len);
  return a;
}

static void nl_str(struct nlreq *m, int type, const char *s)
{
  nl_attr(m, type, s, strlen(s) + 1);
}

static void nl_end(struct nlreq *m, struct rtattr *nest)
{
  nest->rta_len = (unsigned short)(m->u.b + m->u.h.nlmsg_len - (char *)nest);
}

/* Send and wait for the answer: 0, or -errno (messages before the acknowledgement, such as
 * the table a GET finds, are read and passed over). */
static int nl_talk(int fd, struct nlreq *m)
{
  char buf[8192];
  struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
  static uint32_t seq;

  m->u.h.nlmsg_seq = ++seq;
  if (sendto(fd, m->u.b, m->u.h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof sa) < 0)
    return -errno;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != m->u.h.nlmsg_seq)
        continue;
      if (h->nlmsg_type == NLMSG_ERROR)
        return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
      if (h->nlmsg_type == NLMSG_DONE)
        return 0;
    }
  }
}

static int nl_socket(int proto)
{
  return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
}

/* Whether nftables has the table (family, name): 1, 0, or -errno. */
static int nft_has_table(int family, const char *name)
{
  struct nlreq m;
  struct nfgenmsg g = {.nfgen_family = (uint8_t)family, .version = NFNETLINK_V0};
  int fd = nl_socket(NETLINK_NETFILTER), r;

  if (fd < 0)
    return -errno;
  nl_begin(&m, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE, 0, &g, sizeof g);
  nl_str(&m, NFTA_TABLE_NAME, name);
  r = nl_talk(fd, &m);
  close(fd);
  return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

static int read_small(const char *path, char *buf, size_t size)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return (int)n;
}

int agt_open_net_check(struct agt_open_net *on, agt_error_t *err)
{
  struct agt_open_net local;
  struct ifreq ifr;
  char fwd[8];
  int s, r;

  if (on == NULL)
    on = &local;
  memset(on, 0, sizeof *on);
  on->bridge_index = (int)if_nametoindex(AGT_OPEN_BRIDGE);
  if (on->bridge_index == 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "network mode open needs the machine set up for it, and it has no "
                          "bridge " AGT_OPEN_BRIDGE ": " FIX);
  s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return agt_error_make(err, errno, "socket");
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, AGT_OPEN_BRIDGE, sizeof AGT_OPEN_BRIDGE);
  if (ioctl(s, SIOCGIFADDR, &ifr) == 0)
    on->bridge_addr = ntohl(((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr);
  if (ioctl(s, SIOCGIFNETMASK, &ifr) == 0)
    on->mask = ntohl(((struct sockaddr_in *)&ifr.ifr_netmask)->sin_addr.s_addr);
  close(s);
  if (on->bridge_addr == 0 || on->mask == 0 || (~on->mask & (~on->mask + 1)) != 0 || ~on->mask < 3)
    return agt_error_kind(err, AGT_E_STATE,
                          "network mode open needs the machine set up for it, and its "
                          "bridge " AGT_OPEN_BRIDGE " has no IPv4 network: " FIX);
  if (read_small("/proc/sys/net/ipv4/ip_forward", fwd, sizeof fwd) < 0 || fwd[0] != '1')
    return agt_error_kind(err, AGT_E_STATE,
                          "network mode open needs the machine set up for it, and IPv4 "
                          "forwarding is off (net.ipv4.ip_forward): " FIX);
  r = nft_has_table(NFPROTO_INET, "agt");
  if (r == 1)
    r = nft_has_table(NFPROTO_IPV4, "agt_nat");
  if (r < 0)
    return agt_error_make(err, -r,
                          "network mode open needs the machine's firewall, and nftables "
                          "cannot be asked for it");
  if (r == 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "network mode open needs the machine set up for it, and its "
                          "firewall (the nftables tables 'inet agt' and 'ip agt_nat') is "
                          "missing: " FIX);
  if (read_small(AGT_OPEN_RESOLV, on->resolv, sizeof on->resolv) < 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "network mode open needs the machine set up for it, and the "
                          "resolvers for jails (" AGT_OPEN_RESOLV ") are missing: " FIX);
  return 0;
}

/* The guest's end: agtj<N>, N the jail's host number in agt0's network.  The name is the
 * lock on the address: creating a veth whose name exists fails (EEXIST), even between two
 * agtds, and the kernel removes the pair with the jail's namespace. */
static int add_veth(int rt, const struct agt_open_net *on, int netns_fd, char *name, uint32_t *addr,
                    agt_error_t *err)
{
  static uint32_t next;
  uint32_t hosts = ~on->mask, net = on->bridge_addr & on->mask;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};

  for (uint32_t tries = 0; tries < hosts && tries < 1000000; tries++) {
    uint32_t n = 2 + (next++ % (hosts - 2)); /* 2 .. hosts-1: not the net, 1 nor broadcast */
    struct nlreq m;
    struct rtattr *info, *data, *peer;
    int r;

    if ((net | n) == on->bridge_addr)
      continue;
    snprintf(name, IFNAMSIZ, "agtj%u", (unsigned)n);
    nl_begin(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof ifi);
    nl_str(&m, IFLA_IFNAME, name);
    nl_attr(&m, IFLA_MASTER, &on->bridge_index, sizeof on->bridge_index);
    info = nl_attr(&m, IFLA_LINKINFO, NULL, 0);
    nl_str(&m, IFLA_INFO_KIND, "veth");
    data = nl_attr(&m, IFLA_INFO_DATA, NULL, 0);
    peer = nl_attr(&m, VETH_INFO_PEER, &ifi, sizeof ifi);
    nl_str(&m, IFLA_IFNAME, "eth0");
    nl_attr(&m, IFLA_NET_NS_FD, &netns_fd, sizeof netns_fd);
    nl_end(&m, peer);
    nl_end(&m, data);
    nl_end(&m, info);
    r = nl_talk(rt, &m);
    if (r == -EEXIST)
      continue; /* taken (by a running jail, maybe of another agtd): the next one */
    if (r < 0)
      return agt_error_make(err, -r, "add the veth pair %s on " AGT_OPEN_BRIDGE, name);
    *addr = net | n;
    return 0;
  }
  return agt_error_kind(err, AGT_E_LIMIT, "no free address left on " AGT_OPEN_BRIDGE);
}

static int link_up(int rt, int index)
{
  struct ifinfomsg ifi = {
      .ifi_family = AF_UNSPEC, .ifi_index = index, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
  struct nlreq m;

  nl_begin(&m, RTM_NEWLINK, 0, &ifi, sizeof ifi);
  return nl_talk(rt, &m);
}

/* An isolated port of the bridge reaches the bridge (the way out), never another isolated
 * port (another jail). */
static int port_isolate(int rt, int index)
{
  struct ifinfomsg ifi = {.ifi_family = AF_BRIDGE, .ifi_index = index};
  struct rtattr *pi;
  struct nlreq m;
  uint8_t on = 1;

  nl_begin(&m, RTM_SETLINK, 0, &ifi, sizeof ifi);
  pi = nl_attr(&m, IFLA_PROTINFO | NLA_F_NESTED, NULL, 0);
  nl_attr(&m, IFLA_BRPORT_ISOLATED, &on, sizeof on);
  nl_end(&m, pi);
  return nl_talk(rt, &m);
}

static int add_route(int rt, int eth0, uint32_t dst, int dst_len, uint32_t gw)
{
  struct rtmsg rtm = {.rtm_family = AF_INET,
                      .rtm_dst_len = (unsigned char)dst_len,
                      .rtm_table = RT_TABLE_MAIN,
                      .rtm_protocol = RTPROT_BOOT,
                      .rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK,
                      .rtm_type = RTN_UNICAST};
  struct nlreq m;

  nl_begin(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rtm, sizeof rtm);
  if (dst_len)
    nl_attr(&m, RTA_DST, &dst, sizeof dst);
  if (gw)
    nl_attr(&m, RTA_GATEWAY, &gw, sizeof gw);
  nl_attr(&m, RTA_OIF, &eth0, sizeof eth0);
  return nl_talk(rt, &m);
}

/* The jail's side, over a netlink socket made in its namespace.  Its address is a /32 and
 * agt0's address its only neighbour: everything, another jail's address too, goes through
 * the guest's firewall (which refuses it at once) rather than to an ARP request that no
 * other port hears (an isolated port), which would fail only after seconds. */
static int configure_inside(int rt, int eth0, uint32_t addr, const struct agt_open_net *on,
                            agt_error_t *err)
{
  struct nlreq m;
  struct ifaddrmsg ifa = {.ifa_family = AF_INET, .ifa_prefixlen = 32, .ifa_index = (unsigned)eth0};
  uint32_t a = htonl(addr), gw = htonl(on->bridge_addr);
  int r;

  nl_begin(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof ifa);
  nl_attr(&m, IFA_LOCAL, &a, sizeof a);
  nl_attr(&m, IFA_ADDRESS, &a, sizeof a);
  r = nl_talk(rt, &m);
  if (r < 0)
    return agt_error_make(err, -r, "give the jail's eth0 its address");
  r = link_up(rt, eth0);
  if (r < 0)
    return agt_error_make(err, -r, "bring the jail's eth0 up");
  r = add_route(rt, eth0, gw, 32, 0);
  if (r == 0)
    r = add_route(rt, eth0, 0, 0, gw);
  if (r < 0)
    return agt_error_make(err, -r, "give the jail its routes");
  return 0;
}

int agt_jail_net_open(const struct agt_open_net *on, int netns_fd, int home_fd, agt_error_t *err)
{
  char name[IFNAMSIZ];
  uint32_t addr = 0;
  int rt = nl_socket(NETLINK_ROUTE), in = -1, eth0 = 0, r = -1, e = 0, host;

  if (rt < 0)
    return agt_error_make(err, errno, "netlink socket");
  if (add_veth(rt, on, netns_fd, name, &addr, err) < 0)
    goto out;
  host = (int)if_nametoindex(name);
  r = host == 0 ? -errno : port_isolate(rt, host);
  if (r == 0)
    r = link_up(rt, host);
  if (r < 0) {
    agt_error_make(err, -r, "set up %s on " AGT_OPEN_BRIDGE, name);
    goto out;
  }
  r = -1;
  /* A netlink socket belongs to the namespace it was made in, as does if_nametoindex's. */
  if (setns(netns_fd, CLONE_NEWNET) < 0) {
    agt_error_make(err, errno, "enter the jail's network namespace");
    goto out;
  }
  in = nl_socket(NETLINK_ROUTE);
  e = in < 0 ? errno : 0;
  eth0 = in < 0 ? 0 : (int)if_nametoindex("eth0");
  if (in >= 0 && eth0 == 0)
    e = errno;
  if (setns(home_fd, CLONE_NEWNET) < 0) {
    /* The loop thread must not stay in a jail's namespace. */
    fprintf(stderr, "agtd: cannot return to agtd's network namespace: %s\n", strerror(errno));
    abort();
  }
  if (e) {
    agt_error_make(err, e, "find the jail's eth0");
    goto out;
  }
  r = configure_inside(in, eth0, addr, on, err);
out:
  if (in >= 0)
    close(in);
  close(rt);
  if (r < 0)
    agt_error_wrap(err, "the jail's network (mode open)");
  return r;
}
