/* Jail records: validation of a create request, the on-disk record, listing. */
#include "jail.h"
#include "jail_net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "disk.h"
#include "fsutil.h"
#include "home.h"
#include "log.h"
#include "names.h"
#include "proto.h"
#include "rootfs/rootfs.h"
#include "rootfs_cache.h"
#include "secrets.h"
#include "server.h"
#include "xalloc.h"

#define AGT_JAIL_UID_BASE 200000
#define AGT_JAIL_UID_SLOTS 60000

static const char *const state_names[] = {
    [AGT_JAIL_CREATED] = "created", [AGT_JAIL_STARTING] = "starting",
    [AGT_JAIL_RUNNING] = "running", [AGT_JAIL_STOPPING] = "stopping",
    [AGT_JAIL_EXITED] = "exited",
};

const char *agt_jail_state_name(enum agt_jail_state s)
{
  return state_names[s];
}

static enum agt_jail_state state_from_name(const char *s)
{
  for (size_t i = 0; i < sizeof state_names / sizeof state_names[0]; i++)
    if (s && strcmp(s, state_names[i]) == 0)
      return (enum agt_jail_state)i;
  return AGT_JAIL_EXITED;
}

agt_jail_t *agt_jail_find(struct agtd_s *d, const char *name)
{
  for (agt_jail_t *j = d->jails; j; j = j->next)
    if (strcmp(j->rec.name, name) == 0 && !j->run.removing)
      return j;
  return NULL;
}

/* Agent profiles: what runs when a request names an agent and gives no argv.  On a
 * terminal an agent runs as a person would run it (opencode's TUI in /work); without one, in
 * its headless form (opencode serve on the jail's loopback, reachable with jail.port). */
static const struct {
  const char *agent;
  const char *const argv[8];
  const char *const tty_argv[8];
} profiles[] = {
    {"shell", {"/bin/sh", NULL}, {"/bin/sh", NULL}},
    {"opencode",
     {"opencode", "serve", "--hostname", "127.0.0.1", "--port", "4096", NULL},
     {"opencode", NULL}},
};

static const char *const default_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "HOME=/home/agent",
    "USER=agent",
    "LOGNAME=agent",
    "SHELL=/bin/sh",
    "TMPDIR=/tmp",
    "LANG=C.UTF-8",
    "TERM=xterm-256color",
};

static void paths_init(agt_jail_t *j)
{
  j->rec.dir = xasprintf("%s/%s", j->d->jails_dir, j->rec.name);
  j->rec.upper = xasprintf("%s/rw/upper", j->rec.dir);
  j->rec.work = xasprintf("%s/rw/work", j->rec.dir);
  j->rec.merged = xasprintf("%s/root", j->rec.dir);
  j->rec.log_path = xasprintf("%s/console.log", j->rec.dir);
  j->rec.log_old_path = xasprintf("%s/console.log.1", j->rec.dir);
  j->rec.net_log_path = xasprintf("%s/net.log", j->rec.dir);
  agt_outlog_open(&j->out.log, j->rec.log_path, j->rec.log_old_path, AGT_JAIL_DEFAULT_LOG);
}

static agt_jail_t *jail_new(struct agtd_s *d, const char *name)
{
  agt_jail_t *j = xzalloc(sizeof *j);

  j->d = d;
  j->rec.name = xstrdup(name);
  j->run.pidfd = -1;
  j->out.log.fd = -1;
  j->run.keep_fd = -1;
  j->run.keeper_pidfd = -1;
  j->out.tty_fd = -1;
  j->run.attach_go_fd = -1;
  j->run.answer_fd = -1;
  j->out.rows = 24;
  j->out.cols = 80;
  uv_timer_init(d->loop, &j->run.stop_timer);
  j->run.stop_timer.data = j;
  paths_init(j);
  return j;
}

/* Into agtd's list, which jail.ls follows, in the order of their creation (then of their
 * names, within a second): the same before and after agtd restarts, which reads the records
 * in the directory's order. */
static void jail_link(struct agtd_s *d, agt_jail_t *j)
{
  agt_jail_t **p = &d->jails;

  while (*p && ((*p)->rec.created < j->rec.created ||
                ((*p)->rec.created == j->rec.created && strcmp((*p)->rec.name, j->rec.name) < 0)))
    p = &(*p)->next;
  j->next = *p;
  *p = j;
  d->njails++;
}

static char **strv_from_json(json_t *arr, const char *what, size_t max, agt_error_t *err)
{
  size_t n = json_array_size(arr), i;
  cleanup_strv char **v = NULL;

  if (!json_is_array(arr) || n == 0)
    return agt_error_kind(err, AGT_E_INVALID, "'%s' must be a non-empty array of strings", what),
           NULL;
  if (n > max)
    return agt_error_kind(err, AGT_E_LIMIT, "'%s' has more than %zu entries", what, max), NULL;
  v = xzalloc((n + 1) * sizeof *v);
  for (i = 0; i < n; i++) {
    json_t *s = json_array_get(arr, i);
    if (!json_is_string(s) || json_string_length(s) > AGT_JAIL_STR_MAX ||
        strlen(json_string_value(s)) != json_string_length(s))
      return agt_error_kind(err, AGT_E_INVALID,
                            "'%s[%zu]' must be a string of at most %d bytes without NUL", what, i,
                            AGT_JAIL_STR_MAX),
             NULL;
    v[i] = xstrdup(json_string_value(s));
  }
  return steal_pointer(&v);
}

static int env_name_ok(const char *k)
{
  if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
    return 0;
  for (; *k; k++)
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
          *k == '_'))
      return 0;
  return 1;
}

static const char *const proxy_env[] = {
    "HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
    "http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
    "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
};

/* Programs read one spelling of each proxy variable or the other (curl and Go the lower
 * case first, others the upper): a request that sets one sets both, so that the one a
 * program reads is never agtd's default while the user meant another value.  Returns a new
 * reference to the request's variables with the pairs completed. */
static json_t *env_pair_proxies(json_t *obj, agt_error_t *err)
{
  static const char *const pairs[][2] = {
      {"NO_PROXY", "no_proxy"}, {"HTTP_PROXY", "http_proxy"}, {"HTTPS_PROXY", "https_proxy"}};
  json_t *out = json_copy(obj);

  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    json_t *a = json_object_get(obj, pairs[i][0]), *b = json_object_get(obj, pairs[i][1]);
    if (a && b && !json_equal(a, b)) {
      json_decref(out);
      return agt_error_kind(err, AGT_E_INVALID,
                            "'env' sets %s and %s to different values: set one (agtd gives the "
                            "other the same value)",
                            pairs[i][0], pairs[i][1]),
             NULL;
    }
    if (a && !b)
      json_object_set(out, pairs[i][1], a);
    else if (b && !a)
      json_object_set(out, pairs[i][0], b);
  }
  return out;
}

/* The default environment (and, for network mode allow, the proxy variables) with the
 * request's variables laid over it. */
static char **env_build(json_t *req, int proxy, agt_error_t *err)
{
  size_t nd = sizeof default_env / sizeof default_env[0];
  size_t np = proxy ? sizeof proxy_env / sizeof proxy_env[0] : 0;
  size_t n = 0, cap;
  cleanup_strv char **v = NULL;
  json_t *obj = NULL, *val;
  const char *k;

  if (req && !json_is_object(req))
    return agt_error_kind(err, AGT_E_INVALID, "'env' must be an object of strings"), NULL;
  if (json_object_size(req) > AGT_JAIL_ENV_MAX)
    return agt_error_kind(err, AGT_E_LIMIT, "'env' has more than %d entries", AGT_JAIL_ENV_MAX),
           NULL;
  if (req && (obj = env_pair_proxies(req, err)) == NULL)
    return NULL;
  cap = nd + np + json_object_size(obj) + 1;
  v = xzalloc(cap * sizeof *v);
  for (size_t i = 0; i < nd; i++) {
    size_t klen = strcspn(default_env[i], "=");
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)klen, default_env[i]);
    if (obj && json_object_get(obj, key))
      continue;
    v[n++] = xstrdup(default_env[i]);
  }
  for (size_t i = 0; i < np; i++) {
    size_t klen = strcspn(proxy_env[i], "=");
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)klen, proxy_env[i]);
    if (obj && json_object_get(obj, key))
      continue;
    v[n++] = xstrdup(proxy_env[i]);
  }
  json_object_foreach(obj, k, val)
  {
    if (!env_name_ok(k) || strlen(k) > 256) {
      agt_error_kind(err, AGT_E_INVALID, "'env' key '%.64s' is not a variable name", k);
      json_decref(obj);
      return NULL;
    }
    if (!json_is_string(val) || json_string_length(val) > AGT_JAIL_STR_MAX ||
        strlen(json_string_value(val)) != json_string_length(val)) {
      agt_error_kind(err, AGT_E_INVALID, "'env.%s' must be a string without NUL", k);
      json_decref(obj);
      return NULL;
    }
    v[n++] = xasprintf("%s=%s", k, json_string_value(val));
  }
  json_decref(obj);
  return steal_pointer(&v);
}

/* The jail spec's "unlimited" is 0 in struct agt_cgroup_limits. */
static uint64_t lift_in(uint64_t v)
{
  return v == AGT_LIMIT_UNLIMITED ? 0 : v;
}

static uint64_t lift_out(uint64_t v)
{
  return v == 0 ? AGT_LIMIT_UNLIMITED : v;
}

/* A request's limits (or a record's: jail.json), checked by the jail spec's table: each
 * within its bounds, unknown keys refused, the others at their defaults.  A record written
 * by an agtd that took 0 for no limit keeps that meaning.  *given (NULL: not wanted): the
 * keys the request gave, 1 << AGT_SPEC_x each. */
static int limits_from_json(json_t *obj, int record, struct agt_jail_limits *l, unsigned *given,
                            agt_error_t *err)
{
  struct agt_jail_spec s;

  if (agt_jail_spec_from_json(&s, obj, record, err) < 0)
    return -1;
  if (given)
    *given = s.set;
  l->cg.memory_bytes = lift_in(s.memory);
  l->cg.pids = lift_in(s.pids);
  l->cg.cpu_millis = lift_in(s.cpu);
  l->nofile = s.nofile;
  l->tmp_bytes = s.tmp;
  l->log_bytes = s.log;
  l->disk_bytes = s.disk;
  return 0;
}

static json_t *limits_to_json(const struct agt_jail_limits *l)
{
  struct agt_jail_spec s;

  agt_jail_spec_init(&s);
  s.memory = lift_out(l->cg.memory_bytes);
  s.pids = lift_out(l->cg.pids);
  s.cpu = lift_out(l->cg.cpu_millis);
  s.nofile = l->nofile;
  s.tmp = l->tmp_bytes;
  s.log = l->log_bytes;
  s.disk = l->disk_bytes;
  return agt_jail_spec_to_json(&s, 1);
}

int agt_jail_disk_promise(struct agtd_s *d, const agt_jail_t *j, agt_error_t *err)
{
  uint64_t running = 0;

  for (agt_jail_t *o = d->jails; o; o = o->next)
    if (o != j && (o->rec.state == AGT_JAIL_STARTING || o->rec.state == AGT_JAIL_RUNNING ||
                   o->rec.state == AGT_JAIL_STOPPING))
      running = agt_disk_sum(running, o->rec.limits.disk_bytes ? o->rec.limits.disk_bytes
                                                               : d->disk->capacity);
  return agt_disk_promise(d->disk, running, j->rec.limits.disk_bytes, j->rec.name, err);
}

static uid_t alloc_uid(struct agtd_s *d)
{
  for (uid_t slot = 0; slot < AGT_JAIL_UID_SLOTS; slot++) {
    uid_t uid = AGT_JAIL_UID_BASE + slot;
    agt_jail_t *j;
    for (j = d->jails; j; j = j->next)
      if (j->rec.uid == uid)
        break;
    if (j == NULL)
      return uid;
  }
  return 0;
}

/* Whether path a is b or one of its ancestors (clean absolute paths). */
static int at_or_above(const char *a, const char *b)
{
  size_t n = strlen(a);

  if (strcmp(a, "/") == 0)
    return 1;
  return strncmp(b, a, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* A path as the kernel resolves it (symlinks in agtd's own paths), else as given. */
static char *real_or_given(const char *path)
{
  char *r = realpath(path, NULL);
  return r ? r : xstrdup(path);
}

/* A workspace must lie below one of agtd's workspace roots, so that a member of the
 * socket's group cannot bind /etc into a jail; and it must not show a jail anything of
 * agtd's state or of another jail's workspace that agtd made: not a root itself (/home,
 * <state>/workspaces), not agtd's state directory or anything at, above or inside it
 * (other than a directory below <state>/workspaces), not a workspace agtd made for another
 * jail, nor anything above or inside one.  ws is clean and absolute, and is opened with no
 * symlink anywhere in it, so its text is the path the kernel finds. */
int agt_jail_path_allowed(struct agtd_s *d, const char *what, const char *ws, agt_error_t *err)
{
  cleanup_free char *state = real_or_given(d->cfg.state_dir);
  cleanup_free char *wsroot = real_or_given(d->workspaces_dir);
  cleanup_free char *layers = d->disk->dir ? real_or_given(d->disk->dir) : NULL;
  size_t i;

  for (i = 0; i < d->cfg.nworkspace_roots; i++) {
    const char *root = d->cfg.workspace_roots[i];
    cleanup_free char *real = real_or_given(root);
    if (strcmp(ws, root) == 0 || strcmp(ws, real) == 0)
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s '%s' is a workspace root of agtd itself, which holds "
                            "other workspaces: name a directory below it",
                            what, ws);
  }
  for (i = 0; i < d->cfg.nworkspace_roots; i++) {
    const char *root = d->cfg.workspace_roots[i];
    size_t n = strlen(root);
    if (strncmp(ws, root, n) == 0 && ws[n] == '/')
      break;
  }
  if (i == d->cfg.nworkspace_roots)
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' is not under a workspace root of agtd (see --workspace-root)",
                          what, ws);
  if (at_or_above(ws, state))
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' holds agtd's state directory '%s': name a directory "
                          "that does not",
                          what, ws, state);
  if (at_or_above(state, ws) && !(at_or_above(wsroot, ws) && strcmp(ws, wsroot) != 0))
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is inside agtd's state directory '%s'", what,
                          ws, state);
  /* the jails' writable layers (--layers-dir may lie anywhere, a workspace root too) */
  if (layers && (at_or_above(ws, layers) || at_or_above(layers, ws)))
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' %s the jails' layers directory '%s'", what,
                          ws, at_or_above(ws, layers) ? "holds" : "is inside", layers);
  for (agt_jail_t *o = d->jails; o; o = o->next) {
    cleanup_free char *theirs = NULL;
    if (!o->rec.workspace_owned)
      continue;
    theirs = real_or_given(o->rec.workspace);
    if (at_or_above(ws, theirs) || at_or_above(theirs, ws))
      return agt_error_kind(err, AGT_E_INVALID, "%s '%s' %s the workspace agtd made for jail '%s'",
                            what, ws,
                            strcmp(ws, theirs) == 0   ? "is"
                            : at_or_above(ws, theirs) ? "holds"
                                                      : "is inside",
                            o->rec.name);
  }
  return 0;
}

char *agt_identity_passwd(uid_t uid, gid_t gid)
{
  return xasprintf("root:x:0:0:root:/root:/bin/sh\n"
                   "agent:x:%u:%u:agent:/home/agent:/bin/sh\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
                   (unsigned)uid, (unsigned)gid);
}

char *agt_identity_group(gid_t gid)
{
  return xasprintf("root:x:0:\nagent:x:%u:\nnogroup:x:65534:\n", (unsigned)gid);
}

void agt_jail_identity(agt_jail_t *j, char **passwd, char **group)
{
  *passwd = agt_identity_passwd(j->rec.uid, j->rec.gid);
  *group = agt_identity_group(j->rec.gid);
}

static int write_identity(agt_jail_t *j, agt_error_t *err)
{
  cleanup_free char *etc = xasprintf("%s/etc", j->rec.upper);
  cleanup_free char *home = xasprintf("%s/home/agent", j->rec.upper);
  cleanup_free char *passwd_path = xasprintf("%s/passwd", etc);
  cleanup_free char *group_path = xasprintf("%s/group", etc);
  cleanup_free char *passwd = NULL;
  cleanup_free char *group = NULL;

  agt_jail_identity(j, &passwd, &group);

  if (agt_mkdir_p(etc, 0755, err) < 0 || agt_mkdir_p(home, 0755, err) < 0)
    return -1;
  if (chown(home, j->rec.uid, j->rec.gid) < 0 || chmod(home, 0700) < 0)
    return agt_error_make(err, errno, "chown '%s'", home);
  if (agt_write_file_atomic(passwd_path, passwd, strlen(passwd), 0644, err) < 0 ||
      agt_write_file_atomic(group_path, group, strlen(group), 0644, err) < 0)
    return -1;
  return 0;
}

/* The owner of the jail's persistent home when it exists already (and is not root's). */
static int home_owner(agt_jail_t *j, uid_t *uid, gid_t *gid)
{
  struct stat st;

  if (lstat(j->rec.binds.home_path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid == 0)
    return 0;
  *uid = st.st_uid;
  *gid = st.st_gid;
  return 1;
}

/* Make the jail's persistent home, or give it to the jail's user when another owned it
 * (the same user's workspace under another owner): never while a jail runs with it. */
int agt_jail_home_prepare(agt_jail_t *j, agt_error_t *err)
{
  uid_t owner;
  gid_t group;
  agt_jail_t *o;

  if (agt_home_ensure(j->d->disk, j->rec.binds.home_path, j->rec.uid, j->rec.gid, &owner, &group,
                      err) < 0)
    return -1;
  if (owner == j->rec.uid && group == j->rec.gid)
    return 0;
  if ((o = agt_jail_home_user(j->d, j->rec.binds.home_path)) != NULL)
    return agt_error_kind(err, AGT_E_BUSY,
                          "the home of %s's %s (%s) belongs to uid %u, which jail '%s' runs as; "
                          "this jail's user is uid %u (its workspace's owner): stop '%s' first",
                          j->rec.binds.home_user, j->rec.agent, j->rec.binds.home_path,
                          (unsigned)owner, o->rec.name, (unsigned)j->rec.uid, o->rec.name);
  agt_log_info("home %s: from uid %u to uid %u (the owner of jail '%s''s workspace)",
               j->rec.binds.home_path, (unsigned)owner, (unsigned)j->rec.uid, j->rec.name);
  return agt_home_chown(j->rec.binds.home_path, j->rec.uid, j->rec.gid, err);
}

/* "size": [rows, cols], the terminal's first size. */
static int parse_size(json_t *params, agt_jail_t *j, agt_error_t *err)
{
  json_t *v = json_object_get(params, "size");
  json_int_t rows, cols;

  if (v == NULL)
    return 0;
  rows = json_integer_value(json_array_get(v, 0));
  cols = json_integer_value(json_array_get(v, 1));
  if (!json_is_array(v) || json_array_size(v) != 2 || rows < 1 || rows > 1000 || cols < 1 ||
      cols > 1000)
    return agt_error_kind(err, AGT_E_INVALID, "'size' must be [rows, cols] within 1..1000");
  j->out.rows = (unsigned short)rows;
  j->out.cols = (unsigned short)cols;
  return 0;
}

/* "layers": rootfs refs stacked over the base, top first (an agent's package over the Node.js
 * runtime).  Each is resolved now: the jail keeps these builds whatever is built later. */
static int resolve_layers(struct agtd_s *d, agt_jail_t *j, json_t *v, agt_error_t *err)
{
  size_t i, n;
  json_t *ref;

  if (v == NULL)
    return 0;
  if (!json_is_array(v) || json_array_size(v) > AGT_JAIL_LAYERS_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "'layers' must be a list of at most %d rootfs refs",
                          AGT_JAIL_LAYERS_MAX);
  n = json_array_size(v);
  if (n == 0)
    return 0;
  j->rec.layer_ids = xzalloc((n + 1) * sizeof *j->rec.layer_ids);
  j->rec.layer_paths = xzalloc((n + 1) * sizeof *j->rec.layer_paths);
  json_array_foreach(v, i, ref)
  {
    json_t *info = NULL;
    if (!json_is_string(ref))
      return agt_error_kind(err, AGT_E_INVALID, "'layers'[%zu] must be a string", i);
    if (agtd_rootfs_resolve(d, json_string_value(ref), &info, err) < 0)
      return agt_error_wrap(err, "layer '%s'", json_string_value(ref));
    j->rec.layer_ids[i] = xstrdup(json_string_value(json_object_get(info, "id")));
    j->rec.layer_paths[i] = xstrdup(json_string_value(json_object_get(info, "path")));
    json_decref(info);
  }
  return 0;
}

int agt_jail_uses_rootfs(const agt_jail_t *j, const char *id)
{
  if (strcmp(j->rec.rootfs_id, id) == 0)
    return 1;
  for (char **l = j->rec.layer_ids; l && *l; l++)
    if (strcmp(*l, id) == 0)
      return 1;
  return 0;
}

/* jail.run's secrets name variables of its env, each once: a name without a value would
 * be reported lost (secrets_lost) at every agtd start, and one named twice restored twice. */
static int secrets_check(const agt_jail_t *j, agt_error_t *err)
{
  for (size_t i = 0; j->rec.secrets[i]; i++) {
    const char *s = j->rec.secrets[i];
    size_t n = strlen(s);
    char **e = j->rec.env;
    while (env_name_ok(s) && *e && !(strncmp(*e, s, n) == 0 && (*e)[n] == '='))
      e++;
    if (!env_name_ok(s) || *e == NULL)
      return agt_error_kind(err, AGT_E_INVALID,
                            "'secrets[%zu]': '%.64s' is not a variable of 'env'", i, s);
    for (size_t k = 0; k < i; k++)
      if (strcmp(j->rec.secrets[k], s) == 0)
        return agt_error_kind(err, AGT_E_INVALID, "'secrets[%zu]': '%.64s' is named twice", i, s);
  }
  return 0;
}

static json_t *strv_json(char **v)
{
  json_t *a = json_array();

  for (; v && *v; v++)
    json_array_append_new(a, json_string(*v));
  return a;
}

static int jail_create(struct agtd_s *d, json_t *params, const struct agt_jail_prepared *prepared,
                       agt_jail_t **out, agt_error_t *err)
{
  /* beside the jail spec's run options and limits, the request's own fields */
  static const char *const extra[] = {"argv", "args", "size", "secrets", "home_files", NULL};
  struct agt_run_opts run;
  const char *name, *agent, *rootfs, *ws;
  json_t *info = NULL;
  agt_jail_t *j = NULL;
  struct stat st;
  int made_ws = 0, for_run = prepared != NULL;
  unsigned given = 0; /* the limits the request gave */

  if (agt_jail_run_from_json(&run, params, extra, err) < 0)
    return -1;
  name = run.name;
  agent = run.agent ? run.agent : AGT_RUN_DEFAULT(AGENT);
  rootfs = run.rootfs ? run.rootfs : AGT_RUN_DEFAULT(ROOTFS);
  ws = run.workspace;
  if (agt_jail_find(d, name))
    return agt_error_kind(err, AGT_E_EXISTS, "jail '%s' exists already", name);
  if (d->njails >= d->cfg.max_jails)
    return agt_error_kind(err, AGT_E_LIMIT, "agtd holds %u jails already (the limit)", d->njails);
  if (ws) {
    cleanup_close int fd = -1;
    if (agt_abspath_check("workspace", ws, err) < 0 ||
        agt_jail_path_allowed(d, "workspace", ws, err) < 0)
      return -1;
    fd = agt_open_nofollow(ws, O_PATH | O_DIRECTORY, err);
    if (fd < 0)
      return agt_error_wrap(err, "workspace");
    if (fstat(fd, &st) < 0)
      return agt_error_make(err, errno, "stat workspace '%s'", ws);
  }
  j = jail_new(d, name);
  j->rec.agent = xstrdup(agent);
  j->rec.created = time(NULL);
  j->rec.state = AGT_JAIL_CREATED;

  j->rec.tty = run.tty > 0;
  if (parse_size(params, j, err) < 0)
    goto fail;
  if (json_object_get(params, "argv") && json_object_get(params, "args")) {
    agt_error_kind(err, AGT_E_INVALID,
                   "give 'argv' (the whole command) or 'args' (added to the agent's), not both");
    goto fail;
  }
  if (json_object_get(params, "argv")) {
    j->rec.argv = strv_from_json(json_object_get(params, "argv"), "argv", AGT_JAIL_ARGV_MAX, err);
    if (j->rec.argv == NULL)
      goto fail;
  } else {
    size_t i, n, nargs = 0;
    cleanup_strv char **args = NULL;
    for (i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
      if (strcmp(profiles[i].agent, agent) == 0)
        break;
    if (i == sizeof profiles / sizeof profiles[0]) {
      agt_error_kind(err, AGT_E_INVALID, "agent '%s' has no default command: give 'argv'", agent);
      goto fail;
    }
    if (json_object_get(params, "args")) { /* appended to the profile's command */
      args = strv_from_json(json_object_get(params, "args"), "args", AGT_JAIL_ARGV_MAX - 8, err);
      if (args == NULL)
        goto fail;
      while (args[nargs])
        nargs++;
    }
    const char *const *pargv = j->rec.tty ? profiles[i].tty_argv : profiles[i].argv;
    for (n = 0; pargv[n]; n++)
      ;
    j->rec.argv = xzalloc((n + nargs + 1) * sizeof *j->rec.argv);
    for (size_t m = 0; m < n; m++)
      j->rec.argv[m] = xstrdup(pargv[m]);
    for (size_t m = 0; m < nargs; m++)
      j->rec.argv[n + m] = xstrdup(args[m]);
  }
  if (agt_net_policy_from_json(json_object_get(params, "network"), &j->rec.net, err) < 0)
    goto fail;
  if (agt_binds_from_json(d, params, &run, j->rec.agent, j->rec.net.mode == AGT_NET_OPEN,
                          &j->rec.binds, err) < 0)
    goto fail;
  for (size_t i = 0; i < j->rec.binds.nmounts; i++)
    if (agt_jail_path_allowed(d, "mount", j->rec.binds.mounts[i].path, err) < 0) {
      agt_error_wrap(err, "mounts[%zu]", i);
      goto fail;
    }
  agt_binds_sort(j->rec.binds.mounts, j->rec.binds.nmounts);
  /* refused before anything is made when the machine is not set up for it */
  if (j->rec.net.mode == AGT_NET_OPEN && agt_open_net_check(NULL, err) < 0)
    goto fail;
  j->rec.env = env_build(json_object_get(params, "env"), j->rec.net.mode == AGT_NET_ALLOW, err);
  if (j->rec.env == NULL)
    goto fail;
  if (json_object_get(params, "secrets")) {
    j->rec.secrets = strv_from_json(json_object_get(params, "secrets"), "secrets", 64, err);
    if (j->rec.secrets == NULL || secrets_check(j, err) < 0)
      goto fail;
  }
  if (limits_from_json(json_object_get(params, "limits"), 0, &j->rec.limits, &given, err) < 0)
    goto fail;
  /* The rootfs last: every cheaper check has passed. */
  if (agtd_rootfs_resolve(d, rootfs, &info, err) < 0) {
    agt_error_wrap(err, "rootfs '%s'", rootfs);
    goto fail;
  }
  j->rec.rootfs_id = xstrdup(json_string_value(json_object_get(info, "id")));
  j->rec.rootfs_path = xstrdup(json_string_value(json_object_get(info, "path")));
  json_decref(info);
  if (resolve_layers(d, j, json_object_get(params, "layers"), err) < 0)
    goto fail;

  /* The jail user: the workspace's owner when that is not root (jails sharing a project
   * share its owner), else a uid of the jail's own. */
  if (ws && st.st_uid != 0) {
    j->rec.uid = st.st_uid;
    j->rec.gid = st.st_gid;
    j->rec.workspace = xstrdup(ws);
  } else if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT &&
             home_owner(j, &j->rec.uid, &j->rec.gid)) {
    /* a home kept from earlier jails: its user again, so its files stay the jail's */
    j->rec.workspace = ws ? xstrdup(ws) : xasprintf("%s/%s", d->workspaces_dir, name);
    j->rec.workspace_owned = ws == NULL;
  } else {
    j->rec.uid = j->rec.gid = alloc_uid(d);
    if (j->rec.uid == 0) {
      agt_error_kind(err, AGT_E_LIMIT, "no jail uid left");
      goto fail;
    }
    if (ws) {
      j->rec.workspace = xstrdup(ws);
    } else {
      j->rec.workspace = xasprintf("%s/%s", d->workspaces_dir, name);
      j->rec.workspace_owned = 1;
    }
  }

  if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT && agt_jail_home_prepare(j, err) < 0)
    goto fail;

  /* Without a disk limit of its own, a jail gets 10 GiB or a tenth of the jails' disk,
   * whichever is less; what running jails may write stays within the disk (disk.h).  A
   * tenth, not an eighth: the promise counts what the disk holds already too, so eight
   * default jails fit beside up to a fifth of it written. */
  if (d->disk->enabled && !(given & (1u << AGT_SPEC_DISK)) &&
      j->rec.limits.disk_bytes > d->disk->capacity / 10)
    j->rec.limits.disk_bytes = d->disk->capacity / 10;
  if (for_run && agt_jail_disk_promise(d, j, err) < 0)
    goto fail;
  if (for_run && j->rec.layer_ids == NULL) /* prepared jails stand on the base alone */
    j->run.warm = prepared->take(j);
  if (j->run.warm == NULL) {
    if (agt_jail_make_dir(j, err) < 0)
      goto fail;
  }
  if (j->rec.workspace_owned) {
    /* agtd's own directory for this jail: made here, never adopted.  One that exists
     * already (left over, or made by someone) is not this jail's to use, nor to remove at
     * jail rm. */
    if (mkdir(j->rec.workspace, 0755) < 0) {
      if (errno == EEXIST)
        agt_error_kind(err, AGT_E_EXISTS,
                       "workspace '%s' exists already, and agtd did not make it for this jail: "
                       "remove it, or name it as the workspace (jail rm then leaves it)",
                       j->rec.workspace);
      else
        agt_error_make(err, errno, "mkdir '%s'", j->rec.workspace);
      goto fail_dir;
    }
    made_ws = 1;
    if (chown(j->rec.workspace, j->rec.uid, j->rec.gid) < 0) {
      agt_error_make(err, errno, "chown '%s'", j->rec.workspace);
      goto fail_dir;
    }
  }
  /* jail.run: the record says "starting" from its first write on, so that an agtd killed at
   * any moment of the start reports the jail as ended with it (in memory the jail stays
   * "created" until the start itself).  A jail on a prepared jail writes it once its claim
   * is on its way (jail_warm.c); a directory without a record is removed at agtd's next
   * start. */
  if (for_run)
    j->rec.state = AGT_JAIL_STARTING;
  if (j->run.warm == NULL && agt_jail_save(j, err) < 0) {
    j->rec.state = AGT_JAIL_CREATED;
    goto fail_dir;
  }
  j->rec.state = AGT_JAIL_CREATED;
  agt_secrets_keep(&j->rec); /* refused: logged, and kept in memory only */
  jail_link(d, j);
  *out = j;
  return 0;

fail_dir:
  if (made_ws)
    rmdir(j->rec.workspace);
  agt_disk_jail_remove(d->disk, j->rec.dir, NULL);
fail:
  if (j->run.warm)
    prepared->give_back(j);
  j->run.warm = NULL;
  agt_jail_free(j);
  return -1;
}

int agt_jail_create(struct agtd_s *d, json_t *params, agt_jail_t **out, agt_error_t *err)
{
  return jail_create(d, params, NULL, out, err);
}

int agt_jail_create_for_run(struct agtd_s *d, json_t *params,
                            const struct agt_jail_prepared *prepared, agt_jail_t **out,
                            agt_error_t *err)
{
  return jail_create(d, params, prepared, out, err);
}

agt_jail_t *agt_jail_home_user(struct agtd_s *d, const char *home_path)
{
  for (agt_jail_t *j = d->jails; j; j = j->next)
    if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT &&
        strcmp(j->rec.binds.home_path, home_path) == 0 &&
        (j->rec.state == AGT_JAIL_STARTING || j->rec.state == AGT_JAIL_RUNNING ||
         j->rec.state == AGT_JAIL_STOPPING))
      return j;
  return NULL;
}

int agt_jail_make_dir(agt_jail_t *j, agt_error_t *err)
{
  if (mkdir(j->rec.dir, 0700) < 0)
    return agt_error_make(err, errno, "mkdir '%s'", j->rec.dir);
  if (agt_disk_jail_create(j->d->disk, j->rec.dir, j->rec.limits.disk_bytes, err) < 0 ||
      (mkdir(j->rec.merged, 0755) < 0 &&
       agt_error_make(err, errno, "mkdir '%s'", j->rec.merged) < 0)) {
    agt_error_wrap(err, "create the directories of jail '%s'", j->rec.name);
    agt_disk_jail_remove(j->d->disk, j->rec.dir, NULL);
    return -1;
  }
  if (write_identity(j, err) < 0) {
    agt_disk_jail_remove(j->d->disk, j->rec.dir, NULL);
    return -1;
  }
  return 0;
}

int agt_jail_usage(agt_jail_t *j, uint64_t max_age_ms, struct agt_cgroup_stats *s, uint64_t *age_ms)
{
  uint64_t now = agt_now_ns();

  if (j->run.usage_ns == 0 || now - j->run.usage_ns > max_age_ms * 1000000ull) {
    struct agt_cgroup_stats fresh;
    if (agt_cgroup_stats(j->d->cgroup, j->rec.name, &fresh) < 0)
      return -1;
    j->run.usage = fresh;
    j->run.usage_ns = now;
    j->run.usage_failed = 0;
  }
  *s = j->run.usage;
  *age_ms = (now - j->run.usage_ns) / 1000000ull;
  return 0;
}

int agt_jail_usage_cached(const agt_jail_t *j, struct agt_cgroup_stats *s, uint64_t *age_ms)
{
  if (!agt_jail_runs_now(j) || j->run.usage_ns == 0 || j->run.usage_failed)
    return -1;
  *s = j->run.usage;
  *age_ms = (agt_now_ns() - j->run.usage_ns) / 1000000ull;
  return 0;
}

uint64_t agt_jail_refused(const agt_jail_t *j)
{
  return j->out.refused + agt_egress_blocked(j->run.egress);
}

void agt_jail_stop_egress(agt_jail_t *j)
{
  j->out.refused += agt_egress_blocked(j->run.egress);
  agt_egress_stop(j->run.egress);
  j->run.egress = NULL;
}

enum { LIVE_NONE, LIVE_READ, LIVE_CACHED };

/* live: the figures of the moment (usage, refused), which listings show and the record on
 * disk does not keep; LIVE_CACHED: the cgroup's as last read, LIVE_READ: read again when
 * stale. */
static json_t *jail_json(agt_jail_t *j, int full, int live)
{
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "name", j->rec.name, "agent", j->rec.agent,
                "state", agt_jail_state_name(j->rec.state), "rootfs", j->rec.rootfs_id, "created",
                (json_int_t)j->rec.created, "runs", (json_int_t)j->rec.runs);

  json_object_set_new(o, "workspace", json_string(j->rec.workspace));
  if (j->rec.layer_ids)
    json_object_set_new(o, "layers", strv_json(j->rec.layer_ids));
  json_object_set_new(o, "tty", json_boolean(j->rec.tty));
  json_object_set_new(o, "attached", json_integer((json_int_t)j->out.nstreams));
  if (live)
    json_object_set_new(o, "refused", json_integer((json_int_t)agt_jail_refused(j)));
  if (j->rec.started)
    json_object_set_new(o, "started", json_integer(j->rec.started));
  if (j->rec.state == AGT_JAIL_RUNNING || j->rec.state == AGT_JAIL_STARTING ||
      j->rec.state == AGT_JAIL_STOPPING) {
    struct agt_cgroup_stats s;
    uint64_t age;
    int have = -1;
    json_object_set_new(o, "pid", json_integer(j->run.pid));
    if (live == LIVE_READ)
      have = agt_jail_usage(j, AGT_JAIL_USAGE_MAX_AGE_MS, &s, &age);
    else if (live == LIVE_CACHED)
      have = agt_jail_usage_cached(j, &s, &age);
    if (have == 0)
      json_object_set_new(o, "usage",
                          json_pack("{s:I, s:I, s:I, s:I}", "memory", (json_int_t)s.memory_bytes,
                                    "pids", (json_int_t)s.pids, "cpu_usec", (json_int_t)s.cpu_usec,
                                    "age_ms", (json_int_t)age));
  }
  if (j->rec.state == AGT_JAIL_EXITED) {
    json_object_set_new(o, "exit_code", json_integer(j->rec.exit_code));
    if (j->rec.exit_signal)
      json_object_set_new(o, "exit_signal", json_integer(j->rec.exit_signal));
    json_object_set_new(o, "finished", json_integer(j->rec.finished));
  }
  if (j->rec.exit_reason)
    json_object_set_new(o, "reason", json_string(j->rec.exit_reason));
  if (full) {
    json_t *argv = json_array(), *env = json_array();
    for (char **a = j->rec.argv; a && *a; a++)
      json_array_append_new(argv, json_string(*a));
    /* Only variable names: values may be secrets. */
    for (char **e = j->rec.env; e && *e; e++)
      json_array_append_new(env, json_stringn(*e, strcspn(*e, "=")));
    json_object_set_new(o, "argv", argv);
    json_object_set_new(o, "env", env);
    if (j->rec.secrets)
      json_object_set_new(o, "secrets", strv_json(j->rec.secrets));
    if (j->rec.secrets_lost)
      json_object_set_new(o, "secrets_lost", strv_json(j->rec.secrets_lost));
    json_object_set_new(o, "limits", limits_to_json(&j->rec.limits));
    json_object_set_new(o, "network", agt_net_policy_to_json(&j->rec.net));
    json_object_set_new(o, "uid", json_integer(j->rec.uid));
    json_object_set_new(o, "gid", json_integer(j->rec.gid));
    json_object_set_new(o, "rootfs_path", json_string(j->rec.rootfs_path));
    if (j->rec.layer_paths)
      json_object_set_new(o, "layer_paths", strv_json(j->rec.layer_paths));
    json_object_set_new(o, "dir", json_string(j->rec.dir));
    agt_binds_to_json(&j->rec.binds, o);
    json_object_set_new(o, "log_bytes",
                        json_integer((json_int_t)(j->out.log.pos.base + j->out.log.pos.size)));
  }
  return o;
}

json_t *agt_jail_to_json(agt_jail_t *j, int full)
{
  return jail_json(j, full, LIVE_READ);
}

json_t *agt_jail_listing_json(agt_jail_t *j)
{
  return jail_json(j, 0, LIVE_CACHED);
}

/* jail.ls's columns: the short form's scalar keys, and usage's as keys of their own. */
static const char *const column_names[] = {
    "name",     "agent",    "state",   "rootfs",  "created",  "runs",         "workspace",
    "tty",      "attached", "refused", "started", "pid",      "exit_code",    "exit_signal",
    "finished", "reason",   "memory",  "pids",    "cpu_usec", "usage_age_ms", NULL};
enum {
  COL_NAME,
  COL_AGENT,
  COL_STATE,
  COL_ROOTFS,
  COL_CREATED,
  COL_RUNS,
  COL_WORKSPACE,
  COL_TTY,
  COL_ATTACHED,
  COL_REFUSED,
  COL_STARTED,
  COL_PID,
  COL_EXIT_CODE,
  COL_EXIT_SIGNAL,
  COL_FINISHED,
  COL_REASON,
  COL_MEMORY,
  COL_PIDS,
  COL_CPU_USEC,
  COL_USAGE_AGE_MS
};

int agt_jail_column(const char *name)
{
  for (int i = 0; column_names[i]; i++)
    if (strcmp(column_names[i], name) == 0)
      return i;
  return -1;
}

const char *const *agt_jail_columns(void)
{
  return column_names;
}

int agt_jail_column_is_usage(int col)
{
  return col >= COL_MEMORY;
}

int agt_jail_runs_now(const agt_jail_t *j)
{
  return j->rec.state == AGT_JAIL_RUNNING || j->rec.state == AGT_JAIL_STARTING ||
         j->rec.state == AGT_JAIL_STOPPING;
}

json_t *agt_jail_row(agt_jail_t *j, const int *cols, size_t n)
{
  json_t *row = json_array();
  struct agt_cgroup_stats s;
  uint64_t age = 0;
  int usage = -1; /* looked up once, when a column asks */
  int exited = j->rec.state == AGT_JAIL_EXITED;

  for (size_t i = 0; i < n; i++) {
    json_t *v = NULL;
    if (cols[i] >= COL_MEMORY && usage < 0)
      usage = agt_jail_usage_cached(j, &s, &age) == 0;
    switch (cols[i]) {
    case COL_NAME:
      v = json_string(j->rec.name);
      break;
    case COL_AGENT:
      v = json_string(j->rec.agent);
      break;
    case COL_STATE:
      v = json_string(agt_jail_state_name(j->rec.state));
      break;
    case COL_ROOTFS:
      v = json_string(j->rec.rootfs_id);
      break;
    case COL_CREATED:
      v = json_integer((json_int_t)j->rec.created);
      break;
    case COL_RUNS:
      v = json_integer((json_int_t)j->rec.runs);
      break;
    case COL_WORKSPACE:
      v = json_string(j->rec.workspace);
      break;
    case COL_TTY:
      v = json_boolean(j->rec.tty);
      break;
    case COL_ATTACHED:
      v = json_integer((json_int_t)j->out.nstreams);
      break;
    case COL_REFUSED:
      v = json_integer((json_int_t)agt_jail_refused(j));
      break;
    case COL_STARTED:
      v = j->rec.started ? json_integer(j->rec.started) : NULL;
      break;
    case COL_PID:
      v = agt_jail_runs_now(j) ? json_integer(j->run.pid) : NULL;
      break;
    case COL_EXIT_CODE:
      v = exited ? json_integer(j->rec.exit_code) : NULL;
      break;
    case COL_EXIT_SIGNAL:
      v = exited && j->rec.exit_signal ? json_integer(j->rec.exit_signal) : NULL;
      break;
    case COL_FINISHED:
      v = exited ? json_integer(j->rec.finished) : NULL;
      break;
    case COL_REASON:
      v = j->rec.exit_reason ? json_string(j->rec.exit_reason) : NULL;
      break;
    case COL_MEMORY:
      v = usage ? json_integer((json_int_t)s.memory_bytes) : NULL;
      break;
    case COL_PIDS:
      v = usage ? json_integer((json_int_t)s.pids) : NULL;
      break;
    case COL_CPU_USEC:
      v = usage ? json_integer((json_int_t)s.cpu_usec) : NULL;
      break;
    case COL_USAGE_AGE_MS:
      v = usage ? json_integer((json_int_t)age) : NULL;
      break;
    }
    json_array_append_new(row, v ? v : json_null());
  }
  return row;
}

int agt_jail_secrets_again(agt_jail_t *j, json_t *values, agt_error_t *err)
{
  const char *k;
  json_t *v;

  if (values == NULL)
    return 0;
  if (!json_is_object(values))
    return agt_error_kind(err, AGT_E_INVALID, "secrets must be an object of strings");
  if (j->rec.state != AGT_JAIL_CREATED && j->rec.state != AGT_JAIL_EXITED)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: its secrets are set when it starts",
                          j->rec.name, agt_jail_state_name(j->rec.state));
  json_object_foreach(values, k, v)
  {
    int known = 0;
    for (char **s = j->rec.secrets; s && *s; s++)
      known |= strcmp(*s, k) == 0;
    if (!known)
      return agt_error_kind(err, AGT_E_INVALID,
                            "secrets: '%.64s' is not one of jail '%s''s secrets", k, j->rec.name);
    if (!json_is_string(v) || json_string_length(v) > AGT_JAIL_STR_MAX ||
        strlen(json_string_value(v)) != json_string_length(v))
      return agt_error_kind(err, AGT_E_INVALID,
                            "secrets: '%.64s' must be a string of at most %d bytes without NUL", k,
                            AGT_JAIL_STR_MAX);
  }
  json_object_foreach(values, k, v)
  {
    size_t n = strlen(k), nenv = 0;
    char *entry = xasprintf("%s=%s", k, json_string_value(v));
    char **e;
    for (e = j->rec.env; e && *e; e++, nenv++)
      if (strncmp(*e, k, n) == 0 && (*e)[n] == '=')
        break;
    if (e && *e) {
      free(*e);
      *e = entry;
    } else {
      j->rec.env = xrealloc(j->rec.env, (nenv + 2) * sizeof *j->rec.env);
      j->rec.env[nenv] = entry;
      j->rec.env[nenv + 1] = NULL;
    }
    /* no longer lost */
    for (char **l = j->rec.secrets_lost; l && *l; l++)
      if (strcmp(*l, k) == 0) {
        size_t after = 0;
        while (l[after + 1])
          after++;
        free(*l);
        memmove(l, l + 1, (after + 1) * sizeof *l); /* the NULL too */
        break;
      }
  }
  if (j->rec.secrets_lost && j->rec.secrets_lost[0] == NULL) {
    free(j->rec.secrets_lost);
    j->rec.secrets_lost = NULL;
  }
  agt_secrets_keep(&j->rec); /* refused: logged, and kept in memory only */
  return 0;
}

int agt_jail_save(agt_jail_t *j, agt_error_t *err)
{
  json_t *o = jail_json(j, 0, LIVE_NONE);
  json_t *argv = json_array(), *env = json_array();
  cleanup_free char *path = xasprintf("%s/jail.json", j->rec.dir);
  char *s;
  int r;

  for (char **a = j->rec.argv; a && *a; a++)
    json_array_append_new(argv, json_string(*a));
  for (char **e = j->rec.env; e && *e; e++)
    /* secrets: their names only; the values are in memory and the keyring (secrets.h) */
    if (!agt_secrets_is_one(j->rec.secrets, *e))
      json_array_append_new(env, json_string(*e));
  json_object_set_new(o, "argv", argv);
  json_object_set_new(o, "env", env);
  if (j->rec.secrets)
    json_object_set_new(o, "secrets", strv_json(j->rec.secrets));
  if (j->rec.layer_paths)
    json_object_set_new(o, "layer_paths", strv_json(j->rec.layer_paths));
  json_object_set_new(o, "limits", limits_to_json(&j->rec.limits));
  json_object_set_new(o, "network", agt_net_policy_to_json(&j->rec.net));
  json_object_set_new(o, "uid", json_integer(j->rec.uid));
  json_object_set_new(o, "gid", json_integer(j->rec.gid));
  json_object_set_new(o, "rootfs_path", json_string(j->rec.rootfs_path));
  json_object_set_new(o, "workspace_owned", json_boolean(j->rec.workspace_owned));
  agt_binds_to_json(&j->rec.binds, o);
  s = json_dumps(o, JSON_INDENT(2));
  json_decref(o);
  r = agt_write_file_atomic(path, s, strlen(s), 0600, err);
  free(s);
  return r;
}

static int load_one(struct agtd_s *d, const char *name, agt_jail_find_fn find_again,
                    agt_error_t *err)
{
  cleanup_free char *path = xasprintf("%s/%s/jail.json", d->jails_dir, name);
  json_error_t jerr;
  json_t *o = json_load_file(path, 0, &jerr);
  agt_jail_t *j;
  json_t *lim;

  if (o == NULL)
    return agt_error_kind(err, AGT_E_INVALID, "%s:%d: %s", path, jerr.line, jerr.text);
  j = jail_new(d, name);
  j->rec.agent = xstrdup(json_string_value(json_object_get(o, "agent")) ?: "shell");
  j->rec.rootfs_id = xstrdup(json_string_value(json_object_get(o, "rootfs")) ?: "");
  j->rec.rootfs_path = xstrdup(json_string_value(json_object_get(o, "rootfs_path")) ?: "");
  if (json_array_size(json_object_get(o, "layers")) > 0 &&
      json_array_size(json_object_get(o, "layers")) ==
          json_array_size(json_object_get(o, "layer_paths"))) {
    j->rec.layer_ids =
        strv_from_json(json_object_get(o, "layers"), "layers", AGT_JAIL_LAYERS_MAX, err);
    j->rec.layer_paths =
        strv_from_json(json_object_get(o, "layer_paths"), "layer_paths", AGT_JAIL_LAYERS_MAX, err);
    if (j->rec.layer_ids == NULL || j->rec.layer_paths == NULL) {
      json_decref(o);
      agt_jail_free(j);
      return agt_error_wrap(err, "%s", path);
    }
  }
  j->rec.workspace = xstrdup(json_string_value(json_object_get(o, "workspace")) ?: "");
  j->rec.workspace_owned = json_is_true(json_object_get(o, "workspace_owned"));
  j->rec.argv = strv_from_json(json_object_get(o, "argv"), "argv", AGT_JAIL_ARGV_MAX, err);
  j->rec.env = j->rec.argv
                   ? strv_from_json(json_object_get(o, "env"), "env", AGT_JAIL_ENV_MAX + 16, err)
                   : NULL;
  lim = json_object_get(o, "limits");
  if (j->rec.env == NULL || limits_from_json(lim, 1, &j->rec.limits, NULL, err) < 0 ||
      agt_net_policy_from_json(json_object_get(o, "network"), &j->rec.net, err) < 0 ||
      agt_binds_from_record(o, &j->rec.binds, err) < 0) {
    json_decref(o);
    agt_jail_free(j);
    return agt_error_wrap(err, "%s", path);
  }
  j->rec.tty = json_is_true(json_object_get(o, "tty"));
  j->rec.uid = (uid_t)json_integer_value(json_object_get(o, "uid"));
  j->rec.gid = (gid_t)json_integer_value(json_object_get(o, "gid"));
  j->rec.created = (time_t)json_integer_value(json_object_get(o, "created"));
  j->rec.started = (time_t)json_integer_value(json_object_get(o, "started"));
  j->rec.finished = (time_t)json_integer_value(json_object_get(o, "finished"));
  j->rec.runs = (unsigned)json_integer_value(json_object_get(o, "runs"));
  j->rec.exit_code = (int)json_integer_value(json_object_get(o, "exit_code"));
  j->rec.exit_signal = (int)json_integer_value(json_object_get(o, "exit_signal"));
  /* its secrets' values, by the record's directory and creation time (secrets.h) */
  if (json_array_size(json_object_get(o, "secrets")) > 0) {
    j->rec.secrets = strv_from_json(json_object_get(o, "secrets"), "secrets", 64, err);
    if (j->rec.secrets == NULL) {
      json_decref(o);
      agt_jail_free(j);
      return agt_error_wrap(err, "%s", path);
    }
    j->rec.secrets_lost = agt_secrets_restore(&j->rec);
    if (j->rec.secrets_lost) {
      cleanup_free char *names = xstrdup(j->rec.secrets_lost[0]);
      for (char **l = j->rec.secrets_lost + 1; *l; l++) {
        char *more = xasprintf("%s, %s", names, *l);
        free(names);
        names = more;
      }
      agt_log_warning("jail '%s': the values of its secrets %s are gone (the machine restarted "
                      "since they were kept, or the keyring refused them then, or their key is "
                      "not agtd's): it starts without them",
                      name, names);
    }
  }
  /* Where the log stands, from its files: the record was written at the last start or end
   * of a run, and output may have come since. */
  agt_outlog_stat(j->rec.log_path, j->rec.log_old_path, &j->out.log.pos);
  /* what its proxies refused before: counted once here, in memory from now on */
  {
    cleanup_free char *old = xasprintf("%s.1", j->rec.net_log_path);
    j->out.refused = agt_netlog_blocked(j->rec.net_log_path) + agt_netlog_blocked(old);
  }
  j->rec.state = state_from_name(json_string_value(json_object_get(o, "state")));
  if (json_string_value(json_object_get(o, "reason")))
    j->rec.exit_reason = xstrdup(json_string_value(json_object_get(o, "reason")));
  json_decref(o);
  if (j->rec.uid == 0) {
    agt_jail_free(j);
    return agt_error_kind(err, AGT_E_INVALID, "%s: the jail user is root; refused", path);
  }
  if (j->rec.state != AGT_JAIL_CREATED && j->rec.state != AGT_JAIL_EXITED)
    find_again(j);
  if (j->rec.state == AGT_JAIL_CREATED || j->rec.state == AGT_JAIL_EXITED)
    agt_cgroup_destroy(d->cgroup, j->rec.name, NULL);
  jail_link(d, j);
  agt_jail_save(j, NULL);
  return 0;
}

int agt_jail_load_all(struct agtd_s *d, agt_jail_find_fn find_again, agt_error_t *err)
{
  cleanup_dir DIR *dir = opendir(d->jails_dir);
  struct dirent *de;

  (void)err;
  if (dir == NULL)
    return 0;
  while ((de = readdir(dir)) != NULL) {
    agt_error_t e = NULL;
    if (de->d_name[0] == '.' || agt_name_check("jail name", de->d_name, NULL) < 0)
      continue;
    cleanup_free char *jdir = xasprintf("%s/%s", d->jails_dir, de->d_name);
    cleanup_free char *rec = xasprintf("%s/jail.json", jdir);
    if (access(rec, F_OK) < 0 && errno == ENOENT) {
      agt_log_info("removing '%s': no record (its start was cut short)", jdir);
      agt_disk_jail_remove(d->disk, jdir, NULL);
      continue;
    }
    if (load_one(d, de->d_name, find_again, &e) < 0) {
      agt_log_warning("skipping a jail record: %s", e->msg);
      agt_error_release(&e);
    }
  }
  return 0;
}

int agt_jail_remove(agt_jail_t *j, agt_error_t *err)
{
  agt_jail_t **p;

  if (j->rec.state != AGT_JAIL_CREATED && j->rec.state != AGT_JAIL_EXITED)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: stop it first", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  if (agt_disk_jail_remove(j->d->disk, j->rec.dir, err) < 0)
    return agt_error_wrap(err, "remove jail '%s'", j->rec.name);
  if (j->rec.workspace_owned && agt_rm_rf(j->rec.workspace, err) < 0)
    return agt_error_wrap(err, "remove the workspace of jail '%s'", j->rec.name);
  agt_secrets_forget(&j->rec);
  for (p = &j->d->jails; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      j->d->njails--;
      break;
    }
  j->next = NULL;
  j->run.removing = 1;
  agt_jail_maybe_free(j);
  return 0;
}

void agt_jail_maybe_free(agt_jail_t *j)
{
  if (j->run.removing && !j->run.cgroup_pending && j->run.handles_open == 0 &&
      !j->run.attach_pending && !j->run.usage_reading && !j->run.freeing) {
    j->run.freeing = 1;
    agt_jail_free(j);
  }
}

void agt_jail_release_init(agt_jail_t *j)
{
  if (j->run.answer_fd >= 0)
    close(j->run.answer_fd);
  j->run.answer_fd = -1;
}

void agt_jail_free_now(agt_jail_t *j)
{
  agt_jail_release_init(j);
  agt_outlog_close(&j->out.log);
  if (j->run.pidfd >= 0)
    close(j->run.pidfd);
  agt_pending_answer(&j->out.start_waiters, NULL, NULL);
  agt_pending_answer(&j->out.exit_waiters, NULL, NULL);
  free(j->rec.name);
  free(j->rec.agent);
  free(j->rec.rootfs_id);
  free(j->rec.rootfs_path);
  agt_strv_free(j->rec.layer_ids);
  agt_strv_free(j->rec.layer_paths);
  agt_strv_free(j->rec.secrets);
  agt_strv_free(j->rec.secrets_lost);
  free(j->rec.workspace);
  agt_strv_free(j->rec.argv);
  agt_strv_free(j->rec.env);
  free(j->rec.dir);
  free(j->rec.upper);
  free(j->rec.work);
  free(j->rec.merged);
  free(j->rec.log_path);
  free(j->rec.log_old_path);
  free(j->rec.net_log_path);
  free(j->out.screen);
  free(j->rec.exit_reason);
  agt_net_policy_release(&j->rec.net);
  agt_binds_release(&j->rec.binds);
  free(j);
}

static void jail_free_cb(uv_handle_t *h)
{
  agt_jail_free_now(h->data);
}

void agt_jail_free(agt_jail_t *j)
{
  j->run.stop_timer.data = j;
  uv_close((uv_handle_t *)&j->run.stop_timer, jail_free_cb);
}
