#include "port_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdrelay.h"
#include "rpc.h"
#include "xalloc.h"

struct relay {
  struct agt_fdrelay fr; /* fd 0: the connection accepted here; fd 1: the one to agtd */
  struct relay *next;
};

static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig)
{
  int saved = errno;
  unsigned char b = (unsigned char)sig;

  if (stop_pipe[1] >= 0 && write(stop_pipe[1], &b, 1) < 0) {
    /* a byte is waiting already */
  }
  errno = saved;
}

static void set_flags(int fd)
{
  int fl = fcntl(fd, F_GETFL);

  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static int listen_on(unsigned port, unsigned *got, agt_error_t *err)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd, one = 1;

  fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return agt_error_make(err, errno, "socket");
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* this machine's loopback only */
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
    int e = errno;
    close(fd);
    return agt_error_make(err, e, "listen on 127.0.0.1:%u", port);
  }
  set_flags(fd);
  *got = ntohs(sa.sin_port);
  return fd;
}

/* A connection accepted: its own connection to agtd, jail.port on it, then a relay. */
static struct relay *start_relay(struct agt_portfwd *p, int conn)
{
  agt_rpc_t rpc;
  agt_error_t err = NULL;
  json_t *res = NULL;
  json_t *params = json_pack("{s:s, s:I}", "name", p->jail, "port", (json_int_t)p->guest_port);
  struct relay *r;
  int rc;

  memset(&rpc, 0, sizeof rpc);
  rpc.fd = -1;
  rc = p->open(p->open_ctx, &rpc, &err);
  if (rc == 0)
    rc = agt_rpc_call(&rpc, "jail.port", params, &res, &err);
  json_decref(params);
  if (rc < 0) {
    fprintf(stderr, "%s: port %u of jail '%s': %s\n", p->prog, p->guest_port, p->jail, err->msg);
    agt_error_release(&err);
    agt_rpc_close(&rpc);
    close(conn);
    return NULL;
  }
  json_decref(res);
  r = xzalloc(sizeof *r);
  agt_fdrelay_init(&r->fr, conn, steal_fd(&rpc.fd));
  /* bytes that came right behind the reply are the jail's already */
  agt_fdrelay_preload(&r->fr, 1, rpc.dec.buf, rpc.dec.len);
  agt_rpc_close(&rpc);
  return r;
}

static void relay_free(struct relay *r)
{
  agt_fdrelay_release(&r->fr);
  free(r);
}

/* The jail's end (or agtd's going away) ends the forwarding: a connection of its own waits
 * for it with jail.wait. */
static int watch_jail(struct agt_portfwd *p, agt_rpc_t *watch, agt_error_t *err)
{
  json_t *params = json_pack("{s:s}", "name", p->jail);
  uint64_t id;
  int rc = p->open(p->open_ctx, watch, err);

  if (rc == 0)
    rc = agt_rpc_send(watch, "jail.wait", params, &id, err);
  json_decref(params);
  if (rc < 0)
    agt_rpc_close(watch);
  return rc;
}

static int jail_ended(struct agt_portfwd *p, agt_rpc_t *watch, agt_error_t *err)
{
  json_t *res;

  if (agt_rpc_await(watch, watch->next_id, &res, err) < 0)
    return agt_error_wrap(err, "forwarding to jail '%s' stopped", p->jail);
  json_decref(res);
  if (!p->quiet)
    fprintf(stderr, "%s: jail '%s' ended: forwarding stopped\n", p->prog, p->jail);
  return 0;
}

int agt_portfwd_run(struct agt_portfwd *p, agt_error_t *err)
{
  static const int sigs[] = {SIGINT, SIGTERM};
  struct sigaction sa, old[2];
  struct relay *relays = NULL;
  struct pollfd *pf = NULL;
  struct relay **pr = NULL;
  size_t cap = 0;
  unsigned port = 0;
  int lfd, ret = 0;
  agt_rpc_t watch;

  lfd = listen_on(p->local_port, &port, err);
  if (lfd < 0)
    return -1;
  if (watch_jail(p, &watch, err) < 0) {
    close(lfd);
    return -1;
  }
  if (pipe(stop_pipe) < 0) {
    close(lfd);
    agt_rpc_close(&watch);
    return agt_error_make(err, errno, "pipe");
  }
  set_flags(stop_pipe[0]);
  set_flags(stop_pipe[1]);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++)
    sigaction(sigs[i], &sa, &old[i]);
  if (p->listening)
    p->listening(p->ctx, port);

  for (;;) {
    size_t n = 0, nr = 0;

    for (struct relay **pp = &relays; *pp;) {
      struct relay *r = *pp;
      agt_fdrelay_pump(&r->fr);
      if (agt_fdrelay_finished(&r->fr)) {
        *pp = r->next;
        relay_free(r);
        continue;
      }
      nr++;
      pp = &r->next;
    }
    if (2 * nr + 3 > cap) {
      cap = 2 * nr + 16;
      pf = xrealloc(pf, cap * sizeof *pf);
      pr = xrealloc(pr, cap * sizeof *pr);
    }
    pf[n].fd = stop_pipe[0];
    pf[n].events = POLLIN;
    pr[n++] = NULL;
    pf[n].fd = lfd;
    pf[n].events = POLLIN;
    pr[n++] = NULL;
    pf[n].fd = watch.fd;
    pf[n].events = POLLIN;
    pr[n++] = NULL;
    for (struct relay *r = relays; r; r = r->next)
      for (int i = 0; i < 2; i++) {
        short ev = agt_fdrelay_events(&r->fr, i);
        if (ev == 0)
          continue; /* a side that ended and has nothing to take: not watched */
        pf[n].fd = r->fr.fd[i];
        pf[n].events = ev;
        pr[n++] = r;
      }
    for (size_t i = 0; i < n; i++)
      pf[i].revents = 0;
    if (poll(pf, (nfds_t)n, -1) < 0) {
      if (errno == EINTR)
        continue;
      ret = agt_error_make(err, errno, "poll");
      break;
    }
    if (pf[0].revents)
      break; /* SIGINT or SIGTERM */
    if (pf[2].revents) {
      ret = jail_ended(p, &watch, err);
      break;
    }
    for (size_t i = 3; i < n; i++) {
      struct relay *r = pr[i];
      if (pf[i].revents)
        agt_fdrelay_ready(&r->fr, r->fr.fd[0] == pf[i].fd ? 0 : 1, pf[i].revents);
    }
    if (pf[1].revents) {
      int conn = accept(lfd, NULL, NULL);
      if (conn < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
          continue;
        ret = agt_error_make(err, errno, "accept on 127.0.0.1:%u", port);
        break;
      }
      fcntl(conn, F_SETFD, FD_CLOEXEC);
      {
        struct relay *r = start_relay(p, conn);
        if (r) {
          r->next = relays;
          relays = r;
        }
      }
    }
  }
  while (relays) {
    struct relay *r = relays;
    relays = r->next;
    relay_free(r);
  }
  free(pf);
  free(pr);
  close(lfd);
  agt_rpc_close(&watch);
  for (int i = 0; i < 2; i++)
    sigaction(sigs[i], &old[i], NULL);
  close(stop_pipe[0]);
  close(stop_pipe[1]);
  stop_pipe[0] = stop_pipe[1] = -1;
  return ret;
}
