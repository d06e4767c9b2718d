/* agt reset: Lima's factory-reset.  The VM is killed, its disk and runtime files go, its
 * settings (lima.yaml) stay; the next `agt up` boots a fresh copy of the image and
 * provisions it again.  Its jails' disk is made afresh, empty, with the same name and size
 * (jails_disk.h). */
#include <stdio.h>
#include <unistd.h>

#include "agt.h"
#include "jails_disk.h"
#include "cleanup.h"
#include "xalloc.h"

static const struct agt_opt opts[] = {
    AGT_OPT_BOOL('f', "force", struct agt_flags, force, "do not ask first"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt reset [--force]",
    "Factory-reset the VM: a fresh disk from the image at the next 'agt up', the same settings.",
    opts};

int cmd_reset(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  struct agt_flags f = {0, 0, 0};
  int found, i;

  i = agt_cmd_opts(argc, argv, &help, NULL, &f, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt reset takes no operands");
  if (agt_need_lima(c, "reset", err) < 0)
    return -1;
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist", name);
  agt_lima_instance_release(&in);
  if (!f.force) {
    cleanup_free char *q =
        xasprintf("reset vm '%s'? Its disk (jails, rootfs, workspaces inside it) and its jails' "
                  "disk go.",
                  name);
    if (!agt_confirm(q))
      return agt_error_kind(err, AGT_E_INVALID, "vm '%s' not reset%s", name,
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
  }
  if (agt_lima_factory_reset(&c->lima, name, err) < 0)
    return agt_error_wrap(err, "cannot reset vm '%s'", name);
  /* Lima keeps additional disks through a factory reset; the jails' layers there belong to
   * the jails the reset removed (their records were on the root disk). */
  if (agt_jails_disk_reset(c, name, err) < 0)
    return agt_error_wrap(err, "vm '%s' reset", name);
  printf("vm '%s' reset; 'agt up' boots it afresh\n", name);
  return 0;
}
