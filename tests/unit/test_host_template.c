/* lima/agt.yaml and what agt renders from it:
 *  - every key is one Lima's reference template documents, with a value of the shape it
 *    documents (the reference: default.yaml of Lima v2.2 and the base templates it names,
 *    in the directory $AGT_LIMA_REFERENCE);
 *  - the config is applied: vmType per host, cpus, memory, disk, image, mounts, params,
 *    provisioning scripts inlined.
 *
 * The reference documents most keys only in comments ("# provision:", "# - mode: system").
 * The schema below is read from both its active lines and its commented examples: a
 * commented line is taken for YAML when it looks like "key:" (a lower-case identifier) or
 * "- item"; prose is skipped.  Commented lines are indented loosely in the reference, so a
 * line counts as the child of the nearest key above it with a smaller column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cleanup.h"
#include "config.h"
#include "template.h"
#include "util.h"
#include "xalloc.h"
#include "yamlutil.h"

enum { SH_MAP = 1, SH_SEQ = 2, SH_SCALAR = 4, SH_ANY = 7 };

struct entry {
  char *path;
  int shape;
};

struct schema {
  struct entry *e;
  size_t n;
};

static void schema_add(struct schema *s, const char *path, int shape)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->e[i].path, path) == 0) {
      s->e[i].shape |= shape;
      return;
    }
  s->e = xrealloc(s->e, (s->n + 1) * sizeof *s->e);
  s->e[s->n].path = xstrdup(path);
  s->e[s->n].shape = shape;
  s->n++;
}

static const struct entry *schema_find(const struct schema *s, const char *path)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->e[i].path, path) == 0)
      return &s->e[i];
  return NULL;
}

static void schema_free(struct schema *s)
{
  for (size_t i = 0; i < s->n; i++)
    free(s->e[i].path);
  free(s->e);
}

/* One structural line of the reference. */
struct rec {
  int comment;     /* from a commented line */
  int run;         /* which run of consecutive comment lines (comments only) */
  int follows_run; /* active lines: the run of comments right above, or 0 */
  int col;         /* the column the YAML content starts at */
  int dash;        /* "- ..." */
  char key[64];    /* "" when the line is a list item without a key */
  char value[256]; /* what follows "key:" (or the item), trimmed, comment cut */
  int line;
};

static int is_key_char(char c, int first)
{
  if (first)
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "key: rest" or "key:"; returns 1 and fills key/value. */
static int parse_key(const char *s, char *key, size_t keylen, char *value, size_t vlen)
{
  size_t n = 0;
  const char *v;

  while (is_key_char(s[n], n == 0))
    n++;
  if (n == 0 || n >= keylen || s[n] != ':' || (s[n + 1] != ' ' && s[n + 1] != '\0'))
    return 0;
  memcpy(key, s, n);
  key[n] = '\0';
  v = s + n + 1;
  while (*v == ' ')
    v++;
  snprintf(value, vlen, "%s", v);
  if (value[0] != '"' && value[0] != '\'') { /* cut "  # comment" */
    char *h = strstr(value, " #");
    if (h)
      *h = '\0';
  }
  for (n = strlen(value); n > 0 && value[n - 1] == ' '; n--)
    value[n - 1] = '\0';
  return 1;
}

static int is_block_scalar(const char *v)
{
  return v[0] == '|' || v[0] == '>';
}

/* Read the reference file into records. */
static size_t read_records(const char *text, struct rec **out)
{
  struct rec *r = NULL;
  size_t n = 0;
  int lineno = 0, run = 0, in_run = 0, block_col = -1;
  const char *p = text;

  while (*p) {
    size_t len = strcspn(p, "\n");
    cleanup_free char *line = xstrndup(p, len);
    const char *s = line, *content;
    int col, comment = 0, follows = 0;
    struct rec x;

    p += len + (p[len] == '\n');
    lineno++;
    while (*s == ' ')
      s++;
    if (*s == '\0') {
      in_run = 0;
      continue;
    }
    if (*s == '#') {
      int h = (int)(s - line), k = 0;
      comment = 1;
      if (!in_run)
        run++;
      in_run = 1;
      s++;
      while (s[k] == ' ')
        k++;
      content = s + k;
      col = h + (k > 0 ? k - 1 : 0);
      if (*content == '#' || *content == '\0')
        continue; /* a comment inside the example, or an empty line of one */
    } else {
      follows = in_run ? run : 0;
      in_run = 0;
      content = s;
      col = (int)(s - line);
    }
    if (block_col >= 0) {
      if (col > block_col)
        continue; /* the text of a block scalar */
      block_col = -1;
    }
    memset(&x, 0, sizeof x);
    x.comment = comment;
    x.run = comment ? run : 0;
    x.follows_run = follows;
    x.line = lineno;
    x.col = col;
    if (content[0] == '-' && (content[1] == ' ' || content[1] == '\0')) {
      const char *item = content + 1;
      int off = 1;
      while (*item == ' ') {
        item++;
        off++;
      }
      x.dash = 1;
      if (!parse_key(item, x.key, sizeof x.key, x.value, sizeof x.value)) {
        /* a scalar item: in a comment only a short one counts ("- data", not prose) */
        if (comment && (strchr(item, ' ') || strchr(item, '`')))
          continue;
        snprintf(x.value, sizeof x.value, "%s", item);
      } else {
        x.col = col; /* the dash's column; the key sits at col + off */
        (void)off;
      }
    } else if (!parse_key(content, x.key, sizeof x.key, x.value, sizeof x.value)) {
      continue; /* prose */
    }
    if (x.key[0] && is_block_scalar(x.value))
      block_col = x.dash ? col + 1 : col;
    r = xrealloc(r, (n + 1) * sizeof *r);
    r[n++] = x;
  }
  *out = r;
  return n;
}

/* Commented examples that sit just above the key they belong to ("#   - location: ..."
 * then "images: []") move below it: a run of comments directly followed by an active key,
 * indented deeper than that key, after a key that holds a scalar and so has no children. */
static void move_leading_examples(struct rec *r, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    size_t j = i, k;
    int mincol = 1 << 30, prev = -1;
    if (!r[i].comment || (i > 0 && r[i - 1].comment && r[i - 1].run == r[i].run))
      continue;
    while (j < n && r[j].comment && r[j].run == r[i].run) {
      if (r[j].col < mincol)
        mincol = r[j].col;
      j++;
    }
    if (j >= n || r[j].comment || r[j].follows_run != r[i].run || mincol <= r[j].col)
      continue; /* not directly above an active key, or not deeper than it */
    for (k = i; k-- > 0;)
      if (!r[k].comment) {
        prev = (int)k;
        break;
      }
    if (prev >= 0 && !(r[prev].value[0] == '\0' || strcmp(r[prev].value, "[]") == 0) &&
        mincol > r[prev].col) {
      /* rotate: the active key first, then the run */
      struct rec key = r[j];
      memmove(&r[i + 1], &r[i], (j - i) * sizeof *r);
      r[i] = key;
    }
    i = j;
  }
}

struct frame {
  int col;
  int item;   /* a list item rather than a key */
  char *path; /* owned */
};

static void push(struct frame *st, int *top, int col, int item, char *path)
{
  if (*top >= 64) {
    free(path);
    return;
  }
  st[*top].col = col;
  st[*top].item = item;
  st[*top].path = path;
  (*top)++;
}

static void pop(struct frame *st, int *top)
{
  (*top)--;
  free(st[*top].path);
}

static int value_shape(const struct rec *r, size_t n, size_t i)
{
  const char *v = r[i].value;

  if (strcmp(v, "[]") == 0 || v[0] == '[')
    return SH_SEQ;
  if (strcmp(v, "{}") == 0 || v[0] == '{')
    return SH_MAP;
  if (v[0] != '\0' && strcmp(v, "null") != 0)
    return SH_SCALAR;
  /* empty or null: what follows says */
  if (i + 1 < n) {
    int kcol = r[i].dash ? r[i].col + 2 : r[i].col;
    if (r[i + 1].dash && r[i + 1].col >= r[i].col && !(r[i].dash && r[i + 1].col <= r[i].col))
      return SH_SEQ;
    if (!r[i + 1].dash && r[i + 1].col > kcol)
      return SH_MAP;
  }
  return v[0] == '\0' ? SH_ANY : SH_SCALAR;
}

static void schema_from_text(struct schema *s, const char *text)
{
  struct rec *r = NULL;
  size_t n = read_records(text, &r);
  struct frame st[64];
  int top = 0;

  move_leading_examples(r, n);
  for (size_t i = 0; i < n; i++) {
    const char *parent;
    char *path;

    if (r[i].dash) {
      while (top > 0 &&
             (st[top - 1].col > r[i].col || (st[top - 1].item && st[top - 1].col == r[i].col)))
        pop(st, &top);
      parent = top ? st[top - 1].path : "";
      if (*parent == '\0')
        continue; /* a top-level list: not in a template */
      schema_add(s, parent, SH_SEQ);
      path = xasprintf("%s[]", parent);
      schema_add(s, path, r[i].key[0] ? SH_MAP : SH_SCALAR);
      {
        char *kpath = r[i].key[0] ? xasprintf("%s.%s", path, r[i].key) : NULL;
        push(st, &top, r[i].col, 1, path);
        if (kpath == NULL)
          continue;
        schema_add(s, kpath, value_shape(r, n, i));
        push(st, &top, r[i].col + 2, 0, kpath);
      }
      continue;
    }
    while (top > 0 && st[top - 1].col >= r[i].col)
      pop(st, &top);
    parent = top ? st[top - 1].path : "";
    path = *parent ? xasprintf("%s.%s", parent, r[i].key) : xstrdup(r[i].key);
    schema_add(s, path, value_shape(r, n, i));
    push(st, &top, r[i].col, 0, path);
  }
  while (top > 0)
    pop(st, &top);
  free(r);
}

/* Whether the reference was there: it lives outside the repository (meson points
 * AGT_LIMA_REFERENCE at ../shared/reference/lima-templates), and a clone without it skips
 * the key-by-key checks; `limactl validate` (tests/lima/validate.sh) still reads every
 * rendered template. */
static int have_ref;

/* The reference: default.yaml and the base templates it names (base: template:_images/...,
 * template:_default/mounts), whose keys are part of what default.yaml holds.  0 when
 * loaded, 1 when the directory is absent, -1 when it is there but incomplete. */
static int load_reference(struct schema *s)
{
  static const char *const files[] = {"default.yaml", "_images_ubuntu-24.04.yaml",
                                      "_images_ubuntu-26.04.yaml", "_default_mounts.yaml"};
  const char *dir = getenv("AGT_LIMA_REFERENCE");
  struct stat st;

  if (dir == NULL || *dir == '\0' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    printf("# SKIP test_reference_schema, test_template_file_matches_lima and the key-by-key "
           "checks: Lima's reference templates are not here (AGT_LIMA_REFERENCE='%s')\n",
           dir ? dir : "");
    return 1;
  }
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    cleanup_free char *path = xasprintf("%s/%s", dir, files[i]);
    agt_error_t err = NULL;
    cleanup_free char *text = agt_read_file(path, 1 << 20, NULL, &err);
    if (text == NULL) {
      print_error("Lima's reference template is missing: %s (%s).  The template test needs "
                  "it; it lives outside the repository, in ../shared/reference.\n",
                  path, err->msg);
      agt_error_release(&err);
      return -1;
    }
    schema_from_text(s, text);
  }
  if (getenv("AGT_DUMP_SCHEMA")) /* to see what the extractor made of the reference */
    for (size_t i = 0; i < s->n; i++)
      fprintf(stderr, "%d %s\n", s->e[i].shape, s->e[i].path);
  return 0;
}

/* Maps whose keys are the user's own: Lima documents them as "Key: value". */
static int free_form(const char *path)
{
  return strcmp(path, "param") == 0 || strcmp(path, "env") == 0 ||
         strcmp(path, "hostResolver.hosts") == 0 || strcmp(path, "vmOpts.qemu.cpuType") == 0;
}

static int node_shape(yaml_node_t *n)
{
  if (n->type == YAML_MAPPING_NODE)
    return SH_MAP;
  if (n->type == YAML_SEQUENCE_NODE)
    return SH_SEQ;
  return SH_SCALAR;
}

static int is_null(yaml_node_t *n)
{
  const char *v = agt_yaml_scalar(n);
  return v && (strcmp(v, "null") == 0 || strcmp(v, "~") == 0 ||
               (v[0] == '\0' && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE));
}

/* Walk a document: every key known, every value of a known shape.  Returns the number of
 * problems, each printed with file:line:column. */
static int walk(agt_yaml_t *y, yaml_node_t *n, const char *path, const struct schema *s)
{
  int bad = 0;

  if (n->type == YAML_MAPPING_NODE) {
    if (free_form(path))
      return 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *k = agt_yaml_node(y, p->key), *v = agt_yaml_node(y, p->value);
      const char *key = agt_yaml_scalar(k);
      cleanup_free char *child = xasprintf("%s%s%s", path, *path ? "." : "", key ? key : "?");
      const struct entry *e;

      e = schema_find(s, child);
      if (e == NULL) {
        print_error("%s:%zu:%zu: key '%s' is not in Lima's reference template\n", y->file,
                    k->start_mark.line + 1, k->start_mark.column + 1, child);
        bad++;
        continue;
      }
      if (!is_null(v) && !(e->shape & node_shape(v))) {
        print_error("%s:%zu:%zu: '%s' is a %s; Lima's reference has a %s%s%s\n", y->file,
                    v->start_mark.line + 1, v->start_mark.column + 1, child,
                    node_shape(v) == SH_MAP   ? "mapping"
                    : node_shape(v) == SH_SEQ ? "list"
                                              : "scalar",
                    e->shape & SH_MAP ? "mapping " : "", e->shape & SH_SEQ ? "list " : "",
                    e->shape & SH_SCALAR ? "scalar" : "");
        bad++;
        continue;
      }
      bad += walk(y, v, child, s);
    }
  } else if (n->type == YAML_SEQUENCE_NODE) {
    cleanup_free char *item = xasprintf("%s[]", path);
    const struct entry *e;

    e = schema_find(s, item);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
      yaml_node_t *v = agt_yaml_node(y, *it);
      if (e && !(e->shape & node_shape(v))) {
        print_error("%s:%zu:%zu: an item of '%s' has the wrong shape\n", y->file,
                    v->start_mark.line + 1, v->start_mark.column + 1, path);
        bad++;
        continue;
      }
      bad += walk(y, v, item, s);
    }
  }
  return bad;
}

static struct schema ref;

static int group_teardown(void **state)
{
  (void)state;
  schema_free(&ref);
  return 0;
}

static int check_text(const char *name, const char *text)
{
  agt_yaml_t y;
  agt_error_t err = NULL;
  int bad;

  if (!have_ref) /* nothing to compare with: the callers' other checks still run */
    return 0;
  if (agt_yaml_load_string(&y, name, text, strlen(text), &err) < 0) {
    print_error("%s\n", err->msg);
    agt_error_release(&err);
    agt_yaml_release(&y);
    return 1;
  }
  bad = walk(&y, agt_yaml_root(&y), "", &ref);
  agt_yaml_release(&y);
  return bad;
}

/* The extractor itself finds what the reference documents, in comments too. */
static void test_reference_schema(void **state)
{
  static const struct {
    const char *path;
    int shape;
  } want[] = {
      {"vmType", SH_SCALAR},
      {"images", SH_SEQ},
      {"images[].location", SH_SCALAR},
      {"images[].digest", SH_SCALAR},
      {"images[].kernel", SH_MAP},
      {"mounts[].location", SH_SCALAR},
      {"mounts[].mountPoint", SH_SCALAR},
      {"mounts[].writable", SH_SCALAR},
      {"mounts[].9p", SH_MAP},
      {"ssh.localPort", SH_SCALAR},
      {"containerd.system", SH_SCALAR},
      {"provision", SH_SEQ},
      {"provision[].mode", SH_SCALAR},
      {"provision[].script", SH_SCALAR},
      {"provision[].file", SH_MAP},
      {"provision[].file.url", SH_SCALAR},
      {"probes[].description", SH_SCALAR},
      {"probes[].hint", SH_SCALAR},
      {"portForwards[].guestIP", SH_SCALAR},
      {"portForwards[].ignore", SH_SCALAR},
      {"portForwards[].guestIPMustBeZero", SH_SCALAR},
      {"minimumLimaVersion", SH_SCALAR},
      {"user.name", SH_SCALAR},
      {"param", SH_ANY},
      {"additionalDisks", SH_SEQ},
      {"caCerts.files", SH_SEQ},
      {"networks", SH_SEQ},
      {"vmOpts.qemu.cpuType", SH_MAP},
      {"containerd.archives", SH_SEQ},
  };
  (void)state;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const struct entry *e = schema_find(&ref, want[i].path);
    if (e == NULL)
      fail_msg("the reference schema lacks '%s'", want[i].path);
    if (!(e->shape & want[i].shape))
      fail_msg("'%s' has shape %d in the reference schema, want %d", want[i].path, e->shape,
               want[i].shape);
  }
  assert_null(schema_find(&ref, "arch[]")); /* an example above images does not land on arch */
  assert_null(schema_find(&ref, "provision[].scripts"));
  /* and the walk catches what it should */
  assert_int_equal(check_text("t1", "vmType: qemu\ncpu: 4\n"), 1);
  assert_int_equal(check_text("t2", "mounts:\n- location: /x\n  writeable: true\n"), 1);
  assert_int_equal(check_text("t3", "ssh: 22\n"), 1);
  assert_int_equal(check_text("t4", "images:\n  location: /x\n"), 1);
  assert_int_equal(check_text("t5", "provision:\n- mode: system\n  script: |\n    true\n"), 0);
  assert_int_equal(check_text("t6", "param:\n  Anything: x\n"), 0);
}

static char *source_file(const char *rel)
{
  struct agt_config c;
  char *dir, *p;

  agt_config_init(&c);
  dir = xstrdup(agt_config_get(&c, AGT_CFG_VM_AGT_SOURCE));
  agt_config_release(&c);
  p = xasprintf("%s/%s", dir, rel);
  free(dir);
  return p;
}

static void test_template_file_matches_lima(void **state)
{
  cleanup_free char *path = source_file("lima/agt.yaml");
  agt_error_t err = NULL;
  cleanup_free char *text = agt_read_file(path, 1 << 20, NULL, &err);

  (void)state;
  assert_non_null(text);
  assert_int_equal(check_text(path, text), 0);
}

static char *render(struct agt_config *c, const char *os, const char *arch)
{
  struct agt_host h = {os, arch};
  agt_error_t err = NULL;
  char *out = NULL;

  if (agt_template_render(c, &h, "vm1-jails", &out, &err) < 0)
    fail_msg("render: %s", err->msg);
  return out;
}

/* value at a dotted path in a rendered document ("mounts.0.location") */
static const char *get(agt_yaml_t *y, const char *path)
{
  yaml_node_t *n = agt_yaml_root(y);
  cleanup_free char *p = xstrdup(path);
  char *save = NULL;

  for (char *tok = strtok_r(p, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save)) {
    if (n->type == YAML_SEQUENCE_NODE) {
      long i = strtol(tok, NULL, 10);
      if (i >= n->data.sequence.items.top - n->data.sequence.items.start)
        return NULL;
      n = agt_yaml_node(y, n->data.sequence.items.start[i]);
    } else {
      n = agt_yaml_get(y, n, tok);
    }
  }
  return n ? agt_yaml_scalar(n) : NULL;
}

static size_t count(agt_yaml_t *y, const char *key)
{
  yaml_node_t *n = agt_yaml_get(y, agt_yaml_root(y), key);
  return n && n->type == YAML_SEQUENCE_NODE
             ? (size_t)(n->data.sequence.items.top - n->data.sequence.items.start)
             : 0;
}

static void load(agt_yaml_t *y, const char *text)
{
  agt_error_t err = NULL;
  if (agt_yaml_load_string(y, "rendered", text, strlen(text), &err) < 0)
    fail_msg("%s", err->msg);
}

static void test_render_defaults(void **state)
{
  struct agt_config c;
  cleanup_free char *linux_yaml = NULL, *mac_yaml = NULL, *src = NULL;
  agt_yaml_t y;

  (void)state;
  agt_config_init(&c);
  src = xstrdup(agt_config_get(&c, AGT_CFG_VM_AGT_SOURCE));
  linux_yaml = render(&c, "linux", "x86_64");
  assert_int_equal(check_text("rendered for linux", linux_yaml), 0);
  load(&y, linux_yaml);
  assert_string_equal(get(&y, "vmType"), "qemu");
  assert_string_equal(get(&y, "mountType"), "9p");
  assert_string_equal(get(&y, "cpus"), "4");
  assert_string_equal(get(&y, "memory"), "4GiB");
  assert_string_equal(get(&y, "disk"), "50GiB");
  assert_string_equal(get(&y, "minimumLimaVersion"), "2.0.0");
  assert_string_equal(get(&y, "containerd.system"), "false");
  assert_string_equal(get(&y, "containerd.user"), "false");
  assert_string_equal(get(&y, "ssh.localPort"), "0");
  assert_string_equal(get(&y, "portForwards.0.ignore"), "true");
  assert_string_equal(get(&y, "portForwards.1.guestIP"), "127.0.0.1");
  /* the source tree, read-only, where provisioning looks for it */
  assert_int_equal(count(&y, "mounts"), 1);
  assert_string_equal(get(&y, "mounts.0.location"), src);
  assert_string_equal(get(&y, "mounts.0.mountPoint"), "/opt/agt/src");
  assert_string_equal(get(&y, "mounts.0.writable"), "false");
  assert_string_equal(get(&y, "param.AgtSourceDir"), "/opt/agt/src");
  assert_string_equal(get(&y, "param.AgtWorkspaceRoots"), "");
  assert_string_equal(get(&y, "param.AgtdSocket"), "/run/agt/agtd.sock");
  /* provisioning inlined: the rendered file stands alone */
  assert_string_equal(get(&y, "provision.0.mode"), "boot");
  assert_int_equal(strncmp(get(&y, "provision.0.script"), "#!/bin/sh\n", 10), 0);
  assert_non_null(strstr(get(&y, "provision.0.script"), "mkfs.btrfs"));
  assert_null(get(&y, "provision.0.file"));
  assert_string_equal(get(&y, "provision.1.mode"), "system");
  assert_int_equal(strncmp(get(&y, "provision.1.script"), "#!/bin/bash\n", 12), 0);
  assert_non_null(strstr(get(&y, "provision.1.script"), "systemctl enable agtd.service"));
  assert_null(get(&y, "provision.1.file"));
  assert_non_null(strstr(get(&y, "probes.0.script"), "agtd ctl --socket"));
  /* every param is used by a script, or Lima refuses the template */
  assert_non_null(strstr(linux_yaml, "PARAM_AgtSourceDir"));
  assert_non_null(strstr(linux_yaml, "PARAM_AgtWorkspaceRoots"));
  assert_non_null(strstr(linux_yaml, "PARAM_AgtdSocket"));
  assert_non_null(strstr(linux_yaml, "PARAM_AgtJailsDisk"));
  /* the jails' disk: attached, left unformatted by Lima, named to the provisioning */
  assert_int_equal(count(&y, "additionalDisks"), 1);
  assert_string_equal(get(&y, "additionalDisks.0.name"), "vm1-jails");
  assert_string_equal(get(&y, "additionalDisks.0.format"), "false");
  assert_string_equal(get(&y, "additionalDisks.0.fsType"), "btrfs");
  assert_string_equal(get(&y, "param.AgtJailsDisk"), "vm1-jails");
  /* the images: Ubuntu LTS for both arches, pinned by digest first */
  assert_string_equal(get(&y, "images.0.arch"), "x86_64");
  assert_non_null(strstr(get(&y, "images.0.location"), "ubuntu-24.04-server-cloudimg-amd64"));
  assert_int_equal(strncmp(get(&y, "images.0.digest"), "sha256:", 7), 0);
  assert_string_equal(get(&y, "images.1.arch"), "aarch64");
  agt_yaml_release(&y);

  {
    /* none: a VM without one (agtd's image inside the root disk) */
    struct agt_host h = {"linux", "x86_64"};
    agt_error_t err = NULL;
    cleanup_free char *none = NULL;
    assert_int_equal(agt_template_render(&c, &h, NULL, &none, &err), 0);
    load(&y, none);
    assert_int_equal(count(&y, "additionalDisks"), 0);
    assert_string_equal(get(&y, "param.AgtJailsDisk"), "");
    agt_yaml_release(&y);
  }

  mac_yaml = render(&c, "darwin", "aarch64");
  assert_int_equal(check_text("rendered for darwin", mac_yaml), 0);
  load(&y, mac_yaml);
  assert_string_equal(get(&y, "vmType"), "vz");
  assert_string_equal(get(&y, "mountType"), "virtiofs");
  agt_yaml_release(&y);
  agt_config_release(&c);
}

static void test_render_config(void **state)
{
  struct agt_config c;
  cleanup_free char *yaml = NULL;
  agt_yaml_t y;
  agt_error_t err = NULL;

  (void)state;
  agt_config_init(&c);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_CPUS, "8", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_MEMORY, "6G", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_DISK, "1536M", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_ARCH, "aarch64", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_IMAGE, "/images/noble.img", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_IMAGE_DIGEST, "sha256:abc", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_MOUNT_TYPE, "reverse-sshfs", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_AGTD_SOCKET, "/run/x/agtd.sock", AGT_CFG_FLAG, "t", &err), 0);
  c.mounts = xzalloc(2 * sizeof *c.mounts);
  c.mounts[0].location = xstrdup("/Users/me/src");
  c.mounts[0].writable = 1;
  c.mounts[1].location = xstrdup("/Users/me/data");
  c.mounts[1].mount_point = xstrdup("/data");
  c.nmounts = 2;
  yaml = render(&c, "linux", "x86_64");
  assert_int_equal(check_text("rendered with config", yaml), 0);
  load(&y, yaml);
  assert_string_equal(get(&y, "cpus"), "8");
  assert_string_equal(get(&y, "memory"), "6GiB");
  assert_string_equal(get(&y, "disk"), "1536MiB");
  assert_string_equal(get(&y, "arch"), "aarch64");
  assert_int_equal(count(&y, "images"), 1);
  assert_string_equal(get(&y, "images.0.location"), "/images/noble.img");
  assert_string_equal(get(&y, "images.0.arch"), "aarch64");
  assert_string_equal(get(&y, "images.0.digest"), "sha256:abc");
  assert_null(get(&y, "images.0.kernel.location"));
  assert_null(get(&y, "images.0.initrd.location"));
  assert_string_equal(get(&y, "mountType"), "reverse-sshfs");
  assert_int_equal(count(&y, "mounts"), 3);
  assert_string_equal(get(&y, "mounts.0.location"), "/Users/me/src");
  assert_null(get(&y, "mounts.0.mountPoint"));
  assert_string_equal(get(&y, "mounts.0.writable"), "true");
  assert_string_equal(get(&y, "mounts.1.mountPoint"), "/data");
  assert_string_equal(get(&y, "mounts.1.writable"), "false");
  assert_string_equal(get(&y, "param.AgtWorkspaceRoots"), "/Users/me/src:/data");
  assert_string_equal(get(&y, "param.AgtdSocket"), "/run/x/agtd.sock");
  agt_yaml_release(&y);
  agt_config_release(&c);
}

/* A local image with its own kernel and initrd (direct kernel boot). */
static void test_render_kernel(void **state)
{
  struct agt_config c;
  cleanup_free char *yaml = NULL;
  agt_yaml_t y;
  agt_error_t err = NULL;

  (void)state;
  agt_config_init(&c);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_IMAGE, "/var/cache/i/disk.qcow2", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_KERNEL, "/var/cache/i/vmlinuz", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_KERNEL_CMDLINE, "root=/dev/vda console=ttyS0",
                                  AGT_CFG_FLAG, "t", &err),
                   0);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_INITRD, "/var/cache/i/initrd.img", AGT_CFG_FLAG, "t", &err), 0);
  yaml = render(&c, "linux", "x86_64");
  assert_int_equal(check_text("rendered with a kernel", yaml), 0);
  load(&y, yaml);
  assert_int_equal(count(&y, "images"), 1);
  assert_string_equal(get(&y, "images.0.location"), "/var/cache/i/disk.qcow2");
  assert_string_equal(get(&y, "images.0.arch"), "x86_64");
  assert_string_equal(get(&y, "images.0.kernel.location"), "/var/cache/i/vmlinuz");
  assert_string_equal(get(&y, "images.0.kernel.cmdline"), "root=/dev/vda console=ttyS0");
  assert_string_equal(get(&y, "images.0.initrd.location"), "/var/cache/i/initrd.img");
  assert_null(get(&y, "images.0.digest"));
  agt_yaml_release(&y);
  agt_config_release(&c);
}

static void test_render_refusals(void **state)
{
  struct agt_config c;
  struct agt_host h = {"linux", "x86_64"};
  agt_error_t err = NULL;
  char *out = NULL;

  (void)state;
  agt_config_init(&c);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_TYPE, "vz", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_template_render(&c, &h, NULL, &out, &err), -1);
  assert_non_null(strstr(err->msg, "vz needs macOS"));
  agt_error_release(&err);
  agt_config_release(&c);

  agt_config_init(&c);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_AGT_SOURCE, "/nonexistent", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_template_render(&c, &h, NULL, &out, &err), -1);
  assert_non_null(strstr(err->msg, "not an agt source tree"));
  agt_error_release(&err);
  agt_config_release(&c);

  agt_config_init(&c);
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_TEMPLATE, "/nonexistent.yaml", AGT_CFG_FLAG, "t", &err), 0);
  assert_int_equal(agt_template_render(&c, &h, NULL, &out, &err), -1);
  assert_non_null(strstr(err->msg, "/nonexistent.yaml"));
  agt_error_release(&err);
  agt_config_release(&c);

  /* a kernel, initrd or digest needs the image they belong to; a cmdline or initrd a kernel */
  {
    static const struct {
      enum agt_cfg_key key[2];
      const char *want;
    } cases[] = {
        {{AGT_CFG_VM_KERNEL, AGT_CFG_NKEYS}, "vm.kernel is set but vm.image is not"},
        {{AGT_CFG_VM_INITRD, AGT_CFG_NKEYS}, "vm.initrd is set but vm.image is not"},
        {{AGT_CFG_VM_IMAGE_DIGEST, AGT_CFG_NKEYS}, "vm.image_digest is set but vm.image is not"},
        {{AGT_CFG_VM_IMAGE, AGT_CFG_VM_KERNEL_CMDLINE}, "vm.kernel_cmdline is set but vm.kernel"},
        {{AGT_CFG_VM_IMAGE, AGT_CFG_VM_INITRD}, "vm.initrd is set but vm.kernel is not"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      agt_config_init(&c);
      for (int j = 0; j < 2; j++)
        if (cases[i].key[j] != AGT_CFG_NKEYS)
          assert_int_equal(agt_config_set(&c, cases[i].key[j], "/x", AGT_CFG_FLAG, "t", &err), 0);
      assert_int_equal(agt_template_render(&c, &h, NULL, &out, &err), -1);
      assert_null(out);
      assert_non_null(strstr(err->msg, cases[i].want));
      agt_error_release(&err);
      agt_config_release(&c);
    }
  }
}

/* The macOS choices, with the macOS branch taken here: vz and virtiofs from macOS 13 on,
 * QEMU and 9p before, Rosetta only on Apple silicon with vz and Rosetta installed. */
static char *render_mac(struct agt_config *c, const char *version, const char *arch, int rosetta,
                        agt_error_t *err)
{
  struct agt_host_facts f;
  struct agt_host h;
  char *out = NULL;

  memset(&f, 0, sizeof f);
  f.os = AGT_OS_DARWIN;
  snprintf(f.os_version, sizeof f.os_version, "%s", version);
  snprintf(f.arch, sizeof f.arch, "%s", arch);
  f.apple_silicon = strcmp(arch, "aarch64") == 0;
  f.vz = agt_macos_has_vz(version);
  f.rosetta = rosetta;
  agt_host_from_facts(&h, &f);
  assert_string_equal(h.os, "darwin");
  assert_string_equal(h.os_version, version);
  if (agt_template_render(c, &h, "vm1-jails", &out, err) < 0)
    return NULL;
  return out;
}

static void test_render_macos(void **state)
{
  struct agt_config c;
  agt_error_t err = NULL;
  agt_yaml_t y;
  char *yaml;

  (void)state;
  agt_config_init(&c);
  /* macOS 14 on Apple silicon: vz, virtiofs, no Rosetta unless asked */
  yaml = render_mac(&c, "14.5", "aarch64", 1, &err);
  assert_non_null(yaml);
  assert_int_equal(check_text("rendered for macOS 14", yaml), 0);
  load(&y, yaml);
  assert_string_equal(get(&y, "vmType"), "vz");
  assert_string_equal(get(&y, "mountType"), "virtiofs");
  assert_null(get(&y, "vmOpts.vz.rosetta.enabled"));
  agt_yaml_release(&y);
  free(yaml);

  /* macOS 12: no vz for Lima, so QEMU and 9p; vz asked for is refused */
  yaml = render_mac(&c, "12.7.6", "x86_64", 0, &err);
  assert_non_null(yaml);
  load(&y, yaml);
  assert_string_equal(get(&y, "vmType"), "qemu");
  assert_string_equal(get(&y, "mountType"), "9p");
  agt_yaml_release(&y);
  free(yaml);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_TYPE, "vz", AGT_CFG_FLAG, "t", &err), 0);
  assert_null(render_mac(&c, "12.7.6", "x86_64", 0, &err));
  assert_non_null(strstr(err->msg, "vz needs macOS 13 or later (this Mac runs macOS 12.7.6)"));
  agt_error_release(&err);
  agt_config_release(&c);

  /* Rosetta on: vmOpts.vz.rosetta in the rendered template */
  agt_config_init(&c);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_ROSETTA, "on", AGT_CFG_FLAG, "t", &err), 0);
  yaml = render_mac(&c, "15.1", "aarch64", 1, &err);
  assert_non_null(yaml);
  assert_int_equal(check_text("rendered with Rosetta", yaml), 0);
  load(&y, yaml);
  assert_string_equal(get(&y, "vmOpts.vz.rosetta.enabled"), "true");
  assert_string_equal(get(&y, "vmOpts.vz.rosetta.binfmt"), "true");
  agt_yaml_release(&y);
  free(yaml);
  /* ... refused without Rosetta installed, on Intel, and with QEMU */
  assert_null(render_mac(&c, "15.1", "aarch64", 0, &err));
  assert_non_null(strstr(err->msg, "softwareupdate --install-rosetta"));
  agt_error_release(&err);
  assert_null(render_mac(&c, "15.1", "x86_64", 0, &err));
  assert_non_null(strstr(err->msg, "needs a Mac with Apple silicon"));
  agt_error_release(&err);
  assert_int_equal(agt_config_set(&c, AGT_CFG_VM_TYPE, "qemu", AGT_CFG_FLAG, "t", &err), 0);
  assert_null(render_mac(&c, "15.1", "aarch64", 1, &err));
  assert_non_null(strstr(err->msg, "vm_type qemu"));
  agt_error_release(&err);
  agt_config_release(&c);
}

static void test_lima_size(void **state)
{
  static const struct {
    unsigned long long n;
    const char *s;
  } cases[] = {
      {4ull << 30, "4GiB"}, {1536ull << 20, "1536MiB"}, {1ull << 40, "1TiB"}, {3ull << 10, "3KiB"},
      {1000, "1000"},
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cleanup_free char *s = agt_lima_size(cases[i].n);
    assert_string_equal(s, cases[i].s);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_schema), cmocka_unit_test(test_template_file_matches_lima),
      cmocka_unit_test(test_render_defaults),  cmocka_unit_test(test_render_config),
      cmocka_unit_test(test_render_kernel),    cmocka_unit_test(test_render_refusals),
      cmocka_unit_test(test_lima_size),        cmocka_unit_test(test_render_macos),
  };
  int r = load_reference(&ref);

  if (r < 0)
    return 1;
  have_ref = r == 0;
  if (have_ref)
    return cmocka_run_group_tests(tests, NULL, group_teardown);
  /* cmocka's TAP writes a skip as "not ok", which meson counts as a failure: the two
   * reference tests are left out, as the comment above says. */
  return _cmocka_run_group_tests("tests", tests + 2, sizeof tests / sizeof tests[0] - 2, NULL,
                                 group_teardown);
}
