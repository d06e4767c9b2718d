/* agt config show: the merged configuration, each value with the file:line:column, the
 * variable, the flag or the default it came from. */
#include <stdio.h>
#include <string.h>

#include "agt.h"

static const struct agt_cmd_help help = {
    "agt config show [--json]",
    "Print the merged config (user file, then the repository's .agt/config.yaml, then "
    "variables and flags) and where each value came from.",
    agt_json_opts};

int cmd_config(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct agt_flags f = {0, 0, 0};
  int i;

  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    agt_opts_usage(argc < 2 ? stderr : stdout, help.usage, help.summary, help.opts);
    return argc < 2 ? agt_error_kind(err, AGT_E_INVALID, "agt config: which command? (show)") : 0;
  }
  if (strcmp(argv[1], "show") != 0)
    return agt_error_kind(err, AGT_E_INVALID, "unknown config command '%s' (show)", argv[1]);
  i = agt_cmd_opts(argc - 1, argv + 1, &help, NULL, &f, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc - 1)
    return agt_error_kind(err, AGT_E_INVALID, "agt config show takes no operands");
  if (f.json)
    agt_config_show_json(&c->cfg, stdout);
  else
    agt_config_show(&c->cfg, stdout);
  return 0;
}
