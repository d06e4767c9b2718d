/* Running a program: an argv (never a shell), an environment with edits, a working
 * directory, and either captured output or the caller's terminal.  Every limactl call goes
 * through here, so tests can point agt at a stand-in limactl by PATH alone.
 *
 *   struct agt_subprocess p = {.argv = argv, .capture = 1};
 *   if (agt_subprocess_run(&p, &err) < 0)        // could not start: err says why
 *     return -1;
 *   if (p.exit_code != 0) ...                     // it ran and failed: p.err_buf says why
 *   agt_subprocess_release(&p);
 */
#ifndef AGT_SUBPROCESS_H
#define AGT_SUBPROCESS_H

#include <stddef.h>

#include "error.h"

/* Called once per complete line the child writes on stderr (capture mode only), without
 * the newline. */
typedef void (*agt_line_cb)(void *ctx, const char *line);

struct agt_subprocess {
  /* in */
  char *const *argv;       /* argv[0] is searched in PATH when it holds no '/' */
  char *const *env_set;    /* "KEY=VALUE" entries added to (or replacing) the environment */
  const char *cwd;         /* working directory of the child, or NULL */
  int capture;             /* 1: stdin from /dev/null, stdout and stderr collected;
                              0: the child shares agt's stdin, stdout and stderr */
  agt_line_cb on_err_line; /* optional, capture mode */
  void *cb_ctx;
  /* out */
  char *out_buf; /* stdout, NUL-terminated (capture mode) */
  size_t out_len;
  char *err_buf; /* stderr, NUL-terminated (capture mode) */
  size_t err_len;
  int exit_code; /* the exit status, or 128 + signal number when killed by a signal */
};

/* Run the program to its end.  Returns 0 when it ran, whatever its exit status (see
 * exit_code), and -1 with *err set when it could not be started: not found, not
 * executable, or a failure of fork/pipe.  Output beyond 64 MiB per stream is dropped. */
int agt_subprocess_run(struct agt_subprocess *p, agt_error_t *err);
void agt_subprocess_release(struct agt_subprocess *p);

/* The full path of an executable named `prog` in $PATH (or prog itself when it holds a
 * '/' and is executable), newly allocated; NULL when there is none. */
char *agt_find_program(const char *prog);
/* environ with the NAME=VALUE edits in set applied (set may be NULL): a new array for
 * execve; the strings are borrowed. */
char **agt_env_with(char *const *set);

#endif
