/* Validation of names and paths that arrive from outside (requests, config, manifests). */
#ifndef AGT_NAMES_H
#define AGT_NAMES_H

#include "error.h"

#define AGT_NAME_MAX 63

/* A name of a jail, rootfs or instance: 1..63 of [a-z0-9._-], starting with a letter or
 * digit, never "." or "..".  `what` names the thing in the error ("jail name"). */
int agt_name_check(const char *what, const char *name, agt_error_t *err);

/* An absolute path with no empty, "." or ".." components and no trailing slash, at most
 * 4095 bytes.  This says nothing about symlinks: those are refused when the path is opened
 * (see guest/fsutil.h). */
int agt_abspath_check(const char *what, const char *path, agt_error_t *err);

#endif
