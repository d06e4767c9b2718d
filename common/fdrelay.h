/* A byte relay between two file descriptors (sockets), driven by poll(): `agt jail port`
 * (one poll loop for many connections) and `agtd ctl jail port` (a process per connection)
 * use it.  As a TCP proxy does: what one side sends reaches the other in order, all of it;
 * an end of stream from one side becomes a shutdown(SHUT_WR) of the other after the last
 * byte (a half-close) while the other direction goes on; the relay is finished when both
 * directions ended so, or at the first error (then closing both is an abortive end).  Each
 * direction holds at most one buffer: a slow reader stops the reading of the other side. */
#ifndef AGT_FDRELAY_H
#define AGT_FDRELAY_H

#include <stddef.h>
#include <stdint.h>

#define AGT_FDRELAY_BUF (64u * 1024)

struct agt_fdrelay_half {
  char *buf;
  size_t cap, off, len; /* bytes read from the source, not yet written */
  uint64_t delivered;   /* bytes written to the destination */
  int eof;              /* the source ended */
  int shut;             /* and the destination was shut for writing after the last byte */
};

struct agt_fdrelay {
  int fd[2];
  struct agt_fdrelay_half h[2]; /* h[i]: from fd[i] to fd[1 - i] */
  int dead;                     /* an error: stop */
};

/* Relay between a and b (made non-blocking; the relay owns them from here on). */
void agt_fdrelay_init(struct agt_fdrelay *r, int a, int b);
/* Bytes (borrowed) to write to fd[1 - from] before anything read from fd[from]. */
void agt_fdrelay_preload(struct agt_fdrelay *r, int from, const void *data, size_t len);
/* The poll() events to wait for on fd[side] (0: none). */
short agt_fdrelay_events(const struct agt_fdrelay *r, int side);
/* fd[side] reported revents: read it if it is its turn; then move what can move. */
void agt_fdrelay_ready(struct agt_fdrelay *r, int side, short revents);
/* Move what can move without waiting. */
void agt_fdrelay_pump(struct agt_fdrelay *r);
/* 1 when both directions ended or the relay failed. */
int agt_fdrelay_finished(const struct agt_fdrelay *r);
/* Poll and move until finished: 0 when both directions ended, -1 on an error. */
int agt_fdrelay_run(struct agt_fdrelay *r);
/* Close both descriptors and free the buffers. */
void agt_fdrelay_release(struct agt_fdrelay *r);

#endif
