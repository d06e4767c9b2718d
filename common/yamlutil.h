/* A loaded YAML document with positions, so every error names file:line:column. */
#ifndef AGT_YAMLUTIL_H
#define AGT_YAMLUTIL_H

#include <stddef.h>
#include <yaml.h>

#include "error.h"

struct agt_yaml_s {
  yaml_document_t doc;
  char *file; /* name used in messages */
  int loaded;
};
typedef struct agt_yaml_s agt_yaml_t;

#define AGT_YAML_MAX_BYTES (4 * 1024 * 1024)

/* The whole file (at most AGT_YAML_MAX_BYTES) in *out, newly allocated; `what` (or NULL)
 * names it in the error of a file that does not open ("open WHAT 'path'"). */
int agt_yaml_read_file(const char *path, const char *what, char **out, size_t *out_len,
                       agt_error_t *err);
int agt_yaml_load_file(agt_yaml_t *y, const char *path, agt_error_t *err);
int agt_yaml_load_string(agt_yaml_t *y, const char *name, const char *buf, size_t len,
                         agt_error_t *err);
void agt_yaml_release(agt_yaml_t *y);

yaml_node_t *agt_yaml_root(agt_yaml_t *y);
yaml_node_t *agt_yaml_node(agt_yaml_t *y, int index);
/* The value under `key` in a mapping node, or NULL. */
yaml_node_t *agt_yaml_get(agt_yaml_t *y, yaml_node_t *map, const char *key);
/* A scalar's text, or NULL when n is not a scalar. */
const char *agt_yaml_scalar(yaml_node_t *n);
/* "file:line:col: message" as an AGT_E_INVALID error.  Returns -1. */
int agt_yaml_error(agt_yaml_t *y, yaml_node_t *n, agt_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Typed getters: absent keys leave *out untouched and return 0; a value of the wrong shape
 * is an error naming the key and its position. */
int agt_yaml_get_str(agt_yaml_t *y, yaml_node_t *map, const char *key, const char **out,
                     agt_error_t *err);
int agt_yaml_get_u64(agt_yaml_t *y, yaml_node_t *map, const char *key, unsigned long long *out,
                     agt_error_t *err);
int agt_yaml_get_bool(agt_yaml_t *y, yaml_node_t *map, const char *key, int *out, agt_error_t *err);
/* Fail, naming file:line:column, if any scalar of the document (key or value) contains a
 * NUL character: readers that use scalars as C strings would see them cut short.  For
 * documents with no binary content (configs, templates). */
int agt_yaml_refuse_nul(agt_yaml_t *y, agt_error_t *err);
/* Fail on any key of `map` that is not in the NULL-terminated `known` list. */
int agt_yaml_check_keys(agt_yaml_t *y, yaml_node_t *map, const char *const *known,
                        agt_error_t *err);

#endif
