#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

#define READ_SLAB (256u * 1024)
/* splice: rounds of (write, read) per direction and wakeup before the loop serves others */
#define SPLICE_ROUNDS 8

/* --- common to both ways */

static void relay_fail(agt_relay_t *r, int status)
{
  if (r->done)
    return;
  agt_relay_stop(r);
  /* An abortive end: each peer is reset when its socket is closed, rather than seeing a
   * clean end of stream after a part of what the other side sent. */
  for (int i = 0; i < 2; i++) {
    uv_os_fd_t fd;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    if (r->side[i]->type == UV_TCP && uv_fileno((uv_handle_t *)r->side[i], &fd) == 0)
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  r->done_cb(r, status);
}

static void maybe_done(agt_relay_t *r)
{
  if (!r->done && r->dir[0].shut && r->dir[1].shut) {
    agt_relay_stop(r);
    r->done_cb(r, 0);
  }
}

/* --- copy: libuv reads and writes */

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

static void copy_start(agt_relay_t *r)
{
  int rc = 0;

  for (int i = 0; i < 2 && rc == 0; i++) {
    struct agt_relay_dir *d = &r->dir[1 - i]; /* the bytes toward side i */
    if (d->head_len > 0) {
      rc = queue_write(r, i, steal_pointer(&d->head), d->head_len);
      d->head_len = 0;
    }
  }
  for (int i = 0; i < 2 && rc == 0; i++)
    rc = uv_read_start(r->side[i], relay_alloc, relay_read);
  if (rc < 0)
    relay_fail(r, rc);
}

/* --- splice: socket -> pipe -> socket, the descriptors watched with uv_poll */

/* A number from /proc/sys (0 when it cannot be read). */
static unsigned long proc_sys_value(const char *path)
{
  char buf[32];
  unsigned long v = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    v = strtoul(buf, NULL, 10);
  }
  close(fd);
  return v;
}

/* What a relay's pipe asks for: AGT_RELAY_PIPE, never above fs.pipe-max-size. */
static size_t pipe_want(void)
{
  static size_t want;

  if (want == 0) {
    unsigned long max = proc_sys_value("/proc/sys/fs/pipe-max-size");
    want = max > 0 && max < AGT_RELAY_PIPE ? max : AGT_RELAY_PIPE;
  }
  return want;
}

/* The kernel lets a root process's pipes grow past fs.pipe-user-pages-soft; agtd keeps to it
 * itself: a pipe is enlarged only while all relays' pipes together stay within it (0: no
 * limit).  Beyond it, pipes keep the kernel's default size and relay in smaller steps. */
static size_t pipe_budget(void)
{
  static long budget = -1;

  if (budget < 0)
    budget = (long)proc_sys_value("/proc/sys/fs/pipe-user-pages-soft") * sysconf(_SC_PAGESIZE);
  return (size_t)budget;
}

static size_t pipe_bytes; /* the capacity of every relay's pipes, now */

size_t agt_relay_pipe_bytes(void)
{
  return pipe_bytes;
}

static void close_pipe(struct agt_relay_dir *d)
{
  if (d->pipe[0] >= 0)
    pipe_bytes -= d->pipe_cap;
  for (int i = 0; i < 2; i++)
    if (d->pipe[i] >= 0) {
      close(d->pipe[i]);
      d->pipe[i] = -1;
    }
}

/* A pipe for one direction; 0, or -1 (errno) when none can be made. */
static int open_pipe(struct agt_relay_dir *d)
{
  size_t budget = pipe_budget();
  int size;

  if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
    d->pipe[0] = d->pipe[1] = -1;
    return -1;
  }
  if (budget == 0 || pipe_bytes + pipe_want() <= budget)
    (void)fcntl(d->pipe[1], F_SETPIPE_SZ, (int)pipe_want()); /* refused: the size stays */
  size = fcntl(d->pipe[1], F_GETPIPE_SZ);
  d->pipe_cap = size > 0 ? (size_t)size : 65536;
  pipe_bytes += d->pipe_cap;
  return 0;
}

static void poll_cb(uv_poll_t *p, int status, int events);

/* Watch for what the relay waits for now: a side is read while its direction has room and
 * written to while bytes wait for it. */
static void splice_watch(agt_relay_t *r)
{
  for (int i = 0; i < 2; i++) {
    struct agt_relay_dir *out = &r->dir[i], *in = &r->dir[1 - i];
    int ev = 0, rc = 0;

    if (!out->eof && out->in_pipe < out->pipe_cap && !out->pipe_full)
      ev |= UV_READABLE;
    out->paused = !out->eof && !(ev & UV_READABLE);
    if (in->in_pipe > 0 || in->head_off < in->head_len)
      ev |= UV_WRITABLE;
    if (r->errored[i])
      ev = 0; /* see poll_cb: side i is read again when the other side takes bytes */
    if (ev == r->events[i])
      continue;
    r->events[i] = ev;
    if (ev)
      rc = uv_poll_start(r->poll[i], ev, poll_cb);
    else
      rc = uv_poll_stop(r->poll[i]);
    if (rc < 0) {
      relay_fail(r, rc);
      return;
    }
  }
}

/* Move what can be moved now from side `from` to the other: 0, or a libuv error.  Each
 * round writes what is queued ahead, reads into the pipe what fits, and writes from the pipe
 * what the destination takes: a small message costs a splice in, a splice out and a splice
 * in that finds nothing. */
static int splice_pump(agt_relay_t *r, int from)
{
  struct agt_relay_dir *d = &r->dir[from];
  int src = r->fd[from], dst = r->fd[1 - from];

  for (int round = 0; round < SPLICE_ROUNDS; round++) {
    int moved = 0, blocked = 0;
    ssize_t n;

    while (d->head_off < d->head_len) {
      n = write(dst, d->head + d->head_off, d->head_len - d->head_off);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN) {
        blocked = 1;
        break;
      }
      if (n < 0)
        return -errno;
      d->head_off += (size_t)n;
      d->delivered += (uint64_t)n;
      moved = 1;
    }
    if (d->head_off == d->head_len && d->head) {
      free(d->head);
      d->head = NULL;
      d->head_len = d->head_off = 0;
    }
    if (!d->eof && !d->pipe_full && d->in_pipe < d->pipe_cap) {
      n = splice(src, NULL, d->pipe[1], NULL, d->pipe_cap - d->in_pipe,
                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n == 0) {
        d->eof = 1;
      } else if (n > 0) {
        d->in_pipe += (size_t)n;
        moved = 1;
      } else if (errno == EAGAIN) {
        /* The source is empty, or the pipe has no slot left with bytes in it: while bytes
         * are in it, wait for the destination to take some before trying again. */
        if (d->in_pipe > 0)
          d->pipe_full = 1;
      } else if (errno != EINTR) {
        return -errno;
      }
    }
    if (!blocked && d->in_pipe > 0) {
      n = splice(d->pipe[0], NULL, dst, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        return -errno;
      if (n > 0) {
        d->in_pipe -= (size_t)n;
        d->delivered += (uint64_t)n;
        d->pipe_full = 0;
        moved = 1;
      }
    }
    if (!moved)
      break;
    r->last_ms = uv_now(r->side[from]->loop);
  }
  d->queued = d->in_pipe + (d->head_len - d->head_off);
  if (d->eof && d->queued == 0 && !d->shut) {
    if (shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN)
      return -errno;
    d->shut = 1;
  }
  return 0;
}

/* Pump the directions in mask (bit i: from side i), then watch for what is waited for. */
static void splice_run(agt_relay_t *r, int mask)
{
  for (int i = 0; i < 2 && !r->done; i++) {
    int rc = (mask & (1 << i)) ? splice_pump(r, i) : 0;
    if (rc < 0) {
      relay_fail(r, rc);
      return;
    }
  }
  maybe_done(r);
  if (!r->done)
    splice_watch(r);
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
  agt_relay_t *r = p->data;
  int i = p == r->poll[0] ? 0 : 1;
  int mask = 0;

  if (r->done)
    return;
  if (status < 0) {
    /* POLLERR (libuv stops the watcher and says EBADF): side i was reset or failed.  What
     * it sent before is still to be read and passed on: the reads from it go on until they
     * return the error (when the destination takes bytes again), and then the relay fails
     * with it.  Its watcher stays off meanwhile, or the error would wake the loop at once
     * again. */
    r->events[i] = 0;
    r->errored[i] = 1;
    splice_run(r, 3);
    if (!r->done && r->dir[i].eof) { /* nothing more from side i: the error is all it has */
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(r->fd[i], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err == 0)
        err = ECONNRESET;
      relay_fail(r, -err);
    }
    return;
  }
  if (events & (UV_READABLE | UV_DISCONNECT))
    mask |= 1 << i; /* side i has bytes (or its end) for the other */
  if (events & UV_WRITABLE)
    mask |= 1 << (1 - i); /* side i takes what waits for it */
  splice_run(r, mask);
}

static void poll_closed(uv_handle_t *h)
{
  free(h);
}

/* The splice way, when both sides are sockets libuv has no bytes queued on and two pipes can
 * be made: 1, or 0 to copy. */
static int splice_start(agt_relay_t *r)
{
  for (int i = 0; i < 2; i++) {
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)r->side[i], &fd) < 0 ||
        uv_stream_get_write_queue_size(r->side[i]) > 0)
      return 0;
    r->fd[i] = fd;
  }
  if (open_pipe(&r->dir[0]) < 0)
    return 0;
  if (open_pipe(&r->dir[1]) < 0) {
    close_pipe(&r->dir[0]);
    return 0;
  }
  for (int i = 0; i < 2; i++) {
    uv_read_stop(r->side[i]); /* the owner's reads: the fd is watched by the relay now */
    r->poll[i] = xzalloc(sizeof *r->poll[i]);
    if (uv_poll_init_socket(r->side[i]->loop, r->poll[i], r->fd[i]) < 0) {
      free(r->poll[i]);
      r->poll[i] = NULL;
      for (int j = 0; j < i; j++) {
        uv_close((uv_handle_t *)r->poll[j], poll_closed);
        r->poll[j] = NULL;
      }
      close_pipe(&r->dir[0]);
      close_pipe(&r->dir[1]);
      return 0;
    }
    r->poll[i]->data = r;
  }
  r->spliced = 1;
  splice_run(r, 3);
  return 1;
}

/* --- the relay */

void agt_relay_init(agt_relay_t *r, uv_stream_t *a, uv_stream_t *b, agt_relay_done_fn done_cb,
                    void *data)
{
  memset(r, 0, sizeof *r);
  r->side[0] = a;
  r->side[1] = b;
  r->done_cb = done_cb;
  r->data = data;
  r->last_ms = uv_now(a->loop);
  for (int i = 0; i < 2; i++) {
    r->fd[i] = -1;
    r->dir[i].pipe[0] = r->dir[i].pipe[1] = -1;
  }
}

int agt_relay_write(agt_relay_t *r, int to, char *data, size_t len)
{
  struct agt_relay_dir *d = &r->dir[1 - to];

  if (r->done || len == 0) {
    free(data);
    return 0;
  }
  if (r->started) {
    free(data);
    return UV_EINVAL;
  }
  d->head = xrealloc(d->head, d->head_len + len);
  memcpy(d->head + d->head_len, data, len);
  d->head_len += len;
  free(data);
  return 0;
}

void agt_relay_start(agt_relay_t *r)
{
  if (r->done)
    return;
  r->started = 1;
  for (int i = 0; i < 2; i++)
    r->side[i]->data = r;
  if (!splice_start(r))
    copy_start(r);
}

void agt_relay_stop(agt_relay_t *r)
{
  if (r->done)
    return;
  r->done = 1;
  for (int i = 0; i < 2; i++) {
    free(r->dir[i].head);
    r->dir[i].head = NULL;
  }
  if (!r->started)
    return;
  if (r->spliced) {
    /* at once: the owner closes the descriptors next */
    for (int i = 0; i < 2; i++) {
      uv_close((uv_handle_t *)r->poll[i], poll_closed);
      r->poll[i] = NULL;
      close_pipe(&r->dir[i]);
    }
    return;
  }
  for (int i = 0; i < 2; i++)
    if (!uv_is_closing((uv_handle_t *)r->side[i]))
      uv_read_stop(r->side[i]);
}
