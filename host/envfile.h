/* Env files for `agt jail run --env-file FILE`: one NAME=VALUE a line, so secrets reach a
 * jail without being on agt's command line.
 *
 *   # a comment; blank lines are skipped too
 *   OPENAI_API_KEY=sk-...
 *   export GITHUB_TOKEN=ghp_...      (a leading "export " is allowed)
 *   GREETING="hello world"           (one pair of quotes around the whole value is removed)
 *
 * The value is everything after the first '=', to the end of the line (a CR before the LF
 * goes too), taken literally: no $ expansion, no escapes, no inline comments.  A value
 * wholly inside '...' or "..." loses those quotes; one that opens a quote must close it at
 * the end of the line, without that quote inside.  Leading blanks of a line are skipped.
 * A name is checked as agtd checks it (agt_env_name_problem).  A NUL byte anywhere is an
 * error.  Errors say FILE:LINE and what is wrong, never the value (nor the text of a line
 * whose name is bad: it may be a pasted secret). */
#ifndef AGT_HOST_ENVFILE_H
#define AGT_HOST_ENVFILE_H

#include <stddef.h>

#include "error.h"

/* The largest env file agt reads. */
#define AGT_ENVFILE_MAX (1u << 20)

/* Called once per variable, in file order (a later one with the same name should win);
 * return -1 with *err set to stop. */
typedef int (*agt_envfile_fn)(void *ctx, const char *name, const char *value, agt_error_t *err);

/* Parse the `len` bytes at text, read from `file` (which errors name). */
int agt_envfile_parse(const char *file, const char *text, size_t len, agt_envfile_fn fn, void *ctx,
                      agt_error_t *err);
/* Read `file` (at most AGT_ENVFILE_MAX bytes; a pipe such as /dev/stdin works) and parse it. */
int agt_envfile_read(const char *file, agt_envfile_fn fn, void *ctx, agt_error_t *err);

#endif
