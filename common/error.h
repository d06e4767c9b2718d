/* One error type carried up from where a failure happens to where it is reported.
 *
 * Every fallible function takes `agt_error_t *err`, returns a negative value (or NULL) on
 * failure and fills *err once, at the source.  Callers add context on the way up with
 * agt_error_wrap(); only main() (CLI) or the request boundary (agtd) prints it.
 *
 *   if (mount(...) < 0)
 *     return agt_error_make(err, errno, "mount overlay on '%s'", dir);
 *   ...
 *   if (jail_start(j, &err) < 0) {
 *     agt_error_wrap(&err, "start jail '%s'", j->name);
 *     reply_error(req, err);
 *     agt_error_release(&err);
 *   }
 */
#ifndef AGT_ERROR_H
#define AGT_ERROR_H

#include <stdarg.h>

/* Machine-readable error kinds; they travel on the wire as their names (see
 * docs/PROTOCOL.md). */
enum agt_errkind {
  AGT_E_INTERNAL = 0, /* a failure of agt itself or of the system */
  AGT_E_INVALID,      /* bad input: a request, config, manifest or name */
  AGT_E_NOTFOUND,     /* the named thing does not exist */
  AGT_E_EXISTS,       /* the named thing exists already */
  AGT_E_BUSY,         /* in use (a rootfs with jails, a running jail) */
  AGT_E_STATE,        /* not possible in the current state */
  AGT_E_PROTO,        /* bad frame or protocol misuse */
  AGT_E_LIMIT,        /* a limit was reached */
};

struct agt_error_s {
  int status;            /* errno, or 0 */
  enum agt_errkind kind; /* what sort of failure */
  char *msg;             /* what failed, with context; ": strerror" appended when status != 0 */
};
typedef struct agt_error_s *agt_error_t;

/* Fill *err (which must be NULL) and return -1.  A status (errno) of 0 adds nothing. */
int agt_error_make(agt_error_t *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, with an explicit kind. */
int agt_error_kind(agt_error_t *err, enum agt_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int agt_error_vmake(agt_error_t *err, enum agt_errkind kind, int status, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));
/* Prefix the message with context: "context: message".  Returns -1. */
int agt_error_wrap(agt_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agt_error_release(agt_error_t *err);
const char *agt_errkind_name(enum agt_errkind kind);
enum agt_errkind agt_errkind_from_name(const char *name);

#endif
