#include "xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void oom(void)
{
  static const char msg[] = "agt: out of memory\n";
  ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)r;
  _exit(70);
}

void *xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (p == NULL)
    oom();
  return p;
}

void *xzalloc(size_t n)
{
  void *p = calloc(1, n ? n : 1);
  if (p == NULL)
    oom();
  return p;
}

void *xrealloc(void *p, size_t n)
{
  void *q = realloc(p, n ? n : 1);
  if (q == NULL)
    oom();
  return q;
}

char *xstrdup(const char *s)
{
  char *p = strdup(s);
  if (p == NULL)
    oom();
  return p;
}

char *xstrndup(const char *s, size_t n)
{
  char *p = strndup(s, n);
  if (p == NULL)
    oom();
  return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
  char *p = NULL;
  if (vasprintf(&p, fmt, ap) < 0)
    oom();
  return p;
}

char *xasprintf(const char *fmt, ...)
{
  va_list ap;
  char *p;

  va_start(ap, fmt);
  p = xvasprintf(fmt, ap);
  va_end(ap);
  return p;
}
