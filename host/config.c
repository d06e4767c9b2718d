#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "agt_paths.h"
#include "cleanup.h"
#include "cli.h"
#include "lima.h"
#include "names.h"
#include "platform.h"
#include "stream_relay.h"
#include "xalloc.h"
#include "yamlutil.h"

enum cfg_type {
  T_STR,
  T_PATH,     /* ~ expanded, relative to the file's base */
  T_INSTANCE, /* a Lima instance name */
  T_UINT,
  T_SIZE,
  T_LIMIT, /* a jail limit: key `limit` of the jail spec (jailspec.h), checked by it */
  T_DURATION,
  T_ENUM, /* one of `choices` */
  T_TARGET,
  T_KEYS,  /* detach keys: ctrl-],ctrl-] */
  T_AGENT, /* an agent profile's name: 1-32 of [a-z0-9-] (which profiles exist: agt jail run) */
};

struct key_desc {
  const char *path;
  enum cfg_type type;
  const char *choices;    /* T_ENUM: "a|b|c" */
  enum agt_spec_id limit; /* T_LIMIT */
};

static const struct key_desc keys[AGT_CFG_NKEYS] = {
    [AGT_CFG_TARGET] = {"target", T_TARGET, NULL},
    [AGT_CFG_VM_NAME] = {"vm.name", T_INSTANCE, NULL},
    [AGT_CFG_VM_CPUS] = {"vm.cpus", T_UINT, NULL},
    [AGT_CFG_VM_MEMORY] = {"vm.memory", T_SIZE, NULL},
    [AGT_CFG_VM_DISK] = {"vm.disk", T_SIZE, NULL},
    [AGT_CFG_VM_JAILS_DISK] = {"vm.jails_disk", T_SIZE, NULL},
    [AGT_CFG_VM_TYPE] = {"vm.vm_type", T_ENUM, "auto|vz|qemu"},
    [AGT_CFG_VM_ARCH] = {"vm.arch", T_ENUM, "default|x86_64|aarch64"},
    [AGT_CFG_VM_IMAGE] = {"vm.image", T_STR, NULL},
    [AGT_CFG_VM_IMAGE_DIGEST] = {"vm.image_digest", T_STR, NULL},
    [AGT_CFG_VM_KERNEL] = {"vm.kernel", T_STR, NULL},
    [AGT_CFG_VM_KERNEL_CMDLINE] = {"vm.kernel_cmdline", T_STR, NULL},
    [AGT_CFG_VM_INITRD] = {"vm.initrd", T_STR, NULL},
    [AGT_CFG_VM_MOUNT_TYPE] = {"vm.mount_type", T_ENUM, "default|virtiofs|9p|reverse-sshfs"},
    [AGT_CFG_VM_ROSETTA] = {"vm.rosetta", T_ENUM, "off|on"},
    [AGT_CFG_VM_TEMPLATE] = {"vm.template", T_PATH, NULL},
    [AGT_CFG_VM_AGT_SOURCE] = {"vm.agt_source", T_PATH, NULL},
    [AGT_CFG_LIMA_LIMACTL] = {"lima.limactl", T_STR, NULL},
    [AGT_CFG_LIMA_HOME] = {"lima.home", T_PATH, NULL},
    [AGT_CFG_LIMA_START_TIMEOUT] = {"lima.start_timeout", T_DURATION, NULL},
    [AGT_CFG_AGTD_SOCKET] = {"agtd.socket", T_STR, NULL},
    [AGT_CFG_SSH_KNOWN_HOSTS] = {"ssh.known_hosts", T_PATH, NULL},
    [AGT_CFG_SSH_IDENTITY] = {"ssh.identity", T_PATH, NULL},
    [AGT_CFG_SSH_CONNECT_TIMEOUT] = {"ssh.connect_timeout", T_DURATION, NULL},
    [AGT_CFG_SSH_PERSIST] = {"ssh.persist", T_DURATION, NULL},
    /* the jail spec's run options that have a config key; agt's config takes the agents
     * it has profiles of, and no ephemeral home (that is --lockdown's) */
    [AGT_CFG_JAIL_AGENT] = {AGT_RUN_CONFIG(AGENT), T_AGENT, NULL},
    [AGT_CFG_JAIL_ROOTFS] = {AGT_RUN_CONFIG(ROOTFS), T_STR, NULL},
    [AGT_CFG_JAIL_DETACH_KEYS] = {AGT_RUN_CONFIG(DETACH_KEYS), T_KEYS, NULL},
    [AGT_CFG_JAIL_HOME] = {AGT_RUN_CONFIG(HOME), T_ENUM, "persistent|none"},
#define LIMIT_KEY_(a, b, ID, field, ...)                                                           \
  [AGT_CFG_JAIL_##ID] = {"jail.limits." #field, T_LIMIT, NULL, AGT_SPEC_##ID},
    AGT_JAIL_LIMITS(LIMIT_KEY_, _, _)};

/* List keys: their items append. */
#define KEY_MOUNTS "vm.mounts"
#define KEY_ENV AGT_RUN_CONFIG(ENV)
#define KEY_JMOUNTS AGT_RUN_CONFIG(MOUNTS)
#define KEY_TOOLS "jail.tools"
/* agents.NAME.{net,allow}: a section per agent profile. */
#define KEY_AGENTS "agents"
#define NET_MODES agt_jail_run_keys[AGT_RUN_NET].choices

const char *agt_config_key_name(enum agt_cfg_key key)
{
  return (unsigned)key < AGT_CFG_NKEYS ? keys[key].path : "?";
}

char *agt_expand_path(const char *path, const char *base)
{
  const char *home = getenv("HOME");

  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0'))
    return xasprintf("%s%s", home ? home : "", path + 1);
  if (path[0] == '/' || base == NULL)
    return xstrdup(path);
  if (strcmp(path, ".") == 0)
    return xstrdup(base);
  if (path[0] == '.' && path[1] == '/')
    path += 2;
  return xasprintf("%s/%s", base, path);
}

int agt_parse_duration(const char *what, const char *s, uint64_t *seconds, agt_error_t *err)
{
  char *end;
  unsigned long long v;
  uint64_t mul = 1;

  if (s == NULL || *s < '0' || *s > '9')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a duration", what, s ? s : "");
  errno = 0;
  v = strtoull(s, &end, 10);
  if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
    mul = 1;
  else if (strcmp(end, "m") == 0)
    mul = 60;
  else if (strcmp(end, "h") == 0)
    mul = 3600;
  else
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s': use seconds, or a number with s, m or h",
                          what, s);
  if (errno || v > UINT32_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is too long", what, s);
  *seconds = v * mul;
  return 0;
}

static int enum_has(const char *choices, const char *v)
{
  size_t n = strlen(v);
  const char *p = choices;

  while (p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0)
      return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

/* Check a value against its key's type.  Returns -1 with a message that does not name the
 * place: the caller adds file:line:col or the flag. */
static int check_value(enum agt_cfg_key k, const char *v, agt_error_t *err)
{
  const struct key_desc *d = &keys[k];
  uint64_t n;

  switch (d->type) {
  case T_STR:
  case T_PATH:
    if (*v == '\0')
      return agt_error_kind(err, AGT_E_INVALID, "'%s' must not be empty", d->path);
    return 0;
  case T_INSTANCE:
    return agt_lima_name_check(v, err);
  case T_UINT:
    if (agt_parse_u64(d->path, v, &n, err) < 0)
      return -1;
    if (k == AGT_CFG_VM_CPUS && (n == 0 || n > 1024))
      return agt_error_kind(err, AGT_E_INVALID, "'%s' must be within 1..1024", d->path);
    return 0;
  case T_SIZE:
    if (agt_parse_size(d->path, v, &n, err) < 0)
      return -1;
    if ((k == AGT_CFG_VM_MEMORY || k == AGT_CFG_VM_DISK) && n < (1ull << 20))
      return agt_error_kind(err, AGT_E_INVALID, "'%s' %s is less than 1MiB: write a unit (4GiB)",
                            d->path, v);
    if (k == AGT_CFG_VM_JAILS_DISK && n < (1ull << 30))
      return agt_error_kind(err, AGT_E_INVALID,
                            "'%s' %s is less than 1GiB, too small for the jails' disk: write a "
                            "unit (50GiB)",
                            d->path, v);
    return 0;
  case T_LIMIT: {
    struct agt_jail_spec spec;
    agt_jail_spec_init(&spec);
    return agt_jail_spec_set(&spec, d->limit, v, d->path, err);
  }
  case T_DURATION:
    return agt_parse_duration(d->path, v, &n, err);
  case T_AGENT:
    if (*v == '\0' || strlen(v) > 32 || v[0] == '-' ||
        strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v))
      return agt_error_kind(err, AGT_E_INVALID,
                            "'%s' must name an agent profile (1-32 of [a-z0-9-], not starting "
                            "with '-'), not '%s'",
                            d->path, v);
    return 0;
  case T_ENUM:
    if (!enum_has(d->choices, v))
      return agt_error_kind(err, AGT_E_INVALID, "'%s' must be one of %s, not '%s'", d->path,
                            d->choices, v);
    return 0;
  case T_TARGET:
    if (strncmp(v, "lima:", 5) == 0)
      return agt_lima_name_check(v + 5, err);
    if (strcmp(v, "lima") == 0 || strncmp(v, "ssh://", 6) == 0 || strcmp(v, "local") == 0)
      return 0;
    return agt_error_kind(err, AGT_E_INVALID,
                          "'%s' must be lima[:NAME], ssh://USER@HOST[:PORT] or local, not '%s'",
                          d->path, v);
  case T_KEYS: {
    struct agt_detach_keys dk;
    return agt_detach_keys_parse(v, &dk, err) < 0 ? agt_error_wrap(err, "'%s'", d->path) : 0;
  }
  }
  return 0;
}

static struct agt_cfg_agent *agent_get(struct agt_config *c, const char *name);

/* What each agent needs to work at all, allowed unless the config removes it ("!HOST"
 * entries in agents.NAME.allow, or net: none).  opencode: its own provider (OpenCode Zen,
 * the model it uses when none is configured, at opencode.ai/zen), its model catalogue
 * (models.opencode.ai, fetched at start) and the npm registry (provider SDKs and its plugin
 * package are installed at first use).  Providers the user configures in opencode are the
 * user's to add. */
static const struct {
  const char *agent, *host, *why;
} default_allow[] = {
    {"opencode", "opencode.ai:443", "opencode's own provider (Zen)"},
    {"opencode", "models.opencode.ai:443", "opencode's model catalogue"},
    {"opencode", "registry.npmjs.org:443", "the npm packages opencode installs"},
};

static void set_text(struct agt_cfg_value *val, char *text, const struct agt_cfg_origin *o)
{
  free(val->text);
  val->text = text;
  val->origin = *o;
}

char *agt_default_agt_source(const char *built_from, const char *datadir, const char **what)
{
  cleanup_free char *g = xasprintf("%s/guest/meson.build", built_from);

  if (access(g, R_OK) == 0) {
    *what = "the source tree agt was built from";
    return xstrdup(built_from);
  }
  *what = "installed with agt";
  return xasprintf("%s/src", datadir);
}

void agt_config_init(struct agt_config *c)
{
  static const struct agt_cfg_origin def = {AGT_CFG_DEFAULT, NULL, 0, 0, NULL};
  struct agt_cfg_origin o = def;
  const char *lima_home = getenv("LIMA_HOME");
  cleanup_free char *tmpl = xasprintf("%s/lima/agt.yaml", AGT_SOURCE_ROOT);

  memset(c, 0, sizeof *c);
  set_text(&c->v[AGT_CFG_VM_NAME], xstrdup(AGT_LIMA_DEFAULT_INSTANCE), &def);
  set_text(&c->v[AGT_CFG_VM_CPUS], xstrdup("4"), &def);
  set_text(&c->v[AGT_CFG_VM_MEMORY], xstrdup("4GiB"), &def);
  set_text(&c->v[AGT_CFG_VM_DISK], xstrdup("50GiB"), &def);
  set_text(&c->v[AGT_CFG_VM_JAILS_DISK], xstrdup("50GiB"), &def);
  set_text(&c->v[AGT_CFG_VM_TYPE], xstrdup("auto"), &def);
  set_text(&c->v[AGT_CFG_VM_ARCH], xstrdup("default"), &def);
  set_text(&c->v[AGT_CFG_VM_MOUNT_TYPE], xstrdup("default"), &def);
  set_text(&c->v[AGT_CFG_VM_ROSETTA], xstrdup("off"), &def);
  if (access(tmpl, R_OK) == 0) {
    o.what = "the source tree agt was built from";
    set_text(&c->v[AGT_CFG_VM_TEMPLATE], steal_pointer(&tmpl), &o);
  } else {
    o.what = "installed with agt";
    set_text(&c->v[AGT_CFG_VM_TEMPLATE], xasprintf("%s/lima/agt.yaml", AGT_DATADIR), &o);
  }
  {
    char *src = agt_default_agt_source(AGT_SOURCE_ROOT, AGT_DATADIR, &o.what);
    set_text(&c->v[AGT_CFG_VM_AGT_SOURCE], src, &o);
  }
  set_text(&c->v[AGT_CFG_LIMA_LIMACTL], xstrdup("limactl"), &def);
  if (lima_home && *lima_home) {
    o.src = AGT_CFG_ENV;
    o.what = "LIMA_HOME";
    set_text(&c->v[AGT_CFG_LIMA_HOME], xstrdup(lima_home), &o);
  } else {
    set_text(&c->v[AGT_CFG_LIMA_HOME], agt_platform_lima_home(agt_os_native()), &def);
  }
  set_text(&c->v[AGT_CFG_LIMA_START_TIMEOUT], xstrdup("10m"), &def);
  set_text(&c->v[AGT_CFG_AGTD_SOCKET], xstrdup("/run/agt/agtd.sock"), &def);
  set_text(&c->v[AGT_CFG_SSH_KNOWN_HOSTS], agt_expand_path("~/.ssh/known_hosts", NULL), &def);
  set_text(&c->v[AGT_CFG_SSH_CONNECT_TIMEOUT], xstrdup("10s"), &def);
  set_text(&c->v[AGT_CFG_SSH_PERSIST], xstrdup("10m"), &def);
  set_text(&c->v[AGT_CFG_JAIL_AGENT], xstrdup(AGT_RUN_DEFAULT(AGENT)), &def);
  set_text(&c->v[AGT_CFG_JAIL_ROOTFS], xstrdup(AGT_RUN_DEFAULT(ROOTFS)), &def);
  set_text(&c->v[AGT_CFG_JAIL_DETACH_KEYS], xstrdup(AGT_RUN_DEFAULT(DETACH_KEYS)), &def);
  set_text(&c->v[AGT_CFG_JAIL_HOME], xstrdup("persistent"), &def);
  for (size_t i = 0; i < sizeof default_allow / sizeof default_allow[0]; i++) {
    struct agt_cfg_agent *a = agent_get(c, default_allow[i].agent);
    a->allow = xrealloc(a->allow, (a->nallow + 1) * sizeof *a->allow);
    a->allow[a->nallow].text = xstrdup(default_allow[i].host);
    a->allow[a->nallow].origin = def;
    a->allow[a->nallow++].origin.what = default_allow[i].why;
  }
}

void agt_config_release(struct agt_config *c)
{
  for (int i = 0; i < AGT_CFG_NKEYS; i++)
    free(c->v[i].text);
  for (size_t i = 0; i < c->nmounts; i++) {
    free(c->mounts[i].location);
    free(c->mounts[i].mount_point);
  }
  free(c->mounts);
  for (size_t i = 0; i < c->nenv; i++)
    free(c->env[i].text);
  free(c->env);
  for (size_t i = 0; i < c->njmounts; i++)
    free(c->jmounts[i].path);
  free(c->jmounts);
  for (size_t i = 0; i < c->ntools; i++)
    free(c->tools[i].text);
  free(c->tools);
  for (size_t i = 0; i < c->nagents; i++) {
    struct agt_cfg_agent *a = &c->agents[i];
    free(a->name);
    free(a->net.text);
    free(a->version.text);
    for (size_t k = 0; k < a->nallow; k++)
      free(a->allow[k].text);
    free(a->allow);
  }
  free(c->agents);
  free(c->user_file);
  for (size_t i = 0; i < c->nfiles; i++)
    free(c->files[i]);
  free(c->files);
  memset(c, 0, sizeof *c);
}

const char *agt_config_get(const struct agt_config *c, enum agt_cfg_key key)
{
  return c->v[key].text;
}

const struct agt_cfg_agent *agt_config_agent(const struct agt_config *c, const char *name)
{
  for (size_t i = 0; i < c->nagents; i++)
    if (strcmp(c->agents[i].name, name) == 0)
      return &c->agents[i];
  return NULL;
}

int agt_config_set(struct agt_config *c, enum agt_cfg_key key, const char *value,
                   enum agt_cfg_src src, const char *what, agt_error_t *err)
{
  struct agt_cfg_origin o = {src, NULL, 0, 0, what};

  if (check_value(key, value, err) < 0)
    return agt_error_wrap(err, "%s %s", src == AGT_CFG_ENV ? "variable" : "option", what);
  if (keys[key].type == T_PATH)
    set_text(&c->v[key], agt_expand_path(value, NULL), &o);
  else
    set_text(&c->v[key], xstrdup(value), &o);
  return 0;
}

int agt_config_size(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                    agt_error_t *err)
{
  return agt_parse_size(keys[key].path, c->v[key].text, out, err);
}

int agt_config_u64(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                   agt_error_t *err)
{
  return agt_parse_u64(keys[key].path, c->v[key].text, out, err);
}

int agt_config_seconds(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                       agt_error_t *err)
{
  return agt_parse_duration(keys[key].path, c->v[key].text, out, err);
}

/* Loading one file. */

struct loader {
  struct agt_config *c;
  agt_yaml_t *y;
  const char *file; /* as kept in c->files */
  const char *base;
  int overlay; /* the repository's .agt/config.yaml */
};

static struct agt_cfg_origin origin_of(struct loader *l, yaml_node_t *n)
{
  struct agt_cfg_origin o = {AGT_CFG_FILE, l->file, (unsigned)n->start_mark.line + 1,
                             (unsigned)n->start_mark.column + 1, NULL};
  return o;
}

static int load_scalar(struct loader *l, enum agt_cfg_key k, yaml_node_t *n, agt_error_t *err)
{
  const char *v = agt_yaml_scalar(n);
  struct agt_cfg_origin o = origin_of(l, n);
  agt_error_t e = NULL;

  if (v == NULL)
    return agt_yaml_error(l->y, n, err, "'%s' must be a single value, not a %s", keys[k].path,
                          n->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
  if (check_value(k, v, &e) < 0) {
    agt_yaml_error(l->y, n, err, "%s", e->msg);
    agt_error_release(&e);
    return -1;
  }
  if (keys[k].type == T_PATH)
    set_text(&l->c->v[k], agt_expand_path(v, l->base), &o);
  else
    set_text(&l->c->v[k], xstrdup(v), &o);
  return 0;
}

static int load_mount(struct loader *l, yaml_node_t *n, agt_error_t *err)
{
  static const char *const known[] = {"location", "writable", "mount_point", NULL};
  struct agt_cfg_mount m = {NULL, NULL, 0, origin_of(l, n)};
  const char *loc = NULL, *mp = NULL;

  if (n->type == YAML_SCALAR_NODE) {
    loc = agt_yaml_scalar(n);
  } else if (n->type == YAML_MAPPING_NODE) {
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *kn = agt_yaml_node(l->y, p->key);
      const char *k = agt_yaml_scalar(kn);
      const char *const *q;
      for (q = known; k && *q; q++)
        if (strcmp(*q, k) == 0)
          break;
      if (k == NULL || *q == NULL)
        return agt_yaml_error(l->y, kn, err,
                              "unknown key '%s[].%s' (location, writable, "
                              "mount_point)",
                              KEY_MOUNTS, k ? k : "?");
    }
    if (agt_yaml_get_str(l->y, n, "location", &loc, err) < 0 ||
        agt_yaml_get_str(l->y, n, "mount_point", &mp, err) < 0 ||
        agt_yaml_get_bool(l->y, n, "writable", &m.writable, err) < 0)
      return -1;
  } else {
    return agt_yaml_error(l->y, n, err, "each of '%s' is a path or {location, writable}",
                          KEY_MOUNTS);
  }
  if (loc == NULL || *loc == '\0')
    return agt_yaml_error(l->y, n, err, "'%s' entry needs a location", KEY_MOUNTS);
  if (mp && mp[0] != '/')
    return agt_yaml_error(l->y, agt_yaml_get(l->y, n, "mount_point"), err,
                          "'%s' mount_point '%s' must be an absolute path", KEY_MOUNTS, mp);
  m.location = agt_expand_path(loc, l->base);
  m.mount_point = mp ? xstrdup(mp) : NULL;
  l->c->mounts = xrealloc(l->c->mounts, (l->c->nmounts + 1) * sizeof *l->c->mounts);
  l->c->mounts[l->c->nmounts++] = m;
  return 0;
}

/* jail.env entries: NAME=VALUE, or NAME alone for its value in agt's environment (read by
 * agt jail run).  Only the user's own file may name one: a repository's overlay could
 * otherwise copy the user's secrets into the jails of a project they merely cloned. */
static int load_env(struct loader *l, yaml_node_t *n, agt_error_t *err)
{
  const char *v = agt_yaml_scalar(n);
  const char *eq = v ? strchr(v, '=') : NULL;
  const char *why;
  struct agt_cfg_item it;

  if (v == NULL)
    return agt_yaml_error(l->y, n, err, "each of '%s' is NAME=VALUE or NAME", KEY_ENV);
  why = agt_env_name_problem(v, eq ? (size_t)(eq - v) : strlen(v));
  if (why)
    return agt_yaml_error(l->y, n, err, "'%s' entry: the name%s is not a variable name: %s",
                          KEY_ENV, eq ? " before '='" : "", why);
  if (eq == NULL && l->overlay)
    return agt_yaml_error(l->y, n, err,
                          "'%s' entry '%s' takes its value from agt's environment, which only "
                          "the user's config may do, not a repository's .agt/config.yaml",
                          KEY_ENV, v);
  it.text = xstrdup(v);
  it.origin = origin_of(l, n);
  l->c->env = xrealloc(l->c->env, (l->c->nenv + 1) * sizeof *l->c->env);
  l->c->env[l->c->nenv++] = it;
  return 0;
}

/* jail.mounts entries: PATH (read-only) or {path, writable}.  A repository's overlay may
 * name only paths inside the repository: it could otherwise show the jails of a project the
 * user merely cloned their ~/.ssh or ~/.aws. */
static int load_jmount(struct loader *l, yaml_node_t *n, agt_error_t *err)
{
  static const char *const known[] = {"path", "writable", NULL};
  struct agt_cfg_jmount m = {NULL, 0, origin_of(l, n)};
  const char *path = NULL;

  if (n->type == YAML_SCALAR_NODE) {
    path = agt_yaml_scalar(n);
  } else if (n->type == YAML_MAPPING_NODE) {
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *kn = agt_yaml_node(l->y, p->key);
      const char *k = agt_yaml_scalar(kn);
      const char *const *q;
      for (q = known; k && *q; q++)
        if (strcmp(*q, k) == 0)
          break;
      if (k == NULL || *q == NULL)
        return agt_yaml_error(l->y, kn, err, "unknown key '%s[].%s' (path, writable)", KEY_JMOUNTS,
                              k ? k : "?");
    }
    if (agt_yaml_get_str(l->y, n, "path", &path, err) < 0 ||
        agt_yaml_get_bool(l->y, n, "writable", &m.writable, err) < 0)
      return -1;
  } else {
    return agt_yaml_error(l->y, n, err, "each of '%s' is a path or {path, writable}", KEY_JMOUNTS);
  }
  if (path == NULL || *path == '\0')
    return agt_yaml_error(l->y, n, err, "'%s' entry needs a path", KEY_JMOUNTS);
  m.path = agt_expand_path(path, l->base);
  if (l->overlay) {
    size_t b = strlen(l->base);
    int dots = strstr(m.path, "/../") != NULL ||
               (strlen(m.path) >= 3 && strcmp(m.path + strlen(m.path) - 3, "/..") == 0);
    if (dots || strncmp(m.path, l->base, b) != 0 || (m.path[b] != '/' && m.path[b] != '\0')) {
      agt_yaml_error(l->y, n, err,
                     "'%s' entry '%s' is outside the repository '%s': a repository's "
                     ".agt/config.yaml may mount only its own files (the user's config may "
                     "mount any)",
                     KEY_JMOUNTS, path, l->base);
      free(m.path);
      return -1;
    }
  }
  l->c->jmounts = xrealloc(l->c->jmounts, (l->c->njmounts + 1) * sizeof *l->c->jmounts);
  l->c->jmounts[l->c->njmounts++] = m;
  return 0;
}

/* A tool's file name: what goes into /usr/local/bin. */
static const char *tool_name_problem(const char *s, size_t n)
{
  if (n == 0)
    return "it is empty";
  if (n > 64)
    return "a name has at most 64 characters";
  if (s[0] == '.' || s[0] == '-')
    return "a name does not start with '.' or '-'";
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr("._+-", s[i]))
      return "a name is made of letters, digits and . _ + -";
  return NULL;
}

const char *agt_config_tool_problem(const char *tool, int overlay)
{
  const char *base;

  if (tool[0] != '/')
    return tool_name_problem(tool, strlen(tool));
  if (overlay)
    return "a repository's .agt/config.yaml may name tools on the guest's PATH only, not paths "
           "(the user's config may)";
  if (strlen(tool) > 255)
    return "a path has at most 255 characters";
  if (strstr(tool, "//") || strstr(tool, "/./") || strstr(tool, "/../") ||
      tool[strlen(tool) - 1] == '/' ||
      (strlen(tool) >= 3 && strcmp(tool + strlen(tool) - 3, "/..") == 0) ||
      (strlen(tool) >= 2 && strcmp(tool + strlen(tool) - 2, "/.") == 0))
    return "a path must be clean (no '.', '..' or empty component, no trailing '/')";
  for (const char *p = tool; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\' || *p == 0x7f)
      return "a path has no quotes, backslashes or control characters";
  base = strrchr(tool, '/') + 1;
  return tool_name_problem(base, strlen(base));
}

int agt_config_add_tool(struct agt_config *c, const char *tool, const struct agt_cfg_origin *o,
                        agt_error_t *err)
{
  const char *why = agt_config_tool_problem(tool, 0);

  if (why)
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is not a tool: %s", tool, why);
  for (size_t i = 0; i < c->ntools; i++)
    if (strcmp(c->tools[i].text, tool) == 0)
      return 0; /* named before: it keeps its place */
  c->tools = xrealloc(c->tools, (c->ntools + 1) * sizeof *c->tools);
  c->tools[c->ntools].text = xstrdup(tool);
  c->tools[c->ntools++].origin = *o;
  return 0;
}

/* jail.tools entries: a name, found on the guest's PATH, or an absolute path on the guest
 * (the user's config only: a repository could otherwise copy any file of the guest into
 * its jails). */
static int load_tool(struct loader *l, yaml_node_t *n, agt_error_t *err)
{
  const char *v = agt_yaml_scalar(n);
  const char *why;
  struct agt_cfg_origin o = origin_of(l, n);
  agt_error_t e = NULL;

  if (v == NULL || n->type != YAML_SCALAR_NODE)
    return agt_yaml_error(l->y, n, err, "each of '%s' is a name or an absolute path", KEY_TOOLS);
  why = agt_config_tool_problem(v, l->overlay);
  if (why)
    return agt_yaml_error(l->y, n, err, "'%s' entry '%s': %s", KEY_TOOLS, v, why);
  if (agt_config_add_tool(l->c, v, &o, &e) < 0) {
    agt_yaml_error(l->y, n, err, "'%s': %s", KEY_TOOLS, e->msg);
    agt_error_release(&e);
    return -1;
  }
  return 0;
}

static int load_list(struct loader *l, const char *path, yaml_node_t *n, agt_error_t *err)
{
  yaml_node_item_t *it;

  if (n->type == YAML_SCALAR_NODE && agt_yaml_scalar(n)[0] == '\0')
    return 0; /* "mounts:" with nothing: an empty list */
  if (n->type != YAML_SEQUENCE_NODE)
    return agt_yaml_error(l->y, n, err, "'%s' must be a list", path);
  for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
    yaml_node_t *item = agt_yaml_node(l->y, *it);
    int r = strcmp(path, KEY_MOUNTS) == 0    ? load_mount(l, item, err)
            : strcmp(path, KEY_JMOUNTS) == 0 ? load_jmount(l, item, err)
            : strcmp(path, KEY_TOOLS) == 0   ? load_tool(l, item, err)
                                             : load_env(l, item, err);
    if (r < 0)
      return -1;
  }
  return 0;
}

static int allow_has(const struct agt_cfg_agent *a, const char *host)
{
  for (size_t i = 0; i < a->nallow; i++)
    if (strcmp(a->allow[i].text, host) == 0)
      return 1;
  return 0;
}

/* Remove every entry equal to host; returns how many. */
static size_t allow_remove(struct agt_cfg_agent *a, const char *host)
{
  size_t k = 0, removed = 0;

  for (size_t i = 0; i < a->nallow; i++) {
    if (strcmp(a->allow[i].text, host) == 0) {
      free(a->allow[i].text);
      removed++;
      continue;
    }
    a->allow[k++] = a->allow[i];
  }
  a->nallow = k;
  return removed;
}

static struct agt_cfg_agent *agent_get(struct agt_config *c, const char *name)
{
  struct agt_cfg_agent *a;

  for (size_t i = 0; i < c->nagents; i++)
    if (strcmp(c->agents[i].name, name) == 0)
      return &c->agents[i];
  c->agents = xrealloc(c->agents, (c->nagents + 1) * sizeof *c->agents);
  a = &c->agents[c->nagents++];
  memset(a, 0, sizeof *a);
  a->name = xstrdup(name);
  return a;
}

static int load_agent(struct loader *l, const char *name, yaml_node_t *map, agt_error_t *err)
{
  struct agt_cfg_agent *a = agent_get(l->c, name);

  if (map->type == YAML_SCALAR_NODE && agt_yaml_scalar(map)[0] == '\0')
    return 0;
  if (map->type != YAML_MAPPING_NODE)
    return agt_yaml_error(l->y, map, err, "'%s.%s' must be a mapping (net, allow, version)",
                          KEY_AGENTS, name);
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(l->y, p->key), *vn = agt_yaml_node(l->y, p->value);
    const char *key = agt_yaml_scalar(kn);

    if (key && strcmp(key, "net") == 0) {
      const char *v = agt_yaml_scalar(vn);
      if (v == NULL || !enum_has(NET_MODES, v))
        return agt_yaml_error(l->y, vn, err, "'%s.%s.net' must be one of %s, not '%s'", KEY_AGENTS,
                              name, NET_MODES, v ? v : "a list or mapping");
      struct agt_cfg_origin o = origin_of(l, vn);
      set_text(&a->net, xstrdup(v), &o);
    } else if (key && strcmp(key, "allow") == 0) {
      if (vn->type == YAML_SCALAR_NODE && agt_yaml_scalar(vn)[0] == '\0')
        continue;
      if (vn->type != YAML_SEQUENCE_NODE)
        return agt_yaml_error(l->y, vn, err, "'%s.%s.allow' must be a list", KEY_AGENTS, name);
      for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top;
           it++) {
        yaml_node_t *item = agt_yaml_node(l->y, *it);
        const char *v = agt_yaml_scalar(item);
        if (v && v[0] == '!') { /* removes what came before: a default, the user's */
          if (allow_remove(a, v + 1) == 0)
            return agt_yaml_error(l->y, item, err,
                                  "'%s.%s.allow' entry '%s' removes nothing: '%s' is not in the "
                                  "list before it ('agt config show' lists it)",
                                  KEY_AGENTS, name, v, v + 1);
          continue;
        }
        if (v == NULL || !agt_jail_allow_ok(v)) /* agtd checks the rest */
          return agt_yaml_error(l->y, item, err,
                                "'%s.%s.allow' entry '%s' is not HOST[:PORT] (a name, *.suffix "
                                "or an address, without scheme or path)",
                                KEY_AGENTS, name, v ? v : "?");
        if (allow_has(a, v))
          continue; /* given before (a default, say): it keeps its place */
        a->allow = xrealloc(a->allow, (a->nallow + 1) * sizeof *a->allow);
        a->allow[a->nallow].text = xstrdup(v);
        a->allow[a->nallow++].origin = origin_of(l, item);
      }
    } else if (key && strcmp(key, "version") == 0) {
      /* the pin of its package (docs/AGENTS.md), as `agt agents update` writes it */
      const char *v = agt_yaml_scalar(vn);
      if (v == NULL || *v == '\0' ||
          strspn(v, "0123456789.-+abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
              strlen(v))
        return agt_yaml_error(l->y, vn, err, "'%s.%s.version' must be a version like 1.2.3",
                              KEY_AGENTS, name);
      struct agt_cfg_origin o = origin_of(l, vn);
      set_text(&a->version, xstrdup(v), &o);
    } else {
      return agt_yaml_error(l->y, kn, err, "unknown key '%s.%s.%s' (net, allow, version)",
                            KEY_AGENTS, name, key ? key : "?");
    }
  }
  return 0;
}

static int load_agents(struct loader *l, yaml_node_t *map, agt_error_t *err)
{
  if (map->type == YAML_SCALAR_NODE && agt_yaml_scalar(map)[0] == '\0')
    return 0;
  if (map->type != YAML_MAPPING_NODE)
    return agt_yaml_error(l->y, map, err, "'%s' must be a mapping of agent names", KEY_AGENTS);
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(l->y, p->key);
    const char *name = agt_yaml_scalar(kn);
    agt_error_t e = NULL;

    if (name == NULL || agt_name_check("agent name", name, &e) < 0) {
      agt_yaml_error(l->y, kn, err, "'%s': %s", KEY_AGENTS, e ? e->msg : "keys must be names");
      agt_error_release(&e);
      return -1;
    }
    if (load_agent(l, name, agt_yaml_node(l->y, p->value), err) < 0)
      return -1;
  }
  return 0;
}

static int is_section(const char *path)
{
  size_t n = strlen(path);

  for (int k = 0; k < AGT_CFG_NKEYS; k++)
    if (strncmp(keys[k].path, path, n) == 0 && keys[k].path[n] == '.')
      return 1;
  return strncmp(KEY_MOUNTS, path, n) == 0 && KEY_MOUNTS[n] == '.';
}

static int load_map(struct loader *l, const char *prefix, yaml_node_t *map, agt_error_t *err)
{
  yaml_node_pair_t *p;

  if (map->type == YAML_SCALAR_NODE && agt_yaml_scalar(map)[0] == '\0')
    return 0; /* an empty section ("vm:" alone) */
  if (map->type != YAML_MAPPING_NODE)
    return agt_yaml_error(l->y, map, err, "'%s' must be a mapping", prefix ? prefix : "config");
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = agt_yaml_node(l->y, p->key), *vn = agt_yaml_node(l->y, p->value);
    const char *key = agt_yaml_scalar(kn);
    cleanup_free char *path = NULL;
    int k, r;

    if (key == NULL)
      return agt_yaml_error(l->y, kn, err, "keys must be strings");
    path = prefix ? xasprintf("%s.%s", prefix, key) : xstrdup(key);
    for (k = 0; k < AGT_CFG_NKEYS; k++)
      if (strcmp(keys[k].path, path) == 0)
        break;
    if (k < AGT_CFG_NKEYS)
      r = load_scalar(l, (enum agt_cfg_key)k, vn, err);
    else if (strcmp(path, KEY_MOUNTS) == 0 || strcmp(path, KEY_ENV) == 0 ||
             strcmp(path, KEY_JMOUNTS) == 0 || strcmp(path, KEY_TOOLS) == 0)
      r = load_list(l, path, vn, err);
    else if (strcmp(path, KEY_AGENTS) == 0)
      r = load_agents(l, vn, err);
    else if (is_section(path))
      r = load_map(l, path, vn, err);
    else
      r = agt_yaml_error(l->y, kn, err, "unknown key '%s' (see docs/CONFIG.md)", path);
    if (r < 0)
      return -1;
  }
  return 0;
}

static char *dir_of(const char *file)
{
  const char *slash = strrchr(file, '/');

  if (slash == NULL)
    return xstrdup(".");
  if (slash == file)
    return xstrdup("/");
  return xstrndup(file, (size_t)(slash - file));
}

static int load_file(struct agt_config *c, const char *file, const char *base, int overlay,
                     agt_error_t *err)
{
  agt_yaml_t y;
  struct loader l;
  cleanup_free char *dir = NULL;
  yaml_node_t *root;
  int r;

  if (agt_yaml_load_file(&y, file, err) < 0 || agt_yaml_refuse_nul(&y, err) < 0) {
    agt_yaml_release(&y);
    /* a file that cannot be read is a config error too (exit 2), as one that does not parse */
    (*err)->kind = AGT_E_INVALID;
    return -1;
  }
  c->files = xrealloc(c->files, (c->nfiles + 1) * sizeof *c->files);
  c->files[c->nfiles++] = xstrdup(file);
  if (base == NULL)
    base = dir = dir_of(file);
  l.c = c;
  l.y = &y;
  l.file = c->files[c->nfiles - 1];
  l.base = base;
  l.overlay = overlay;
  root = agt_yaml_root(&y);
  if (root == NULL) /* an empty file */
    r = 0;
  else
    r = load_map(&l, NULL, root, err);
  agt_yaml_release(&y);
  return r;
}

int agt_config_load_file(struct agt_config *c, const char *file, const char *base, agt_error_t *err)
{
  return load_file(c, file, base, 0, err);
}

static int file_exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

/* The directory holding .agt/config.yaml, searched from cwd up to the repository's root. */
static char *find_repo_overlay(const char *cwd)
{
  cleanup_free char *dir = xstrdup(cwd);

  for (;;) {
    cleanup_free char *cand = xasprintf("%s/.agt/config.yaml", strcmp(dir, "/") ? dir : "");
    cleanup_free char *git = xasprintf("%s/.git", strcmp(dir, "/") ? dir : "");
    char *slash;

    if (file_exists(cand))
      return steal_pointer(&dir);
    if (file_exists(git) || strcmp(dir, "/") == 0)
      return NULL;
    slash = strrchr(dir, '/');
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
  }
}

int agt_config_load(struct agt_config *c, const struct agt_config_paths *paths, agt_error_t *err)
{
  cleanup_free char *user = NULL, *cwdbuf = NULL, *root = NULL;
  const char *env;
  const char *named_by = NULL; /* the flag or variable that named the user's file */

  if (paths && paths->user_file) {
    user = agt_expand_path(paths->user_file, NULL);
    named_by = "--config";
  } else if ((env = getenv("AGT_CONFIG")) && *env) {
    user = agt_expand_path(env, NULL);
    named_by = "$AGT_CONFIG";
  } else {
    user = agt_platform_config_file(paths && paths->os ? agt_os_from_name(paths->os)
                                                       : agt_os_native());
  }
  free(c->user_file);
  c->user_file = xstrdup(user);
  if (named_by || file_exists(user))
    if (agt_config_load_file(c, user, NULL, err) < 0) {
      /* not read at all (a parse error names file:line:col itself): say it is the config */
      if (err && *err && (*err)->status)
        agt_error_wrap(err, "%s", named_by ? named_by : "config file");
      return -1;
    }

  if (!(paths && paths->no_repo)) {
    const char *cwd = paths ? paths->cwd : NULL;
    if (cwd == NULL) {
      char buf[4096];
      if (getcwd(buf, sizeof buf))
        cwd = cwdbuf = xstrdup(buf);
    }
    if (cwd && (root = find_repo_overlay(cwd))) {
      cleanup_free char *f = xasprintf("%s/.agt/config.yaml", strcmp(root, "/") ? root : "");
      if (strcmp(f, user) != 0 && load_file(c, f, root, 1, err) < 0)
        return -1;
    }
  }

  if ((env = getenv("AGT_TARGET")) && *env &&
      agt_config_set(c, AGT_CFG_TARGET, env, AGT_CFG_ENV, "AGT_TARGET", err) < 0)
    return -1;
  if ((env = getenv("AGT_INSTANCE")) && *env &&
      agt_config_set(c, AGT_CFG_VM_NAME, env, AGT_CFG_ENV, "AGT_INSTANCE", err) < 0)
    return -1;
  return 0;
}

/* Showing the result. */

char *agt_cfg_origin_str(const struct agt_cfg_origin *o)
{
  switch (o->src) {
  case AGT_CFG_FILE:
    return xasprintf("%s:%u:%u", o->file, o->line, o->col);
  case AGT_CFG_ENV:
    return xasprintf("env %s", o->what);
  case AGT_CFG_FLAG:
    return xasprintf("flag %s", o->what);
  case AGT_CFG_DEFAULT:
    return o->what ? xasprintf("default: %s", o->what) : xstrdup("default");
  }
  return xstrdup("?");
}

/* A scalar as YAML: plain when that reads back as the same string, else double-quoted. */
static void put_scalar(FILE *f, const char *s)
{
  int plain = *s != '\0' && strchr("-?:,[]{}#&*!|>'\"%@` ~", s[0]) == NULL &&
              strstr(s, ": ") == NULL && strstr(s, " #") == NULL && s[strlen(s) - 1] != ' ' &&
              s[strlen(s) - 1] != ':' && strcmp(s, "true") && strcmp(s, "false") &&
              strcmp(s, "null") && strcmp(s, "yes") && strcmp(s, "no");
  if (plain) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void put_line(FILE *f, int indent, const char *key, const char *value,
                     const struct agt_cfg_origin *o)
{
  char *line = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&line, &len);
  cleanup_free char *where = o ? agt_cfg_origin_str(o) : NULL;

  if (m == NULL)
    return;
  fprintf(m, "%*s%s", indent, "", key);
  if (value) {
    fputc(' ', m);
    put_scalar(m, value);
  }
  fclose(m);
  if (where)
    fprintf(f, "%-44s # %s\n", line, where);
  else if (value == NULL)
    fprintf(f, "%-44s # unset\n", line);
  else
    fprintf(f, "%s\n", line);
  free(line);
}

static void show_lists_after(const struct agt_config *c, enum agt_cfg_key k, FILE *f)
{
  if (k == AGT_CFG_VM_AGT_SOURCE) {
    fprintf(f, "  mounts:%s\n", c->nmounts ? "" : " []");
    for (size_t i = 0; i < c->nmounts; i++) {
      const struct agt_cfg_mount *m = &c->mounts[i];
      put_line(f, 4, "- location:", m->location, &m->origin);
      if (m->mount_point)
        put_line(f, 6, "mount_point:", m->mount_point, NULL);
      fprintf(f, "      writable: %s\n", m->writable ? "true" : "false"); /* a boolean */
    }
  } else if (k == AGT_CFG_JAIL_ROOTFS) {
    fprintf(f, "  env:%s\n", c->nenv ? "" : " []");
    for (size_t i = 0; i < c->nenv; i++)
      put_line(f, 4, "-", c->env[i].text, &c->env[i].origin);
    fprintf(f, "  mounts:%s\n", c->njmounts ? "" : " []");
    for (size_t i = 0; i < c->njmounts; i++) {
      put_line(f, 4, "- path:", c->jmounts[i].path, &c->jmounts[i].origin);
      fprintf(f, "      writable: %s\n", c->jmounts[i].writable ? "true" : "false");
    }
    fprintf(f, "  tools:%s\n", c->ntools ? "" : " []");
    for (size_t i = 0; i < c->ntools; i++)
      put_line(f, 4, "-", c->tools[i].text, &c->tools[i].origin);
  }
}

void agt_config_show(const struct agt_config *c, FILE *f)
{
  char section[32] = "";

  fprintf(f, "# agt's configuration, merged; each value says where it came from.\n");
  if (c->nfiles == 0)
    fprintf(f, "# files: none (defaults only)\n");
  for (size_t i = 0; i < c->nfiles; i++)
    fprintf(f, "# file: %s\n", c->files[i]);
  for (int k = 0; k < AGT_CFG_NKEYS; k++) {
    const char *path = keys[k].path, *last = strrchr(path, '.');
    const struct agt_cfg_value *v = &c->v[k];
    cleanup_free char *key = xasprintf("%s:", last ? last + 1 : path);
    char sec[32];
    int indent = 0;

    /* "vm:", "jail:" and "jail.limits:" open once, before their first key */
    snprintf(sec, sizeof sec, "%.*s", last ? (int)(last - path) : 0, path);
    if (strcmp(sec, section) != 0) {
      const char *dot = strchr(sec, '.');
      if (dot == NULL || strncmp(sec, section, (size_t)(dot - sec)) != 0)
        fprintf(f, "%.*s:\n", dot ? (int)(dot - sec) : (int)strlen(sec), sec);
      if (dot)
        fprintf(f, "  %s:\n", dot + 1);
      snprintf(section, sizeof section, "%s", sec);
    }
    for (const char *p = path; (p = strchr(p, '.')); p++)
      indent += 2;
    put_line(f, indent, key, v->text, v->text ? &v->origin : NULL);
    show_lists_after(c, (enum agt_cfg_key)k, f);
  }
  fprintf(f, "%s:%s\n", KEY_AGENTS, c->nagents ? "" : " {}");
  for (size_t i = 0; i < c->nagents; i++) {
    const struct agt_cfg_agent *a = &c->agents[i];
    fprintf(f, "  %s:\n", a->name);
    put_line(f, 4, "net:", a->net.text, a->net.text ? &a->net.origin : NULL);
    if (a->version.text)
      put_line(f, 4, "version:", a->version.text, &a->version.origin);
    fprintf(f, "    allow:%s\n", a->nallow ? "" : " []");
    for (size_t k = 0; k < a->nallow; k++)
      put_line(f, 6, "-", a->allow[k].text, &a->allow[k].origin);
  }
}

void agt_config_show_json(const struct agt_config *c, FILE *f)
{
  json_t *o = json_object(), *mounts = json_array(), *env = json_array(), *files = json_array();
  json_t *agents = json_object(), *jmounts = json_array(), *tools = json_array();
  char *s;

  for (int k = 0; k < AGT_CFG_NKEYS; k++) {
    cleanup_free char *where = NULL;
    if (c->v[k].text == NULL) {
      json_object_set_new(o, keys[k].path, json_null());
      continue;
    }
    where = agt_cfg_origin_str(&c->v[k].origin);
    json_object_set_new(o, keys[k].path,
                        json_pack("{s:s, s:s}", "value", c->v[k].text, "from", where));
  }
  for (size_t i = 0; i < c->nmounts; i++) {
    cleanup_free char *where = agt_cfg_origin_str(&c->mounts[i].origin);
    json_t *m = json_pack("{s:s, s:b, s:s}", "location", c->mounts[i].location, "writable",
                          c->mounts[i].writable, "from", where);
    if (c->mounts[i].mount_point)
      json_object_set_new(m, "mount_point", json_string(c->mounts[i].mount_point));
    json_array_append_new(mounts, m);
  }
  for (size_t i = 0; i < c->nenv; i++) {
    cleanup_free char *where = agt_cfg_origin_str(&c->env[i].origin);
    json_array_append_new(env, json_pack("{s:s, s:s}", "value", c->env[i].text, "from", where));
  }
  for (size_t i = 0; i < c->njmounts; i++) {
    cleanup_free char *where = agt_cfg_origin_str(&c->jmounts[i].origin);
    json_array_append_new(jmounts, json_pack("{s:s, s:b, s:s}", "path", c->jmounts[i].path,
                                             "writable", c->jmounts[i].writable, "from", where));
  }
  for (size_t i = 0; i < c->ntools; i++) {
    cleanup_free char *where = agt_cfg_origin_str(&c->tools[i].origin);
    json_array_append_new(tools, json_pack("{s:s, s:s}", "value", c->tools[i].text, "from", where));
  }
  for (size_t i = 0; i < c->nagents; i++) {
    const struct agt_cfg_agent *a = &c->agents[i];
    json_t *allow = json_array(), *net = json_null();
    for (size_t k = 0; k < a->nallow; k++) {
      cleanup_free char *where = agt_cfg_origin_str(&a->allow[k].origin);
      json_array_append_new(allow,
                            json_pack("{s:s, s:s}", "value", a->allow[k].text, "from", where));
    }
    if (a->net.text) {
      cleanup_free char *where = agt_cfg_origin_str(&a->net.origin);
      net = json_pack("{s:s, s:s}", "value", a->net.text, "from", where);
    }
    json_object_set_new(agents, a->name, json_pack("{s:o, s:o}", "net", net, "allow", allow));
    if (a->version.text) {
      cleanup_free char *where = agt_cfg_origin_str(&a->version.origin);
      json_object_set_new(json_object_get(agents, a->name), "version",
                          json_pack("{s:s, s:s}", "value", a->version.text, "from", where));
    }
  }
  for (size_t i = 0; i < c->nfiles; i++)
    json_array_append_new(files, json_string(c->files[i]));
  json_object_set_new(o, KEY_MOUNTS, mounts);
  json_object_set_new(o, KEY_ENV, env);
  json_object_set_new(o, KEY_JMOUNTS, jmounts);
  json_object_set_new(o, KEY_TOOLS, tools);
  json_object_set_new(o, KEY_AGENTS, agents);
  json_object_set_new(o, "files", files);
  s = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
  if (s)
    fprintf(f, "%s\n", s);
  free(s);
  json_decref(o);
}
