/* Small helpers shared by agt's files: growing string vectors, files, directories. */
#ifndef AGT_HOST_UTIL_H
#define AGT_HOST_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* A NULL-terminated vector of owned strings, grown one at a time. */
struct agt_strv {
  char **v;
  size_t n, cap;
};

void agt_strv_push(struct agt_strv *s, const char *str);
void agt_strv_pushf(struct agt_strv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The vector (always NULL-terminated, never NULL); *s is emptied. */
char **agt_strv_steal(struct agt_strv *s);
void agt_strv_clear(struct agt_strv *s);
size_t agt_strv_len(char *const *v);

/* mkdir -p. */
int agt_mkdir_p(const char *path, mode_t mode, agt_error_t *err);
/* A whole file, NUL-terminated; larger than max is an error. */
char *agt_read_file(const char *path, size_t max, size_t *len, agt_error_t *err);
/* Write through a temporary file and rename, so readers never see half a file. */
int agt_write_file(const char *path, const char *data, size_t len, mode_t mode, agt_error_t *err);
/* $XDG_CACHE_HOME/agt, else ~/.cache/agt on Linux and ~/Library/Caches/agt on macOS (not
 * created; platform.h). */
char *agt_cache_dir(void);
/* "4.0 GiB" for a byte count. */
const char *agt_human_bytes(unsigned long long n, char *buf, size_t len);
/* Whether path is dir itself or below it (both absolute, no trailing slash). */
int agt_path_under(const char *path, const char *dir);
/* The name agtd keeps this user's agent homes under: the login name, lower case, with
 * anything but [a-z0-9._-] turned into '-' (a name as jail names are); newly allocated. */
char *agt_home_user(void);

#endif
