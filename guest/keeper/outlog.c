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
#include <time.h>
#include <unistd.h>

#define IDX_MIN_GAP_NS 1000000LL    /* a record at most every millisecond */
#define IDX_BYTES 64                /* ... when this much was written since the last one */
#define IDX_MAX_GAP_NS 1000000000LL /* ... or this long passed */
#define IDX_FILE_MAX (64u << 20)    /* what a reader takes from one index at most */

static int idx_name(const char *log, char *buf, size_t n)
{
  if (snprintf(buf, n, "%s" AGT_OUTLOG_IDX_SUFFIX, log) >= (int)n) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

static int cmp_time(const void *a, const void *b)
{
  const struct agt_outlog_time *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off ? 1 : (x->ns > y->ns) - (x->ns < y->ns);
}

/* Append one index file's whole records to *v. */
static void read_idx(const char *log, struct agt_outlog_time **v, size_t *n, size_t *cap)
{
  char name[4096];
  struct stat st;
  int fd;

  if (idx_name(log, name, sizeof name) < 0)
    return;
  fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    size_t want = (size_t)st.st_size / sizeof **v, got = 0;
    if (want > IDX_FILE_MAX / sizeof **v)
      want = IDX_FILE_MAX / sizeof **v;
    if (*n + want > *cap) {
      struct agt_outlog_time *m = realloc(*v, (*n + want) * sizeof **v);
      if (m == NULL) {
        close(fd);
        return;
      }
      *v = m;
      *cap = *n + want;
    }
    while (got < want * sizeof **v) {
      ssize_t r = pread(fd, (char *)(*v + *n) + got, want * sizeof **v - got, (off_t)got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    *n += got / sizeof **v; /* a record cut short is left out */
  }
  close(fd);
}

static size_t all_times(const char *path, const char *old_path, struct agt_outlog_time **v)
{
  size_t n = 0, cap = 0;

  *v = NULL;
  read_idx(old_path, v, &n, &cap);
  read_idx(path, v, &n, &cap);
  if (n > 1)
    qsort(*v, n, sizeof **v, cmp_time);
  return n;
}

size_t agt_outlog_times(const char *path, const char *old_path, uint64_t from, uint64_t to,
                        struct agt_outlog_time **out)
{
  struct agt_outlog_time *v;
  size_t n = all_times(path, old_path, &v), first = 0, k = 0;

  /* the last record at or before from, then those up to to */
  while (first + 1 < n && v[first + 1].off <= from)
    first++;
  if (n && v[first].off > from && v[first].off >= to)
    n = 0;
  for (size_t i = first; i < n && v[i].off < to; i++)
    v[k++] = v[i];
  if (k == 0) {
    free(v);
    v = NULL;
  }
  *out = v;
  return k;
}

uint64_t agt_outlog_offset_at(const char *path, const char *old_path, int64_t ns, uint64_t end)
{
  struct agt_outlog_time *v;
  size_t n = all_times(path, old_path, &v);
  uint64_t off = end;

  for (size_t i = 0; i < n; i++)
    if (v[i].ns >= ns && v[i].off < end) {
      off = v[i].off;
      break;
    }
  free(v);
  return off;
}

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
  l->idx_fd = -1;
  agt_outlog_stat(path, old_path, &l->pos);
}

/* The index goes with its file: a new empty one takes the name once the current one is
 * console.log.1.idx.  When that fails the new file's times are not kept (its output is). */
static void rotate_idx(struct agt_outlog *l)
{
  char name[4096], old[4096], tmp[4096 + 8];
  int fd;

  if (l->idx_fd >= 0)
    close(l->idx_fd);
  l->idx_fd = -1;
  l->idx_size = 0;
  l->last_ns = 0;
  if (idx_name(l->path, name, sizeof name) < 0 || idx_name(l->old_path, old, sizeof old) < 0)
    return;
  snprintf(tmp, sizeof tmp, "%s.new", name);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0)
    return;
  if ((rename(name, old) < 0 && errno != ENOENT) || rename(tmp, name) < 0) {
    close(fd);
    unlink(tmp);
    return;
  }
  l->idx_fd = fd;
}

/* Open console.log.idx for appending; a record cut short at its end is cut off. */
static void open_idx(struct agt_outlog *l)
{
  char name[4096];
  struct stat st;
  struct agt_outlog_time last;

  if (idx_name(l->path, name, sizeof name) < 0)
    return;
  l->idx_fd = open(name, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (l->idx_fd < 0 || fstat(l->idx_fd, &st) < 0)
    return;
  l->idx_size = (uint64_t)st.st_size - (uint64_t)st.st_size % sizeof last;
  if ((uint64_t)st.st_size != l->idx_size && ftruncate(l->idx_fd, (off_t)l->idx_size) < 0) {
    close(l->idx_fd);
    l->idx_fd = -1;
    return;
  }
  if (l->idx_size >= sizeof last &&
      pread(l->idx_fd, &last, sizeof last, (off_t)(l->idx_size - sizeof last)) ==
          (ssize_t)sizeof last) {
    l->last_off = last.off;
    l->last_ns = last.ns;
  }
}

/* Before output at offset off: a record of when, if one is due. */
static void stamp(struct agt_outlog *l, uint64_t off)
{
  struct agt_outlog_time t;
  struct timespec ts;
  int64_t gap;

  if (l->idx_fd < 0)
    return;
  clock_gettime(CLOCK_REALTIME, &ts);
  t.off = off;
  t.ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  gap = t.ns - l->last_ns;
  if (l->idx_size > 0 &&
      (gap < IDX_MIN_GAP_NS || (off - l->last_off < IDX_BYTES && gap < IDX_MAX_GAP_NS)))
    return;
  if (write(l->idx_fd, &t, sizeof t) == (ssize_t)sizeof t) {
    l->idx_size += sizeof t;
    l->last_off = t.off;
    l->last_ns = t.ns;
  }
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
  rotate_idx(l);
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
    open_idx(l);
  }
  stamp(l, l->pos.base + l->pos.size);
  while (len > 0) {
    uint64_t used = l->pos.size + l->idx_size; /* the index counts against the budget */
    size_t room = used < half ? (size_t)(half - used) : 0;
    size_t n;
    ssize_t w;

    if (room == 0) {
      if (rotate(l) < 0)
        return -1;
      stamp(l, l->pos.base); /* the new file's first record */
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
  if (l->idx_fd >= 0)
    close(l->idx_fd);
  l->fd = l->idx_fd = -1;
}
