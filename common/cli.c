#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "xalloc.h"

size_t agt_edit_distance(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  cleanup_free size_t *row = xzalloc((lb + 1) * sizeof *row);

  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

const char *agt_closest(const char *word, const char *const *names, size_t n)
{
  const char *best = NULL;
  size_t bestd = 0, len = strlen(word);

  for (size_t i = 0; i < n; i++) {
    size_t d = agt_edit_distance(word, names[i]);
    if (best == NULL || d < bestd) {
      best = names[i];
      bestd = d;
    }
  }
  /* close enough to be a typo: at most 2 edits, and at most half the word */
  if (best && bestd <= 2 && bestd * 2 <= len)
    return best;
  return NULL;
}

/* "unknown option '--detatch'": with the table's nearest name when it looks like a typo. */
static int unknown_long(const char *arg, const struct agt_opt *opts, agt_error_t *err)
{
  cleanup_free char *word = xstrdup(arg + (strncmp(arg, "--", 2) == 0 ? 2 : 0));
  cleanup_free const char **names = NULL;
  const char *near;
  size_t n = 0;
  char *eq = strchr(word, '=');

  if (eq)
    *eq = '\0';
  while (opts[n].name)
    n++;
  names = xzalloc((n + 1) * sizeof *names);
  for (size_t i = 0; i < n; i++)
    names[i] = opts[i].name;
  names[n] = "help";
  near = agt_closest(word, names, n + 1);
  if (near)
    return agt_error_kind(err, AGT_E_INVALID, "unknown option '%s' (did you mean --%s?)", arg,
                          near);
  return agt_error_kind(err, AGT_E_INVALID, "unknown option '%s' (--help lists them)", arg);
}

/* Does this option of the table take an argument?  -1: not an option of it. */
static int takes_arg(const struct agt_opt *opts, const char *a)
{
  if (a[1] == '-') {
    size_t len = strcspn(a + 2, "=");
    for (size_t i = 0; opts[i].name; i++)
      if (strlen(opts[i].name) == len && strncmp(opts[i].name, a + 2, len) == 0)
        return opts[i].arg && a[2 + len] != '=';
    return -1;
  }
  for (size_t i = 0; opts[i].name; i++)
    if (opts[i].key == (unsigned char)a[1])
      return opts[i].arg && a[2] == '\0';
  return -1;
}

void agt_opts_permute(int argc, char **argv, const struct agt_opt *opts)
{
  cleanup_free char **ops = xzalloc((size_t)argc * sizeof *ops);
  size_t nops = 0;
  int w = 1;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) { /* the rest are operands, after the options */
      for (; i < argc; i++)
        ops[nops++] = argv[i];
      break;
    }
    if (a[0] != '-' || a[1] == '\0') {
      ops[nops++] = argv[i];
      continue;
    }
    argv[w++] = argv[i];
    if (takes_arg(opts, a) == 1 && i + 1 < argc)
      argv[w++] = argv[++i];
  }
  for (size_t k = 0; k < nops; k++)
    argv[w++] = ops[k];
}

/* One option's argument into the field its entry points at, or to the callback. */
static int take(const struct agt_opt *o, const char *arg, agt_opt_fn fn, void *ctx,
                agt_error_t *err)
{
  void *field = (char *)ctx + o->off;

  switch (o->kind) {
  case AGT_OPT_SET:
    *(int *)field = o->val;
    return 0;
  case AGT_OPT_STR:
    *(const char **)field = arg;
    return 0;
  case AGT_OPT_U64: {
    cleanup_free char *what = xasprintf("--%s", o->name);
    return agt_parse_u64(what, arg, (uint64_t *)field, err);
  }
  case AGT_OPT_FN:
    return o->fn(o, field, arg, err);
  case AGT_OPT_CALL:
  default:
    if (fn == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "unexpected option '--%s'", o->name);
    return fn(ctx, o->key, arg, err);
  }
}

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
    lo[i].val = 256 + (int)i; /* the entry's index: long-only keys need not be unique */
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
    const struct agt_opt *o = NULL;
    if (c == 'h')
      return -2;
    if (c == '?') {
      if (optopt > 0 && optopt < 256)
        return agt_error_kind(err, AGT_E_INVALID, "unknown option '-%c'%s", optopt,
                              optopt == 'h' ? "" : " (--help lists them)");
      return unknown_long(argv[optind - 1], opts, err);
    }
    if (c == ':')
      return agt_error_kind(err, AGT_E_INVALID, "option '%s' needs an argument", argv[optind - 1]);
    if (c >= 256 && (size_t)(c - 256) < n)
      o = &opts[c - 256];
    for (size_t i = 0; o == NULL && i < n; i++)
      if (opts[i].key == c)
        o = &opts[i];
    if (o == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
    if (take(o, optarg, fn, ctx, err) < 0)
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
