/* Validation of names and paths that arrive from outside (requests, config, manifests). */
#ifndef AGT_NAMES_H
#define AGT_NAMES_H

#include <stddef.h>

#include "error.h"

#define AGT_NAME_MAX 63

/* A name of a jail, rootfs or instance: 1..63 of [a-z0-9._-], starting with a letter or
 * digit, never "." or "..".  `what` names the thing in the error ("jail name"). */
int agt_name_check(const char *what, const char *name, agt_error_t *err);

/* An absolute path with no empty, "." or ".." components and no trailing slash, at most
 * 4095 bytes.  This says nothing about symlinks: those are refused when the path is opened
 * (see guest/base/fsutil.h). */
int agt_abspath_check(const char *what, const char *path, agt_error_t *err);

/* An environment variable's name, as agtd accepts it in a jail's env: 1..256 of
 * [A-Za-z0-9_], not starting with a digit. */
#define AGT_ENV_NAME_MAX 256

/* NULL when the `len` bytes at name are a variable name, else what is wrong with them (a
 * phrase that shows none of them, for callers that must not echo their input). */
const char *agt_env_name_problem(const char *name, size_t len);
/* The same as an error: "`what` 'NAME' is not a variable name: ...". */
int agt_env_name_check(const char *what, const char *name, agt_error_t *err);

#endif
