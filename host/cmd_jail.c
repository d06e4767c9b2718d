/* agt jail run|ls|inspect|logs|stop|rm: agtd's jail requests, through the target. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"
#include "base64.h"
#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

enum {
  OPT_MEMORY = 256,
  OPT_PIDS,
  OPT_CPU,
  OPT_NOFILE,
  OPT_TMP,
  OPT_LOG,
};

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

/* run */

static const struct agt_opt run_opts[] = {
    {'n', "name", "NAME", "the jail's name (AGENT-xxxxxx)"},
    {'r', "rootfs", "REF", "rootfs id, id prefix or manifest name (jail.rootfs: default)"},
    {'w', "workspace", "DIR",
     "bound at /work (the current directory inside a writable mount; else a new one)"},
    {'e', "env", "KEY=VALUE", "a variable for the agent (repeatable; jail.env)"},
    {OPT_MEMORY, "memory", "SIZE", "memory limit, e.g. 2G (jail.limits.memory)"},
    {OPT_PIDS, "pids", "N", "process limit (jail.limits.pids)"},
    {OPT_CPU, "cpu", "MILLI", "CPU limit in thousandths of a core (jail.limits.cpu)"},
    {OPT_NOFILE, "nofile", "N", "open file limit (jail.limits.nofile)"},
    {OPT_TMP, "tmp", "SIZE", "size of the jail's /tmp (jail.limits.tmp)"},
    {OPT_LOG, "log", "SIZE", "output kept on disk (jail.limits.log)"},
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help run_help = {
    "agt jail run [OPTIONS] [AGENT] [-- COMMAND [ARGS...]]",
    "Create a jail for AGENT (shell or opencode; jail.agent) and start it; answers once the "
    "agent runs.",
    run_opts};

struct run_opts {
  struct agt_ctx *c;
  json_t *params, *limits, *env;
  const char *workspace;
  int json;
};

static int set_limit(struct run_opts *o, const char *key, const char *v, int size, agt_error_t *err)
{
  uint64_t n;

  if ((size ? agt_parse_size(key, v, &n, err) : agt_parse_u64(key, v, &n, err)) < 0)
    return -1;
  json_object_set_new(o->limits, key, json_integer((json_int_t)n));
  return 0;
}

static int set_env(struct run_opts *o, const char *kv, agt_error_t *err)
{
  const char *eq = strchr(kv, '=');
  cleanup_free char *k = NULL;

  if (eq == NULL || eq == kv)
    return agt_error_kind(err, AGT_E_INVALID, "--env takes KEY=VALUE, not '%s'", kv);
  k = xstrndup(kv, (size_t)(eq - kv));
  json_object_set_new(o->env, k, json_string(eq + 1));
  return 0;
}

static int run_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct run_opts *o = ctx;

  switch (key) {
  case 'n':
    json_object_set_new(o->params, "name", json_string(arg));
    return 0;
  case 'r':
    json_object_set_new(o->params, "rootfs", json_string(arg));
    return 0;
  case 'w':
    o->workspace = arg;
    return 0;
  case 'e':
    return set_env(o, arg, err);
  case OPT_MEMORY:
    return set_limit(o, "memory", arg, 1, err);
  case OPT_TMP:
    return set_limit(o, "tmp", arg, 1, err);
  case OPT_LOG:
    return set_limit(o, "log", arg, 1, err);
  case OPT_PIDS:
    return set_limit(o, "pids", arg, 0, err);
  case OPT_CPU:
    return set_limit(o, "cpu", arg, 0, err);
  case OPT_NOFILE:
    return set_limit(o, "nofile", arg, 0, err);
  case AGT_OPT_JSON:
    o->json = 1;
    return 0;
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

/* The guest path of a host directory the VM mounts (NULL when it mounts none holding it);
 * *writable says whether that mount is writable. */
static char *guest_path(const struct agt_config *cfg, const char *host, int *writable)
{
  for (size_t i = cfg->nmounts; i-- > 0;) {
    const struct agt_cfg_mount *m = &cfg->mounts[i];
    if (agt_path_under(host, m->location)) {
      *writable = m->writable;
      if (m->mount_point == NULL)
        return xstrdup(host);
      return xasprintf("%s%s", m->mount_point, host + strlen(m->location));
    }
  }
  return NULL;
}

static int mount_root(const struct agt_config *cfg, const char *host)
{
  for (size_t i = 0; i < cfg->nmounts; i++)
    if (strcmp(cfg->mounts[i].location, host) == 0)
      return 1;
  return 0;
}

static int pick_workspace(struct run_opts *o, agt_error_t *err)
{
  struct agt_ctx *c = o->c;
  cleanup_free char *real = NULL, *guest = NULL;
  char cwd[4096];
  int writable = 0;

  if (o->workspace == NULL) {
    if (c->target.kind != AGT_TARGET_LIMA || getcwd(cwd, sizeof cwd) == NULL)
      return 0;
    guest = guest_path(&c->cfg, cwd, &writable);
    /* agtd takes workspaces below its roots (the mounts), not a root itself */
    if (guest && writable && !mount_root(&c->cfg, cwd))
      json_object_set_new(o->params, "workspace", json_string(guest));
    return 0;
  }
  if (c->target.kind == AGT_TARGET_SSH) {
    if (o->workspace[0] != '/')
      return agt_error_kind(err, AGT_E_INVALID,
                            "--workspace '%s': give the absolute path on the target host",
                            o->workspace);
    json_object_set_new(o->params, "workspace", json_string(o->workspace));
    return 0;
  }
  real = realpath(o->workspace, NULL);
  if (real == NULL)
    return agt_error_make(err, errno, "workspace '%s'", o->workspace);
  if (c->target.kind == AGT_TARGET_LOCAL) {
    json_object_set_new(o->params, "workspace", json_string(real));
    return 0;
  }
  guest = guest_path(&c->cfg, real, &writable);
  if (guest == NULL)
    return agt_error_kind(err, AGT_E_INVALID,
                          "workspace '%s' is not in a directory the VM mounts: add it to "
                          "vm.mounts in the config (then 'agt delete' and 'agt up')",
                          real);
  if (!writable)
    agt_note(c, "note: the VM mounts '%s' read-only", real);
  json_object_set_new(o->params, "workspace", json_string(guest));
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

static void limits_from_config(struct run_opts *o)
{
  static const struct {
    enum agt_cfg_key key;
    const char *name;
    int size;
  } lim[] = {
      {AGT_CFG_JAIL_MEMORY, "memory", 1}, {AGT_CFG_JAIL_PIDS, "pids", 0},
      {AGT_CFG_JAIL_CPU, "cpu", 0},       {AGT_CFG_JAIL_NOFILE, "nofile", 0},
      {AGT_CFG_JAIL_TMP, "tmp", 1},       {AGT_CFG_JAIL_LOG, "log", 1},
  };
  for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
    const char *v = agt_config_get(&o->c->cfg, lim[i].key);
    if (v)
      set_limit(o, lim[i].name, v, lim[i].size, NULL); /* checked when the config loaded */
  }
  for (size_t i = 0; i < o->c->cfg.nenv; i++)
    set_env(o, o->c->cfg.env[i].text, NULL);
}

static int jail_run(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct run_opts o = {c, json_object(), json_object(), json_object(), NULL, 0};
  const char *agent = agt_config_get(&c->cfg, AGT_CFG_JAIL_AGENT);
  json_t *res = NULL;
  int i, r = -1;

  limits_from_config(&o);
  i = agt_cmd_opts(argc, argv, &run_help, run_opt, &o, err);
  if (i == -2) {
    r = 0;
    goto out;
  }
  if (i < 0)
    goto out;
  if (i < argc && strcmp(argv[i - 1], "--") != 0) {
    agent = argv[i++];
    if (i < argc && strcmp(argv[i], "--") == 0)
      i++;
  }
  json_object_set_new(o.params, "agent", json_string(agent));
  if (!json_object_get(o.params, "name")) {
    cleanup_free char *name = random_name(agent);
    json_object_set_new(o.params, "name", json_string(name));
  }
  if (!json_object_get(o.params, "rootfs"))
    json_object_set_new(o.params, "rootfs",
                        json_string(agt_config_get(&c->cfg, AGT_CFG_JAIL_ROOTFS)));
  if (i < argc) {
    json_t *a = json_array();
    for (; i < argc; i++)
      json_array_append_new(a, json_string(argv[i]));
    json_object_set_new(o.params, "argv", a);
  }
  if (json_object_size(o.limits))
    json_object_set(o.params, "limits", o.limits);
  if (json_object_size(o.env))
    json_object_set(o.params, "env", o.env);
  if (pick_workspace(&o, err) < 0)
    goto out;
  if (call(c, "jail.run", json_incref(o.params), &res, err) < 0) {
    agt_error_wrap(err, "jail '%s'", str(o.params, "name"));
    goto out;
  }
  if (o.json) {
    agt_print_json(res);
  } else {
    json_t *ms = json_object_get(res, "start_ms");
    printf("%s", str(res, "name"));
    if (ms)
      printf(" started in %.2f ms", json_number_value(ms));
    printf("\n");
  }
  r = 0;
out:
  json_decref(res);
  json_decref(o.params);
  json_decref(o.limits);
  json_decref(o.env);
  return r;
}

/* ls */

static const struct agt_opt json_opts[] = {
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help ls_help = {"agt jail ls [--json]", "List the jails.", json_opts};

static const char *age(json_int_t t, char *buf, size_t n)
{
  long s = (long)(time(NULL) - t);

  if (t == 0)
    snprintf(buf, n, "-");
  else if (s < 120)
    snprintf(buf, n, "%lds", s);
  else if (s < 7200)
    snprintf(buf, n, "%ldm", s / 60);
  else
    snprintf(buf, n, "%ldh", s / 3600);
  return buf;
}

static void print_jails(json_t *jails)
{
  size_t i;
  json_t *j;

  printf("%-24s %-10s %-9s %-6s %-12s %-10s %s\n", "NAME", "AGENT", "STATE", "EXIT", "ROOTFS",
         "AGE", "MEMORY");
  json_array_foreach(jails, i, j)
  {
    char exitbuf[16] = "-", agebuf[32], mem[24] = "-";
    json_t *code = json_object_get(j, "exit_code");
    json_t *usage = json_object_get(j, "usage");
    if (code)
      snprintf(exitbuf, sizeof exitbuf, "%d", (int)json_integer_value(code));
    if (usage)
      snprintf(mem, sizeof mem, "%.1fM",
               (double)json_integer_value(json_object_get(usage, "memory")) / 1048576.0);
    printf("%-24s %-10s %-9s %-6s %-12.12s %-10s %s\n", str(j, "name"), str(j, "agent"),
           str(j, "state"), exitbuf, str(j, "rootfs"),
           age(json_integer_value(json_object_get(j, "created")), agebuf, sizeof agebuf), mem);
  }
}

static int jail_ls(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res;
  int json = 0, i;

  i = agt_cmd_opts(argc, argv, &ls_help, agt_opt_json_only, &json, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", ls_help.usage);
  if (call(c, "jail.ls", NULL, &res, err) < 0)
    return -1;
  if (json)
    agt_print_json(json_object_get(res, "jails"));
  else
    print_jails(json_object_get(res, "jails"));
  json_decref(res);
  return 0;
}

/* inspect */

static const struct agt_cmd_help inspect_help = {
    "agt jail inspect [--json] NAME", "Everything agtd knows about a jail, as JSON.", json_opts};

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

  i = one_name(argc, argv, &inspect_help, agt_opt_json_only, &json, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (call(c, "jail.inspect", json_pack("{s:s}", "name", name), &res, err) < 0)
    return -1;
  agt_print_json(res);
  json_decref(res);
  return 0;
}

/* logs */

static const struct agt_opt logs_opts[] = {
    {'f', "follow", NULL, "keep printing output as it comes, until the jail exits"},
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help logs_help = {
    "agt jail logs [-f] NAME", "Print a jail's captured output (stdout and stderr).", logs_opts};

static int logs_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  (void)arg;
  if (key != 'f')
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  *(int *)ctx = 1;
  return 0;
}

static int jail_logs(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = NULL;
  uint64_t offset = 0;
  int follow = 0, i;

  i = one_name(argc, argv, &logs_help, logs_opt, &follow, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  for (;;) {
    json_t *res;
    const char *b64, *state;
    size_t len = 0;
    cleanup_free char *data = NULL;
    uint64_t next, end;
    int done;

    if (call(c, "jail.logs", json_pack("{s:s, s:I}", "name", name, "offset", (json_int_t)offset),
             &res, err) < 0)
      return -1;
    b64 = json_string_value(json_object_get(res, "data_b64"));
    data = b64 ? agt_base64_decode(b64, &len) : NULL;
    if (data && len && fwrite(data, 1, len, stdout) != len) {
      json_decref(res);
      return agt_error_make(err, errno, "write logs");
    }
    next = (uint64_t)json_integer_value(json_object_get(res, "next"));
    end = (uint64_t)json_integer_value(json_object_get(res, "end"));
    state = str(res, "state");
    done =
        next >= end && (!follow || strcmp(state, "exited") == 0 || strcmp(state, "created") == 0);
    json_decref(res);
    offset = next;
    if (done)
      break;
    fflush(stdout);
    if (next >= end) {
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

/* stop */

static const struct agt_opt stop_opts[] = {
    {'g', "grace", "MS", "milliseconds between SIGTERM and SIGKILL (10000)"},
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help stop_help = {
    "agt jail stop [--grace MS] [--json] NAME",
    "Stop a jail: SIGTERM to its agent, SIGKILL after the grace period; answers once it exited.",
    stop_opts};

struct stop_opts {
  uint64_t grace;
  int json;
};

static int stop_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct stop_opts *o = ctx;

  if (key == 'g')
    return agt_parse_u64("--grace", arg, &o->grace, err);
  if (key == AGT_OPT_JSON) {
    o->json = 1;
    return 0;
  }
  return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
}

static void print_state(json_t *res)
{
  json_t *code = json_object_get(res, "exit_code");

  printf("%s: %s", str(res, "name"), str(res, "state"));
  if (code)
    printf(" (exit code %d)", (int)json_integer_value(code));
  printf("\n");
}

static int jail_stop(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct stop_opts o = {10000, 0};
  const char *name = NULL;
  json_t *res;
  int i;

  i = one_name(argc, argv, &stop_help, stop_opt, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (call(c, "jail.stop", json_pack("{s:s, s:I}", "name", name, "grace_ms", (json_int_t)o.grace),
           &res, err) < 0)
    return -1;
  if (o.json)
    agt_print_json(res);
  else
    print_state(res);
  json_decref(res);
  return 0;
}

/* rm */

static const struct agt_opt rm_opts[] = {
    {'f', "force", NULL, "kill the jail first if it runs"},
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help rm_help = {
    "agt jail rm [--force] [--json] NAME",
    "Remove a jail: its directory, overlay and logs (a workspace agtd made goes too).", rm_opts};

struct rm_opts {
  int force, json;
};

static int rm_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct rm_opts *o = ctx;

  (void)arg;
  if (key == 'f')
    o->force = 1;
  else if (key == AGT_OPT_JSON)
    o->json = 1;
  else
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  return 0;
}

static int jail_rm(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct rm_opts o = {0, 0};
  const char *name = NULL;
  json_t *res;
  int i;

  i = one_name(argc, argv, &rm_help, rm_opt, &o, &name, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (call(c, "jail.rm", json_pack("{s:s, s:b}", "name", name, "force", o.force), &res, err) < 0)
    return -1;
  if (o.json)
    agt_print_json(res);
  else
    printf("%s removed\n", name);
  json_decref(res);
  return 0;
}

static const struct {
  const char *name;
  agt_cmd_fn fn;
  const char *help;
} subs[] = {
    {"run", jail_run, "create a jail and start its agent"},
    {"ls", jail_ls, "list the jails"},
    {"inspect", jail_inspect, "everything about one jail, as JSON"},
    {"logs", jail_logs, "a jail's output (-f: follow it)"},
    {"stop", jail_stop, "stop a jail"},
    {"rm", jail_rm, "remove a jail"},
};

int cmd_jail(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    FILE *f = sub ? stdout : stderr;
    fprintf(f, "usage: agt jail COMMAND [ARGS...]\n\nThe agents' jails, run by agtd.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
      fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].help);
    return sub ? 0 : agt_error_kind(err, AGT_E_INVALID, "agt jail: which command?");
  }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (strcmp(subs[i].name, sub) == 0)
      return subs[i].fn(c, argc - 1, argv + 1, err);
  return agt_error_kind(err, AGT_E_INVALID,
                        "unknown jail command '%s' (run, ls, inspect, logs, stop, rm)", sub);
}
