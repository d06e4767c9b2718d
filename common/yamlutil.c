#include "yamlutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "xalloc.h"

int agt_yaml_load_string(agt_yaml_t *y, const char *name, const char *buf, size_t len,
                         agt_error_t *err)
{
  yaml_parser_t parser;
  int ok;

  memset(y, 0, sizeof *y);
  y->file = xstrdup(name);
  if (len > AGT_YAML_MAX_BYTES)
    return agt_error_kind(err, AGT_E_INVALID, "%s: larger than %d bytes", name, AGT_YAML_MAX_BYTES);
  if (!yaml_parser_initialize(&parser))
    return agt_error_kind(err, AGT_E_INTERNAL, "%s: cannot initialise the YAML parser", name);
  yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
  ok = yaml_parser_load(&parser, &y->doc);
  if (!ok) {
    agt_error_kind(err, AGT_E_INVALID, "%s:%zu:%zu: %s%s%s", name, parser.problem_mark.line + 1,
                   parser.problem_mark.column + 1, parser.problem ? parser.problem : "bad YAML",
                   parser.context ? " " : "", parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    return -1;
  }
  yaml_parser_delete(&parser);
  y->loaded = 1;
  return 0;
}

int agt_yaml_read_file(const char *path, const char *what, char **out, size_t *out_len,
                       agt_error_t *err)
{
  cleanup_file FILE *f = fopen(path, "r");
  cleanup_free char *buf = NULL;
  size_t len = 0, cap = 0, n;

  if (f == NULL)
    return agt_error_make(err, errno, "open %s%s'%s'", what ? what : "", what ? " " : "", path);
  do {
    if (len + 65536 > cap) {
      cap = cap ? cap * 2 : 65536;
      buf = xrealloc(buf, cap);
    }
    n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (len > AGT_YAML_MAX_BYTES)
      return agt_error_kind(err, AGT_E_INVALID, "%s: larger than %d bytes", path,
                            AGT_YAML_MAX_BYTES);
  } while (n > 0);
  if (ferror(f))
    return agt_error_make(err, EIO, "read '%s'", path);
  *out = buf;
  *out_len = len;
  buf = NULL;
  return 0;
}

int agt_yaml_load_file(agt_yaml_t *y, const char *path, agt_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len;

  memset(y, 0, sizeof *y);
  if (agt_yaml_read_file(path, NULL, &buf, &len, err) < 0)
    return -1;
  return agt_yaml_load_string(y, path, buf, len, err);
}

void agt_yaml_release(agt_yaml_t *y)
{
  if (y->loaded)
    yaml_document_delete(&y->doc);
  free(y->file);
  memset(y, 0, sizeof *y);
}

yaml_node_t *agt_yaml_root(agt_yaml_t *y)
{
  return y->loaded ? yaml_document_get_root_node(&y->doc) : NULL;
}

yaml_node_t *agt_yaml_node(agt_yaml_t *y, int index)
{
  return yaml_document_get_node(&y->doc, index);
}

const char *agt_yaml_scalar(yaml_node_t *n)
{
  if (n == NULL || n->type != YAML_SCALAR_NODE)
    return NULL;
  return (const char *)n->data.scalar.value;
}

yaml_node_t *agt_yaml_get(agt_yaml_t *y, yaml_node_t *map, const char *key)
{
  yaml_node_pair_t *p;

  if (map == NULL || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *k = agt_yaml_scalar(agt_yaml_node(y, p->key));
    if (k && strcmp(k, key) == 0)
      return agt_yaml_node(y, p->value);
  }
  return NULL;
}

int agt_yaml_error(agt_yaml_t *y, yaml_node_t *n, agt_error_t *err, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *msg = NULL;

  va_start(ap, fmt);
  msg = xvasprintf(fmt, ap);
  va_end(ap);
  if (n)
    return agt_error_kind(err, AGT_E_INVALID, "%s:%zu:%zu: %s", y->file, n->start_mark.line + 1,
                          n->start_mark.column + 1, msg);
  return agt_error_kind(err, AGT_E_INVALID, "%s: %s", y->file, msg);
}

/* Whether a scalar's text is all there as a C string: a NUL in it would cut it short. */
static int whole(yaml_node_t *n)
{
  return strlen((const char *)n->data.scalar.value) == n->data.scalar.length;
}

int agt_yaml_get_str(agt_yaml_t *y, yaml_node_t *map, const char *key, const char **out,
                     agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(y, map, key);

  if (n == NULL)
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return agt_yaml_error(y, n, err, "'%s' must be a string", key);
  if (!whole(n))
    return agt_yaml_error(y, n, err, "'%s' contains a NUL character", key);
  *out = agt_yaml_scalar(n);
  return 0;
}

int agt_yaml_get_u64(agt_yaml_t *y, yaml_node_t *map, const char *key, unsigned long long *out,
                     agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(y, map, key);
  const char *s;
  char *end;
  unsigned long long v;

  if (n == NULL)
    return 0;
  s = agt_yaml_scalar(n);
  if (s == NULL || *s < '0' || *s > '9')
    return agt_yaml_error(y, n, err, "'%s' must be a non-negative integer", key);
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || *end || !whole(n))
    return agt_yaml_error(y, n, err, "'%s' must be a non-negative integer, not '%s'", key, s);
  *out = v;
  return 0;
}

int agt_yaml_get_bool(agt_yaml_t *y, yaml_node_t *map, const char *key, int *out, agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(y, map, key);
  const char *s;

  if (n == NULL)
    return 0;
  s = agt_yaml_scalar(n);
  if (s && !whole(n))
    s = NULL;
  if (s && (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0))
    *out = 1;
  else if (s && (strcmp(s, "false") == 0 || strcmp(s, "no") == 0))
    *out = 0;
  else
    return agt_yaml_error(y, n, err, "'%s' must be true or false", key);
  return 0;
}

int agt_yaml_check_keys(agt_yaml_t *y, yaml_node_t *map, const char *const *known, agt_error_t *err)
{
  yaml_node_pair_t *p;

  if (map == NULL || map->type != YAML_MAPPING_NODE)
    return agt_yaml_error(y, map, err, "expected a mapping");
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(y, p->key);
    const char *k = agt_yaml_scalar(kn);
    const char *const *q;

    if (k == NULL)
      return agt_yaml_error(y, kn, err, "keys must be strings");
    if (!whole(kn))
      return agt_yaml_error(y, kn, err, "key '%s' contains a NUL character", k);
    for (q = known; *q; q++)
      if (strcmp(*q, k) == 0)
        break;
    if (*q == NULL)
      return agt_yaml_error(y, kn, err, "unknown key '%s'", k);
  }
  return 0;
}

int agt_yaml_refuse_nul(agt_yaml_t *y, agt_error_t *err)
{
  yaml_node_t *n;

  if (!y->loaded)
    return 0;
  for (n = y->doc.nodes.start; n < y->doc.nodes.top; n++)
    if (n->type == YAML_SCALAR_NODE && !whole(n))
      return agt_yaml_error(y, n, err, "a value contains a NUL character");
  return 0;
}
