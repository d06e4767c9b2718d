/* Command-line options from one table: the parser and the help text come from the same
 * entries, so they cannot drift.  Help follows one shape: a usage line, one sentence, then
 * the options in alphabetical order with their defaults in parentheses. */
#ifndef AGT_CLI_H
#define AGT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

/* What an option does with its argument.  As git's parse-options: an entry points at the
 * field it fills (an offset into the ctx the parser is given), so a command declares its
 * options and needs no callback of its own. */
enum agt_opt_kind {
  AGT_OPT_CALL = 0, /* the parser's callback fn(ctx, key, arg) */
  AGT_OPT_SET,      /* int field = val: a flag (val 0 clears it: --no-tty) */
  AGT_OPT_STR,      /* const char * field = the argument (argv's own string) */
  AGT_OPT_U64,      /* uint64_t field = the argument, a number (agt_parse_u64) */
  AGT_OPT_FN,       /* the entry's own fn(o, field, arg): a unit, a list, a check */
};

struct agt_opt;
/* An entry's own parser: field is the ctx's member the entry points at. */
typedef int (*agt_opt_field_fn)(const struct agt_opt *o, void *field, const char *arg,
                                agt_error_t *err);

struct agt_opt {
  int key;          /* short option character, or a value > 255 for long-only options */
  const char *name; /* long option name */
  const char *arg;  /* argument name, or NULL for a flag */
  const char *help; /* one line */
  enum agt_opt_kind kind;
  size_t off;          /* the field's offset in ctx (kinds other than AGT_OPT_CALL) */
  int val;             /* AGT_OPT_SET: the value set; AGT_OPT_FN: the entry's own */
  agt_opt_field_fn fn; /* AGT_OPT_FN */
};

/* An entry for the parser's callback (AGT_OPT_CALL). */
#define AGT_OPT_KEY(key, name, arg, help)                                                          \
  {                                                                                                \
    (key), (name), (arg), (help), AGT_OPT_CALL, 0, 0, NULL                                         \
  }
/* Entries that fill a member f of struct T (the ctx given to the parser). */
#define AGT_OPT_BOOL(key, name, T, f, help)                                                        \
  {                                                                                                \
    (key), (name), NULL, (help), AGT_OPT_SET, offsetof(T, f), 1, NULL                              \
  }
#define AGT_OPT_SETINT(key, name, T, f, v, help)                                                   \
  {                                                                                                \
    (key), (name), NULL, (help), AGT_OPT_SET, offsetof(T, f), (v), NULL                            \
  }
#define AGT_OPT_STRING(key, name, arg, T, f, help)                                                 \
  {                                                                                                \
    (key), (name), (arg), (help), AGT_OPT_STR, offsetof(T, f), 0, NULL                             \
  }
#define AGT_OPT_UINT(key, name, arg, T, f, help)                                                   \
  {                                                                                                \
    (key), (name), (arg), (help), AGT_OPT_U64, offsetof(T, f), 0, NULL                             \
  }
#define AGT_OPT_CALLBACK(key, name, arg, T, f, fn, v, help)                                        \
  {                                                                                                \
    (key), (name), (arg), (help), AGT_OPT_FN, offsetof(T, f), (v), (fn)                            \
  }
#define AGT_OPT_END                                                                                \
  {                                                                                                \
    0, NULL, NULL, NULL, AGT_OPT_CALL, 0, 0, NULL                                                  \
  }

/* Called once per AGT_OPT_CALL option; return -1 with *err set to stop.  NULL: the table
 * has none. */
typedef int (*agt_opt_fn)(void *ctx, int key, const char *arg, agt_error_t *err);

/* Parse options from argv[1..]; stops at the first non-option or "--".  Returns the index
 * of the first operand, or -1 (with *err naming the bad option).  -h/--help is recognised
 * and returns -2.  Entries of the other kinds than AGT_OPT_CALL fill their field of ctx. */
int agt_opts_parse(int argc, char **argv, const struct agt_opt *opts, agt_opt_fn fn, void *ctx,
                   agt_error_t *err);
void agt_opts_usage(FILE *f, const char *usage, const char *summary, const struct agt_opt *opts);
/* Move the options of argv[1..] (with their arguments, by the table) before its operands,
 * keeping the order of each, so that `logs NAME -f` parses as `logs -f NAME`.  An argument
 * after "--" stays an operand. */
void agt_opts_permute(int argc, char **argv, const struct agt_opt *opts);
/* Levenshtein distance, and the name of names nearest to word when it is near enough to be
 * a typo of it (NULL otherwise): for "did you mean". */
size_t agt_edit_distance(const char *a, const char *b);
const char *agt_closest(const char *word, const char *const *names, size_t n);

/* "512M", "2G", "4096": bytes.  Suffixes K, M, G, T are powers of 1024. */
int agt_parse_size(const char *what, const char *s, uint64_t *out, agt_error_t *err);
int agt_parse_u64(const char *what, const char *s, uint64_t *out, agt_error_t *err);

/* A jail limit that may be lifted (memory, pids, cpu): what agt_parse_size (`size`) or
 * agt_parse_u64 reads, or "unlimited" (*out = AGT_LIMIT_UNLIMITED).  0 is refused with a
 * message saying to write "unlimited": it is not a limit, and once meant none. */
#define AGT_LIMIT_UNLIMITED UINT64_MAX
int agt_parse_limit(const char *what, const char *s, int size, uint64_t *out, agt_error_t *err);

#endif
