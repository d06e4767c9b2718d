/* Command-line options from one table: the parser and the help text come from the same
 * entries, so they cannot drift.  Help follows one shape: a usage line, one sentence, then
 * the options in alphabetical order with their defaults in parentheses. */
#ifndef AGT_CLI_H
#define AGT_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"

struct agt_opt {
  int key;          /* short option character, or a value > 255 for long-only options */
  const char *name; /* long option name */
  const char *arg;  /* argument name, or NULL for a flag */
  const char *help; /* one line */
};

/* Called once per option; return -1 with *err set to stop. */
typedef int (*agt_opt_fn)(void *ctx, int key, const char *arg, agt_error_t *err);

/* Parse options from argv[1..]; stops at the first non-option or "--".  Returns the index
 * of the first operand, or -1 (with *err naming the bad option).  -h/--help is recognised
 * and returns -2. */
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
