/* agt template: print the Lima template as agt would hand it to limactl. */
#include <stdio.h>
#include <string.h>

#include "agt.h"
#include "cleanup.h"
#include "util.h"

enum {
  OPT_FOR = 256,
  OPT_ARCH,
};

static const struct agt_opt opts[] = {
    {OPT_FOR, "for", "OS", "render for this host os: darwin or linux (this machine's)"},
    {OPT_ARCH, "arch", "ARCH", "render for this host arch: x86_64 or aarch64 (this machine's)"},
    {'o', "output", "FILE", "write to FILE instead of stdout"},
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help help = {
    "agt template [--for OS] [--arch ARCH] [-o FILE]",
    "Print lima/agt.yaml rendered with the config: the YAML 'agt up' gives limactl.", opts};

struct tmpl_opts {
  struct agt_host host;
  const char *output;
};

static int tmpl_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct tmpl_opts *o = ctx;

  switch (key) {
  case OPT_FOR:
    if (strcmp(arg, "darwin") && strcmp(arg, "linux"))
      return agt_error_kind(err, AGT_E_INVALID, "--for takes darwin or linux, not '%s'", arg);
    o->host.os = arg;
    return 0;
  case OPT_ARCH:
    if (strcmp(arg, "x86_64") && strcmp(arg, "aarch64"))
      return agt_error_kind(err, AGT_E_INVALID, "--arch takes x86_64 or aarch64, not '%s'", arg);
    o->host.arch = arg;
    return 0;
  case 'o':
    o->output = arg;
    return 0;
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

int cmd_template(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct tmpl_opts o = {c->host, NULL};
  cleanup_free char *yaml = NULL;
  int i;

  i = agt_cmd_opts(argc, argv, &help, tmpl_opt, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt template takes no operands");
  if (agt_template_render(&c->cfg, &o.host, &yaml, err) < 0)
    return -1;
  if (o.output)
    return agt_write_file(o.output, yaml, strlen(yaml), 0644, err);
  fputs(yaml, stdout);
  return 0;
}
