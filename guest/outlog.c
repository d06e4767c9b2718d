/* A jail's captured output on disk, with its offsets in the files (outlog.h). */
#include "outlog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The base a file says it starts at; 0 when it says nothing. */
static uint64_t file_base(const char *path)
{
  char buf[32];
  ssize_t n = lgetxattr(path, AGT_OUTLOG_XATTR, buf, sizeof buf - 1);

  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return strtoull(buf, NULL, 10);
}

void agt_outlog_stat(const char *path, const char *old_path, struct agt_outlog_pos *pos)
{
  struct stat st, old;
  int have = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
  int have_old = lstat(old_path, &old) == 0 && S_ISREG(old.st_mode);

  memset(pos, 0, sizeof *pos);
  if (have_old)
    pos->old_base = file_base(old_path);
  if (have) {
    pos->base = file_base(path);
    pos->size = (uint64_t)st.st_size;
  } else if (have_old) {
    /* rotated, and cut short before the new file took its name */
    pos->base = pos->old_base + (uint64_t)old.st_size;
  }
  if (!have_old || pos->old_base > pos->base)
    pos->old_base = pos->base;
}

static uint64_t fd_base(int fd)
{
  char buf[32];
  ssize_t n = fgetxattr(fd, AGT_OUTLOG_XATTR, buf, sizeof buf - 1);

  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return strtoull(buf, NULL, 10);
}

void agt_outlog_snapshot(const char *path, const char *old_path, struct agt_outlog_snap *s)
{
  struct stat st, ost;

  memset(s, 0, sizeof *s);
  s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  s->old_fd = open(old_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (s->fd >= 0 && fstat(s->fd, &st) == 0) {
    s->base = fd_base(s->fd);
    s->size = (uint64_t)st.st_size;
  } else if (s->fd >= 0) {
    close(s->fd);
    s->fd = -1;
  }
  if (s->old_fd >= 0 && fstat(s->old_fd, &ost) == 0 &&
      !(s->fd >= 0 && ost.st_ino == st.st_ino && ost.st_dev == st.st_dev)) {
    s->old_base = fd_base(s->old_fd);
    s->old_size = (uint64_t)ost.st_size;
  } else if (s->old_fd >= 0) {
    close(s->old_fd);
    s->old_fd = -1;
  }
}

ssize_t agt_outlog_pread(const struct agt_outlog_snap *s, uint64_t off, char *buf, size_t max)
{
  int fds[2] = {s->fd, s->old_fd};
  uint64_t bases[2] = {s->base, s->old_base}, sizes[2] = {s->size, s->old_size};

  for (int i = 0; i < 2; i++) {
    ssize_t n;
    if (fds[i] < 0 || off < bases[i] || off >= bases[i] + sizes[i])
      continue;
    if (max > bases[i] + sizes[i] - off)
      max = (size_t)(bases[i] + sizes[i] - off);
    do
      n = pread(fds[i], buf, max, (off_t)(off - bases[i]));
    while (n < 0 && errno == EINTR);
    return n;
  }
  return 0;
}

void agt_outlog_snap_close(struct agt_outlog_snap *s)
{
  if (s->fd >= 0)
    close(s->fd);
  if (s->old_fd >= 0)
    close(s->old_fd);
  s->fd = s->old_fd = -1;
}

void agt_outlog_open(struct agt_outlog *l, const char *path, const char *old_path, uint64_t budget)
{
  memset(l, 0, sizeof *l);
  l->path = path;
  l->old_path = old_path;
  l->budget = budget;
  l->fd = -1;
  agt_outlog_stat(path, old_path, &l->pos);
}

/* A new console.log starting at base: made under a temporary name with its base set, then
 * the current file becomes console.log.1 and the new one takes the name. */
static int rotate(struct agt_outlog *l)
{
  char tmp[4096];
  uint64_t base = l->pos.base + l->pos.size;
  char val[32];
  int fd, n;

  if (snprintf(tmp, sizeof tmp, "%s.new", l->path) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0)
    return -1;
  n = snprintf(val, sizeof val, "%" PRIu64, base);
  if (fsetxattr(fd, AGT_OUTLOG_XATTR, val, (size_t)n, 0) < 0 || rename(l->path, l->old_path) < 0 ||
      rename(tmp, l->path) < 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
    return -1;
  }
  if (l->fd >= 0)
    close(l->fd);
  l->fd = fd;
  l->pos.old_base = l->pos.base;
  l->pos.base = base;
  l->pos.size = 0;
  return 0;
}

int agt_outlog_append(struct agt_outlog *l, const char *data, size_t len)
{
  uint64_t half = l->budget / 2;

  if (l->fd < 0) {
    struct stat st;

    l->fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (l->fd < 0)
      return -1;
    /* what is there (it may have grown since the position was taken) */
    if (fstat(l->fd, &st) == 0)
      l->pos.size = (uint64_t)st.st_size;
  }
  while (len > 0) {
    size_t room = l->pos.size < half ? (size_t)(half - l->pos.size) : 0;
    size_t n;
    ssize_t w;

    if (room == 0) {
      if (rotate(l) < 0)
        return -1;
      continue;
    }
    n = len < room ? len : room;
    w = write(l->fd, data, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    l->pos.size += (uint64_t)w;
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

void agt_outlog_close(struct agt_outlog *l)
{
  if (l->fd >= 0)
    close(l->fd);
  l->fd = -1;
}
