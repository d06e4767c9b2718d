/* agtd's side of a jail's keeper (jail_keep.h). */
#include "jail_keep.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "fsutil.h"
#include "jail.h"
#include "jail_setup.h"
#include "log.h"
#include "xalloc.h"

/* The keeper's static binary, linked into agtd (keeper_blob.S, made by meson). */
extern const char agt_keeper_blob[];
extern const char agt_keeper_blob_end[];

#define SPAWNER_STACK (256u * 1024)
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int agt_keep_init(struct agtd_s *d, agt_error_t *err)
{
  int fd = agt_memfd_program("agt-keeper", agt_keeper_blob, agt_keeper_blob_end, 0500, err);

  if (fd < 0)
    return -1;
  d->keeper_fd = fd;
  d->spawner_stack = mmap(NULL, SPAWNER_STACK, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (d->spawner_stack == MAP_FAILED) {
    d->spawner_stack = NULL;
    return agt_error_make(err, errno, "map the spawner's stack");
  }
  return 0;
}

struct spawn_ctx {
  struct agtd_s *d;
  struct agt_keep_spawn *s;
  int exe_fd;
  int keep_end; /* the keeper's end of the connection */
  char *const *argv;
  int rt_prio;      /* agtd's loop runs SCHED_FIFO at this priority (a start): so does this */
  int err;          /* errno of a failure in the spawner */
  const char *step; /* what failed */
};

/* The spawner: agtd's memory, its own fd table, agtd waiting (CLONE_VFORK).  No allocation. */
/* clone3 into the jail's namespaces.  With cgroup v2 the child is born in its cgroup
 * (CLONE_INTO_CGROUP): no migration, and nothing runs outside the jail's limits even for a
 * moment.  *attached says whether that happened. */
static pid_t jail_clone(int *pidfd, int new_netns, int cgroup_fd, int *attached)
{
  struct clone_args args;
  pid_t pid;

  memset(&args, 0, sizeof args);
  args.flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD |
               (new_netns ? CLONE_NEWNET : 0);
  args.pidfd = (uint64_t)(uintptr_t)pidfd;
  args.exit_signal = SIGCHLD;
  *attached = 0;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)cgroup_fd;
    pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) {
      *attached = 1;
      return pid;
    }
    args.flags &= ~(uint64_t)CLONE_INTO_CGROUP; /* kernels before 5.7: migrate instead */
    args.cgroup = 0;
  }
  return (pid_t)syscall(SYS_clone3, &args, sizeof args);
}

static int spawner(void *arg)
{
  struct spawn_ctx *c = arg;
  struct agt_keep_spawn *s = c->s;
  int want[AGT_KEEP_NFDS] = {c->keep_end, -1, s->out_rd, s->err_rd, s->console_rd, s->dir_fd};
  int tmp[AGT_KEEP_NFDS];
  struct agt_keep_hdr h;
  pid_t pid;

  /* A realtime start (start_prio.h) waits on this process: it runs at agtd's priority (its
   * children, the jail's init, at normal priority) until the keeper's first instruction,
   * which takes it back to normal. */
  if (c->rt_prio > 0) {
    struct sched_param sp = {.sched_priority = c->rt_prio};
    sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp);
  }
  pid = jail_clone(&s->pidfd, s->new_netns, s->cgroup_fd, &s->attached);
  if (pid == 0)
    agt_jail_child(s->plan);
  if (pid < 0) {
    c->err = errno;
    c->step = "clone the jail";
    _exit(127);
  }
  s->pid = pid;
  want[1] = s->pidfd;
  if (!s->attached && s->attach_cgroup &&
      agt_cgroup_attach(c->d->cgroup, s->attach_cgroup, pid, &s->attach_err) == 0)
    s->attached = 1;
  /* agtd's copy of the pidfd, ahead of everything the keeper sends */
  memset(&h, 0, sizeof h);
  h.type = AGT_KEEP_HELLO;
  h.version = AGT_KEEP_VERSION;
  h.pid = pid;
  {
    union {
      char b[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
    struct cmsghdr *cm;
    memset(&u, 0, sizeof u);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &s->pidfd, sizeof(int));
    if (sendmsg(c->keep_end, &mh, MSG_NOSIGNAL) < 0) {
      c->err = errno;
      c->step = "send the jail's pidfd";
      _exit(127); /* the init dies with this process (PDEATHSIG) */
    }
  }
  /* The keeper's fds at their numbers (keeper.h); nothing else of agtd's. */
  for (int i = 0; i < AGT_KEEP_NFDS; i++) {
    tmp[i] = want[i] < 0 ? -1 : fcntl(want[i], F_DUPFD_CLOEXEC, 64);
    if (want[i] >= 0 && tmp[i] < 0) {
      c->err = errno;
      c->step = "arrange the keeper's fds";
      _exit(127);
    }
  }
  for (int i = 0; i < AGT_KEEP_NFDS; i++) {
    if (tmp[i] < 0)
      close(AGT_KEEP_CTL_FD + i);
    else if (dup2(tmp[i], AGT_KEEP_CTL_FD + i) < 0) {
      c->err = errno;
      c->step = "arrange the keeper's fds";
      _exit(127);
    }
  }
  /* the program, close-on-exec, just above them */
  {
    int exe = AGT_KEEP_CTL_FD + AGT_KEEP_NFDS;
    int t = fcntl(c->exe_fd, F_DUPFD_CLOEXEC, 64);
    if (t < 0 || dup3(t, exe, O_CLOEXEC) < 0) {
      c->err = errno;
      c->step = "arrange the keeper's fds";
      _exit(127);
    }
    syscall(SYS_close_range, exe + 1, ~0U, 0);
    syscall(SYS_execveat, exe, "", c->argv, (char *const[]){NULL}, AT_EMPTY_PATH);
  }
  c->err = errno;
  c->step = "exec the keeper";
  _exit(127);
}

int agt_keep_spawn(struct agtd_s *d, struct agt_keep_spawn *s, agt_error_t *err)
{
  struct spawn_ctx c;
  char prog[] = "agt-keeper";
  char *argv[3] = {prog, (char *)(uintptr_t)s->name, NULL};
  int sp[2], fds[2];
  struct agt_keep_hdr h;
  pid_t sp_pid;
  sigset_t all, old;
  int kpidfd = -1;

  s->pid = -1;
  s->pidfd = s->keep_fd = s->keeper_pidfd = -1;
  s->attached = 0;
  s->attach_err = NULL;
  if (d->keeper_fd < 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "no keeper program");
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return agt_error_make(err, errno, "socketpair for the keeper");
  memset(&c, 0, sizeof c);
  c.d = d;
  c.s = s;
  c.exe_fd = d->keeper_fd;
  c.keep_end = sp[1];
  c.argv = argv;
  {
    struct sched_param prm;
    if ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO &&
        sched_getparam(0, &prm) == 0)
      c.rt_prio = prm.sched_priority;
  }
  /* Every signal blocked across the clone, as posix_spawn does: the spawner and the jail's
   * init it clones start without running agtd's libuv handlers (which would act on agtd's
   * fds and memory) for a signal that comes before they are set up.  The init unblocks
   * them in its loop (init_loop.c), the agent before its exec, the keeper at its start. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  sp_pid = clone(spawner, (char *)d->spawner_stack + SPAWNER_STACK,
                 CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &c, &kpidfd);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(sp[1]);
  if (sp_pid < 0) {
    close(sp[0]);
    return agt_error_make(err, errno, "start the jail's keeper");
  }
  fcntl(kpidfd, F_SETFD, FD_CLOEXEC);
  if (c.err) {
    /* the spawner exited: reap it (the init, if any, died with it: PDEATHSIG) */
    siginfo_t info;
    while (syscall(SYS_waitid, P_PIDFD, kpidfd, &info, WEXITED, NULL) < 0 && errno == EINTR)
      ;
    close(kpidfd);
    close(sp[0]);
    return agt_error_make(err, c.err, "%s", c.step);
  }
  if (agt_keep_recv(sp[0], &h, NULL, fds) != 1 || h.type != AGT_KEEP_HELLO || fds[0] < 0) {
    /* (agtd out of fds drops the one sent) The jail cannot be watched: its keeper is
     * killed, and the jail's init with it (PDEATHSIG), and reaped. */
    siginfo_t info;
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0)
        close(fds[i]);
    close(sp[0]);
    syscall(SYS_pidfd_send_signal, kpidfd, SIGKILL, NULL, 0);
    while (syscall(SYS_waitid, P_PIDFD, kpidfd, &info, WEXITED, NULL) < 0 && errno == EINTR)
      ;
    close(kpidfd);
    return agt_error_kind(err, AGT_E_INTERNAL, "the keeper sent no pidfd");
  }
  /* The keeper is agtd's child (until agtd goes): agtd reaps it through this pidfd. */
  s->keeper_pidfd = kpidfd;
  if (fds[1] >= 0)
    close(fds[1]);
  s->pidfd = fds[0];
  s->keep_fd = sp[0];
  return 0;
}

int agt_keep_recv(int fd, struct agt_keep_hdr *h, char *buf, int fds[2])
{
  char scratch[sizeof(struct agt_keep_hdr)];
  struct iovec iov[2] = {{.iov_base = h, .iov_len = sizeof *h},
                         {.iov_base = buf ? buf : scratch, .iov_len = buf ? AGT_KEEP_DATA_MAX : 0}};
  union {
    char b[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {
      .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.b, .msg_controllen = sizeof u.b};
  ssize_t n;

  fds[0] = fds[1] = -1;
  do
    n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return 0;
  if (n <= 0) {
    if (n == 0)
      errno = EPIPE;
    return -1;
  }
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k && i < 2; i++)
        memcpy(&fds[i], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
    }
  if ((size_t)n < sizeof *h || h->version != AGT_KEEP_VERSION || (size_t)n != sizeof *h + h->len ||
      (h->len && !buf) || (mh.msg_flags & MSG_TRUNC)) {
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0) {
        close(fds[i]);
        fds[i] = -1; /* the callers close what is left in fds[] */
      }
    errno = EPROTO;
    return -1;
  }
  return 1;
}

int agt_keep_connect(const char *dir, struct agt_keep_hdr *hello, int fds[2], agt_error_t *err)
{
  cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct pollfd p;
  int fd, r;

  if (dfd < 0)
    return agt_error_make(err, errno, "open '%s'", dir);
  snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, AGT_KEEP_SOCKET);
  fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return agt_error_make(err, errno, "socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    agt_error_make(err, errno, "connect to the keeper in '%s'", dir);
    close(fd);
    return -1;
  }
  p.fd = fd;
  p.events = POLLIN;
  r = poll(&p, 1, 2000);
  if (r <= 0 || agt_keep_recv(fd, hello, NULL, fds) != 1 || hello->type != AGT_KEEP_HELLO ||
      fds[0] < 0) {
    agt_error_kind(err, AGT_E_INTERNAL, "the keeper in '%s' did not say hello", dir);
    if (fds[0] >= 0)
      close(fds[0]);
    if (fds[1] >= 0)
      close(fds[1]);
    close(fd);
    return -1;
  }
  return fd;
}

int agt_keep_read_exit(const char *dir, int *code, int *sig, int64_t *finished)
{
  cleanup_free char *path = xasprintf("%s/%s", dir, AGT_KEEP_EXIT);
  FILE *f = fopen(path, "re");
  int r = -1;

  if (f == NULL)
    return -1;
  if (fscanf(f, "%d %d %" SCNd64, code, sig, finished) == 3)
    r = 0;
  fclose(f);
  return r;
}

void agt_keep_send_budget(int fd, uint64_t budget)
{
  struct agt_keep_hdr h;

  memset(&h, 0, sizeof h);
  h.type = AGT_KEEP_BUDGET;
  h.version = AGT_KEEP_VERSION;
  h.size = budget;
  if (send(fd, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
    agt_log_warning("keeper: send the log budget: %s", strerror(errno));
}
