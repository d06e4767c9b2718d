#include "envfile.h"

#include <stdarg.h>
#include <string.h>

#include "cleanup.h"
#include "names.h"
#include "util.h"
#include "xalloc.h"

static int bad_line(agt_error_t *err, const char *file, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad_line(agt_error_t *err, const char *file, unsigned line, const char *fmt, ...)
{
  cleanup_free char *msg = NULL;
  va_list ap;

  va_start(ap, fmt);
  msg = xvasprintf(fmt, ap);
  va_end(ap);
  return agt_error_kind(err, AGT_E_INVALID, "%s:%u: %s", file, line, msg);
}

/* One line, without its LF (nor CR): a variable for fn, or nothing. */
static int parse_line(const char *file, unsigned line, const char *s, size_t n, agt_envfile_fn fn,
                      void *ctx, agt_error_t *err)
{
  const char *eq, *v, *why;
  cleanup_free char *name = NULL, *value = NULL;
  size_t vlen;

  while (n > 0 && (*s == ' ' || *s == '\t'))
    s++, n--;
  if (n == 0 || *s == '#')
    return 0;
  if (n > 7 && memcmp(s, "export", 6) == 0 && (s[6] == ' ' || s[6] == '\t')) {
    s += 7, n -= 7;
    while (n > 0 && (*s == ' ' || *s == '\t'))
      s++, n--;
  }
  eq = memchr(s, '=', n);
  if (eq == NULL)
    return bad_line(err, file, line, "%s", "no '=' (each line is NAME=VALUE)");
  why = agt_env_name_problem(s, (size_t)(eq - s));
  if (why)
    return bad_line(err, file, line, "the name before '=' is not a variable name: %s", why);
  name = xstrndup(s, (size_t)(eq - s));
  v = eq + 1;
  vlen = n - (size_t)(v - s);
  if (vlen > 0 && (*v == '"' || *v == '\'')) {
    const char *close = memchr(v + 1, *v, vlen - 1);
    if (close == NULL || close != v + vlen - 1)
      return bad_line(err, file, line,
                      "%s: the value opens a quote that does not close at the end of the line "
                      "(a value is one line, without its quote inside)",
                      name);
    v++;
    vlen -= 2;
  }
  value = xstrndup(v, vlen);
  if (fn(ctx, name, value, err) < 0)
    return agt_error_wrap(err, "%s:%u", file, line);
  return 0;
}

int agt_envfile_parse(const char *file, const char *text, size_t len, agt_envfile_fn fn, void *ctx,
                      agt_error_t *err)
{
  const char *p = text, *end = text + len, *nul = memchr(text, '\0', len);
  unsigned line = 0;

  if (nul) {
    for (const char *q = text; q < nul; q++)
      line += *q == '\n';
    return agt_error_kind(err, AGT_E_INVALID, "%s:%u: a NUL byte (an env file is text)", file,
                          line + 1);
  }
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    size_t n = (size_t)(e - p);

    line++;
    if (n > 0 && p[n - 1] == '\r')
      n--;
    if (parse_line(file, line, p, n, fn, ctx, err) < 0)
      return -1;
    p = nl ? nl + 1 : end;
  }
  return 0;
}

int agt_envfile_read(const char *file, agt_envfile_fn fn, void *ctx, agt_error_t *err)
{
  size_t len = 0;
  cleanup_free char *text = agt_read_file(file, AGT_ENVFILE_MAX, &len, err);

  if (text == NULL)
    return -1;
  return agt_envfile_parse(file, text, len, fn, ctx, err);
}
