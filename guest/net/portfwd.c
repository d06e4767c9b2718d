#include "portfwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "relay.h"
#include "server.h"
#include "xalloc.h"

struct agt_portfwd_s {
  struct agt_client_s *client; /* NULL once the client is gone */
  uv_tcp_t sock;               /* the jail's side */
  uv_connect_t connect_req;
  agt_relay_t relay; /* side 0 the client's connection, side 1 the jail's port */
  uint64_t id;
  unsigned port;
  char *name;
  int closing;
};

static void sock_closed(uv_handle_t *h)
{
  struct agt_portfwd_s *p = h->data;

  free(p->name);
  free(p);
}

/* Close the jail's side (the client's connection is closed by whoever calls this). */
static void close_sock(struct agt_portfwd_s *p)
{
  if (p->closing)
    return;
  p->closing = 1;
  agt_relay_stop(&p->relay);
  p->sock.data = p; /* the relay had it */
  uv_close((uv_handle_t *)&p->sock, sock_closed);
}

static void portfwd_close(struct agt_portfwd_s *p)
{
  if (p->client)
    agt_client_set_mode(p->client, NULL, NULL);
  p->client = NULL;
  close_sock(p);
}

static void mode_gone(void *data)
{
  portfwd_close(data);
}

/* The client's connection is going away: close the jail's side. */
static const struct agt_client_mode portfwd_mode = {
    .name = "port",
    .gone = mode_gone,
};

/* Both directions ended (each side half-closed after the other's last byte), or one failed:
 * close both. */
static void relay_done(agt_relay_t *r, int status)
{
  struct agt_portfwd_s *p = r->data;
  struct agt_client_s *c = p->client;

  if (status < 0)
    agt_log_info("jail '%s' port %u: relay ended: %s", p->name, p->port, uv_strerror(status));
  portfwd_close(p);
  if (c)
    agt_client_close(c);
}

static void connected(uv_connect_t *req, int status)
{
  struct agt_portfwd_s *p = req->data;
  struct agt_client_s *c = p->client;
  char *pending;
  size_t len;
  json_t *reply;
  int rc;

  if (c == NULL) {
    close_sock(p);
    return;
  }
  if (status < 0) {
    agt_error_t err = NULL;
    agt_error_kind(&err, AGT_E_STATE, "jail '%s' has nothing listening on port %u: %s", p->name,
                   p->port, uv_strerror(status));
    portfwd_close(p);
    agt_reply_error(c, p->id, err);
    agt_error_release(&err);
    agt_client_resume(c);
    return;
  }
  reply = json_pack("{s:s, s:i, s:b}", "name", p->name, "port", (int)p->port, "connected", 1);
  agt_reply(c, p->id, reply);
  json_decref(reply);
  /* from here on, raw bytes both ways: the reply is queued ahead of them */
  agt_client_go_raw(c, &pending, &len);
  agt_relay_init(&p->relay, (uv_stream_t *)&c->pipe, (uv_stream_t *)&p->sock, relay_done, p);
  rc = agt_relay_write(&p->relay, 1, pending, len);
  if (rc < 0) {
    relay_done(&p->relay, rc);
    return;
  }
  agt_relay_start(&p->relay);
}

int agt_portfwd_open(const struct agt_portfwd_target *j, struct agt_client_s *c, uint64_t id,
                     unsigned port, agt_error_t *err)
{
  struct agt_portfwd_s *r;
  struct sockaddr_in sa;
  char path[64];
  int nsfd, fd, e = 0;

  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)j->pid);
  nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0)
    return agt_error_make(err, errno, "open the network namespace of jail '%s'", j->name);
  /* The socket belongs to the namespace it is made in: make it inside the jail's. */
  if (setns(nsfd, CLONE_NEWNET) < 0) {
    e = errno;
    close(nsfd);
    return agt_error_make(err, e, "enter the network namespace of jail '%s'", j->name);
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    e = errno;
  if (setns(j->home_netns, CLONE_NEWNET) < 0) {
    fprintf(stderr, "agtd: cannot return to agtd's network namespace: %s\n", strerror(errno));
    abort();
  }
  close(nsfd);
  if (fd < 0)
    return agt_error_make(err, e, "socket in jail '%s'", j->name);
  r = xzalloc(sizeof *r);
  r->client = c;
  r->id = id;
  r->port = port;
  r->name = xstrdup(j->name);
  uv_tcp_init(j->loop, &r->sock);
  r->sock.data = r;
  r->connect_req.data = r;
  agt_client_set_mode(c, &portfwd_mode, r);
  agt_client_hold(c);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (uv_tcp_open(&r->sock, fd) < 0 ||
      uv_tcp_connect(&r->connect_req, &r->sock, (struct sockaddr *)&sa, connected) < 0) {
    portfwd_close(r);
    agt_client_resume(c);
    return agt_error_kind(err, AGT_E_INTERNAL, "connect to port %u in jail '%s'", port, j->name);
  }
  return 0;
}
