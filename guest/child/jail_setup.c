#include "jail_setup.h"
#include "init_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

/* Where agtd's command line lives, so a jail's init can blank it: the jail must not read
 * the daemon's options (socket and state paths) from /proc/1/cmdline.  Set once at start. */
static char *title_area;
static size_t title_len;

void agt_jail_set_title_area(char *start, size_t len)
{
  title_area = start;
  title_len = len;
}

static void set_title(const char *title)
{
  size_t n = strlen(title);

  if (title_area && title_len > n) {
    memset(title_area, 0, title_len);
    memcpy(title_area, title, n);
  }
  prctl(PR_SET_NAME, title, 0, 0, 0);
}

/* Allocation-free helpers. */

static void copy_str(char *dst, size_t n, const char *a, const char *b)
{
  size_t i = 0;

  for (; a && *a && i + 1 < n; a++)
    dst[i++] = *a;
  for (; b && *b && i + 1 < n; b++)
    dst[i++] = *b;
  dst[i] = '\0';
}

__attribute__((noreturn)) static void fail(const char *step, const char *what, int errnum)
{
  struct agt_setup_error e;

  memset(&e, 0, sizeof e);
  e.errnum = errnum;
  copy_str(e.step, sizeof e.step, step, what);
  while (write(AGT_CHILD_STATUS_FD, &e, sizeof e) < 0 && errno == EINTR)
    ;
  _exit(127);
}

/* "/proc/self/fd/<fd>" into buf. */
static const char *fd_path(char *buf, int fd)
{
  char digits[12];
  int n = 0;

  do {
    digits[n++] = (char)('0' + fd % 10);
    fd /= 10;
  } while (fd > 0);
  memcpy(buf, "/proc/self/fd/", 14);
  for (int i = 0; i < n; i++)
    buf[14 + i] = digits[n - 1 - i];
  buf[14 + n] = '\0';
  return buf;
}

static int open_in(int rootfd, const char *path, int flags)
{
  struct open_how how = {
      .flags = (unsigned long long)(flags | O_CLOEXEC),
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);
}

static int open_nofollow(const char *path, int flags)
{
  struct open_how how = {
      .flags = (unsigned long long)(flags | O_CLOEXEC),
      .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

/* Mount onto a directory or file of the new root found by openat2 inside it, so that a
 * symlink planted in the jail's upper layer can never redirect a mount outside. */
static void mount_in(int rootfd, const char *target, const char *src, const char *fstype,
                     unsigned long flags, const char *data)
{
  char buf[32];
  int fd = open_in(rootfd, target, O_PATH);

  if (fd < 0)
    fail("open mount point ", target, errno);
  if (mount(src, fd_path(buf, fd), fstype, flags, data) < 0)
    fail("mount on ", target, errno);
  close(fd);
}

static void remount_in(int rootfd, const char *target, unsigned long flags)
{
  char buf[32];
  int fd = open_in(rootfd, target, O_PATH);

  if (fd < 0) {
    if (errno == ENOENT)
      return;
    fail("open ", target, errno);
  }
  /* A bind of the path onto itself, then a read-only remount of that new mount. */
  if (mount(fd_path(buf, fd), fd_path(buf, fd), NULL, MS_BIND | MS_REC, NULL) < 0)
    fail("bind ", target, errno);
  close(fd);
  fd = open_in(rootfd, target, O_PATH);
  if (fd < 0 || mount(NULL, fd_path(buf, fd), NULL, MS_BIND | MS_REMOUNT | flags, NULL) < 0)
    fail("remount read-only ", target, errno);
  close(fd);
}

/* The jail's tmpfs, one superblock for all of them: every superblock registers a shrinker,
 * and the kernel keeps per memory cgroup a slot for each shrinker the machine has had at
 * once, so each one more per jail costs every jail's cgroup (docs/BENCH.md, section 9).  Its
 * directories are bound where the jail sees them; its own root is in no mount. */
struct jail_tmpfs {
  int dev, shm, tmp, home; /* detached mounts of its directories (home: -1 without) */
  int mask;                /* a detached mount of its empty directory, read-only */
};

/* A detached mount of the directory `name` below dirfd, nosuid and nodev plus `attr`. */
static int clone_dir(int dirfd, const char *name, uint64_t attr)
{
  struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | attr};
  int mfd = (int)syscall(SYS_open_tree, dirfd, name,
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (*name ? 0 : AT_EMPTY_PATH));

  if (mfd < 0)
    fail("clone the mount of the jail's tmpfs ", name, errno);
  if (syscall(SYS_mount_setattr, mfd, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
    fail("set the mount flags of the jail's tmpfs ", name, errno);
  return mfd;
}

/* Move the detached mount mfd onto target in the new root (found by openat2 inside it). */
static void place_in(int rootfd, const char *target, int mfd)
{
  int fd = open_in(rootfd, target, O_PATH);

  if (fd < 0)
    fail("open mount point ", target, errno);
  if (syscall(SYS_move_mount, mfd, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
      0)
    fail("mount on ", target, errno);
  close(fd);
  close(mfd);
}

static void make_dir(int dirfd, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
  /* the mode as given, not as the umask leaves it */
  if (mkdirat(dirfd, name, mode) < 0 || fchmodat(dirfd, name, mode, 0) < 0 ||
      fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    fail("make the jail's tmpfs directory ", name, errno);
}

static void stage_home(int hfd, const struct agt_spawn_plan *p);

/* Mounted at /tmp first, where each directory is cloned from (fsmount's detached mount
 * would do, but 6.1's open_tree clones no mount outside the caller's namespace: check_mnt in
 * __do_loopback); then taken off /tmp again.  /tmp and the ephemeral home go in place here,
 * the others as /dev and /proc are made. */
static void setup_tmpfs(int rootfd, const struct agt_spawn_plan *p, struct jail_tmpfs *t)
{
  char buf[32];
  int fd;

  mount_in(rootfd, "/tmp", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, p->tmpfs_opts);
  fd = open_in(rootfd, "/tmp", O_PATH | O_DIRECTORY);
  if (fd < 0)
    fail("open the jail's tmpfs", "", errno);
  make_dir(fd, "dev", 0755, 0, 0);
  make_dir(fd, "shm", 01777, 0, 0);
  make_dir(fd, "tmp", 01777, 0, 0);
  make_dir(fd, "mask", 0555, 0, 0);
  t->home = -1;
  if (p->home_ephemeral) {
    int hfd;
    make_dir(fd, "home", 0700, p->uid, p->gid);
    hfd = openat(fd, "home", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (hfd < 0)
      fail("open the ephemeral home", "", errno);
    stage_home(hfd, p);
    close(hfd);
    t->home = clone_dir(fd, "home", 0);
  }
  t->dev = clone_dir(fd, "dev", MOUNT_ATTR_NOEXEC);
  t->shm = clone_dir(fd, "shm", MOUNT_ATTR_NOEXEC);
  t->tmp = clone_dir(fd, "tmp", 0);
  t->mask = clone_dir(fd, "mask", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC);
  if (umount2(fd_path(buf, fd), MNT_DETACH) < 0)
    fail("take the jail's tmpfs off /tmp", "", errno);
  close(fd);
  place_in(rootfd, "/tmp", t->tmp);
  t->tmp = -1;
}

/* A masked directory gets the tmpfs's empty one, read-only; a masked file /dev/null (as in
 * crun: no superblock of their own).  *mask is a detached mount of the empty directory: it
 * goes onto the directory, and is cloned again from there for the next one. */
static void mask_in(int rootfd, const char *target, int *mask, int nul)
{
  char buf[32], src[32];
  struct stat st;
  int fd = open_in(rootfd, target, O_PATH);

  if (fd < 0) {
    if (errno == ENOENT)
      return;
    fail("open ", target, errno);
  }
  if (fstat(fd, &st) < 0)
    fail("stat ", target, errno);
  if (S_ISDIR(st.st_mode)) {
    if (syscall(SYS_move_mount, *mask, "", fd, "",
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
      fail("mask ", target, errno);
    close(*mask);
    close(fd);
    fd = open_in(rootfd, target, O_PATH | O_DIRECTORY);
    if (fd < 0)
      fail("open the mask of ", target, errno);
    *mask = clone_dir(fd, "", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC);
  } else if (mount(fd_path(src, nul), fd_path(buf, fd), NULL, MS_BIND, NULL) < 0) {
    fail("mask ", target, errno);
  }
  close(fd);
}

static void setup_proc(int rootfd, struct jail_tmpfs *t)
{
  static const char *const masked[] = {
      "/proc/kcore",         "/proc/keys",          "/proc/timer_list", "/proc/sched_debug",
      "/proc/latency_stats", "/proc/acpi",          "/proc/scsi",       "/proc/asound",
      "/proc/timer_stats",   "/proc/kallsyms",      "/proc/kpagecount", "/proc/kpageflags",
      "/proc/kpagecgroup",   "/proc/sysrq-trigger", "/proc/key-users",
  };
  static const char *const readonly[] = {"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"};
  int nul;

  mount_in(rootfd, "/proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  nul = open_nofollow("/dev/null", O_PATH);
  if (nul < 0)
    fail("open /dev/null to mask /proc", "", errno);
  for (size_t i = 0; i < sizeof masked / sizeof masked[0]; i++)
    mask_in(rootfd, masked[i], &t->mask, nul);
  close(nul);
  close(t->mask);
  t->mask = -1;
  for (size_t i = 0; i < sizeof readonly / sizeof readonly[0]; i++)
    remount_in(rootfd, readonly[i], MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

static void setup_dev(int rootfd, struct jail_tmpfs *t)
{
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  static const char *const links[][2] = {
      {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
      {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
  };
  char buf[32], host[32];
  int devfd;

  place_in(rootfd, "/dev", t->dev);
  t->dev = -1;
  devfd = open_in(rootfd, "/dev", O_PATH | O_DIRECTORY);
  if (devfd < 0)
    fail("open /dev", "", errno);
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    char hostpath[16];
    int fd, hfd;

    copy_str(hostpath, sizeof hostpath, "/dev/", nodes[i]);
    fd = openat(devfd, nodes[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
      fail("create /dev/", nodes[i], errno);
    close(fd);
    fd = openat(devfd, nodes[i], O_PATH | O_CLOEXEC | O_NOFOLLOW);
    hfd = open_nofollow(hostpath, O_PATH);
    if (fd < 0 || hfd < 0)
      fail("open /dev/", nodes[i], errno);
    if (mount(fd_path(host, hfd), fd_path(buf, fd), NULL, MS_BIND, NULL) < 0)
      fail("bind /dev/", nodes[i], errno);
    close(fd);
    close(hfd);
  }
  if (mkdirat(devfd, "pts", 0755) < 0 || mkdirat(devfd, "shm", 0755) < 0)
    fail("mkdir /dev/pts and /dev/shm", "", errno);
  mount_in(rootfd, "/dev/pts", "devpts", "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=620");
  place_in(rootfd, "/dev/shm", t->shm);
  t->shm = -1;
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlinkat(links[i][1], devfd, links[i][0]) < 0)
      fail("symlink /dev/", links[i][0], errno);
  close(devfd);
  /* Nothing more is created in /dev: make its mount read-only. */
  {
    int fd = open_in(rootfd, "/dev", O_PATH);
    if (fd < 0 ||
        mount(NULL, fd_path(buf, fd), NULL,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
      fail("remount /dev read-only", "", errno);
    close(fd);
  }
}

static void setup_workspace(int rootfd, const struct agt_spawn_plan *p)
{
  char src[32], dst[32];
  int sfd, tfd;

  sfd = open_nofollow(p->workspace, O_PATH | O_DIRECTORY);
  if (sfd < 0)
    fail("open workspace ", p->workspace, errno);
  tfd = open_in(rootfd, "/work", O_PATH | O_DIRECTORY);
  if (tfd < 0 && errno == ENOENT) {
    if (mkdirat(rootfd, "work", 0755) < 0)
      fail("mkdir /work", "", errno);
    tfd = open_in(rootfd, "/work", O_PATH | O_DIRECTORY);
  }
  if (tfd < 0)
    fail("open /work", "", errno);
  if (mount(fd_path(src, sfd), fd_path(dst, tfd), NULL, MS_BIND | MS_REC, NULL) < 0)
    fail("bind workspace ", p->workspace, errno);
  close(tfd);
  close(sfd);
  tfd = open_in(rootfd, "/work", O_PATH | O_DIRECTORY);
  if (tfd < 0 ||
      mount(NULL, fd_path(dst, tfd), NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
    fail("remount /work nosuid,nodev", "", errno);
  close(tfd);
}

/* Make the mount point `path` (absolute) inside the new root, each missing directory
 * root's 0755 and, for a file, an empty file at the end; found with openat2 inside the root
 * and no symlink, so nothing planted in the upper layer can redirect it. */
static void make_point(int rootfd, const char *path, int is_dir)
{
  char buf[4096];
  size_t n = strlen(path);
  int fd;

  if (n >= sizeof buf)
    fail("mount point too long ", path, ENAMETOOLONG);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0')
      continue;
    char save = buf[i];
    buf[i] = '\0';
    fd = open_in(rootfd, buf, O_PATH);
    if (fd < 0 && errno == ENOENT) {
      if (save == '\0' && !is_dir) {
        /* the file itself: created in its parent, found again through openat2 below */
        char *slash = strrchr(buf, '/');
        int pfd;
        *slash = '\0';
        pfd = open_in(rootfd, *buf ? buf : "/", O_PATH | O_DIRECTORY);
        *slash = '/';
        if (pfd < 0)
          fail("open mount point's directory for ", path, errno);
        fd = openat(pfd, slash + 1, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        close(pfd);
        if (fd < 0)
          fail("make mount point ", path, errno);
      } else {
        char *slash = strrchr(buf, '/');
        int pfd;
        *slash = '\0';
        pfd = open_in(rootfd, *buf ? buf : "/", O_PATH | O_DIRECTORY);
        *slash = '/';
        if (pfd < 0 || (mkdirat(pfd, slash + 1, 0755) < 0 && errno != EEXIST))
          fail("make mount point ", path, errno);
        close(pfd);
        fd = open_in(rootfd, buf, O_PATH);
      }
    }
    if (fd < 0)
      fail("open mount point ", path, errno);
    close(fd);
    buf[i] = save;
  }
}

/* Bind src (an absolute guest path, no symlink in it) at target in the new root: its whole
 * mount tree, every mount in it nosuid and nodev, and read-only unless writable
 * (mount_setattr with AT_RECURSIVE: no mount below it stays writable). */
static void bind_at(int rootfd, const char *src, const char *target, int writable)
{
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                        (writable ? 0 : MOUNT_ATTR_RDONLY)};
  struct stat st;
  int sfd, mfd;

  sfd = open_nofollow(src, O_PATH);
  if (sfd < 0)
    fail("open mount ", src, errno);
  if (fstat(sfd, &st) < 0)
    fail("stat mount ", src, errno);
  make_point(rootfd, target, S_ISDIR(st.st_mode));
  mfd = (int)syscall(SYS_open_tree, sfd, "",
                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (mfd < 0)
    fail("clone the mount of ", src, errno);
  close(sfd);
  if (syscall(SYS_mount_setattr, mfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
    fail("set the mount flags of ", src, errno);
  place_in(rootfd, target, mfd);
}

/* An ephemeral home's clean copy: each file of the plan written into its directory hfd of
 * the jail's new tmpfs, its directories 0700 and files 0600, all the jail user's.  The
 * tmpfs is new and nothing of the jail runs yet, so no link in it can redirect a write;
 * O_NOFOLLOW and O_EXCL make sure of it. */
static void stage_home(int hfd, const struct agt_spawn_plan *p)
{
  for (size_t i = 0; i < p->nhome_files; i++) {
    const struct agt_plan_file *f = &p->home_files[i];
    char buf[AGT_PLAN_PATH];
    size_t n = strlen(f->path), done = 0;
    char *name = buf, *slash;
    int dfd = hfd, fd;

    if (n >= sizeof buf)
      fail("home file name too long ", f->path, ENAMETOOLONG);
    memcpy(buf, f->path, n + 1);
    while ((slash = strchr(name, '/')) != NULL) {
      int sub;
      *slash = '\0';
      if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
        fail("make the home's directory for ", f->path, errno);
      sub = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0 || fchownat(sub, "", p->uid, p->gid, AT_EMPTY_PATH) < 0)
        fail("open the home's directory for ", f->path, errno);
      if (dfd != hfd)
        close(dfd);
      dfd = sub;
      name = slash + 1;
    }
    fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      fail("create home file ", f->path, errno);
    while (done < f->len) {
      ssize_t w = write(fd, f->content + done, f->len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        fail("write home file ", f->path, w < 0 ? errno : EIO);
      done += (size_t)w;
    }
    if (fchown(fd, p->uid, p->gid) < 0)
      fail("chown home file ", f->path, errno);
    close(fd);
    if (dfd != hfd)
      close(dfd);
  }
}

/* The jail's home and the request's mounts (a cold start's; a prepared jail has none). */
static void setup_binds(int rootfd, const struct agt_spawn_plan *p, struct jail_tmpfs *t)
{
  for (size_t i = 0; i < p->nmounts; i++)
    bind_at(rootfd, p->mounts[i].path, p->mounts[i].path, p->mounts[i].writable);
  if (p->home)
    bind_at(rootfd, p->home, "/home/agent", 1);
  else if (t->home >= 0) {
    place_in(rootfd, "/home/agent", t->home);
    t->home = -1;
  }
}

static void loopback_up(void)
{
  struct ifreq ifr;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (s < 0)
    fail("socket for lo", "", errno);
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    fail("get lo flags", "", errno);
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
    fail("bring lo up", "", errno);
  close(s);
}

/* A terminal from the jail's own devpts: the master goes to agtd over the console socket,
 * the slave becomes the agent's stdin, stdout and stderr (kept at AGT_CHILD_OUT_FD). */
static void setup_terminal(const struct agt_spawn_plan *p)
{
  struct winsize ws = {.ws_row = p->rows ? p->rows : 24, .ws_col = p->cols ? p->cols : 80};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  char byte = 't';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm;
  int master, slave, unlock = 0;

  master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ioctl(master, TIOCSPTLCK, &unlock) < 0)
    fail("open a terminal", "", errno);
  slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0)
    fail("open the terminal's slave", "", errno);
  if (fchown(slave, p->uid, p->gid) < 0 || ioctl(slave, TIOCSWINSZ, &ws) < 0)
    fail("set up the terminal", "", errno);
  memset(&u, 0, sizeof u);
  cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &master, sizeof master);
  if (sendmsg(AGT_CHILD_CONSOLE_FD, &mh, MSG_NOSIGNAL) < 0)
    fail("send the terminal to agtd", "", errno);
  close(master);
  close(AGT_CHILD_CONSOLE_FD);
  if (slave != AGT_CHILD_OUT_FD) {
    if (dup3(slave, AGT_CHILD_OUT_FD, O_CLOEXEC) < 0)
      fail("keep the terminal", "", errno);
    close(slave);
  }
}

static void drop_privileges(const struct agt_spawn_plan *p)
{
  struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2];
  struct rlimit rl;

  for (int cap = 0; cap <= p->cap_last; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      fail("drop capability bounding set", "", errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    fail("clear ambient capabilities", "", errno);
  rl.rlim_cur = rl.rlim_max = p->nofile;
  if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
    fail("setrlimit NOFILE", "", errno);
  rl.rlim_cur = rl.rlim_max = 0;
  if (setrlimit(RLIMIT_CORE, &rl) < 0)
    fail("setrlimit CORE", "", errno);
  /* nothing in the jail may make itself realtime (a prepared jail's start is, start_prio.h) */
  if (setrlimit(RLIMIT_RTPRIO, &rl) < 0)
    fail("setrlimit RTPRIO", "", errno);
  if (setgroups(1, &p->gid) < 0)
    fail("setgroups", "", errno);
  if (setresgid(p->gid, p->gid, p->gid) < 0)
    fail("setresgid", "", errno);
  if (setresuid(p->uid, p->uid, p->uid) < 0)
    fail("setresuid", "", errno);
  /* Changing the uid cleared the parent-death signal set at the start (commit_creds does):
   * set it again, or the jail outlives agtd and runs on unsupervised (found by
   * tests/security).  Should agtd have died in between, nobody reads the status pipe. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    fail("set the parent-death signal", "", errno);
  {
    struct pollfd pf = {.fd = AGT_CHILD_STATUS_FD, .events = POLLOUT};
    if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR))
      _exit(126);
  }
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &hdr, data) < 0)
    fail("clear capabilities", "", errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    fail("set no_new_privs", "", errno);
}

/* Landlock where the kernel has it (ABI 2, Linux 5.19, and later), a second layer under the
 * dropped capabilities and the seccomp filter:
 * - no device node can be made anywhere (MAKE_CHAR and MAKE_BLOCK are handled and granted
 *   nowhere).  Handling any file system right also makes Landlock refuse links and renames
 *   across directories unless REFER is granted, so REFER is granted on the whole tree: the
 *   agent moves its files as before.
 * Nothing is scoped: every jail has a network namespace of its own (network mode open
 *   too), so its abstract unix sockets are its alone, and the pid namespace keeps signals
 *   inside it; a scope would also stop a `jail exec` process (a Landlock domain of its own)
 *   from reaching the agent.
 * Without Landlock (older kernels, or not enabled at boot) this step is skipped. */
/* The jail's Landlock ruleset, ready to enforce; -1 where the kernel has no Landlock (ABI 2). */
static int landlock_ruleset(void)
{
  struct {
    uint64_t handled_access_fs, handled_access_net, scoped;
  } attr;
  struct landlock_path_beneath_attr beneath;
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  int ruleset, root;

  if (abi < 2)
    return -1;
  memset(&attr, 0, sizeof attr);
  attr.handled_access_fs =
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_REFER;
  /* Older kernels take the larger struct as long as the fields they do not know are zero. */
  ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0)
    fail("create the Landlock ruleset", "", errno);
  root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    fail("open / for Landlock", "", errno);
  memset(&beneath, 0, sizeof beneath);
  beneath.allowed_access = LANDLOCK_ACCESS_FS_REFER;
  beneath.parent_fd = root;
  if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) < 0)
    fail("add the Landlock rule for /", "", errno);
  close(root);
  return ruleset;
}

/* Enforce the ruleset made ahead (a prepared jail's), or one made now. */
static void restrict_with_landlock(const struct agt_spawn_plan *p)
{
  int ruleset = p->landlock_fd >= 0 ? p->landlock_fd : landlock_ruleset();

  if (ruleset < 0)
    return;
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
    fail("enforce the Landlock ruleset", "", errno);
  close(ruleset);
}

/* A jail's start (not an exec): the init's end of the go pipe or the claim socket, kept
 * after the agent's exec until agtd closes its end, which it does once it has answered the
 * start (or the start failed, or agtd is gone). */
static int answered_fd = -1;

/* The init from here on is agt-init (init.c), a program of a few pages: this process's
 * memory, a copy of agtd's, goes.  That takes a while (every mapping of agtd's, and the pages
 * it shares with agtd), so a start's init waits for agtd to answer first rather than compete
 * with agtd and the agent for the CPUs meanwhile.  The signals it forwards are held (blocked)
 * across the wait and the exec until it has its handlers.  Should the exec fail, this process
 * goes on as the init. */
__attribute__((noreturn)) static void become_small_init(pid_t agent, const char *name)
{
  static const int forwarded[] = {AGT_INIT_FORWARDED};
  char num[16], *argv[3];
  char *envp[1] = {NULL};
  sigset_t held;
  int n = 0;

  if (fcntl(AGT_CHILD_INIT_FD, F_GETFD) < 0) {
    if (answered_fd >= 0)
      close(answered_fd);
    agt_init_loop(agent);
  }
  /* the pid in decimal, without stdio */
  {
    char rev[16];
    unsigned v = (unsigned)agent;
    do
      rev[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < (int)sizeof rev);
    for (int i = 0; i < n; i++)
      num[i] = rev[n - 1 - i];
    num[n] = '\0';
  }
  argv[0] = (char *)(uintptr_t)name;
  argv[1] = num;
  argv[2] = NULL;
  sigemptyset(&held);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaddset(&held, forwarded[i]);
  sigprocmask(SIG_BLOCK, &held, NULL);
  if (answered_fd >= 0) {
    char c;
    ssize_t r;
    /* agtd writes nothing more here: its end's close is the news (EOF, or an error) */
    do
      r = read(answered_fd, &c, 1);
    while (r > 0 || (r < 0 && errno == EINTR));
    close(answered_fd);
  }
  syscall(SYS_execveat, AGT_CHILD_INIT_FD, "", argv, envp, AT_EMPTY_PATH);
  close(AGT_CHILD_INIT_FD);
  agt_init_loop(agent);
}

__attribute__((noreturn)) static void exec_agent(const struct agt_spawn_plan *p)
{
  sigset_t none;
  int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

  if (p->stdin_pipe) {
    /* jail.exec -i: stdin from agtd's pipe */
    if (dup2(AGT_CHILD_CONSOLE_FD, 0) < 0 || dup2(AGT_CHILD_OUT_FD, 1) < 0 ||
        dup2(AGT_CHILD_ERR_FD, 2) < 0)
      fail("set up the command's stdio", "", errno);
  } else if (p->fds[5] >= 0) {
    /* On its terminal: a session of its own with the terminal as controlling tty. */
    if (setsid() < 0 || ioctl(AGT_CHILD_OUT_FD, TIOCSCTTY, 0) < 0 ||
        dup2(AGT_CHILD_OUT_FD, 0) < 0 || dup2(AGT_CHILD_OUT_FD, 1) < 0 ||
        dup2(AGT_CHILD_OUT_FD, 2) < 0)
      fail("set up the agent's terminal", "", errno);
  } else if (nul < 0 || dup2(nul, 0) < 0 || dup2(AGT_CHILD_OUT_FD, 1) < 0 ||
             dup2(p->fds[3] >= 0 ? AGT_CHILD_ERR_FD : AGT_CHILD_OUT_FD, 2) < 0) {
    fail("set up the agent's stdio", "", errno);
  }
  /* Only 0-2 and the status pipe (close-on-exec) survive into the agent. */
  if (syscall(SYS_close_range, AGT_CHILD_STATUS_FD + 1, ~0U, 0) < 0)
    fail("close_range", "", errno);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    signal(sig, SIG_DFL);
  if (chdir(p->cwd) < 0)
    fail("chdir ", p->cwd, errno);
  if (strchr(p->argv[0], '/')) {
    execve(p->argv[0], p->argv, p->envp);
    fail("exec ", p->argv[0], errno);
  }
  /* Search the jail's PATH (not the daemon's, which execvpe would use). */
  {
    char full[AGT_PLAN_PATH];
    const char *dir = p->path;
    int saved = ENOENT;

    while (*dir) {
      size_t n = strcspn(dir, ":");
      if (n > 0 && n + 1 + strlen(p->argv[0]) < sizeof full) {
        memcpy(full, dir, n);
        full[n] = '/';
        copy_str(full + n + 1, sizeof full - n - 1, p->argv[0], NULL);
        execve(full, p->argv, p->envp);
        if (errno != ENOENT && errno != ENOTDIR)
          saved = errno;
      }
      dir += n;
      if (*dir == ':')
        dir++;
    }
    fail("exec ", p->argv[0], saved);
  }
}

/* Bring the four fds the child keeps to fixed numbers and close every other fd the daemon
 * had open (its socket, other jails' pipes, clients). */
static void tidy_fds(const struct agt_spawn_plan *p)
{
  int tmp[AGT_CHILD_NFDS];
  /* agt-init's program, out of the way of the numbers below first (without it the init
   * stays as it is: nothing fails) */
  int init = p->init_fd < 0 ? -1 : fcntl(p->init_fd, F_DUPFD_CLOEXEC, AGT_CHILD_FIRST_FREE);

  for (int i = 0; i < AGT_CHILD_NFDS; i++) {
    tmp[i] = -1;
    if (p->fds[i] < 0)
      continue;
    tmp[i] = fcntl(p->fds[i], F_DUPFD_CLOEXEC, AGT_CHILD_FIRST_FREE);
    if (tmp[i] < 0)
      _exit(126);
  }
  for (int i = 0; i < AGT_CHILD_NFDS; i++) {
    if (tmp[i] < 0)
      close(AGT_CHILD_SYNC_FD + i);
    else if (dup3(tmp[i], AGT_CHILD_SYNC_FD + i, O_CLOEXEC) < 0)
      _exit(126);
  }
  if (init < 0 || dup3(init, AGT_CHILD_INIT_FD, O_CLOEXEC) < 0)
    close(AGT_CHILD_INIT_FD);
  syscall(SYS_close_range, AGT_CHILD_FIRST_FREE, ~0U, 0);
}

/* A prepared jail runs SCHED_FIFO from its ready byte to its agent's exec (start_prio.h). */
static int realtime;
/* A realtime start's agent is born on this process's CPU (start_prio.h) and takes this
 * process's CPUs back before its exec. */
static cpu_set_t agent_cpus;
static int agent_pinned;
/* jail.exec: the command dies with the exec's init, which dies with agtd (PROTOCOL.md). */
static int exec_command;

static void set_policy(pid_t pid, int policy, int prio)
{
  struct sched_param sp = {.sched_priority = prio};

  /* failing that, normal priority (a process may always lower its own) */
  if (sched_setscheduler(pid, policy, &sp) < 0 && (policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER)
    set_policy(pid, SCHED_OTHER | (policy & SCHED_RESET_ON_FORK), 0);
}

/* The last steps of both a jail's init and an exec: drop to the jail's user, Landlock and
 * seccomp, start the agent (or command) and stay as its init. */
static int agent_main(void *p)
{
  /* The exec under the init's priority and agtd's; whatever it forks is SCHED_OTHER, and it
   * cannot undo that. */
  if (realtime)
    set_policy(0, SCHED_FIFO | SCHED_RESET_ON_FORK, AGT_PRIO_AGENT);
  if (agent_pinned)
    sched_setaffinity(0, sizeof agent_cpus, &agent_cpus);
  /* In the jail's pid namespace the command's reaper would be the jail's init, which
   * outlives agtd; the exec's init waits (CLONE_VFORK) until the exec, so it is alive here. */
  if (exec_command)
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  exec_agent(p);
}

__attribute__((noreturn)) static void confine_and_run(const struct agt_spawn_plan *p)
{
  const size_t stack_size = 256 * 1024;
  int exec_seen[2] = {-1, -1};
  char *stack;
  pid_t pid;

  drop_privileges(p);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  restrict_with_landlock(p);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p->seccomp, 0, 0) < 0)
    fail("load the seccomp filter", "", errno);
  /* The agent, as posix_spawn starts a program: sharing this process's memory on a stack of
   * its own until its exec (this process waits meanwhile), so that the page tables of this
   * agtd-sized process are neither copied for it nor torn down again by its exec. */
  stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
               -1, 0);
  if (stack == MAP_FAILED)
    fail("map the agent's stack", "", errno);
  /* A realtime start: this process waits for the agent's exec on a pipe whose write end,
   * at fd 3 (free since the claim; the agent's close_range spares it), the exec closes
   * (close-on-exec), the moment the status pipe tells agtd.  Not in the clone as a vfork
   * would: woken when the exec drops the shared memory, before the exec is through, it
   * would take the CPU from the exec, which then goes on behind whatever else runs. */
  if (realtime) {
    /* the read end above the fixed fds, the write end at fd 3 */
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
      fail("make the exec pipe", "", errno);
    exec_seen[0] = fcntl(fds[0], F_DUPFD_CLOEXEC, AGT_CHILD_FIRST_FREE);
    exec_seen[1] = fcntl(fds[1], F_DUPFD_CLOEXEC, AGT_CHILD_FIRST_FREE);
    close(fds[0]);
    close(fds[1]);
    if (exec_seen[0] < 0 || exec_seen[1] < 0 ||
        dup3(exec_seen[1], AGT_CHILD_SYNC_FD, O_CLOEXEC) != AGT_CHILD_SYNC_FD)
      fail("make the exec pipe", "", errno);
    close(exec_seen[1]);
    /* Born on this CPU, where this process, woken by the exec, runs before the agent's
     * first instruction (a new realtime task of this one's priority would be put on another
     * CPU, and run its first instructions there before this process could take it back). */
    cpu_set_t here;
    int cpu = sched_getcpu();
    if (cpu >= 0 && sched_getaffinity(0, sizeof agent_cpus, &agent_cpus) == 0) {
      CPU_ZERO(&here);
      CPU_SET(cpu, &here);
      agent_pinned = sched_setaffinity(0, sizeof here, &here) == 0;
    }
  }
  pid = clone(agent_main, stack + stack_size, CLONE_VM | SIGCHLD | (realtime ? 0 : CLONE_VFORK),
              (void *)p);
  if (pid < 0)
    fail("start the agent", "", errno);
  if (agent_pinned)
    sched_setaffinity(0, sizeof agent_cpus, &agent_cpus);
  /* The status pipe's EOF (this copy closed, the agent's at its exec) tells agtd. */
  close(AGT_CHILD_STATUS_FD);
  if (realtime) {
    /* At the exec's close-on-exec, the agent back to normal priority before its first
     * instruction (this process runs above it; agtd makes sure of it too, start_prio.h). */
    char c;
    ssize_t n;
    close(AGT_CHILD_SYNC_FD);
    do
      n = read(exec_seen[0], &c, 1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
      _exit(126); /* the agent may still use this memory: leave it, and the jail ends */
    close(exec_seen[0]);
    set_policy(pid, SCHED_OTHER | SCHED_RESET_ON_FORK, 0);
  }
  close(AGT_CHILD_OUT_FD);
  close(AGT_CHILD_ERR_FD);
  if (realtime)
    set_policy(0, SCHED_OTHER, 0);
  munmap(stack, stack_size);
  become_small_init(pid, exec_command ? "agt-exec" : "agt-init");
}

__attribute__((noreturn)) static void finish_start(const struct agt_spawn_plan *p);

/* Write a whole small file in the jail's root (its /etc: the jail is not running yet). */
static void write_small(const char *path, const char *text)
{
  size_t len = strlen(text), off = 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

  if (fd < 0)
    fail("write ", path, errno);
  while (off < len) {
    ssize_t n = write(fd, text + off, len - off);
    if (n < 0)
      fail("write ", path, errno);
    off += (size_t)n;
  }
  close(fd);
}

/* The jail user's passwd, group and home, in the jail's root before it runs. */
static void write_identity(const char *passwd, const char *group, uid_t uid, gid_t gid)
{
  write_small("/etc/passwd", passwd);
  write_small("/etc/group", group);
  if (mkdir("/home", 0755) < 0 && errno != EEXIST)
    fail("mkdir /home", "", errno);
  if ((mkdir("/home/agent", 0700) < 0 && errno != EEXIST) || lchown("/home/agent", uid, gid) < 0 ||
      chmod("/home/agent", 0700) < 0)
    fail("make /home/agent", "", errno);
}

/* A prepared jail's claim (struct agt_claim): wait for it, then do what cold starts do
 * before the go byte with the request's values: the workspace, the hostname, /tmp's size,
 * the jail user's passwd, group and home. */
static void take_claim(struct agt_spawn_plan *q)
{
  size_t cap = sizeof(struct agt_claim) + AGT_CLAIM_MAX;
  char *buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  union {
    char b[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct iovec iov = {.iov_base = buf, .iov_len = cap};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
  struct cmsghdr *cm;
  struct agt_claim c;
  const char *s, *end, *str[6];
  char **v;
  ssize_t n;
  int wsfd = -1, homefd = -1;

  if (buf == MAP_FAILED)
    fail("map the claim buffer", "", errno);
  do
    n = recvmsg(AGT_CHILD_SYNC_FD, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    _exit(126); /* agtd went away, or dropped this prepared jail */
  /* the workspace's mount, then (with c.home) the persistent home's */
  for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
      memcpy(&wsfd, CMSG_DATA(cm), sizeof wsfd);
      if (cm->cmsg_len == CMSG_LEN(2 * sizeof(int)))
        memcpy(&homefd, CMSG_DATA(cm) + sizeof(int), sizeof homefd);
    }
  memcpy(&c, buf, sizeof c);
  if ((size_t)n != sizeof c + c.len || c.len == 0 || buf[n - 1] != '\0' || wsfd < 0 ||
      (c.home != 0) != (homefd >= 0) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || c.argc == 0 ||
      c.argc > 4096 || c.envc > 4096)
    fail("read the claim", "", EPROTO);
  v = mmap(NULL, (c.argc + c.envc + 2) * sizeof *v, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (v == MAP_FAILED)
    fail("map the claim's vectors", "", errno);
  s = buf + sizeof c;
  end = buf + n;
  for (size_t i = 0; i < 6 + c.argc + c.envc; i++) {
    if (s >= end)
      fail("read the claim", "", EPROTO);
    if (i < 6)
      str[i] = s;
    else if (i < 6 + c.argc)
      v[i - 6] = (char *)s;
    else
      v[i - 6 + 1] = (char *)s; /* after argv's NULL */
    s += strlen(s) + 1;
  }
  v[c.argc] = NULL;
  v[c.argc + 1 + c.envc] = NULL;
  q->hostname = str[0];
  q->path = str[1];
  q->cwd = str[2];
  q->argv = v;
  q->envp = v + c.argc + 1;
  q->uid = c.uid;
  q->gid = c.gid;
  q->nofile = c.nofile;
  q->rows = c.rows;
  q->cols = c.cols;
  if (!c.tty) {
    close(AGT_CHILD_CONSOLE_FD);
    q->fds[5] = -1;
  }

  /* The workspace: agtd opened it (openat2, no symlinks) and cloned its mount tree. */
  if (move_mount(wsfd, "", AT_FDCWD, "/work", MOVE_MOUNT_F_EMPTY_PATH) < 0)
    fail("mount the workspace on /work", "", errno);
  close(wsfd);
  if (mount(NULL, "/work", NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
    fail("remount /work nosuid,nodev", "", errno);
  if (sethostname(q->hostname, strlen(q->hostname)) < 0)
    fail("sethostname", "", errno);
  if (str[5][0] && mount(NULL, "/tmp", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, str[5]) < 0)
    fail("resize /tmp", "", errno);
  /* "" when the prepared jail has them already (made for the same user) */
  if (str[3][0])
    write_identity(str[3], str[4], q->uid, q->gid);
  /* The persistent home over /home/agent (which the identity made): agtd cloned it, nosuid
   * and nodev. */
  if (homefd >= 0) {
    if (move_mount(homefd, "", AT_FDCWD, "/home/agent", MOVE_MOUNT_F_EMPTY_PATH) < 0)
      fail("mount the home on /home/agent", "", errno);
    close(homefd);
  }
}

void agt_jail_child(const struct agt_spawn_plan *p)
{
  struct jail_tmpfs tmpfs;
  char buf[32];
  int rootfd, nul;

  tidy_fds(p);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (p->fds[4] >= 0) {
    /* A fresh namespace from the pool, its loopback already up. */
    if (setns(AGT_CHILD_NETNS_FD, CLONE_NEWNET) < 0)
      fail("enter the network namespace", "", errno);
    close(AGT_CHILD_NETNS_FD);
  }
  if (setsid() < 0)
    fail("setsid", "", errno);
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    fail("make / private", "", errno);
  if (chdir(p->jail_dir) < 0)
    fail("chdir ", p->jail_dir, errno);
  if (mount("overlay", p->merged, "overlay", MS_NOSUID | MS_NODEV, p->overlay_opts) < 0)
    fail("mount overlay on ", p->merged, errno);
  rootfd = open_nofollow(p->merged, O_PATH | O_DIRECTORY);
  if (rootfd < 0)
    fail("open ", p->merged, errno);

  setup_tmpfs(rootfd, p, &tmpfs);
  setup_dev(rootfd, &tmpfs);
  setup_proc(rootfd, &tmpfs);
  if (p->warm) {
    /* the workspace's mount point, for the claim */
    if (mkdirat(rootfd, "work", 0755) < 0 && errno != EEXIST)
      fail("mkdir /work", "", errno);
  } else {
    setup_workspace(rootfd, p);
    setup_binds(rootfd, p, &tmpfs);
    if (sethostname(p->hostname, strlen(p->hostname)) < 0)
      fail("sethostname", "", errno);
  }
  if (p->fds[4] < 0)
    loopback_up();

  /* pivot_root(".", "."), then detach the old root stacked underneath: nothing of the
   * guest's tree stays reachable. */
  if (fchdir(rootfd) < 0)
    fail("chdir into the new root", "", errno);
  if (syscall(SYS_pivot_root, ".", ".") < 0)
    fail("pivot_root", "", errno);
  if (umount2(".", MNT_DETACH) < 0)
    fail("detach the old root", "", errno);
  if (chdir("/") < 0)
    fail("chdir /", "", errno);
  close(rootfd);

  set_title("agt-init");
  nul = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nul < 0)
    fail("open /dev/null", "", errno);
  dup2(nul, 0);
  dup2(nul, 1);
  dup2(nul, 2);
  close(nul);

  if (p->warm) {
    /* The user of the last jail.run, most likely this one's too (the claim rewrites the
     * files otherwise); then ready: the rest comes with the request. */
    if (p->passwd)
      write_identity(p->passwd, p->group, p->uid, p->gid);
    struct agt_spawn_plan q = *p;
    q.landlock_fd = landlock_ruleset();
    /* Most of the seccomp filter now (this process is root: no no_new_privs needed yet); the
     * rules for what the claim still does (its mounts, the cgroup namespace) come after it. */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p->seccomp_ahead, 0, 0) < 0)
      fail("load the seccomp filter ahead", "", errno);
    if (p->realtime) {
      /* no budget in its cgroup (cgroup v1), no permission: at normal priority then */
      struct sched_param sp = {.sched_priority = AGT_PRIO_INIT};
      realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    }
    /* agtd hands out only a prepared jail that said so: its directory may be renamed now */
    if (send(AGT_CHILD_SYNC_FD, "r", 1, MSG_NOSIGNAL) != 1)
      _exit(126);
    take_claim(&q);
    finish_start(&q);
  }
  /* The parent moves us into the jail's cgroup while we build the root (a cgroup v1
   * migration costs milliseconds); wait for it before anything runs in the jail.  The cgroup
   * namespace is made after the move, so the jail's cgroup is its root. */
  if (read(AGT_CHILD_SYNC_FD, buf, 1) != 1)
    _exit(126); /* the daemon went away before saying go */
  finish_start(p);
}

/* After the go (or the claim): the jail's own cgroup namespace, its terminal, then the agent. */
__attribute__((noreturn)) static void finish_start(const struct agt_spawn_plan *p)
{
  /* Kept above the fixed fds (a realtime start's exec pipe takes fd 3) until agtd has
   * answered (become_small_init); without it the init does not wait. */
  answered_fd = fcntl(AGT_CHILD_SYNC_FD, F_DUPFD_CLOEXEC, AGT_CHILD_FIRST_FREE);
  close(AGT_CHILD_SYNC_FD);
  if (unshare(CLONE_NEWCGROUP) < 0)
    fail("unshare cgroup namespace", "", errno);

  if (p->fds[5] >= 0)
    setup_terminal(p);
  confine_and_run(p);
}

/* jail.exec: another process in a running jail.  The child joins the namespaces of the
 * jail's init (through its pidfd, at AGT_CHILD_NETNS_FD), takes the same user, limits,
 * Landlock rules and seccomp filter, and then acts as init for the one process it starts:
 * it forwards signals and exits with that process's status. */
void agt_jail_exec_child(const struct agt_spawn_plan *p)
{
  char buf[1];

  tidy_fds(p);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (read(AGT_CHILD_SYNC_FD, buf, 1) != 1)
    _exit(126);
  close(AGT_CHILD_SYNC_FD);
  /* Joining the mount namespace also moves root and cwd to the jail's root. */
  if (setns(AGT_CHILD_NETNS_FD, CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET |
                                    CLONE_NEWCGROUP | CLONE_NEWPID) < 0)
    fail("join the jail's namespaces", "", errno);
  close(AGT_CHILD_NETNS_FD);
  set_title("agt-exec");
  if (setsid() < 0)
    fail("setsid", "", errno);
  /* jail.exec -t: a terminal from the jail's devpts, as the jail's own */
  if (p->fds[5] >= 0 && !p->stdin_pipe)
    setup_terminal(p);
  exec_command = 1;
  confine_and_run(p);
}
