#include "mux.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

static uint64_t fnv1a(const char *s)
{
  uint64_t h = 14695981039346656037ULL;

  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

static char *mux_dir(agt_error_t *err)
{
  const char *x = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
  char *dir;

  /* $TMPDIR: macOS gives each user one of their own */
  if (x && x[0] == '/')
    dir = xasprintf("%s/agt", x);
  else
    dir = xasprintf("%s/agt-%lu", tmp && tmp[0] == '/' ? tmp : "/tmp", (unsigned long)getuid());
  struct stat st;

  if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
    agt_error_make(err, errno, "make the directory of agt's connection keeper '%s'", dir);
    free(dir);
    return NULL;
  }
  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 077) != 0) {
    agt_error_kind(err, AGT_E_STATE,
                   "'%s' must be a directory of yours that only you can reach (mode 0700) to "
                   "hold agt's connection keeper: remove it, or set ssh.persist: 0",
                   dir);
    free(dir);
    return NULL;
  }
  return dir;
}

int agt_mux_init(struct agt_mux *m, const char *key, agt_error_t *err)
{
  cleanup_free char *dir = mux_dir(err);
  struct sockaddr_un sa;

  if (dir == NULL)
    return -1;
  m->path = xasprintf("%s/%016llx.sock", dir, (unsigned long long)fnv1a(key));
  if (strlen(m->path) >= sizeof sa.sun_path) {
    agt_error_kind(err, AGT_E_INVALID,
                   "the socket of agt's connection keeper '%s' is too long for a unix socket: "
                   "set XDG_RUNTIME_DIR to a shorter directory, or ssh.persist: 0",
                   m->path);
    free(m->path);
    m->path = NULL;
    return -1;
  }
  return 0;
}

void agt_mux_release(struct agt_mux *m)
{
  free(m->path);
  m->path = NULL;
}

static void set_sockaddr(struct sockaddr_un *sa, const char *path)
{
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path, path, strlen(path) + 1);
}

static ssize_t read_full(int fd, char *buf, size_t len)
{
  size_t got = 0;

  while (got < len) {
    ssize_t n = read(fd, buf + got, len - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 && got == 0 ? -1 : (ssize_t)got;
    got += (size_t)n;
  }
  return (ssize_t)got;
}

/* An 'e' answer (keeper or start pipe): "KIND\nMESSAGE". */
static int read_error(int fd, agt_error_t *err)
{
  char buf[4096];
  ssize_t n = read_full(fd, buf, sizeof buf - 1);
  char *nl;
  long kind;

  buf[n > 0 ? n : 0] = '\0';
  nl = strchr(buf, '\n');
  kind = strtol(buf, NULL, 10);
  if (nl == NULL || kind < AGT_E_INTERNAL || kind > AGT_E_LIMIT)
    return agt_error_kind(err, AGT_E_INTERNAL, "agt's connection keeper answered badly");
  return agt_error_kind(err, (enum agt_errkind)kind, "%s", nl + 1);
}

static void write_error(int fd, char tag, agt_error_t e)
{
  cleanup_free char *s = xasprintf("%c%d\n%s", tag, (int)e->kind, e->msg);
  size_t len = strlen(s);

  if (write(fd, s, len) != (ssize_t)len) {
    /* the other side went away: nobody to tell */
  }
}

/* A line of at most len - 1 bytes, up to '\n' (not kept); -1 on a short read. */
static int read_line(int fd, char *buf, size_t len)
{
  size_t n = 0;

  while (n + 1 < len) {
    ssize_t r = read(fd, buf + n, 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    if (buf[n] == '\n')
      break;
    n++;
  }
  buf[n] = '\0';
  return 0;
}

/* 1: connected through a live keeper (*fd, and *peer "user@host:port"); 0: no keeper
 * answers; 2: the keeper's SSH connection had dropped (*peer: why); -1: the keeper
 * answered with an error. */
static int try_keeper(struct agt_mux *m, int *fd, char **peer, agt_error_t *err)
{
  struct sockaddr_un sa;
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  char c, line[512];
  struct timeval wait = {0, 0};
  ssize_t n;

  *fd = -1;
  *peer = NULL;
  if (s < 0)
    return agt_error_make(err, errno, "socket");
  fcntl(s, F_SETFD, FD_CLOEXEC);
  set_sockaddr(&sa, m->path);
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    close(s);
    /* ECONNREFUSED: a keeper died without removing its socket; the next one replaces it */
    if (e == ENOENT || e == ECONNREFUSED)
      return 0;
    return agt_error_make(err, e, "connect to agt's connection keeper '%s'", m->path);
  }
  /* The keeper answers once it has opened the channel, which its SSH connection bounds
   * (ssh.connect_timeout); a keeper stuck past that is said, not waited for. */
  wait.tv_sec = (time_t)m->timeout_s + 5;
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  do
    n = read(s, &c, 1);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    close(s);
    return agt_error_kind(err, AGT_E_STATE,
                          "agt's connection keeper did not answer in %ld s: remove '%s' to "
                          "have the next command make a new connection",
                          (long)wait.tv_sec, m->path);
  }
  if (n == 1 && c == 'k' && read_line(s, line, sizeof line) == 0) {
    wait.tv_sec = 0; /* from here on agtd's stream: no deadline */
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    *fd = s;
    *peer = xstrdup(line);
    return 1;
  }
  if (n == 1 && c == 'e') {
    read_error(s, err);
    close(s);
    return -1;
  }
  if (n == 1 && c == 'd' && read_line(s, line, sizeof line) == 0) {
    close(s);
    *peer = xstrdup(line);
    return 2;
  }
  close(s);
  return 0;
}

/* The keeper: serve until the connection drops, the socket goes, or idle_s pass with no
 * channel open. */
static void serve(struct agt_mux *m, agt_ssh_t *ssh, int lfd)
{
  struct stat mine, now;
  time_t idle_since = time(NULL), dropped_at = 0;
  cleanup_free char *greeting = xasprintf("k%s\n", agt_ssh_peer(ssh));

  if (fstat(lfd, &mine) < 0 || stat(m->path, &mine) < 0)
    return;
  for (;;) {
    struct pollfd pf = {lfd, POLLIN, 0};
    int k = poll(&pf, 1, 1000);
    agt_error_t e = NULL;
    int cfd;

    if (stat(m->path, &now) < 0 || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev)
      return; /* removed or replaced (by the next keeper): not ours to unlink */
    /* A dropped connection: the keeper stays a while to tell the next client why (the
     * stream that ended with it, say), which then starts a new keeper in its place. */
    if (dropped_at == 0 && agt_ssh_dropped(ssh))
      dropped_at = time(NULL);
    if (dropped_at && time(NULL) - dropped_at >= 60)
      break;
    if (agt_ssh_channels(ssh) > 0)
      idle_since = time(NULL);
    else if (time(NULL) - idle_since >= (time_t)m->idle_s)
      break;
    if (k <= 0)
      continue;
    cfd = accept(lfd, NULL, NULL);
    if (cfd < 0)
      continue;
    fcntl(cfd, F_SETFD, FD_CLOEXEC);
    /* Who may connect is settled by the socket's directory (0700, the user's own, checked
     * by every client before it connects) and mode (0600); a peer-credential check would
     * need SO_PEERCRED or getpeereid, neither in POSIX. */
    idle_since = time(NULL);
    if (dropped_at == 0 && agt_ssh_adopt_unix(ssh, m->agtd_socket, cfd, greeting, &e) == 0)
      continue;
    if (agt_ssh_dropped(ssh)) {
      cleanup_free char *d = xasprintf("d%s\n", agt_ssh_dropped(ssh));
      if (dropped_at == 0)
        dropped_at = time(NULL);
      if (write(cfd, d, strlen(d)) != (ssize_t)strlen(d)) {
        /* gone: nothing to tell */
      }
    } else {
      write_error(cfd, 'e', e);
    }
    agt_error_release(&e);
    close(cfd);
  }
  if (stat(m->path, &now) == 0 && now.st_ino == mine.st_ino && now.st_dev == mine.st_dev)
    unlink(m->path);
}

/* In the keeper's process: connect, listen, tell the starter (fd), serve.  Never returns. */
static void keeper_main(struct agt_mux *m, int report)
{
  agt_ssh_t *ssh = NULL;
  agt_error_t e = NULL;
  struct sockaddr_un sa;
  int lfd, devnull = open("/dev/null", O_RDWR);
  long maxfd = sysconf(_SC_OPEN_MAX);

  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
  }
  for (long fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 1024); fd++)
    if (fd != report)
      close((int)fd);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  if (chdir("/") < 0) {
    /* it only keeps the keeper from holding the directory agt was started in */
  }
  if (m->connect(m->arg, &ssh, &e) < 0) {
    write_error(report, 'e', e);
    _exit(1);
  }
  lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  set_sockaddr(&sa, m->path);
  unlink(m->path); /* a dead keeper's; the starter holds the lock */
  umask(077);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(m->path, 0600) < 0 ||
      listen(lfd, 64) < 0) {
    agt_error_make(&e, errno, "agt's connection keeper: listen on '%s'", m->path);
    write_error(report, 'e', e);
    _exit(1);
  }
  fcntl(lfd, F_SETFD, FD_CLOEXEC);
  if (write(report, "k", 1) != 1)
    _exit(1);
  close(report);
  serve(m, ssh, lfd);
  close(lfd);
  agt_ssh_free(ssh);
  _exit(0);
}

/* Start a keeper (the caller holds the start lock) and wait until it listens or failed. */
static int start_keeper(struct agt_mux *m, agt_error_t *err)
{
  int p[2];
  pid_t pid;
  char c;
  ssize_t n;
  int status;

  if (pipe(p) < 0)
    return agt_error_make(err, errno, "pipe");
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return agt_error_make(err, errno, "fork agt's connection keeper");
  }
  if (pid == 0) {
    close(p[0]);
    setsid();
    if (fork() != 0) /* the keeper is nobody's child: agt does not wait for it */
      _exit(0);
    keeper_main(m, p[1]);
  }
  close(p[1]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  do
    n = read(p[0], &c, 1);
  while (n < 0 && errno == EINTR);
  if (n == 1 && c == 'k') {
    close(p[0]);
    return 0;
  }
  if (n == 1 && c == 'e') {
    read_error(p[0], err);
    close(p[0]);
    return -1;
  }
  close(p[0]);
  return agt_error_kind(err, AGT_E_INTERNAL, "agt's connection keeper ended as it started");
}

int agt_mux_open(struct agt_mux *m, int *fd, char **peer, char **note, agt_error_t *err)
{
  cleanup_free char *lock = xasprintf("%s.lock", m->path);
  int r, lfd;

  *note = NULL;
  r = try_keeper(m, fd, peer, err);
  if (r == 1 || r < 0)
    return r < 0 ? -1 : 0;
  if (r == 2) {
    *note = xasprintf("%s (the kept connection); connecting again", *peer);
    free(*peer);
    *peer = NULL;
  }
  /* One starter at a time: the others wait, then use its keeper. */
  lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lfd < 0)
    return agt_error_make(err, errno, "open '%s'", lock);
  while (flock(lfd, LOCK_EX) < 0 && errno == EINTR)
    ;
  r = try_keeper(m, fd, peer, err);
  if (r == 0 || r == 2) {
    free(*peer);
    *peer = NULL;
    r = start_keeper(m, err);
    if (r == 0) {
      r = try_keeper(m, fd, peer, err);
      if (r != 1 && r >= 0)
        r = agt_error_kind(err, AGT_E_INTERNAL,
                           "agt's connection keeper started but does not answer on '%s'", m->path);
    }
  }
  close(lfd); /* releases the lock */
  return r < 0 ? -1 : 0;
}

char *agt_mux_dropped(struct agt_mux *m)
{
  char *peer = NULL;
  agt_error_t e = NULL;
  int fd, r = try_keeper(m, &fd, &peer, &e);

  if (fd >= 0)
    close(fd); /* alive: agtd sees a connection end before its hello */
  agt_error_release(&e);
  if (r == 2)
    return peer;
  free(peer);
  return r == 0 ? xstrdup("agt's connection keeper has gone away") : NULL;
}
