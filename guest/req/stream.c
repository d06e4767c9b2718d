#include "stream.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "daemon.h"
#include "jail.h"
#include "log.h"
#include "server.h"
#include "xalloc.h"

#define REPLAY_CHUNK (256u * 1024)

static void send_out(agt_stream_t *s, const char *data, size_t len, uint64_t offset)
{
  char *b64 = agt_base64_encode(data, len);
  json_t *m = json_pack("{s:s, s:I}", "out", b64, "offset", (json_int_t)offset);

  agt_client_send(s->client, m);
  json_decref(m);
  free(b64);
}

static uint64_t log_end(struct agt_jail_s *j)
{
  return j->out.log.pos.base + j->out.log.pos.size;
}

static int stream_behind(agt_stream_t *s)
{
  return s->kind == AGT_STREAM_FOLLOW && s->replay < log_end(s->jail);
}

/* Resume the jail's output once no stream is replaying or behind. */
static void maybe_resume(struct agt_jail_s *j)
{
  if (!j->out.paused)
    return;
  for (agt_stream_t *s = j->out.streams; s; s = s->next)
    if (stream_behind(s) || s->client->out_queued > AGT_STREAM_LOW)
      return;
  agt_jail_output_pause(j, 0);
}

static void replay_some(agt_stream_t *s)
{
  struct agt_jail_s *j = s->jail;

  while (stream_behind(s) && s->client->out_queued < AGT_STREAM_HIGH && !s->client->closed) {
    char *data;
    size_t len;
    uint64_t start;
    agt_error_t err = NULL;

    if (agt_jail_log_read(j, s->replay, REPLAY_CHUNK, &data, &len, &start, &err) < 0) {
      agt_log_warning("jail '%s': replay for a follower: %s", j->rec.name, err->msg);
      agt_error_release(&err);
      s->replay = log_end(j);
      break;
    }
    if (len == 0) {
      free(data);
      s->replay = log_end(j);
      break;
    }
    send_out(s, data, len, start);
    free(data);
    s->replay = start + len;
  }
}

static void stream_close(agt_stream_t *s);
static void stream_drained(agt_stream_t *s);
static void stream_input(agt_stream_t *s, json_t *msg);

static void mode_input(void *data, json_t *msg)
{
  stream_input(data, msg);
}

static void mode_drained(void *data)
{
  stream_drained(data);
}

static void mode_gone(void *data)
{
  stream_close(data);
}

static const struct agt_client_mode stream_mode = {
    .name = "stream",
    .input = mode_input,
    .drained = mode_drained,
    .gone = mode_gone,
    .keep_on_eof = 1,
    .out_slack = AGT_STREAM_HIGH, /* the jail's output is paused there */
};

agt_stream_t *agt_stream_open(struct agt_jail_s *j, struct agt_client_s *c,
                              enum agt_stream_kind kind, uint64_t from, int want_write)
{
  agt_stream_t *s = xzalloc(sizeof *s);

  s->jail = j;
  s->client = c;
  s->kind = kind;
  agt_client_set_mode(c, &stream_mode, s);
  if (want_write && j->rec.tty) {
    agt_stream_t *o;
    for (o = j->out.streams; o; o = o->next)
      if (o->writer)
        break;
    s->writer = o == NULL; /* one writer at a time: the first that asked */
  }
  s->next = j->out.streams;
  j->out.streams = s;
  j->out.nstreams++;
  if (kind == AGT_STREAM_ATTACH) {
    /* What the terminal showed lately, so the screen is not blank; the resize the client
     * sends next makes the agent redraw it properly. */
    if (j->out.screen_len)
      send_out(s, j->out.screen, j->out.screen_len, log_end(j) - j->out.screen_len);
  } else {
    s->replay = from;
    if (stream_behind(s))
      agt_jail_output_pause(j, 1); /* the file first, then live output, in order */
    replay_some(s);
    maybe_resume(j);
  }
  return s;
}

static void stream_close(agt_stream_t *s)
{
  struct agt_jail_s *j = s->jail;
  agt_stream_t **p;

  for (p = &j->out.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      j->out.nstreams--;
      break;
    }
  agt_client_set_mode(s->client, NULL, NULL);
  free(s);
  maybe_resume(j);
}

static void stream_drained(agt_stream_t *s)
{
  replay_some(s);
  maybe_resume(s->jail);
}

static void set_winsize(struct agt_jail_s *j, unsigned rows, unsigned cols)
{
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

  if (j->out.tty_fd >= 0)
    ioctl(j->out.tty_fd, TIOCSWINSZ, &ws);
  j->out.rows = (unsigned short)rows;
  j->out.cols = (unsigned short)cols;
}

/* The writer's input is read while the jail takes it: above this much queued for its
 * terminal, agtd stops reading the client until the jail has read most of it (as jail.exec
 * does), so a client that types or pastes faster than the jail reads is not buffered
 * without bound. */
#define IN_HIGH (1u << 20)
#define IN_LOW (256u << 10)

struct tty_write {
  uv_write_t req;
  char *data;
  struct agt_jail_s *j;
};

static void tty_write_done(uv_write_t *w, int status)
{
  struct tty_write *tw = (struct tty_write *)w;

  (void)status;
  if (uv_stream_get_write_queue_size(w->handle) < IN_LOW)
    for (agt_stream_t *s = tw->j->out.streams; s; s = s->next)
      if (s->holding) {
        s->holding = 0;
        agt_client_resume(s->client);
      }
  free(tw->data);
  free(tw);
}

static void stream_error(agt_stream_t *s, const char *msg)
{
  json_t *m = json_pack("{s:{s:s, s:s}}", "error", "kind", "invalid", "message", msg);
  agt_client_send(s->client, m);
  json_decref(m);
}

static void stream_input(agt_stream_t *s, json_t *msg)
{
  struct agt_jail_s *j = s->jail;
  json_t *v;

  if ((v = json_object_get(msg, "in")) != NULL) {
    size_t len;
    char *data;
    struct tty_write *tw;
    uv_buf_t b;

    if (!s->writer || !j->out.tty_open) {
      stream_error(s, s->writer ? "the jail's terminal is closed"
                                : "this client is attached read-only (another one writes)");
      return;
    }
    data = json_is_string(v) ? agt_base64_decode(json_string_value(v), &len) : NULL;
    if (data == NULL) {
      stream_error(s, "'in' must be base64");
      return;
    }
    tw = xzalloc(sizeof *tw);
    tw->data = data;
    tw->j = j;
    b = uv_buf_init(data, (unsigned)len);
    if (uv_write(&tw->req, (uv_stream_t *)&j->out.tty_pipe, &b, 1, tty_write_done) < 0) {
      free(data);
      free(tw);
    } else if (uv_stream_get_write_queue_size((uv_stream_t *)&j->out.tty_pipe) > IN_HIGH &&
               !s->holding) {
      s->holding = 1;
      agt_client_hold(s->client);
    }
    return;
  }
  if ((v = json_object_get(msg, "resize")) != NULL) {
    json_int_t rows = json_integer_value(json_array_get(v, 0));
    json_int_t cols = json_integer_value(json_array_get(v, 1));
    if (!json_is_array(v) || rows < 1 || rows > 1000 || cols < 1 || cols > 1000) {
      stream_error(s, "'resize' takes [rows, cols] within 1..1000");
      return;
    }
    if (!s->writer)
      return; /* the writer's window decides the size */
    if (rows == j->out.rows && cols == j->out.cols && cols > 1)
      set_winsize(j, (unsigned)rows, (unsigned)cols - 1); /* a change, so the agent redraws */
    set_winsize(j, (unsigned)rows, (unsigned)cols);
    return;
  }
  if (json_is_true(json_object_get(msg, "detach"))) {
    agt_client_close(s->client); /* closes the stream too */
    return;
  }
  stream_error(s, "a stream takes 'in', 'resize' or 'detach'");
}

static void jail_output(struct agt_jail_s *j, const char *data, size_t len)
{
  /* in the log already (the keeper wrote it): the log ends after it */
  uint64_t offset = log_end(j) >= len ? log_end(j) - len : 0;
  int pause = 0;

  if (j->out.screen == NULL)
    j->out.screen = xmalloc(AGT_SCREEN_MAX);
  if (len >= AGT_SCREEN_MAX) {
    memcpy(j->out.screen, data + len - AGT_SCREEN_MAX, AGT_SCREEN_MAX);
    j->out.screen_len = AGT_SCREEN_MAX;
  } else {
    if (j->out.screen_len + len > AGT_SCREEN_MAX) {
      size_t drop = j->out.screen_len + len - AGT_SCREEN_MAX;
      memmove(j->out.screen, j->out.screen + drop, j->out.screen_len - drop);
      j->out.screen_len -= drop;
    }
    memcpy(j->out.screen + j->out.screen_len, data, len);
    j->out.screen_len += len;
  }
  for (agt_stream_t *s = j->out.streams; s; s = s->next) {
    if (s->kind == AGT_STREAM_FOLLOW) {
      if (s->replay < offset || s->replay >= offset + len)
        continue; /* still replaying (it reads this from the log), or read it there */
      size_t skip = (size_t)(s->replay - offset);
      s->replay = offset + len;
      send_out(s, data + skip, len - skip, offset + skip);
    } else {
      send_out(s, data, len, offset);
    }
    if (s->client->out_queued > AGT_STREAM_HIGH)
      pause = 1;
  }
  if (pause)
    agt_jail_output_pause(j, 1);
}

static void jail_end(struct agt_jail_s *j, json_t *info)
{
  json_t *m = json_pack("{s:O}", "exit", info);

  while (j->out.streams) {
    agt_stream_t *s = j->out.streams;
    struct agt_client_s *c = s->client;

    stream_close(s);
    agt_client_send(c, m);
    agt_client_finish(c); /* close once everything queued is written */
  }
  json_decref(m);
}

const struct agt_output_watch agt_stream_watch = {
    .output = jail_output,
    .end = jail_end,
};
