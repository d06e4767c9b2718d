#include "names.h"

#include <string.h>

static int name_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int agt_name_check(const char *what, const char *name, agt_error_t *err)
{
  size_t n;

  if (name == NULL || *name == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "%s is empty", what);
  n = strlen(name);
  if (n > AGT_NAME_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "%s is longer than %d characters", what,
                          AGT_NAME_MAX);
  if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%.63s' must start with a lowercase letter or a digit", what, name);
  for (size_t i = 0; i < n; i++)
    if (!name_char(name[i]))
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s '%.63s' has a character outside [a-z0-9._-] at position %zu", what,
                            name, i + 1);
  return 0;
}

int agt_abspath_check(const char *what, const char *path, agt_error_t *err)
{
  const char *p, *seg;
  size_t n;

  if (path == NULL || *path == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "%s is empty", what);
  n = strlen(path);
  if (n > 4095)
    return agt_error_kind(err, AGT_E_INVALID, "%s is too long", what);
  if (path[0] != '/')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not an absolute path", what, path);
  if (n == 1)
    return 0;
  if (path[n - 1] == '/')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' ends with '/'", what, path);
  for (p = path + 1;; p++) {
    seg = p;
    while (*p && *p != '/')
      p++;
    n = (size_t)(p - seg);
    if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
      return agt_error_kind(err, AGT_E_INVALID, "%s '%s' has an empty, '.' or '..' component", what,
                            path);
    if (*p == '\0')
      return 0;
  }
}

const char *agt_env_name_problem(const char *name, size_t len)
{
  if (len == 0)
    return "it is empty";
  if (len > AGT_ENV_NAME_MAX)
    return "it is longer than 256 bytes";
  if (name[0] >= '0' && name[0] <= '9')
    return "it starts with a digit";
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return "it has a character other than A-Z, a-z, 0-9 and _";
  }
  return NULL;
}

int agt_env_name_check(const char *what, const char *name, agt_error_t *err)
{
  const char *why = agt_env_name_problem(name, strlen(name));

  if (why)
    return agt_error_kind(err, AGT_E_INVALID, "%s '%.64s' is not a variable name: %s", what, name,
                          why);
  return 0;
}
