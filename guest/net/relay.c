#include "relay.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define READ_SLAB (256u * 1024)

struct relay_write {
  uv_write_t req;
  agt_relay_t *r;
  int to;
  size_t len;
  char *data;
};

struct relay_shutdown {
  uv_shutdown_t req;
  agt_relay_t *r;
  int from;
};

static void relay_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  static char slab[READ_SLAB]; /* one loop thread; what is read is written or copied at once */

  (void)h;
  (void)suggested;
  buf->base = slab;
  buf->len = sizeof slab;
}

static void relay_fail(agt_relay_t *r, int status)
{
  if (r->done)
    return;
  agt_relay_stop(r);
  r->done_cb(r, status);
}

static void maybe_done(agt_relay_t *r)
{
  if (!r->done && r->dir[0].shut && r->dir[1].shut) {
    agt_relay_stop(r);
    r->done_cb(r, 0);
  }
}

static void shutdown_done(uv_shutdown_t *req, int status)
{
  struct relay_shutdown *sd = (struct relay_shutdown *)req;
  agt_relay_t *r = sd->r;
  int from = sd->from;

  free(sd);
  if (status == UV_ECANCELED)
    return; /* the owner closed the handle: the relay may be gone */
  /* An error here means the peer is gone already; everything queued before was written
   * (a failed write would have ended the relay), so the direction is complete either way. */
  r->dir[from].shut = 1;
  maybe_done(r);
}

/* The source of direction `from` ended and everything queued toward the destination is
 * written or queued: shut the destination's write half after it. */
static void pass_eof(agt_relay_t *r, int from)
{
  struct relay_shutdown *sd = xzalloc(sizeof *sd);
  int rc;

  sd->r = r;
  sd->from = from;
  rc = uv_shutdown(&sd->req, r->side[1 - from], shutdown_done);
  if (rc < 0) {
    free(sd);
    if (rc == UV_ENOTCONN) { /* the destination's write half is shut already */
      r->dir[from].shut = 1;
      maybe_done(r);
      return;
    }
    relay_fail(r, rc);
  }
}

static void resume(agt_relay_t *r, int from)
{
  struct agt_relay_dir *d = &r->dir[from];

  if (d->paused && !d->eof && !r->done && d->queued < AGT_RELAY_LOW) {
    d->paused = 0;
    uv_read_start(r->side[from], relay_alloc, relay_read);
  }
}

static void write_done(uv_write_t *req, int status)
{
  struct relay_write *w = (struct relay_write *)req;
  agt_relay_t *r = w->r;
  int to = w->to;
  size_t len = w->len;

  free(w->data);
  free(w);
  if (status == UV_ECANCELED)
    return; /* the owner closed the handle: the relay may be gone */
  r->dir[1 - to].queued -= len;
  if (status < 0) {
    relay_fail(r, status);
    return;
  }
  r->dir[1 - to].delivered += len;
  r->last_ms = uv_now(r->side[to]->loop);
  resume(r, 1 - to);
}

/* Queue len bytes (taken) toward side `to`. */
static int queue_write(agt_relay_t *r, int to, char *data, size_t len)
{
  struct relay_write *w = xzalloc(sizeof *w);
  uv_buf_t b = uv_buf_init(data, (unsigned)len);
  int rc;

  w->r = r;
  w->to = to;
  w->len = len;
  w->data = data;
  r->dir[1 - to].queued += len;
  rc = uv_write(&w->req, r->side[to], &b, 1, write_done);
  if (rc < 0) {
    r->dir[1 - to].queued -= len;
    free(data);
    free(w);
  }
  return rc;
}

/* Bytes read from side `from` (borrowed): write what the destination takes now, queue a copy
 * of the rest. */
static int forward(agt_relay_t *r, int from, const char *data, size_t len)
{
  uv_stream_t *dst = r->side[1 - from];
  size_t done = 0;

  if (r->dir[from].queued == 0) {
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n = uv_try_write(dst, &b, 1);
    if (n > 0) {
      done = (size_t)n;
      r->dir[from].delivered += done;
    } else if (n < 0 && n != UV_EAGAIN) {
      return n;
    }
  }
  if (done < len) {
    char *copy = xmalloc(len - done);
    memcpy(copy, data + done, len - done);
    return queue_write(r, 1 - from, copy, len - done);
  }
  return 0;
}

static void relay_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  agt_relay_t *r = s->data;
  int from = s == r->side[0] ? 0 : 1;
  struct agt_relay_dir *d = &r->dir[from];
  int rc;

  (void)buf;
  if (n == 0 || r->done)
    return;
  if (n == UV_EOF) {
    uv_read_stop(s);
    d->eof = 1;
    pass_eof(r, from);
    return;
  }
  if (n < 0) {
    relay_fail(r, (int)n);
    return;
  }
  r->last_ms = uv_now(s->loop);
  rc = forward(r, from, buf->base, (size_t)n);
  if (rc < 0) {
    relay_fail(r, rc);
    return;
  }
  if (d->queued > AGT_RELAY_HIGH) {
    uv_read_stop(s);
    d->paused = 1;
  }
}

void agt_relay_init(agt_relay_t *r, uv_stream_t *a, uv_stream_t *b, agt_relay_done_fn done_cb,
                    void *data)
{
  memset(r, 0, sizeof *r);
  r->side[0] = a;
  r->side[1] = b;
  r->done_cb = done_cb;
  r->data = data;
  r->last_ms = uv_now(a->loop);
}

int agt_relay_write(agt_relay_t *r, int to, char *data, size_t len)
{
  if (r->done || len == 0) {
    free(data);
    return 0;
  }
  return queue_write(r, to, data, len);
}

void agt_relay_start(agt_relay_t *r)
{
  int rc = 0;

  if (r->done)
    return;
  r->started = 1;
  for (int i = 0; i < 2 && rc == 0; i++) {
    r->side[i]->data = r;
    rc = uv_read_start(r->side[i], relay_alloc, relay_read);
  }
  if (rc < 0)
    relay_fail(r, rc);
}

void agt_relay_stop(agt_relay_t *r)
{
  if (r->done)
    return;
  r->done = 1;
  if (r->started)
    for (int i = 0; i < 2; i++)
      if (!uv_is_closing((uv_handle_t *)r->side[i]))
        uv_read_stop(r->side[i]);
}
