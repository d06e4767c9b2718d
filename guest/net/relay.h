/* A byte relay between two libuv streams, as a TCP proxy moves bytes: the egress proxy
 * (client <-> upstream) and jail.port (agtd's client <-> the jail's port) both use it.
 *
 *   - what one side sends reaches the other in order, all of it: an end of stream from one
 *     side is passed on as a shutdown of the other side's write half once everything queued
 *     toward it is written (a half-close), and the other direction goes on;
 *   - the relay is done when both directions have ended that way, or at the first error
 *     (a reset, a write that fails): both sockets are then set to reset when closed (linger
 *     0), so that each peer sees an abortive end rather than a clean one, and the owner
 *     closes both handles;
 *   - a side is not read while the bytes taken from it and not yet written to the other one
 *     reach a bound (AGT_RELAY_HIGH, or the pipe's size): a slow reader holds the sender back
 *     rather than agtd's memory;
 *   - delivered[] counts the bytes written to each side, not the bytes read.
 *
 * Two ways of moving the bytes, picked at agt_relay_start:
 *   - splice: each direction has a pipe; bytes go socket -> pipe -> socket with splice()
 *     and never pass through agtd's memory.  Both descriptors are watched with uv_poll on
 *     the streams' own fds (their libuv reads stopped; nothing may be queued on them by
 *     libuv).  The pipe is asked for AGT_RELAY_PIPE bytes (F_SETPIPE_SZ, never above
 *     /proc/sys/fs/pipe-max-size, and only while all relays' pipes together stay within
 *     /proc/sys/fs/pipe-user-pages-soft, which the kernel does not apply to root: beyond
 *     it, a pipe keeps the kernel's default size), so a relay holds at most two pipes'
 *     worth in the kernel and four more descriptors;
 *   - copy: libuv reads into one buffer and writes what the other side takes at once,
 *     queueing a copy of the rest (at most AGT_RELAY_HIGH before the source is paused).
 *     Used when a pipe cannot be made (descriptors or pipe memory exhausted) or when libuv
 *     still has bytes queued on a stream.
 *
 * The relay owns the streams' read callbacks and their data pointers from agt_relay_start
 * until done; it does not close them.  agt_relay_stop (which the owner calls before closing
 * the handles) stops watching the descriptors at once.  Write and shutdown requests still
 * pending when the owner closes a handle are cancelled and free themselves without touching
 * the relay, so the owner may free the relay as soon as both handles are closed. */
#ifndef AGT_RELAY_H
#define AGT_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define AGT_RELAY_HIGH (1u << 20)
#define AGT_RELAY_LOW (256u * 1024)
#define AGT_RELAY_PIPE (1u << 20)

struct agt_relay_s;
/* Both directions ended (status 0), or the relay failed (a libuv error code). */
typedef void (*agt_relay_done_fn)(struct agt_relay_s *r, int status);

struct agt_relay_dir {
  uint64_t delivered; /* bytes written to the destination */
  size_t queued;      /* bytes taken from the source and not yet written to the destination */
  int eof;            /* the source ended */
  int shut;           /* and the destination's write half was shut after the last byte */
  int paused;         /* the source is not read: the destination is behind */
  /* splice */
  int pipe[2];     /* the bytes in flight; -1 when not made */
  size_t pipe_cap; /* its size */
  size_t in_pipe;  /* bytes in it */
  int pipe_full;   /* a splice into it found no room (slots used up before bytes): wait for
                      the destination to take some before reading the source again */
  char *head;      /* bytes written ahead of the source's (agt_relay_write) */
  size_t head_len, head_off;
};

struct agt_relay_s {
  uv_stream_t *side[2];
  struct agt_relay_dir dir[2]; /* dir[i]: from side[i] to side[1 - i] */
  uint64_t last_ms;            /* uv_now() of the last byte moved */
  int started, done;
  int spliced;        /* the splice way (else copy) */
  int fd[2];          /* splice: the sides' descriptors */
  uv_poll_t *poll[2]; /* splice: their watchers (freed on close) */
  int events[2];      /* splice: what each watcher waits for now */
  int errored[2];     /* splice: the side has an error to read after its bytes (POLLERR) */
  agt_relay_done_fn done_cb;
  void *data; /* the owner's */
};
typedef struct agt_relay_s agt_relay_t;

/* The capacity of all relays' pipes now, in bytes (kept within fs.pipe-user-pages-soft for
 * the pipes enlarged beyond the kernel's default). */
size_t agt_relay_pipe_bytes(void);

void agt_relay_init(agt_relay_t *r, uv_stream_t *a, uv_stream_t *b, agt_relay_done_fn done_cb,
                    void *data);
/* Queue bytes (taken, from malloc) toward side `to` ahead of what the relay will move; they
 * count as delivered when written.  Before agt_relay_start only; a libuv error when they
 * cannot be queued (done_cb is not called for it). */
int agt_relay_write(agt_relay_t *r, int to, char *data, size_t len);
/* Start moving bytes both ways. */
void agt_relay_start(agt_relay_t *r);
/* Stop moving bytes and mark the relay done without calling done_cb (the owner closes). */
void agt_relay_stop(agt_relay_t *r);

#endif
