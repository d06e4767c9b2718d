/* Fuzz target: the YAML loader and its typed getters (common/yamlutil.c), as the host config
 * loader (host/config.c) uses them.
 *
 * The input is loaded with agt_yaml_load_string; every node of the document is then visited
 * once (aliases can share nodes and even make cycles), and on every mapping each key is looked
 * up with agt_yaml_get and the typed getters, and the keys are checked with
 * agt_yaml_check_keys.  The results are checked against the node itself; a broken contract
 * aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yamlutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#define MAX_DEPTH 256

struct walk {
  agt_yaml_t *y;
  unsigned char *seen; /* by node index - 1 */
  size_t nnodes;
};

static void check_result(int r, agt_error_t *err)
{
  CHECK(r == 0 || r == -1);
  CHECK((r < 0) == (*err != NULL));
  if (*err) {
    CHECK((*err)->kind == AGT_E_INVALID && (*err)->msg != NULL);
    CHECK(strncmp((*err)->msg, "fuzz.yaml", 9) == 0);
  }
  agt_error_release(err);
}

/* A scalar whose text holds a NUL: C code would see only the part before it. */
static int has_nul(yaml_node_t *n)
{
  return n && n->type == YAML_SCALAR_NODE &&
         strlen((const char *)n->data.scalar.value) != n->data.scalar.length;
}

static int is_number(const char *s)
{
  if (*s < '0' || *s > '9')
    return 0;
  return strspn(s, "0123456789") == strlen(s);
}

static void check_mapping(struct walk *w, yaml_node_t *map)
{
  agt_yaml_t *y = w->y;
  agt_error_t err = NULL;
  size_t npairs = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
  const char **known = calloc(npairs + 1, sizeof *known);
  int all_scalar = 1, any_nul = 0, r;

  if (known == NULL)
    abort();
  for (size_t i = 0; i < npairs; i++) {
    yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
    yaml_node_t *kn = agt_yaml_node(y, p->key), *vn = agt_yaml_node(y, p->value), *first = NULL;
    const char *key = agt_yaml_scalar(kn), *vs = agt_yaml_scalar(vn), *s = NULL;
    unsigned long long u = 0;
    int b = 2;

    CHECK(kn != NULL && vn != NULL);
    if (key == NULL) {
      all_scalar = 0;
      continue;
    }
    known[i] = key;
    any_nul |= has_nul(kn);
    /* agt_yaml_get answers the first pair with this key. */
    for (size_t j = 0; j <= i && first == NULL; j++) {
      const char *k2 = agt_yaml_scalar(agt_yaml_node(y, map->data.mapping.pairs.start[j].key));
      if (k2 && strcmp(k2, key) == 0)
        first = agt_yaml_node(y, map->data.mapping.pairs.start[j].value);
    }
    CHECK(agt_yaml_get(y, map, key) == first);
    vs = agt_yaml_scalar(first);

    /* A value is only taken whole: a NUL in it is an error, not a place to cut. */
    r = agt_yaml_get_str(y, map, key, &s, &err);
    CHECK((r == 0) == (vs != NULL && !has_nul(first)));
    CHECK(r < 0 || s == vs);
    check_result(r, &err);
    r = agt_yaml_get_u64(y, map, key, &u, &err);
    CHECK(r < 0 || (vs != NULL && is_number(vs) && !has_nul(first)));
    check_result(r, &err);
    r = agt_yaml_get_bool(y, map, key, &b, &err);
    CHECK(r < 0 || b == 0 || b == 1);
    CHECK(r < 0 || !has_nul(first));
    check_result(r, &err);
    agt_yaml_error(y, vn, &err, "value of '%s'", key);
    check_result(-1, &err);
  }
  /* Every key known: fine unless a key is not a string (or holds a NUL).  Nothing known: fine
   * only when empty. */
  if (all_scalar) {
    r = agt_yaml_check_keys(y, map, known, &err);
    CHECK((r == 0) == !any_nul);
    check_result(r, &err);
  }
  known[0] = NULL;
  r = agt_yaml_check_keys(y, map, known, &err);
  CHECK((r == 0) == (npairs == 0));
  check_result(r, &err);
  free(known);
}

static void visit(struct walk *w, yaml_node_t *n, int depth)
{
  size_t idx;

  CHECK(n != NULL);
  idx = (size_t)(n - w->y->doc.nodes.start);
  CHECK(idx < w->nnodes);
  if (w->seen[idx] || depth > MAX_DEPTH)
    return;
  w->seen[idx] = 1;
  switch (n->type) {
  case YAML_SCALAR_NODE:
    CHECK(agt_yaml_scalar(n) != NULL);
    CHECK(agt_yaml_scalar(n)[n->data.scalar.length] == '\0');
    break;
  case YAML_SEQUENCE_NODE:
    CHECK(agt_yaml_scalar(n) == NULL);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
      visit(w, agt_yaml_node(w->y, *it), depth + 1);
    break;
  case YAML_MAPPING_NODE:
    CHECK(agt_yaml_scalar(n) == NULL);
    check_mapping(w, n);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      visit(w, agt_yaml_node(w->y, p->key), depth + 1);
      visit(w, agt_yaml_node(w->y, p->value), depth + 1);
    }
    break;
  default:
    CHECK(0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  agt_yaml_t y;
  agt_error_t err = NULL;
  struct walk w;
  yaml_node_t *root;
  int r;

  r = agt_yaml_load_string(&y, "fuzz.yaml", (const char *)data, size, &err);
  check_result(r, &err);
  root = agt_yaml_root(&y);
  if (r < 0) {
    CHECK(root == NULL);
    agt_yaml_release(&y);
    return 0;
  }
  if (root) {
    w.y = &y;
    w.nnodes = (size_t)(y.doc.nodes.top - y.doc.nodes.start);
    w.seen = calloc(w.nnodes, 1);
    if (w.seen == NULL)
      abort();
    CHECK(agt_yaml_node(&y, 0) == NULL && agt_yaml_node(&y, (int)w.nnodes + 1) == NULL);
    CHECK(agt_yaml_node(&y, 1) == root);
    visit(&w, root, 0);
    /* The getters on a node that is not a mapping find nothing. */
    if (root->type != YAML_MAPPING_NODE) {
      const char *s = NULL;
      CHECK(agt_yaml_get(&y, root, "a") == NULL);
      r = agt_yaml_get_str(&y, root, "a", &s, &err);
      CHECK(r == 0 && s == NULL);
      check_result(r, &err);
    }
    free(w.seen);
  }
  agt_yaml_release(&y);
  return 0;
}
