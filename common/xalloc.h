/* Allocation that never fails visibly: on exhaustion the process says so and exits.
 * agtd runs as a supervisor with a bounded footprint, so running out of memory there is a
 * fatal condition, not a per-request error. */
#ifndef AGT_XALLOC_H
#define AGT_XALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *xmalloc(size_t n);
void *xzalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
