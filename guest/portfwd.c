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

#include "daemon.h"
#include "jail.h"
#include "server.h"
#include "xalloc.h"

#define RELAY_HIGH (1u << 20)

struct agt_relay_s {
  struct agt_client_s *client; /* NULL once the client is gone */
  uv_tcp_t sock;               /* the jail's side */
  uv_connect_t connect_req;
  uint64_t id;
  unsigned port;
  char *name;
  int connected, closing, paused;
};

static void relay_closed(uv_handle_t *h)
{
  struct agt_relay_s *r = h->data;

  free(r->name);
  free(r);
}

static void relay_shutdown(struct agt_relay_s *r)
{
  struct agt_client_s *c = r->client;

  if (r->closing)
    return;
  r->closing = 1;
  r->client = NULL;
  if (c) {
    c->relay = NULL;
    agt_client_finish(c);
  }
  uv_close((uv_handle_t *)&r->sock, relay_closed);
}

void agt_relay_close(struct agt_relay_s *r)
{
  if (r->client)
    r->client->relay = NULL;
  r->client = NULL;
  relay_shutdown(r);
}

static void jail_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct agt_relay_s *r = s->data;

  if (n < 0) {
    relay_shutdown(r);
    return;
  }
  if (n == 0 || r->client == NULL)
    return;
  agt_client_send_raw(r->client, buf->base, (size_t)n);
  if (r->client && r->client->out_queued > RELAY_HIGH) {
    uv_read_stop(s);
    r->paused = 1;
  }
}

void agt_relay_drained(struct agt_relay_s *r)
{
  if (r->paused && !r->closing && r->client && r->client->out_queued < RELAY_HIGH / 2) {
    r->paused = 0;
    uv_read_start((uv_stream_t *)&r->sock, agtd_read_buffer, jail_read);
  }
}

struct relay_write {
  uv_write_t req;
  char *data;
};

static void to_jail_done(uv_write_t *w, int status)
{
  struct relay_write *rw = (struct relay_write *)w;

  (void)status;
  free(rw->data);
  free(rw);
}

void agt_relay_from_client(struct agt_relay_s *r, const char *data, size_t len)
{
  struct relay_write *rw;
  uv_buf_t b;

  if (r->closing || len == 0)
    return;
  rw = xzalloc(sizeof *rw);
  rw->data = xmalloc(len);
  memcpy(rw->data, data, len);
  b = uv_buf_init(rw->data, (unsigned)len);
  if (uv_write(&rw->req, (uv_stream_t *)&r->sock, &b, 1, to_jail_done) < 0) {
    free(rw->data);
    free(rw);
    relay_shutdown(r);
  }
}

static void connected(uv_connect_t *req, int status)
{
  struct agt_relay_s *r = req->data;
  json_t *reply;

  if (r->client == NULL) {
    relay_shutdown(r);
    return;
  }
  if (status < 0) {
    agt_error_t err = NULL;
    struct agt_client_s *c = r->client;
    agt_error_kind(&err, AGT_E_STATE, "jail '%s' has nothing listening on port %u: %s", r->name,
                   r->port, uv_strerror(status));
    c->relay = NULL;
    r->client = NULL;
    agt_reply_error(c, r->id, err);
    agt_error_release(&err);
    agt_client_resume(c);
    relay_shutdown(r);
    return;
  }
  r->connected = 1;
  reply = json_pack("{s:s, s:i, s:b}", "name", r->name, "port", (int)r->port, "connected", 1);
  agt_reply(r->client, r->id, reply);
  json_decref(reply);
  agt_client_go_raw(r->client); /* from here on, raw bytes both ways */
  uv_read_start((uv_stream_t *)&r->sock, agtd_read_buffer, jail_read);
}

int agt_portfwd_open(struct agt_jail_s *j, struct agt_client_s *c, uint64_t id, unsigned port,
                     agt_error_t *err)
{
  struct agt_relay_s *r;
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
  if (setns(j->d->netns.home_fd, CLONE_NEWNET) < 0) {
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
  uv_tcp_init(j->d->loop, &r->sock);
  r->sock.data = r;
  r->connect_req.data = r;
  c->relay = r;
  agt_client_hold(c);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (uv_tcp_open(&r->sock, fd) < 0 ||
      uv_tcp_connect(&r->connect_req, &r->sock, (struct sockaddr *)&sa, connected) < 0) {
    c->relay = NULL;
    r->client = NULL;
    agt_client_resume(c);
    relay_shutdown(r);
    return agt_error_kind(err, AGT_E_INTERNAL, "connect to port %u in jail '%s'", port, j->name);
  }
  return 0;
}
