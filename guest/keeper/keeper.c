/* agt-keeper: a jail's keeper (keeper.h).  One poll loop, no allocation after start.
 *
 * usage (by agtd only): agt-keeper NAME, with the fds of keeper.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "outlog.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static const char *name = "?";
static int ctl = AGT_KEEP_CTL_FD; /* agtd, or -1 while there is none */
static int lsn = -1;              /* keeper.sock */
static int src[3] = {-1, -1, -1}; /* stdout, stderr, terminal master */
static int console = -1;
static int tty_unsent; /* the master is still to be sent to the connected agtd */
static struct agt_outlog out;
static char log_path[64], old_path[64];

/* The record being sent to agtd: while it waits, the jail's output is not read. */
static union {
  struct agt_keep_hdr h;
  char b[sizeof(struct agt_keep_hdr) + AGT_KEEP_DATA_MAX];
} rec;
static size_t rec_len;

static struct {
  int done; /* reaped */
  int code, signal;
  int64_t finished;
} ex;

static void say(const char *fmt, const char *arg, int e)
{
  fprintf(stderr, "agt-keeper[%s]: %s%s%s%s\n", name, fmt, arg ? arg : "", e ? ": " : "",
          e ? strerror(e) : "");
}

static void hdr(struct agt_keep_hdr *h, uint32_t type, uint32_t len)
{
  memset(h, 0, sizeof *h);
  h->type = type;
  h->len = len;
  h->version = AGT_KEEP_VERSION;
  h->exited = ex.done;
  h->code = ex.code;
  h->signal = ex.signal;
  h->finished = ex.finished;
  h->base = out.pos.base;
  h->size = out.pos.size;
  h->old_base = out.pos.old_base;
}

static void drop_agtd(void)
{
  if (ctl >= 0)
    close(ctl);
  ctl = -1;
  rec_len = 0; /* in the log already: a later agtd reads it there */
  tty_unsent = 0;
}

/* One record with up to two fds; 0 sent, 1 the socket is full (EAGAIN), -1 agtd is gone. */
static int send_fds(const void *buf, size_t len, const int *fds, int nfds)
{
  union {
    char b[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

  if (nfds > 0) {
    struct cmsghdr *cm;
    memset(&u, 0, sizeof u);
    mh.msg_control = u.b;
    mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
  }
  for (;;) {
    if (sendmsg(ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
      return 0;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == ENOBUFS)
      return 1;
    return -1;
  }
}

/* Flush what waits for agtd: the terminal's master, then the pending record. */
static void flush(void)
{
  if (ctl < 0)
    return;
  if (tty_unsent) {
    struct agt_keep_hdr h;
    int r;
    hdr(&h, AGT_KEEP_TTY, 0);
    r = send_fds(&h, sizeof h, &src[2], 1);
    if (r < 0) {
      drop_agtd();
      return;
    }
    if (r > 0)
      return;
    tty_unsent = 0;
  }
  if (rec_len) {
    int r = send_fds(rec.b, rec_len, NULL, 0);
    if (r < 0)
      drop_agtd();
    else if (r == 0)
      rec_len = 0;
  }
}

static void send_hello(void)
{
  struct agt_keep_hdr h;
  int fds[2] = {AGT_KEEP_PIDFD, src[2]};
  char path[64], line[128];
  FILE *f;

  hdr(&h, AGT_KEEP_HELLO, 0);
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", AGT_KEEP_PIDFD);
  f = fopen(path, "re");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "Pid:", 4) == 0)
      h.pid = atoi(line + 4);
  if (f)
    fclose(f);
  h.tty = src[2] >= 0;
  tty_unsent = 0;
  if (send_fds(&h, sizeof h, fds, h.tty ? 2 : 1) != 0)
    drop_agtd();
}

static void take_agtd(void)
{
  int fd = accept4(lsn, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

  if (fd < 0)
    return;
  drop_agtd(); /* the new agtd replaces one that may linger */
  ctl = fd;
  send_hello();
}

static void from_agtd(void)
{
  struct agt_keep_hdr h;
  ssize_t n = recv(ctl, &h, sizeof h, MSG_DONTWAIT);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    drop_agtd();
    return;
  }
  if ((size_t)n >= sizeof h && h.type == AGT_KEEP_BUDGET && h.size >= 4096)
    out.budget = h.size;
}

static void take_terminal(void)
{
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm;
  ssize_t n = recvmsg(console, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  int fd = -1;

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  close(console);
  console = -1;
  if (fd >= 0) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    src[2] = fd;
    tty_unsent = ctl >= 0;
    flush();
  }
}

/* Output: into the log, then to agtd (the record waits while agtd is behind). */
static void read_output(int i)
{
  char *data = rec.b + sizeof rec.h;
  ssize_t n = read(src[i], data, AGT_KEEP_DATA_MAX);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    /* EOF, or EIO from a terminal whose last user is gone (once all is read) */
    close(src[i]);
    src[i] = -1;
    if (i == 2)
      tty_unsent = 0; /* no master left to send */
    return;
  }
  if (agt_outlog_append(&out, data, (size_t)n) < 0)
    say("write the log", NULL, errno);
  if (ctl >= 0) {
    hdr(&rec.h, AGT_KEEP_OUT, (uint32_t)n);
    rec_len = sizeof rec.h + (size_t)n;
    flush();
  }
}

static void reap(void)
{
  siginfo_t info;
  struct timespec ts;

  memset(&info, 0, sizeof info);
  if (syscall(SYS_waitid, P_PIDFD, AGT_KEEP_PIDFD, &info, WEXITED | WNOHANG, NULL) < 0) {
    if (errno == EAGAIN || errno == EINTR)
      return;
    say("waitid", NULL, errno);
    info.si_code = CLD_KILLED;
    info.si_status = SIGKILL;
  } else if (info.si_pid == 0) {
    return;
  }
  clock_gettime(CLOCK_REALTIME, &ts);
  ex.done = 1;
  ex.finished = (int64_t)ts.tv_sec;
  if (info.si_code == CLD_EXITED) {
    ex.code = info.si_status;
  } else {
    ex.signal = info.si_status;
    ex.code = 128 + info.si_status;
  }
}

/* The exit, for an agtd that comes later: written whole (a temporary file renamed). */
static void record_exit(void)
{
  char buf[96];
  int n = snprintf(buf, sizeof buf, "%d %d %" PRId64 "\n", ex.code, ex.signal, ex.finished);
  int fd = openat(AGT_KEEP_DIR_FD, AGT_KEEP_EXIT ".new",
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0 || write(fd, buf, (size_t)n) != n ||
      renameat(AGT_KEEP_DIR_FD, AGT_KEEP_EXIT ".new", AGT_KEEP_DIR_FD, AGT_KEEP_EXIT) < 0)
    say("record the exit", NULL, errno);
  if (fd >= 0)
    close(fd);
}

static int listen_here(void)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", AGT_KEEP_DIR_FD,
           AGT_KEEP_SOCKET);
  unlinkat(AGT_KEEP_DIR_FD, AGT_KEEP_SOCKET, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 4) < 0) {
    say("listen on " AGT_KEEP_SOCKET, NULL, errno);
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

int main(int argc, char **argv)
{
  struct stat st;
  sigset_t none;

  /* agtd clones with every signal blocked (jail_keep.c): none is, from here on */
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  /* normal priority first: a realtime start's spawner may have run this exec at its own */
  {
    struct sched_param sp = {.sched_priority = 0};
    sched_setscheduler(0, SCHED_OTHER, &sp);
  }
  if (argc > 1)
    name = argv[1];
  if (argc != 2 || fstat(AGT_KEEP_DIR_FD, &st) < 0 || fcntl(AGT_KEEP_PIDFD, F_GETFD) < 0) {
    fprintf(stderr, "agt-keeper: run by agtd only (see guest/keeper/keeper.h)\n");
    return 2;
  }
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  prctl(PR_SET_NAME, "agt-keeper", 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  umask(077);
  for (int i = 0; i < 2; i++)
    if (fcntl(AGT_KEEP_OUT_FD + i, F_GETFD) >= 0) {
      src[i] = AGT_KEEP_OUT_FD + i;
      fcntl(src[i], F_SETFL, fcntl(src[i], F_GETFL) | O_NONBLOCK);
    }
  if (fcntl(AGT_KEEP_CONSOLE_FD, F_GETFD) >= 0)
    console = AGT_KEEP_CONSOLE_FD;
  if (fcntl(ctl, F_GETFD) < 0)
    ctl = -1;
  else
    fcntl(ctl, F_SETFL, fcntl(ctl, F_GETFL) | O_NONBLOCK);
  snprintf(log_path, sizeof log_path, "/proc/self/fd/%d/console.log", AGT_KEEP_DIR_FD);
  snprintf(old_path, sizeof old_path, "/proc/self/fd/%d/console.log.1", AGT_KEEP_DIR_FD);
  agt_outlog_open(&out, log_path, old_path, 8u << 20);
  lsn = listen_here();
  if (ctl >= 0)
    send_hello();

  for (;;) {
    struct pollfd p[7];
    int n = 0, i_ctl = -1, i_lsn = -1, i_pid = -1, i_con = -1, i_src[3] = {-1, -1, -1};
    int open = src[0] >= 0 || src[1] >= 0 || src[2] >= 0 || console >= 0;

    if (ex.done && !open && rec_len == 0 && !tty_unsent)
      break;
    if (ctl >= 0) {
      i_ctl = n;
      p[n++] = (struct pollfd){ctl, (short)(POLLIN | (rec_len || tty_unsent ? POLLOUT : 0)), 0};
    }
    if (lsn >= 0) {
      i_lsn = n;
      p[n++] = (struct pollfd){lsn, POLLIN, 0};
    }
    if (!ex.done) {
      i_pid = n;
      p[n++] = (struct pollfd){AGT_KEEP_PIDFD, POLLIN, 0};
    }
    if (console >= 0) {
      i_con = n;
      p[n++] = (struct pollfd){console, POLLIN, 0};
    }
    for (int i = 0; i < 3; i++)
      if (src[i] >= 0 && rec_len == 0) {
        i_src[i] = n;
        p[n++] = (struct pollfd){src[i], POLLIN, 0};
      }
    if (poll(p, (nfds_t)n, -1) < 0) {
      if (errno == EINTR)
        continue;
      say("poll", NULL, errno);
      return 1;
    }
    if (i_ctl >= 0 && p[i_ctl].revents & POLLOUT)
      flush();
    if (i_ctl >= 0 && ctl >= 0 && p[i_ctl].revents & (POLLIN | POLLHUP | POLLERR))
      from_agtd();
    if (i_lsn >= 0 && p[i_lsn].revents & POLLIN)
      take_agtd();
    if (i_con >= 0 && p[i_con].revents)
      take_terminal();
    for (int i = 0; i < 3; i++)
      if (i_src[i] >= 0 && src[i] >= 0 && rec_len == 0 && p[i_src[i]].revents)
        read_output(i);
    if (i_pid >= 0 && p[i_pid].revents)
      reap();
  }

  /* Reaped, all output read: the exit in the jail's directory, then to agtd, which closes
   * the connection once it has taken it. */
  record_exit();
  if (lsn >= 0) {
    unlinkat(AGT_KEEP_DIR_FD, AGT_KEEP_SOCKET, 0);
    close(lsn);
  }
  if (ctl >= 0) {
    struct agt_keep_hdr h;
    struct pollfd p = {ctl, POLLIN, 0};
    hdr(&h, AGT_KEEP_EXIT_MSG, 0);
    fcntl(ctl, F_SETFL, fcntl(ctl, F_GETFL) & ~O_NONBLOCK);
    if (send(ctl, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h)
      while (poll(&p, 1, 10000) > 0 && recv(ctl, &h, sizeof h, 0) > 0)
        ;
  }
  agt_outlog_close(&out);
  return 0;
}
