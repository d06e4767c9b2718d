/* agt clone NAME: copy the VM into a new one, for example a gold image to start others
 * from.  Lima clones only a VM that is not running, so a running source is stopped first
 * and started again afterwards.  The clone picks its own SSH port at its first start, and
 * gets a copy of the source's jails' disk as its own (jails_disk.h): its jails are the
 * source's as they were when it stopped, records and writable layers alike. */
#include <stdio.h>

#include "agt.h"
#include "jails_disk.h"

struct clone_opts {
  int start;
};

static const struct agt_opt opts[] = {
    AGT_OPT_BOOL('s', "start", struct clone_opts, start, "start the clone too"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt clone [--start] NAME",
    "Copy the VM (disk, jails' disk, settings) into a new VM called NAME; a running VM is "
    "stopped for the copy and started again.",
    opts};

int cmd_clone(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *src = c->target.instance, *dst;
  struct agt_lima_instance in;
  uint64_t timeout = 600;
  struct clone_opts o = {0};
  int found, i, was_running, r;
  agt_error_t e2 = NULL;

  i = agt_cmd_opts(argc, argv, &help, NULL, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", help.usage);
  if (agt_need_lima(c, "clone", err) < 0)
    return -1;
  dst = argv[i];
  if (agt_lima_name_check(dst, err) < 0)
    return -1;
  agt_config_seconds(&c->cfg, AGT_CFG_LIMA_START_TIMEOUT, &timeout, NULL);
  if (agt_lima_list(&c->lima, dst, &in, &found, err) < 0)
    return -1;
  if (found) {
    agt_lima_instance_release(&in);
    return agt_error_kind(err, AGT_E_EXISTS, "vm '%s' exists already", dst);
  }
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist", src);
  was_running = in.status == AGT_LIMA_RUNNING;
  agt_lima_instance_release(&in);
  if (was_running) {
    agt_note(c, "stopping vm '%s' to clone it (Lima clones only a stopped VM)", src);
    if (agt_lima_stop(&c->lima, src, 0, err) < 0)
      return agt_error_wrap(err, "cannot stop vm '%s'", src);
  }
  r = agt_vm_clone(c, src, dst, err);
  if (r < 0)
    agt_error_wrap(err, "cannot clone vm '%s' to '%s'", src, dst);
  if (was_running) {
    agt_note(c, "starting vm '%s' again", src);
    if (agt_lima_start(&c->lima, src, timeout, &e2) < 0) {
      if (r == 0) {
        *err = e2;
        return agt_error_wrap(err, "vm '%s' was cloned to '%s', but cannot start again", src, dst);
      }
      fprintf(stderr, "agt: cannot start vm '%s' again: %s\n", src, e2->msg);
      agt_error_release(&e2);
    }
  }
  if (r < 0)
    return -1;
  if (o.start) {
    agt_note(c, "starting vm '%s'", dst);
    if (agt_lima_start(&c->lima, dst, timeout, err) < 0)
      return agt_error_wrap(err, "vm '%s' cloned, but cannot start", dst);
  }
  if (o.start)
    printf("vm '%s' cloned to '%s', which is running\n", src, dst);
  else
    printf("vm '%s' cloned to '%s'; 'agt --instance %s up' starts it\n", src, dst, dst);
  return 0;
}
