#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

static int sys_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
  struct open_how how = {.flags = (unsigned long long)flags | O_CLOEXEC, .resolve = resolve};

  if (flags & O_CREAT)
    how.mode = 0600;
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int agt_open_nofollow(const char *path, int flags, agt_error_t *err)
{
  int fd = sys_openat2(AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);

  if (fd < 0) {
    if (errno == ELOOP)
      return agt_error_kind(err, AGT_E_INVALID, "'%s' has a symlink in its path; refused", path);
    return agt_error_make(err, errno, "open '%s'", path);
  }
  return fd;
}

int agt_open_in_root(int rootfd, const char *path, int flags, agt_error_t *err)
{
  int fd = sys_openat2(rootfd, path, flags,
                       RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);

  if (fd < 0) {
    if (errno == ELOOP)
      return agt_error_kind(err, AGT_E_INVALID, "'%s' has a symlink in its path; refused", path);
    return agt_error_make(err, errno, "open '%s' in the jail root", path);
  }
  return fd;
}

int agt_mkdir_p(const char *path, mode_t mode, agt_error_t *err)
{
  cleanup_free char *p = xstrdup(path);

  for (char *s = p + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char c = *s;
      *s = '\0';
      if (mkdir(p, mode) < 0 && errno != EEXIST)
        return agt_error_make(err, errno, "mkdir '%s'", p);
      *s = c;
      if (c == '\0')
        break;
    }
  }
  return 0;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev, agt_error_t *err)
{
  struct stat st;

  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0;
    return agt_error_make(err, errno, "stat '%s'", name);
  }
  if (S_ISDIR(st.st_mode)) {
    cleanup_dir DIR *dir = NULL;
    struct dirent *de;
    int fd;

    if (st.st_dev != dev)
      return agt_error_kind(err, AGT_E_BUSY, "'%s' is a mount point; not removed", name);
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return agt_error_make(err, errno, "open '%s'", name);
    dir = fdopendir(fd);
    if (dir == NULL) {
      close(fd);
      return agt_error_make(err, errno, "opendir '%s'", name);
    }
    while ((de = readdir(dir)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      if (rm_rf_at(dirfd(dir), de->d_name, dev, err) < 0)
        return agt_error_wrap(err, "%s", name);
    }
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
      return agt_error_make(err, errno, "rmdir '%s'", name);
    return 0;
  }
  if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
    return agt_error_make(err, errno, "unlink '%s'", name);
  return 0;
}

int agt_rm_rf(const char *path, agt_error_t *err)
{
  struct stat st;

  if (lstat(path, &st) < 0) {
    if (errno == ENOENT)
      return 0;
    return agt_error_make(err, errno, "stat '%s'", path);
  }
  if (rm_rf_at(AT_FDCWD, path, st.st_dev, err) < 0)
    return agt_error_wrap(err, "remove");
  return 0;
}

int agt_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
                          agt_error_t *err)
{
  cleanup_free char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
  cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  const char *p = data;

  if (fd < 0)
    return agt_error_make(err, errno, "create '%s'", tmp);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      unlink(tmp);
      return agt_error_make(err, e, "write '%s'", tmp);
    }
    p += n;
    len -= (size_t)n;
  }
  /* No fsync: records are rewritten often and sit on the start path.  ext4 (the guest's
   * filesystem) flushes a file that replaces another by rename (auto_da_alloc), and a torn
   * record is reported and skipped when agtd loads it. */
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return agt_error_make(err, e, "replace '%s'", path);
  }
  return 0;
}

int agt_read_file(const char *path, size_t max, char **out, size_t *outlen, agt_error_t *err)
{
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  cleanup_free char *buf = NULL;
  size_t len = 0;

  if (fd < 0)
    return agt_error_make(err, errno, "open '%s'", path);
  buf = xmalloc(max + 1);
  for (;;) {
    ssize_t n = read(fd, buf + len, max - len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return agt_error_make(err, errno, "read '%s'", path);
    }
    if (n == 0)
      break;
    len += (size_t)n;
    if (len == max) {
      char c;
      if (read(fd, &c, 1) > 0)
        return agt_error_kind(err, AGT_E_LIMIT, "'%s' is larger than %zu bytes", path, max);
      break;
    }
  }
  buf[len] = '\0';
  if (outlen)
    *outlen = len;
  *out = steal_pointer(&buf);
  return 0;
}

int agt_write_str(const char *path, const char *s, agt_error_t *err)
{
  cleanup_close int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  size_t n = strlen(s);

  if (fd < 0)
    return agt_error_make(err, errno, "open '%s'", path);
  if (write(fd, s, n) != (ssize_t)n)
    return agt_error_make(err, errno, "write '%s' to '%s'", s, path);
  return 0;
}

int agt_memfd_program(const char *name, const char *start, const char *end, mode_t mode,
                      agt_error_t *err)
{
  size_t len = (size_t)(end - start), off = 0;
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

  if (fd < 0)
    return agt_error_make(err, errno, "memfd_create for %s", name);
  while (off < len) {
    ssize_t n = write(fd, start + off, len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      agt_error_make(err, errno, "write %s", name);
      close(fd);
      return -1;
    }
    off += (size_t)n;
  }
  if (fchmod(fd, mode) < 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
    agt_error_make(err, errno, "seal %s", name);
    close(fd);
    return -1;
  }
  /* agtd reads the program no more: its pages of agtd's binary need not stay in memory */
  {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)start + pg - 1) & ~(pg - 1);
    uintptr_t b = (uintptr_t)end & ~(pg - 1);
    if (b > a)
      madvise((void *)a, b - a, MADV_DONTNEED);
  }
  return fd;
}
