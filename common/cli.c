#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "xalloc.h"

int agt_opts_parse(int argc, char **argv, const struct agt_opt *opts, agt_opt_fn fn, void *ctx,
                   agt_error_t *err)
{
  size_t n = 0;
  cleanup_free struct option *lo = NULL;
  cleanup_free char *so = NULL;
  char *p;
  int c;

  while (opts[n].name)
    n++;
  lo = xzalloc((n + 2) * sizeof *lo);
  so = xzalloc(3 * n + 8);
  p = so;
  *p++ = '+'; /* stop at the first operand */
  *p++ = ':'; /* report a missing argument as ':' */
  for (size_t i = 0; i < n; i++) {
    lo[i].name = opts[i].name;
    lo[i].has_arg = opts[i].arg ? required_argument : no_argument;
    lo[i].val = opts[i].key;
    if (opts[i].key > 0 && opts[i].key < 256) {
      *p++ = (char)opts[i].key;
      if (opts[i].arg)
        *p++ = ':';
    }
  }
  lo[n].name = "help";
  lo[n].val = 'h';
  *p++ = 'h';
  optind = 1;
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
  optreset = 1; /* BSD getopt keeps state that optind = 1 alone does not reset */
#endif
  opterr = 0;
  while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
    if (c == 'h')
      return -2;
    if (c == '?') {
      if (optopt > 0 && optopt < 256)
        return agt_error_kind(err, AGT_E_INVALID, "unknown option '-%c'", optopt);
      return agt_error_kind(err, AGT_E_INVALID, "unknown option '%s'", argv[optind - 1]);
    }
    if (c == ':')
      return agt_error_kind(err, AGT_E_INVALID, "option '%s' needs an argument", argv[optind - 1]);
    if (fn(ctx, c, optarg, err) < 0)
      return -1;
  }
  return optind;
}

static int by_name(const void *a, const void *b)
{
  const struct agt_opt *x = *(const struct agt_opt *const *)a;
  const struct agt_opt *y = *(const struct agt_opt *const *)b;
  return strcmp(x->name, y->name);
}

void agt_opts_usage(FILE *f, const char *usage, const char *summary, const struct agt_opt *opts)
{
  size_t n = 0;
  cleanup_free const struct agt_opt **sorted = NULL;

  while (opts && opts[n].name)
    n++;
  fprintf(f, "usage: %s\n\n%s\n", usage, summary);
  if (n == 0)
    return;
  sorted = xzalloc(n * sizeof *sorted);
  for (size_t i = 0; i < n; i++)
    sorted[i] = &opts[i];
  qsort(sorted, n, sizeof *sorted, by_name);
  fputc('\n', f);
  for (size_t i = 0; i < n; i++) {
    const struct agt_opt *o = sorted[i];
    char left[64];
    if (o->key > 0 && o->key < 256)
      snprintf(left, sizeof left, "-%c, --%s%s%s", o->key, o->name, o->arg ? " " : "",
               o->arg ? o->arg : "");
    else
      snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fprintf(f, "  %-28s %s\n", left, o->help);
  }
}

int agt_parse_u64(const char *what, const char *s, uint64_t *out, agt_error_t *err)
{
  char *end;
  unsigned long long v;

  if (s == NULL || *s < '0' || *s > '9')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a number", what, s ? s : "");
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || *end)
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a number", what, s);
  *out = v;
  return 0;
}

int agt_parse_limit(const char *what, const char *s, int size, uint64_t *out, agt_error_t *err)
{
  if (s && strcmp(s, "unlimited") == 0) {
    *out = AGT_LIMIT_UNLIMITED;
    return 0;
  }
  if ((size ? agt_parse_size(what, s, out, err) : agt_parse_u64(what, s, out, err)) < 0)
    return -1;
  if (*out == 0)
    return agt_error_kind(err, AGT_E_INVALID, "%s 0 is not a limit: write 'unlimited' for none",
                          what);
  if (*out == AGT_LIMIT_UNLIMITED)
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is too large: write 'unlimited' for none",
                          what, s);
  return 0;
}

int agt_parse_size(const char *what, const char *s, uint64_t *out, agt_error_t *err)
{
  char *end;
  unsigned long long v;
  int shift = 0;

  if (s == NULL || *s < '0' || *s > '9')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a size", what, s ? s : "");
  errno = 0;
  v = strtoull(s, &end, 10);
  switch (*end) {
  case '\0':
    break;
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  case 't':
  case 'T':
    shift = 40;
    break;
  default:
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s': unknown unit '%s'", what, s, end);
  }
  if (*end && end[1] && !((end[1] == 'i' || end[1] == 'B') && (end[2] == '\0' || end[2] == 'B')))
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s': unknown unit '%s'", what, s, end);
  if (errno || (shift && v > (~0ULL >> shift)))
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is too large", what, s);
  *out = v << shift;
  return 0;
}
