/* Filesystem helpers for agtd: path resolution that refuses symlinks, and careful removal. */
#ifndef AGT_FSUTIL_H
#define AGT_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* openat2() with RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: open an absolute path on the
 * guest, refusing if any component is a symlink.  flags as for open(2). */
int agt_open_nofollow(const char *path, int flags, agt_error_t *err);
/* openat2() with RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS: `path` resolved inside `rootfd`, as
 * if rootfd were "/", and refusing symlinks.  For paths in jail-writable trees. */
int agt_open_in_root(int rootfd, const char *path, int flags, agt_error_t *err);

/* mkdir -p with mode; existing directories are fine. */
int agt_mkdir_p(const char *path, mode_t mode, agt_error_t *err);
/* rm -rf that never follows symlinks and never crosses into another mount. */
int agt_rm_rf(const char *path, agt_error_t *err);
/* Write a whole file atomically (temp file + rename) with mode; not fsync'd. */
int agt_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
                          agt_error_t *err);
/* Read a whole small file (at most max bytes) into a NUL-terminated buffer. */
int agt_read_file(const char *path, size_t max, char **out, size_t *outlen, agt_error_t *err);
/* Write a string to an existing file (sysfs/cgroupfs style: open O_WRONLY, one write). */
int agt_write_str(const char *path, const char *s, agt_error_t *err);
/* A program embedded in agtd (start up to end) as a sealed memfd (close-on-exec) of the given
 * mode, to run with execveat; agtd's own pages of it are dropped.  The fd, or -1. */
int agt_memfd_program(const char *name, const char *start, const char *end, mode_t mode,
                      agt_error_t *err);

#endif
