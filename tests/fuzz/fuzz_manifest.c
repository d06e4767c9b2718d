/* Fuzz target: the rootfs manifest loader (guest/rootfs/manifest.c).
 *
 * The input is loaded with rootfs_manifest_load_string.  A manifest that loads must keep what
 * manifest.h promises (checked names, absolute clean paths, one source kind each, pins that
 * rootfs_source_pin finds); a broken promise aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "names.h"
#include "yamlutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static int path_ok(const char *p)
{
  agt_error_t e = NULL;
  int r = agt_abspath_check("path", p, &e);

  agt_error_release(&e);
  return r == 0 && strcmp(p, "/") != 0;
}

static int mode_ok(int mode, int allow_sticky)
{
  return mode >= 0 && mode <= (allow_sticky ? 01777 : 0777);
}

static void check_source(const struct rootfs_source *s)
{
  switch (s->kind) {
  case ROOTFS_SRC_HOST:
    CHECK(s->paths != NULL && s->paths[0] != NULL);
    for (char **p = s->paths; *p; p++)
      CHECK(path_ok(*p));
    CHECK(s->env == NULL && s->n_pins == 0);
    break;
  case ROOTFS_SRC_ENV:
    CHECK(s->env != NULL && *s->env != '\0');
    CHECK(s->paths == NULL && s->package == NULL && s->n_pins == 0);
    break;
  case ROOTFS_SRC_NPM:
    CHECK(s->npm != NULL && strchr(s->npm + 1, '@') != NULL && s->npm[0] != '-');
    CHECK(s->paths == NULL && s->package == NULL && s->env == NULL && s->n_pins == 0);
    break;
  case ROOTFS_SRC_DOWNLOAD:
    CHECK(s->n_pins > 0 && s->max_bytes > 0);
    CHECK(s->paths == NULL && s->package == NULL && s->env == NULL);
    for (size_t i = 0; i < s->n_pins; i++) {
      const struct rootfs_pin *pin = &s->pins[i];
      CHECK(pin->arch != NULL && pin->url != NULL);
      CHECK(strncmp(pin->url, "http://", 7) == 0 || strncmp(pin->url, "https://", 8) == 0);
      CHECK(pin->sha256 == NULL || strlen(pin->sha256) == 64);
      CHECK(pin->sha256 == NULL || strspn(pin->sha256, "0123456789abcdef") == 64);
      CHECK(rootfs_source_pin(s, pin->arch) == pin);
    }
    CHECK(rootfs_source_pin(s, "no-such-arch") == NULL);
    break;
  default:
    CHECK(0);
  }
}

static void check_manifest(const struct rootfs_manifest *m)
{
  agt_error_t e = NULL;

  CHECK(m->file != NULL && strcmp(m->file, "fuzz.yaml") == 0);
  CHECK(m->name != NULL && agt_name_check("name", m->name, &e) == 0);
  CHECK(m->merged_usr == 0 || m->merged_usr == 1);
  for (size_t i = 0; i < m->n_dirs; i++) {
    CHECK(path_ok(m->dirs[i].path) && mode_ok(m->dirs[i].mode, 1));
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(m->dirs[i].path, m->dirs[j].path) != 0);
  }
  for (size_t i = 0; i < m->n_libraries; i++)
    CHECK(m->libraries[i].name != NULL && *m->libraries[i].name != '\0');
  CHECK(m->n_entries > 0 || m->entries != NULL);
  for (size_t i = 0; i < m->n_entries; i++) {
    const struct rootfs_entry *en = &m->entries[i];

    CHECK(path_ok(en->path));
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(en->path, m->entries[j].path) != 0);
    CHECK(en->mode == -1 || mode_ok(en->mode, 0));
    switch (en->kind) {
    case ROOTFS_ENTRY_FILE:
    case ROOTFS_ENTRY_TREE:
      CHECK(en->n_sources > 0);
      for (size_t j = 0; j < en->n_sources; j++) {
        check_source(&en->sources[j]);
        CHECK(en->kind == ROOTFS_ENTRY_FILE || en->sources[j].kind != ROOTFS_SRC_DOWNLOAD);
      }
      CHECK(en->target == NULL && en->content == NULL);
      break;
    case ROOTFS_ENTRY_SYMLINK:
      CHECK(en->target != NULL && *en->target != '\0' && strlen(en->target) < 4096);
      CHECK(en->n_sources == 0 && en->content == NULL && en->mode == -1);
      break;
    case ROOTFS_ENTRY_CONTENT:
      CHECK(en->content != NULL && en->content[en->content_len] == '\0');
      CHECK(en->content_len <= ROOTFS_CONTENT_MAX);
      CHECK(en->n_sources == 0 && en->target == NULL);
      break;
    default:
      CHECK(0);
    }
  }
}

/* A manifest that loads takes every string whole: the only scalars that may hold a NUL are
 * the values of 'content' (file bytes).  Walks the document (nodes may be shared, so each is
 * visited once) and aborts on any other scalar with a NUL in it. */
static void check_no_nul(agt_yaml_t *y, yaml_node_t *n, int is_content, unsigned char *seen)
{
  size_t idx = (size_t)(n - y->doc.nodes.start);

  if (seen[idx] & (is_content ? 2 : 1))
    return;
  seen[idx] |= is_content ? 2 : 1;
  if (n->type == YAML_SCALAR_NODE) {
    if (!is_content && strlen(agt_yaml_scalar(n)) != n->data.scalar.length) {
      fprintf(stderr, "fuzz.yaml:%zu:%zu: a scalar with a NUL was accepted\n",
              n->start_mark.line + 1, n->start_mark.column + 1);
      abort();
    }
  } else if (n->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
      check_no_nul(y, agt_yaml_node(y, *it), 0, seen);
  } else if (n->type == YAML_MAPPING_NODE) {
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      const char *k = agt_yaml_scalar(agt_yaml_node(y, p->key));
      check_no_nul(y, agt_yaml_node(y, p->key), 0, seen);
      check_no_nul(y, agt_yaml_node(y, p->value), k && strcmp(k, "content") == 0, seen);
    }
  }
}

static void check_strings_whole(const uint8_t *data, size_t size)
{
  agt_yaml_t y;
  agt_error_t err = NULL;
  yaml_node_t *root;

  CHECK(agt_yaml_load_string(&y, "fuzz.yaml", (const char *)data, size, &err) == 0);
  root = agt_yaml_root(&y);
  CHECK(root != NULL);
  unsigned char *seen = calloc((size_t)(y.doc.nodes.top - y.doc.nodes.start), 1);
  if (seen == NULL)
    abort();
  check_no_nul(&y, root, 0, seen);
  free(seen);
  agt_yaml_release(&y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  agt_error_t err = NULL;
  struct rootfs_manifest *m;

  m = rootfs_manifest_load_string("fuzz.yaml", (const char *)data, size, &err);
  CHECK((m == NULL) == (err != NULL));
  if (err) {
    CHECK(err->kind == AGT_E_INVALID && err->msg != NULL);
    CHECK(strncmp(err->msg, "fuzz.yaml", 9) == 0);
    agt_error_release(&err);
  }
  if (m) {
    check_manifest(m);
    check_strings_whole(data, size);
  }
  rootfs_manifest_free(m);
  return 0;
}
