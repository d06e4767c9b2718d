/* agtd's unix-socket server: connections, framing, the hello exchange, and dispatch of
 * requests through the method table it is given (serve.c's; the handlers are in req_*.c). */
#ifndef AGT_SERVER_H
#define AGT_SERVER_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon.h"
#include "error.h"
#include "proto.h"

#define AGT_CLIENT_OUT_MAX (8u << 20) /* queued reply bytes before a client is cut off */
/* A client that carries a jail's or a command's output: its queue's marks. */
#define AGT_STREAM_HIGH (4u << 20) /* queued bytes at which the jail's output is paused */
#define AGT_STREAM_LOW (1u << 20)  /* ... and resumed */

/* A connection that stops carrying requests: a stream of a jail's output (stream.c), a
 * command's output (jail_exec.c), a forwarded port (portfwd.c).  The server calls the mode
 * through this table and knows none of them.  A NULL member: nothing to do. */
struct agt_client_mode {
  const char *name;
  void (*input)(void *data, json_t *msg); /* a frame from the client; NULL: dropped */
  void (*drained)(void *data);            /* queued replies were written */
  void (*gone)(void *data);               /* the connection is closing */
  int keep_on_eof;  /* the client's end of input leaves the connection open for our output */
  size_t out_slack; /* queued bytes allowed beyond AGT_CLIENT_OUT_MAX */
};

struct agt_client_s {
  struct agt_client_s *next;
  agtd_t *d;
  uv_pipe_t pipe;
  agt_decoder_t dec;
  int hello_done;
  int refs;   /* the connection itself plus one per request answered later */
  int closed; /* the connection is gone; replies are dropped */
  size_t out_queued;
  /* What the connection has become, if anything but requests (agt_client_set_mode). */
  const struct agt_client_mode *mode;
  void *mode_data;
  int raw;   /* jail.port connected: raw bytes, read and written by the relay */
  int held;  /* not reading for now */
  uid_t uid; /* the peer's, from SO_PEERCRED */
  gid_t gid; /* ... */
  pid_t pid;
  /* Deadlines: the hello, from the connection on; a frame, from its first byte on.  An
   * idle connection between frames has none (jail.wait, logs -f, attach, relays). */
  uv_timer_t hello_timer, frame_timer;
  int timers; /* the timers are initialised (closed with the connection) */
};
typedef struct agt_client_s agt_client_t;

struct agt_req_s {
  agtd_t *d;
  agt_client_t *client;
  uint64_t id;
  json_t *params; /* an object (possibly empty) */
};
typedef struct agt_req_s agt_req_t;

/* A handler answers now (return 0 with *result set, or -1 with *err set), or later
 * (return 1 after keeping the request with agt_pending_add()). */
typedef int (*agt_handler_fn)(agt_req_t *req, json_t **result, agt_error_t *err);

/* Requests answered later: a list of (client, id). */
struct agt_pending_s {
  struct agt_pending_s *next;
  agt_client_t *client;
  uint64_t id;
};
typedef struct agt_pending_s agt_pending_t;

void agt_pending_add(agt_pending_t **list, agt_req_t *req);
/* Answer and free every pending request in the list: with result (borrowed) when err is
 * NULL, else with the error. */
void agt_pending_answer(agt_pending_t **list, json_t *result, agt_error_t err);

/* A request the server serves: its name, its handler, and whether it needs the hello. */
enum { AGT_METHOD_NEEDS_HELLO = 1 };
struct agt_method {
  const char *name;
  agt_handler_fn fn;
  int flags;
};

/* Listen on d->cfg.socket_path and serve the n methods (borrowed for agtd's life). */
int agt_server_listen(agtd_t *d, const struct agt_method *methods, size_t n, agt_error_t *err);
void agt_server_close(agtd_t *d);

void agt_client_ref(agt_client_t *c);
void agt_client_unref(agt_client_t *c);
/* Send a reply (result is borrowed). */
void agt_reply(agt_client_t *c, uint64_t id, json_t *result);
void agt_reply_error(agt_client_t *c, uint64_t id, agt_error_t err);
/* Send any message (streams); the message is borrowed. */
void agt_client_send(agt_client_t *c, json_t *msg);
/* Stop reading requests (jail.port while the jail's side connects)... */
void agt_client_hold(agt_client_t *c);
/* ... and go on with requests (the port could not be reached), or ... */
void agt_client_resume(agt_client_t *c);
/* ... carry raw bytes: requests are no longer read; the caller reads and writes c->pipe
 * (until it closes the client), and takes in *pending what the client sent after the request
 * (malloc'd, or NULL with *len 0). */
void agt_client_go_raw(agt_client_t *c, char **pending, size_t *len);
void agt_client_close(agt_client_t *c);
/* The connection becomes a mode (NULL: back to requests); data is handed to its calls. */
void agt_client_set_mode(agt_client_t *c, const struct agt_client_mode *mode, void *data);
/* Close after the replies already queued have been written. */
void agt_client_finish(agt_client_t *c);

#endif
