/* agt: the host CLI.  main() parses the global options, loads the config, resolves the
 * target as the command's flags ask, runs the command from the table, and prints its error
 * once. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agt.h"
#include "agt_version.h"
#include "cleanup.h"
#include "tmpl.h"
#include "util.h"
#include "xalloc.h"

static const struct agt_cmd commands[] = {
    {"up", cmd_up, AGT_NEED_TARGET,
     "create the VM if missing, start it, and wait until agtd answers"},
    {"stop", cmd_stop, AGT_NEED_TARGET, "stop the VM (target local: agtd)"},
    {"down", cmd_stop, AGT_NEED_TARGET, "the same as stop"},
    {"delete", cmd_delete, AGT_NEED_TARGET,
     "delete the VM and its disk (target local: agtd's state)"},
    {"reset", cmd_reset, AGT_NEED_TARGET, "factory-reset the VM: a new disk, the same settings"},
    {"clone", cmd_clone, AGT_NEED_TARGET, "copy the VM into a new one (gold image)"},
    {"restore", cmd_restore, AGT_NEED_TARGET | AGT_NEED_LIMA,
     "replace the VM by a copy of a gold image, and start it"},
    {"shell", cmd_shell, AGT_NEED_TARGET, "a shell, or one command, in the VM"},
    {"status", cmd_status, AGT_NEED_TARGET, "the VM's state, agtd's version, jails and rootfs"},
    {"template", cmd_template, 0, "print the Lima template rendered from the config"},
    {"config", cmd_config, 0, "show the merged config and where each value came from"},
    {"jail", cmd_jail, AGT_NEED_TARGET,
     "run, attach, exec, logs, net, port, ls, stop, rm, ...: the agents' jails"},
    {"rootfs", cmd_rootfs, AGT_NEED_TARGET, "build, ls, rm, update: the jails' root filesystems"},
    {"agents", cmd_agents, AGT_NEED_TARGET,
     "ls, update, home: the agent profiles, their layers, their homes on the target"},
    {"verify", cmd_verify, AGT_NEED_TARGET,
     "run N opencode jails at once against a test model and check them"},
    {"completion", cmd_completion, 0, "a completion script for bash, zsh or fish"},
    {"doctor", cmd_doctor, AGT_NEED_TARGET | AGT_CONFIG_ERRORS_OK,
     "check the host, the VM and the guest, and say how to fix what fails"},
};

struct globals {
  const char *config;
  const char *target;
  const char *instance;
  int quiet;
  int version;
};

static const struct agt_opt global_opts[] = {
    AGT_OPT_STRING('c', "config", "FILE", struct globals, config,
                   "the user config file (~/.config/agt/config.yaml; $AGT_CONFIG)"),
    AGT_OPT_STRING('t', "target", "TARGET", struct globals, target,
                   "lima:NAME, ssh://USER@HOST[:PORT] or local ($AGT_TARGET)"),
    AGT_OPT_STRING('i', "instance", "NAME", struct globals, instance,
                   "the Lima VM's name (agt_agent_sandbox; $AGT_INSTANCE)"),
    AGT_OPT_BOOL('q', "quiet", struct globals, quiet, "no progress lines on stderr"),
    AGT_OPT_BOOL(0, "version", struct globals, version, "print agt's version"),
    AGT_OPT_END,
};

static void usage(FILE *f)
{
  agt_opts_usage(f, "agt [OPTIONS] COMMAND [ARGS...]",
                 "Run AI coding agents in jails inside a Lima VM.  'agt COMMAND --help' "
                 "describes each command.",
                 global_opts);
  fprintf(f, "\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "  %-10s %s\n", "help", "'agt help COMMAND [SUB]' is 'agt COMMAND [SUB] --help'");
  fprintf(f, "  %-10s %s\n", "version", "print agt's version (as --version)");
}

/* Helpers for the commands. */

/* --format of the command that runs (agt runs one): agt_print_out prints through it. */
static struct agt_format *format;

/* The callback of the command that runs, for AGT_OPT_FORMAT_ENTRY (agt runs one command). */
static agt_opt_fn command_fn;

static int set_format(const char *arg, agt_error_t *err)
{
  agt_format_free(format);
  format = NULL;
  if (agt_format_parse(arg, &format, err) < 0)
    return agt_error_wrap(err, "--format");
  return 0;
}

/* --format TEMPLATE: checked at once (before the command does anything), then the command
 * sees --json, whose output agt_print_out formats. */
int agt_opt_format(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  (void)o;
  if (set_format(arg, err) < 0)
    return -1;
  *(int *)field = 1;
  return 0;
}

static int format_shim(void *ctx, int key, const char *arg, agt_error_t *err)
{
  if (key != AGT_OPT_FORMAT)
    return command_fn(ctx, key, arg, err);
  if (set_format(arg, err) < 0)
    return -1;
  return command_fn(ctx, AGT_OPT_JSON, NULL, err);
}

int agt_print_out(json_t *v, json_t *items, agt_error_t *err)
{
  if (format == NULL) {
    agt_print_json(v);
    return 0;
  }
  if (agt_format_print(format, stdout, items ? items : v, err) < 0)
    return agt_error_wrap(err, "--format");
  return 0;
}

int agt_cmd_opts(int argc, char **argv, const struct agt_cmd_help *h, agt_opt_fn fn, void *ctx,
                 agt_error_t *err)
{
  static const struct agt_opt none[] = {AGT_OPT_END};
  int i;

  if (strstr(h->usage, "COMMAND") == NULL)
    agt_opts_permute(argc, argv, h->opts ? h->opts : none);
  command_fn = fn;
  i = agt_opts_parse(argc, argv, h->opts ? h->opts : none, fn ? format_shim : NULL, ctx, err);

  if (i == -2)
    agt_opts_usage(stdout, h->usage, h->summary, h->opts);
  if (i == -1 && strncmp(h->usage, "agt ", 4) == 0) {
    /* "agt: jail ls: unknown option ...": the command is named, by the usage's words up to
     * the first that is not one (an operand, an option, "bash|zsh|fish"), the last as the
     * user typed it (argv[0]: down for stop) */
    size_t len = 3, last = 4, w;
    while (h->usage[len] == ' ' && islower((unsigned char)h->usage[len + 1])) {
      for (w = len + 1; islower((unsigned char)h->usage[w]) || h->usage[w] == '-'; w++)
        ;
      if (h->usage[w] != ' ' && h->usage[w] != '\0')
        break;
      last = len + 1;
      len = w;
    }
    if (len > 4)
      agt_error_wrap(err, "%.*s%s", (int)(last - 4), h->usage + 4, argv[0]);
  }
  return i;
}

int agt_subcmd_run(struct agt_ctx *c, const char *cmd, const char *summary,
                   const struct agt_subcmd *subs, size_t n, int argc, char **argv, agt_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : NULL;
  cleanup_free char *names = xstrdup("");

  if (sub == NULL || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    FILE *f = sub ? stdout : stderr;
    fprintf(f, "usage: agt %s COMMAND [ARGS...]\n\n%s\n\ncommands:\n", cmd, summary);
    for (size_t i = 0; i < n; i++)
      fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].help);
    return sub ? 0 : agt_error_kind(err, AGT_E_INVALID, "agt %s: which command?", cmd);
  }
  cleanup_free const char **list = xzalloc((n + 1) * sizeof *list);
  const char *near;

  for (size_t i = 0; i < n; i++) {
    char *more;
    if (strcmp(subs[i].name, sub) == 0)
      return subs[i].fn(c, argc - 1, argv + 1, err);
    more = xasprintf("%s%s%s", names, i ? ", " : "", subs[i].name);
    free(names);
    names = more;
    list[i] = subs[i].name;
  }
  near = agt_closest(sub, list, n);
  if (near)
    return agt_error_kind(err, AGT_E_INVALID,
                          "unknown %s command '%s': did you mean 'agt %s %s'? (%s)", cmd, sub, cmd,
                          near, names);
  return agt_error_kind(err, AGT_E_INVALID, "unknown %s command '%s' (%s)", cmd, sub, names);
}

const struct agt_opt agt_json_opts[] = {
    AGT_OPT_JSON_FIELD(struct agt_flags, json),
    AGT_OPT_END,
};

const struct agt_opt agt_json_format_opts[] = {
    AGT_OPT_FORMAT_FIELD(struct agt_flags, json),
    AGT_OPT_JSON_FIELD(struct agt_flags, json),
    AGT_OPT_END,
};

void agt_note(struct agt_ctx *c, const char *fmt, ...)
{
  va_list ap;

  if (c->quiet)
    return;
  va_start(ap, fmt);
  fputs("agt: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void agt_print_json(json_t *v)
{
  char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  if (s) {
    puts(s);
    free(s);
  }
}

int agt_confirm(const char *question)
{
  char buf[16];

  if (!isatty(STDIN_FILENO))
    return 0;
  fprintf(stderr, "%s [y/N] ", question);
  fflush(stderr);
  if (fgets(buf, sizeof buf, stdin) == NULL)
    return 0;
  return buf[0] == 'y' || buf[0] == 'Y';
}

int agt_need_lima(struct agt_ctx *c, const char *cmd, agt_error_t *err)
{
  /* what to do instead, on a target without a VM */
  static const struct {
    const char *cmd, *local, *ssh;
  } instead[] = {
      {"stop", NULL, "stop agtd on that host (systemctl stop agtd)"},
      {"delete", NULL, "remove agtd's state on that host yourself"},
      {"reset",
       "'agt delete' removes agtd's state (jails, root filesystems, disk image), then "
       "'agt up' starts afresh",
       "remove agtd's state on that host yourself"},
      {"clone",
       "a gold image is a copy of a Lima VM; here the jails' root filesystems are the "
       "images ('agt rootfs ls')",
       "copy that host with its own tools"},
      {"restore", "there is no VM to restore; 'agt delete' then 'agt up' starts afresh", NULL},
  };
  const char *hint = NULL;

  if (c->target.kind == AGT_TARGET_LIMA)
    return 0;
  for (size_t i = 0; i < sizeof instead / sizeof instead[0]; i++)
    if (strcmp(instead[i].cmd, cmd) == 0)
      hint = c->target.kind == AGT_TARGET_LOCAL ? instead[i].local : instead[i].ssh;
  return agt_error_kind(err, AGT_E_INVALID,
                        "'agt %s' drives a Lima VM, and the target is '%s', which has none%s%s "
                        "(--target lima:NAME drives a VM)",
                        cmd, c->target.spec, hint ? ": " : "", hint ? hint : "");
}

int agt_vm_state(struct agt_ctx *c, struct agt_lima_instance *in, int *found, agt_error_t *err)
{
  if (agt_lima_list(&c->lima, c->target.instance, in, found, err) < 0)
    return agt_error_wrap(err, "vm '%s'", c->target.instance);
  return 0;
}

static void progress(void *ctx, const char *level, const char *msg)
{
  struct agt_ctx *c = ctx;

  if (strcmp(level, "info") == 0)
    agt_note(c, "vm: %s", msg);
  else if (strcmp(level, "fatal") != 0 && strcmp(level, "error") != 0) /* those end the error */
    agt_note(c, "vm: %s: %s", level, msg);
}

/* Rank of a value's source: a flag beats a variable beats a file beats a default. */
static int rank(enum agt_cfg_src s)
{
  switch (s) {
  case AGT_CFG_FLAG:
    return 3;
  case AGT_CFG_ENV:
    return 2;
  case AGT_CFG_FILE:
    return 1;
  case AGT_CFG_DEFAULT:
    return 0;
  }
  return 0;
}

/* Settle the target in the config: an explicit one, with `lima` meaning lima:<vm.name>
 * and a vm.name given more directly than the target replacing its name; else the
 * default.  Fails only when there is no target at all. */
static int settle_target(struct agt_ctx *c, agt_error_t *err)
{
  struct agt_cfg_value *t = &c->cfg.v[AGT_CFG_TARGET];
  const struct agt_cfg_value *name = &c->cfg.v[AGT_CFG_VM_NAME];
  const char *why;
  char *spec;

  if (t->text == NULL) {
    if (agt_target_default(&c->cfg, &spec, &why, err) < 0)
      return -1;
    t->text = spec;
    t->origin.src = AGT_CFG_DEFAULT;
    t->origin.what = why;
    return 0;
  }
  if (strcmp(t->text, "lima") == 0 ||
      (strncmp(t->text, "lima:", 5) == 0 && rank(name->origin.src) > rank(t->origin.src))) {
    free(t->text);
    t->text = xasprintf("lima:%s", name->text);
  }
  return 0;
}

/* --help or -h (before any "--"): the command prints its usage, whatever the target, and
 * even where there is none to settle (a Mac without limactl). */
static int wants_help(int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return 1;
  return 0;
}

static int run_command(struct agt_ctx *c, const struct agt_cmd *cmd, int argc, char **argv,
                       agt_error_t *err)
{
  agt_error_t terr = NULL;
  int have_target = settle_target(c, &terr) == 0;

  if (cmd->flags & AGT_NEED_TARGET) {
    cleanup_free char *cache = agt_cache_dir();
    if (!have_target && wants_help(argc, argv)) {
      agt_error_release(&terr);
      return cmd->fn(c, argc, argv, err); /* it prints its usage and touches no target */
    }
    if (!have_target) {
      *err = terr;
      return -1;
    }
    if (agt_target_parse(agt_config_get(&c->cfg, AGT_CFG_TARGET), &c->target, err) < 0)
      return agt_error_wrap(err, "target");
    c->target.cfg = &c->cfg;
    c->target.quiet = c->quiet;
    if (agt_mkdir_p(cache, 0700, err) < 0)
      return -1;
    agt_lima_init(&c->lima, agt_config_get(&c->cfg, AGT_CFG_LIMA_LIMACTL),
                  agt_config_get(&c->cfg, AGT_CFG_LIMA_HOME), cache);
    c->lima.progress = progress;
    c->lima.progress_ctx = c;
    c->target.lima = &c->lima;
    if ((cmd->flags & AGT_NEED_LIMA) && !wants_help(argc, argv) &&
        agt_need_lima(c, cmd->name, err) < 0)
      return -1;
  } else {
    agt_error_release(&terr);
  }
  return cmd->fn(c, argc, argv, err);
}

int main(int argc, char **argv)
{
  struct agt_ctx c;
  struct globals g = {0};
  struct agt_config_paths paths = {0};
  const struct agt_cmd *cmd = NULL;
  char *help_argv[4];
  agt_error_t err = NULL;
  int i, r = -1, code;

  signal(SIGPIPE, SIG_IGN);
  memset(&c, 0, sizeof c);
  c.target.rpc.fd = -1;
  i = agt_opts_parse(argc, argv, global_opts, NULL, &g, &err);
  if (i == -2) {
    usage(stdout);
    return 0;
  }
  if (g.version) {
    printf("agt %s\n", AGT_VERSION);
    return 0;
  }
  if (i < 0) {
    fprintf(stderr, "agt: %s\n", err->msg);
    agt_error_release(&err);
    return 2;
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[i], "version") == 0) { /* as docker and podman have it */
    if (i + 1 < argc && wants_help(argc - i, argv + i))
      agt_opts_usage(stdout, "agt version", "Print agt's version (as agt --version does).", NULL);
    else
      printf("agt %s\n", AGT_VERSION);
    return 0;
  }
  if (strcmp(argv[i], "help") == 0) { /* agt help [CMD [SUB]]: that command's --help */
    if (i + 1 >= argc || argv[i + 1][0] == '-') {
      usage(stdout);
      return 0;
    }
    static char help_opt[] = "--help";
    help_argv[0] = argv[i + 1];
    help_argv[1] = i + 2 < argc ? argv[i + 2] : help_opt;
    help_argv[2] = i + 2 < argc ? help_opt : NULL;
    help_argv[3] = NULL;
    argv = help_argv;
    argc = help_argv[2] ? 3 : 2;
    i = 0;
  }
  for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
    if (strcmp(commands[k].name, argv[i]) == 0)
      cmd = &commands[k];
  if (cmd == NULL) {
    const char *names[sizeof commands / sizeof commands[0]];
    const char *near;
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
      names[k] = commands[k].name;
    near = agt_closest(argv[i], names, sizeof commands / sizeof commands[0]);
    if (near)
      fprintf(stderr, "agt: unknown command '%s': did you mean 'agt %s'? (agt --help lists them)\n",
              argv[i], near);
    else
      fprintf(stderr, "agt: unknown command '%s' (agt --help lists them)\n", argv[i]);
    return 2;
  }
  c.quiet = g.quiet;
  agt_host_detect(&c.host, &c.host_facts);
  agt_config_init(&c.cfg);
  paths.user_file = g.config;
  if (agt_config_load(&c.cfg, &paths, &err) < 0) {
    if (!(cmd->flags & AGT_CONFIG_ERRORS_OK))
      goto out;
    c.config_error = steal_pointer(&err); /* the command reports it; defaults stand */
    agt_config_release(&c.cfg);
    agt_config_init(&c.cfg);
  }
  if (g.instance &&
      agt_config_set(&c.cfg, AGT_CFG_VM_NAME, g.instance, AGT_CFG_FLAG, "--instance", &err) < 0)
    goto out;
  if (g.target &&
      agt_config_set(&c.cfg, AGT_CFG_TARGET, g.target, AGT_CFG_FLAG, "--target", &err) < 0)
    goto out;
  r = run_command(&c, cmd, argc - i, argv + i, &err);
out:
  if (fflush(stdout) != 0 || ferror(stdout)) {
    if (r == 0)
      agt_error_make(&err, errno ? errno : EIO, "write to stdout");
    r = -1;
  }
  agt_target_release(&c.target);
  agt_lima_release(&c.lima);
  agt_config_release(&c.cfg);
  agt_error_release(&c.config_error);
  if (r < 0) {
    fprintf(stderr, "agt: %s\n", err ? err->msg : "failed");
    code = err && err->kind == AGT_E_INVALID ? 2 : 1;
    agt_error_release(&err);
    return code;
  }
  return c.exit_code;
}
