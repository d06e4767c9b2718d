#include "fdrelay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xalloc.h"

static void set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);

  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void agt_fdrelay_init(struct agt_fdrelay *r, int a, int b)
{
  memset(r, 0, sizeof *r);
  r->fd[0] = a;
  r->fd[1] = b;
  for (int i = 0; i < 2; i++) {
    set_nonblock(r->fd[i]);
    r->h[i].cap = AGT_FDRELAY_BUF;
    r->h[i].buf = xmalloc(r->h[i].cap);
  }
}

void agt_fdrelay_preload(struct agt_fdrelay *r, int from, const void *data, size_t len)
{
  struct agt_fdrelay_half *h = &r->h[from];

  if (h->off + h->len + len > h->cap) {
    memmove(h->buf, h->buf + h->off, h->len);
    h->off = 0;
    if (h->len + len > h->cap) {
      h->cap = h->len + len;
      h->buf = xrealloc(h->buf, h->cap);
    }
  }
  memcpy(h->buf + h->off + h->len, data, len);
  h->len += len;
}

short agt_fdrelay_events(const struct agt_fdrelay *r, int side)
{
  short ev = 0;

  if (r->dead)
    return 0;
  if (r->h[side].len == 0 && !r->h[side].eof)
    ev |= POLLIN;
  if (r->h[1 - side].len > 0)
    ev |= POLLOUT;
  return ev;
}

void agt_fdrelay_pump(struct agt_fdrelay *r)
{
  for (int i = 0; i < 2 && !r->dead; i++) {
    struct agt_fdrelay_half *h = &r->h[i];
    while (h->len > 0) {
      ssize_t w = write(r->fd[1 - i], h->buf + h->off, h->len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (w <= 0) {
        r->dead = 1;
        break;
      }
      h->off += (size_t)w;
      h->len -= (size_t)w;
      h->delivered += (uint64_t)w;
    }
    if (h->len == 0)
      h->off = 0;
    if (h->eof && h->len == 0 && !h->shut) {
      /* ENOTCONN: the destination is gone already; nothing is left to lose */
      if (shutdown(r->fd[1 - i], SHUT_WR) < 0 && errno != ENOTCONN)
        r->dead = 1;
      h->shut = 1;
    }
  }
}

static void read_side(struct agt_fdrelay *r, int i)
{
  struct agt_fdrelay_half *h = &r->h[i];
  ssize_t n;

  do
    n = read(r->fd[i], h->buf, h->cap);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    h->off = 0;
    h->len = (size_t)n;
  } else if (n == 0) {
    h->eof = 1;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
    r->dead = 1;
  }
}

void agt_fdrelay_ready(struct agt_fdrelay *r, int side, short revents)
{
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && r->h[side].len == 0 && !r->h[side].eof &&
      !r->dead)
    read_side(r, side);
  agt_fdrelay_pump(r);
}

int agt_fdrelay_finished(const struct agt_fdrelay *r)
{
  return r->dead || (r->h[0].shut && r->h[1].shut);
}

int agt_fdrelay_run(struct agt_fdrelay *r)
{
  agt_fdrelay_pump(r);
  while (!agt_fdrelay_finished(r)) {
    struct pollfd pf[2];
    nfds_t n = 0;
    int side[2];

    for (int i = 0; i < 2; i++) {
      short ev = agt_fdrelay_events(r, i);
      if (ev == 0)
        continue;
      pf[n].fd = r->fd[i];
      pf[n].events = ev;
      pf[n].revents = 0;
      side[n++] = i;
    }
    if (n == 0) /* cannot happen: a direction not finished waits for one of its sides */
      return -1;
    if (poll(pf, n, -1) < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    for (nfds_t k = 0; k < n; k++)
      if (pf[k].revents)
        agt_fdrelay_ready(r, side[k], pf[k].revents);
  }
  return r->dead ? -1 : 0;
}

void agt_fdrelay_release(struct agt_fdrelay *r)
{
  for (int i = 0; i < 2; i++) {
    if (r->fd[i] >= 0)
      close(r->fd[i]);
    r->fd[i] = -1;
    free(r->h[i].buf);
    r->h[i].buf = NULL;
  }
}
