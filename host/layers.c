/* An agent's rootfs layers (layers.h): manifests written from the profiles. */
#include "layers.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "target.h"
#include "xalloc.h"
#include "yamlutil.h"

const char *agt_layer_pin(const struct agt_config *cfg, const struct agt_profile *p)
{
  const struct agt_cfg_agent *a = agt_config_agent(cfg, p->name);

  return a && a->version.text ? a->version.text : p->version;
}

void agt_layer_release(struct agt_layer *l)
{
  free(l->version);
  free(l->name);
  free(l->spec);
  free(l->manifest);
  memset(l, 0, sizeof *l);
}

/* A double-quoted YAML scalar (the values here are npm names and versions: no quotes or
 * backslashes, which the profile and config checks refuse). */
static char *q(const char *s)
{
  return xasprintf("\"%s\"", s);
}

int agt_layer_make(const struct agt_profile *p, const char *version, const char *march,
                   struct agt_layer *l, agt_error_t *err)
{
  cleanup_free char *bin = NULL, *qs = NULL, *qb = NULL, *qd = NULL;
  const char *cmd;

  memset(l, 0, sizeof *l);
  if (p->npm == NULL)
    return agt_error_kind(err, AGT_E_INVALID, "%s: agent '%s' has no package (runtime none)",
                          p->file, p->name);
  l->p = p;
  l->file = p->file;
  l->version = xstrdup(version);
  l->spec = agt_profile_expand(p, p->install, version, march, err);
  bin = l->spec ? agt_profile_expand(p, p->bin, version, march, err) : NULL;
  if (bin == NULL) {
    agt_layer_release(l);
    return -1;
  }
  /* a store name: [a-z0-9._-] */
  l->name = xasprintf("%s-%s", p->name, version);
  for (char *c = l->name; *c; c++) {
    *c = (char)tolower((unsigned char)*c);
    if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789._-", *c))
      *c = '_';
  }
  if (strlen(l->name) > 63)
    l->name[63] = '\0';
  /* the executable is linked as the command's first word (a runtime: its name) */
  cmd = p->command ? p->command[0] : p->name;
  if (strchr(cmd, '/'))
    cmd = strrchr(cmd, '/') + 1;
  qs = q(l->spec);
  qb = xasprintf("\"/opt/agt/%s/node_modules/%s\"", p->name, bin);
  qd = xasprintf("\"%s %s: npm %s\"", p->name, version, l->spec);
  l->manifest = xasprintf("# %s's layer, written by agt from %s (docs/AGENTS.md)\n"
                          "name: %s\n"
                          "description: %s\n"
                          "files:\n"
                          "  - path: /opt/agt/%s/node_modules\n"
                          "    tree: true\n"
                          "    sources:\n"
                          "      - npm: %s\n"
                          "  - path: /usr/local/bin/%s\n"
                          "    symlink: %s\n",
                          p->name, p->file, l->name, qd, p->name, qs, cmd, qb);
  return 0;
}

int agt_agent_layers(const struct agt_config *cfg, const struct agt_profile_set *set,
                     const struct agt_profile *p, const char *march, struct agt_layer *out,
                     size_t *n, agt_error_t *err)
{
  *n = 0;
  if (p->runtime == AGT_RUNTIME_NONE)
    return 0;
  if (agt_layer_make(p, agt_layer_pin(cfg, p), march, &out[0], err) < 0)
    return -1;
  *n = 1;
  if (p->runtime == AGT_RUNTIME_NODE) {
    const struct agt_profile *node = agt_profiles_find(set, "node");
    if (node == NULL) {
      agt_layer_release(&out[0]);
      *n = 0;
      return agt_error_kind(err, AGT_E_INVALID, "%s: runtime node, but there is no node profile",
                            p->file);
    }
    if (agt_layer_make(node, agt_layer_pin(cfg, node), march, &out[1], err) < 0) {
      agt_layer_release(&out[0]);
      *n = 0;
      return -1;
    }
    *n = 2;
  }
  return 0;
}

/* Where the jails look for commands (agtd's default PATH), in order. */
static const char *const tool_dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                        "/usr/bin",        "/sbin",          "/bin"};

static const char *tool_base(const char *tool)
{
  const char *slash = strrchr(tool, '/');
  return slash ? slash + 1 : tool;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int agt_tools_layer(const struct agt_cfg_item *tools, size_t n, struct agt_layer *l,
                    agt_error_t *err)
{
  cleanup_free const char **sorted = NULL;
  char *m, *names;
  uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */

  memset(l, 0, sizeof *l);
  if (n == 0)
    return 0;
  sorted = xzalloc(n * sizeof *sorted);
  for (size_t i = 0; i < n; i++) {
    const char *why = agt_config_tool_problem(tools[i].text, 0);
    if (why) {
      cleanup_free char *where = agt_cfg_origin_str(&tools[i].origin);
      return agt_error_kind(err, AGT_E_INVALID, "jail.tools entry '%s' (%s): %s", tools[i].text,
                            where, why);
    }
    for (size_t k = 0; k < i; k++)
      if (strcmp(tool_base(tools[k].text), tool_base(tools[i].text)) == 0 &&
          strcmp(tools[k].text, tools[i].text) != 0) {
        cleanup_free char *w1 = agt_cfg_origin_str(&tools[k].origin);
        cleanup_free char *w2 = agt_cfg_origin_str(&tools[i].origin);
        return agt_error_kind(err, AGT_E_INVALID,
                              "jail.tools entries '%s' (%s) and '%s' (%s) would both be "
                              "/usr/local/bin/%s: keep one",
                              tools[k].text, w1, tools[i].text, w2, tool_base(tools[i].text));
      }
    sorted[i] = tools[i].text;
  }
  qsort(sorted, n, sizeof *sorted, cmp_str);
  for (size_t i = 0; i < n; i++) {
    for (const unsigned char *c = (const unsigned char *)sorted[i]; *c; c++)
      h = (h ^ *c) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
  }
  l->file = "jail.tools";
  l->name = xasprintf("tools-%016llx", (unsigned long long)h);
  l->version = xstrdup("");
  m = xasprintf("# jail.tools as a layer, written by agt (docs/CONFIG.md)\n"
                "name: %s\n"
                "files:\n",
                l->name);
  names = xstrdup("");
  for (size_t i = 0; i < n; i++) {
    const char *t = sorted[i];
    char *next;
    if (t[0] == '/')
      next = xasprintf("%s  - path: /usr/local/bin/%s\n"
                       "    hint: \"jail.tools: '%s' must be a program on the guest\"\n"
                       "    sources:\n"
                       "      - host: \"%s\"\n",
                       m, tool_base(t), t, t);
    else {
      cleanup_free char *cands = xstrdup("");
      for (size_t k = 0; k < sizeof tool_dirs / sizeof tool_dirs[0]; k++) {
        char *c = xasprintf("%s%s\"%s/%s\"", cands, k ? ", " : "", tool_dirs[k], t);
        free(cands);
        cands = c;
      }
      next = xasprintf("%s  - path: /usr/local/bin/%s\n"
                       "    hint: \"jail.tools: install '%s' on the guest (in a directory of "
                       "its PATH), or name its path\"\n"
                       "    sources:\n"
                       "      - host: [%s]\n",
                       m, t, t, cands);
    }
    free(m);
    m = next;
    next = xasprintf("%s%s%s", names, i ? " " : "", t);
    free(names);
    names = next;
  }
  l->manifest = xasprintf("%sdescription: \"jail.tools: %s\"\n", m, names);
  l->spec = xasprintf("jail.tools: %s", names);
  free(m);
  free(names);
  return 0;
}

void agt_tools_error(const struct agt_cfg_item *tools, size_t n, agt_error_t *err)
{
  for (size_t i = 0; *err && i < n; i++) {
    cleanup_free char *at = xasprintf("/usr/local/bin/%s'", tool_base(tools[i].text));
    cleanup_free char *where = NULL;
    const char *msg = (*err)->msg, *rest;
    char *out;
    if (strstr(msg, at) == NULL)
      continue;
    /* "... jail.tools:LINE:COL: REST": the manifest's line means nothing to the user */
    for (rest = strstr(msg, "jail.tools:"); rest && !isdigit((unsigned char)rest[11]);
         rest = strstr(rest + 1, "jail.tools:"))
      ;
    rest = rest ? strstr(rest, ": ") : NULL;
    where = agt_cfg_origin_str(&tools[i].origin);
    out = xasprintf("jail.tools entry '%s' (%s): %s", tools[i].text, where, rest ? rest + 2 : msg);
    free((*err)->msg);
    (*err)->msg = out;
    return;
  }
}

json_t *agt_layer_find(json_t *store, const char *name)
{
  size_t i, k;
  json_t *b, *nm;

  json_array_foreach(store, i, b) /* newest first */
  {
    json_array_foreach(json_object_get(b, "names"), k,
                       nm) if (json_is_string(nm) &&
                               strcmp(json_string_value(nm), name) == 0) return b;
  }
  return NULL;
}

int agt_layers_build(struct agt_target *t, struct agt_layer *l, size_t n, json_t *store,
                     void (*note)(void *ctx, const struct agt_layer *l), void *ctx, int *built,
                     agt_error_t *err)
{
  json_t *ls = NULL;
  int r = -1;

  *built = 0;
  if (store == NULL) {
    if (agt_target_call(t, "rootfs.ls", NULL, &ls, err) < 0)
      return -1;
    store = json_object_get(ls, "rootfs");
  }
  for (size_t i = 0; i < n; i++) {
    json_t *res;
    if (agt_layer_find(store, l[i].name))
      continue;
    if (note)
      note(ctx, &l[i]);
    if (agt_target_call(t, "rootfs.build",
                        json_pack("{s:s, s:s}", "manifest", l[i].file, "content", l[i].manifest),
                        &res, err) < 0) {
      agt_error_wrap(err, "build layer %s (%s%s)", l[i].name, l[i].p ? "npm " : "", l[i].spec);
      goto out;
    }
    json_decref(res);
    (*built)++;
  }
  r = 0;
out:
  json_decref(ls);
  return r;
}

static char *read_all(const char *path, size_t *len, agt_error_t *err)
{
  cleanup_file FILE *f = fopen(path, "r");
  char *buf = NULL;
  size_t cap = 0, n;

  *len = 0;
  if (f == NULL) {
    if (errno == ENOENT)
      return xstrdup("");
    agt_error_make(err, errno, "open '%s'", path);
    return NULL;
  }
  do {
    if (*len + 4096 > cap)
      buf = xrealloc(buf, cap = cap ? cap * 2 : 8192);
    n = fread(buf + *len, 1, cap - *len - 1, f);
    *len += n;
  } while (n > 0);
  buf[*len] = '\0';
  return buf;
}

/* The line (1-based) of byte offset off in text. */
static unsigned line_of(const char *text, size_t off)
{
  unsigned line = 1;

  for (size_t i = 0; i < off && text[i]; i++)
    line += text[i] == '\n';
  return line;
}

/* Where a new line goes after the line holding offset off: the offset after its newline. */
static size_t after_line(const char *text, size_t len, size_t off)
{
  const char *nl = memchr(text + off, '\n', len - off);
  return nl ? (size_t)(nl - text) + 1 : len;
}

int agt_layer_pin_write(const char *config_file, const char *agent, const char *version,
                        char **where, agt_error_t *err)
{
  size_t len, at;
  cleanup_free char *text = read_all(config_file, &len, err), *ins = NULL, *tmp = NULL;
  cleanup_free char *out = NULL;
  agt_yaml_t y;
  yaml_node_t *root, *agents = NULL, *me = NULL, *ver = NULL;
  size_t cut_from = 0, cut_to = 0;
  FILE *f;

  if (text == NULL)
    return -1;
  memset(&y, 0, sizeof y);
  if (len && agt_yaml_load_string(&y, config_file, text, len, err) < 0) {
    agt_yaml_release(&y);
    return agt_error_wrap(err, "pin %s %s", agent, version);
  }
  root = len ? agt_yaml_root(&y) : NULL;
  if (root && root->type == YAML_MAPPING_NODE)
    agents = agt_yaml_get(&y, root, "agents");
  else if (root && !(root->type == YAML_SCALAR_NODE && agt_yaml_scalar(root)[0] == '\0')) {
    agt_yaml_release(&y);
    return agt_error_kind(err, AGT_E_INVALID, "%s: not a mapping: cannot pin %s there", config_file,
                          agent);
  }
  if (agents && agents->type == YAML_MAPPING_NODE)
    me = agt_yaml_get(&y, agents, agent);
  if (me && me->type == YAML_MAPPING_NODE)
    ver = agt_yaml_get(&y, me, "version");
  if ((agents && agents->type != YAML_MAPPING_NODE &&
       !(agents->type == YAML_SCALAR_NODE && agt_yaml_scalar(agents)[0] == '\0')) ||
      (agents && agents->type == YAML_MAPPING_NODE &&
       agents->data.mapping.style == YAML_FLOW_MAPPING_STYLE) ||
      (me &&
       (me->type != YAML_MAPPING_NODE || me->data.mapping.style == YAML_FLOW_MAPPING_STYLE))) {
    agt_yaml_release(&y);
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s: agents or agents.%s is not a block mapping: set agents.%s.version: "
                          "\"%s\" there yourself",
                          config_file, agent, agent, version);
  }
  if (ver) { /* replace the value */
    cut_from = ver->start_mark.index;
    cut_to = ver->end_mark.index;
    ins = xasprintf("\"%s\"", version);
    at = cut_from;
  } else if (me) { /* a line at its keys' indentation */
    yaml_node_t *k1 = agt_yaml_node(&y, me->data.mapping.pairs.start->key);
    at = k1->start_mark.index - k1->start_mark.column; /* before its first key */
    ins = xasprintf("%*sversion: \"%s\"\n", (int)k1->start_mark.column, "", version);
    cut_from = cut_to = at;
  } else if (agents && agents->type == YAML_MAPPING_NODE &&
             agents->data.mapping.pairs.start < agents->data.mapping.pairs.top) {
    yaml_node_t *k1 = agt_yaml_node(&y, agents->data.mapping.pairs.start->key);
    at = k1->start_mark.index - k1->start_mark.column; /* before the first agent */
    ins = xasprintf("%*s%s:\n%*sversion: \"%s\"\n", (int)k1->start_mark.column, "", agent,
                    (int)k1->start_mark.column + 2, "", version);
    cut_from = cut_to = at;
  } else if (agents) { /* "agents:" with nothing under it */
    yaml_node_t *key = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++)
      if (strcmp(agt_yaml_scalar(agt_yaml_node(&y, p->key)), "agents") == 0)
        key = agt_yaml_node(&y, p->key);
    at = after_line(text, len, key->start_mark.index);
    if (agents->type == YAML_SCALAR_NODE && agents->end_mark.index > agents->start_mark.index)
      at = agents->end_mark.index; /* "agents: ''" and the like: replaced below */
    ins = xasprintf("  %s:\n    version: \"%s\"\n", agent, version);
    cut_from = cut_to = at;
  } else {
    at = len;
    ins = xasprintf("%sagents:\n  %s:\n    version: \"%s\"\n",
                    len && text[len - 1] != '\n' ? "\n" : "", agent, version);
    cut_from = cut_to = at;
  }
  agt_yaml_release(&y);
  out = xasprintf("%.*s%s%s", (int)cut_from, text, ins, text + cut_to);
  tmp = xasprintf("%s.agt-XXXXXX", config_file);
  {
    int fd;
    cleanup_free char *dir = xstrdup(config_file);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
      *slash = '\0';
      mkdir(dir, 0755); /* the config directory, when this is the first setting */
    }
    fd = mkstemp(tmp);
    if (fd < 0)
      return agt_error_make(err, errno, "create '%s'", tmp);
    f = fdopen(fd, "w");
  }
  if (f == NULL || fputs(out, f) == EOF || fflush(f) != 0 || fsync(fileno(f)) != 0) {
    int e = errno;
    if (f)
      fclose(f);
    unlink(tmp);
    return agt_error_make(err, e, "write '%s'", tmp);
  }
  fclose(f);
  if (rename(tmp, config_file) < 0) {
    int e = errno;
    unlink(tmp);
    return agt_error_make(err, e, "rename '%s' to '%s'", tmp, config_file);
  }
  {
    const char *v = ver ? NULL : strstr(ins, "version:");
    *where = xasprintf("%s:%u", config_file, line_of(out, cut_from + (v ? (size_t)(v - ins) : 0)));
  }
  return 0;
}
