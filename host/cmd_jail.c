/* agt jail run|create|start|attach|exec|logs|net|port|ls|inspect|stop|rm: agtd's jail
 * requests, through the target.  Streams (attach, logs -f, exec) are common/stream_relay.c's,
 * forwarded ports common/port_relay.c's (agtd ctl uses the same). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"
#include "agt_paths.h"
#include "base64.h"
#include "cleanup.h"
#include "envfile.h"
#include "jailfmt.h"
#include "jailspec.h"
#include "layers.h"
#include "names.h"
#include "port_relay.h"
#include "profile.h"
#include "stream_relay.h"
#include "timefmt.h"
#include "util.h"
#include "xalloc.h"

static const char *str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static int call(struct agt_ctx *c, const char *method, json_t *params, json_t **res,
                agt_error_t *err)
{
  int r = agt_target_call(&c->target, method, params, res, err);
  json_decref(params);
  return r;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Streams: a stream that ended because the connection dropped says so (why: the
 * target's agt_target_dropped, or NULL). */
static int dropped_error(const char *why, agt_error_t *err)
{
  if (why) {
    agt_error_release(err);
    return agt_error_kind(err, AGT_E_STATE, "%s", why);
  }
  return -1;
}

static int stream_failed(struct agt_ctx *c, struct agt_stream *s, agt_error_t *err)
{
  return dropped_error(s->closed ? agt_target_dropped(&c->target) : NULL, err);
}

/* A jail's log from offset, in chunks, up to its end now. */
static int print_log(struct agt_ctx *c, const char *name, uint64_t *offset, agt_error_t *err);

/* The jail's output from offset until it exits, losslessly (a follow stream; after a
 * dropped connection, again from where it stopped).  *code: the jail's exit code. */
static int follow_log(struct agt_ctx *c, const char *name, uint64_t offset, int *code,
                      agt_error_t *err)
{
  int tries = 0;

  *code = 0;
  for (;;) {
    struct agt_stream s;
    json_t *res;
    cleanup_free char *why = NULL;
    const char *dropped;
    agt_error_t e2 = NULL;

    if (call(c, "jail.logs",
             json_pack("{s:s, s:I, s:b}", "name", name, "offset", (json_int_t)offset, "follow", 1),
             &res, err) < 0)
      return -1;
    if (!json_is_true(json_object_get(res, "follow"))) {
      /* it has exited: what the log holds is all there is */
      json_decref(res);
      if (print_log(c, name, &offset, err) < 0)
        return -1;
      if (call(c, "jail.inspect", json_pack("{s:s}", "name", name), &res, err) < 0)
        return -1;
      *code = (int)json_integer_value(json_object_get(res, "exit_code"));
      json_decref(res);
      return 0;
    }
    offset = (uint64_t)json_integer_value(json_object_get(res, "offset"));
    json_decref(res);
    memset(&s, 0, sizeof s);
    s.rpc = &c->target.rpc;
    if (agt_stream_run(&s, err) == 0) {
      *code = s.exit_code;
      return 0;
    }
    if (s.have_next)
      offset = s.next;
    /* asked once: through the connection keeper, asking is a connection to it */
    dropped = s.closed ? agt_target_dropped(&c->target) : NULL;
    if (dropped == NULL || ++tries > 3)
      return dropped_error(dropped, err);
    why = xstrdup(dropped);
    agt_error_release(err);
    agt_target_disconnect(&c->target);
    if (!c->quiet)
      fprintf(stderr, "agt: %s; connecting again\n", why);
    if (agt_target_connect(&c->target, &e2) < 0) {
      agt_error_kind(err, e2->kind, "%s, and connecting again failed: %s", why, e2->msg);
      agt_error_release(&e2);
      return -1;
    }
  }
}

static size_t net_refused(struct agt_ctx *c, const char *name, char *first, size_t n);

/* Connect this terminal (or stdout) to a running jail until it exits (*code) or the user
 * detaches (*code -1).  -2: agtd refused to attach (the error says why). */
static int attach_jail(struct agt_ctx *c, const char *name, int read_only,
                       const struct agt_detach_keys *keys, const char *keys_spec, int *code,
                       agt_error_t *err)
{
  struct agt_stream s;
  json_t *res;
  int writer;

  char first[512];
  size_t refused = 0;

  *code = -1;
  if (isatty(2) && !c->quiet) /* before the attach: then the connection is the stream's */
    refused = net_refused(c, name, first, sizeof first);
  if (call(c, "jail.attach", json_pack("{s:s, s:b}", "name", name, "write", !read_only), &res,
           err) < 0)
    return -2;
  writer = json_is_true(json_object_get(res, "writer"));
  json_decref(res);
  if (isatty(2) && !c->quiet) {
    cleanup_free char *why =
        refused ? xasprintf("; its proxy refused %zu connection%s (agt jail net %s)", refused,
                            refused == 1 ? "" : "s", name)
                : xstrdup("");
    if (isatty(0))
      fprintf(stderr, "[attached to %s%s; detach with %s%s]\r\n", name, writer ? "" : ", read-only",
              keys_spec, why);
    else /* the keys come from a pipe or a file, not a person: no keys to offer */
      fprintf(stderr, "[attached to %s%s; stdin is not a terminal: ctrl-c or SIGTERM detaches%s]\n",
              name, writer ? "" : ", read-only", why);
  }
  memset(&s, 0, sizeof s);
  s.rpc = &c->target.rpc;
  s.interactive = writer;
  s.watch_keys = !writer && isatty(0); /* read-only: the detach keys work, nothing is sent */
  s.attach = 1;
  s.keys = keys;
  if (agt_stream_run(&s, err) < 0)
    return stream_failed(c, &s, err);
  if (s.end == AGT_STREAM_DETACHED) {
    fprintf(stderr, "%s[detached from %s; it keeps running]\r\n", isatty(1) ? "\r\n" : "", name);
    return 0;
  }
  *code = s.exit_code;
  return 0;
}

/* After run or start: on the jail's terminal when this is an interactive one, else its
 * output from log offset `from` until it exits.  agt then exits with the jail's code. */
static int watch_jail(struct agt_ctx *c, const char *name, uint64_t from, int on_terminal,
                      const struct agt_detach_keys *keys, const char *keys_spec, int *detached,
                      agt_error_t *err)
{
  int code = 0;

  *detached = 0;
  if (on_terminal) {
    agt_error_t e = NULL;
    int r = attach_jail(c, name, 0, keys, keys_spec, &code, &e);
    if (r == 0) {
      c->exit_code = code > 0 ? code : 0;
      *detached = code == -1;
      return 0;
    }
    if (r != -2 || e->kind != AGT_E_STATE) { /* not "it has exited already" */
      *err = e;
      return -1;
    }
    agt_error_release(&e); /* it ended before we could attach: its output, then its code */
  }
  if (follow_log(c, name, from, &code, err) < 0)
    return -1;
  c->exit_code = code;
  return 0;
}

/* run */

struct run_opts {
  struct agt_ctx *c;
  /* the options (the jail spec's): the config's (jail.limits, jail.env), then the flags' */
  struct agt_run_opts run;
  json_t *params; /* what the request carries beside them: argv, size, secrets */
  int json, detach, rm, yolo;
  char *shown;           /* the workspace on this machine, for the run's first line */
  char *made;            /* what run's strings point at when agt made them: the name, the user */
  char *user;            /* jail.home persistent: whose */
  char *workspace;       /* the workspace as agtd sees it */
  json_t *add_dirs;      /* --add-dir, as given ({path, writable}) */
  json_t *tools;         /* --tool, as given */
  size_t env_config;     /* variables from jail.env */
  json_t *mount_from;    /* for each of run.mounts: where it was asked ("--add-dir", FILE:LINE) */
  json_t *profile_hosts; /* the agent profile's default hosts */
};

static int env_file_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err);
static int tool_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err);

/* What agt says of the detach keys' default. */
#define DETACH_KEYS_NOTE " (" AGT_RUN_CONFIG(DETACH_KEYS) ": " AGT_RUN_DEFAULT(DETACH_KEYS) ")"
#define RUN(ID, note) AGT_JAIL_RUN_OPT(ID, struct run_opts, run, note)

static const struct agt_opt run_opts[] = {
    RUN(NAME, " (AGENT-xxxxxx)"),
    AGT_OPT_BOOL('d', "detach", struct run_opts, detach,
                 "start the jail and return, without attaching to it"),
    RUN(TTY, " (the default when attached from one)"),
    AGT_OPT_SETINT(0, "no-tty", struct run_opts, run.tty, 0, "run without a terminal"),
    RUN(NET, " (" AGT_RUN_CONFIG(NET) ")"),
    RUN(ALLOW, " (repeatable; added to " AGT_RUN_CONFIG(ALLOW) ")"),
    RUN(DETACH_KEYS, DETACH_KEYS_NOTE),
    RUN(ROOTFS, " (" AGT_RUN_CONFIG(ROOTFS) ": " AGT_RUN_DEFAULT(ROOTFS) ")"),
    RUN(WORKSPACE, " (the current directory inside a writable mount; else a new one)"),
    RUN(ENV, " (repeatable; " AGT_RUN_CONFIG(ENV) "); NAME alone takes agt's own value of it. A "
                                                  "VALUE here shows in this host's process list: "
                                                  "pass secrets by NAME or --env-file"),
    AGT_OPT_CALLBACK(0, "env-file", "FILE", struct run_opts, run.env, env_file_opt, 0,
                     "variables for the agent from FILE: NAME=VALUE lines, # comments "
                     "(repeatable; the last value given for a name wins)"),
    AGT_JAIL_LIMIT_OPTS_CONFIG(struct run_opts, run.limits),
    AGT_OPT_BOOL(0, "rm", struct run_opts, rm,
                 "remove the jail when it exits (agt waits for it: not with -d)"),
    AGT_JAIL_RUN_OPT_AS(MOUNTS, 0, "add-dir", struct run_opts, add_dirs,
                        " (repeatable; added to " AGT_RUN_CONFIG(MOUNTS) ")"),
    AGT_OPT_CALLBACK(0, "tool", "NAME", struct run_opts, tools, tool_opt, 0,
                     "copy a guest program into the jail with its libraries: a name on the "
                     "guest's PATH or an absolute path (repeatable; added to jail.tools)"),
    RUN(LOCKDOWN, " staged from the profile's clean copy (clean_home), no variables, no mounts, "
                  "network only to the agent's default hosts"),
    AGT_OPT_BOOL(0, "yolo", struct run_opts, yolo,
                 "add the flags of the agent's profile that skip its own permission prompts "
                 "(skip_permissions; never by default)"),
    AGT_OPT_JSON_FIELD(struct run_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help run_help = {
    "agt jail run [OPTIONS] [AGENT [--] [ARGS...]] | [OPTIONS] -- COMMAND [ARGS...]",
    "Create a jail for AGENT (an agent profile: agt agents ls; jail.agent), start it and attach "
    "to it (its "
    "terminal, or its output until it exits; -d: return once the agent runs).",
    run_opts};

/* create: run's options but those of attaching and of the run's end, which a jail that is
 * not started has none of ('agt jail start' takes --attach and --detach-keys). */
static const char *const not_for_create[] = {"detach", "detach-keys", "rm"};
static struct agt_opt create_opts[sizeof run_opts / sizeof run_opts[0]]; /* create_opts_fill */

static const struct agt_cmd_help create_help = {
    "agt jail create [OPTIONS] [AGENT] [-- COMMAND [ARGS...]]",
    "Create a jail as 'agt jail run' would, without starting it ('agt jail start' does).",
    create_opts};

/* create_opts: run_opts without not_for_create (their AGT_OPT_END included) */
static void create_opts_fill(void)
{
  size_t n = 0;

  for (size_t i = 0; i < sizeof run_opts / sizeof run_opts[0]; i++) {
    int skip = 0;
    for (size_t k = 0; k < sizeof not_for_create / sizeof not_for_create[0]; k++)
      skip |= run_opts[i].name && strcmp(run_opts[i].name, not_for_create[k]) == 0;
    if (!skip)
      create_opts[n++] = run_opts[i];
  }
}

/* One variable of an env file (ctx: the env object); a later one of the same name replaces
 * it. */
static int put_env(void *ctx, const char *name, const char *value, agt_error_t *err)
{
  json_t *v = json_string(value);

  if (v == NULL) /* jansson takes UTF-8 only */
    return agt_error_kind(err, AGT_E_INVALID, "the value of %s is not UTF-8 text", name);
  json_object_set_new(ctx, name, v);
  return 0;
}

/* --env-file FILE (agt's alone: --env is the jail spec's). */
static int env_file_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  struct agt_run_env *e = field;

  e->flag = e->flag ? e->flag : o->name;
  if (agt_envfile_read(arg, put_env, e->obj, err) < 0)
    return agt_error_wrap(err, "--env-file");
  return 0;
}

static int tool_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  const char *why = agt_config_tool_problem(arg, 0);

  (void)o;
  if (why)
    return agt_error_kind(err, AGT_E_INVALID, "--tool '%s': %s", arg, why);
  json_array_append_new(*(json_t **)field, json_string(arg));
  return 0;
}

/* The network of the agent's profile (agents.AGENT in the config), with the flags'
 * additions: mode from --net or agents.AGENT.net, hosts from agents.AGENT.allow then
 * --allow.  Nothing at all: agtd's default (allow, no host). */
static void network_params(struct run_opts *o, const char *agent)
{
  const struct agt_cfg_agent *a = agt_config_agent(&o->c->cfg, agent);
  json_t *allow = json_array(), *v;
  size_t i;

  if (o->run.net == NULL && a)
    o->run.net = a->net.text;
  json_array_foreach(o->profile_hosts, i, v) json_array_append(allow, v);
  for (i = 0; a && i < a->nallow; i++)
    json_array_append_new(allow, json_string(a->allow[i].text));
  json_array_extend(allow, o->run.allow);
  json_decref(o->run.allow);
  o->run.allow = allow;
}

/* The mount (vm.mounts) holding a host directory, the last one given winning; NULL when the
 * VM mounts none holding it. */
static const struct agt_cfg_mount *mount_of(const struct agt_config *cfg, const char *host)
{
  for (size_t i = cfg->nmounts; i-- > 0;)
    if (agt_path_under(host, cfg->mounts[i].location))
      return &cfg->mounts[i];
  return NULL;
}

/* A host directory's path as the VM sees it, through its mount. */
static char *guest_path(const struct agt_cfg_mount *m, const char *host)
{
  if (m->mount_point == NULL)
    return xstrdup(host);
  return xasprintf("%s%s", m->mount_point, host + strlen(m->location));
}

/* The config lines that make a directory visible to agtd: a writable mount of its parent
 * (a mount itself is a workspace root, and a root is not a workspace). */
static char *mount_advice(const char *dir)
{
  cleanup_free char *parent = xstrdup(dir);
  char *slash = strrchr(parent, '/');

  if (slash && slash != parent)
    *slash = '\0';
  else
    strcpy(parent, "/");
  return xasprintf("in agt's config (~/.config/agt/config.yaml; 'agt config show' names the "
                   "files it read):\n"
                   "    vm:\n"
                   "      mounts:\n"
                   "        - location: %s\n"
                   "          writable: true\n",
                   parent);
}

/* agtd's workspace roots on target local (daemon.status); NULL from an agtd that does not
 * say. */
static json_t *local_roots(struct agt_ctx *c, agt_error_t *err)
{
  json_t *res, *roots;

  if (agt_target_call(&c->target, "daemon.status", NULL, &res, err) < 0)
    return NULL;
  roots = json_incref(json_object_get(res, "workspace_roots"));
  json_decref(res);
  return roots ? roots : json_null();
}

/* Target local: dir must lie below one of agtd's roots, and not be one.  `what` names it in
 * errors ("the current directory", "--workspace"). */
static int local_visible(struct agt_ctx *c, const char *what, const char *dir, agt_error_t *err)
{
  json_t *roots = local_roots(c, err), *r;
  cleanup_free char *list = xstrdup(""), *advice = NULL;
  size_t i;

  if (roots == NULL)
    return -1;
  if (!json_is_array(roots)) { /* an agtd that does not list them: it judges for itself */
    json_decref(roots);
    return 0;
  }
  json_array_foreach(roots, i, r)
  {
    const char *root = json_string_value(r);
    char *more;
    if (root == NULL)
      continue;
    if (strcmp(dir, root) == 0) {
      agt_error_kind(err, AGT_E_INVALID,
                     "%s '%s' is one of agtd's workspace roots, which hold many projects: run "
                     "from a project directory inside it, or give --workspace DIR",
                     what, dir);
      json_decref(roots);
      return -1;
    }
    if (agt_path_under(dir, root)) {
      json_decref(roots);
      return 0;
    }
    more = xasprintf("%s%s%s", list, *list ? ", " : "", root);
    free(list);
    list = more;
  }
  json_decref(roots);
  advice = mount_advice(dir);
  return agt_error_kind(err, AGT_E_INVALID,
                        "%s '%s' is not where agtd can see it (target local: agtd takes "
                        "workspaces under %s), so the agent would get an empty /work. To "
                        "work on it, add %sthen restart agtd ('agt down && agt up'); or run "
                        "from a directory under those, or give --workspace DIR",
                        what, dir, list, advice);
}

/* The workspace: --workspace, else the current directory wherever agtd can see it (target
 * local: under agtd's roots; Lima: in a writable mount).  Where it cannot, agt refuses and
 * says which config lines fix it, rather than run the agent on an empty directory.
 * o->shown: the host directory, for the run's first line. */
static int pick_workspace(struct run_opts *o, agt_error_t *err)
{
  struct agt_ctx *c = o->c;
  const struct agt_cfg_mount *m;
  cleanup_free char *real = NULL, *advice = NULL, *where = NULL;
  const char *ws = o->run.workspace;
  const char *what = ws ? "--workspace" : "the current directory";
  char cwd[4096];

  if (c->target.kind == AGT_TARGET_SSH) {
    if (ws == NULL)
      return 0; /* the host cannot see this machine's files: agtd makes one */
    if (ws[0] != '/')
      return agt_error_kind(err, AGT_E_INVALID,
                            "--workspace '%s': give the absolute path on the target host", ws);
    o->shown = xstrdup(ws);
    return 0;
  }
  if (ws == NULL && getcwd(cwd, sizeof cwd) == NULL)
    return agt_error_make(err, errno, "the current directory");
  real = realpath(ws ? ws : cwd, NULL);
  if (real == NULL)
    return agt_error_make(err, errno, "%s '%s'", what, ws ? ws : cwd);
  if (c->target.kind == AGT_TARGET_LOCAL) {
    if (local_visible(c, what, real, err) < 0)
      return -1;
    o->shown = steal_pointer(&real);
    o->run.workspace = o->shown;
    return 0;
  }
  m = mount_of(&c->cfg, real);
  if (m == NULL) {
    advice = mount_advice(real);
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' is not in a directory the VM mounts, so the agent would get "
                          "an empty /work. To work on it, add %sthen 'agt delete && agt up' "
                          "(a VM takes its mounts when it is created); or run from a directory "
                          "inside a mount, or give --workspace DIR",
                          what, real, advice);
  }
  where = agt_cfg_origin_str(&m->origin);
  if (strcmp(real, m->location) == 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' is a mount itself (vm.mounts, %s), which agtd takes as a "
                          "root holding projects, not as one: run from a project directory "
                          "inside it, or give --workspace DIR",
                          what, real, where);
  if (!m->writable)
    return agt_error_kind(
        err, AGT_E_INVALID,
        "%s '%s' is in a mount the VM has read-only (%s in vm.mounts): set 'writable: "
        "true' there, then 'agt delete && agt up'",
        what, real, where);
  o->workspace = guest_path(m, real);
  o->run.workspace = o->workspace;
  o->shown = steal_pointer(&real);
  return 0;
}

/* One mount's path as agtd sees it: target local, the path itself (symlinks and '..'
 * resolved here); Lima, through the VM's mount holding it (a writable mount needs a
 * writable VM mount); ssh, as given (it must be absolute). */
static int mount_guest_path(struct run_opts *o, const char *what, const char *path, int writable,
                            char **out, agt_error_t *err)
{
  struct agt_ctx *c = o->c;
  const struct agt_cfg_mount *m;
  cleanup_free char *real = NULL;

  if (c->target.kind == AGT_TARGET_SSH) {
    if (path[0] != '/')
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s '%s': give the absolute path on the target host", what, path);
    *out = xstrdup(path);
    return 0;
  }
  real = realpath(path, NULL);
  if (real == NULL)
    return agt_error_make(err, errno, "%s '%s'", what, path);
  if (c->target.kind == AGT_TARGET_LOCAL) {
    *out = steal_pointer(&real);
    return 0;
  }
  m = mount_of(&c->cfg, real);
  if (m == NULL || strcmp(real, m->location) == 0) {
    cleanup_free char *advice = mount_advice(real);
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' is not in a directory the VM mounts, so no jail can see it. "
                          "Add %sthen 'agt delete && agt up'",
                          what, real, advice);
  }
  if (writable && !m->writable) {
    cleanup_free char *where = agt_cfg_origin_str(&m->origin);
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%s' is writable, in a mount the VM has read-only (%s in vm.mounts): "
                          "set 'writable: true' there, or mount it read-only",
                          what, real, where);
  }
  *out = guest_path(m, real);
  return 0;
}

/* run.mounts from jail.mounts, then --add-dir; mount_from says where each came from, so
 * that agtd's "mounts[N]: ..." can name the config line or the flag. */
static int mount_params(struct run_opts *o, agt_error_t *err)
{
  const struct agt_config *cfg = &o->c->cfg;
  json_t *mounts = json_array(), *v;
  size_t i;

  for (i = 0; i < cfg->njmounts; i++) {
    cleanup_free char *where = agt_cfg_origin_str(&cfg->jmounts[i].origin);
    cleanup_free char *what = xasprintf("jail.mounts (%s)", where);
    char *guest = NULL;
    if (mount_guest_path(o, what, cfg->jmounts[i].path, cfg->jmounts[i].writable, &guest, err) <
        0) {
      json_decref(mounts);
      return -1;
    }
    json_array_append_new(
        mounts, json_pack("{s:s, s:b}", "path", guest, "writable", cfg->jmounts[i].writable));
    json_array_append_new(o->mount_from, json_string(what));
    free(guest);
  }
  json_array_foreach(o->add_dirs, i, v)
  {
    const char *path = json_string_value(json_object_get(v, "path"));
    int rw = json_is_true(json_object_get(v, "writable"));
    char *guest = NULL;
    if (mount_guest_path(o, "--add-dir", path, rw, &guest, err) < 0) {
      json_decref(mounts);
      return -1;
    }
    json_array_append_new(mounts, json_pack("{s:s, s:b}", "path", guest, "writable", rw));
    json_array_append_new(o->mount_from, json_string("--add-dir"));
    free(guest);
  }
  json_decref(o->run.mounts);
  o->run.mounts = mounts;
  return 0;
}

/* agtd names a bad mount by its place in the request ("mounts[2] ..."): say which config
 * line or flag asked for it. */
static void mount_error_origin(struct run_opts *o, agt_error_t *err)
{
  const char *p = strstr((*err)->msg, "mounts[");
  json_t *from;
  char *msg;

  if (p == NULL)
    return;
  from = json_array_get(o->mount_from, strtoul(p + 7, NULL, 10));
  if (from == NULL)
    return;
  msg = xasprintf("%s (the mount from %s)", (*err)->msg, json_string_value(from));
  free((*err)->msg);
  (*err)->msg = msg;
}

/* --lockdown: nothing of the user's reaches the jail but the workspace.  No variables (the
 * flags that give some are refused; jail.env is left out), no mounts (--add-dir refused,
 * jail.mounts left out), a throwaway home (agtd's tmpfs) staged from the profile's clean
 * copy (clean_home) at each start, and the network of the agent's own defaults: mode
 * allow, only the hosts agt lists for the agent (the user's and the repository's
 * agents.AGENT.allow entries left out, --allow and --net open refused). */
static int lockdown_params(struct run_opts *o, const struct agt_profile *p, agt_error_t *err)
{
  const char *agent = p->name;
  const struct agt_cfg_agent *a = agt_config_agent(&o->c->cfg, agent);
  json_t *allow = json_array();
  size_t left = 0;

  if (o->run.env.flag)
    return agt_error_kind(err, AGT_E_INVALID,
                          "--%s with --lockdown: a lockdown jail gets no variables (no secrets)",
                          o->run.env.flag);
  if (json_array_size(o->add_dirs))
    return agt_error_kind(err, AGT_E_INVALID,
                          "--add-dir with --lockdown: a lockdown jail gets no mounts");
  if (json_array_size(o->run.allow))
    return agt_error_kind(err, AGT_E_INVALID,
                          "--allow with --lockdown: a lockdown jail reaches only the agent's "
                          "default hosts");
  if (o->run.net && strcmp(o->run.net, "open") == 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "--net open with --lockdown: a lockdown jail reaches only the agent's "
                          "default hosts");
  json_object_clear(o->run.env.obj);
  json_array_extend(allow, o->profile_hosts); /* the agent's provider, from its profile */
  if (o->env_config)
    agt_note(o->c, "lockdown: the %zu variable%s of jail.env not passed", o->env_config,
             o->env_config == 1 ? "" : "s");
  if (o->c->cfg.njmounts)
    agt_note(o->c, "lockdown: the %zu mount%s of jail.mounts not made", o->c->cfg.njmounts,
             o->c->cfg.njmounts == 1 ? "" : "s");
  for (size_t i = 0; a && i < a->nallow; i++) {
    if (a->allow[i].origin.src == AGT_CFG_DEFAULT)
      json_array_append_new(allow, json_string(a->allow[i].text));
    else
      left++;
  }
  if (left)
    agt_note(o->c, "lockdown: %zu host%s of agents.%s.allow from the config not allowed", left,
             left == 1 ? "" : "s", agent);
  o->run.net = o->run.net && strcmp(o->run.net, "none") == 0 ? "none" : "allow";
  json_decref(o->run.allow);
  o->run.allow = allow;
  if (p->nclean_home) {
    json_t *files = json_array();
    for (size_t i = 0; i < p->nclean_home; i++)
      json_array_append_new(files, json_pack("{s:s, s:s}", "path", p->clean_home[i].path, "content",
                                             p->clean_home[i].content));
    json_object_set_new(o->params, "home_files", files);
  }
  return 0;
}

static char *random_name(const char *agent)
{
  unsigned char b[3] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

  if (fd >= 0) {
    if (read(fd, b, sizeof b) != (ssize_t)sizeof b)
      b[0] = (unsigned char)getpid();
    close(fd);
  } else {
    b[0] = (unsigned char)time(NULL);
  }
  return xasprintf("%s-%02x%02x%02x", agent, b[0], b[1], b[2]);
}

/* jail.limits and jail.env, before the flags (which override them).  The limits were
 * checked when the config loaded; an env entry NAME may still miss from agt's
 * environment. */
static int from_config(struct run_opts *o, agt_error_t *err)
{
  for (int k = 0; k < AGT_SPEC_N; k++) {
    const char *v = agt_config_get(&o->c->cfg, AGT_CFG_JAIL_LIMIT(k));
    if (v)
      agt_jail_spec_set(&o->run.limits, (enum agt_spec_id)k, v, agt_jail_spec_keys[k].config,
                        NULL); /* checked when the config loaded */
  }
  for (size_t i = 0; i < o->c->cfg.nenv; i++) {
    const struct agt_cfg_item *e = &o->c->cfg.env[i];
    cleanup_free char *where = agt_cfg_origin_str(&e->origin);
    cleanup_free char *what = xasprintf("%s (%s)", AGT_RUN_CONFIG(ENV), where);
    if (agt_jail_run_env_put(&o->run.env, what, e->text, err) < 0)
      return -1;
  }
  o->env_config = json_object_size(o->run.env.obj);
  return 0;
}

/* The agent's profile: named on the command line, or jail.agent (from), any profile that
 * loaded (the tree's or the user's); an unknown one is refused naming the profiles, and
 * for jail.agent the config's file:line:column. */
static const struct agt_profile *agent_find(const struct agt_profile_set *set, const char *agent,
                                            const struct agt_cfg_value *from, const char *user_dir,
                                            agt_error_t *err)
{
  const struct agt_profile *p = agt_profiles_find(set, agent);
  char names[512] = "";

  if (p && p->kind == AGT_PROFILE_AGENT)
    return p;
  for (size_t i = 0; i < set->n; i++)
    if (set->p[i]->kind == AGT_PROFILE_AGENT)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "",
               set->p[i]->name);
  if (from) {
    cleanup_free char *where = agt_cfg_origin_str(&from->origin);
    agt_error_kind(err, AGT_E_INVALID,
                   "jail.agent (%s): %s '%s' (agents: %s); a profile of your own goes in "
                   "%s/%s.yaml (docs/AGENTS.md)",
                   where, p ? "not an agent but a runtime:" : "no agent profile", agent, names,
                   user_dir, agent);
    return NULL;
  }
  agt_error_kind(err, AGT_E_INVALID,
                 "unknown agent '%s' (%s); to run a command instead, put it after '--': agt jail "
                 "run -- %s ...",
                 agent, names, agent);
  return NULL;
}

/* The guest's architecture: agtd's daemon.status says it (this machine's when it does not). */
static char *guest_arch(struct agt_ctx *c, agt_error_t *err)
{
  json_t *st;
  char *a = NULL;
  struct utsname un;

  if (call(c, "daemon.status", NULL, &st, err) < 0)
    return NULL;
  if (json_string_value(json_object_get(st, "arch")))
    a = xstrdup(json_string_value(json_object_get(st, "arch")));
  json_decref(st);
  if (a == NULL && uname(&un) == 0)
    a = xstrdup(un.machine);
  return a;
}

static void say_building(void *ctx, const struct agt_layer *l)
{
  struct agt_ctx *c = ctx;
  agt_note(c, "building layer %s (%s%s; once, then shared by every jail of it)", l->name,
           l->p ? "npm " : "", l->spec);
}

/* What the profile brings to the jail: its layers and jail.tools' (built first when agtd
 * lacks them), the variables it always sets, its key and base URL from agt's environment
 * (the key as a secret agtd keeps in memory only), its command (unless COMMAND replaces it)
 * and its default hosts. */
static int profile_params(struct run_opts *o, const struct agt_profile_set *set,
                          const struct agt_profile *p, json_t *args, int replace, int tty,
                          agt_error_t *err)
{
  const struct agt_config *cfg = &o->c->cfg;
  struct agt_layer l[3];
  size_t n = 0;
  int built, r = -1;
  cleanup_free char *arch = NULL;

  if (cfg->ntools) { /* on top: the user's tools win over a layer's files of the same path */
    if (agt_tools_layer(cfg->tools, cfg->ntools, &l[0], err) < 0)
      return -1;
    n = 1;
  }
  if (p->runtime != AGT_RUNTIME_NONE) {
    size_t k = 0;
    if ((arch = guest_arch(o->c, err)) == NULL ||
        agt_agent_layers(cfg, set, p, arch, l + n, &k, err) < 0)
      goto out;
    n += k;
  }
  if (n) {
    for (size_t i = 0; i < n; i++)
      json_array_append_new(o->run.layers, json_string(l[i].name));
    if (agt_layers_build(&o->c->target, l, n, NULL, say_building, o->c, &built, err) < 0) {
      agt_tools_error(cfg->tools, cfg->ntools, err);
      goto out;
    }
  }
  for (char **e = p->set_env; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    cleanup_free char *name = xstrndup(*e, (size_t)(eq - *e));
    if (!json_object_get(o->run.env.obj, name))
      json_object_set_new(o->run.env.obj, name, json_string(eq + 1));
  }
  if (!o->run.lockdown && p->base_url_env && getenv(p->base_url_env) &&
      !json_object_get(o->run.env.obj, p->base_url_env))
    json_object_set_new(o->run.env.obj, p->base_url_env, json_string(getenv(p->base_url_env)));
  if (p->key_env && !o->run.lockdown) { /* a lockdown jail gets no secrets */
    if (getenv(p->key_env) && !json_object_get(o->run.env.obj, p->key_env))
      json_object_set_new(o->run.env.obj, p->key_env, json_string(getenv(p->key_env)));
    if (json_object_get(o->run.env.obj, p->key_env))
      json_object_set_new(o->params, "secrets", json_pack("[s]", p->key_env));
  }
  if (!replace) {
    json_t *argv = json_array();
    size_t i;
    json_t *v;
    for (char **a = tty || p->headless == NULL ? p->command : p->headless; *a; a++)
      json_array_append_new(argv, json_string(*a));
    for (char **a = o->yolo ? p->skip_permissions : NULL; a && *a; a++)
      json_array_append_new(argv, json_string(*a));
    json_array_foreach(args, i, v) json_array_append(argv, v);
    json_object_set_new(o->params, "argv", argv);
  } else if (o->yolo) {
    agt_error_kind(err, AGT_E_INVALID, "--yolo adds to the agent's command: not with '-- COMMAND'");
    goto out;
  }
  r = 0;
out:
  for (size_t i = 0; i < n; i++)
    agt_layer_release(&l[i]);
  return r;
}

/* On target local: a workspace of root's that others may not write.  The jail's user is the
 * workspace's owner but never root (docs/SECURITY.md), so its agent could only read it. */
static void say_root_workspace(const char *ws)
{
  struct stat st;

  if (ws && stat(ws, &st) == 0 && st.st_uid == 0 && !(st.st_mode & S_IWOTH))
    fprintf(stderr,
            "agt: the workspace is root's: the jail's user, never root, can read it but not "
            "write it ('chown USER %s' and the jail runs as USER)\n",
            ws);
}

/* The run's first lines, before anything else of the jail: where the agent works and what
 * it may reach. */
static void say_policy(struct run_opts *o, const char *agent, json_t *res)
{
  struct agt_ctx *c = o->c;
  json_t *allow = o->run.allow, *h;
  const char *mode = o->run.net;
  const char *name = str(res, "name");
  size_t i;

  if (c->quiet)
    return;
  if (o->shown) {
    fprintf(stderr, "agt: jail %s: workspace %s (at /work)\n", name, o->shown);
    if (c->target.kind == AGT_TARGET_LOCAL)
      say_root_workspace(str(res, "workspace"));
  } else
    fprintf(stderr, "agt: jail %s: workspace %s (at /work), a new directory agtd made%s\n", name,
            str(res, "workspace"),
            c->target.kind == AGT_TARGET_SSH ? " (the target host cannot see this machine's files)"
                                             : "");
  mode = mode ? mode : AGT_RUN_DEFAULT(NET); /* agtd's */
  if (strcmp(mode, "none") == 0) {
    fprintf(stderr, "agt: network: none (loopback only)\n");
    return;
  }
  if (strcmp(mode, "open") == 0) {
    fprintf(stderr, "agt: network: open (the internet through the VM's NAT, not the VM's own "
                    "services; no proxy)\n");
    return;
  }
  if (json_array_size(allow) == 0) {
    fprintf(stderr,
            "agt: network: allow, but no host is allowed (agents.%s.allow is empty; "
            "--allow HOST[:PORT] adds one)\n",
            agent);
    return;
  }
  fprintf(stderr, "agt: network: allow, through agtd's proxy, to ");
  json_array_foreach(allow, i, h) fprintf(stderr, "%s%s", i ? ", " : "", json_string_value(h));
  fprintf(stderr, " (agents.%s.allow, --allow; 'agt jail net %s' shows what it refused)\n", agent,
          name);
}

/* After the policy: a lockdown, and the mounts beside the workspace. */
static void say_binds(struct run_opts *o, const char *name)
{
  json_t *m;
  size_t i;

  if (o->c->quiet)
    return;
  if (o->run.lockdown)
    fprintf(stderr,
            "agt: jail %s: lockdown: a throwaway home (%zu file%s of the profile's clean_home), no "
            "variables, no mounts\n",
            name, json_array_size(json_object_get(o->params, "home_files")),
            json_array_size(json_object_get(o->params, "home_files")) == 1 ? "" : "s");
  json_array_foreach(o->run.mounts, i, m)
  {
    fprintf(stderr, "agt: jail %s: %s at the same path, %s (%s)\n", name, str(m, "path"),
            json_is_true(json_object_get(m, "writable")) ? "writable" : "read-only",
            json_string_value(json_array_get(o->mount_from, i)));
  }
}

/* Connections the jail's proxy refused so far: how many, and the first one's host and
 * reason (into first). */
static size_t net_refused(struct agt_ctx *c, const char *name, char *first, size_t n)
{
  uint64_t offset = 0;
  size_t count = 0;

  first[0] = '\0';
  for (int page = 0; page < 64; page++) {
    json_t *res, *e;
    size_t k;
    uint64_t next, end;
    agt_error_t er = NULL;

    if (call(c, "jail.net", json_pack("{s:s, s:I}", "name", name, "offset", (json_int_t)offset),
             &res, &er) < 0) {
      agt_error_release(&er);
      return count;
    }
    json_array_foreach(json_object_get(res, "entries"), k, e)
    {
      if (strcmp(str(e, "decision"), "blocked") != 0)
        continue;
      if (count++ == 0)
        snprintf(first, n, "%s:%lld (%s)", str(e, "host"),
                 (long long)json_integer_value(json_object_get(e, "port")), str(e, "reason"));
    }
    next = (uint64_t)json_integer_value(json_object_get(res, "next"));
    end = (uint64_t)json_integer_value(json_object_get(res, "end"));
    json_decref(res);
    if (next >= end || next == offset)
      break;
    offset = next;
  }
  return count;
}

/* Said where the user looks once the jail's terminal is left: what its proxy refused.  A jail
 * about to be removed (--rm) has no record left to list them from. */
static void say_refused(struct agt_ctx *c, const char *name, int removed)
{
  char first[512];
  size_t n = net_refused(c, name, first, sizeof first);
  cleanup_free char *where =
      removed ? xstrdup("") : xasprintf(": 'agt jail net %s' lists them", name);

  if (n)
    fprintf(stderr,
            "agt: jail %s: its network proxy refused %zu connection%s, the first to %s%s; --allow "
            "HOST[:PORT] or agents.AGENT.allow lets one through\n",
            name, n, n == 1 ? "" : "s", first, where);
}

static int run_or_create(struct agt_ctx *c, int argc, char **argv, int create, agt_error_t *err)
{
  struct run_opts o = {.c = c,
                       .params = json_object(),
                       .add_dirs = json_array(),
                       .tools = json_array(),
                       .mount_from = json_array(),
                       .profile_hosts = json_array()};
  const char *agent = agt_config_get(&c->cfg, AGT_CFG_JAIL_AGENT);
  struct agt_detach_keys keys;
  struct agt_profile_set set = {NULL, 0};
  const struct agt_profile *prof = NULL;
  json_t *res = NULL, *args = json_array(), *v;
  int i, r = -1, interactive, tty, named = 0;
  size_t k;

  agt_jail_run_init(&o.run);
  o.run.env.from = "agt's environment (export it before running agt, or put it in an --env-file)";
  if (from_config(&o, err) < 0)
    goto out;
  if (create)
    create_opts_fill();
  i = agt_cmd_opts(argc, argv, create ? &create_help : &run_help, NULL, &o, err);
  if (i == -2) {
    r = 0;
    goto out;
  }
  if (i < 0)
    goto out;
  json_array_foreach(o.tools, k, v)
  {
    struct agt_cfg_origin flag = {.src = AGT_CFG_FLAG, .what = "--tool"};
    if (agt_config_add_tool(&c->cfg, json_string_value(v), &flag, err) < 0)
      goto out;
  }
  /* AGENT [--] [ARGS...]: ARGS go after the agent's own command; -- COMMAND...: the command
   * replaces it */
  if (i < argc && strcmp(argv[i - 1], "--") != 0) {
    agent = argv[i++];
    named = 1;
    if (i < argc && strcmp(argv[i], "--") == 0)
      i++;
  }
  if (o.rm && o.detach) {
    agt_error_kind(err, AGT_E_INVALID,
                   "--rm removes the jail when it exits, which agt waits for: not with -d");
    goto out;
  }
  if (agt_profiles_load_for(c->cfg.user_file, &set, err) < 0)
    goto out;
  {
    cleanup_strv char **dirs = agt_profile_dirs(c->cfg.user_file);
    /* the user's directory is the second (there is none without a config file) */
    const char *user_dir = dirs[0] && dirs[1] ? dirs[1] : "~/.config/agt/agents";
    prof = agent_find(&set, agent, named ? NULL : &c->cfg.v[AGT_CFG_JAIL_AGENT], user_dir, err);
    if (prof == NULL)
      goto out;
  }
  for (char **h = prof->hosts; h && *h; h++)
    json_array_append_new(o.profile_hosts, json_string(*h));
  o.run.agent = agent;
  if (o.run.name == NULL)
    o.run.name = o.made = random_name(agent);
  if (o.run.rootfs == NULL)
    o.run.rootfs = agt_config_get(&c->cfg, AGT_CFG_JAIL_ROOTFS);
  for (; i < argc; i++)
    json_array_append_new(args, json_string(argv[i]));
  if (o.run.lockdown) {
    if (lockdown_params(&o, prof, err) < 0)
      goto out;
  } else {
    network_params(&o, agent);
    if (mount_params(&o, err) < 0)
      goto out;
    if (strcmp(agt_config_get(&c->cfg, AGT_CFG_JAIL_HOME), "persistent") == 0) {
      o.run.home = "persistent";
      o.run.user = o.user = agt_home_user();
    }
  }
  if (o.run.keys == NULL)
    o.run.keys = agt_config_get(&c->cfg, AGT_CFG_JAIL_DETACH_KEYS);
  if (agt_detach_keys_parse(o.run.keys, &keys, err) < 0)
    goto out;
  /* Attached from a terminal, the jail gets one too: the agent runs as a person runs it
   * (opencode's TUI).  Detached (-d), from a script, or created, it runs headless (opencode
   * serve, reached with jail port) unless -t asks for a terminal. */
  interactive = !create && !o.detach && isatty(0);
  tty = o.run.tty >= 0 ? o.run.tty : interactive;
  o.run.tty = tty;
  if (tty) {
    unsigned rows, cols;
    if (agt_term_size(0, &rows, &cols) == 0)
      json_object_set_new(o.params, "size", json_pack("[i,i]", (int)rows, (int)cols));
  }
  /* the profile: layers, env, and its command unless COMMAND replaces it */
  if (profile_params(&o, &set, prof, args, !named && json_array_size(args) > 0, tty, err) < 0)
    goto out;
  if (!named && json_array_size(args) > 0)
    json_object_set(o.params, "argv", args);
  if (pick_workspace(&o, err) < 0)
    goto out;
  agt_jail_run_to_json(&o.run, o.params);
  if (call(c, create ? "jail.create" : "jail.run", json_incref(o.params), &res, err) < 0) {
    if ((*err)->kind == AGT_E_NOTFOUND && strstr((*err)->msg, "no rootfs '")) {
      cleanup_free char *how = agt_rootfs_advice(c, o.run.rootfs);
      char *msg = xasprintf("%s: %s", (*err)->msg, how);
      free((*err)->msg);
      (*err)->msg = msg;
    }
    mount_error_origin(&o, err);
    agt_error_wrap(err, "jail '%s'", o.run.name);
    goto out;
  }
  say_policy(&o, agent, res);
  say_binds(&o, str(res, "name"));
  if (!create && !o.detach && !o.json) {
    int detached = 0;
    r = watch_jail(c, str(res, "name"), 0, interactive && tty, &keys, o.run.keys, &detached, err);
    if (r == 0) {
      agt_target_disconnect(&c->target); /* the stream used that connection up */
      say_refused(c, str(res, "name"), o.rm && !detached);
    }
    if (r == 0 && o.rm && !detached) {
      json_t *gone;
      if (call(c, "jail.rm", json_pack("{s:s}", "name", str(res, "name")), &gone, err) < 0)
        r = -1;
      else
        json_decref(gone);
    } else if (r == 0 && o.rm) {
      agt_note(c, "jail %s keeps running, so --rm leaves it: 'agt jail rm -f %s' removes it",
               str(res, "name"), str(res, "name"));
    }
    goto out;
  }
  if (o.json) {
    agt_print_json(res);
  } else {
    json_t *ms = json_object_get(res, "start_ms");
    printf("%s", str(res, "name"));
    if (ms)
      printf(" started in %.2f ms", json_number_value(ms));
    else if (create)
      printf(" created");
    printf("\n");
  }
  r = 0;
out:
  json_decref(args);
  json_decref(o.profile_hosts);
  agt_profiles_release(&set);
  free(o.shown);
  free(o.made);
  free(o.user);
  free(o.workspace);
  json_decref(res);
  json_decref(o.params);
  agt_jail_run_release(&o.run);
  json_decref(o.add_dirs);
  json_decref(o.tools);
  json_decref(o.mount_from);
  return r;
}

static int jail_run(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return run_or_create(c, argc, argv, 0, err);
}

static int jail_create(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return run_or_create(c, argc, argv, 1, err);
}

/* ls */

/* A command's one flag (ctx: an int). */
struct flag {
  int on;
};

static const struct agt_opt inspect_opts[] = {
    AGT_OPT_FORMAT_FIELD(struct flag, on),
    AGT_OPT_JSON_FIELD(struct flag, on),
    AGT_OPT_END,
};

struct ls_opts {
  int json, quiet;
};

static const struct agt_opt ls_opts[] = {
    AGT_OPT_BOOL('q', "quiet", struct ls_opts, quiet,
                 "only the names, one a line (for scripts: agt jail rm $(agt jail ls -q))"),
    AGT_OPT_FORMAT_FIELD(struct ls_opts, json),
    AGT_OPT_JSON_FIELD(struct ls_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help ls_help = {
    "agt jail ls [-q] [--json | --format TEMPLATE]",
    "List the jails: agent, state (and exit code), age, CPU time and memory (as agtd last "
    "read them from the jail's cgroup, read again when older than 2 s: as old as the time "
    "since the listing before; JSON usage.age_ms), attached clients, connections refused by "
    "the network proxy.",
    ls_opts};

/* The table and -q ask agtd for the table's columns only: a short answer among many jails,
 * and no cgroup read for -q.  An agtd from before the columns answers with the jails. */
static json_t *table_params(int quiet)
{
  json_t *cols = json_array();

  for (const char *const *n = agt_jail_table_columns; *n; n++) {
    json_array_append_new(cols, json_string(*n));
    if (quiet)
      break; /* "name" */
  }
  return json_pack("{s:o}", "columns", cols);
}

static int jail_ls(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res, *j, *rows;
  struct ls_opts o = {0, 0};
  int i;
  size_t k;

  i = agt_cmd_opts(argc, argv, &ls_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", ls_help.usage);
  if (call(c, "jail.ls", o.json ? NULL : table_params(o.quiet), &res, err) < 0)
    return -1;
  i = 0;
  rows = json_object_get(res, "rows");
  if (rows) {
    if (o.quiet)
      json_array_foreach(rows, k, j) printf("%s\n", json_string_value(json_array_get(j, 0)));
    else if (agt_print_jail_rows(stdout, res) < 0)
      i = agt_error_kind(err, AGT_E_PROTO, "jail.ls: the answer's table lacks a column");
  } else if (o.quiet)
    json_array_foreach(json_object_get(res, "jails"), k, j) printf("%s\n", str(j, "name"));
  else if (o.json)
    i = agt_print_out(json_object_get(res, "jails"), NULL, err);
  else
    agt_print_jails(stdout, json_object_get(res, "jails"));
  json_decref(res);
  return i < 0 ? -1 : 0;
}

/* inspect */

static const struct agt_cmd_help inspect_help = {
    "agt jail inspect [--json | --format TEMPLATE] NAME",
    "Everything agtd knows about a jail, as JSON.", inspect_opts};

static int one_name(int argc, char **argv, const struct agt_cmd_help *h, agt_opt_fn fn, void *ctx,
                    const char **name, agt_error_t *err)
{
  int i = agt_cmd_opts(argc, argv, h, fn, ctx, err);

  if (i < 0)
    return i;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", h->usage);
  *name = argv[i];
  return i;
}

static int jail_inspect(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = NULL;
  json_t *res;
  int json = 0, i;

  i = one_name(argc, argv, &inspect_help, NULL, &json, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (call(c, "jail.inspect", json_pack("{s:s}", "name", name), &res, err) < 0)
    return -1;
  i = agt_print_out(res, NULL, err);
  json_decref(res);
  return i < 0 ? -1 : 0;
}

/* logs */

/* --since or --until TIME. */
struct when {
  int set;
  int64_t ns;
};

struct logs_opts {
  int follow, timestamps;
  uint64_t offset;
  struct when since, until;
};

static int time_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  struct when *w = field;
  cleanup_free char *what = xasprintf("--%s", o->name);

  w->set = 1;
  return agt_parse_time(what, arg, agt_now_ns(), &w->ns, err);
}

static const struct agt_opt logs_opts[] = {
    AGT_OPT_BOOL('f', "follow", struct logs_opts, follow,
                 "go on with the output as it comes, nothing lost, until the jail exits"),
    AGT_OPT_UINT(0, "offset", "BYTES", struct logs_opts, offset,
                 "start at this byte offset of the log (0)"),
    AGT_OPT_CALLBACK(0, "since", "TIME", struct logs_opts, since, time_opt, 0,
                     "only the lines written since TIME: RFC 3339 (2026-12-02T03:51:38Z, "
                     "2026-12-02), a Unix time, or a duration before now (10m, 1h30m)"),
    AGT_OPT_CALLBACK(0, "until", "TIME", struct logs_opts, until, time_opt, 0,
                     "only the lines written before TIME (as --since; not with -f)"),
    AGT_OPT_BOOL('t', "timestamps", struct logs_opts, timestamps,
                 "begin each line with the time it was written (RFC 3339, UTC)"),
    AGT_OPT_END,
};

static const struct agt_cmd_help logs_help = {
    "agt jail logs [-f] [-t] [--since TIME] [--until TIME] [--offset BYTES] NAME",
    "Print a jail's captured output (stdout and stderr, or its terminal).", logs_opts};

static int print_log(struct agt_ctx *c, const char *name, uint64_t *offset, agt_error_t *err)
{
  for (;;) {
    json_t *res;
    size_t len;
    uint64_t next, end;
    int r;

    if (call(c, "jail.logs", json_pack("{s:s, s:I}", "name", name, "offset", (json_int_t)*offset),
             &res, err) < 0)
      return -1;
    r = agt_print_log_chunk(stdout, res, &len, &next, &end, err);
    json_decref(res);
    if (r < 0)
      return -1;
    *offset = next;
    if (next >= end || len == 0)
      return 0;
  }
}

/* A chunk of jail.logs with its times: each line begun with the time of the record that
 * dates its first byte (*bol: the chunk starts a line). */
static int print_stamped(json_t *res, int *bol, agt_error_t *err)
{
  const char *b64 = json_string_value(json_object_get(res, "data_b64"));
  json_t *times = json_object_get(res, "times");
  uint64_t off = (uint64_t)json_integer_value(json_object_get(res, "offset"));
  cleanup_free char *data = NULL;
  size_t len = 0, k = 0, i, n = json_array_size(times);

  data = b64 ? agt_base64_decode(b64, &len) : NULL;
  for (i = 0; data && i < len; i++, off++) {
    if (*bol) {
      char when[40] = "-";
      /* the last record at or before this byte */
      while (k + 1 < n &&
             (uint64_t)json_integer_value(json_array_get(json_array_get(times, k + 1), 0)) <= off)
        k++;
      if (k < n && (uint64_t)json_integer_value(json_array_get(json_array_get(times, k), 0)) <= off)
        agt_format_time(json_integer_value(json_array_get(json_array_get(times, k), 1)), when,
                        sizeof when);
      printf("%s ", when);
    }
    putchar(data[i]);
    *bol = data[i] == '\n';
  }
  if (ferror(stdout))
    return agt_error_make(err, errno, "write logs");
  return 0;
}

/* The log between --since and --until (each a time, by agtd's index of when each line was
 * written), or from --offset, to its end now; with -t each line stamped.  -f -t polls as
 * agt jail net -f does, since the stream carries no times. */
static int print_range(struct agt_ctx *c, const char *name, const struct logs_opts *o,
                       agt_error_t *err)
{
  uint64_t offset = o->offset;
  int first = 1, bol = 1;

  for (;;) {
    json_t *res, *p = json_pack("{s:s, s:I, s:b}", "name", name, "offset", (json_int_t)offset,
                                "times", o->timestamps);
    uint64_t next, end, stop;
    size_t len;
    const char *state;
    int r, done;

    if (first && o->since.set)
      json_object_set_new(p, "since_ns", json_integer(o->since.ns > 0 ? o->since.ns : 1));
    if (o->until.set)
      json_object_set_new(p, "until_ns", json_integer(o->until.ns > 0 ? o->until.ns : 1));
    if (call(c, "jail.logs", p, &res, err) < 0)
      return -1;
    first = 0;
    if (o->timestamps) {
      r = print_stamped(res, &bol, err);
      next = (uint64_t)json_integer_value(json_object_get(res, "next"));
      end = (uint64_t)json_integer_value(json_object_get(res, "end"));
      len = (size_t)(next - (uint64_t)json_integer_value(json_object_get(res, "offset")));
    } else {
      r = agt_print_log_chunk(stdout, res, &len, &next, &end, err);
    }
    stop = json_object_get(res, "stop") ? (uint64_t)json_integer_value(json_object_get(res, "stop"))
                                        : end;
    state = str(res, "state");
    done = !o->follow || strcmp(state, "exited") == 0 || strcmp(state, "created") == 0;
    json_decref(res);
    if (r < 0)
      return -1;
    offset = next;
    if (next >= stop || len == 0) {
      if (done)
        return 0;
      fflush(stdout);
      sleep_ms(200);
    }
  }
}

static int jail_logs(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct logs_opts o;
  const char *name = NULL;
  uint64_t offset;
  int i, code;

  memset(&o, 0, sizeof o);
  i = one_name(argc, argv, &logs_help, NULL, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (o.follow && o.until.set)
    return agt_error_kind(err, AGT_E_INVALID,
                          "--until ends the output, -f follows it on: not both (podman's rule)");
  offset = o.offset;
  if (o.timestamps || o.until.set || (o.since.set && !o.follow))
    return print_range(c, name, &o, err);
  if (o.since.set) { /* where that time starts, then the stream from there */
    json_t *res;
    if (call(c, "jail.logs",
             json_pack("{s:s, s:I, s:I}", "name", name, "since_ns",
                       (json_int_t)(o.since.ns > 0 ? o.since.ns : 1), "max", (json_int_t)0),
             &res, err) < 0)
      return -1;
    offset = (uint64_t)json_integer_value(json_object_get(res, "offset"));
    json_decref(res);
  }
  if (o.follow)
    return follow_log(c, name, offset, &code, err);
  return print_log(c, name, &offset, err);
}

/* start */

struct start_opts {
  int attach, json;
  const char *keys;
};

static const struct agt_opt start_opts[] = {
    AGT_OPT_BOOL('a', "attach", struct start_opts, attach,
                 "attach to the jail once it runs (as 'agt jail run' does)"),
    AGT_JAIL_RUN_OPT_IN(DETACH_KEYS, 0, struct start_opts, keys, DETACH_KEYS_NOTE),
    AGT_OPT_JSON_FIELD(struct start_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help start_help = {
    "agt jail start [--attach] [--detach-keys KEYS] [--json] NAME",
    "Start a jail that was created, or has exited; answers once its agent runs.  When a "
    "restart of the VM took the value of its agent's key, agt gives it its own value again "
    "(from its environment, as 'agt jail run' did).",
    start_opts};

/* jail.start's params: the name and, for the secrets whose values agtd lost (the VM
 * restarted since the jail was made: its secrets_lost), agt's own values of them, as
 * agt jail run took the agent's key.  A value agt's environment lacks is said, and the jail
 * starts without it. */
static int secrets_again(struct agt_ctx *c, const char *name, json_t **params, agt_error_t *err)
{
  json_t *res, *lost, *v, *values = json_object();
  size_t i;

  if (call(c, "jail.inspect", json_pack("{s:s}", "name", name), &res, err) < 0) {
    json_decref(values);
    return -1;
  }
  lost = json_object_get(res, "secrets_lost");
  json_array_foreach(lost, i, v)
  {
    const char *k = json_string_value(v), *val = k ? getenv(k) : NULL;
    if (val)
      json_object_set_new(values, k, json_string(val));
    else if (k)
      fprintf(stderr,
              "agt: jail %s: the VM restarted since it was made and took the value of %s, "
              "which agt's environment does not have: it starts without it\n",
              name, k);
  }
  json_decref(res);
  *params = json_pack("{s:s}", "name", name);
  if (json_object_size(values) > 0)
    json_object_set_new(*params, "secrets", values);
  else
    json_decref(values);
  return 0;
}

static int jail_start(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct start_opts o = {0, 0, NULL};
  struct agt_detach_keys keys;
  const char *name = NULL;
  json_t *res, *params;
  uint64_t from = 0;
  int i;

  i = one_name(argc, argv, &start_help, NULL, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (o.keys == NULL)
    o.keys = agt_config_get(&c->cfg, AGT_CFG_JAIL_DETACH_KEYS);
  if (agt_detach_keys_parse(o.keys, &keys, err) < 0)
    return -1;
  if (o.attach) { /* the log goes on across runs: this run's output starts at its end now */
    if (call(c, "jail.logs", json_pack("{s:s, s:I}", "name", name, "max", (json_int_t)0), &res,
             err) < 0)
      return -1;
    from = (uint64_t)json_integer_value(json_object_get(res, "end"));
    json_decref(res);
  }
  if (secrets_again(c, name, &params, err) < 0)
    return -1;
  if (call(c, "jail.start", params, &res, err) < 0)
    return -1;
  if (o.attach) {
    int term = isatty(0) && json_is_true(json_object_get(res, "tty"));
    json_decref(res);
    int detached;
    return watch_jail(c, name, from, term, &keys, o.keys, &detached, err);
  }
  if (o.json) {
    agt_print_json(res);
  } else {
    printf("%s started in %.2f ms\n", str(res, "name"),
           json_number_value(json_object_get(res, "start_ms")));
  }
  json_decref(res);
  return 0;
}

/* attach */

struct attach_opts {
  int read_only;
  const char *keys;
};

static const struct agt_opt attach_opts[] = {
    AGT_OPT_BOOL('r', "read-only", struct attach_opts, read_only,
                 "watch without typing into the jail's terminal"),
    AGT_JAIL_RUN_OPT_IN(DETACH_KEYS, 0, struct attach_opts, keys, DETACH_KEYS_NOTE),
    AGT_OPT_END,
};

static const struct agt_cmd_help attach_help = {
    "agt jail attach [--read-only] [--detach-keys KEYS] NAME",
    "Connect this terminal to a running jail's terminal (raw mode, window size passed on); "
    "the detach keys leave it running.  The first client attached types, others watch.",
    attach_opts};

static int jail_attach(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct attach_opts o = {0, NULL};
  struct agt_detach_keys keys;
  const char *name = NULL;
  int i, code;

  i = one_name(argc, argv, &attach_help, NULL, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (o.keys == NULL)
    o.keys = agt_config_get(&c->cfg, AGT_CFG_JAIL_DETACH_KEYS);
  if (agt_detach_keys_parse(o.keys, &keys, err) < 0)
    return -1;
  if (attach_jail(c, name, o.read_only, &keys, o.keys, &code, err) < 0)
    return -1;
  if (code > 0)
    c->exit_code = code;
  return 0;
}

/* exec */

struct exec_opts {
  int in, tty;
  const char *keys;
};

static const struct agt_opt exec_opts[] = {
    AGT_OPT_BOOL('i', "interactive", struct exec_opts, in,
                 "give the command this stdin (a terminal's keys with -t; else its bytes, and its "
                 "end)"),
    AGT_OPT_BOOL('t', "tty", struct exec_opts, tty,
                 "run the command on a terminal of the jail: this one's keys, window size and "
                 "detach keys (stdin must be a terminal)"),
    AGT_JAIL_RUN_OPT_IN(DETACH_KEYS, 0, struct exec_opts, keys,
                        " (with -t: the command keeps running; " AGT_RUN_CONFIG(
                            DETACH_KEYS) ": " AGT_RUN_DEFAULT(DETACH_KEYS) ")"),
    AGT_OPT_END,
};

static const struct agt_cmd_help exec_help = {
    "agt jail exec [-i] [-t] [--detach-keys KEYS] NAME [--] COMMAND [ARGS...]",
    "Run another command in a running jail (its namespaces, user, limits and environment, in "
    "/work; stdin /dev/null without -i); prints its output and exits with its exit code.",
    exec_opts};

static int jail_exec(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct exec_opts o = {0, 0, NULL};
  struct agt_detach_keys keys;
  struct agt_stream s;
  const char *name;
  json_t *res, *a, *params;
  int i = agt_cmd_opts(argc, argv, &exec_help, NULL, &o, err);

  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i >= argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", exec_help.usage);
  name = argv[i++];
  if (i < argc && strcmp(argv[i], "--") == 0)
    i++;
  if (i >= argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", exec_help.usage);
  if (o.tty && !isatty(0))
    return agt_error_kind(err, AGT_E_INVALID,
                          "-t: stdin is not a terminal (the input device is not a TTY); to "
                          "give the command a pipe or a file, use -i alone");
  if (o.keys == NULL)
    o.keys = agt_config_get(&c->cfg, AGT_CFG_JAIL_DETACH_KEYS);
  if (agt_detach_keys_parse(o.keys, &keys, err) < 0)
    return -1;
  a = json_array();
  for (; i < argc; i++)
    json_array_append_new(a, json_string(argv[i]));
  params = json_pack("{s:s, s:o}", "name", name, "argv", a);
  if (o.in)
    json_object_set_new(params, "stdin", json_true());
  if (o.tty) {
    unsigned rows, cols;
    json_object_set_new(params, "tty", json_true());
    if (agt_term_size(0, &rows, &cols) == 0)
      json_object_set_new(params, "size", json_pack("[i,i]", (int)rows, (int)cols));
  }
  if (call(c, "jail.exec", params, &res, err) < 0)
    return -1;
  json_decref(res);
  memset(&s, 0, sizeof s);
  s.rpc = &c->target.rpc;
  s.interactive = o.tty && o.in; /* raw mode, keys, resizes */
  s.watch_keys = o.tty && !o.in; /* raw mode and the detach keys; nothing typed is sent */
  s.pipe_in = o.in && !o.tty;
  s.keys = &keys;
  if (agt_stream_run(&s, err) < 0)
    return stream_failed(c, &s, err);
  if (s.end == AGT_STREAM_DETACHED) {
    fprintf(stderr, "\r\n[detached from the command in %s; it keeps running]\r\n", name);
    return 0;
  }
  if (s.end == AGT_STREAM_INTERRUPTED) { /* the connection's end kills the command */
    c->exit_code = 128 + s.signal;
    return 0;
  }
  c->exit_code = s.exit_code;
  return 0;
}

/* net */

struct net_opts {
  int follow, json;
};

static const struct agt_opt net_opts[] = {
    AGT_OPT_BOOL('f', "follow", struct net_opts, follow,
                 "go on printing decisions as they come, until the jail exits"),
    AGT_OPT_JSON_FIELD(struct net_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help net_help = {
    "agt jail net [-f] [--json] NAME",
    "What the jail's network proxy allowed and refused, and why: one line per decision (with "
    "--json, one JSON object per line).",
    net_opts};

static void print_decision(json_t *e)
{
  printf("%-8s %-7s %s:%lld", str(e, "decision"), str(e, "method"), str(e, "host"),
         (long long)json_integer_value(json_object_get(e, "port")));
  if (json_object_get(e, "address"))
    printf(" (%s)", str(e, "address"));
  if (json_object_get(e, "bytes_up"))
    printf(" up %lld down %lld", (long long)json_integer_value(json_object_get(e, "bytes_up")),
           (long long)json_integer_value(json_object_get(e, "bytes_down")));
  if (json_object_get(e, "reason"))
    printf(": %s", str(e, "reason"));
  printf("\n");
}

static int jail_net(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct net_opts o = {0, 0};
  const char *name = NULL;
  uint64_t offset = 0;
  int i;

  i = one_name(argc, argv, &net_help, NULL, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  for (;;) {
    json_t *res, *e;
    const char *state;
    size_t k;
    uint64_t next, end;
    int done;

    if (call(c, "jail.net", json_pack("{s:s, s:I}", "name", name, "offset", (json_int_t)offset),
             &res, err) < 0)
      return -1;
    json_array_foreach(json_object_get(res, "entries"), k, e)
    {
      if (o.json) {
        char *line = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
        if (line)
          puts(line);
        free(line);
      } else {
        print_decision(e);
      }
    }
    next = (uint64_t)json_integer_value(json_object_get(res, "next"));
    end = (uint64_t)json_integer_value(json_object_get(res, "end"));
    state = str(res, "state");
    done =
        next >= end && (!o.follow || strcmp(state, "exited") == 0 || strcmp(state, "created") == 0);
    json_decref(res);
    offset = next;
    if (done)
      return 0;
    fflush(stdout);
    if (next >= end)
      sleep_ms(200);
  }
}

/* port */

static const struct agt_cmd_help port_help = {
    "agt jail port NAME GUESTPORT [LOCALPORT]",
    "Forward this machine's 127.0.0.1:LOCALPORT (GUESTPORT; 0: any free port) to GUESTPORT on "
    "the jail's loopback, through agtd, until ctrl-c or the jail's end.",
    NULL};

static int parse_port(const char *what, const char *s, int zero_ok, unsigned *out, agt_error_t *err)
{
  uint64_t v;

  if (agt_parse_u64(what, s, &v, err) < 0)
    return -1;
  if (v > 65535 || (v == 0 && !zero_ok))
    return agt_error_kind(err, AGT_E_INVALID, "%s %s is out of range (%d..65535)", what, s,
                          zero_ok ? 0 : 1);
  *out = (unsigned)v;
  return 0;
}

static int target_open(void *ctx, agt_rpc_t *rpc, agt_error_t *err)
{
  return agt_target_open(ctx, rpc, err);
}

static void port_listening(void *ctx, unsigned port)
{
  struct agt_portfwd *p = ctx;

  printf("forwarding 127.0.0.1:%u to port %u in jail %s (ctrl-c stops)\n", port, p->guest_port,
         p->jail);
  fflush(stdout);
}

static int jail_port(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct agt_portfwd p;
  json_t *res;
  int i = agt_cmd_opts(argc, argv, &port_help, NULL, NULL, err);

  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i < 2 || argc - i > 3)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", port_help.usage);
  memset(&p, 0, sizeof p);
  p.open = target_open;
  p.open_ctx = &c->target;
  p.prog = "agt";
  p.jail = argv[i];
  p.quiet = c->quiet;
  p.listening = port_listening;
  p.ctx = &p;
  if (parse_port("guest port", argv[i + 1], 0, &p.guest_port, err) < 0)
    return -1;
  p.local_port = p.guest_port;
  if (argc - i == 3 && parse_port("local port", argv[i + 2], 1, &p.local_port, err) < 0)
    return -1;
  /* once up front, so a wrong name or a stopped jail fails here, not per connection */
  if (call(c, "jail.inspect", json_pack("{s:s}", "name", p.jail), &res, err) < 0)
    return -1;
  if (strcmp(str(res, "state"), "running") != 0) {
    agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: only a running jail's ports can be reached",
                   p.jail, str(res, "state"));
    json_decref(res);
    return -1;
  }
  json_decref(res);
  return agt_portfwd_run(&p, err);
}

/* Several names: each in turn, the errors said as they come; a failure for any is agt's
 * failure at the end (as docker rm and stop do). */
static int each_name(struct agt_ctx *c, int argc, char **argv, int i, int json,
                     json_t *(*params)(const char *name, void *ctx), void *ctx, const char *method,
                     void (*say)(json_t *res, const char *name), agt_error_t *err)
{
  json_t *all = json_array();
  int n = argc - i, failed = 0;

  for (; i < argc; i++) {
    json_t *res;
    agt_error_t e = NULL;
    if (call(c, method, params(argv[i], ctx), &res, &e) < 0) {
      if (n == 1) {
        *err = e;
        json_decref(all);
        return -1;
      }
      fprintf(stderr, "agt: %s\n", e->msg);
      agt_error_release(&e);
      failed++;
      continue;
    }
    if (json)
      json_array_append(all, res);
    else
      say(res, argv[i]);
    json_decref(res);
  }
  if (json)
    agt_print_json(n == 1 ? json_array_get(all, 0) : all);
  json_decref(all);
  if (failed)
    return agt_error_kind(err, AGT_E_STATE, "%s: %d of %d jails failed (said above)", method,
                          failed, n);
  return 0;
}

/* stop */

struct stop_opts {
  uint64_t grace;
  int json;
};

/* -t SECONDS: the grace period as docker stop takes it, at most a day. */
static int seconds_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  uint64_t s;

  (void)o;
  if (agt_parse_u64("-t", arg, &s, err) < 0)
    return -1;
  if (s > 86400)
    return agt_error_kind(err, AGT_E_INVALID, "-t %s: at most a day (86400)", arg);
  *(uint64_t *)field = s * 1000;
  return 0;
}

static const struct agt_opt stop_opts[] = {
    AGT_OPT_CALLBACK('t', "time", "SECONDS", struct stop_opts, grace, seconds_opt, 0,
                     "seconds between SIGTERM and SIGKILL (10), as docker stop -t"),
    AGT_OPT_UINT('g', "grace", "MS", struct stop_opts, grace, "the same in milliseconds (10000)"),
    AGT_OPT_JSON_FIELD(struct stop_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help stop_help = {
    "agt jail stop [-t SECONDS] [--json] NAME...",
    "Stop jails: SIGTERM to each agent, SIGKILL after the grace period; answers once they exited.",
    stop_opts};

static void print_state(json_t *res, const char *name)
{
  json_t *code = json_object_get(res, "exit_code");

  (void)name;
  printf("%s: %s", str(res, "name"), str(res, "state"));
  if (code)
    printf(" (exit code %d)", (int)json_integer_value(code));
  printf("\n");
}

static json_t *stop_params(const char *name, void *ctx)
{
  const struct stop_opts *o = ctx;
  return json_pack("{s:s, s:I}", "name", name, "grace_ms", (json_int_t)o->grace);
}

/* Names from argv[i..]: at least one. */
static int names_from(int argc, char **argv, const struct agt_cmd_help *h, agt_opt_fn fn, void *ctx,
                      agt_error_t *err)
{
  int i = agt_cmd_opts(argc, argv, h, fn, ctx, err);

  if (i < 0)
    return i;
  if (i >= argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", h->usage);
  return i;
}

static int jail_stop(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct stop_opts o = {10000, 0};
  int i = names_from(argc, argv, &stop_help, NULL, &o, err);

  if (i < 0)
    return i == -2 ? 0 : -1;
  return each_name(c, argc, argv, i, o.json, stop_params, &o, "jail.stop", print_state, err);
}

/* rm */

struct rm_opts {
  int force, json;
};

static const struct agt_opt rm_opts[] = {
    AGT_OPT_BOOL('f', "force", struct rm_opts, force, "kill the jail first if it runs"),
    AGT_OPT_JSON_FIELD(struct rm_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help rm_help = {
    "agt jail rm [--force] [--json] NAME...",
    "Remove jails: each one's directory, overlay and logs (a workspace agtd made goes too).",
    rm_opts};

static void print_removed(json_t *res, const char *name)
{
  (void)res;
  printf("%s removed\n", name);
}

static json_t *rm_params(const char *name, void *ctx)
{
  const struct rm_opts *o = ctx;
  return json_pack("{s:s, s:b}", "name", name, "force", o->force);
}

static int jail_rm(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct rm_opts o = {0, 0};
  int i = names_from(argc, argv, &rm_help, NULL, &o, err);

  if (i < 0)
    return i == -2 ? 0 : -1;
  return each_name(c, argc, argv, i, o.json, rm_params, &o, "jail.rm", print_removed, err);
}

/* prune */

static const struct agt_opt prune_opts[] = {
    AGT_OPT_BOOL('f', "force", struct flag, on, "do not ask first"),
    AGT_OPT_END,
};

static const struct agt_cmd_help prune_help = {
    "agt jail prune [--force]",
    "Remove every jail that has exited (asks first; --force without a terminal).", prune_opts};

static int jail_prune(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct rm_opts o = {0, 0};
  json_t *res, *j, *names = json_array();
  int force = 0, i, r = 0;
  size_t k;

  i = agt_cmd_opts(argc, argv, &prune_help, NULL, &force, err);
  if (i < 0)
    return json_decref(names), i == -2 ? 0 : -1;
  if (i < argc) {
    json_decref(names);
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", prune_help.usage);
  }
  if (call(c, "jail.ls", NULL, &res, err) < 0) {
    json_decref(names);
    return -1;
  }
  json_array_foreach(json_object_get(res, "jails"), k,
                     j) if (strcmp(str(j, "state"), "exited") == 0)
      json_array_append_new(names, json_string(str(j, "name")));
  json_decref(res);
  if (json_array_size(names) == 0) {
    printf("no jail has exited: nothing to remove\n");
    json_decref(names);
    return 0;
  }
  if (!force) {
    cleanup_free char *q = xasprintf("remove %zu exited jail%s?", json_array_size(names),
                                     json_array_size(names) == 1 ? "" : "s");
    if (!agt_confirm(q)) {
      json_decref(names);
      return agt_error_kind(err, AGT_E_INVALID, "nothing removed%s",
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
    }
  }
  json_array_foreach(names, k, j)
  {
    char *one[] = {(char *)json_string_value(j)};
    if (each_name(c, 1, one, 0, 0, rm_params, &o, "jail.rm", print_removed, err) < 0) {
      r = -1;
      break;
    }
  }
  json_decref(names);
  return r;
}

static const struct agt_subcmd subs[] = {
    {"run", jail_run, "create a jail, start its agent and attach to it (-d: do not)"},
    {"create", jail_create, "create a jail without starting it"},
    {"start", jail_start, "start a created or exited jail"},
    {"attach", jail_attach, "connect this terminal to a running jail's terminal"},
    {"exec", jail_exec, "run another command in a running jail"},
    {"logs", jail_logs, "a jail's output (-f: follow it, nothing lost)"},
    {"net", jail_net, "what the jail's network proxy allowed and refused"},
    {"port", jail_port, "forward a local port to a port on the jail's loopback"},
    {"ls", jail_ls, "list the jails"},
    {"inspect", jail_inspect, "everything about one jail, as JSON"},
    {"stop", jail_stop, "stop jails"},
    {"rm", jail_rm, "remove jails"},
    {"prune", jail_prune, "remove every jail that has exited"},
};

int cmd_jail(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return agt_subcmd_run(c, "jail", "The agents' jails, run by agtd.", subs,
                        sizeof subs / sizeof subs[0], argc, argv, err);
}
