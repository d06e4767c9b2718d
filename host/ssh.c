#include "ssh.h"

#include <errno.h>
#include <fcntl.h>
#ifdef AGT_LIBSSH_SONAME
#include <dlfcn.h>
#endif
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

/* The libssh functions this file calls, each through `lib`.  Built with AGT_LIBSSH_SONAME
 * (Linux, meson option libssh_dlopen), agt loads libssh at its first SSH connection, not at
 * its start: the commands that never open one (target local, or through the keeper, mux.h)
 * then skip loading libssh and what it needs (libcrypto, the Kerberos libraries), which is
 * most of the time the dynamic loader takes for every agt command.  Built without it
 * (macOS: libssh is linked in, statically), `lib` is filled with the linked functions. */
#define LIBSSH_FUNCS(X)                                                                            \
  X(ssh_channel_close)                                                                             \
  X(ssh_channel_free)                                                                              \
  X(ssh_channel_is_closed)                                                                         \
  X(ssh_channel_is_open)                                                                           \
  X(ssh_channel_new)                                                                               \
  X(ssh_channel_open_forward_unix)                                                                 \
  X(ssh_channel_read_nonblocking)                                                                  \
  X(ssh_channel_send_eof)                                                                          \
  X(ssh_channel_window_size)                                                                       \
  X(ssh_channel_write)                                                                             \
  X(ssh_clean_pubkey_hash)                                                                         \
  X(ssh_connect)                                                                                   \
  X(ssh_disconnect)                                                                                \
  X(ssh_free)                                                                                      \
  X(ssh_get_error)                                                                                 \
  X(ssh_get_fd)                                                                                    \
  X(ssh_get_fingerprint_hash)                                                                      \
  X(ssh_get_publickey_hash)                                                                        \
  X(ssh_get_server_publickey)                                                                      \
  X(ssh_is_connected)                                                                              \
  X(ssh_key_free)                                                                                  \
  X(ssh_key_type)                                                                                  \
  X(ssh_key_type_to_char)                                                                          \
  X(ssh_new)                                                                                       \
  X(ssh_options_set)                                                                               \
  X(ssh_pki_import_privkey_file)                                                                   \
  X(ssh_session_is_known_server)                                                                   \
  X(ssh_set_blocking)                                                                              \
  X(ssh_string_free_char)                                                                          \
  X(ssh_userauth_publickey)                                                                        \
  X(ssh_userauth_publickey_auto)

static struct {
#define LIBSSH_FIELD(f) __typeof__(f) *f;
  LIBSSH_FUNCS(LIBSSH_FIELD)
#undef LIBSSH_FIELD
} lib;

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static char *lib_error; /* why libssh could not be loaded */

static void lib_load(void)
{
#ifdef AGT_LIBSSH_SONAME
  /* By its soname, as the dynamic loader would have found it (LD_LIBRARY_PATH, the system's
   * directories); else in the libdir pkg-config gave meson, if it gave one (a prefix of its
   * own, such as Homebrew's). */
  void *h = dlopen(AGT_LIBSSH_SONAME, RTLD_NOW | RTLD_LOCAL);

  if (h == NULL) {
    const char *why = dlerror();
    cleanup_free char *first = xstrdup(why ? why : AGT_LIBSSH_SONAME ": not found");
#ifdef AGT_LIBSSH_DIR
    h = dlopen(AGT_LIBSSH_DIR "/" AGT_LIBSSH_SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (h == NULL) {
      lib_error =
          xasprintf("ssh: cannot load libssh (on Debian: apt-get install libssh-4): %s", first);
      return;
    }
  }
  /* (POSIX's way to store dlsym's answer in a pointer to a function) */
#define LIBSSH_SYM(f)                                                                              \
  if ((*(void **)&lib.f = dlsym(h, #f)) == NULL) {                                                 \
    lib_error = xasprintf("%s has no %s: that libssh is too old for agt", AGT_LIBSSH_SONAME, #f);  \
    return;                                                                                        \
  }
  LIBSSH_FUNCS(LIBSSH_SYM)
#undef LIBSSH_SYM
#else
#define LIBSSH_LINKED(f) lib.f = f;
  LIBSSH_FUNCS(LIBSSH_LINKED)
#undef LIBSSH_LINKED
#endif
}

/* One channel to a unix socket on the far side, bridged to one end of a socketpair. */
#define CHAN_BUF 65536

struct chan {
  ssh_channel ch;
  int fd;              /* the bridge's end (non-blocking); agt holds the other */
  char down[CHAN_BUF]; /* channel -> fd, not yet written */
  size_t down_off, down_len;
  char up[CHAN_BUF]; /* fd -> channel, not yet sent */
  size_t up_off, up_len;
  int rx_eof, rx_shut; /* the channel ended; and the fd was shut for writing */
  int tx_eof, tx_sent; /* agt's end ended; and EOF went to the channel */
  int fd_dead;         /* agt's end is closed: nothing more to write to it */
  struct chan *next;
};

/* A request to the bridge thread to open a channel (libssh is used by one thread only). */
struct open_req {
  const char *path;
  int adopt;            /* >= 0: bridge the channel to this fd (taken over), not a socketpair */
  const char *greeting; /* with adopt: written to the fd first */
  int fd;               /* agt's end, on success */
  char *error;          /* else why not */
  int done;
};

struct agt_ssh_s {
  ssh_session ss;
  struct chan *chans; /* the bridge thread's, while it runs */
  pthread_t th;
  int running;
  int wake[2]; /* the bridge's control pipe: 'o' a request waits, 'q' quit */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct open_req *req; /* under lock */
  int stopped;          /* under lock: the bridge has ended */
  char *dropped;        /* under lock */
  char *peer;
  long timeout_s;      /* connect, authentication, a channel's opening */
  unsigned long moved; /* the bridge's count of chunks moved, to tell a pass did something */
  int nchans;          /* under lock: channels the bridge serves */
};

static void set_cloexec(int fd)
{
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

static void set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static char *fingerprint(ssh_session ss)
{
  ssh_key key = NULL;
  unsigned char *hash = NULL;
  size_t hlen = 0;
  char *fp, *out;

  if (lib.ssh_get_server_publickey(ss, &key) != SSH_OK)
    return xstrdup("(no host key)");
  if (lib.ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0) {
    lib.ssh_key_free(key);
    return xstrdup("(no fingerprint)");
  }
  fp = lib.ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
  out = xasprintf("%s %s", lib.ssh_key_type_to_char(lib.ssh_key_type(key)), fp ? fp : "?");
  lib.ssh_string_free_char(fp);
  lib.ssh_clean_pubkey_hash(&hash);
  lib.ssh_key_free(key);
  return out;
}

static int check_known_hosts(agt_ssh_t *s, const struct agt_ssh_opts *o, agt_error_t *err)
{
  enum ssh_known_hosts_e st = lib.ssh_session_is_known_server(s->ss);
  cleanup_free char *fp = fingerprint(s->ss);
  const char *file = o->known_hosts ? o->known_hosts : "~/.ssh/known_hosts";
  cleanup_free char *hostspec =
      o->port == 22 ? xstrdup(o->host) : xasprintf("[%s]:%u", o->host, o->port);

  switch (st) {
  case SSH_KNOWN_HOSTS_OK:
    return 0;
  case SSH_KNOWN_HOSTS_CHANGED:
    return agt_error_kind(err, AGT_E_STATE,
                          "the host key of %s has CHANGED (it is now %s): this can be an attack; "
                          "if the change is expected, remove the old key "
                          "(ssh-keygen -R '%s' -f %s) and add the new one",
                          s->peer, fp, hostspec, file);
  case SSH_KNOWN_HOSTS_OTHER:
    return agt_error_kind(err, AGT_E_STATE,
                          "%s offers a host key of another type than the one in %s (%s): this "
                          "can be an attack; check it before changing %s",
                          s->peer, file, fp, file);
  case SSH_KNOWN_HOSTS_UNKNOWN:
  case SSH_KNOWN_HOSTS_NOT_FOUND:
    return agt_error_kind(err, AGT_E_STATE,
                          "the host key of %s is not in %s, and agt never accepts one "
                          "unchecked: verify its fingerprint (%s) and add it, for example with "
                          "ssh-keyscan -p %u %s >> %s",
                          s->peer, file, fp, o->port, o->host, file);
  case SSH_KNOWN_HOSTS_ERROR:
  default:
    return agt_error_kind(err, AGT_E_INTERNAL, "check the host key of %s: %s", s->peer,
                          lib.ssh_get_error(s->ss));
  }
}

static int check_pin(agt_ssh_t *s, const struct agt_ssh_opts *o, agt_error_t *err)
{
  cleanup_free char *fp = fingerprint(s->ss);
  cleanup_free char *old = NULL, *line = NULL, *dir = NULL;
  const char *slash;

  if (o->pin_file == NULL)
    return 0;
  old = agt_read_file(o->pin_file, 4096, NULL, NULL);
  if (old) {
    char *sp = strchr(old, ' ');
    long tag = strtol(old, NULL, 10);
    char *nl = sp ? strchr(sp + 1, '\n') : NULL;
    if (nl)
      *nl = '\0';
    if (sp && tag == o->pin_tag && strcmp(sp + 1, fp) != 0)
      return agt_error_kind(err, AGT_E_STATE,
                            "the host key of %s changed while the same Lima host agent (pid %ld) "
                            "kept running: was %s, now %s; refusing, as something else may be "
                            "answering on that port",
                            s->peer, tag, sp + 1, fp);
    if (sp && tag == o->pin_tag)
      return 0;
  }
  slash = strrchr(o->pin_file, '/');
  dir = slash ? xstrndup(o->pin_file, (size_t)(slash - o->pin_file)) : NULL;
  line = xasprintf("%ld %s\n", o->pin_tag, fp);
  if (dir == NULL || agt_mkdir_p(dir, 0700, NULL) == 0)
    agt_write_file(o->pin_file, line, strlen(line), 0600, NULL);
  return 0;
}

static int authenticate(agt_ssh_t *s, const struct agt_ssh_opts *o, agt_error_t *err)
{
  int rc;

  if (o->identity) {
    ssh_key key = NULL;
    if (lib.ssh_pki_import_privkey_file(o->identity, NULL, NULL, NULL, &key) != SSH_OK)
      return agt_error_kind(err, AGT_E_INVALID,
                            "cannot read the SSH key '%s' (a key without a passphrase, in "
                            "OpenSSH or PEM format)",
                            o->identity);
    rc = lib.ssh_userauth_publickey(s->ss, NULL, key);
    lib.ssh_key_free(key);
  } else {
    rc = lib.ssh_userauth_publickey_auto(s->ss, NULL, NULL);
  }
  if (rc == SSH_AUTH_SUCCESS)
    return 0;
  if (rc == SSH_AUTH_ERROR)
    return agt_error_kind(err, AGT_E_INTERNAL, "ssh authentication at %s: %s", s->peer,
                          lib.ssh_get_error(s->ss));
  return agt_error_kind(err, AGT_E_STATE, "ssh authentication at %s was refused (key %s)", s->peer,
                        o->identity ? o->identity : "from ssh-agent or ~/.ssh");
}

int agt_ssh_connect(const struct agt_ssh_opts *o, agt_ssh_t **out, agt_error_t *err)
{
  agt_ssh_t *s;
  unsigned port = o->port ? o->port : 22;
  long timeout = o->timeout_s > 0 ? o->timeout_s : 10;
  bool process_config = o->use_ssh_config ? true : false;
  int nodelay = 1;

  *out = NULL;
  pthread_once(&lib_once, lib_load);
  if (lib_error)
    return agt_error_kind(err, AGT_E_INTERNAL, "%s", lib_error);
  s = xzalloc(sizeof *s);
  s->wake[0] = s->wake[1] = -1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  s->peer = xasprintf("%s@%s:%u", o->user ? o->user : "", o->host, port);
  s->timeout_s = timeout;
  s->ss = lib.ssh_new();
  if (s->ss == NULL) {
    agt_ssh_free(s);
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot create an ssh session");
  }
  lib.ssh_options_set(s->ss, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  lib.ssh_options_set(s->ss, SSH_OPTIONS_HOST, o->host);
  lib.ssh_options_set(s->ss, SSH_OPTIONS_PORT, &port);
  if (o->user)
    lib.ssh_options_set(s->ss, SSH_OPTIONS_USER, o->user);
  lib.ssh_options_set(s->ss, SSH_OPTIONS_TIMEOUT, &timeout);
  lib.ssh_options_set(s->ss, SSH_OPTIONS_NODELAY, &nodelay);
  if (o->policy == AGT_HOSTKEY_KNOWN_HOSTS && o->known_hosts)
    lib.ssh_options_set(s->ss, SSH_OPTIONS_KNOWNHOSTS, o->known_hosts);
  if (lib.ssh_connect(s->ss) != SSH_OK) {
    agt_error_kind(err, AGT_E_INTERNAL, "ssh to %s: %s", s->peer, lib.ssh_get_error(s->ss));
    agt_ssh_free(s);
    return -1;
  }
  if ((o->policy == AGT_HOSTKEY_KNOWN_HOSTS ? check_known_hosts(s, o, err) : check_pin(s, o, err)) <
          0 ||
      authenticate(s, o, err) < 0) {
    agt_ssh_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

static void set_dropped(agt_ssh_t *s, const char *why)
{
  pthread_mutex_lock(&s->lock);
  if (s->dropped == NULL)
    s->dropped = xasprintf("the ssh connection to %s dropped: %s", s->peer, why);
  pthread_mutex_unlock(&s->lock);
}

/* The bridge thread.  Each pass moves what it can between every channel and its socketpair
 * without blocking on agt's side: data from a channel is read only once the previous chunk
 * reached agt, so a reader that does not keep up holds its own channel back (its SSH
 * window fills and agtd waits), never the other channels; data to a channel is sent only
 * within the window the far side granted. */

static void chan_free(struct chan *c)
{
  if (c->ch) {
    if (lib.ssh_channel_is_open(c->ch))
      lib.ssh_channel_close(c->ch);
    lib.ssh_channel_free(c->ch);
  }
  if (c->fd >= 0)
    close(c->fd);
  free(c);
}

static void flush_down(struct chan *c)
{
  while (c->down_len > 0) {
    ssize_t w = write(c->fd, c->down + c->down_off, c->down_len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (w <= 0) { /* agt closed its end */
      c->fd_dead = 1;
      c->down_len = 0;
      return;
    }
    c->down_off += (size_t)w;
    c->down_len -= (size_t)w;
  }
  c->down_off = 0;
}

/* Move one channel's data.  Returns -1 when the session failed, 1 when the channel is
 * done with, 0 otherwise. */
static int pump(agt_ssh_t *s, struct chan *c)
{
  /* a bounded number of chunks, so one busy channel does not starve the others */
  for (int i = 0; i < 16 && !c->rx_eof && !c->fd_dead && c->down_len == 0; i++) {
    int n = lib.ssh_channel_read_nonblocking(c->ch, c->down, sizeof c->down, 0);
    if (n == SSH_EOF || (n == 0 && lib.ssh_channel_is_closed(c->ch))) {
      c->rx_eof = 1;
      break;
    }
    if (n < 0) {
      if (!lib.ssh_is_connected(s->ss))
        return -1;
      c->rx_eof = 1;
      break;
    }
    if (n == 0)
      break;
    c->down_len = (size_t)n;
    c->down_off = 0;
    s->moved++;
    flush_down(c);
  }
  flush_down(c);
  if (c->rx_eof && c->down_len == 0 && !c->rx_shut && !c->fd_dead) {
    shutdown(c->fd, SHUT_WR); /* agt reads end-of-file */
    c->rx_shut = 1;
  }
  if (c->up_len > 0) {
    uint32_t win = lib.ssh_channel_window_size(c->ch);
    if (lib.ssh_channel_is_closed(c->ch)) {
      c->up_len = 0;
      c->tx_eof = c->tx_sent = 1;
    } else if (win > 0) {
      uint32_t k = c->up_len < win ? (uint32_t)c->up_len : win;
      int w = lib.ssh_channel_write(c->ch, c->up + c->up_off, k);
      if (w < 0) {
        if (!lib.ssh_is_connected(s->ss))
          return -1;
        c->up_len = 0;
        c->tx_eof = c->tx_sent = 1;
      } else {
        s->moved++;
        c->up_off += (size_t)w;
        c->up_len -= (size_t)w;
        if (c->up_len == 0)
          c->up_off = 0;
      }
    }
  }
  if (c->tx_eof && c->up_len == 0 && !c->tx_sent) {
    if (!lib.ssh_channel_is_closed(c->ch))
      lib.ssh_channel_send_eof(c->ch);
    c->tx_sent = 1;
  }
  return c->fd_dead || (c->rx_shut && c->tx_sent);
}

static void read_up(struct chan *c)
{
  ssize_t n;

  do
    n = read(c->fd, c->up, sizeof c->up);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    c->up_off = 0;
    c->up_len = (size_t)n;
  } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
    c->tx_eof = 1;
  }
}

/* Acknowledge at once what the session's socket has delivered so far.
 *
 * Right after authentication OpenSSH's sshd writes a few small messages of its own (its
 * host keys, debug notices), and it leaves Nagle's algorithm on for sessions without a
 * terminal: its answer to agt's channel open then waits until agt has acknowledged them.
 * agt, having nothing more to send, would acknowledge them only when its delayed-ACK timer
 * fires (40 ms on Linux): every agt command paid that.  TCP_QUICKACK sends the pending
 * acknowledgement now when the receive queue is empty, so it is set after libssh has read.
 * Other systems have no such option; their delayed ACK is left as it is. */
static void ack_now(agt_ssh_t *s)
{
#ifdef TCP_QUICKACK
  int one = 1;
  socket_t fd = lib.ssh_get_fd(s->ss);

  if (fd != SSH_INVALID_SOCKET)
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
#else
  (void)s;
#endif
}

/* ssh_channel_open_forward_unix, with what arrives meanwhile acknowledged at once (above).
 * The session is non-blocking only in here.  SSH_AGAIN: no answer within the connection's
 * timeout. */
static int open_forward_unix(agt_ssh_t *s, ssh_channel ch, const char *path)
{
  socket_t fd = lib.ssh_get_fd(s->ss);
  int rc;

  lib.ssh_set_blocking(s->ss, 0);
  for (;;) {
    struct pollfd pf = {fd, POLLIN, 0};
    rc = lib.ssh_channel_open_forward_unix(ch, path, "127.0.0.1", 0);
    ack_now(s);
    if (rc != SSH_AGAIN)
      break;
    if (poll(&pf, 1, (int)(s->timeout_s * 1000)) == 0)
      break; /* SSH_AGAIN: no answer in time */
  }
  lib.ssh_set_blocking(s->ss, 1);
  return rc;
}

/* Open a channel and bridge it to one end of a new socketpair (*fd: the other end), or, when
 * adopt >= 0, to that fd itself, which then gets `greeting` before anything else. */
static int open_channel(agt_ssh_t *s, const char *path, int adopt, const char *greeting, int *fd,
                        char **why)
{
  struct chan *c;
  int sp[2], rc;

  *fd = -1;
  c = xzalloc(sizeof *c);
  c->fd = -1;
  c->ch = lib.ssh_channel_new(s->ss);
  if (c->ch == NULL) {
    *why = xasprintf("ssh channel: %s", lib.ssh_get_error(s->ss));
    chan_free(c);
    return -1;
  }
  rc = open_forward_unix(s, c->ch, path);
  if (rc == SSH_AGAIN) {
    *why = xasprintf("open a channel to '%s' through %s: no answer in %ld s", path, s->peer,
                     s->timeout_s);
    chan_free(c);
    return -1;
  }
  if (rc != SSH_OK) {
    *why = xasprintf("open a channel to '%s' through %s: %s (is agtd running there, and does "
                     "sshd allow stream-local forwarding?)",
                     path, s->peer, lib.ssh_get_error(s->ss));
    chan_free(c);
    return -1;
  }
  if (adopt >= 0) {
    sp[0] = adopt;
    sp[1] = adopt;
    c->down_len = strlen(greeting) < sizeof c->down ? strlen(greeting) : 0;
    memcpy(c->down, greeting, c->down_len);
  } else if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0) {
    *why = xasprintf("socketpair: %s", strerror(errno));
    chan_free(c);
    return -1;
  } else {
    set_cloexec(sp[0]);
  }
  set_cloexec(sp[1]);
  set_nonblock(sp[1]);
  c->fd = sp[1];
  c->next = s->chans;
  s->chans = c;
  pthread_mutex_lock(&s->lock);
  s->nchans++;
  pthread_mutex_unlock(&s->lock);
  *fd = sp[0];
  return 0;
}

static void serve_request(agt_ssh_t *s)
{
  struct open_req *r;
  char *why = NULL;
  int fd = -1;

  pthread_mutex_lock(&s->lock);
  r = s->req;
  pthread_mutex_unlock(&s->lock);
  if (r == NULL || r->done)
    return;
  if (open_channel(s, r->path, r->adopt, r->greeting, &fd, &why) < 0 &&
      !lib.ssh_is_connected(s->ss))
    set_dropped(s, lib.ssh_get_error(s->ss));
  pthread_mutex_lock(&s->lock);
  r->fd = fd;
  r->error = why;
  r->done = 1;
  s->req = NULL;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

/* On quit: what agt wrote last (a detach, say) still goes out before the channels close. */
static void drain_up(agt_ssh_t *s)
{
  for (struct chan *c = s->chans; c; c = c->next) {
    for (int i = 0; i < 64 && !c->tx_sent; i++) {
      if (c->up_len == 0 && !c->tx_eof)
        read_up(c);
      if (c->up_len == 0)
        break;
      if (pump(s, c) < 0)
        return;
    }
  }
}

static void *bridge(void *arg)
{
  agt_ssh_t *s = arg;
  socket_t sfd = lib.ssh_get_fd(s->ss);
  struct pollfd *pf = NULL;
  struct chan **pc = NULL;
  size_t cap = 0;

  for (;;) {
    size_t n = 0, nch = 0;
    int want_session = 0, stalled = 0, busy = 0, k;

    /* Passes until nothing moves (reading one channel can make libssh take in data for
     * another), at most a few before agt's side is looked at again. */
    for (int pass = 0; pass < 8; pass++) {
      unsigned long before = s->moved;
      want_session = stalled = 0;
      nch = 0;
      for (struct chan **pp = &s->chans; *pp;) {
        struct chan *c = *pp;
        int r = pump(s, c);
        if (r < 0) {
          set_dropped(s, lib.ssh_get_error(s->ss));
          goto out;
        }
        if (r > 0) {
          *pp = c->next;
          chan_free(c);
          pthread_mutex_lock(&s->lock);
          s->nchans--;
          pthread_mutex_unlock(&s->lock);
          continue;
        }
        /* reading an idle channel makes libssh process what the session received */
        if (!c->rx_eof && c->down_len == 0)
          want_session = 1;
        if (c->up_len > 0)
          stalled = 1; /* waits for the far side's window */
        nch++;
        pp = &c->next;
      }
      busy = s->moved != before;
      if (!busy)
        break;
    }
    if (s->chans && !lib.ssh_is_connected(s->ss)) {
      set_dropped(s, lib.ssh_get_error(s->ss));
      goto out;
    }
    if (nch + 2 > cap) {
      cap = nch + 8;
      pf = xrealloc(pf, cap * sizeof *pf);
      pc = xrealloc(pc, cap * sizeof *pc);
    }
    pf[n].fd = s->wake[0];
    pf[n].events = POLLIN;
    pc[n++] = NULL;
    if (want_session) {
      pf[n].fd = sfd;
      pf[n].events = POLLIN;
      pc[n++] = NULL;
    }
    for (struct chan *c = s->chans; c; c = c->next) {
      short ev = 0;
      if (c->up_len == 0 && !c->tx_eof && !c->fd_dead)
        ev |= POLLIN;
      if (c->down_len > 0)
        ev |= POLLOUT;
      if (ev == 0)
        continue;
      pf[n].fd = c->fd;
      pf[n].events = ev;
      pc[n++] = c;
    }
    for (size_t i = 0; i < n; i++)
      pf[i].revents = 0;
    k = poll(pf, (nfds_t)n, busy ? 0 : stalled && !want_session ? 50 : 1000);
    if (k < 0 && errno != EINTR) {
      set_dropped(s, strerror(errno));
      goto out;
    }
    if (k <= 0)
      continue;
    if (pf[0].revents) {
      char cmd[16];
      ssize_t m = read(s->wake[0], cmd, sizeof cmd);
      for (ssize_t i = 0; i < m; i++)
        if (cmd[i] == 'q') {
          drain_up(s);
          goto out;
        }
      serve_request(s);
    }
    for (size_t i = 0; i < n; i++)
      if (pc[i] && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && pc[i]->up_len == 0 &&
          !pc[i]->tx_eof)
        read_up(pc[i]);
  }
out:
  free(pf);
  free(pc);
  pthread_mutex_lock(&s->lock);
  s->stopped = 1;
  if (s->req && !s->req->done) {
    s->req->error = xstrdup(s->dropped ? s->dropped : "the ssh connection is closing");
    s->req->done = 1;
    s->req = NULL;
  }
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  /* agt's ends see end-of-file */
  for (struct chan *c = s->chans; c; c = c->next)
    shutdown(c->fd, SHUT_RDWR);
  return NULL;
}

static int start_bridge(agt_ssh_t *s, agt_error_t *err)
{
  if (s->running)
    return 0;
  if (pipe(s->wake) < 0)
    return agt_error_make(err, errno, "pipe");
  set_cloexec(s->wake[0]);
  set_cloexec(s->wake[1]);
  set_nonblock(s->wake[0]);
  if (pthread_create(&s->th, NULL, bridge, s) != 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot start the ssh bridge thread");
  s->running = 1;
  return 0;
}

static int request_channel(agt_ssh_t *s, const char *path, int adopt, const char *greeting, int *fd,
                           agt_error_t *err)
{
  struct open_req r = {path, adopt, greeting, -1, NULL, 0};
  int ret = 0;

  *fd = -1;
  if (start_bridge(s, err) < 0)
    return -1;
  pthread_mutex_lock(&s->lock);
  while (s->req && !s->stopped) /* one request at a time */
    pthread_cond_wait(&s->cond, &s->lock);
  if (s->stopped) {
    ret = agt_error_kind(err, AGT_E_STATE, "%s",
                         s->dropped ? s->dropped : "the ssh connection is closed");
    pthread_mutex_unlock(&s->lock);
    return ret;
  }
  s->req = &r;
  pthread_mutex_unlock(&s->lock);
  if (write(s->wake[1], "o", 1) != 1) {
    pthread_mutex_lock(&s->lock);
    s->req = NULL;
    pthread_mutex_unlock(&s->lock);
    return agt_error_make(err, errno, "wake the ssh bridge");
  }
  pthread_mutex_lock(&s->lock);
  while (!r.done)
    pthread_cond_wait(&s->cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
  if (r.fd < 0) {
    ret = agt_error_kind(err, AGT_E_STATE, "%s", r.error ? r.error : "cannot open a channel");
    free(r.error);
    return ret;
  }
  free(r.error);
  *fd = r.fd;
  return 0;
}

int agt_ssh_open_unix(agt_ssh_t *s, const char *path, int *fd, agt_error_t *err)
{
  return request_channel(s, path, -1, NULL, fd, err);
}

int agt_ssh_adopt_unix(agt_ssh_t *s, const char *path, int fd, const char *greeting,
                       agt_error_t *err)
{
  int got;

  return request_channel(s, path, fd, greeting, &got, err);
}

int agt_ssh_channels(agt_ssh_t *s)
{
  int n;

  pthread_mutex_lock(&s->lock);
  n = s->nchans;
  pthread_mutex_unlock(&s->lock);
  return n;
}

const char *agt_ssh_dropped(agt_ssh_t *s)
{
  const char *d;

  pthread_mutex_lock(&s->lock);
  d = s->dropped;
  pthread_mutex_unlock(&s->lock);
  return d;
}

const char *agt_ssh_peer(agt_ssh_t *s)
{
  return s->peer;
}

void agt_ssh_free(agt_ssh_t *s)
{
  if (s == NULL)
    return;
  if (s->running) {
    if (write(s->wake[1], "q", 1) != 1) {
      /* the pipe cannot be full of more than a few bytes; nothing else to do */
    }
    pthread_join(s->th, NULL);
  }
  while (s->chans) {
    struct chan *c = s->chans;
    s->chans = c->next;
    chan_free(c);
  }
  for (int i = 0; i < 2; i++)
    if (s->wake[i] >= 0)
      close(s->wake[i]);
  if (s->ss) {
    if (lib.ssh_is_connected(s->ss))
      lib.ssh_disconnect(s->ss);
    lib.ssh_free(s->ss);
  }
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->lock);
  free(s->dropped);
  free(s->peer);
  free(s);
}
