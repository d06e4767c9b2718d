/* agtd's streams, the client's side (docs/PROTOCOL.md, "Streams"), for agt and agtd ctl
 * alike: after jail.attach, jail.logs with follow or jail.exec, the connection carries
 * output frames ({"out"}) and ends with {"exit"}.  The client copies the output to stdout;
 * attached to a terminal it also sends the user's keys ({"in"}) and window size
 * ({"resize"}, again at every SIGWINCH), with the terminal in raw mode, and leaves on the
 * detach keys ({"detach"}). */
#ifndef AGT_STREAM_RELAY_H
#define AGT_STREAM_RELAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "rpc.h"

/* ctrl-] twice: opencode binds neither ctrl-] nor ctrl-p,ctrl-q's ctrl-q but ctrl-p is its
 * command palette; ctrl-] is the console escape of telnet, virsh and systemd-nspawn, which
 * shells and TUIs leave alone (readline's character search, vim's tag jump: one press
 * still reaches the jail). */
#define AGT_DETACH_KEYS_DEFAULT "ctrl-],ctrl-]"
#define AGT_DETACH_KEYS_MAX 8

struct agt_detach_keys {
  unsigned char k[AGT_DETACH_KEYS_MAX];
  size_t n;
};

/* "ctrl-p,ctrl-q": comma-separated keys, each one character or ctrl-CHAR (ctrl-@,
 * ctrl-a..ctrl-z, ctrl-[, ctrl-\, ctrl-], ctrl-^, ctrl-_). */
int agt_detach_keys_parse(const char *spec, struct agt_detach_keys *keys, agt_error_t *err);

enum agt_stream_end {
  AGT_STREAM_EXITED,      /* the jail (or the exec'd command) ended: exit_code */
  AGT_STREAM_DETACHED,    /* the user typed the detach keys, or agt was told to stop */
  AGT_STREAM_INTERRUPTED, /* not attached (an exec on a terminal): SIGTERM or SIGHUP came */
};

struct agt_stream {
  agt_rpc_t *rpc; /* the connection, after the reply that made it a stream */
  /* send stdin to the jail: in raw mode when it is a terminal, with the window size and
   * the detach keys */
  int interactive;
  /* read-only on a terminal: raw mode, the detach keys work, nothing is sent */
  int watch_keys;
  /* stdin is not a terminal: its bytes go as they are, and its end as {"eof"} (exec -i) */
  int pipe_in;
  /* attached to a jail: SIGINT, SIGTERM and SIGHUP detach (from a terminal in raw mode only
   * the last two can come) */
  int attach;
  const struct agt_detach_keys *keys; /* interactive or watch_keys */
  const char *prog;                   /* who says agtd's errors on stderr: "agt" (NULL) */
  /* what happened */
  enum agt_stream_end end;
  int exit_code;
  int signal;    /* AGT_STREAM_INTERRUPTED: which */
  uint64_t next; /* the log offset after the last output received (follow streams) */
  int have_next;
  int closed; /* the connection ended without an exit frame (the error says so) */
};

/* Copy the stream until it ends.  0 when the jail exited or the user detached; -1 on an
 * error (s->closed when the connection ended). */
int agt_stream_run(struct agt_stream *s, agt_error_t *err);

/* The size of the terminal on fd; 0 when there is one. */
int agt_term_size(int fd, unsigned *rows, unsigned *cols);

#endif
