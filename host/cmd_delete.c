/* agt delete: delete the VM with its disk, after asking (or with --force). */
#include <stdio.h>
#include <unistd.h>

#include "agt.h"
#include "cleanup.h"
#include "xalloc.h"

static const struct agt_opt opts[] = {
    {'f', "force", NULL, "do not ask first"},
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help help = {
    "agt delete [--force]", "Delete the VM and its disk: its jails, rootfs and workspaces go too.",
    opts};

static int delete_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  (void)arg;
  if (key != 'f')
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  *(int *)ctx = 1;
  return 0;
}

int cmd_delete(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  int force = 0, found, i;

  i = agt_cmd_opts(argc, argv, &help, delete_opt, &force, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt delete takes no operands");
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found) {
    printf("vm '%s' does not exist\n", name);
    return 0;
  }
  agt_lima_instance_release(&in);
  if (!force) {
    cleanup_free char *q = xasprintf("delete vm '%s' and its disk?", name);
    if (!agt_confirm(q))
      return agt_error_kind(err, AGT_E_INVALID, "vm '%s' not deleted%s", name,
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
  }
  if (agt_lima_delete(&c->lima, name, 1, err) < 0)
    return agt_error_wrap(err, "cannot delete vm '%s'", name);
  printf("vm '%s' deleted\n", name);
  return 0;
}
