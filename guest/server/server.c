/* The unix socket, its connections and the method table. */
#include "server.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "log.h"
#include "readbuf.h"
#include "xalloc.h"

void agt_client_ref(agt_client_t *c)
{
  c->refs++;
}

static void client_free(agt_client_t *c)
{
  agt_decoder_release(&c->dec);
  free(c);
}

void agt_client_unref(agt_client_t *c)
{
  if (--c->refs == 0)
    client_free(c);
}

struct write_req {
  uv_write_t req;
  agt_client_t *client;
  size_t len;
  unsigned char *frame;
};

static void client_close(agt_client_t *c);

void agt_client_close(agt_client_t *c)
{
  client_close(c);
}

static void finish_cb(uv_shutdown_t *sd, int status)
{
  agt_client_t *c = sd->data;

  (void)status;
  free(sd);
  client_close(c);
  agt_client_unref(c);
}

void agt_client_finish(agt_client_t *c)
{
  uv_shutdown_t *sd;

  if (c->closed)
    return;
  sd = xzalloc(sizeof *sd);
  sd->data = c;
  agt_client_ref(c);
  if (uv_shutdown(sd, (uv_stream_t *)&c->pipe, finish_cb) < 0) {
    free(sd);
    client_close(c);
    agt_client_unref(c);
  }
}

static void write_cb(uv_write_t *w, int status)
{
  struct write_req *wr = (struct write_req *)w;
  agt_client_t *c = wr->client;

  c->out_queued -= wr->len;
  free(wr->frame);
  free(wr);
  if (status < 0 && !c->closed)
    client_close(c);
  else if (c->mode && c->mode->drained)
    c->mode->drained(c->mode_data);
  agt_client_unref(c);
}

static void send_msg(agt_client_t *c, json_t *msg)
{
  struct write_req *wr;
  agt_error_t err = NULL;
  unsigned char *frame;
  size_t len;
  uv_buf_t buf;

  if (c->closed)
    return;
  if (agt_frame_encode(msg, &frame, &len, &err) < 0) {
    /* Too large to send: say so instead (this always fits). */
    json_t *id = json_object_get(msg, "id");
    json_t *e = agt_msg_error(json_is_integer(id) ? (uint64_t)json_integer_value(id) : 0, err);
    agt_error_release(&err);
    if (agt_frame_encode(e, &frame, &len, &err) < 0) {
      json_decref(e);
      agt_error_release(&err);
      return;
    }
    json_decref(e);
  }
  if (c->out_queued + len > AGT_CLIENT_OUT_MAX + (c->mode ? c->mode->out_slack : 0)) {
    /* A client that does not read its replies is cut off rather than let grow. */
    free(frame);
    agt_log_warning("client not reading its replies: disconnected");
    client_close(c);
    return;
  }
  wr = xzalloc(sizeof *wr);
  wr->client = c;
  wr->len = len;
  wr->frame = frame;
  buf = uv_buf_init((char *)frame, (unsigned)len);
  c->out_queued += len;
  agt_client_ref(c);
  if (uv_write(&wr->req, (uv_stream_t *)&c->pipe, &buf, 1, write_cb) < 0) {
    c->out_queued -= len;
    free(frame);
    free(wr);
    agt_client_unref(c);
    client_close(c);
  }
}

void agt_client_send(agt_client_t *c, json_t *msg)
{
  send_msg(c, msg);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

void agt_client_set_mode(agt_client_t *c, const struct agt_client_mode *mode, void *data)
{
  c->mode = mode;
  c->mode_data = mode ? data : NULL;
}

void agt_client_hold(agt_client_t *c)
{
  uv_read_stop((uv_stream_t *)&c->pipe);
  c->held = 1;
  if (c->timers)
    uv_timer_stop(&c->frame_timer); /* resume looks again */
}

void agt_client_resume(agt_client_t *c)
{
  if (!c->held || c->closed)
    return;
  c->held = 0;
  uv_read_start((uv_stream_t *)&c->pipe, agt_read_buffer, read_cb);
  /* requests that arrived meanwhile wait in the decoder: a zero-length read runs them */
  read_cb((uv_stream_t *)&c->pipe, 0, &(uv_buf_t){.base = NULL, .len = 0});
}

void agt_client_go_raw(agt_client_t *c, char **pending, size_t *len)
{
  c->raw = 1;
  c->held = 0;
  if (c->timers)
    uv_timer_stop(&c->frame_timer); /* raw bytes have no frames */
  *len = c->dec.len;
  *pending = NULL;
  if (c->dec.len > 0) {
    *pending = xmalloc(c->dec.len);
    memcpy(*pending, c->dec.buf, c->dec.len);
  }
  agt_decoder_release(&c->dec);
  agt_decoder_init(&c->dec);
}

void agt_reply(agt_client_t *c, uint64_t id, json_t *result)
{
  json_t *m = agt_msg_result(id, result);
  send_msg(c, m);
  json_decref(m);
}

void agt_reply_error(agt_client_t *c, uint64_t id, agt_error_t err)
{
  json_t *m = agt_msg_error(id, err);
  send_msg(c, m);
  json_decref(m);
}

void agt_pending_add(agt_pending_t **list, agt_req_t *req)
{
  agt_pending_t *p = xzalloc(sizeof *p);

  p->client = req->client;
  p->id = req->id;
  agt_client_ref(req->client);
  p->next = *list;
  *list = p;
}

void agt_pending_answer(agt_pending_t **list, json_t *result, agt_error_t err)
{
  agt_pending_t *p = *list, *next;
  agt_error_t gone = NULL;

  *list = NULL;
  if (result == NULL && err == NULL) {
    agt_error_kind(&gone, AGT_E_NOTFOUND, "the jail was removed");
    err = gone;
  }
  for (; p; p = next) {
    next = p->next;
    if (err)
      agt_reply_error(p->client, p->id, err);
    else
      agt_reply(p->client, p->id, result);
    agt_client_unref(p->client);
    free(p);
  }
  agt_error_release(&gone);
}

static void dispatch(agt_client_t *c, json_t *msg)
{
  agt_error_t err = NULL;
  const char *method;
  json_t *params = NULL, *result = NULL;
  agt_req_t req;
  const struct agt_method *m = NULL;
  int r;

  memset(&req, 0, sizeof req);
  if (agt_msg_parse_request(msg, &req.id, &method, &params, &err) < 0)
    goto error;
  for (size_t i = 0; i < c->d->nmethods && m == NULL; i++)
    if (strcmp(c->d->methods[i].name, method) == 0)
      m = &c->d->methods[i];
  if (m == NULL) {
    agt_error_kind(&err, AGT_E_PROTO, "unknown method '%.64s'", method);
    goto error;
  }
  if ((m->flags & AGT_METHOD_NEEDS_HELLO) && !c->hello_done) {
    agt_error_kind(&err, AGT_E_PROTO, "'%s' before 'hello'", method);
    goto error;
  }
  req.d = c->d;
  req.client = c;
  req.params = json_is_object(params) ? json_incref(params) : json_object();
  r = m->fn(&req, &result, &err);
  json_decref(req.params);
  if (r < 0)
    goto error;
  if (r == 0) {
    if (strcmp(method, "hello") == 0)
      c->hello_done = 1;
    agt_reply(c, req.id, result);
    json_decref(result);
  }
  return;
error:
  agt_reply_error(c, req.id, err);
  agt_error_release(&err);
}

static void closed_cb(uv_handle_t *h)
{
  agt_client_unref(h->data);
}

static void timer_closed_cb(uv_handle_t *h)
{
  agt_client_unref(h->data);
}

static void client_close(agt_client_t *c)
{
  agt_client_t **p;

  if (c->closed)
    return;
  c->closed = 1;
  if (c->mode) {
    const struct agt_client_mode *mode = c->mode;
    c->mode = NULL;
    if (mode->gone)
      mode->gone(c->mode_data);
    c->mode_data = NULL;
  }
  for (p = &c->d->clients; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      c->d->nclients--;
      break;
    }
  if (c->timers) {
    agt_client_ref(c);
    uv_close((uv_handle_t *)&c->hello_timer, timer_closed_cb);
    agt_client_ref(c);
    uv_close((uv_handle_t *)&c->frame_timer, timer_closed_cb);
  }
  c->pipe.data = c; /* a relay may have had it */
  uv_close((uv_handle_t *)&c->pipe, closed_cb);
}

/* A deadline passed: say which, then hang up. */
static void deadline_cb(uv_timer_t *t)
{
  agt_client_t *c = t->data;
  int hello = t == &c->hello_timer;
  unsigned ms = hello ? c->d->cfg.hello_timeout_ms : c->d->cfg.frame_timeout_ms;
  agt_error_t err = NULL;

  if (c->closed)
    return;
  agt_log_info("client (uid %u, pid %ld) %s within %u ms: disconnected", (unsigned)c->uid,
               (long)c->pid, hello ? "sent no hello" : "did not finish a frame", ms);
  agt_error_kind(&err, AGT_E_PROTO, "%s within %u ms: closing the connection",
                 hello ? "no 'hello'" : "a frame was started and not finished", ms);
  agt_reply_error(c, 0, err);
  agt_error_release(&err);
  client_close(c);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  agt_client_t *c = s->data;
  json_t *msg;
  agt_error_t err = NULL;
  int r, took = 0;

  if (n == UV_EOF && !c->closed) {
    /* The client half-closed: it sends nothing more, but what it asked for still reaches
     * it.  A stream or a command's output goes on to its end (which closes); otherwise the
     * replies already queued are written, then the connection closes. */
    uv_read_stop(s);
    if (c->mode == NULL || !c->mode->keep_on_eof)
      agt_client_finish(c);
    return;
  }
  if (n < 0) {
    client_close(c);
    return;
  }
  agt_decoder_feed(&c->dec, buf->base, (size_t)n);
  agt_client_ref(c);
  while (!c->closed && !c->held && !c->raw && (r = agt_decoder_next(&c->dec, &msg, &err)) != 0) {
    took = 1;
    if (r < 0) {
      agt_reply_error(c, 0, err);
      agt_error_release(&err);
      continue;
    }
    if (c->mode == NULL)
      dispatch(c, msg);
    else if (c->mode->input)
      c->mode->input(c->mode_data, msg);
    json_decref(msg);
  }
  if (c->hello_done && c->timers)
    uv_timer_stop(&c->hello_timer);
  /* A frame begun and not whole: its deadline runs from its first byte (restarted when
   * this read finished earlier frames, since what is left began in it). */
  if (!c->closed && !c->held && !c->raw && c->timers) {
    if (c->dec.len == 0 && c->dec.skip == 0)
      uv_timer_stop(&c->frame_timer);
    else if (took || !uv_is_active((uv_handle_t *)&c->frame_timer))
      uv_timer_start(&c->frame_timer, deadline_cb, c->d->cfg.frame_timeout_ms, 0);
  }
  agt_client_unref(c);
}

/* The connections one uid may hold: its share of --max-clients. */
static unsigned per_uid_max(const agtd_t *d)
{
  unsigned m = d->cfg.max_clients_per_uid;

  if (m == 0)
    m = d->cfg.max_clients - d->cfg.max_clients / 4;
  return m ? m : 1;
}

static void refuse(agt_client_t *c, agt_error_t err)
{
  agt_reply_error(c, 0, err);
  agt_error_release(&err);
  client_close(c);
}

static void connection_cb(uv_stream_t *server, int status)
{
  agtd_t *d = server->data;
  agt_client_t *c;
  struct ucred cred;
  socklen_t len = sizeof cred;
  uv_os_fd_t fd;
  unsigned same = 0;

  if (status < 0)
    return;
  c = xzalloc(sizeof *c);
  c->d = d;
  c->refs = 1;
  agt_decoder_init(&c->dec);
  uv_pipe_init(d->loop, &c->pipe, 0);
  c->pipe.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
    c->closed = 1;
    uv_close((uv_handle_t *)&c->pipe, closed_cb);
    return;
  }
  c->uid = (uid_t)-1;
  c->gid = (gid_t)-1;
  c->pid = 0;
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    c->uid = cred.uid;
    c->gid = cred.gid;
    c->pid = cred.pid;
  }
  uv_timer_init(d->loop, &c->hello_timer);
  uv_timer_init(d->loop, &c->frame_timer);
  c->hello_timer.data = c->frame_timer.data = c;
  c->timers = 1;
  for (agt_client_t *o = d->clients; o; o = o->next)
    if (o->uid == c->uid)
      same++;
  c->next = d->clients;
  d->clients = c;
  d->nclients++;
  if (d->nclients > d->cfg.max_clients || d->shutting_down) {
    agt_error_t err = NULL;
    agt_error_kind(&err, AGT_E_LIMIT, "agtd serves %u connections already; try again later",
                   d->cfg.max_clients);
    refuse(c, err);
    return;
  }
  if (same >= per_uid_max(d)) {
    agt_error_t err = NULL;
    agt_error_kind(&err, AGT_E_LIMIT,
                   "uid %u holds %u connections to agtd already, its share of %u; try again "
                   "later",
                   (unsigned)c->uid, same, d->cfg.max_clients);
    refuse(c, err);
    return;
  }
  uv_timer_start(&c->hello_timer, deadline_cb, d->cfg.hello_timeout_ms, 0);
  uv_read_start((uv_stream_t *)&c->pipe, agt_read_buffer, read_cb);
}

int agt_server_listen(agtd_t *d, const struct agt_method *methods, size_t n, agt_error_t *err)
{
  const char *path = d->cfg.socket_path;
  cleanup_free char *dir = xstrdup(path);
  char *slash = strrchr(dir, '/');
  gid_t gid = 0;
  int r;

  if (d->cfg.group) {
    struct group *g = getgrnam(d->cfg.group);
    if (g == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "socket group '%s' does not exist", d->cfg.group);
    gid = g->gr_gid;
  }
  if (slash && slash != dir) {
    *slash = '\0';
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
      return agt_error_make(err, errno, "mkdir '%s'", dir);
  }
  if (unlink(path) < 0 && errno != ENOENT)
    return agt_error_make(err, errno, "remove the old socket '%s'", path);
  d->methods = methods;
  d->nmethods = n;
  uv_pipe_init(d->loop, &d->listener, 0);
  d->listener.data = d;
  r = uv_pipe_bind(&d->listener, path);
  if (r < 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "bind '%s': %s", path, uv_strerror(r));
  /* Root and the socket's group only. */
  if (chown(path, 0, gid) < 0 || chmod(path, 0660) < 0)
    return agt_error_make(err, errno, "set the owner and mode of '%s'", path);
  r = uv_listen((uv_stream_t *)&d->listener, 1024, connection_cb);
  if (r < 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "listen on '%s': %s", path, uv_strerror(r));
  return 0;
}

void agt_server_close(agtd_t *d)
{
  while (d->clients)
    client_close(d->clients);
  if (!uv_is_closing((uv_handle_t *)&d->listener))
    uv_close((uv_handle_t *)&d->listener, NULL);
  unlink(d->cfg.socket_path);
}
