/* Agent profiles, loaded and checked (profile.h; the keys: docs/AGENTS.md). */
#include "profile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agt_paths.h"
#include "cleanup.h"
#include "names.h"
#include "xalloc.h"
#include "yamlutil.h"

#define PROFILE_LIST_MAX 64
/* clean_home's bounds, agtd's (guest/jail/jail_mounts.h) */
#define PROFILE_CLEAN_HOME_FILE_BYTES (64 * 1024)
#define PROFILE_CLEAN_HOME_BYTES (256 * 1024)

static const char *const runtime_names[] = {"none", "native", "node"};
static const char *const api_names[] = {"none", "anthropic-messages", "openai-responses",
                                        "openai-chat", "gemini"};

const char *agt_profile_runtime_name(enum agt_profile_runtime r)
{
  return runtime_names[r];
}

const char *agt_profile_api_name(enum agt_profile_api a)
{
  return api_names[a];
}

static void strv_free(char **v)
{
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}

void agt_profile_free(struct agt_profile *p)
{
  if (p == NULL)
    return;
  free(p->file);
  free(p->name);
  free(p->description);
  free(p->npm);
  free(p->version);
  free(p->install);
  free(p->bin);
  strv_free(p->command);
  strv_free(p->headless);
  strv_free(p->batch);
  strv_free(p->skip_permissions);
  free(p->key_env);
  free(p->base_url_env);
  strv_free(p->set_env);
  strv_free(p->hosts);
  strv_free(p->home);
  for (size_t i = 0; i < p->nfiles; i++) {
    free(p->files[i].path);
    free(p->files[i].content);
  }
  free(p->files);
  for (size_t i = 0; i < p->nclean_home; i++) {
    free(p->clean_home[i].path);
    free(p->clean_home[i].content);
  }
  free(p->clean_home);
  free(p);
}

/* "WHAT: " before a message about a nested key; nothing at the top level. */
static const char *pre(const char *what)
{
  return what ? what : "";
}

static const char *sep(const char *what)
{
  return what ? ": " : "";
}

/* Known keys only, each once (the reader would see only one of two). */
static int check_map(agt_yaml_t *y, yaml_node_t *map, const char *what, const char *const *known,
                     agt_error_t *err)
{
  yaml_node_pair_t *p, *q;

  if (map == NULL || map->type != YAML_MAPPING_NODE)
    return agt_yaml_error(y, map, err, "%s must be a mapping", what ? what : "a profile");
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(y, p->key);
    const char *k = agt_yaml_scalar(kn);
    const char *const *w;
    if (k == NULL)
      return agt_yaml_error(y, kn, err, "%s%skeys must be strings", pre(what), sep(what));
    for (w = known; *w; w++)
      if (strcmp(*w, k) == 0)
        break;
    if (*w == NULL)
      return agt_yaml_error(y, kn, err, "%s%sunknown key '%s'", pre(what), sep(what), k);
    for (q = map->data.mapping.pairs.start; q < p; q++)
      if (strcmp(agt_yaml_scalar(agt_yaml_node(y, q->key)), k) == 0)
        return agt_yaml_error(y, kn, err, "%s%skey '%s' given twice", pre(what), sep(what), k);
  }
  return 0;
}

/* A non-empty string under key, or absent (*out untouched). */
static int get_str(agt_yaml_t *y, yaml_node_t *map, const char *what, const char *key, char **out,
                   agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(y, map, key);
  const char *s = agt_yaml_scalar(n);

  if (n == NULL)
    return 0;
  if (s == NULL)
    return agt_yaml_error(y, n, err, "%s%s'%s' must be a string", pre(what), sep(what), key);
  if (*s == '\0')
    return agt_yaml_error(y, n, err, "%s%s'%s' is empty", pre(what), sep(what), key);
  *out = xstrdup(s);
  return 0;
}

/* A list of non-empty strings under key (a scalar is refused: say [a] for one). */
static int get_list(agt_yaml_t *y, yaml_node_t *map, const char *key, int min, char ***out,
                    agt_error_t *err)
{
  yaml_node_t *n = agt_yaml_get(y, map, key);
  yaml_node_item_t *it;
  size_t i = 0, count;
  char **v;

  if (n == NULL)
    return 0;
  if (n->type != YAML_SEQUENCE_NODE)
    return agt_yaml_error(y, n, err, "'%s' must be a list of strings", key);
  count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < (size_t)min)
    return agt_yaml_error(y, n, err, "'%s' must not be empty", key);
  if (count > PROFILE_LIST_MAX)
    return agt_yaml_error(y, n, err, "'%s' has more than %d items", key, PROFILE_LIST_MAX);
  v = xzalloc((count + 1) * sizeof *v);
  for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    yaml_node_t *e = agt_yaml_node(y, *it);
    const char *s = agt_yaml_scalar(e);
    if (s == NULL || *s == '\0') {
      strv_free(v);
      return agt_yaml_error(y, e, err, "'%s'[%zu] must be a non-empty string", key, i);
    }
    v[i++] = xstrdup(s);
  }
  *out = v;
  return 0;
}

/* A path under base ($HOME, node_modules): relative, clean, no "." or ".." component. */
static int rel_path_check(agt_yaml_t *y, yaml_node_t *n, const char *what, const char *path,
                          const char *base, agt_error_t *err)
{
  cleanup_free char *abs = xasprintf("/%s", path);

  if (path[0] == '/')
    return agt_yaml_error(y, n, err, "%s '%s' must be relative to %s", what, path, base);
  if (agt_abspath_check(what, abs, err) < 0) {
    agt_error_release(err);
    return agt_yaml_error(y, n, err,
                          "%s '%s' must be a clean path under %s (no '.', '..' or "
                          "empty component)",
                          what, path, base);
  }
  return 0;
}

static int parse_enum(agt_yaml_t *y, yaml_node_t *map, const char *key, const char *const *names,
                      size_t n, int *out, agt_error_t *err)
{
  const char *s = NULL;
  size_t i;
  char list[256] = "";

  if (agt_yaml_get(y, map, key) == NULL)
    return 0;
  s = agt_yaml_scalar(agt_yaml_get(y, map, key));
  if (s == NULL)
    return agt_yaml_error(y, agt_yaml_get(y, map, key), err, "'%s' must be a string", key);
  for (i = 0; i < n; i++) {
    if (strcmp(s, names[i]) == 0) {
      *out = (int)i;
      return 0;
    }
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
  }
  return agt_yaml_error(y, agt_yaml_get(y, map, key), err, "'%s' must be one of %s, not '%s'", key,
                        list, s);
}

static int parse_package(agt_yaml_t *y, yaml_node_t *n, struct agt_profile *p, agt_error_t *err)
{
  static const char *const known[] = {"npm", "version", "install", "bin", NULL};

  if (check_map(y, n, "package", known, err) < 0 ||
      get_str(y, n, "package", "npm", &p->npm, err) < 0 ||
      get_str(y, n, "package", "version", &p->version, err) < 0 ||
      get_str(y, n, "package", "install", &p->install, err) < 0 ||
      get_str(y, n, "package", "bin", &p->bin, err) < 0)
    return -1;
  if (p->npm == NULL)
    return agt_yaml_error(y, n, err,
                          "package: 'npm' (the package's name on the registry) is "
                          "missing");
  if (p->version == NULL)
    return agt_yaml_error(y, n, err, "package: 'version' (the pinned version) is missing");
  if (p->bin == NULL)
    return agt_yaml_error(y, n, err,
                          "package: 'bin' (the executable, relative to "
                          "node_modules) is missing");
  if (strspn(p->version, "0123456789.-+abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
      strlen(p->version))
    return agt_yaml_error(y, agt_yaml_get(y, n, "version"), err,
                          "package: version '%s' is not a version", p->version);
  if (rel_path_check(y, agt_yaml_get(y, n, "bin"), "package: bin", p->bin, "node_modules", err) < 0)
    return -1;
  if (p->install == NULL)
    p->install = xasprintf("%s@{version}", p->npm);
  return 0;
}

/* Drop an error to replace it with one that names the place; returns 1. */
static int release(agt_error_t *err)
{
  agt_error_release(err);
  return 1;
}

static int parse_env(agt_yaml_t *y, yaml_node_t *n, struct agt_profile *p, agt_error_t *err)
{
  static const char *const known[] = {"key", "base_url", "set", NULL};
  yaml_node_t *set;

  if (check_map(y, n, "env", known, err) < 0 || get_str(y, n, "env", "key", &p->key_env, err) < 0 ||
      get_str(y, n, "env", "base_url", &p->base_url_env, err) < 0)
    return -1;
  if (p->key_env && agt_env_name_check("env: key", p->key_env, err) < 0 && release(err))
    return agt_yaml_error(y, agt_yaml_get(y, n, "key"), err, "env: key '%s' is not a variable name",
                          p->key_env);
  if (p->base_url_env && agt_env_name_check("env: base_url", p->base_url_env, err) < 0 &&
      release(err))
    return agt_yaml_error(y, agt_yaml_get(y, n, "base_url"), err,
                          "env: base_url '%s' is not a variable name", p->base_url_env);
  set = agt_yaml_get(y, n, "set");
  if (set) {
    size_t i = 0, count;
    if (set->type != YAML_MAPPING_NODE)
      return agt_yaml_error(y, set, err, "env: 'set' must be a mapping of NAME: VALUE");
    count = (size_t)(set->data.mapping.pairs.top - set->data.mapping.pairs.start);
    p->set_env = xzalloc((count + 1) * sizeof *p->set_env);
    for (yaml_node_pair_t *q = set->data.mapping.pairs.start; q < set->data.mapping.pairs.top;
         q++) {
      yaml_node_t *kn = agt_yaml_node(y, q->key), *vn = agt_yaml_node(y, q->value);
      const char *k = agt_yaml_scalar(kn), *v = agt_yaml_scalar(vn);
      if (k == NULL || agt_env_name_check("env: set", k, err) < 0) {
        agt_error_release(err);
        return agt_yaml_error(y, kn, err, "env: set: '%s' is not a variable name", k ? k : "?");
      }
      if (v == NULL)
        return agt_yaml_error(y, vn, err, "env: set: %s: the value must be a string", k);
      for (size_t m = 0; m < i; m++)
        if (strncmp(p->set_env[m], k, strlen(k)) == 0 && p->set_env[m][strlen(k)] == '=')
          return agt_yaml_error(y, kn, err, "env: set: %s given twice", k);
      p->set_env[i++] = xasprintf("%s=%s", k, v);
    }
  }
  return 0;
}

/* files and clean_home: lists of {path, content}, each path clean and relative to $HOME;
 * clean_home's paths once each and none inside another (agtd writes them as they are). */
static int parse_files(agt_yaml_t *y, yaml_node_t *n, const char *key,
                       struct agt_profile_file **files, size_t *nfiles, agt_error_t *err)
{
  static const char *const known[] = {"path", "content", NULL};
  yaml_node_item_t *it;
  size_t count, bytes = 0;

  if (n->type != YAML_SEQUENCE_NODE)
    return agt_yaml_error(y, n, err, "'%s' must be a list of {path, content}", key);
  count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count > PROFILE_LIST_MAX)
    return agt_yaml_error(y, n, err, "'%s' has more than %d items", key, PROFILE_LIST_MAX);
  *files = xzalloc((count ? count : 1) * sizeof **files);
  for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    yaml_node_t *e = agt_yaml_node(y, *it);
    struct agt_profile_file *f = &(*files)[*nfiles];
    cleanup_free char *what = xasprintf("%s[%zu]", key, *nfiles);

    if (check_map(y, e, what, known, err) < 0)
      return -1;
    (*nfiles)++;
    if (get_str(y, e, what, "path", &f->path, err) < 0)
      return -1;
    if (f->path == NULL)
      return agt_yaml_error(y, e, err, "%s: 'path' is missing", what);
    if (rel_path_check(y, agt_yaml_get(y, e, "path"), what, f->path, "$HOME", err) < 0)
      return -1;
    {
      yaml_node_t *c = agt_yaml_get(y, e, "content");
      if (c == NULL)
        return agt_yaml_error(y, e, err, "%s (%s): 'content' is missing", what, f->path);
      if (agt_yaml_scalar(c) == NULL)
        return agt_yaml_error(y, c, err, "%s (%s): 'content' must be a string", what, f->path);
      f->content = xstrdup(agt_yaml_scalar(c));
      bytes += strlen(f->content);
      if (strcmp(key, "clean_home") == 0 &&
          (strlen(f->content) > PROFILE_CLEAN_HOME_FILE_BYTES || bytes > PROFILE_CLEAN_HOME_BYTES))
        return agt_yaml_error(y, c, err, "%s (%s): too large (%d bytes a file, %d in all at most)",
                              what, f->path, PROFILE_CLEAN_HOME_FILE_BYTES,
                              PROFILE_CLEAN_HOME_BYTES);
    }
    for (size_t k = 0; strcmp(key, "clean_home") == 0 && k + 1 < *nfiles; k++) {
      const char *o = (*files)[k].path;
      size_t lo = strlen(o), lp = strlen(f->path);
      if (strcmp(o, f->path) == 0 ||
          (lo < lp && strncmp(o, f->path, lo) == 0 && f->path[lo] == '/') ||
          (lp < lo && strncmp(o, f->path, lp) == 0 && o[lp] == '/'))
        return agt_yaml_error(y, agt_yaml_get(y, e, "path"), err,
                              "%s: '%s' clashes with '%s' (the same file, or a file where the "
                              "other needs a directory)",
                              what, f->path, o);
    }
  }
  return 0;
}

static int count_prompt(char **v)
{
  int n = 0;

  for (char **a = v; a && *a; a++)
    if (strstr(*a, "{prompt}"))
      n++;
  return n;
}

static int parse_root(agt_yaml_t *y, const char *stem, struct agt_profile *p, agt_error_t *err)
{
  static const char *const known[] = {"name",     "description", "kind",
                                      "runtime",  "package",     "command",
                                      "headless", "batch",       "skip_permissions",
                                      "env",      "hosts",       "home",
                                      "api",      "files",       "clean_home",
                                      NULL};
  static const char *const kinds[] = {"agent", "runtime"};
  yaml_node_t *root = agt_yaml_root(y), *n;
  int v;

  if (root == NULL)
    return agt_yaml_error(y, NULL, err, "empty file: a profile needs at least 'name'");
  if (check_map(y, root, NULL, known, err) < 0 || agt_yaml_refuse_nul(y, err) < 0)
    return -1;
  if (get_str(y, root, NULL, "name", &p->name, err) < 0 ||
      get_str(y, root, NULL, "description", &p->description, err) < 0)
    return -1;
  if (p->name == NULL)
    return agt_yaml_error(y, root, err, "'name' is missing");
  n = agt_yaml_get(y, root, "name");
  if (strspn(p->name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(p->name) ||
      strlen(p->name) > 32 || p->name[0] == '-')
    return agt_yaml_error(y, n, err, "name '%s' must be 1-32 of [a-z0-9-], not starting with '-'",
                          p->name);
  if (stem && strcmp(stem, p->name) != 0)
    return agt_yaml_error(y, n, err, "name '%s' must be the file's name without .yaml ('%s')",
                          p->name, stem);
  v = 0;
  if (parse_enum(y, root, "kind", kinds, 2, &v, err) < 0)
    return -1;
  p->kind = (enum agt_profile_kind)v;
  v = p->kind == AGT_PROFILE_RUNTIME ? AGT_RUNTIME_NATIVE : AGT_RUNTIME_NONE;
  if (parse_enum(y, root, "runtime", runtime_names, 3, &v, err) < 0)
    return -1;
  p->runtime = (enum agt_profile_runtime)v;
  v = 0;
  if (parse_enum(y, root, "api", api_names, 5, &v, err) < 0)
    return -1;
  p->api = (enum agt_profile_api)v;

  n = agt_yaml_get(y, root, "package");
  if (n && parse_package(y, n, p, err) < 0)
    return -1;
  if (n == NULL && p->runtime != AGT_RUNTIME_NONE)
    return agt_yaml_error(y, root, err, "runtime %s needs a 'package' (npm, version, bin)",
                          runtime_names[p->runtime]);
  if (n && p->runtime == AGT_RUNTIME_NONE)
    return agt_yaml_error(y, n, err,
                          "'package' needs runtime native or node (runtime none has "
                          "no layer to put it in)");

  if (get_list(y, root, "command", 1, &p->command, err) < 0 ||
      get_list(y, root, "headless", 1, &p->headless, err) < 0 ||
      get_list(y, root, "batch", 1, &p->batch, err) < 0 ||
      get_list(y, root, "skip_permissions", 0, &p->skip_permissions, err) < 0 ||
      get_list(y, root, "hosts", 0, &p->hosts, err) < 0 ||
      get_list(y, root, "home", 0, &p->home, err) < 0)
    return -1;
  if (p->kind == AGT_PROFILE_AGENT && p->command == NULL)
    return agt_yaml_error(y, root, err, "'command' is missing (what `agt jail run %s` runs)",
                          p->name);
  if (p->kind == AGT_PROFILE_RUNTIME && (p->command || p->batch || p->headless))
    return agt_yaml_error(y, root, err,
                          "a runtime profile runs nothing: no command, headless or "
                          "batch");
  if (p->batch && count_prompt(p->batch) != 1)
    return agt_yaml_error(y, agt_yaml_get(y, root, "batch"), err,
                          "'batch' must hold {prompt} in exactly one element");
  for (char **h = p->hosts; h && *h; h++)
    if (strspn(*h, "abcdefghijklmnopqrstuvwxyz0123456789.-*:") != strlen(*h))
      return agt_yaml_error(y, agt_yaml_get(y, root, "hosts"), err,
                            "hosts: '%s' is not HOST, HOST:PORT or *.SUFFIX (lowercase)", *h);
  for (char **h = p->home; h && *h; h++)
    if (rel_path_check(y, agt_yaml_get(y, root, "home"), "home", *h, "$HOME", err) < 0)
      return -1;
  n = agt_yaml_get(y, root, "env");
  if (n && parse_env(y, n, p, err) < 0)
    return -1;
  n = agt_yaml_get(y, root, "files");
  if (n && parse_files(y, n, "files", &p->files, &p->nfiles, err) < 0)
    return -1;
  n = agt_yaml_get(y, root, "clean_home");
  if (n && parse_files(y, n, "clean_home", &p->clean_home, &p->nclean_home, err) < 0)
    return -1;
  return 0;
}

/* The file's name without its directories and .yaml, or NULL when it does not end so. */
static char *stem_of(const char *file)
{
  const char *b = strrchr(file, '/');
  size_t n;

  b = b ? b + 1 : file;
  n = strlen(b);
  if (n <= 5 || strcmp(b + n - 5, ".yaml") != 0)
    return NULL;
  return xstrndup(b, n - 5);
}

int agt_profile_parse(const char *file, const char *buf, size_t len, struct agt_profile **out,
                      agt_error_t *err)
{
  agt_yaml_t y;
  struct agt_profile *p = xzalloc(sizeof *p);
  cleanup_free char *stem = stem_of(file);
  int r;

  *out = NULL;
  if (stem == NULL) {
    free(p);
    return agt_error_kind(err, AGT_E_INVALID, "%s: a profile's file name must be NAME.yaml", file);
  }
  if (agt_yaml_load_string(&y, file, buf, len, err) < 0) {
    free(p);
    agt_yaml_release(&y);
    return -1;
  }
  p->file = xstrdup(file);
  r = parse_root(&y, stem, p, err);
  agt_yaml_release(&y);
  if (r < 0) {
    agt_profile_free(p);
    return -1;
  }
  *out = p;
  return 0;
}

int agt_profile_load(const char *path, struct agt_profile **out, agt_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len;

  *out = NULL;
  if (agt_yaml_read_file(path, "profile", &buf, &len, err) < 0)
    return -1;
  return agt_profile_parse(path, buf, len, out, err);
}

static int by_name(const void *a, const void *b)
{
  const struct agt_profile *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

static int name_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_dir(const char *dir, struct agt_profile_set *set, agt_error_t *err)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  char **names = NULL;
  size_t n = 0, cap = 0;
  int r = 0;

  if (d == NULL)
    return errno == ENOENT || errno == ENOTDIR ? 0 : agt_error_make(err, errno, "open '%s'", dir);
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] == '.' || l <= 5 || strcmp(e->d_name + l - 5, ".yaml") != 0)
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      names = xrealloc(names, cap * sizeof *names);
    }
    names[n++] = xstrdup(e->d_name);
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, name_cmp);
  for (size_t i = 0; i < n && r == 0; i++) {
    cleanup_free char *path = xasprintf("%s/%s", dir, names[i]);
    struct agt_profile *p;
    size_t m;
    if (agt_profile_load(path, &p, err) < 0) {
      r = -1;
      break;
    }
    for (m = 0; m < set->n; m++)
      if (strcmp(set->p[m]->name, p->name) == 0)
        break;
    if (m < set->n) {
      agt_profile_free(set->p[m]);
      set->p[m] = p;
    } else {
      set->p = xrealloc(set->p, (set->n + 1) * sizeof *set->p);
      set->p[set->n++] = p;
    }
  }
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return r;
}

int agt_profiles_load(const char *const *dirs, size_t ndirs, struct agt_profile_set *set,
                      agt_error_t *err)
{
  memset(set, 0, sizeof *set);
  for (size_t i = 0; i < ndirs; i++)
    if (load_dir(dirs[i], set, err) < 0) {
      agt_profiles_release(set);
      return -1;
    }
  if (set->n)
    qsort(set->p, set->n, sizeof *set->p, by_name);
  /* a node agent needs the node runtime */
  for (size_t i = 0; i < set->n; i++)
    if (set->p[i]->runtime == AGT_RUNTIME_NODE) {
      const struct agt_profile *node = agt_profiles_find(set, "node");
      if (node == NULL || node->kind != AGT_PROFILE_RUNTIME) {
        agt_error_kind(err, AGT_E_INVALID,
                       "%s: runtime node, but no runtime profile 'node' (node.yaml with kind: "
                       "runtime) is in the profile directories",
                       set->p[i]->file);
        agt_profiles_release(set);
        return -1;
      }
    }
  return 0;
}

void agt_profiles_release(struct agt_profile_set *set)
{
  for (size_t i = 0; i < set->n; i++)
    agt_profile_free(set->p[i]);
  free(set->p);
  memset(set, 0, sizeof *set);
}

const struct agt_profile *agt_profiles_find(const struct agt_profile_set *set, const char *name)
{
  for (size_t i = 0; i < set->n; i++)
    if (strcmp(set->p[i]->name, name) == 0)
      return set->p[i];
  return NULL;
}

char **agt_profile_dirs(const char *config_file)
{
  char **v = xzalloc(3 * sizeof *v);
  cleanup_free char *src = xasprintf("%s/agents/shell.yaml", AGT_SOURCE_ROOT);
  struct stat st;
  size_t n = 0;

  if (stat(src, &st) == 0)
    v[n++] = xasprintf("%s/agents", AGT_SOURCE_ROOT);
  else
    v[n++] = xstrdup(AGT_DATADIR "/agents");
  if (config_file) {
    const char *slash = strrchr(config_file, '/');
    if (slash)
      v[n++] = xasprintf("%.*s/agents", (int)(slash - config_file), config_file);
  }
  return v;
}

int agt_profiles_load_for(const char *config_file, struct agt_profile_set *set, agt_error_t *err)
{
  char **dirs = agt_profile_dirs(config_file);
  size_t n = 0;
  int r;

  while (dirs[n])
    n++;
  r = agt_profiles_load((const char *const *)dirs, n, set, err);
  for (size_t i = 0; i < n; i++)
    free(dirs[i]);
  free(dirs);
  return r;
}

char *agt_profile_expand(const struct agt_profile *p, const char *tmpl, const char *version,
                         const char *march, agt_error_t *err)
{
  const char *arch;
  size_t cap = strlen(tmpl) + 256, n = 0;
  char *out;

  if (strcmp(march, "x86_64") == 0)
    arch = "x64";
  else if (strcmp(march, "aarch64") == 0 || strcmp(march, "arm64") == 0) {
    arch = "arm64";
    march = "aarch64";
  } else {
    agt_error_kind(err, AGT_E_INVALID, "architecture '%s' has no npm packages (x86_64, aarch64)",
                   march);
    return NULL;
  }
  out = xzalloc(cap);
  for (const char *s = tmpl; *s;) {
    const char *val = NULL;
    size_t skip = 0;
    if (strncmp(s, "{arch}", 6) == 0)
      val = arch, skip = 6;
    else if (strncmp(s, "{march}", 7) == 0)
      val = march, skip = 7;
    else if (strncmp(s, "{version}", 9) == 0)
      val = version ? version : p->version, skip = 9;
    if (val == NULL) {
      val = s;
      skip = 1;
      if (n + 2 > cap)
        out = xrealloc(out, cap *= 2);
      out[n++] = *s;
      out[n] = '\0';
      s += skip;
      continue;
    }
    while (n + strlen(val) + 1 > cap)
      out = xrealloc(out, cap *= 2);
    memcpy(out + n, val, strlen(val) + 1);
    n += strlen(val);
    s += skip;
  }
  return out;
}
