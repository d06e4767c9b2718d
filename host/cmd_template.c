/* agt template: print the Lima template as agt would hand it to limactl. */
#include <stdio.h>
#include <string.h>

#include "agt.h"
#include "cleanup.h"
#include "xalloc.h"
#include "util.h"

struct tmpl_opts {
  struct agt_host host;
  const char *output;
};

/* --for and --arch: one of the words o->val's list names ("darwin|linux"). */
static int choice_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  static const char *const choices[][2] = {{"darwin", "linux"}, {"x86_64", "aarch64"}};
  const char *const *c = choices[o->val];

  if (strcmp(arg, c[0]) && strcmp(arg, c[1]))
    return agt_error_kind(err, AGT_E_INVALID, "--%s takes %s or %s, not '%s'", o->name, c[0], c[1],
                          arg);
  *(const char **)field = arg;
  return 0;
}

static const struct agt_opt opts[] = {
    AGT_OPT_CALLBACK(0, "for", "OS", struct tmpl_opts, host.os, choice_opt, 0,
                     "render for this host os: darwin or linux (this machine's)"),
    AGT_OPT_CALLBACK(0, "arch", "ARCH", struct tmpl_opts, host.arch, choice_opt, 1,
                     "render for this host arch: x86_64 or aarch64 (this machine's)"),
    AGT_OPT_STRING('o', "output", "FILE", struct tmpl_opts, output,
                   "write to FILE instead of stdout"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt template [--for OS] [--arch ARCH] [-o FILE]",
    "Print lima/agt.yaml rendered with the config: the YAML 'agt up' gives limactl.", opts};

int cmd_template(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct tmpl_opts o = {c->host, NULL};
  cleanup_free char *yaml = NULL;
  int i;

  i = agt_cmd_opts(argc, argv, &help, NULL, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt template takes no operands");
  {
    /* the jails' disk a new VM gets (agt up makes it first; NAME-jails-2 ... when taken) */
    cleanup_free char *disk =
        xasprintf("%s-jails", c->target.instance ? c->target.instance
                                                 : agt_config_get(&c->cfg, AGT_CFG_VM_NAME));
    if (agt_template_render(&c->cfg, &o.host, disk, &yaml, err) < 0)
      return -1;
  }
  if (o.output)
    return agt_write_file(o.output, yaml, strlen(yaml), 0644, err);
  fputs(yaml, stdout);
  return 0;
}
