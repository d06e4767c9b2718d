/* memparts: what one part of an idle jail costs the kernel, alone (bench/memparts.sh).
 * Makes N of one thing, holds them, and prints the change of MemAvailable, Slab, SUnreclaim
 * and Percpu per thing ("key value" lines), then removes them.
 *
 *   memparts netns N                    network namespaces (held by an open fd)
 *   memparts mntns N LOWER SCRATCH      mount namespaces holding only an overlay of LOWER
 *                                       (upper and work under SCRATCH/I), pivoted into, as a
 *                                       jail's root is
 *   memparts cgroup N CONTROLLER...     a directory in each named v1 hierarchy
 *                                       (/sys/fs/cgroup/C/agt-memparts-PID/I)
 *   memparts subvol N DIR               btrfs subvolumes in DIR (a btrfs with quotas on), each
 *                                       with a referenced-bytes limit of 16 MiB, as agtd's
 *                                       jails' writable layers are made (guest/disk.c)
 *   memparts procs N                    idle processes (a fork of this small driver, paused)
 *
 * Readings: 1 s after the change, then every 250 ms until five lie within 1 MiB (at most
 * 15 s); the median of those five. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long meminfo(const char *field)
{
  char line[256];
  size_t n = strlen(field);
  long v = -1;
  FILE *f = fopen("/proc/meminfo", "r");

  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

struct reading {
  long avail, slab, sunreclaim, percpu;
};

static int cmp_long(const void *a, const void *b)
{
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static void msleep(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Median of five steady readings of each field; *unsettled when MemAvailable never steadied. */
static struct reading read_steady(int *unsettled)
{
  long a[5], s[5], u[5], p[5], sa[5];
  int k = 0, tries = 0;
  struct reading r;

  msleep(1000);
  for (;;) {
    a[k % 5] = meminfo("MemAvailable");
    s[k % 5] = meminfo("Slab");
    u[k % 5] = meminfo("SUnreclaim");
    p[k % 5] = meminfo("Percpu");
    k++;
    if (k >= 5) {
      memcpy(sa, a, sizeof sa);
      qsort(sa, 5, sizeof sa[0], cmp_long);
      if (sa[4] - sa[0] <= 1024)
        break;
    }
    if (++tries >= 60) {
      (*unsettled)++;
      break;
    }
    msleep(250);
  }
  qsort(a, 5, sizeof a[0], cmp_long);
  qsort(s, 5, sizeof s[0], cmp_long);
  qsort(u, 5, sizeof u[0], cmp_long);
  qsort(p, 5, sizeof p[0], cmp_long);
  r.avail = a[2];
  r.slab = s[2];
  r.sunreclaim = u[2];
  r.percpu = p[2];
  return r;
}

static void die(const char *what)
{
  fprintf(stderr, "memparts: %s: %s\n", what, strerror(errno));
  exit(1);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 2 ? argv[1] : "";
  long n = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
  int *fds, unsettled = 0, orig_mnt = -1, orig_root = -1, self = -1;
  pid_t *pids;
  struct reading r0, r1;
  char path[4096];

  if (n <= 0 || (strcmp(mode, "mntns") == 0 && argc != 5) ||
      (strcmp(mode, "cgroup") == 0 && argc < 4) || (strcmp(mode, "subvol") == 0 && argc != 4)) {
    fprintf(stderr, "usage: memparts netns|procs N | mntns N LOWER SCRATCH | cgroup N CTRL... | "
                    "subvol N DIR\n");
    return 2;
  }
  fds = calloc((size_t)n, sizeof *fds);
  pids = calloc((size_t)n, sizeof *pids);
  if (!fds || !pids)
    die("calloc");
  r0 = read_steady(&unsettled);
  if (strcmp(mode, "netns") == 0) {
    int orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (orig < 0)
      die("open /proc/self/ns/net");
    for (long i = 0; i < n; i++) {
      if (unshare(CLONE_NEWNET) < 0)
        die("unshare(CLONE_NEWNET)");
      if ((fds[i] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        die("open the new netns");
      if (setns(orig, CLONE_NEWNET) < 0)
        die("setns back");
    }
  } else if (strcmp(mode, "mntns") == 0) {
    orig_mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    orig_root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* /proc/<pid> of this process: no /proc inside the new root, this one stays reachable */
    self = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (orig_mnt < 0 || orig_root < 0 || self < 0)
      die("open /proc/self/ns/mnt, / or /proc/self");
    for (long i = 0; i < n; i++) {
      char up[4096], wk[4096], mg[4096], opts[12288];
      snprintf(up, sizeof up, "%s/%ld.u", argv[4], i);
      snprintf(wk, sizeof wk, "%s/%ld.w", argv[4], i);
      snprintf(mg, sizeof mg, "%s/%ld.m", argv[4], i);
      if (mkdir(up, 0755) < 0 || mkdir(wk, 0755) < 0 || mkdir(mg, 0755) < 0)
        die("mkdir under SCRATCH");
      snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", argv[3], up, wk);
      if (unshare(CLONE_NEWNS) < 0)
        die("unshare(CLONE_NEWNS)");
      if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die("make / private");
      if (mount("overlay", mg, "overlay", 0, opts) < 0)
        die("mount overlay");
      if (chdir(mg) < 0)
        die("chdir");
      if (syscall(SYS_pivot_root, ".", ".") < 0)
        die("pivot_root");
      if (umount2(".", MNT_DETACH) < 0)
        die("detach the old root");
      if ((fds[i] = openat(self, "ns/mnt", O_RDONLY | O_CLOEXEC)) < 0)
        die("open the new mntns");
      if (setns(orig_mnt, CLONE_NEWNS) < 0 || fchdir(orig_root) < 0 || chroot(".") < 0)
        die("back to the original mount namespace");
    }
  } else if (strcmp(mode, "cgroup") == 0) {
    for (int c = 3; c < argc; c++) {
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/agt-memparts-%d", argv[c], (int)getpid());
      if (mkdir(path, 0755) < 0)
        die(path);
      for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/%s/agt-memparts-%d/%ld", argv[c], (int)getpid(),
                 i);
        if (mkdir(path, 0755) < 0)
          die(path);
      }
    }
  } else if (strcmp(mode, "subvol") == 0) {
    int dfd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
      die(argv[3]);
    for (long i = 0; i < n; i++) {
      struct btrfs_ioctl_vol_args va;
      struct btrfs_ioctl_qgroup_limit_args q;
      int fd;
      memset(&va, 0, sizeof va);
      snprintf(va.name, sizeof va.name, "sv%ld", i);
      if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &va) < 0)
        die("BTRFS_IOC_SUBVOL_CREATE");
      snprintf(path, sizeof path, "%s/sv%ld", argv[3], i);
      if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        die(path);
      memset(&q, 0, sizeof q);
      q.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
      q.lim.max_rfer = 16ull << 20;
      if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &q) < 0)
        die("BTRFS_IOC_QGROUP_LIMIT");
      close(fd);
    }
    close(dfd);
  } else if (strcmp(mode, "procs") == 0) {
    for (long i = 0; i < n; i++) {
      if ((pids[i] = fork()) < 0)
        die("fork");
      if (pids[i] == 0) {
        pause();
        _exit(0);
      }
    }
  } else {
    fprintf(stderr, "memparts: unknown mode '%s'\n", mode);
    return 2;
  }
  r1 = read_steady(&unsettled);
  printf("%s.n %ld\n", mode, n);
  printf("%s.memavailable_kib_each %.1f\n", mode, (double)(r0.avail - r1.avail) / (double)n);
  printf("%s.slab_kib_each %.1f\n", mode, (double)(r1.slab - r0.slab) / (double)n);
  printf("%s.sunreclaim_kib_each %.1f\n", mode,
         (double)(r1.sunreclaim - r0.sunreclaim) / (double)n);
  printf("%s.percpu_kib_each %.1f\n", mode, (double)(r1.percpu - r0.percpu) / (double)n);
  printf("%s.unsettled %d\n", mode, unsettled);
  fflush(stdout);
  /* Removal: the fds close at exit; cgroups and processes go here. */
  if (strcmp(mode, "cgroup") == 0) {
    for (int c = 3; c < argc; c++) {
      for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/%s/agt-memparts-%d/%ld", argv[c], (int)getpid(),
                 i);
        rmdir(path);
      }
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/agt-memparts-%d", argv[c], (int)getpid());
      if (rmdir(path) < 0)
        die(path);
    }
  } else if (strcmp(mode, "procs") == 0) {
    for (long i = 0; i < n; i++) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
    }
  }
  return 0;
}
