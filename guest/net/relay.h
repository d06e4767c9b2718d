/* A byte relay between two libuv streams, as a TCP proxy moves bytes: the egress proxy
 * (client <-> upstream) and jail.port (agtd's client <-> the jail's port) both use it.
 *
 *   - what one side sends reaches the other in order, all of it: an end of stream from one
 *     side is passed on as a shutdown of the other side's write half once everything queued
 *     toward it is written (a half-close), and the other direction goes on;
 *   - the relay is done when both directions have ended that way, or at the first error
 *     (a reset, a write that fails): the owner then closes both handles (an abortive end);
 *   - a side is not read while more than AGT_RELAY_HIGH bytes wait to be written to the
 *     other one, and is read again below AGT_RELAY_LOW: a slow reader holds the sender back
 *     rather than agtd's memory;
 *   - delivered[] counts the bytes written to each side, not the bytes read.
 *
 * The relay owns the streams' read callbacks and their data pointers from agt_relay_start
 * until done; it does not close them.  Write and shutdown requests still pending when the
 * owner closes a handle are cancelled and free themselves without touching the relay, so the
 * owner may free the relay as soon as both handles are closed. */
#ifndef AGT_RELAY_H
#define AGT_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define AGT_RELAY_HIGH (1u << 20)
#define AGT_RELAY_LOW (256u * 1024)

struct agt_relay_s;
/* Both directions ended (status 0), or the relay failed (a libuv error code). */
typedef void (*agt_relay_done_fn)(struct agt_relay_s *r, int status);

struct agt_relay_dir {
  uint64_t delivered; /* bytes written to the destination */
  size_t queued;      /* bytes waiting to be written to it */
  int eof;            /* the source ended */
  int shut;           /* and the destination's write half was shut after the last byte */
  int paused;         /* the source is not read: the destination is behind */
};

struct agt_relay_s {
  uv_stream_t *side[2];
  struct agt_relay_dir dir[2]; /* dir[i]: from side[i] to side[1 - i] */
  uint64_t last_ms;            /* uv_now() of the last byte moved */
  int started, done;
  agt_relay_done_fn done_cb;
  void *data; /* the owner's */
};
typedef struct agt_relay_s agt_relay_t;

void agt_relay_init(agt_relay_t *r, uv_stream_t *a, uv_stream_t *b, agt_relay_done_fn done_cb,
                    void *data);
/* Queue bytes (taken, from malloc) toward side `to` ahead of what the relay will move; they
 * count as delivered when written.  Before or after agt_relay_start; a libuv error when the
 * write cannot be queued (done_cb is not called for it). */
int agt_relay_write(agt_relay_t *r, int to, char *data, size_t len);
/* Start reading both sides. */
void agt_relay_start(agt_relay_t *r);
/* Stop reading and mark the relay done without calling done_cb (the owner closes). */
void agt_relay_stop(agt_relay_t *r);

#endif
