/* agt stop: stop the VM.  A stopped VM is left alone (limactl would fail); a Broken one is
 * stopped by force, as Lima's docs advise. */
#include <stdio.h>

#include "agt.h"

static const struct agt_opt opts[] = {
    {'f', "force", NULL, "kill the VM at once instead of shutting it down"},
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help help = {"agt stop [--force]", "Stop the VM.", opts};

static int stop_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  (void)arg;
  if (key != 'f')
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  *(int *)ctx = 1;
  return 0;
}

int cmd_stop(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  int force = 0, found, i, r;

  i = agt_cmd_opts(argc, argv, &help, stop_opt, &force, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt stop takes no operands");
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist", name);
  if (in.status == AGT_LIMA_STOPPED && !force) {
    agt_lima_instance_release(&in);
    printf("vm '%s' is stopped already\n", name);
    return 0;
  }
  if (in.status != AGT_LIMA_RUNNING && !force) {
    agt_note(c, "vm '%s' is %s: stopping it by force", name, agt_lima_status_name(in.status));
    force = 1;
  }
  agt_lima_instance_release(&in);
  r = agt_lima_stop(&c->lima, name, force, err);
  if (r < 0)
    return agt_error_wrap(err, "cannot stop vm '%s'", name);
  printf("vm '%s' stopped\n", name);
  return 0;
}
