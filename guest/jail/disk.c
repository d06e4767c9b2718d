/* The disk of the jails' writable layers: a btrfs subvolume with a quota per jail (disk.h). */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "xalloc.h"

/* On each layer agtd makes: the real path of its state directory. */
#define AGT_LAYER_XATTR "trusted.agt.owner"

#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4 /* Linux 6.7 */
#endif

extern char **environ;

static int is_btrfs(const char *dir)
{
  struct statfs sfs;
  return statfs(dir, &sfs) == 0 && sfs.f_type == BTRFS_SUPER_MAGIC;
}

static int dir_is_empty(const char *dir)
{
  cleanup_dir DIR *d = opendir(dir);
  struct dirent *de;

  while (d && (de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      return 0;
  return 1;
}

/* Run argv (searched in PATH) with stdin and stdout on /dev/null; its stderr becomes part of
 * the error when it fails. */
static int run(const char *const argv[], agt_error_t *err)
{
  posix_spawn_file_actions_t fa;
  int pfd[2], status;
  char buf[512];
  size_t len = 0;
  ssize_t n;
  pid_t pid;

  if (pipe2(pfd, O_CLOEXEC) < 0)
    return agt_error_make(err, errno, "pipe");
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
  errno = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  if (errno != 0) {
    close(pfd[0]);
    return agt_error_make(err, errno, "run %s", argv[0]);
  }
  while ((n = read(pfd[0], buf + len, sizeof buf - 1 - len)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      len += (size_t)n;
  close(pfd[0]);
  buf[len] = '\0';
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
    buf[--len] = '\0';
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return agt_error_make(err, errno, "waitpid %s", argv[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "%s failed (status %d)%s%s", argv[0],
                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                          len ? ": " : "", buf);
  return 0;
}

/* Make the sparse image and a btrfs on it; the file appears under its name only when whole. */
static int image_make(const char *image, uint64_t size, agt_error_t *err)
{
  cleanup_free char *tmp = xasprintf("%s.new", image);
  cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  /* Mixed block groups: data and metadata share the space, so that a disk full of one jail's
   * data cannot leave no room for metadata (new files) once that data is gone. */
  const char *const argv[] = {"mkfs.btrfs", "-q",     "-f", "-K",        "--mixed", "-m", "single",
                              "-d",         "single", "-L", "agt-jails", tmp,       NULL};

  if (fd < 0)
    return agt_error_make(err, errno, "create '%s'", tmp);
  if (ftruncate(fd, (off_t)size) < 0) {
    agt_error_make(err, errno, "size '%s'", tmp);
    goto fail;
  }
  if (run(argv, err) < 0)
    goto fail;
  if (rename(tmp, image) < 0) {
    agt_error_make(err, errno, "rename '%s'", tmp);
    goto fail;
  }
  return 0;
fail:
  unlink(tmp);
  return -1;
}

/* The loop device the image is attached to already (by anyone: a mount of it elsewhere, a
 * losetup), into dev; 0 when none, 1 when attached, 2 when attached to be detached with its
 * last user (autoclear: a mount, maybe one being torn down). */
static int image_attached(const char *image, char *dev, size_t size)
{
  cleanup_dir DIR *d = opendir("/sys/block");
  struct dirent *de;
  struct stat st;

  if (d == NULL || stat(image, &st) < 0)
    return 0;
  while ((de = readdir(d)) != NULL) {
    struct loop_info64 info;
    int fd;

    if (strncmp(de->d_name, "loop", 4) != 0)
      continue;
    snprintf(dev, size, "/dev/%s", de->d_name);
    fd = open(dev, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    int r = ioctl(fd, LOOP_GET_STATUS64, &info);
    close(fd);
    if (r == 0 && info.lo_device == st.st_dev && info.lo_inode == st.st_ino)
      return info.lo_flags & LO_FLAGS_AUTOCLEAR ? 2 : 1;
  }
  return 0;
}

/* Attach the image to a free loop device (detached again when its last user, the mount,
 * goes) and mount it on dir. */
static int image_mount(const char *image, const char *dir, agt_error_t *err)
{
  cleanup_close int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  cleanup_close int img = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  char dev[32];

  if (ctl < 0)
    return agt_error_make(err, errno, "open /dev/loop-control");
  if (img < 0)
    return agt_error_make(err, errno, "open '%s'", image);
  for (int tries = 0;; tries++) {
    struct loop_config cfg;
    int n = ioctl(ctl, LOOP_CTL_GET_FREE), lfd;

    if (n < 0)
      return agt_error_make(err, errno, "no free loop device");
    snprintf(dev, sizeof dev, "/dev/loop%d", n);
    lfd = open(dev, O_RDWR | O_CLOEXEC);
    if (lfd < 0)
      return agt_error_make(err, errno, "open %s", dev);
    memset(&cfg, 0, sizeof cfg);
    cfg.fd = (unsigned)img;
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    snprintf((char *)cfg.info.lo_file_name, sizeof cfg.info.lo_file_name, "%s", image);
    if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
      int e = errno;
      close(lfd);
      if (e == EBUSY && tries < 8) /* taken by someone else meanwhile */
        continue;
      return agt_error_make(err, e, "attach '%s' to %s", image, dev);
    }
    int r = mount(dev, dir, "btrfs", MS_NOSUID | MS_NODEV, NULL);
    int e = errno;
    close(lfd); /* the mount holds the device now; without it, autoclear detaches it */
    if (r < 0)
      return agt_error_make(err, e, "mount %s ('%s') on '%s'", dev, image, dir);
    return 0;
  }
}

static int quota_enable(const char *dir, agt_error_t *err)
{
  cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct btrfs_ioctl_quota_ctl_args q;

  if (fd < 0)
    return agt_error_make(err, errno, "open '%s'", dir);
  /* Simple quotas (Linux 6.7) account each extent to the subvolume that wrote it, without
   * the back-reference walks of full qgroups; full qgroups elsewhere. */
  memset(&q, 0, sizeof q);
  q.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA;
  if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &q) == 0)
    return 0;
  memset(&q, 0, sizeof q);
  q.cmd = BTRFS_QUOTA_CTL_ENABLE;
  if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &q) < 0)
    return agt_error_make(err, errno, "enable btrfs quotas on '%s'", dir);
  return 0;
}

/* The UUID of the btrfs dir is on, as blkid writes it; -1 when it cannot be read. */
static int fs_uuid(const char *dir, char uuid[37])
{
  cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct btrfs_ioctl_fs_info_args fi;

  if (fd < 0)
    return -1;
  memset(&fi, 0, sizeof fi);
  if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
    return -1;
  snprintf(uuid, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           fi.fsid[0], fi.fsid[1], fi.fsid[2], fi.fsid[3], fi.fsid[4], fi.fsid[5], fi.fsid[6],
           fi.fsid[7], fi.fsid[8], fi.fsid[9], fi.fsid[10], fi.fsid[11], fi.fsid[12], fi.fsid[13],
           fi.fsid[14], fi.fsid[15]);
  return 0;
}

/* Quotas are on (full or simple) where the file system lists qgroups in sysfs. */
static int quotas_on(const char *dir)
{
  char path[128], uuid[37];

  if (fs_uuid(dir, uuid) < 0)
    return 0;
  snprintf(path, sizeof path, "/sys/fs/btrfs/%s/qgroups", uuid);
  return access(path, F_OK) == 0;
}

/* Did agt make the btrfs mounted on dir (the Lima VM's jails disk, which agt's provisioning
 * formats)?  Its maker writes AGT_DISK_MARK at its root, holding the file system's UUID,
 * right after mkfs.btrfs: the mark of another file system (files copied over) does not count. */
static int made_by_agt(const char *dir)
{
  cleanup_free char *path = xasprintf("%s/%s", dir, AGT_DISK_MARK);
  cleanup_file FILE *f = fopen(path, "re");
  char uuid[37], line[64];

  if (f == NULL || fgets(line, sizeof line, f) == NULL || fs_uuid(dir, uuid) < 0)
    return 0;
  line[strcspn(line, "\n")] = '\0';
  return strcmp(line, uuid) == 0;
}

/* Is dir the mount point of a btrfs on a loop device backed by image (agtd's own, mounted by
 * an agtd that died)?  Anything else mounted there is someone else's. */
static int mounted_from(const char *dir, const char *image)
{
  cleanup_file FILE *f = fopen("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  cleanup_free char *rdir = realpath(dir, NULL);
  cleanup_free char *rimg = realpath(image, NULL);
  char mnt[4096], fstype[32], src[256], path[320], back[4096];
  size_t cap = 0;
  int found = 0;

  if (f == NULL || rdir == NULL || rimg == NULL)
    return 0;
  /* the last mount on dir is the one seen there */
  while (getline(&line, &cap, f) > 0) {
    const char *sep = strstr(line, " - ");

    if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strcmp(mnt, rdir) == 0)
      found = sscanf(sep, " - %31s %255s", fstype, src) == 2 && strcmp(fstype, "btrfs") == 0 &&
              strncmp(src, "/dev/loop", 9) == 0;
  }
  if (!found)
    return 0;
  snprintf(path, sizeof path, "/sys/block/%s/loop/backing_file", src + 5);
  {
    cleanup_file FILE *b = fopen(path, "re");
    if (b == NULL || fgets(back, sizeof back, b) == NULL)
      return 0;
  }
  back[strcspn(back, "\n")] = '\0';
  return strcmp(back, rimg) == 0;
}

static int disk_setup(struct agt_disk *dk, const char *state_dir, uint64_t image_size, int *fatal,
                      agt_error_t *err)
{
  char dev[300];

  /* Mounted from our image by an agtd that died: ours to unmount at exit. */
  if (is_btrfs(dk->dir) && mounted_from(dk->dir, dk->image)) {
    dk->mounted = 1;
    dk->own = 1;
  }
  if (is_btrfs(dk->dir) && !dk->own && made_by_agt(dk->dir)) {
    /* agt made it (the Lima VM's jails disk): agtd's like its image. */
    dk->own = 1;
    if (chmod(dk->dir, 0700) < 0)
      return agt_error_make(err, errno, "chmod '%s'", dk->dir);
    return quota_enable(dk->dir, err);
  }
  if (is_btrfs(dk->dir) && !dk->own) {
    /* A file system someone else made (a btrfs root, a disk of the user's): agtd never turns
     * its quotas on; whoever made it decides. */
    if (!quotas_on(dk->dir))
      return agt_error_kind(err, AGT_E_STATE,
                            "'%s' is a btrfs that agt did not make (no %s holding its UUID) and "
                            "its quotas are off: agtd never turns quotas on on a file system it "
                            "did not make (btrfs quota enable '%s' turns them on)",
                            dk->dir, AGT_DISK_MARK, dk->dir);
    return 0;
  }
  if (!is_btrfs(dk->dir)) {
    struct stat st;

    if (image_size == UINT64_MAX)
      return agt_error_kind(err, AGT_E_STATE, "no image wanted (--disk-size 0)");
    if (!dir_is_empty(dk->dir))
      return agt_error_kind(err, AGT_E_STATE,
                            "'%s' holds jails' layers made before it was on btrfs: remove them "
                            "first",
                            dk->dir);
    if (lstat(dk->image, &st) < 0) {
      if (image_size == 0) {
        struct statvfs vfs;
        if (statvfs(state_dir, &vfs) < 0)
          return agt_error_make(err, errno, "statvfs '%s'", state_dir);
        image_size = (uint64_t)vfs.f_bavail * vfs.f_frsize / 2;
      }
      if (image_size < (1ull << 30))
        return agt_error_kind(err, AGT_E_LIMIT,
                              "less than 1 GiB for the jails' disk image (free space or "
                              "--disk-size)");
      if (image_make(dk->image, image_size, err) < 0)
        return agt_error_wrap(err, "make the jails' disk image");
    } else if (!S_ISREG(st.st_mode)) {
      return agt_error_kind(err, AGT_E_STATE, "'%s' is not a regular file", dk->image);
    }
    switch (image_attached(dk->image, dev, sizeof dev)) {
    case 1:
      /* Attached by someone (losetup): not agtd's to mount. */
      *fatal = 1;
      return agt_error_kind(err, AGT_E_BUSY,
                            "'%s' is attached to %s already: detach it (losetup -d %s) first",
                            dk->image, dev, dev);
    case 2:
      /* Attached by a mount that is still there (elsewhere, in another mount namespace, or
       * one going away): mounted from the same device, so that there is one btrfs on the
       * image, never two (a second loop device would make a second one, and corrupt it). */
      if (mount(dev, dk->dir, "btrfs", MS_NOSUID | MS_NODEV, NULL) < 0) {
        *fatal = 1;
        return agt_error_make(err, errno, "mount %s ('%s', attached already) on '%s'", dev,
                              dk->image, dk->dir);
      }
      fprintf(stderr,
              "agtd: '%s' is attached to %s by a mount still there (elsewhere or going "
              "away): mounted from that device\n",
              dk->image, dev);
      dk->shared = 1;
      break;
    default:
      if (image_mount(dk->image, dk->dir, err) < 0)
        return -1;
    }
    dk->mounted = 1;
    dk->own = 1;
    if (chmod(dk->dir, 0700) < 0)
      return agt_error_make(err, errno, "chmod '%s'", dk->dir);
  }
  return quota_enable(dk->dir, err);
}

int agt_disk_init(struct agt_disk *dk, const char *state_dir, const char *layers_dir,
                  uint64_t image_size, agt_error_t *err)
{
  cleanup_free char *old = xasprintf("%s/jails.img", state_dir);
  agt_error_t e = NULL;
  struct statfs sfs;
  int fatal = 0;

  memset(dk, 0, sizeof *dk);
  dk->dir = xstrdup(layers_dir);
  dk->image = xasprintf("%s/layers.img", state_dir);
  dk->owner = realpath(state_dir, NULL);
  if (dk->owner == NULL)
    dk->owner = xstrdup(state_dir);
  /* Before, the image held the jails' records and logs too, mounted on <state>/jails. */
  if (access(old, F_OK) == 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "'%s' is the jails' disk of an older agtd, which kept the jails' "
                          "records on it: remove it (its jails are lost), or use another "
                          "--state-dir",
                          old);
  if (agt_mkdir_p(layers_dir, 0700, err) < 0)
    return agt_error_wrap(err, "the jails' layers");
  if (disk_setup(dk, state_dir, image_size, &fatal, &e) < 0) {
    if (fatal) {
      if (err)
        *err = e;
      else
        agt_error_release(&e);
      return -1;
    }
    dk->why_off = xstrdup(e->msg);
    agt_error_release(&e);
    if (dk->mounted && umount2(dk->dir, MNT_DETACH) == 0)
      dk->mounted = 0;
    return 0;
  }
  dk->enabled = 1;
  if (statfs(dk->dir, &sfs) == 0)
    dk->size = (uint64_t)sfs.f_blocks * sfs.f_bsize;
  /* btrfs keeps some of it for its own metadata and global reserve: not promised to jails. */
  dk->capacity = dk->size - dk->size / 16;
  return 0;
}

int agt_disk_promise(struct agt_disk *dk, uint64_t running, uint64_t limit, const char *name,
                     agt_error_t *err)
{
  uint64_t want = limit ? limit : dk->capacity, used = 0, promised;
  struct statfs sfs;

  if (!dk->enabled)
    return 0;
  /* What is written already (the jails at rest, and the running ones' so far: counted twice,
   * on the safe side) plus what running jails may still write. */
  if (statfs(dk->dir, &sfs) == 0)
    used = (uint64_t)(sfs.f_blocks - sfs.f_bfree) * sfs.f_bsize;
  promised = agt_disk_sum(running, used);
  if (promised <= dk->capacity && want <= dk->capacity - promised)
    return 0;
  return agt_error_kind(
      err, AGT_E_LIMIT,
      "jail '%s' asks for %llu MiB of disk (%s), and of the jails' %llu MiB disk %llu MiB are "
      "promised to running jails' limits and %llu MiB written: give it a smaller disk limit "
      "(--disk), or stop or remove jails",
      name, (unsigned long long)(want >> 20), limit ? "its disk limit" : "no disk limit: all of it",
      (unsigned long long)(dk->capacity >> 20), (unsigned long long)(running >> 20),
      (unsigned long long)(used >> 20));
}

void agt_disk_release(struct agt_disk *dk)
{
  if (dk->mounted) {
    char dev[300];

    int i;

    if (umount2(dk->dir, 0) < 0) {
      /* busy (a shell in it): gone with its last user */
      fprintf(stderr, "agtd: unmount '%s': %s; detached, gone with its last user\n", dk->dir,
              strerror(errno));
      umount2(dk->dir, MNT_DETACH);
    }
    /* The kernel detaches the loop device after the unmount, asynchronously, once the
     * btrfs is shut down (and the overlays of jails that just died, which hold it, are
     * gone): wait for it (5 s at most).  The next agtd would mount from the same device
     * anyway; this only keeps the image free for others. */
    for (i = 0; !dk->shared && i < 500 && image_attached(dk->image, dev, sizeof dev); i++)
      usleep(10000);
    if (i == 500)
      fprintf(stderr,
              "agtd: '%s' is still attached to %s after 5 s: a mount of it is left elsewhere "
              "(a mount namespace made while agtd had it mounted holds a copy: "
              "grep ' %s ' /proc/*/mountinfo); it is detached once that goes\n",
              dk->image, dev, dev);
  }
  free(dk->dir);
  free(dk->image);
  free(dk->why_off);
  free(dk->owner);
  memset(dk, 0, sizeof *dk);
}

static int subvol_limit(const char *rw, uint64_t limit, agt_error_t *err)
{
  cleanup_close int fd = open(rw, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct btrfs_ioctl_qgroup_limit_args q;

  if (fd < 0)
    return agt_error_make(err, errno, "open '%s'", rw);
  memset(&q, 0, sizeof q);
  q.qgroupid = 0; /* the subvolume fd is in */
  q.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
  q.lim.max_rfer = limit;
  if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &q) < 0)
    return agt_error_make(err, errno, "set the disk limit of '%s'", rw);
  return 0;
}

/* <jail_dir>/rw: the symlink to the jail's layer on the jails' disk, or the directory of
 * the layer itself when the disk is off. */
static int layer_remove(struct agt_disk *dk, const char *layer, agt_error_t *err);

int agt_disk_jail_create(struct agt_disk *dk, const char *jail_dir, uint64_t limit,
                         agt_error_t *err)
{
  cleanup_free char *rw = xasprintf("%s/rw", jail_dir);
  cleanup_free char *layer = NULL;
  cleanup_free char *upper = NULL;
  cleanup_free char *work = NULL;

  if (dk->enabled) {
    cleanup_close int dfd = open(dk->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    const char *base = strrchr(jail_dir, '/') ? strrchr(jail_dir, '/') + 1 : jail_dir;
    struct btrfs_ioctl_vol_args va;
    struct timespec ts;

    if (dfd < 0)
      return agt_error_make(err, errno, "open '%s'", dk->dir);
    /* Named after the jail's directory when it was made, plus a stamp: a prepared jail's
     * directory is renamed on its claim and its name is used again, the layer stays. */
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(&va, 0, sizeof va);
    base += strspn(base, ".");
    snprintf(va.name, sizeof va.name, "%s.%llx", base,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    layer = xasprintf("%s/%s", dk->dir, va.name);
    if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &va) < 0)
      return agt_error_make(err, errno, "create the subvolume '%s'", layer);
    /* whose it is: agt_disk_sweep removes only this agtd's own layers */
    if (setxattr(layer, AGT_LAYER_XATTR, dk->owner, strlen(dk->owner), 0) < 0) {
      agt_error_make(err, errno, "mark the subvolume '%s'", layer);
      goto fail_layer;
    }
    if (symlink(layer, rw) < 0) {
      agt_error_make(err, errno, "symlink '%s'", rw);
      goto fail;
    }
    if (limit && subvol_limit(layer, limit, err) < 0)
      goto fail;
  } else if (mkdir(rw, 0755) < 0) {
    return agt_error_make(err, errno, "mkdir '%s'", rw);
  }
  upper = xasprintf("%s/upper", layer ? layer : rw);
  work = xasprintf("%s/work", layer ? layer : rw);
  if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0) {
    agt_error_make(err, errno, "mkdir in '%s'", layer ? layer : rw);
    goto fail;
  }
  return 0;
fail:
  if (layer)
    agt_disk_jail_remove(dk, jail_dir, NULL);
  return -1;
fail_layer:
  layer_remove(dk, layer, NULL);
  return -1;
}

int agt_disk_home_make(struct agt_disk *dk, const char *path, agt_error_t *err)
{
  cleanup_free char *parent = xstrdup(path);
  char *slash = strrchr(parent, '/');
  cleanup_close int dfd = -1;
  struct btrfs_ioctl_vol_args va;

  if (!dk->enabled) {
    if (mkdir(path, 0700) < 0)
      return agt_error_make(err, errno, "mkdir '%s'", path);
    return 0;
  }
  *slash = '\0';
  dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return agt_error_make(err, errno, "open '%s'", parent);
  memset(&va, 0, sizeof va);
  if (strlen(slash + 1) >= sizeof va.name)
    return agt_error_kind(err, AGT_E_INVALID, "home name '%s' too long", slash + 1);
  memcpy(va.name, slash + 1, strlen(slash + 1));
  if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &va) < 0)
    return agt_error_make(err, errno, "create the subvolume '%s'", path);
  if (chmod(path, 0700) < 0)
    return agt_error_make(err, errno, "chmod '%s'", path);
  return 0;
}

int agt_disk_home_limit(struct agt_disk *dk, const char *path, uint64_t limit, agt_error_t *err)
{
  struct stat st;

  if (!dk->enabled)
    return 0;
  /* a subvolume's root is inode 256; a home made as a directory (the disk was off) has no
   * quota of its own */
  if (lstat(path, &st) < 0)
    return agt_error_make(err, errno, "stat '%s'", path);
  if (st.st_ino != 256)
    return 0;
  return subvol_limit(path, limit ? limit : UINT64_MAX, err);
}

/* The layer <jail_dir>/rw links to, NULL when rw is no link to the jails' disk. */
static char *layer_of(struct agt_disk *dk, const char *jail_dir)
{
  cleanup_free char *rw = xasprintf("%s/rw", jail_dir);
  char buf[4096];
  size_t n = strlen(dk->dir);
  ssize_t len = readlink(rw, buf, sizeof buf - 1);

  if (len <= 0)
    return NULL;
  buf[len] = '\0';
  if (strncmp(buf, dk->dir, n) != 0 || buf[n] != '/' || strchr(buf + n + 1, '/') ||
      buf[n + 1] == '\0' || buf[n + 1] == '.')
    return NULL;
  return xstrdup(buf);
}

int agt_disk_jail_limit(struct agt_disk *dk, const char *jail_dir, uint64_t limit, agt_error_t *err)
{
  cleanup_free char *layer = NULL;

  if (!dk->enabled || limit == 0)
    return 0;
  layer = layer_of(dk, jail_dir);
  if (layer == NULL)
    return agt_error_kind(err, AGT_E_STATE, "'%s/rw' is not a layer on the jails' disk", jail_dir);
  return subvol_limit(layer, limit, err);
}

/* Delete a layer's subvolume, and wait until the space it held is free again: its files are
 * removed first (their extents are freed at the next commit), the empty subvolume is left
 * to btrfs's cleaner, and the commit is waited for. */
static int layer_remove(struct agt_disk *dk, const char *layer, agt_error_t *err)
{
  cleanup_free char *upper = xasprintf("%s/upper", layer);
  cleanup_free char *work = xasprintf("%s/work", layer);
  cleanup_close int dfd = open(dk->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct btrfs_ioctl_vol_args va;
  const char *name = strrchr(layer, '/') + 1;
  __u64 transid = 0;

  if (dfd < 0)
    return agt_error_make(err, errno, "open '%s'", dk->dir);
  if (agt_rm_rf(upper, err) < 0 || agt_rm_rf(work, err) < 0)
    return -1;
  memset(&va, 0, sizeof va);
  snprintf(va.name, sizeof va.name, "%s", name);
  if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &va) < 0 && errno != ENOENT)
    return agt_error_make(err, errno, "delete the subvolume '%s'", layer);
  /* Commit the transaction (freed extents are free after it), without BTRFS_IOC_SYNC's
   * writeback of every other jail's dirty data first. */
  if (ioctl(dfd, BTRFS_IOC_START_SYNC, &transid) < 0 ||
      ioctl(dfd, BTRFS_IOC_WAIT_SYNC, &transid) < 0)
    return agt_error_make(err, errno, "commit '%s'", dk->dir);
  return 0;
}

int agt_disk_jail_remove(struct agt_disk *dk, const char *jail_dir, agt_error_t *err)
{
  cleanup_free char *layer = dk->enabled ? layer_of(dk, jail_dir) : NULL;

  if (layer && layer_remove(dk, layer, err) < 0)
    return -1;
  return agt_rm_rf(jail_dir, err);
}

int agt_disk_sweep(struct agt_disk *dk, const char *jails_dir)
{
  cleanup_dir DIR *jd = NULL;
  cleanup_dir DIR *ld = NULL;
  struct dirent *de;
  char **owned = NULL;
  size_t nowned = 0, cap = 0;
  int n = 0;

  if (!dk->enabled || (ld = opendir(dk->dir)) == NULL)
    return 0;
  /* The layers that jail directories (records and prepared jails alike) link to; without
   * them, nothing can be known to be left over. */
  jd = opendir(jails_dir);
  if (jd == NULL)
    return 0;
  while ((de = readdir(jd)) != NULL) {
    cleanup_free char *dir = xasprintf("%s/%s", jails_dir, de->d_name);
    char *layer = layer_of(dk, dir);

    if (layer == NULL)
      continue;
    if (nowned == cap) {
      cap = cap ? 2 * cap : 64;
      owned = xrealloc(owned, cap * sizeof *owned);
    }
    owned[nowned++] = layer;
  }
  /* Any other of this agtd's own (marked with its state directory: the layers directory
   * may be a file system agtd did not make, or shared) is left over from a start cut
   * short: its space goes back. */
  while ((de = readdir(ld)) != NULL) {
    cleanup_free char *layer = NULL;
    char mark[PATH_MAX];
    ssize_t m;
    size_t i;

    if (de->d_name[0] == '.')
      continue;
    layer = xasprintf("%s/%s", dk->dir, de->d_name);
    m = lgetxattr(layer, AGT_LAYER_XATTR, mark, sizeof mark - 1);
    if (m < 0 || (size_t)m != strlen(dk->owner) || memcmp(mark, dk->owner, (size_t)m) != 0)
      continue;
    for (i = 0; i < nowned && strcmp(owned[i], layer) != 0; i++)
      ;
    if (i == nowned && layer_remove(dk, layer, NULL) == 0)
      n++;
  }
  for (size_t i = 0; i < nowned; i++)
    free(owned[i]);
  free(owned);
  return n;
}
