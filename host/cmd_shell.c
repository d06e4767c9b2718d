/* agt shell [-- CMD...]: a login shell, or one command, in the VM.  Lima VMs through
 * `limactl shell` (it changes to the current directory when that is mounted); ssh://
 * targets through the system's ssh, with agt's known_hosts and key. */
#include <stdio.h>
#include <string.h>

#include "agt.h"
#include "cleanup.h"
#include "subprocess.h"
#include "util.h"

static const struct agt_cmd_help help = {
    "agt shell [-- COMMAND [ARGS...]]",
    "Open a shell in the VM, or run one command there; agt exits with its status.", NULL};

static int shell_ssh(struct agt_ctx *c, char *const *cmd, agt_error_t *err)
{
  struct agt_strv a = {0};
  const char *id = agt_config_get(&c->cfg, AGT_CFG_SSH_IDENTITY);
  const char *kh = agt_config_get(&c->cfg, AGT_CFG_SSH_KNOWN_HOSTS);
  cleanup_strv char **argv = NULL;
  struct agt_subprocess p = {0};

  agt_strv_push(&a, "ssh");
  agt_strv_pushf(&a, "-p%u", c->target.port);
  agt_strv_push(&a, "-oStrictHostKeyChecking=yes");
  agt_strv_pushf(&a, "-oUserKnownHostsFile=%s", kh);
  if (id)
    agt_strv_pushf(&a, "-i%s", id);
  agt_strv_pushf(&a, "%s@%s", c->target.user, c->target.host);
  if (cmd && cmd[0]) {
    agt_strv_push(&a, "--");
    for (size_t i = 0; cmd[i]; i++)
      agt_strv_push(&a, cmd[i]);
  }
  argv = agt_strv_steal(&a);
  p.argv = argv;
  p.capture = 0;
  if (agt_subprocess_run(&p, err) < 0)
    return -1;
  c->exit_code = p.exit_code;
  agt_subprocess_release(&p);
  return 0;
}

int cmd_shell(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  char *const *cmd;
  int i, code = 0;

  i = agt_cmd_opts(argc, argv, &help, NULL, NULL, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  cmd = argv + i;
  switch (c->target.kind) {
  case AGT_TARGET_LIMA:
    if (agt_lima_shell(&c->lima, c->target.instance, NULL, cmd, &code, err) < 0)
      return -1;
    c->exit_code = code;
    return 0;
  case AGT_TARGET_SSH:
    return shell_ssh(c, cmd, err);
  case AGT_TARGET_LOCAL:
    break;
  }
  return agt_error_kind(err, AGT_E_INVALID,
                        "target 'local' is this machine, with no VM to open a shell in: your "
                        "own shell is the machine's; a shell in a jail is 'agt jail run' (a new "
                        "one) or 'agt jail exec NAME -- sh' (a running one)");
}
