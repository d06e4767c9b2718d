#include "util.h"

#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "platform.h"
#include "xalloc.h"

void agt_strv_push(struct agt_strv *s, const char *str)
{
  if (s->n + 2 > s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->v = xrealloc(s->v, s->cap * sizeof *s->v);
  }
  s->v[s->n++] = xstrdup(str);
  s->v[s->n] = NULL;
}

void agt_strv_pushf(struct agt_strv *s, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *str = NULL;

  va_start(ap, fmt);
  str = xvasprintf(fmt, ap);
  va_end(ap);
  agt_strv_push(s, str);
}

char **agt_strv_steal(struct agt_strv *s)
{
  char **v = s->v;

  if (v == NULL)
    v = xzalloc(sizeof *v);
  s->v = NULL;
  s->n = s->cap = 0;
  return v;
}

void agt_strv_clear(struct agt_strv *s)
{
  agt_strv_free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}

size_t agt_strv_len(char *const *v)
{
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

int agt_mkdir_p(const char *path, mode_t mode, agt_error_t *err)
{
  cleanup_free char *p = xstrdup(path);
  struct stat st;

  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0')
      continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, mode) < 0 && errno != EEXIST)
      return agt_error_make(err, errno, "create directory '%s'", p);
    *s = c;
    if (c == '\0')
      break;
  }
  if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
    return agt_error_make(err, ENOTDIR, "create directory '%s'", path);
  return 0;
}

char *agt_read_file(const char *path, size_t max, size_t *len, agt_error_t *err)
{
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  cleanup_free char *buf = NULL;
  size_t n = 0, cap = 0;

  if (fd < 0) {
    agt_error_make(err, errno, "open '%s'", path);
    return NULL;
  }
  for (;;) {
    ssize_t r;
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 8192;
      buf = xrealloc(buf, cap);
    }
    r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      agt_error_make(err, errno, "read '%s'", path);
      return NULL;
    }
    if (r == 0)
      break;
    n += (size_t)r;
    if (n > max) {
      agt_error_kind(err, AGT_E_LIMIT, "'%s' is larger than %zu bytes", path, max);
      return NULL;
    }
  }
  if (buf == NULL)
    buf = xmalloc(1);
  buf[n] = '\0';
  if (len)
    *len = n;
  return steal_pointer(&buf);
}

int agt_write_file(const char *path, const char *data, size_t len, mode_t mode, agt_error_t *err)
{
  cleanup_free char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  const char *p = data;

  if (fd < 0)
    return agt_error_make(err, errno, "create '%s'", tmp);
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0) {
      int e = errno;
      close(fd);
      unlink(tmp);
      return agt_error_make(err, e, "write '%s'", tmp);
    }
    p += w;
    len -= (size_t)w;
  }
  if (close(fd) < 0) {
    int e = errno;
    unlink(tmp);
    return agt_error_make(err, e, "write '%s'", tmp);
  }
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return agt_error_make(err, e, "rename '%s' to '%s'", tmp, path);
  }
  return 0;
}

char *agt_cache_dir(void)
{
  return agt_platform_cache_dir(agt_os_native());
}

const char *agt_human_bytes(unsigned long long n, char *buf, size_t len)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;

  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%llu B", n);
  else
    snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

int agt_path_under(const char *path, const char *dir)
{
  size_t n = strlen(dir);

  if (strcmp(dir, "/") == 0)
    return path[0] == '/';
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

char *agt_home_user(void)
{
  struct passwd *pw = getpwuid(getuid());
  const char *name = pw && pw->pw_name && *pw->pw_name ? pw->pw_name : getenv("USER");
  char *out;
  size_t n;

  if (name == NULL || *name == '\0')
    name = "user";
  n = strlen(name);
  if (n > 63)
    n = 63;
  out = xstrndup(name, n);
  for (char *p = out; *p; p++) {
    if (*p >= 'A' && *p <= 'Z')
      *p = (char)(*p - 'A' + 'a');
    else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
               *p == '-'))
      *p = '-';
  }
  if (!((out[0] >= 'a' && out[0] <= 'z') || (out[0] >= '0' && out[0] <= '9')))
    out[0] = 'u';
  return out;
}
