/* Streams: a connection that, after jail.attach or a following jail.logs, carries one jail's
 * live output (and, for attach, input to its terminal) instead of requests.
 *
 * Messages on a stream are still frames of one JSON object:
 *   agtd -> client  {"out": "<base64>", "offset": N}   output, in order, from byte N
 *                   {"exit": {...the jail...}}          the jail ended; agtd then closes
 *   client -> agtd  {"in": "<base64>"}                  input for the terminal (writer only)
 *                   {"resize": [rows, cols]}            the client's window size
 *                   {"detach": true}                    leave the jail running
 *
 * Nothing is dropped: while a stream's client is behind, agtd stops reading the jail's
 * output, so the agent's writes block until the client catches up. */
#ifndef AGT_STREAM_H
#define AGT_STREAM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct agt_jail_s;
struct agt_client_s;

enum agt_stream_kind { AGT_STREAM_ATTACH, AGT_STREAM_FOLLOW };

struct agt_stream_s {
  struct agt_stream_s *next; /* in the jail's list */
  struct agt_jail_s *jail;
  struct agt_client_s *client;
  enum agt_stream_kind kind;
  int writer;
  int holding;     /* its input waits: the jail has not read what came before (attach) */
  uint64_t replay; /* follow: next log offset to send from the file before going live */
};
typedef struct agt_stream_s agt_stream_t;

/* Turn the client's connection into a stream of jail j (a mode of it, server.h): its
 * frames are the terminal's input and size; it ends with the client or the jail. */
agt_stream_t *agt_stream_open(struct agt_jail_s *j, struct agt_client_s *c,
                              enum agt_stream_kind kind, uint64_t from, int want_write);

/* What the jails' supervision tells the streams (serve.c hands it over): each piece of a
 * jail's output (the screen kept for attach, the streams, their backpressure) and its end
 * (every stream told and closed). */
extern const struct agt_output_watch agt_stream_watch;

#endif
