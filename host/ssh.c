#include "ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

struct agt_ssh_s {
  ssh_session ss;
  ssh_channel ch;
  int fd; /* the bridge's end of the socketpair */
  pthread_t th;
  int running;
  pthread_mutex_t lock;
  char *dropped; /* under lock */
  char *peer;
};

static void set_cloexec(int fd)
{
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

static char *fingerprint(ssh_session ss)
{
  ssh_key key = NULL;
  unsigned char *hash = NULL;
  size_t hlen = 0;
  char *fp, *out;

  if (ssh_get_server_publickey(ss, &key) != SSH_OK)
    return xstrdup("(no host key)");
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0) {
    ssh_key_free(key);
    return xstrdup("(no fingerprint)");
  }
  fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
  out = xasprintf("%s %s", ssh_key_type_to_char(ssh_key_type(key)), fp ? fp : "?");
  ssh_string_free_char(fp);
  ssh_clean_pubkey_hash(&hash);
  ssh_key_free(key);
  return out;
}

static int check_known_hosts(agt_ssh_t *s, const struct agt_ssh_opts *o, agt_error_t *err)
{
  enum ssh_known_hosts_e st = ssh_session_is_known_server(s->ss);
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
                          ssh_get_error(s->ss));
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
    if (ssh_pki_import_privkey_file(o->identity, NULL, NULL, NULL, &key) != SSH_OK)
      return agt_error_kind(err, AGT_E_INVALID,
                            "cannot read the SSH key '%s' (a key without a passphrase, in "
                            "OpenSSH or PEM format)",
                            o->identity);
    rc = ssh_userauth_publickey(s->ss, NULL, key);
    ssh_key_free(key);
  } else {
    rc = ssh_userauth_publickey_auto(s->ss, NULL, NULL);
  }
  if (rc == SSH_AUTH_SUCCESS)
    return 0;
  if (rc == SSH_AUTH_ERROR)
    return agt_error_kind(err, AGT_E_INTERNAL, "ssh authentication at %s: %s", s->peer,
                          ssh_get_error(s->ss));
  return agt_error_kind(err, AGT_E_STATE, "ssh authentication at %s was refused (key %s)", s->peer,
                        o->identity ? o->identity : "from ssh-agent or ~/.ssh");
}

int agt_ssh_connect(const struct agt_ssh_opts *o, agt_ssh_t **out, agt_error_t *err)
{
  agt_ssh_t *s = xzalloc(sizeof *s);
  unsigned port = o->port ? o->port : 22;
  long timeout = o->timeout_s > 0 ? o->timeout_s : 10;
  bool process_config = o->use_ssh_config ? true : false;
  int nodelay = 1;

  *out = NULL;
  s->fd = -1;
  pthread_mutex_init(&s->lock, NULL);
  s->peer = xasprintf("%s@%s:%u", o->user ? o->user : "", o->host, port);
  s->ss = ssh_new();
  if (s->ss == NULL) {
    agt_ssh_free(s);
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot create an ssh session");
  }
  ssh_options_set(s->ss, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  ssh_options_set(s->ss, SSH_OPTIONS_HOST, o->host);
  ssh_options_set(s->ss, SSH_OPTIONS_PORT, &port);
  if (o->user)
    ssh_options_set(s->ss, SSH_OPTIONS_USER, o->user);
  ssh_options_set(s->ss, SSH_OPTIONS_TIMEOUT, &timeout);
  ssh_options_set(s->ss, SSH_OPTIONS_NODELAY, &nodelay);
  if (o->policy == AGT_HOSTKEY_KNOWN_HOSTS && o->known_hosts)
    ssh_options_set(s->ss, SSH_OPTIONS_KNOWNHOSTS, o->known_hosts);
  if (ssh_connect(s->ss) != SSH_OK) {
    agt_error_kind(err, AGT_E_INTERNAL, "ssh to %s: %s", s->peer, ssh_get_error(s->ss));
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

static int write_fd(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void *bridge(void *arg)
{
  agt_ssh_t *s = arg;
  socket_t sfd = ssh_get_fd(s->ss);
  char buf[65536];

  for (;;) {
    struct pollfd pf[2];

    /* channel -> socketpair: everything libssh holds or can read without waiting */
    for (;;) {
      int n = ssh_channel_read_nonblocking(s->ch, buf, sizeof buf, 0);
      if (n == SSH_EOF)
        goto out; /* the far end (agtd) closed the socket */
      if (n < 0) {
        set_dropped(s, ssh_get_error(s->ss));
        goto out;
      }
      if (n == 0)
        break;
      if (write_fd(s->fd, buf, (size_t)n) < 0)
        goto out; /* agt closed its end */
    }
    if (!ssh_is_connected(s->ss)) {
      set_dropped(s, ssh_get_error(s->ss));
      goto out;
    }
    if (ssh_channel_is_eof(s->ch) || ssh_channel_is_closed(s->ch))
      goto out;
    pf[0].fd = s->fd;
    pf[0].events = POLLIN;
    pf[1].fd = sfd;
    pf[1].events = POLLIN;
    pf[0].revents = pf[1].revents = 0;
    if (poll(pf, 2, 1000) < 0) {
      if (errno == EINTR)
        continue;
      set_dropped(s, strerror(errno));
      goto out;
    }
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(s->fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        ssh_channel_send_eof(s->ch);
        goto out;
      }
      for (ssize_t off = 0; off < n;) {
        int w = ssh_channel_write(s->ch, buf + off, (uint32_t)(n - off));
        if (w < 0) {
          set_dropped(s, ssh_get_error(s->ss));
          goto out;
        }
        off += w;
      }
    }
  }
out:
  shutdown(s->fd, SHUT_RDWR);
  return NULL;
}

int agt_ssh_open_unix(agt_ssh_t *s, const char *path, int *fd, agt_error_t *err)
{
  int sp[2];

  *fd = -1;
  s->ch = ssh_channel_new(s->ss);
  if (s->ch == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "ssh channel: %s", ssh_get_error(s->ss));
  if (ssh_channel_open_forward_unix(s->ch, path, "127.0.0.1", 0) != SSH_OK)
    return agt_error_kind(err, AGT_E_STATE,
                          "open a channel to '%s' through %s: %s (is agtd running there, and "
                          "does sshd allow stream-local forwarding?)",
                          path, s->peer, ssh_get_error(s->ss));
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
    return agt_error_make(err, errno, "socketpair");
  set_cloexec(sp[0]);
  set_cloexec(sp[1]);
  s->fd = sp[1];
  if (pthread_create(&s->th, NULL, bridge, s) != 0) {
    close(sp[0]);
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot start the ssh bridge thread");
  }
  s->running = 1;
  *fd = sp[0];
  return 0;
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
    shutdown(s->fd, SHUT_RDWR); /* wakes the bridge if agt's end is still open */
    pthread_join(s->th, NULL);
  }
  if (s->fd >= 0)
    close(s->fd);
  if (s->ch)
    ssh_channel_free(s->ch);
  if (s->ss) {
    if (ssh_is_connected(s->ss))
      ssh_disconnect(s->ss);
    ssh_free(s->ss);
  }
  pthread_mutex_destroy(&s->lock);
  free(s->dropped);
  free(s->peer);
  free(s);
}
