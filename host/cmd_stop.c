/* agt stop, agt down: stop the VM.  A stopped VM is left alone (limactl would fail); a
 * Broken one is stopped by force, as Lima's docs advise.  Target local: stop agtd. */
#include <stdio.h>

#include "agt.h"
#include "agtd_local.h"

static const struct agt_opt opts[] = {
    AGT_OPT_BOOL('f', "force", struct agt_flags, force,
                 "kill the VM at once instead of shutting it down"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt stop [--force]  (or agt down)",
    "Stop the VM (target local: stop agtd on this machine; its running jails go on under their "
    "keepers, and the next 'agt up' finds them again).",
    opts};

/* Target local: agtd exits on SIGTERM; its jails go on under their keepers. */
static int stop_local(struct agt_ctx *c, agt_error_t *err)
{
  long pid, running;

  if (agt_local_agtd_stop(c, 30, &pid, &running, err) < 0)
    return agt_error_wrap(err, "target local");
  if (pid == 0)
    printf("agtd is not running (nothing answers at %s)\n",
           agt_config_get(&c->cfg, AGT_CFG_AGTD_SOCKET));
  else if (running == 0)
    printf("agtd (pid %ld) stopped; 'agt up' starts it again\n", pid);
  else
    printf("agtd (pid %ld) stopped; its %ld running jail%s go%s on under %s keeper%s, and 'agt "
           "up' finds %s again ('agt jail stop NAME...' before 'agt down' stops %s)\n",
           pid, running, running == 1 ? "" : "s", running == 1 ? "es" : "",
           running == 1 ? "its" : "their", running == 1 ? "" : "s", running == 1 ? "it" : "them",
           running == 1 ? "it" : "them");
  return 0;
}

int cmd_stop(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  struct agt_flags f = {0, 0, 0};
  int found, i, r;

  i = agt_cmd_opts(argc, argv, &help, NULL, &f, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt stop takes no operands");
  if (c->target.kind == AGT_TARGET_LOCAL)
    return stop_local(c, err);
  if (agt_need_lima(c, "stop", err) < 0)
    return -1;
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist", name);
  if (in.status == AGT_LIMA_STOPPED && !f.force) {
    agt_lima_instance_release(&in);
    printf("vm '%s' is stopped already\n", name);
    return 0;
  }
  if (in.status != AGT_LIMA_RUNNING && !f.force) {
    agt_note(c, "vm '%s' is %s: stopping it by force", name, agt_lima_status_name(in.status));
    f.force = 1;
  }
  agt_lima_instance_release(&in);
  r = agt_lima_stop(&c->lima, name, f.force, err);
  if (r < 0)
    return agt_error_wrap(err, "cannot stop vm '%s'", name);
  printf("vm '%s' stopped\n", name);
  return 0;
}
