/* attack: a static multi-call program that attacks the jail it runs in, as a hostile agent
 * would, following the escapes of reference/sandbox.md section 3.  Each verb makes real
 * attempts and prints one line per attempt:
 *
 *   blocked: <evidence>   the jail held
 *   ESCAPED: <evidence>   it did not
 *   info: <text>          context, neither
 *
 * and exits 0 when something was tried and nothing escaped, 1 when anything escaped, 2 on a
 * usage error.
 *
 * System calls are also probed the bubblewrap "try-syscall" way: called with an argument the
 * kernel rejects with an errno of its own (EFAULT, EBADF, EINVAL, ESRCH), a failure with the
 * filter's errno (EPERM, ENOSYS, EAFNOSUPPORT) shows that seccomp answered and the kernel was
 * never reached.
 *
 * Verbs that take GUESTDIR are given a directory on the guest that the jail must not reach
 * (the test's own directory, holding a file "marker").  Whatever looks like a way out is used
 * to look for GUESTDIR/marker and to create GUESTDIR/pwned-<verb>, which the test then looks
 * for from outside. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <arpa/inet.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef NETLINK_KOBJECT_UEVENT
#define NETLINK_KOBJECT_UEVENT 15
#endif

static int n_blocked, n_escaped;
static const char *verb = "";
static const char *guestdir; /* a guest directory the jail must not reach, or NULL */

__attribute__((format(printf, 1, 2))) static void blocked(const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  fputs("blocked: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  n_blocked++;
}

__attribute__((format(printf, 1, 2))) static void escaped(const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  fputs("ESCAPED: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  n_escaped++;
}

__attribute__((format(printf, 1, 2))) static void info(const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  fputs("info: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
}

static const char *en(int e)
{
  static char buf[8][64];
  static int k;
  const char *name;

  switch (e) {
  case EPERM:
    name = "EPERM";
    break;
  case ENOENT:
    name = "ENOENT";
    break;
  case ESRCH:
    name = "ESRCH";
    break;
  case EBADF:
    name = "EBADF";
    break;
  case EAGAIN:
    name = "EAGAIN";
    break;
  case ENOMEM:
    name = "ENOMEM";
    break;
  case EACCES:
    name = "EACCES";
    break;
  case EFAULT:
    name = "EFAULT";
    break;
  case EBUSY:
    name = "EBUSY";
    break;
  case EEXIST:
    name = "EEXIST";
    break;
  case ENXIO:
    name = "ENXIO";
    break;
  case ENODEV:
    name = "ENODEV";
    break;
  case ENOTDIR:
    name = "ENOTDIR";
    break;
  case EINVAL:
    name = "EINVAL";
    break;
  case EMFILE:
    name = "EMFILE";
    break;
  case ENOTTY:
    name = "ENOTTY";
    break;
  case ETXTBSY:
    name = "ETXTBSY";
    break;
  case ENOSPC:
    name = "ENOSPC";
    break;
  case EROFS:
    name = "EROFS";
    break;
  case ENOSYS:
    name = "ENOSYS";
    break;
  case ELOOP:
    name = "ELOOP";
    break;
  case EOPNOTSUPP:
    name = "EOPNOTSUPP";
    break;
  case EAFNOSUPPORT:
    name = "EAFNOSUPPORT";
    break;
  case EPROTONOSUPPORT:
    name = "EPROTONOSUPPORT";
    break;
  case ESOCKTNOSUPPORT:
    name = "ESOCKTNOSUPPORT";
    break;
  case EADDRNOTAVAIL:
    name = "EADDRNOTAVAIL";
    break;
  case ENETUNREACH:
    name = "ENETUNREACH";
    break;
  case EHOSTUNREACH:
    name = "EHOSTUNREACH";
    break;
  case ECONNREFUSED:
    name = "ECONNREFUSED";
    break;
  case ETIMEDOUT:
    name = "ETIMEDOUT";
    break;
  case EDQUOT:
    name = "EDQUOT";
    break;
  case ENOKEY:
    name = "ENOKEY";
    break;
  case EFBIG:
    name = "EFBIG";
    break;
  default:
    name = NULL;
    break;
  }
  k = (k + 1) % 8;
  if (name)
    snprintf(buf[k], sizeof buf[k], "%s", name);
  else
    snprintf(buf[k], sizeof buf[k], "errno %d (%s)", e, strerror(e));
  return buf[k];
}

static int filter_errno(int e)
{
  return e == EPERM || e == ENOSYS || e == EAFNOSUPPORT;
}

/* The try-syscall probe: `r`/`e` are the result of a call made with an argument the kernel
 * itself would refuse with `kernel` (say "EFAULT").  Returns 1 when the filter answered. */
static int probe(const char *call, long r, int e, const char *kernel)
{
  if (r < 0 && filter_errno(e)) {
    blocked("%s: %s from the seccomp filter (the kernel itself answers %s)", call, en(e), kernel);
    return 1;
  }
  escaped("%s reached the kernel: %s (not filtered)", call, r < 0 ? en(e) : "success");
  return 0;
}

/* Evaluate the call before reading errno (argument order is unspecified). */
#define PROBE(call, expr, kernel)                                                                  \
  do {                                                                                             \
    long r_ = (long)(expr);                                                                        \
    probe(call, r_, errno, kernel);                                                                \
  } while (0)

/* Given a directory fd that may lead out of the jail, look for the guest's marker below it and
 * try to leave a file on the guest.  Returns 1 when it got out. */
static int got_out(int dirfd, const char *how)
{
  char rel[PATH_MAX], pw[PATH_MAX];
  int fd;

  if (guestdir == NULL)
    return 0;
  snprintf(rel, sizeof rel, "%s/marker", guestdir + 1);
  if (faccessat(dirfd, rel, F_OK, 0) < 0)
    return 0;
  snprintf(pw, sizeof pw, "%s/pwned-%s", guestdir + 1, verb);
  fd = openat(dirfd, pw, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, how, strlen(how)) < 0)
      info("write %s: %s", pw, en(errno));
    close(fd);
  }
  escaped("%s: the guest's %s/marker is reachable", how, guestdir);
  return 1;
}

static void marker_check(const char *after)
{
  char path[PATH_MAX];

  if (guestdir == NULL)
    return;
  if (got_out(AT_FDCWD, after))
    return;
  snprintf(path, sizeof path, "%s/marker", guestdir);
  blocked("%s: the guest's %s is not reachable (%s)", after, path,
          access(path, F_OK) < 0 ? en(errno) : "?");
}

static int read_file(const char *path, char *buf, size_t n)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t r;
  size_t got = 0;

  if (fd < 0)
    return -1;
  while (got + 1 < n && (r = read(fd, buf + got, n - 1 - got)) > 0)
    got += (size_t)r;
  buf[got] = '\0';
  close(fd);
  return (int)got;
}

static int write_file(const char *path, const char *data)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int e;

  if (fd < 0)
    return -errno;
  if (write(fd, data, strlen(data)) < 0) {
    e = errno;
    close(fd);
    return -e;
  }
  close(fd);
  return 0;
}

static double now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run fn in a child and return its wait status (a way to survive SIGSYS kills). */
static int in_child(int (*fn)(void *), void *arg)
{
  pid_t p = fork();
  int st;

  if (p < 0)
    return -1;
  if (p == 0)
    _exit(fn(arg));
  while (waitpid(p, &st, 0) < 0)
    if (errno != EINTR)
      return -1;
  return st;
}

/* ---- E1: double chroot ------------------------------------------------------------------ */

static int v_chroot(void)
{
  struct stat a, b;
  int fd, up;

  if (mkdir("/tmp/agt-chroot", 0755) < 0 && errno != EEXIST)
    info("mkdir /tmp/agt-chroot: %s", en(errno));
  fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (chroot("/tmp/agt-chroot") < 0) {
    blocked("chroot(\"/tmp/agt-chroot\"): %s", en(errno));
  } else {
    escaped("chroot() succeeded for the agent");
    /* The classic: climb out with an fd of the old root, then chroot(".") there. */
    if (fchdir(fd) == 0)
      for (int i = 0; i < 64; i++)
        if (chdir("..") < 0)
          break;
    if (chroot(".") == 0)
      escaped("second chroot(\".\") succeeded");
  }
  {
    long r = syscall(SYS_chroot, (void *)1);
    PROBE("chroot(bad pointer)", r, "EFAULT");
  }
  /* ".." of the root is the root, from the cwd and from an fd of "/". */
  up = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < 64 && up >= 0; i++) {
    int n = openat(up, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(up);
    up = n;
  }
  if (up >= 0 && fstat(up, &a) == 0 && stat("/", &b) == 0) {
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
      blocked("64 x \"..\" from an fd of / stays at / (dev %u:%u ino %lu)", major(a.st_dev),
              minor(a.st_dev), (unsigned long)a.st_ino);
    else
      escaped("\"..\" from / led to another directory (ino %lu)", (unsigned long)a.st_ino);
    got_out(up, "climbing .. from an fd of /");
  }
  if (up >= 0)
    close(up);
  if (fd >= 0)
    close(fd);
  for (int i = 0; i < 64; i++)
    if (chdir("..") < 0)
      break;
  marker_check("after the double chroot and 64 x chdir(\"..\")");
  return 0;
}

/* ---- E2: leaked fds and cwd ------------------------------------------------------------- */

static int v_fds(void)
{
  char cwd[PATH_MAX], link[PATH_MAX], path[64];
  int leaked = 0;
  DIR *d;
  struct dirent *de;

  for (int fd = 0; fd < 3; fd++) {
    ssize_t n;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof link - 1);
    link[n > 0 ? n : 0] = '\0';
    info("fd %d is %s", fd, link);
  }
  for (int fd = 3; fd < 65536; fd++) {
    int cur;
    if (fcntl(fd, F_GETFD) < 0)
      continue;
    leaked++;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    {
      ssize_t n = readlink(path, link, sizeof link - 1);
      link[n > 0 ? n : 0] = '\0';
    }
    escaped("fd %d was inherited: %s", fd, link);
    cur = dup(fd);
    for (int i = 0; i < 64 && cur >= 0; i++) {
      int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (up < 0)
        break;
      close(cur);
      cur = up;
    }
    if (cur >= 0) {
      got_out(cur, "climbing from an inherited fd");
      close(cur);
    }
  }
  if (leaked == 0)
    blocked("no fd beyond 0-2 is open (scanned 3..65535)");
  d = opendir("/proc/self/fd");
  if (d) {
    int n = 0;
    while ((de = readdir(d)) != NULL)
      if (de->d_name[0] != '.')
        n++;
    closedir(d);
    info("/proc/self/fd lists %d entries (0-2 and the directory itself)", n);
  }
  if (getcwd(cwd, sizeof cwd) == NULL || cwd[0] != '/')
    escaped("the working directory is outside the root (getcwd: %s)",
            errno ? en(errno) : "no leading /");
  else
    blocked("the working directory is %s, inside the jail", cwd);
  {
    ssize_t n = readlink("/proc/self/cwd", link, sizeof link - 1);
    link[n > 0 ? n : 0] = '\0';
    if (n > 0 && link[0] == '/')
      blocked("/proc/self/cwd is %s", link);
    else
      escaped("/proc/self/cwd is '%s'", link);
  }
  /* The init's fds: it is not dumpable, so its fd table is closed to the agent. */
  d = opendir("/proc/1/fd");
  if (d == NULL) {
    blocked("opendir /proc/1/fd (the jail's init): %s", en(errno));
  } else {
    int n = 0;
    while ((de = readdir(d)) != NULL) {
      char p2[300];
      int fd;
      if (de->d_name[0] == '.')
        continue;
      snprintf(p2, sizeof p2, "/proc/1/fd/%s", de->d_name);
      fd = open(p2, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        n++;
        got_out(fd, "an fd of the jail's init");
        close(fd);
      }
    }
    closedir(d);
    if (n)
      escaped("%d fds of the jail's init could be opened through /proc/1/fd", n);
    else
      blocked("/proc/1/fd lists but none opens");
  }
  /* pidfd_getfd: steal an fd of the init. */
  {
    long pfd = syscall(SYS_pidfd_open, 1, 0);
    if (pfd < 0) {
      info("pidfd_open(1): %s", en(errno));
    } else {
      for (int fd = 0; fd < 8; fd++) {
        long r = syscall(SYS_pidfd_getfd, pfd, fd, 0);
        if (r >= 0) {
          escaped("pidfd_getfd took fd %d of the init", fd);
          close((int)r);
          break;
        } else if (fd == 0) {
          blocked("pidfd_getfd(init, 0): %s", en(errno));
        }
      }
      close((int)pfd);
    }
    PROBE("pidfd_getfd(bad fd)", syscall(SYS_pidfd_getfd, -1, 0, 0), "EBADF");
  }
  marker_check("after climbing from every fd and the cwd");
  return 0;
}

/* ---- E3: /proc of outside processes ----------------------------------------------------- */

static int v_proc(int argc, char **argv)
{
  static const char *const init_paths[] = {"exe", "root/", "cwd/", "environ",
                                           "mem", "maps",  "fd/",  "mountinfo"};
  char buf[8192], path[512];
  DIR *d = opendir("/proc");
  struct dirent *de;
  int n = 0, maxpid = 0;

  if (d == NULL) {
    blocked("no /proc: %s", en(errno));
    return 0;
  }
  while ((de = readdir(d)) != NULL) {
    int fd;
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    n++;
    if (atoi(de->d_name) > maxpid)
      maxpid = atoi(de->d_name);
    snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
    if (read_file(path, buf, 200) > 0)
      info("pid %s: %s", de->d_name, buf);
    snprintf(path, sizeof path, "/proc/%s/root", de->d_name);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      if (!got_out(fd, "/proc/PID/root"))
        blocked("%s opens, but it is the jail's own root", path);
      close(fd);
    } else {
      blocked("%s: %s", path, en(errno));
    }
  }
  closedir(d);
  if (maxpid < 100)
    blocked("/proc shows %d processes, the highest pid %d: only the jail's own pid namespace", n,
            maxpid);
  else
    escaped("/proc shows %d processes up to pid %d", n, maxpid);
  /* The guest pids the test gave (agtd, another jail's init) must not exist here. */
  for (int i = 0; i < argc; i++) {
    snprintf(path, sizeof path, "/proc/%s", argv[i]);
    if (access(path, F_OK) == 0)
      escaped("guest pid %s is visible as %s", argv[i], path);
    else
      blocked("guest pid %s (outside the jail) has no %s: %s", argv[i], path, en(errno));
  }
  /* The init is a fork of agtd on the guest: its exe, root, cwd, memory are the guest's. */
  for (size_t i = 0; i < sizeof init_paths / sizeof init_paths[0]; i++) {
    int fd;
    snprintf(path, sizeof path, "/proc/1/%s", init_paths[i]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      blocked("open %s (the jail's init, not dumpable): %s", path, en(errno));
      continue;
    }
    if (!strcmp(init_paths[i], "exe")) {
      escaped("/proc/1/exe opens: a read handle on the guest's agtd binary");
      close(fd);
      fd = open(path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0)
        escaped("/proc/1/exe opens for writing");
    } else if (!strcmp(init_paths[i], "root/") || !strcmp(init_paths[i], "cwd/")) {
      if (!got_out(fd, path))
        blocked("%s opens but is inside the jail", path);
    } else if (!strcmp(init_paths[i], "mountinfo")) {
      info("/proc/1/mountinfo is readable (mount table of the jail's own namespace)");
    } else {
      escaped("%s of the jail's init opens", path);
    }
    if (fd >= 0)
      close(fd);
  }
  {
    ssize_t r = readlink("/proc/1/exe", buf, sizeof buf - 1);
    if (r >= 0) {
      buf[r] = '\0';
      escaped("readlink /proc/1/exe = %s", buf);
    } else {
      blocked("readlink /proc/1/exe: %s", en(errno));
    }
  }
  /* Masked kernel files. */
  {
    static const char *const masked[] = {
        "/proc/kcore", "/proc/keys",        "/proc/timer_list",    "/proc/kallsyms",
        "/proc/kmsg",  "/proc/sched_debug", "/proc/sysrq-trigger", "/proc/key-users"};
    for (size_t i = 0; i < sizeof masked / sizeof masked[0]; i++) {
      struct stat st;
      int r;
      if (stat(masked[i], &st) < 0) {
        blocked("%s: %s", masked[i], en(errno));
        continue;
      }
      if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) {
        blocked("%s is masked by /dev/null", masked[i]);
        continue;
      }
      r = read_file(masked[i], buf, 64);
      if (r > 0 && strcmp(masked[i], "/proc/kallsyms") != 0)
        escaped("%s reads %d bytes", masked[i], r);
      else if (r > 0) /* kallsyms shows zeros to the unprivileged; check for a real address */
        (strncmp(buf, "0000000000000000", 16) == 0 ? blocked : escaped)(
            "/proc/kallsyms shows '%.16s' as the first address", buf);
      else
        blocked("%s: %s", masked[i], r < 0 ? en(errno) : "empty");
    }
  }
  if (read_file("/proc/self/mountinfo", buf, sizeof buf) > 0) {
    if (strstr(buf, "lowerdir=/") || strstr(buf, "upperdir=/"))
      escaped("the mount table spells out the overlay's guest paths");
    else
      blocked("the mount table shows no overlay layer path of the guest");
  }
  return 0;
}

/* ---- E4: ptrace and process_vm_writev ---------------------------------------------------- */

static void vm_write(pid_t pid, const char *who)
{
  char data[8] = "pwned!!";
  struct iovec local = {data, sizeof data}, remote = {(void *)0x400000, sizeof data};

  if (process_vm_writev(pid, &local, 1, &remote, 1, 0) >= 0)
    escaped("process_vm_writev into %s (pid %d) succeeded", who, (int)pid);
  else
    blocked("process_vm_writev into %s (pid %d): %s", who, (int)pid, en(errno));
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0)
    escaped("process_vm_readv from %s (pid %d) succeeded", who, (int)pid);
  else
    blocked("process_vm_readv from %s (pid %d): %s", who, (int)pid, en(errno));
}

static void attach(pid_t pid, const char *who)
{
  if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
    escaped("PTRACE_ATTACH to %s (pid %d) succeeded", who, (int)pid);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
  } else {
    blocked("PTRACE_ATTACH to %s (pid %d): %s", who, (int)pid, en(errno));
  }
  if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0) {
    escaped("PTRACE_SEIZE of %s (pid %d) succeeded", who, (int)pid);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
  } else {
    blocked("PTRACE_SEIZE of %s (pid %d): %s", who, (int)pid, en(errno));
  }
}

static int v_ptrace(int argc, char **argv)
{
  char data[8];
  struct iovec local = {data, sizeof data};
  pid_t kid;

  attach(1, "the jail's init");
  vm_write(1, "the jail's init");
  /* A child of our own (same uid, dumpable): only the filter stands in the way. */
  kid = fork();
  if (kid == 0) {
    pause();
    _exit(0);
  }
  if (kid > 0) {
    attach(kid, "the agent's own child");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
  }
  PROBE("ptrace(PTRACE_PEEKDATA, pid -1)", syscall(SYS_ptrace, PTRACE_PEEKDATA, -1, 0, 0), "ESRCH");
  PROBE("process_vm_writev(self, flags 0xff)",
        syscall(SYS_process_vm_writev, getpid(), &local, 1, &local, 1, 0xff), "EINVAL");
  /* Processes of another jail and agtd, by their guest pids (the test passes them). */
  for (int i = 0; i < argc; i++) {
    pid_t p = (pid_t)atoi(argv[i]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)p);
    if (access(path, F_OK) == 0) {
      escaped("guest pid %d is visible in the jail", (int)p);
      continue;
    }
    attach(p, "a process outside the jail");
    vm_write(p, "a process outside the jail");
  }
  return 0;
}

/* ---- E5: mknod -------------------------------------------------------------------------- */

static int v_mknod(void)
{
  static const struct {
    const char *path;
    mode_t type;
    unsigned maj, min;
    const char *what;
  } nodes[] = {
      {"/tmp/agt-mem", S_IFCHR, 1, 1, "char 1,1 (mem)"},
      {"/tmp/agt-sda", S_IFBLK, 8, 0, "block 8,0 (sda)"},
      {"/work/agt-vda", S_IFBLK, 253, 0, "block 253,0 (vda)"},
      {"/work/agt-kmsg", S_IFCHR, 1, 11, "char 1,11 (kmsg)"},
      {"/home/agent/agt-port", S_IFCHR, 1, 4, "char 1,4 (port)"},
      {"/dev/shm/agt-null", S_IFCHR, 1, 3, "char 1,3 (null)"},
      {"/dev/agt-mem", S_IFCHR, 1, 1, "char 1,1 (mem) in /dev"},
  };
  static const char *const allowed[] = {"null",  "zero",   "full",   "random", "urandom",
                                        "tty",   "ptmx",   "pts",    "shm",    "fd",
                                        "stdin", "stdout", "stderr", NULL};
  static const char *const host_devs[] = {
      "/dev/mem", "/dev/kmsg",  "/dev/vda",          "/dev/sda",  "/dev/console", "/dev/vsock",
      "/dev/kvm", "/dev/loop0", "/dev/loop-control", "/dev/fuse", "/dev/net/tun"};
  DIR *d;
  struct dirent *de;

  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    if (mknod(nodes[i].path, nodes[i].type | 0666, makedev(nodes[i].maj, nodes[i].min)) == 0) {
      int fd = open(nodes[i].path, O_RDONLY | O_CLOEXEC);
      escaped("mknod %s %s succeeded%s", nodes[i].path, nodes[i].what,
              fd >= 0 ? " and it opens" : "");
      if (fd >= 0)
        close(fd);
      unlink(nodes[i].path);
    } else {
      blocked("mknod %s %s: %s", nodes[i].path, nodes[i].what, en(errno));
    }
  }
  d = opendir("/dev");
  if (d) {
    int extra = 0;
    while ((de = readdir(d)) != NULL) {
      size_t k;
      if (de->d_name[0] == '.')
        continue;
      for (k = 0; allowed[k]; k++)
        if (!strcmp(de->d_name, allowed[k]))
          break;
      if (allowed[k] == NULL) {
        escaped("/dev holds an unexpected entry: %s", de->d_name);
        extra++;
      }
    }
    closedir(d);
    if (!extra)
      blocked("/dev holds only null zero full random urandom tty ptmx pts shm and links");
  }
  for (size_t i = 0; i < sizeof host_devs / sizeof host_devs[0]; i++) {
    int fd = open(host_devs[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      escaped("%s opens", host_devs[i]);
      close(fd);
    } else {
      blocked("open %s: %s", host_devs[i], en(errno));
    }
  }
  return 0;
}

/* ---- E6: mount, umount, remount, pivot_root and the new mount API ------------------------ */

struct agt_mount_attr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int count_lines(const char *path)
{
  static char buf[1 << 16];
  int n = 0;

  if (read_file(path, buf, sizeof buf) < 0)
    return -1;
  for (char *p = buf; *p; p++)
    n += *p == '\n';
  return n;
}

static void try_mount(const char *desc, const char *src, const char *tgt, const char *type,
                      unsigned long flags, const void *data)
{
  if (mount(src, tgt, type, flags, data) == 0) {
    escaped("%s succeeded", desc);
    umount2(tgt, MNT_DETACH);
  } else {
    blocked("%s: %s", desc, en(errno));
  }
}

static void try_fd(const char *desc, long r)
{
  if (r >= 0) {
    escaped("%s succeeded (fd %ld)", desc, r);
    close((int)r);
  } else {
    blocked("%s: %s", desc, en(errno));
  }
}

static void try_rc(const char *desc, long r)
{
  if (r == 0)
    escaped("%s succeeded", desc);
  else
    blocked("%s: %s", desc, en(errno));
}

static int v_mount(void)
{
  static const char *const umounts[] = {"/",    "/proc",    "/work", "/proc/sys", "/proc/kcore",
                                        "/dev", "/dev/pts", "/tmp",  "/dev/null", "/dev/shm"};
  int before = count_lines("/proc/self/mountinfo"), after;
  struct agt_mount_attr ma;
  struct statvfs sv;
  char desc[128];

  if (mkdir("/tmp/agt-mnt", 0755) < 0 && errno != EEXIST)
    info("mkdir /tmp/agt-mnt: %s", en(errno));
  try_mount("mount -t proc", "proc", "/tmp/agt-mnt", "proc", 0, NULL);
  try_mount("mount -t tmpfs", "tmpfs", "/tmp/agt-mnt", "tmpfs", 0, NULL);
  try_mount("mount -t sysfs", "sysfs", "/tmp/agt-mnt", "sysfs", 0, NULL);
  try_mount("mount -t cgroup -o memory (the release_agent escape)", "cgroup", "/tmp/agt-mnt",
            "cgroup", 0, "memory");
  try_mount("mount -t cgroup2", "cgroup2", "/tmp/agt-mnt", "cgroup2", 0, NULL);
  try_mount("mount -t devpts", "devpts", "/tmp/agt-mnt", "devpts", 0, "newinstance");
  try_mount("mount --rbind / /tmp/agt-mnt", "/", "/tmp/agt-mnt", NULL, MS_BIND | MS_REC, NULL);
  try_mount("remount /proc/sys read-write", NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount /dev read-write", NULL, "/dev", NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount / without nosuid", NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount /work with suid,dev", NULL, "/work", NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("make / shared", NULL, "/", NULL, MS_SHARED | MS_REC, NULL);
  for (size_t i = 0; i < sizeof umounts / sizeof umounts[0]; i++) {
    snprintf(desc, sizeof desc, "umount2(\"%s\", MNT_DETACH)", umounts[i]);
    try_rc(desc, umount2(umounts[i], MNT_DETACH));
  }
  try_rc("pivot_root(\"/tmp\", \"/tmp/agt-mnt\")", syscall(SYS_pivot_root, "/tmp", "/tmp/agt-mnt"));
  try_rc("pivot_root(\".\", \".\")", syscall(SYS_pivot_root, ".", "."));
  PROBE("mount(bad pointers)", syscall(SYS_mount, (void *)1, (void *)1, (void *)1, 0, (void *)1),
        "EFAULT");
  PROBE("umount2(bad pointer)", syscall(SYS_umount2, (void *)1, 0), "EFAULT");
  /* The new mount API. */
  try_fd("fsopen(\"proc\")", syscall(SYS_fsopen, "proc", 0));
  try_fd("fsopen(\"tmpfs\")", syscall(SYS_fsopen, "tmpfs", 0));
  try_fd("fspick(\"/proc/sys\")", syscall(SYS_fspick, AT_FDCWD, "/proc/sys", 0));
  try_fd("open_tree(\"/\", OPEN_TREE_CLONE|AT_RECURSIVE)",
         syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */ | 0x8000));
  try_fd("open_tree(\"/proc\", 0)", syscall(SYS_open_tree, AT_FDCWD, "/proc", 0));
  PROBE("open_tree(bad pointer)", syscall(SYS_open_tree, AT_FDCWD, (void *)1, 0), "EFAULT");
  try_rc("move_mount(\"/proc/sys\" -> \"/tmp/agt-mnt\")",
         syscall(SYS_move_mount, AT_FDCWD, "/proc/sys", AT_FDCWD, "/tmp/agt-mnt", 0));
  memset(&ma, 0, sizeof ma);
  ma.attr_clr = 0x1; /* MOUNT_ATTR_RDONLY */
  try_rc("mount_setattr(\"/proc/sys\", clear RDONLY)",
         syscall(SYS_mount_setattr, AT_FDCWD, "/proc/sys", 0, &ma, sizeof ma));
  ma.attr_clr = 0x2; /* MOUNT_ATTR_NOSUID */
  try_rc("mount_setattr(\"/\", AT_RECURSIVE, clear NOSUID)",
         syscall(SYS_mount_setattr, AT_FDCWD, "/", 0x8000, &ma, sizeof ma));
  try_fd("fsmount(-1)", syscall(SYS_fsmount, -1, 0, 0));
  try_rc("fsconfig(-1)", syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0));
  after = count_lines("/proc/self/mountinfo");
  if (before == after)
    blocked("the mount table is unchanged (%d mounts)", after);
  else
    escaped("the mount table changed from %d to %d mounts", before, after);
  if (statvfs("/proc/sys", &sv) == 0 && (sv.f_flag & ST_RDONLY))
    blocked("/proc/sys is still read-only");
  else
    escaped("/proc/sys is not read-only");
  return 0;
}

/* ---- E18: the extra mounts a request binds in (read-only unless writable) ---------------- */

/* args: a read-only directory mount, a mount below it (read-only too), a writable one and a
 * read-only file mount; each was made world-writable on the guest, so that only the mount
 * stops a write. */
static int v_mounts(int argc, char **argv)
{
  const char *ro, *sub, *rw, *file;
  char path[512];
  struct agt_mount_attr ma;
  struct statvfs sv;
  struct statfs sfs;
  int fd;

  if (argc < 4)
    return 2;
  ro = argv[0];
  sub = argv[1];
  rw = argv[2];
  file = argv[3];
  snprintf(path, sizeof path, "%s/agt-new", ro);
  try_fd("create a file in the read-only mount", open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  snprintf(path, sizeof path, "%s/agt-new", sub);
  try_fd("create a file in a mount below the read-only one",
         open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  try_fd("open the read-only file mount for writing", open(file, O_WRONLY | O_CLOEXEC));
  snprintf(path, sizeof path, "%s/agt-dir", ro);
  try_rc("mkdir in the read-only mount", mkdir(path, 0755));
  try_mount("remount the read-only mount read-write", NULL, ro, NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount the mount below it read-write", NULL, sub, NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount the file mount read-write", NULL, file, NULL, MS_REMOUNT | MS_BIND, NULL);
  try_mount("remount the writable mount with suid,dev", NULL, rw, NULL, MS_REMOUNT | MS_BIND, NULL);
  memset(&ma, 0, sizeof ma);
  ma.attr_clr = 0x1; /* MOUNT_ATTR_RDONLY */
  try_rc("mount_setattr(read-only mount, AT_RECURSIVE, clear RDONLY)",
         syscall(SYS_mount_setattr, AT_FDCWD, ro, 0x8000, &ma, sizeof ma));
  try_rc("umount2(read-only mount, MNT_DETACH)", umount2(ro, MNT_DETACH));
  try_rc("umount2(the mount below it, MNT_DETACH)", umount2(sub, MNT_DETACH));
  try_fd("open_tree(read-only mount, OPEN_TREE_CLONE)",
         syscall(SYS_open_tree, AT_FDCWD, ro, 1 /* OPEN_TREE_CLONE */ | 0x8000));
  try_mount("bind the read-only mount again elsewhere", ro, "/tmp", NULL, MS_BIND, NULL);
  if (statvfs(ro, &sv) == 0 && (sv.f_flag & ST_RDONLY))
    blocked("the read-only mount is still read-only");
  else
    escaped("the read-only mount is writable");
  if (statvfs(sub, &sv) == 0 && (sv.f_flag & ST_RDONLY))
    blocked("the mount below it is read-only");
  else
    escaped("the mount below the read-only one is writable");
  if (statvfs(file, &sv) == 0 && (sv.f_flag & ST_RDONLY))
    blocked("the file mount is read-only");
  else
    escaped("the file mount is writable");
  if (statvfs(rw, &sv) == 0 && (sv.f_flag & ST_NOSUID) && (sv.f_flag & ST_NODEV))
    blocked("the writable mount is nosuid,nodev");
  else
    escaped("the writable mount allows setuid or devices");
  if (argc > 4) {
    /* a persistent home on the jails' btrfs: a subvolume made in it would escape its quota */
    struct btrfs_ioctl_vol_args va;
    int hfd = open(argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    memset(&va, 0, sizeof va);
    snprintf(va.name, sizeof va.name, "agt-subvol");
    if (hfd < 0)
      info("open %s: %s", argv[4], en(errno));
    else if (statfs(argv[4], &sfs) == 0 && sfs.f_type != BTRFS_SUPER_MAGIC)
      info("%s is not on btrfs (f_type %lx): no subvolume to try", argv[4],
           (unsigned long)sfs.f_type);
    else
      try_rc("BTRFS_IOC_SUBVOL_CREATE in the home (a subvolume outside its quota)",
             ioctl(hfd, BTRFS_IOC_SUBVOL_CREATE, &va));
    if (hfd >= 0) {
      memset(&va, 0, sizeof va);
      va.fd = hfd;
      snprintf(va.name, sizeof va.name, "agt-snap");
      try_rc("BTRFS_IOC_SNAP_CREATE of the home into itself",
             ioctl(hfd, BTRFS_IOC_SNAP_CREATE, &va));
      close(hfd);
    }
  }
  snprintf(path, sizeof path, "%s/agt-written", rw);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    info("the writable mount takes writes, as it should");
    close(fd);
  } else {
    info("the writable mount refused a write: %s", en(errno));
  }
  return 0;
}

/* ---- E7: open_by_handle_at / name_to_handle_at ("shocker") ------------------------------- */

static int v_handle(void)
{
  struct {
    struct file_handle h;
    unsigned char f[128];
  } fh;
  int mnt_id, wfd;
  long r;

  memset(&fh, 0, sizeof fh);
  fh.h.handle_bytes = 128;
  if (name_to_handle_at(AT_FDCWD, "/work", &fh.h, &mnt_id, 0) == 0)
    escaped("name_to_handle_at(\"/work\") gave a handle (type %d, %u bytes)", fh.h.handle_type,
            fh.h.handle_bytes);
  else
    blocked("name_to_handle_at(\"/work\"): %s", en(errno));
  PROBE("name_to_handle_at(bad pointer)",
        syscall(SYS_name_to_handle_at, AT_FDCWD, (void *)1, (void *)1, (void *)1, 0), "EFAULT");
  /* The shocker: forge a handle of inode 2 (the root of an ext4 file system) and open it
   * through the workspace, a bind mount of a directory on the guest's disk. */
  wfd = open("/work", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  {
    uint32_t body[2] = {2 /* inode */, 0 /* generation */};
    memset(&fh, 0, sizeof fh);
    fh.h.handle_bytes = 8;
    fh.h.handle_type = 1; /* FILEID_INO32_GEN */
    memcpy(fh.h.f_handle, body, sizeof body);
    r = open_by_handle_at(wfd, &fh.h, O_RDONLY | O_DIRECTORY);
    if (r >= 0) {
      if (!got_out((int)r, "open_by_handle_at of inode 2 through /work"))
        escaped("open_by_handle_at of inode 2 through /work opened a directory");
      close((int)r);
    } else {
      blocked("open_by_handle_at(/work, {ino 2, gen 0}) (shocker): %s", en(errno));
    }
  }
  PROBE("open_by_handle_at(bad fd, bad pointer)", syscall(SYS_open_by_handle_at, -1, (void *)1, 0),
        "EBADF or EFAULT");
  if (wfd >= 0)
    close(wfd);
  return 0;
}

/* ---- E8: unix sockets of the guest, AF_VSOCK, netlink ------------------------------------ */

static int unix_connect(const char *name, int type)
{
  struct sockaddr_un a;
  socklen_t len;
  int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0), r, e;

  if (s < 0)
    return -errno;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  if (name[0] == '@') {
    size_t n = strlen(name + 1);
    if (n > sizeof a.sun_path - 1)
      n = sizeof a.sun_path - 1;
    memcpy(a.sun_path + 1, name + 1, n);
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
  } else {
    snprintf(a.sun_path, sizeof a.sun_path, "%s", name);
    len = sizeof a;
  }
  if (type == SOCK_DGRAM)
    r = (int)sendto(s, "x", 1, MSG_NOSIGNAL, (struct sockaddr *)&a, len) < 0 ? -1 : 0;
  else
    r = connect(s, (struct sockaddr *)&a, len);
  e = errno;
  close(s);
  return r == 0 ? 0 : -e;
}

static int nl_request(int s, struct nlmsghdr *h)
{
  char buf[8192];
  struct sockaddr_nl k = {.nl_family = AF_NETLINK};
  ssize_t n;

  if (sendto(s, h, h->nlmsg_len, 0, (struct sockaddr *)&k, sizeof k) < 0)
    return -errno;
  n = recv(s, buf, sizeof buf, 0);
  if (n < 0)
    return -errno;
  for (struct nlmsghdr *m = (struct nlmsghdr *)buf; NLMSG_OK(m, (size_t)n); m = NLMSG_NEXT(m, n))
    if (m->nlmsg_type == NLMSG_ERROR)
      return ((struct nlmsgerr *)NLMSG_DATA(m))->error;
  return 0;
}

static void nl_attr(struct nlmsghdr *h, unsigned short type, const void *data, size_t len)
{
  struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

  a->rta_type = type;
  a->rta_len = (unsigned short)RTA_LENGTH(len);
  memcpy(RTA_DATA(a), data, len);
  h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

static void v_netlink(void)
{
  union {
    struct nlmsghdr h;
    char b[1024];
  } m;
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  struct sockaddr_nl sa;
  int r;

  if (s < 0) {
    blocked("socket(AF_NETLINK, NETLINK_ROUTE): %s", en(errno));
  } else {
    char buf[32768];
    ssize_t n;
    int links = 0;
    char names[256] = "";

    /* Dump the links: only the jail's loopback must show. */
    memset(&m, 0, sizeof m);
    m.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    m.h.nlmsg_type = RTM_GETLINK;
    m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    if (send(s, &m, m.h.nlmsg_len, 0) > 0) {
      int done = 0;
      while (!done && (n = recv(s, buf, sizeof buf, 0)) > 0)
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
          struct ifinfomsg *ifi = NLMSG_DATA(h);
          int alen = (int)IFLA_PAYLOAD(h);
          if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
            done = 1;
            break;
          }
          links++;
          for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
            if (a->rta_type == IFLA_IFNAME && strlen(names) + 20 < sizeof names) {
              strcat(names, " ");
              strncat(names, RTA_DATA(a), 16);
            }
        }
    }
    if (links == 1 && !strcmp(names, " lo"))
      blocked("rtnetlink shows one link: lo");
    else
      escaped("rtnetlink shows %d links:%s", links, names);
    /* Add an address to lo, and create a link: both need CAP_NET_ADMIN. */
    memset(&m, 0, sizeof m);
    m.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
    m.h.nlmsg_type = RTM_NEWADDR;
    m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    {
      struct ifaddrmsg *ifa = NLMSG_DATA(&m.h);
      struct in_addr ip;
      ifa->ifa_family = AF_INET;
      ifa->ifa_prefixlen = 32;
      ifa->ifa_index = 1;
      inet_pton(AF_INET, "10.66.0.1", &ip);
      nl_attr(&m.h, IFA_LOCAL, &ip, sizeof ip);
      nl_attr(&m.h, IFA_ADDRESS, &ip, sizeof ip);
    }
    r = nl_request(s, &m.h);
    if (r == 0)
      escaped("RTM_NEWADDR 10.66.0.1 on lo succeeded");
    else
      blocked("RTM_NEWADDR on lo: %s", en(-r));
    memset(&m, 0, sizeof m);
    m.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    m.h.nlmsg_type = RTM_NEWLINK;
    m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    nl_attr(&m.h, IFLA_IFNAME, "agtx0", 6);
    {
      /* IFLA_LINKINFO { IFLA_INFO_KIND "dummy" } */
      struct rtattr *li = (struct rtattr *)((char *)&m.h + NLMSG_ALIGN(m.h.nlmsg_len));
      li->rta_type = IFLA_LINKINFO;
      m.h.nlmsg_len = NLMSG_ALIGN(m.h.nlmsg_len) + RTA_LENGTH(0);
      nl_attr(&m.h, IFLA_INFO_KIND, "dummy", 6);
      li->rta_len = (unsigned short)((char *)&m.h + m.h.nlmsg_len - (char *)li);
    }
    r = nl_request(s, &m.h);
    if (r == 0)
      escaped("RTM_NEWLINK created a dummy link");
    else
      blocked("RTM_NEWLINK (create a dummy link): %s", en(-r));
    close(s);
  }
  /* Uevents are broadcast into every network namespace of the initial user namespace: a
   * listener in the jail would see the guest's device events. */
  s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
  if (s < 0) {
    blocked("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT): %s", en(errno));
  } else {
    memset(&sa, 0, sizeof sa);
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = 1;
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) == 0)
      escaped("a NETLINK_KOBJECT_UEVENT socket joined the kernel's uevent group: it receives the "
              "guest's device events");
    else
      blocked("bind NETLINK_KOBJECT_UEVENT group 1: %s", en(errno));
    close(s);
  }
  s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 9 /* NETLINK_AUDIT */);
  if (s < 0) {
    blocked("socket(AF_NETLINK, NETLINK_AUDIT): %s", en(errno));
  } else {
    memset(&sa, 0, sizeof sa);
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = 1; /* AUDIT_NLGRP_READLOG */
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) == 0)
      escaped("a NETLINK_AUDIT socket joined the audit log group");
    else
      blocked("bind NETLINK_AUDIT read-log group: %s", en(errno));
    close(s);
  }
}

/* Connect to each unix socket named (abstract ones start with '@'); with defaults, to the
 * usual suspects of a Linux guest as well. */
static void unix_targets(int argc, char **argv, int defaults_too)
{
  static const char *const defaults[] = {
      "@/org/freedesktop/systemd1/notify",
      "@/containerd-shim",
      "@/tmp/.X11-unix/X0",
      "/run/systemd/notify",
      "/run/systemd/private",
      "/run/dbus/system_bus_socket",
      "/var/run/docker.sock",
      "/run/containerd/containerd.sock",
  };
  size_t nd = defaults_too ? sizeof defaults / sizeof defaults[0] : 0;

  for (size_t i = 0; i < nd + (size_t)argc; i++) {
    const char *name = i < nd ? defaults[i] : argv[i - nd];
    int rs = unix_connect(name, SOCK_STREAM), rd = unix_connect(name, SOCK_DGRAM);
    if (rs == 0)
      escaped("connected to the guest's unix socket %s", name);
    else if (rd == 0)
      escaped("sent a datagram to the guest's unix socket %s", name);
    else
      blocked("unix socket %s: connect %s, sendto %s", name, en(-rs), en(-rd));
  }
}

static int v_abstract(int argc, char **argv)
{
  unix_targets(argc, argv, 0);
  return 0;
}

static int v_unix(int argc, char **argv)
{
  int s;

  unix_targets(argc, argv, 1);
  s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    struct sockaddr_vm vm = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = 22};
    escaped("socket(AF_VSOCK) succeeded: connect to the VM host gives %s",
            connect(s, (struct sockaddr *)&vm, sizeof vm) == 0 ? "success" : en(errno));
    close(s);
  } else {
    blocked("socket(AF_VSOCK, SOCK_STREAM): %s", en(errno));
  }
  s = socket(AF_VSOCK, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    escaped("socket(AF_VSOCK, SOCK_DGRAM) succeeded");
    close(s);
  } else {
    blocked("socket(AF_VSOCK, SOCK_DGRAM): %s", en(errno));
  }
  v_netlink();
  return 0;
}

/* ---- E9: TIOCSTI and TIOCLINUX ------------------------------------------------------------ */

static int sti_in_own_pty(void *arg)
{
  int slave = *(int *)arg;
  char c = 'x';

  if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
    return 100 + errno;
  if (syscall(SYS_ioctl, slave, (unsigned long)TIOCSTI, &c) == 0)
    return 0;
  return errno == EPERM ? 1 : 2;
}

static int v_tty(void)
{
  static const struct {
    unsigned long req;
    const char *name;
  } reqs[] = {
      {TIOCSTI, "TIOCSTI"},
      {0x100000000UL | TIOCSTI, "TIOCSTI|1<<32 (CVE-2019-10063)"},
      {0xffffffff00000000UL | TIOCSTI, "TIOCSTI|0xffffffff<<32"},
      {TIOCLINUX, "TIOCLINUX"},
      {0x100000000UL | TIOCLINUX, "TIOCLINUX|1<<32"},
  };
  char c = 'x', sub[2] = {3 /* TIOCL_PASTESEL */, 0};
  int fd, master, slave, st;

  for (int f = 0; f < 3; f++)
    info("fd %d %s a terminal", f, isatty(f) ? "is" : "is not");
  for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
    for (int f = 0; f < 3; f++) {
      long r = syscall(SYS_ioctl, f, reqs[i].req, strstr(reqs[i].name, "LINUX") ? sub : &c);
      if (r == 0)
        escaped("ioctl(%d, %s) succeeded", f, reqs[i].name);
      else
        blocked("ioctl(fd %d, %s): %s", f, reqs[i].name, en(errno));
    }
    {
      char d[96];
      snprintf(d, sizeof d, "ioctl(-1, %s)", reqs[i].name);
      PROBE(d, syscall(SYS_ioctl, -1, reqs[i].req, NULL), "EBADF");
    }
  }
  fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    /* A jail on a terminal (jail run --tty) has one: it must be a pty of the jail's own
     * devpts, not a terminal of the guest. */
    struct stat t, pts;
    if (isatty(0) && fstat(0, &t) == 0 && stat("/dev/pts", &pts) == 0 && major(t.st_rdev) >= 136 &&
        major(t.st_rdev) <= 143 && t.st_dev == pts.st_dev)
      blocked("the controlling terminal is %s, a pty of the jail's own devpts (dev %u:%u)",
              ttyname(0) ? ttyname(0) : "?", major(pts.st_dev), minor(pts.st_dev));
    else
      escaped("/dev/tty opens: the agent has a controlling terminal from outside the jail");
    close(fd);
  } else {
    blocked("open /dev/tty: %s (no controlling terminal)", en(errno));
  }
  /* A pty of the jail's own, made the controlling terminal of a child: without the filter,
   * TIOCSTI there would work (dev.tty.legacy_tiocsti permitting). */
  if (openpty(&master, &slave, NULL, NULL, NULL) < 0) {
    info("openpty: %s", en(errno));
    return 0;
  }
  st = in_child(sti_in_own_pty, &slave);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
    escaped("TIOCSTI on the jail's own controlling pty succeeded (the filter does not cover it)");
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
    blocked("TIOCSTI on the jail's own controlling pty: EPERM");
  else
    info("TIOCSTI on own pty: child status %d", st);
  close(master);
  close(slave);
  return 0;
}

/* ---- E10: symlink swaps on bind sources ----------------------------------------------------- */

/* In DIR (the workspace, /work): keep swapping DIR/sub between a directory and a symlink to /
 * (or to ../.., the test's directory on the guest) for SECONDS, or until DIR/stop exists. */
static int v_race(int argc, char **argv)
{
  const char *dir = argc > 0 ? argv[0] : "/work";
  double secs = argc > 1 ? atof(argv[1]) : 10, t0 = now_ms();
  unsigned long n = 0, failed = 0;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (dfd < 0) {
    info("open %s: %s", dir, en(errno));
    return 2;
  }
  if (mkdirat(dfd, "sub", 0755) < 0 && errno != EEXIST)
    info("mkdir sub: %s", en(errno));
  unlinkat(dfd, "sub.root", 0);
  unlinkat(dfd, "sub.up", 0);
  if (symlinkat("/", dfd, "sub.root") < 0 || symlinkat("../..", dfd, "sub.up") < 0)
    info("symlink: %s", en(errno));
  printf("racing\n");
  while (now_ms() - t0 < secs * 1000) {
    /* Atomic exchanges: "sub" is always there, alternately the directory and a symlink. */
    if (syscall(SYS_renameat2, dfd, "sub", dfd, (n & 1) ? "sub.up" : "sub.root", RENAME_EXCHANGE) <
        0)
      failed++;
    n++;
    if ((n & 1023) == 0 && faccessat(dfd, "stop", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
      break;
  }
  /* Put the directory back under its name. */
  {
    struct stat st;
    for (int i = 0; i < 4; i++) {
      if (fstatat(dfd, "sub", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        break;
      syscall(SYS_renameat2, dfd, "sub", dfd, (i & 1) ? "sub.up" : "sub.root", RENAME_EXCHANGE);
    }
  }
  info("swapped %s/sub %lu times (%lu failed) in %.1f s", dir, n, failed, (now_ms() - t0) / 1000);
  blocked("the racer itself gains nothing inside its jail; the test checks the new jails");
  close(dfd);
  return 0;
}

/* ---- E11: /proc/sys, sysrq-trigger, /sys, cgroup files ------------------------------------- */

static int walk_writable(const char *dir, int *tried, char *first, size_t n)
{
  DIR *d = opendir(dir);
  struct dirent *de;
  int opened = 0;

  if (d == NULL)
    return 0;
  while ((de = readdir(d)) != NULL) {
    char path[PATH_MAX];
    struct stat st;
    int fd;
    if (de->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (lstat(path, &st) < 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      opened += walk_writable(path, tried, first, n);
      continue;
    }
    if (!S_ISREG(st.st_mode))
      continue;
    (*tried)++;
    /* Open only: nothing is ever written to a kernel knob. */
    fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      if (!opened)
        snprintf(first, n, "%s", path);
      opened++;
      close(fd);
    }
  }
  closedir(d);
  return opened;
}

static int v_writes(void)
{
  char buf[4096], first[PATH_MAX] = "";
  int tried = 0, opened;
  struct stat st;
  int r;

  opened = walk_writable("/proc/sys", &tried, first, sizeof first);
  if (opened)
    escaped("%d of %d files under /proc/sys open for writing (first: %s)", opened, tried, first);
  else
    blocked("none of the %d files under /proc/sys opens for writing (open O_WRONLY: %s)", tried,
            open("/proc/sys/kernel/core_pattern", O_WRONLY) < 0 ? en(errno) : "?");
  if (read_file("/proc/sys/kernel/core_pattern", buf, sizeof buf) > 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_CORE, &rl);
    info("core_pattern is '%.*s'; RLIMIT_CORE hard limit %llu", (int)strcspn(buf, "\n"), buf,
         (unsigned long long)rl.rlim_max);
  }
  if (stat("/proc/sysrq-trigger", &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
      minor(st.st_rdev) == 3)
    blocked("/proc/sysrq-trigger is masked by /dev/null");
  else if ((r = open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC)) >= 0) {
    escaped("/proc/sysrq-trigger opens for writing");
    close(r);
  } else {
    blocked("open /proc/sysrq-trigger for writing: %s", en(errno));
  }
  r = write_file("/proc/self/oom_score_adj", "-1000");
  if (r == 0)
    escaped("the agent made itself exempt from the OOM killer (oom_score_adj -1000)");
  else
    blocked("write -1000 to /proc/self/oom_score_adj: %s", en(-r));
  r = write_file("/proc/1/oom_score_adj", "-1000");
  if (r == 0)
    escaped("the agent changed the init's oom_score_adj");
  else
    blocked("write /proc/1/oom_score_adj: %s", en(-r));
  /* /sys */
  if (stat("/sys", &st) < 0) {
    blocked("/sys does not exist in the jail: %s", en(errno));
  } else {
    tried = 0;
    first[0] = '\0';
    opened = walk_writable("/sys", &tried, first, sizeof first);
    if (opened)
      escaped("%d of %d files under /sys open for writing (first: %s)", opened, tried, first);
    else
      blocked("/sys: none of %d files opens for writing", tried);
  }
  r = write_file("/sys/kernel/uevent_helper", "/tmp/x");
  if (r == 0)
    escaped("wrote /sys/kernel/uevent_helper");
  else
    blocked("write /sys/kernel/uevent_helper: %s", en(-r));
  /* cgroup files: no cgroupfs is mounted, and mounting one is refused (see the mount verb). */
  if (read_file("/proc/self/mountinfo", buf, sizeof buf) > 0 &&
      (strstr(buf, " cgroup ") || strstr(buf, " cgroup2 ")))
    escaped("a cgroup file system is mounted in the jail");
  else
    blocked("no cgroup file system is mounted in the jail");
  if (read_file("/proc/self/cgroup", buf, sizeof buf) > 0) {
    int others = 0;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
      char *p = strchr(l, ':');
      p = p ? strchr(p + 1, ':') : NULL;
      if (p == NULL || strcmp(p + 1, "/") != 0) {
        info("/proc/self/cgroup: %s", l);
        others++;
      }
    }
    if (others)
      escaped("/proc/self/cgroup shows %d paths outside the jail's own cgroup", others);
    else
      blocked("/proc/self/cgroup shows only / (the cgroup namespace hides the guest's tree)");
  }
  {
    static const char *const cg[] = {
        "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory/release_agent"};
    for (size_t i = 0; i < sizeof cg / sizeof cg[0]; i++) {
      r = write_file(cg[i], "0");
      if (r == 0)
        escaped("wrote %s", cg[i]);
      else
        blocked("write %s: %s", cg[i], en(-r));
    }
  }
  return 0;
}

/* ---- E12: setuid copies, no_new_privs, nosuid ------------------------------------------------ */

static int copy_file(const char *from, const char *to)
{
  char buf[65536];
  int in = open(from, O_RDONLY | O_CLOEXEC), out;
  ssize_t n;

  if (in < 0)
    return -errno;
  unlink(to);
  out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) {
    int e = errno;
    close(in);
    return -e;
  }
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) {
      n = -1;
      break;
    }
  close(in);
  close(out);
  return n < 0 ? -EIO : 0;
}

/* Run path with argv, return its wait status and the first line of its output. */
static int run_capture(const char *path, char *const *argv, char *out, size_t n)
{
  int p[2], st;
  pid_t pid;
  ssize_t r;

  out[0] = '\0';
  if (pipe2(p, O_CLOEXEC) < 0)
    return -1;
  pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    execv(path, argv);
    _exit(127);
  }
  close(p[1]);
  r = read(p[0], out, n - 1);
  out[r > 0 ? r : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  close(p[0]);
  waitpid(pid, &st, 0);
  return st;
}

static int v_setuid(void)
{
  static const char *const dirs[] = {"/tmp", "/work", "/home/agent", "/dev/shm"};
  static const char *const need_nosuid[] = {"/",     "/work", "/tmp",    "/dev/shm",
                                            "/proc", "/dev",  "/dev/pts"};
  char buf[8192], path[PATH_MAX], out[256], want[32];
  uid_t uid = getuid();

  snprintf(want, sizeof want, "%u", (unsigned)uid);
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    char *bb[] = {(char *)"busybox", (char *)"id", (char *)"-u", NULL};
    char *self[] = {(char *)"attack", (char *)"euid", NULL};
    int r, st;
    snprintf(path, sizeof path, "%s/agt-suid-busybox", dirs[i]);
    r = copy_file("/bin/busybox", path);
    if (r == 0 && chmod(path, 06755) == 0) {
      st = run_capture(path, bb, out, sizeof out);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        blocked("setuid busybox copy in %s does not run at all (exec refused: noexec mount)",
                dirs[i]);
      else if (strcmp(out, want) != 0)
        escaped("setuid busybox copy in %s: id -u = '%s' (agent uid %s)", dirs[i], out, want);
      else
        blocked("setuid busybox copy in %s: id -u = %s, the agent's own uid", dirs[i], out);
    } else {
      info("copy busybox to %s: %s", path, en(r < 0 ? -r : errno));
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/agt-suid-attack", dirs[i]);
    r = copy_file("/proc/self/exe", path);
    if (r == 0 && chmod(path, 06755) == 0) {
      if (chown(path, 0, 0) == 0)
        escaped("chown of the setuid copy to root succeeded");
      else
        blocked("chown %s to root: %s", path, en(errno));
      {
        /* A file capability: CAP_SYS_ADMIN in the permitted and effective sets. */
        struct {
          uint32_t magic_etc;
          struct {
            uint32_t permitted, inheritable;
          } data[2];
        } cap = {0x02000001, {{1u << 21, 0}, {0, 0}}};
        if (setxattr(path, "security.capability", &cap, sizeof cap, 0) == 0)
          escaped("set a file capability (cap_sys_admin+ep) on %s", path);
        else
          blocked("setxattr security.capability on %s: %s", path, en(errno));
      }
      st = run_capture(path, self, out, sizeof out);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        blocked("setuid copy in %s does not run at all (exec refused: noexec mount)", dirs[i]);
      else if (strcmp(out, want) != 0)
        escaped("setuid copy in %s ran with euid '%s'", dirs[i], out);
      else
        blocked("setuid copy in %s ran with euid %s, unchanged", dirs[i], out);
    }
    unlink(path);
  }
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
    blocked("PR_GET_NO_NEW_PRIVS = 1");
  else
    escaped("no_new_privs is not set");
  if (prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0 && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0)
    escaped("no_new_privs could be cleared");
  else
    blocked("clearing no_new_privs: %s", en(errno));
  if (read_file("/proc/self/status", buf, sizeof buf) > 0) {
    static const char *const want0[] = {"CapInh:\t0000000000000000",
                                        "CapPrm:\t0000000000000000",
                                        "CapEff:\t0000000000000000",
                                        "CapBnd:\t0000000000000000",
                                        "CapAmb:\t0000000000000000",
                                        "NoNewPrivs:\t1",
                                        "Seccomp:\t2"};
    for (size_t i = 0; i < sizeof want0 / sizeof want0[0]; i++) {
      if (strstr(buf, want0[i]))
        blocked("/proc/self/status: %s", want0[i]);
      else
        escaped("/proc/self/status lacks '%s'", want0[i]);
    }
    {
      char *u = strstr(buf, "Uid:");
      if (u && strncmp(u, "Uid:\t0\t", 7) != 0)
        blocked("%.*s", (int)strcspn(u, "\n"), u);
      else
        escaped("the agent runs as root");
    }
  }
  /* nosuid on every mount the agent can write to or exec from. */
  if (read_file("/proc/self/mountinfo", buf, sizeof buf) > 0) {
    for (size_t i = 0; i < sizeof need_nosuid / sizeof need_nosuid[0]; i++) {
      char *l = buf, *found = NULL;
      while (l && *l) {
        char mp[PATH_MAX], opts[512];
        if (sscanf(l, "%*s %*s %*s %*s %4095s %511s", mp, opts) == 2 && !strcmp(mp, need_nosuid[i]))
          found = strstr(opts, "nosuid") ? l : (char *)1;
        l = strchr(l, '\n');
        if (l)
          l++;
      }
      if (found == NULL)
        info("%s is not a mount point", need_nosuid[i]);
      else if (found == (char *)1)
        escaped("%s is mounted without nosuid", need_nosuid[i]);
      else
        blocked("%s is mounted nosuid", need_nosuid[i]);
    }
  }
  return 0;
}

static int v_euid(void)
{
  printf("%u\n", (unsigned)geteuid());
  return 0;
}

/* ---- E13: user namespaces and blocked system calls ----------------------------------------- */

static void try_unshare(int flag, const char *name)
{
  if (unshare(flag) == 0)
    escaped("unshare(%s) succeeded", name);
  else
    blocked("unshare(%s): %s", name, en(errno));
}

static void try_clone(unsigned long flags, const char *name)
{
  long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);

  if (r == 0)
    _exit(0);
  if (r > 0) {
    escaped("clone(%s) made a child", name);
    waitpid((pid_t)r, NULL, 0);
  } else {
    blocked("clone(%s): %s", name, en(errno));
  }
}

static int v_ns(void)
{
  struct clone_args ca;
  char out[256];
  long r;
  int fd;

  try_unshare(CLONE_NEWUSER, "CLONE_NEWUSER: unshare -U");
  try_unshare(CLONE_NEWNET, "CLONE_NEWNET: unshare -n");
  try_unshare(CLONE_NEWNS, "CLONE_NEWNS: unshare -m");
  try_unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET, "CLONE_NEWUSER|NEWNS|NEWNET");
  try_unshare(CLONE_NEWPID, "CLONE_NEWPID");
  try_unshare(CLONE_NEWIPC, "CLONE_NEWIPC");
  try_unshare(CLONE_NEWUTS, "CLONE_NEWUTS");
  try_unshare(CLONE_NEWCGROUP, "CLONE_NEWCGROUP");
  try_unshare(0x80, "CLONE_NEWTIME");
  try_clone(CLONE_NEWUSER, "CLONE_NEWUSER");
  try_clone(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID,
            "NEWUSER|NEWNS|NEWNET|NEWPID");
  memset(&ca, 0, sizeof ca);
  ca.flags = CLONE_NEWUSER;
  ca.exit_signal = SIGCHLD;
  r = syscall(SYS_clone3, &ca, sizeof ca);
  if (r == 0)
    _exit(0);
  if (r > 0) {
    escaped("clone3({CLONE_NEWUSER}) made a child");
    waitpid((pid_t)r, NULL, 0);
  } else if (errno == ENOSYS) {
    blocked("clone3({CLONE_NEWUSER}): ENOSYS, so libc falls back to clone(2), whose flags the "
            "filter can see");
  } else {
    escaped("clone3 answered %s, not ENOSYS", en(errno));
  }
  memset(&ca, 0, sizeof ca);
  ca.exit_signal = SIGCHLD;
  r = syscall(SYS_clone3, &ca, sizeof ca);
  if (r == 0)
    _exit(0);
  if (r > 0) {
    escaped("clone3 without namespace flags made a child (expected ENOSYS for every clone3)");
    waitpid((pid_t)r, NULL, 0);
  } else if (errno == ENOSYS) {
    blocked("clone3({}) without flags: ENOSYS as well");
  } else {
    escaped("clone3({}) answered %s, not ENOSYS", en(errno));
  }
  PROBE("clone3(NULL, 0)", syscall(SYS_clone3, NULL, 0), "EINVAL");
  fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    PROBE("setns(own user namespace)", syscall(SYS_setns, fd, CLONE_NEWUSER), "EINVAL");
    close(fd);
  }
  fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    blocked("open /proc/1/ns/mnt (the init's): %s", en(errno));
  } else {
    try_rc("setns(the init's mount namespace)", syscall(SYS_setns, fd, 0));
    close(fd);
  }
  {
    char *u[] = {(char *)"/bin/busybox", (char *)"unshare", (char *)"-U", (char *)"-r",
                 (char *)"/bin/busybox", (char *)"id",      (char *)"-u", NULL};
    char *n[] = {(char *)"/bin/busybox", (char *)"unshare", (char *)"-n", (char *)"/bin/true",
                 NULL};
    int st = run_capture(u[0], u, out, sizeof out);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      escaped("busybox unshare -U -r id -u ran and printed %s", out);
    else
      blocked("busybox unshare -U -r: exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    st = run_capture(n[0], n, out, sizeof out);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      escaped("busybox unshare -n ran");
    else
      blocked("busybox unshare -n: exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  return 0;
}

static void real(const char *desc, long r)
{
  if (r >= 0) {
    escaped("%s succeeded (%ld)", desc, r);
    if (r > 2 && r < 65536)
      close((int)r);
  } else {
    blocked("%s: %s", desc, en(errno));
  }
}

static int x32_mount(void *arg)
{
  long r = syscall(0x40000000L | 165 /* mount */, (void *)1, (void *)1, (void *)1, 0, (void *)1);

  (void)arg;
  if (r >= 0)
    return 5;
  return errno == EFAULT ? 1 : errno == ENOSYS ? 2 : errno == EPERM ? 3 : 4;
}

#if defined(__x86_64__)
static int i386_mount(void *arg)
{
  long r;

  (void)arg;
  /* mount is 21 on i386: int 0x80 enters the 32-bit syscall table from a 64-bit process. */
  __asm__ volatile("int $0x80"
                   : "=a"(r)
                   : "a"(21L), "b"(1L), "c"(1L), "d"(1L), "S"(0L), "D"(1L)
                   : "memory", "r8", "r9", "r10", "r11");
  return r == -EFAULT ? 1 : r == -ENOSYS ? 2 : r == -EPERM ? 3 : 4;
}
#endif

static void abi(const char *name, int st)
{
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
    blocked("%s: the process was killed with SIGSYS (foreign system call ABI)", name);
  else if (WIFEXITED(st) && (WEXITSTATUS(st) == 2 || WEXITSTATUS(st) == 3))
    blocked("%s: %s", name, WEXITSTATUS(st) == 2 ? "ENOSYS" : "EPERM");
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
    escaped("%s reached the kernel (EFAULT): the filter does not cover this ABI", name);
  else
    escaped("%s: unexpected outcome (wait status 0x%x)", name, st);
}

static int v_syscalls(void)
{
  union bpf_attr ba;
  struct perf_event_attr pa;
  struct io_uring_params up;
  char buf[256];
  int bb;

  memset(&ba, 0, sizeof ba);
  ba.map_type = BPF_MAP_TYPE_ARRAY;
  ba.key_size = 4;
  ba.value_size = 4;
  ba.max_entries = 1;
  real("bpf(BPF_MAP_CREATE)", syscall(SYS_bpf, BPF_MAP_CREATE, &ba, sizeof ba));
  PROBE("bpf(bad pointer)", syscall(SYS_bpf, BPF_MAP_CREATE, (void *)1, 64), "EFAULT");
  memset(&pa, 0, sizeof pa);
  pa.type = PERF_TYPE_SOFTWARE;
  pa.size = sizeof pa;
  pa.config = PERF_COUNT_SW_CPU_CLOCK;
  pa.exclude_kernel = 1;
  pa.exclude_hv = 1;
  real("perf_event_open(cpu-clock of itself, user only)",
       syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0));
  PROBE("perf_event_open(bad pointer)", syscall(SYS_perf_event_open, (void *)1, 0, -1, -1, 0),
        "EFAULT");
  real("userfaultfd(UFFD_USER_MODE_ONLY)",
       syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
  PROBE("userfaultfd(bad flags)", syscall(SYS_userfaultfd, 0xffff), "EINVAL");
  memset(&up, 0, sizeof up);
  real("io_uring_setup(4)", syscall(SYS_io_uring_setup, 4, &up));
  PROBE("io_uring_setup(bad pointer)", syscall(SYS_io_uring_setup, 1, (void *)1), "EFAULT");
  PROBE("io_uring_enter(-1)", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0), "EBADF");
  PROBE("io_uring_register(-1)", syscall(SYS_io_uring_register, -1, 0, NULL, 0), "EBADF");
  real("keyctl(KEYCTL_JOIN_SESSION_KEYRING)",
       syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "agt-attack"));
  PROBE("keyctl(bad op)", syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0), "EOPNOTSUPP");
  real("add_key(\"user\")",
       syscall(SYS_add_key, "user", "agt-attack", "x", 1, KEY_SPEC_PROCESS_KEYRING));
  PROBE("add_key(bad pointer)", syscall(SYS_add_key, (void *)1, (void *)1, NULL, 0, 0), "EFAULT");
  PROBE("request_key(bad pointer)", syscall(SYS_request_key, (void *)1, (void *)1, NULL, 0),
        "EFAULT");
  real("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
  real("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, "", 0));
  real("init_module", syscall(SYS_init_module, "", 0, ""));
  bb = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
  real("finit_module(/bin/busybox)", syscall(SYS_finit_module, bb, "", 0));
  if (bb >= 0)
    close(bb);
  real("delete_module(\"loop\")", syscall(SYS_delete_module, "loop", O_NONBLOCK));
  {
    long r = syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf);
    if (r > 0)
      escaped("syslog(READ_ALL) read %ld bytes of the guest's kernel log", r);
    else
      blocked("syslog(READ_ALL): %s", r < 0 ? en(errno) : "nothing");
  }
  real("fanotify_init(FAN_CLASS_NOTIF)", syscall(SYS_fanotify_init, 0, O_RDONLY));
  real("acct(\"/tmp/agt-acct\")", syscall(SYS_acct, "/tmp/agt-acct"));
  real("swapon(\"/tmp/agt-swap\")", syscall(SYS_swapon, "/tmp/agt-swap", 0));
  real("reboot(CAD_OFF)", syscall(SYS_reboot, 0xfee1dead, 672274793, 0, NULL));
  {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    real("settimeofday(now)", syscall(SYS_settimeofday, &tv, NULL));
  }
#if defined(__x86_64__)
  real("iopl(3)", syscall(SYS_iopl, 3));
  real("ioperm(0x80)", syscall(SYS_ioperm, 0x80, 1, 1));
#endif
  real("kcmp(self, init)", syscall(SYS_kcmp, getpid(), 1, 0 /* KCMP_FILE */, 0, 0));
  abi("x32 mount (nr | 0x40000000)", in_child(x32_mount, NULL));
#if defined(__x86_64__)
  abi("i386 mount via int 0x80", in_child(i386_mount, NULL));
#endif
  return 0;
}

/* ---- E14: signals -----------------------------------------------------------------------------
 */

static volatile sig_atomic_t got_signals;

static void on_signal(int sig)
{
  (void)sig;
  got_signals++;
}

static char proc_state(pid_t pid)
{
  char path[64], buf[512], *p;

  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (read_file(path, buf, sizeof buf) <= 0)
    return 0;
  p = strrchr(buf, ')');
  return p && p[1] && p[2] ? p[2] : 0;
}

static int v_signals(int argc, char **argv)
{
  static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
  static const struct {
    int sig;
    const char *name;
  } sigs[] = {{SIGKILL, "SIGKILL"}, {SIGSTOP, "SIGSTOP"}, {SIGSEGV, "SIGSEGV"},
              {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGALRM, "SIGALRM"},
              {SIGPIPE, "SIGPIPE"}, {SIGTRAP, "SIGTRAP"}, {SIGTERM, "SIGTERM"},
              {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGUSR1, "SIGUSR1"}};
  struct sigaction sa;
  char buf[64];
  pid_t kid;
  int st, pid_max = 32768, seen = 0, ours = 0;

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaction(forwarded[i], &sa, NULL);
  info("the agent is pid %d, its parent %d", (int)getpid(), (int)getppid());
  kid = fork();
  if (kid == 0) {
    for (;;)
      pause();
  }
  usleep(20000);
  if (kill(-1, SIGKILL) < 0)
    info("kill(-1, SIGKILL): %s", en(errno));
  if (waitpid(kid, &st, 0) == kid && WIFSIGNALED(st))
    info("kill(-1, SIGKILL) killed the agent's own child");
  usleep(50000);
  if (proc_state(1) && proc_state(1) != 'Z')
    blocked("kill(-1, SIGKILL): the init (pid 1) is alive (state %c)", proc_state(1));
  else
    escaped("kill(-1, SIGKILL) killed the init");
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    int r = kill(1, sigs[i].sig), e = errno;
    char s;
    usleep(30000);
    s = proc_state(1);
    if (s == 0 || s == 'Z')
      escaped("kill(1, %s) killed the init", sigs[i].name);
    else if (s == 'T' || s == 't') {
      escaped("kill(1, %s) stopped the init", sigs[i].name);
      kill(1, SIGCONT);
    } else
      blocked("kill(1, %s) = %s: the init is alive (state %c)", sigs[i].name, r == 0 ? "0" : en(e),
              s);
  }
  {
    long pfd = syscall(SYS_pidfd_open, 1, 0);
    if (pfd >= 0) {
      long r = syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
      usleep(30000);
      if (proc_state(1) && proc_state(1) != 'Z')
        blocked("pidfd_send_signal(init, SIGKILL) = %s: the init is alive",
                r == 0 ? "0" : en(errno));
      else
        escaped("pidfd_send_signal(SIGKILL) killed the init");
      close((int)pfd);
    }
  }
  info("%d signals sent to pid 1 were forwarded back to the agent", (int)got_signals);
  /* Every pid number: whatever answers must be one of the jail's own processes. */
  if (read_file("/proc/sys/kernel/pid_max", buf, sizeof buf) > 0)
    pid_max = atoi(buf);
  for (int p = 1; p <= pid_max; p++) {
    char path[64];
    if (kill(p, 0) < 0 && errno == ESRCH)
      continue;
    seen++;
    snprintf(path, sizeof path, "/proc/%d", p);
    if (access(path, F_OK) == 0)
      ours++;
    else
      escaped("pid %d answers kill(pid, 0) but is not in the jail's /proc", p);
  }
  if (seen == ours)
    blocked("kill(pid, 0) for every pid 1..%d: %d answer, all the jail's own", pid_max, seen);
  /* The guest pids of agtd and of another jail's init, given by the test. */
  for (int i = 0; i < argc; i++) {
    pid_t p = (pid_t)atoi(argv[i]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)p);
    if (p <= 1 || p == getpid() || access(path, F_OK) == 0) {
      info("guest pid %d is also a pid of the jail; not signalled", (int)p);
      continue;
    }
    if (kill(p, SIGKILL) == 0)
      escaped("kill(%d, SIGKILL) (a process outside the jail) succeeded", (int)p);
    else
      blocked("kill(%d, SIGKILL) (a process outside the jail): %s", (int)p, en(errno));
  }
  return 0;
}

/* ---- E15: resource exhaustion ---------------------------------------------------------------- */

/* The resource attacks hold what they took until their time is up or they are told to stop
 * (SIGTERM, which the jail's init forwards), then report. */
static volatile sig_atomic_t stop_now;

static void on_stop(int sig)
{
  (void)sig;
  stop_now = 1;
}

static void stop_on_sigterm(void)
{
  struct sigaction sa;

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
}

static void hold(double secs)
{
  double t0 = now_ms();

  while (!stop_now && now_ms() - t0 < secs * 1000)
    usleep(50000);
}

static void spin(double ms)
{
  double t0 = now_ms();
  volatile unsigned long x = 0;

  while (now_ms() - t0 < ms)
    x++;
}

/* Fork as fast as possible; every child forks too and spins, so pids and CPU run out at once. */
static int v_forkbomb(int argc, char **argv)
{
  double secs = argc > 0 ? atof(argv[0]) : 10, t0 = now_ms();
  unsigned long made = 0, refused = 0;
  int first_err = 0;

  stop_on_sigterm();
  while (!stop_now && now_ms() - t0 < secs * 1000) {
    pid_t p = fork();
    if (p == 0) {
      for (;;) {
        if (fork() < 0)
          spin(50);
      }
    }
    if (p < 0) {
      refused++;
      if (!first_err) {
        first_err = errno;
        blocked("the fork bomb hit the jail's pids limit after %lu forks of its own: %s", made,
                en(errno));
      }
      spin(1);
    } else {
      made++;
    }
  }
  info("fork bomb: %lu forks made, %lu refused in %.0f s", made, refused, (now_ms() - t0) / 1000);
  if (!refused)
    escaped("the fork bomb was never refused");
  return 0;
}

static int hog(void *arg)
{
  size_t mb = *(size_t *)arg, i;

  for (i = 0; i < mb; i++) {
    char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return 3;
    memset(p, 1, 1 << 20);
  }
  return 0;
}

/* Allocate and touch MB megabytes in a child, again and again for SECONDS. */
static int v_memhog(int argc, char **argv)
{
  size_t mb = argc > 0 ? strtoul(argv[0], NULL, 10) : 4096;
  double secs = argc > 1 ? atof(argv[1]) : 0, t0 = now_ms();
  int rounds = 0, killed = 0, finished = 0;

  stop_on_sigterm();
  do {
    int st = in_child(hog, &mb);
    rounds++;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
      killed++;
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      finished++;
  } while (!stop_now && now_ms() - t0 < secs * 1000);
  info("memory hog: %d rounds of %zu MB, %d killed by the OOM killer, %d completed", rounds, mb,
       killed, finished);
  if (finished)
    escaped("a %zu MB allocation completed", mb);
  else
    blocked("every %zu MB hog was stopped (%d killed)", mb, killed);
  return 0;
}

/* diskfill MAXMB SECONDS DIR...: write up to MAXMB megabytes under each DIR in turn, hold them
 * for SECONDS. */
static int v_diskfill(int argc, char **argv)
{
  long max = argc > 0 ? atol(argv[0]) : 1024;
  double secs = argc > 1 ? atof(argv[1]) : 0;
  static char block[1 << 20];
  char path[PATH_MAX];

  stop_on_sigterm();
  memset(block, 'f', sizeof block);
  for (int d = 2; d < argc; d++) {
    long mb = 0;
    int fd, err = 0;
    snprintf(path, sizeof path, "%s/agt-fill", argv[d]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      info("open %s: %s", path, en(errno));
      return 2;
    }
    while (mb < max && !stop_now) {
      size_t off = 0;
      while (off < sizeof block) {
        ssize_t w = write(fd, block + off, sizeof block - off);
        if (w < 0) {
          err = errno;
          break;
        }
        off += (size_t)w;
      }
      if (err)
        break;
      mb++;
    }
    if (err == 0 && fsync(fd) < 0)
      err = errno;
    close(fd);
    if (err)
      blocked("disk filler in %s stopped after %ld MB: %s", argv[d], mb, en(err));
    else
      escaped("disk filler wrote %ld MB into %s without hitting a limit", mb, argv[d]);
  }
  hold(secs);
  for (int d = 2; d < argc; d++) {
    snprintf(path, sizeof path, "%s/agt-fill", argv[d]);
    unlink(path);
  }
  return 0;
}

/* PROCS processes each open files until they are refused; hold them for SECONDS. */
/* Realtime scheduling would let a jail take a CPU from everything else on the guest, and
 * a prepared jail's start runs realtime until the agent's exec: once started, the agent
 * and what it forks must be SCHED_OTHER, unable to go realtime or raise their priority. */
struct rt_sched_attr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

static void rt_try(const char *what, int policy, int prio)
{
  struct sched_param sp = {.sched_priority = prio};

  if (sched_setscheduler(0, policy, &sp) == 0)
    escaped("%s: the agent now runs realtime", what);
  else
    blocked("%s: %s", what, en(errno));
}

static int v_realtime(void)
{
  struct rt_sched_attr a = {.size = sizeof a,
                            .policy = 6 /* SCHED_DEADLINE */,
                            .runtime = 1000000,
                            .deadline = 10000000,
                            .period = 10000000};
  struct rlimit rl;
  int pol, st;
  pid_t kid;

  usleep(200000); /* agtd takes the jail back to SCHED_OTHER once it sees the exec */
  pol = sched_getscheduler(0);
  if (pol == SCHED_FIFO || pol == SCHED_RR)
    escaped("the agent runs realtime (policy %d) after its start", pol);
  else
    blocked("the agent runs SCHED_OTHER after its start (policy %d)", pol);
  kid = fork();
  if (kid == 0)
    _exit(sched_getscheduler(0) == SCHED_OTHER ? 0 : 1);
  if (kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
    blocked("what the agent forks runs SCHED_OTHER");
  else
    escaped("what the agent forks does not run SCHED_OTHER");
  if (getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur == 0 && rl.rlim_max == 0)
    blocked("RLIMIT_RTPRIO is 0");
  else
    escaped("RLIMIT_RTPRIO is not 0");
  rt_try("sched_setscheduler(SCHED_FIFO, 1)", SCHED_FIFO, 1);
  rt_try("sched_setscheduler(SCHED_RR, 99)", SCHED_RR, 99);
  rt_try("sched_setscheduler(SCHED_FIFO | SCHED_RESET_ON_FORK, 1)",
         SCHED_FIFO | SCHED_RESET_ON_FORK, 1);
  if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
    escaped("sched_setattr(SCHED_DEADLINE): the agent now has a deadline reservation");
  else
    blocked("sched_setattr(SCHED_DEADLINE): %s", en(errno));
  if (setpriority(PRIO_PROCESS, 0, -5) == 0)
    escaped("setpriority(-5): the agent raised its priority");
  else
    blocked("setpriority(-5): %s", en(errno));
  return 0;
}

static int v_fdbomb(int argc, char **argv)
{
  int procs = argc > 0 ? atoi(argv[0]) : 1;
  double secs = argc > 1 ? atof(argv[1]) : 0;
  struct rlimit rl;
  long total = 0;
  int p[2], emfile = 0, enfile = 0;
  pid_t kids[256];

  stop_on_sigterm();
  getrlimit(RLIMIT_NOFILE, &rl);
  {
    struct rlimit up = {rl.rlim_max + 1, rl.rlim_max + 1};
    if (setrlimit(RLIMIT_NOFILE, &up) == 0)
      escaped("raised RLIMIT_NOFILE above its hard limit");
    else
      blocked("raise RLIMIT_NOFILE above %llu: %s", (unsigned long long)rl.rlim_max, en(errno));
  }
  if (pipe(p) < 0)
    return 2;
  if (procs > 256)
    procs = 256;
  for (int i = 0; i < procs; i++) {
    pid_t pid = fork();
    kids[i] = pid;
    if (pid == 0) {
      int n = 0, e = 0, r[2];
      for (;;) {
        if (open("/dev/null", O_RDONLY) < 0) {
          e = errno;
          break;
        }
        n++;
      }
      r[0] = n;
      r[1] = e;
      if (write(p[1], r, sizeof r) < 0)
        _exit(1);
      pause(); /* hold them until the parent is done */
      _exit(0);
    }
  }
  close(p[1]);
  for (int i = 0; i < procs; i++) {
    int r[2];
    if (read(p[0], r, sizeof r) != (ssize_t)sizeof r)
      break;
    total += r[0];
    emfile += r[1] == EMFILE;
    enfile += r[1] == ENFILE;
  }
  info("fd exhauster: %d processes hold %ld fds (RLIMIT_NOFILE %llu each)", procs, total,
       (unsigned long long)rl.rlim_cur);
  if (enfile)
    escaped("%d processes ran the guest out of file structures (ENFILE)", enfile);
  else if (emfile == procs)
    blocked("each of %d processes stopped at its RLIMIT_NOFILE (EMFILE), %ld fds in all", procs,
            total);
  else
    escaped("only %d of %d processes hit EMFILE", emfile, procs);
  hold(secs);
  for (int i = 0; i < procs; i++)
    if (kids[i] > 0)
      kill(kids[i], SIGKILL);
  while (wait(NULL) > 0)
    ;
  return 0;
}

/* ---- E16: network bypass ----------------------------------------------------------------------
 */

static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
  char host[128];
  const char *colon = strrchr(s, ':');
  int port;

  if (colon == NULL)
    return -1;
  port = atoi(colon + 1);
  snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
  memset(ss, 0, sizeof *ss);
  if (host[0] == '[') {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    host[strlen(host) - 1] = '\0';
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
      return -1;
    *len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
      return -1;
    *len = sizeof *a;
  }
  return 0;
}

/* TCP connect with a timeout; on success, what the peer answers to an HTTP request. */
static int tcp_try(const char *addr, char *answer, size_t n)
{
  struct sockaddr_storage ss;
  socklen_t len;
  struct pollfd pf;
  int s, e = 0;
  socklen_t el = sizeof e;

  answer[0] = '\0';
  if (parse_addr(addr, &ss, &len) < 0)
    return -EINVAL;
  s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0)
    return -errno;
  if (connect(s, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
    e = errno;
    close(s);
    return -e;
  }
  pf.fd = s;
  pf.events = POLLOUT;
  if (poll(&pf, 1, 2000) != 1) {
    close(s);
    return -ETIMEDOUT;
  }
  getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
  if (e) {
    close(s);
    return -e;
  }
  if (send(s, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL) > 0) {
    pf.events = POLLIN;
    if (poll(&pf, 1, 2000) == 1) {
      ssize_t r = recv(s, answer, n - 1, 0);
      answer[r > 0 ? r : 0] = '\0';
      answer[strcspn(answer, "\r\n")] = '\0';
    }
  }
  close(s);
  return 0;
}

/* UDP: send, and wait for an echo.  0 = an answer came back. */
static int udp_try(const char *addr, char *answer, size_t n)
{
  struct sockaddr_storage ss;
  socklen_t len;
  struct pollfd pf;
  int s, e;

  answer[0] = '\0';
  if (parse_addr(addr, &ss, &len) < 0)
    return -EINVAL;
  s = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -errno;
  if (connect(s, (struct sockaddr *)&ss, len) < 0 || send(s, "agt-attack-udp", 14, 0) < 0) {
    e = errno;
    close(s);
    return -e;
  }
  pf.fd = s;
  pf.events = POLLIN;
  if (poll(&pf, 1, 1000) != 1) {
    close(s);
    return -ETIMEDOUT;
  }
  {
    ssize_t r = recv(s, answer, n - 1, 0);
    e = errno;
    close(s);
    if (r < 0)
      return -e;
    answer[r] = '\0';
  }
  return 0;
}

static int v_net(int argc, char **argv)
{
  static const char *const outside[] = {"1.1.1.1:443", "8.8.8.8:53", "10.0.2.2:22",
                                        "[2001:4860:4860::8888]:53"};
  char buf[4096], ans[256], addr[128];
  int s, r;

  /* Interfaces. */
  if (read_file("/proc/net/dev", buf, sizeof buf) > 0) {
    int n = 0;
    char names[256] = "";
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
      char *c = strchr(l, ':');
      if (c == NULL)
        continue;
      *c = '\0';
      while (*l == ' ')
        l++;
      n++;
      if (strlen(names) + strlen(l) + 2 < sizeof names) {
        strcat(names, " ");
        strcat(names, l);
      }
    }
    if (n == 1 && !strcmp(names, " lo"))
      blocked("the jail's network namespace has one interface: lo");
    else
      escaped("the jail sees %d interfaces:%s", n, names);
  }
  /* The guest's services on its own loopback (the test runs them). */
  for (int i = 0; i < argc && i < 2; i++) {
    const char *const hosts[] = {"127.0.0.1", "[::1]"};
    for (int h = 0; h < 2; h++) {
      snprintf(addr, sizeof addr, "%s:%s", hosts[h], argv[i]);
      if (i == 0) {
        r = tcp_try(addr, ans, sizeof ans);
        if (r == 0)
          escaped("TCP %s connected to a guest service: '%s'", addr, ans);
        else
          blocked("TCP %s (a guest service): %s", addr, en(-r));
      } else {
        r = udp_try(addr, ans, sizeof ans);
        if (r == 0)
          escaped("UDP %s got an answer from the guest: '%s'", addr, ans);
        else if (r == -ETIMEDOUT)
          info("UDP %s: no answer (the test checks the guest's listener got nothing)", addr);
        else
          blocked("UDP %s (a guest service): %s", addr, en(-r));
      }
    }
  }
  for (size_t i = 0; i < sizeof outside / sizeof outside[0] + (size_t)(argc > 2 ? argc - 2 : 0);
       i++) {
    const char *a = i < sizeof outside / sizeof outside[0]
                        ? outside[i]
                        : argv[2 + i - sizeof outside / sizeof outside[0]];
    r = tcp_try(a, ans, sizeof ans);
    if (r == 0)
      escaped("TCP %s connected", a);
    else
      blocked("TCP %s: %s", a, en(-r));
    r = udp_try(a, ans, sizeof ans);
    if (r == 0)
      escaped("UDP %s answered", a);
    else
      blocked("UDP %s: %s", a, en(-r));
  }
  /* agtd's egress proxy (network mode allow) must not relay to the guest's own services. */
  for (int i = 0; i < argc && i < 1; i++) {
    const char *const targets[] = {"127.0.0.1", "localhost", "[::1]", "0.0.0.0", "127.1"};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
      for (int connect_method = 0; connect_method < 2; connect_method++) {
        struct sockaddr_in px = {.sin_family = AF_INET, .sin_port = htons(3128)};
        char req[256];
        ssize_t n;
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        inet_pton(AF_INET, "127.0.0.1", &px.sin_addr);
        if (s < 0 || connect(s, (struct sockaddr *)&px, sizeof px) < 0) {
          if (t == 0 && connect_method == 0)
            info("no egress proxy on 127.0.0.1:3128: %s", en(errno));
          if (s >= 0)
            close(s);
          t = sizeof targets / sizeof targets[0];
          break;
        }
        if (connect_method)
          snprintf(req, sizeof req, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", targets[t],
                   argv[i], targets[t], argv[i]);
        else
          snprintf(req, sizeof req, "GET http://%s:%s/ HTTP/1.1\r\nHost: %s:%s\r\n\r\n", targets[t],
                   argv[i], targets[t], argv[i]);
        n = send(s, req, strlen(req), MSG_NOSIGNAL) < 0 ? -1 : recv(s, ans, sizeof ans - 1, 0);
        ans[n > 0 ? n : 0] = '\0';
        ans[strcspn(ans, "\r\n")] = '\0';
        close(s);
        if (strstr(ans, " 200"))
          escaped("the egress proxy relayed %.*s to the guest's service: %s",
                  (int)strcspn(req, "\r"), req, ans);
        else
          blocked("egress proxy, %.*s: %s",
                  (int)strcspn(req, " ") + 1 + (int)strcspn(req + strcspn(req, " ") + 1, " "), req,
                  ans[0] ? ans : "no answer");
      }
    }
  }
  /* ICMP: ping sockets and raw sockets. */
  s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
  if (s >= 0) {
    struct sockaddr_in dst = {.sin_family = AF_INET};
    unsigned char echo[8] = {8, 0, 0, 0, 0, 1, 0, 1};
    inet_pton(AF_INET, "8.8.8.8", &dst.sin_addr);
    if (sendto(s, echo, sizeof echo, 0, (struct sockaddr *)&dst, sizeof dst) < 0)
      blocked("ICMP echo to 8.8.8.8 through a ping socket: %s", en(errno));
    else
      escaped("ICMP echo to 8.8.8.8 was sent");
    close(s);
  } else {
    blocked("socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) (ping socket): %s", en(errno));
  }
  {
    static const struct {
      int family, type, proto;
      const char *name;
    } raw[] = {
        {AF_INET, SOCK_RAW, IPPROTO_ICMP, "AF_INET SOCK_RAW ICMP"},
        {AF_INET, SOCK_RAW, IPPROTO_RAW, "AF_INET SOCK_RAW IPPROTO_RAW"},
        {AF_INET6, SOCK_RAW, IPPROTO_ICMPV6, "AF_INET6 SOCK_RAW ICMPV6"},
        {AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */, "AF_PACKET SOCK_RAW"},
        {AF_PACKET, SOCK_DGRAM, 0x0300, "AF_PACKET SOCK_DGRAM"},
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
      s = socket(raw[i].family, raw[i].type | SOCK_CLOEXEC, raw[i].proto);
      if (s >= 0) {
        escaped("socket(%s) succeeded", raw[i].name);
        close(s);
      } else {
        blocked("socket(%s): %s", raw[i].name, en(errno));
      }
    }
  }
  return 0;
}

/* agtd serves the egress proxy inside the jail's network namespace: hang up on it in every
 * rude way while it answers (a write to a reset socket raises SIGPIPE in a process that does
 * not ignore it).  The test checks from outside that agtd is still alive. */
static int v_proxy(int argc, char **argv)
{
  int rounds = argc > 0 ? atoi(argv[0]) : 200, refused = 0, served = 0;
  const char *req = "GET http://blocked.invalid/ HTTP/1.1\r\nHost: blocked.invalid\r\n\r\n"
                    "GET http://blocked.invalid/ HTTP/1.1\r\nHost: blocked.invalid\r\n\r\n"
                    "CONNECT blocked.invalid:443 HTTP/1.1\r\nHost: blocked.invalid:443\r\n\r\n";

  for (int i = 0; i < rounds; i++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(3128)};
    struct linger lg = {1, 0};
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
      refused++;
      if (s >= 0)
        close(s);
      continue;
    }
    served++;
    if (send(s, req, strlen(req), MSG_NOSIGNAL) < 0)
      info("send: %s", en(errno));
    switch (i % 3) {
    case 0: /* reset at once */
      setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      break;
    case 1: /* close without reading: the kernel answers agtd's data with a reset */
      break;
    case 2: /* read a little, then reset */
      usleep(2000);
      setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      break;
    }
    close(s);
  }
  info("proxy: %d connections made and dropped rudely, %d refused", served, refused);
  blocked("nothing to gain inside the jail; the test checks that agtd survived");
  return 0;
}

/* ---- E17: cross-jail reach ----------------------------------------------------------------------
 */

static key_t tag_key(const char *tag)
{
  unsigned h = 5381;

  for (const char *p = tag; *p; p++)
    h = h * 33 + (unsigned char)*p;
  return (key_t)(0x5EC00000 | (h & 0xffff));
}

/* xjail MYTAG OTHERTAG OTHERWS SECONDS: leave objects of this jail's own everywhere, then look for
 * the other jail's (its workspace's guest path is OTHERWS). */
static int v_xjail(int argc, char **argv)
{
  const char *me, *other, *other_ws;
  char path[PATH_MAX], name[128], buf[8192];
  double secs, t0 = now_ms();
  key_t mykey, okey;
  int shm, msq, sem, ls;
  struct sockaddr_un a;

  if (argc < 4)
    return 2;
  me = argv[0];
  other = argv[1];
  other_ws = argv[2];
  secs = atof(argv[3]);
  mykey = tag_key(me);
  okey = tag_key(other);
  {
    static const char *const dirs[] = {"/tmp", "/dev/shm", "/work"};
    for (size_t i = 0; i < 3; i++) {
      int fd;
      snprintf(path, sizeof path, "%s/xjail-%s", dirs[i], me);
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
      if (fd < 0 || write(fd, me, strlen(me)) < 0)
        info("create %s: %s", path, en(errno));
      if (fd >= 0) {
        fchmod(fd, 0666);
        close(fd);
      }
    }
  }
  ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(name, sizeof name, "agt-xjail-%s", me);
  memcpy(a.sun_path + 1, name, strlen(name));
  if (bind(ls, (struct sockaddr *)&a,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) < 0 ||
      listen(ls, 8) < 0)
    info("abstract socket @%s: %s", name, en(errno));
  shm = shmget(mykey, 4096, IPC_CREAT | 0666);
  if (shm >= 0) {
    char *m = shmat(shm, NULL, 0);
    if (m != (void *)-1) {
      snprintf(m, 4096, "secret of %s", me);
      shmdt(m);
    }
  }
  msq = msgget(mykey, IPC_CREAT | 0666);
  sem = semget(mykey, 1, IPC_CREAT | 0666);
  info("created: /tmp, /dev/shm and /work files xjail-%s, abstract socket @%s, SysV shm %d, "
       "msg queue %d, sem %d (key 0x%x, mode 0666)",
       me, name, shm, msq, sem, (unsigned)mykey);
  if (shm >= 0 && shmget(mykey, 0, 0) == shm)
    info("this jail finds its own segment with shmget");
  printf("ready\n");
  fflush(stdout);
  usleep(1500000); /* let the other jail create its objects */
  {
    static const char *const dirs[] = {"/tmp", "/dev/shm", "/work"};
    for (size_t i = 0; i < 4; i++) {
      if (i < 3)
        snprintf(path, sizeof path, "%s/xjail-%s", dirs[i], other);
      else
        snprintf(path, sizeof path, "%s/xjail-%s", other_ws, other);
      if (access(path, F_OK) == 0)
        escaped("the other jail's %s is visible", path);
      else
        blocked("the other jail's %s: %s", path, en(errno));
    }
  }
  snprintf(name, sizeof name, "@agt-xjail-%s", other);
  {
    int rs = unix_connect(name, SOCK_STREAM);
    if (rs == 0)
      escaped("connected to the other jail's abstract socket %s", name);
    else
      blocked("the other jail's abstract socket %s: %s", name, en(-rs));
    snprintf(name, sizeof name, "@agt-xjail-%s", me);
    rs = unix_connect(name, SOCK_STREAM);
    info("own abstract socket %s: %s", name, rs == 0 ? "connects" : en(-rs));
  }
  if ((shm = shmget(okey, 0, 0)) >= 0)
    escaped("the other jail's SysV shm segment (key 0x%x) is visible: id %d", (unsigned)okey, shm);
  else
    blocked("shmget(the other jail's key 0x%x): %s", (unsigned)okey, en(errno));
  if (msgget(okey, 0) >= 0)
    escaped("the other jail's SysV message queue is visible");
  else
    blocked("msgget(the other jail's key): %s", en(errno));
  if (semget(okey, 0, 0) >= 0)
    escaped("the other jail's SysV semaphore is visible");
  else
    blocked("semget(the other jail's key): %s", en(errno));
  if (read_file("/proc/sysvipc/shm", buf, sizeof buf) > 0) {
    int lines = 0;
    for (char *p = buf; *p; p++)
      lines += *p == '\n';
    if (lines - 1 <= 1)
      blocked("/proc/sysvipc/shm lists %d segment(s): only this jail's", lines - 1);
    else
      escaped("/proc/sysvipc/shm lists %d segments", lines - 1);
  }
  {
    DIR *d = opendir("/proc");
    struct dirent *de;
    int found = 0;
    while (d && (de = readdir(d)) != NULL) {
      char cmd[512];
      int n;
      if (de->d_name[0] < '0' || de->d_name[0] > '9')
        continue;
      snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
      n = read_file(path, cmd, sizeof cmd);
      for (int i = 0; i < n - 1; i++)
        if (cmd[i] == '\0')
          cmd[i] = ' ';
      snprintf(name, sizeof name, "xjail %s ", other);
      if (n > 0 && strstr(cmd, name))
        found++;
    }
    if (d)
      closedir(d);
    if (found)
      escaped("the other jail's process is visible in /proc");
    else
      blocked("no process of the other jail in /proc");
  }
  while (now_ms() - t0 < secs * 1000)
    usleep(100000);
  shmctl(shmget(mykey, 0, 0), IPC_RMID, NULL);
  msgctl(msgget(mykey, 0), IPC_RMID, NULL);
  semctl(semget(mykey, 0, 0), 0, IPC_RMID);
  return 0;
}

/* ---- main
 * ---------------------------------------------------------------------------------------- */

static int v_sleep(int argc, char **argv)
{
  double secs = argc > 0 ? atof(argv[0]) : 3600;

  usleep((useconds_t)(secs * 1e6));
  return 0;
}

int main(int argc, char **argv)
{
  static const struct {
    const char *name;
    int takes_guestdir;
    int (*fn)(int argc, char **argv);
    int (*fn0)(void);
  } verbs[] = {
      {"chroot", 1, NULL, v_chroot},     {"fds", 1, NULL, v_fds},
      {"proc", 1, v_proc, NULL},         {"ptrace", 0, v_ptrace, NULL},
      {"mknod", 0, NULL, v_mknod},       {"mount", 0, NULL, v_mount},
      {"mounts", 0, v_mounts, NULL},     {"handle", 1, NULL, v_handle},
      {"unix", 0, v_unix, NULL},         {"abstract", 0, v_abstract, NULL},
      {"tty", 0, NULL, v_tty},           {"race", 0, v_race, NULL},
      {"writes", 0, NULL, v_writes},     {"setuid", 0, NULL, v_setuid},
      {"euid", 0, NULL, v_euid},         {"ns", 0, NULL, v_ns},
      {"syscalls", 0, NULL, v_syscalls}, {"signals", 0, v_signals, NULL},
      {"forkbomb", 0, v_forkbomb, NULL}, {"memhog", 0, v_memhog, NULL},
      {"diskfill", 0, v_diskfill, NULL}, {"fdbomb", 0, v_fdbomb, NULL},
      {"realtime", 0, NULL, v_realtime}, {"net", 0, v_net, NULL},
      {"xjail", 0, v_xjail, NULL},       {"sleep", 0, v_sleep, NULL},
      {"proxy", 0, v_proxy, NULL},
  };
  const char *v = argc > 1 ? argv[1] : "";
  int r = 2;

  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  verb = v;
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
    int rest = argc - 2;
    char **args = argv + 2;
    if (strcmp(v, verbs[i].name) != 0)
      continue;
    if (verbs[i].takes_guestdir && rest > 0) {
      guestdir = args[0];
      args++;
      rest--;
    }
    r = verbs[i].fn ? verbs[i].fn(rest, args) : verbs[i].fn0();
    if (!strcmp(v, "euid") || !strcmp(v, "sleep"))
      return r;
    if (r == 2)
      return 2;
    printf("summary: %s: %d blocked, %d escaped\n", v, n_blocked, n_escaped);
    return n_escaped ? 1 : n_blocked ? 0 : 3;
  }
  fprintf(stderr, "usage: attack VERB [ARGS...]; verbs:");
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    fprintf(stderr, " %s", verbs[i].name);
  fputc('\n', stderr);
  return r;
}
