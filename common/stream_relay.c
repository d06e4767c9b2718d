#include "stream_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "proto.h"
#include "termmodes.h"
#include "xalloc.h"

int agt_detach_keys_parse(const char *spec, struct agt_detach_keys *keys, agt_error_t *err)
{
  const char *p = spec;

  keys->n = 0;
  if (spec == NULL || *spec == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "detach keys: none given (e.g. ctrl-],ctrl-])");
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    unsigned char c;

    if (len == 1 && p[0] != ',') {
      c = (unsigned char)p[0];
    } else if (len == 6 && strncmp(p, "ctrl-", 5) == 0 &&
               ((p[5] >= 'a' && p[5] <= 'z') || strchr("@[\\]^_", p[5]))) {
      c = (unsigned char)(p[5] & 0x1f);
    } else {
      return agt_error_kind(err, AGT_E_INVALID,
                            "detach keys '%s': '%.*s' is not a key (a character, or ctrl-a .. "
                            "ctrl-z, ctrl-@, ctrl-[, ctrl-\\, ctrl-], ctrl-^, ctrl-_)",
                            spec, (int)len, p);
    }
    if (keys->n == AGT_DETACH_KEYS_MAX)
      return agt_error_kind(err, AGT_E_INVALID, "detach keys '%s': at most %d keys", spec,
                            AGT_DETACH_KEYS_MAX);
    keys->k[keys->n++] = c;
    if (comma == NULL)
      break;
    p = comma + 1;
    if (*p == '\0')
      return agt_error_kind(err, AGT_E_INVALID, "detach keys '%s': a key is missing after ','",
                            spec);
  }
  return 0;
}

int agt_term_size(int fd, unsigned *rows, unsigned *cols)
{
  struct winsize ws;

  if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
    return -1;
  *rows = ws.ws_row;
  *cols = ws.ws_col;
  return 0;
}

/* Signals turned into bytes on a pipe, so poll() sees them without a race. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
  int saved = errno;
  unsigned char b = (unsigned char)sig;

  if (sig_pipe[1] >= 0 && write(sig_pipe[1], &b, 1) < 0) {
    /* the pipe is full: a signal of each kind is already waiting */
  }
  errno = saved;
}

static const int caught[] = {SIGWINCH, SIGTERM, SIGHUP, SIGINT};

struct session {
  struct agt_stream *s;
  struct sigaction old[sizeof caught / sizeof caught[0]];
  struct termios saved;
  int raw, sigs;
  int in_open;                /* stdin still gives keys */
  size_t matched;             /* detach keys typed so far */
  struct agt_termmodes modes; /* what the jail's program switched on in the terminal */
};

static void set_fl(int fd, int flag)
{
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | flag);
}

static void catch_signals(struct session *ss)
{
  struct sigaction sa;

  if (pipe(sig_pipe) < 0)
    return;
  for (int i = 0; i < 2; i++) {
    set_fl(sig_pipe[i], O_NONBLOCK);
    fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
    sigaction(caught[i], &sa, &ss->old[i]);
  ss->sigs = 1;
}

static void restore(struct session *ss)
{
  if (ss->raw)
    tcsetattr(0, TCSAFLUSH, &ss->saved);
  ss->raw = 0;
  if (ss->sigs) {
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
      sigaction(caught[i], &ss->old[i], NULL);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
  }
  ss->sigs = 0;
}

/* Raw mode as cfmakeraw() sets it (which POSIX does not have): bytes pass as typed, no
 * echo, no signals from keys (ctrl-c goes to the jail), no output processing. */
static void make_raw(struct session *ss)
{
  struct termios t;

  if (!isatty(0) || tcgetattr(0, &ss->saved) < 0)
    return;
  t = ss->saved;
  t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
  t.c_oflag &= ~(tcflag_t)OPOST;
  t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
  t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
  t.c_cflag |= CS8;
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  if (tcsetattr(0, TCSAFLUSH, &t) == 0)
    ss->raw = 1;
}

static int send_msg(struct agt_stream *s, json_t *m, agt_error_t *err)
{
  unsigned char *f;
  size_t n;
  int r;

  if (agt_frame_encode(m, &f, &n, err) < 0) {
    json_decref(m);
    return -1;
  }
  json_decref(m);
  r = agt_rpc_send_raw(s->rpc, f, n, err);
  free(f);
  return r;
}

static int send_resize(struct agt_stream *s, agt_error_t *err)
{
  unsigned rows, cols;

  if (agt_term_size(0, &rows, &cols) < 0 && agt_term_size(1, &rows, &cols) < 0)
    return 0;
  return send_msg(s, json_pack("{s:[i,i]}", "resize", (int)rows, (int)cols), err);
}

static int send_input(struct agt_stream *s, const unsigned char *data, size_t len, agt_error_t *err)
{
  cleanup_free char *b64 = NULL;

  if (len == 0)
    return 0;
  b64 = agt_base64_encode(data, len);
  return send_msg(s, json_pack("{s:s}", "in", b64), err);
}

/* Keys typed: to the jail, except the detach sequence (held back while it may be one).
 * Returns 1 once the detach keys were typed. */
static int keys_in(struct session *ss, const unsigned char *in, size_t n, agt_error_t *err)
{
  const struct agt_detach_keys *k = ss->s->keys;
  unsigned char out[4096 + AGT_DETACH_KEYS_MAX];
  size_t o = 0;

  for (size_t i = 0; i < n; i++) {
    if (k && k->n && in[i] == k->k[ss->matched]) {
      if (++ss->matched == k->n) {
        ss->matched = 0;
        if (ss->s->interactive && send_input(ss->s, out, o, err) < 0)
          return -1;
        return 1;
      }
      continue;
    }
    /* not the sequence after all: what was held back goes to the jail */
    memcpy(out + o, k ? k->k : (const unsigned char *)"", ss->matched);
    o += ss->matched;
    ss->matched = 0;
    if (k && k->n && in[i] == k->k[0]) {
      ss->matched = 1;
      continue;
    }
    out[o++] = in[i];
  }
  if (!ss->s->interactive) /* read-only: only the detach keys count */
    return 0;
  return send_input(ss->s, out, o, err);
}

/* One frame from agtd.  Returns 1 when the stream ended. */
static int frame(struct session *ss, json_t *msg, agt_error_t *err)
{
  struct agt_stream *s = ss->s;
  json_t *v;

  if ((v = json_object_get(msg, "out")) != NULL) {
    size_t len = 0;
    cleanup_free char *data =
        agt_base64_decode(json_is_string(v) ? json_string_value(v) : "", &len);
    json_t *off = json_object_get(msg, "offset");
    if (data == NULL)
      return agt_error_kind(err, AGT_E_PROTO, "agtd sent output that is not base64");
    if (s->interactive || s->watch_keys)
      agt_termmodes_feed(&ss->modes, data, len);
    if (len && fwrite(data, 1, len, stdout) != len)
      return agt_error_make(err, errno, "write to stdout");
    if (fflush(stdout) != 0)
      return agt_error_make(err, errno, "write to stdout");
    if (json_is_integer(off)) {
      s->next = (uint64_t)json_integer_value(off) + len;
      s->have_next = 1;
    }
    return 0;
  }
  if ((v = json_object_get(msg, "exit")) != NULL) {
    s->end = AGT_STREAM_EXITED;
    s->exit_code = (int)json_integer_value(json_object_get(v, "exit_code"));
    return 1;
  }
  if ((v = json_object_get(msg, "error")) != NULL) {
    fprintf(stderr, "%s: agtd: %s%s\n", s->prog ? s->prog : "agt",
            json_string_value(json_object_get(v, "message")), ss->raw ? "\r" : "");
    return 0;
  }
  return 0; /* a frame of a later protocol: not for us */
}

/* exec -i: the command may end before its input does (it read what it wanted), and agtd
 * then closes the connection while agt still sends.  That is not an error: the input stops,
 * and the stream's end, already on its way, says how the command ended. */
static void pipe_send(struct session *ss, json_t *m)
{
  agt_error_t e = NULL;

  if (send_msg(ss->s, m, &e) < 0) {
    agt_error_release(&e);
    ss->in_open = 0;
  }
}

static int loop(struct session *ss, agt_error_t *err)
{
  struct agt_stream *s = ss->s;
  char buf[65536];

  for (;;) {
    struct pollfd pf[3];
    json_t *msg;
    nfds_t n = 0;
    int k, in_i = -1, sig_i = -1;

    /* frames already received first (the reply may have come with some) */
    while ((k = agt_decoder_next(&s->rpc->dec, &msg, err)) != 0) {
      int r;
      if (k < 0)
        return -1;
      r = frame(ss, msg, err);
      json_decref(msg);
      if (r != 0)
        return r < 0 ? -1 : 0;
    }
    pf[n].fd = s->rpc->fd;
    pf[n++].events = POLLIN;
    if ((s->interactive || s->watch_keys || s->pipe_in) && ss->in_open) {
      in_i = (int)n;
      pf[n].fd = 0;
      pf[n++].events = POLLIN;
    }
    if (ss->sigs) {
      sig_i = (int)n;
      pf[n].fd = sig_pipe[0];
      pf[n++].events = POLLIN;
    }
    for (nfds_t i = 0; i < n; i++)
      pf[i].revents = 0;
    if (poll(pf, n, -1) < 0) {
      if (errno == EINTR)
        continue;
      return agt_error_make(err, errno, "poll");
    }
    if (sig_i >= 0 && pf[sig_i].revents) {
      unsigned char sigs[16];
      ssize_t m = read(sig_pipe[0], sigs, sizeof sigs);
      int resize = 0;
      for (ssize_t i = 0; i < m; i++) {
        if (sigs[i] == SIGWINCH) {
          resize = 1;
          continue;
        }
        /* SIGTERM, SIGHUP, SIGINT: leave the jail running, as the detach keys do; a
         * command (exec) ends with agt, as over ssh */
        if (!s->attach) {
          s->end = AGT_STREAM_INTERRUPTED;
          s->signal = sigs[i];
          return 0;
        }
        s->end = AGT_STREAM_DETACHED;
        return send_msg(s, json_pack("{s:b}", "detach", 1), err) < 0 ? -1 : 0;
      }
      if (resize && s->interactive && send_resize(s, err) < 0)
        return -1;
    }
    if (pf[0].revents) {
      ssize_t m = read(s->rpc->fd, buf, sizeof buf);
      if (m < 0 && errno == EINTR)
        continue;
      if (m <= 0) {
        s->closed = 1;
        return agt_error_kind(err, AGT_E_PROTO, "agtd closed the stream");
      }
      agt_decoder_feed(&s->rpc->dec, buf, (size_t)m);
    }
    if (in_i >= 0 && pf[in_i].revents) {
      unsigned char in[4096];
      ssize_t m = read(0, in, sizeof in);
      if (m < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (m <= 0) {
        ss->in_open = 0; /* stdin closed: go on showing output */
        if (s->pipe_in)
          pipe_send(ss, json_pack("{s:b}", "eof", 1));
        continue;
      }
      if (s->pipe_in) {
        cleanup_free char *b64 = agt_base64_encode(in, (size_t)m);
        pipe_send(ss, json_pack("{s:s}", "in", b64));
        continue;
      }
      k = keys_in(ss, in, (size_t)m, err);
      if (k < 0)
        return -1;
      if (k > 0) {
        s->end = AGT_STREAM_DETACHED;
        return send_msg(s, json_pack("{s:b}", "detach", 1), err);
      }
    }
  }
}

int agt_stream_run(struct agt_stream *s, agt_error_t *err)
{
  struct session ss;
  int r;

  memset(&ss, 0, sizeof ss);
  ss.s = s;
  ss.in_open = 1;
  s->closed = 0;
  s->exit_code = 0;
  s->end = AGT_STREAM_EXITED;
  s->signal = 0;
  agt_termmodes_init(&ss.modes);
  fflush(stdout);
  if (s->interactive || s->watch_keys || s->attach)
    catch_signals(&ss);
  if (s->interactive || s->watch_keys) {
    make_raw(&ss);
    if (s->interactive && send_resize(s, err) < 0) {
      restore(&ss);
      return -1;
    }
  }
  r = loop(&ss, err);
  /* Leaving the jail's terminal, by the keys or at its end: switch off what its program
   * left on (the alternate screen, mouse reporting, ...), as tmux does on detach. */
  if (isatty(1)) {
    const char *reset = agt_termmodes_reset(&ss.modes);
    if (*reset) {
      fputs(reset, stdout);
      fflush(stdout);
    }
  }
  restore(&ss);
  return r;
}
