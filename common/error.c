#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static const char *const kind_names[] = {
    [AGT_E_INTERNAL] = "internal", [AGT_E_INVALID] = "invalid", [AGT_E_NOTFOUND] = "not-found",
    [AGT_E_EXISTS] = "exists",     [AGT_E_BUSY] = "busy",       [AGT_E_STATE] = "state",
    [AGT_E_PROTO] = "protocol",    [AGT_E_LIMIT] = "limit",
};

const char *agt_errkind_name(enum agt_errkind kind)
{
  if ((unsigned)kind >= sizeof kind_names / sizeof kind_names[0])
    return "internal";
  return kind_names[kind];
}

enum agt_errkind agt_errkind_from_name(const char *name)
{
  for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
    if (name && strcmp(name, kind_names[i]) == 0)
      return (enum agt_errkind)i;
  return AGT_E_INTERNAL;
}

static enum agt_errkind kind_of_errno(int status)
{
  switch (status) {
  case ENOENT:
    return AGT_E_NOTFOUND;
  case EEXIST:
    return AGT_E_EXISTS;
  case EBUSY:
    return AGT_E_BUSY;
  case EINVAL:
  case ENAMETOOLONG:
  case ELOOP:
  case ENOTDIR:
    return AGT_E_INVALID;
  default:
    return AGT_E_INTERNAL;
  }
}

int agt_error_vmake(agt_error_t *err, enum agt_errkind kind, int status, const char *fmt,
                    va_list ap)
{
  char *msg = xvasprintf(fmt, ap);

  if (err == NULL) {
    free(msg);
    return -1;
  }
  if (*err != NULL) /* keep the first error: it is the cause */
  {
    free(msg);
    return -1;
  }
  if (status != 0) {
    char *full = xasprintf("%s: %s", msg, strerror(status));
    free(msg);
    msg = full;
  }
  *err = xmalloc(sizeof **err);
  (*err)->status = status;
  (*err)->kind = kind;
  (*err)->msg = msg;
  return -1;
}

int agt_error_make(agt_error_t *err, int status, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  agt_error_vmake(err, kind_of_errno(status), status, fmt, ap);
  va_end(ap);
  return -1;
}

int agt_error_kind(agt_error_t *err, enum agt_errkind kind, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  agt_error_vmake(err, kind, 0, fmt, ap);
  va_end(ap);
  return -1;
}

int agt_error_wrap(agt_error_t *err, const char *fmt, ...)
{
  va_list ap;
  char *ctx;

  if (err == NULL || *err == NULL)
    return -1;
  va_start(ap, fmt);
  ctx = xvasprintf(fmt, ap);
  va_end(ap);
  char *msg = xasprintf("%s: %s", ctx, (*err)->msg);
  free(ctx);
  free((*err)->msg);
  (*err)->msg = msg;
  return -1;
}

void agt_error_release(agt_error_t *err)
{
  if (err == NULL || *err == NULL)
    return;
  free((*err)->msg);
  free(*err);
  *err = NULL;
}
