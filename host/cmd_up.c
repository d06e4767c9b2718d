/* agt up: create the VM from the rendered template if it does not exist, start it if it
 * is not running, and wait until agtd answers through SSH.  Running it again is cheap. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

enum {
  OPT_TIMEOUT = 256,
};

static const struct agt_opt opts[] = {
    {OPT_TIMEOUT, "timeout", "DURATION",
     "how long Lima may take to boot (lima.start_timeout: 10m)"},
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help help = {
    "agt up [--timeout DURATION]",
    "Create the VM if it is missing, start it, and wait until agtd answers.",
    opts,
};

struct up_opts {
  const char *timeout;
};

static int up_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct up_opts *o = ctx;
  uint64_t s;

  if (key != OPT_TIMEOUT)
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  if (agt_parse_duration("--timeout", arg, &s, err) < 0)
    return -1;
  o->timeout = arg;
  return 0;
}

/* Lima merges these into every instance at every start: say so, since they can change
 * what agt's template asks for. */
static void warn_global_lima_config(struct agt_ctx *c)
{
  static const char *const files[] = {"override.yaml", "default.yaml"};

  for (size_t i = 0; i < 2; i++) {
    cleanup_free char *p = xasprintf("%s/_config/%s", c->lima.home, files[i]);
    struct stat st;
    if (stat(p, &st) == 0)
      agt_note(c, "note: %s exists; Lima applies it to this VM too", p);
  }
}

static int create_vm(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  cleanup_free char *yaml = NULL, *file = NULL;

  if (agt_template_render(&c->cfg, &c->host, &yaml, err) < 0)
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  file = xasprintf("%s/%s.yaml", c->lima.workdir, name);
  if (agt_write_file(file, yaml, strlen(yaml), 0600, err) < 0)
    return -1;
  agt_note(c, "creating vm '%s' from %s (rendered: %s)", name,
           agt_config_get(&c->cfg, AGT_CFG_VM_TEMPLATE), file);
  if (agt_lima_create(&c->lima, name, file, err) < 0)
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  return 0;
}

static int wait_for_agtd(struct agt_ctx *c, agt_error_t *err)
{
  agt_error_t e = NULL;

  for (int i = 0;; i++) {
    if (agt_target_connect(&c->target, &e) == 0)
      return 0;
    if (i == 60 || e->kind == AGT_E_NOTFOUND || (e->kind == AGT_E_STATE && strstr(e->msg, "vm '")))
      break; /* out of time, or the VM is gone or stopped: waiting will not help */
    if (i == 0)
      agt_note(c, "waiting for agtd (%s)", e->msg);
    agt_error_release(&e);
    sleep(1);
  }
  *err = e;
  return agt_error_wrap(err, "agtd does not answer");
}

static int up_other(struct agt_ctx *c, agt_error_t *err)
{
  char desc[256];

  if (agt_target_connect(&c->target, err) < 0)
    return -1;
  printf("agtd %s answers at %s\n",
         json_string_value(json_object_get(c->target.rpc.hello, "agtd_version")),
         agt_target_describe(&c->target, desc, sizeof desc));
  return 0;
}

int cmd_up(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct up_opts o = {agt_config_get(&c->cfg, AGT_CFG_LIMA_START_TIMEOUT)};
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  char desc[256];
  uint64_t timeout = 600;
  int found, i;

  i = agt_cmd_opts(argc, argv, &help, up_opt, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt up takes no operands");
  if (c->target.kind != AGT_TARGET_LIMA)
    return up_other(c, err);
  if (agt_parse_duration("--timeout", o.timeout, &timeout, err) < 0)
    return -1;

  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found) {
    if (create_vm(c, name, err) < 0)
      return -1;
    if (agt_vm_state(c, &in, &found, err) < 0)
      return -1;
    if (!found)
      return agt_error_kind(err, AGT_E_PROTO, "vm '%s' was created but limactl does not list it",
                            name);
  }
  if (in.status == AGT_LIMA_BROKEN) {
    agt_note(c, "vm '%s' is Broken (%s): stopping it by force first", name,
             in.errors ? in.errors[0] : "no reason given");
    if (agt_lima_stop(&c->lima, name, 1, err) < 0) {
      agt_lima_instance_release(&in);
      return agt_error_wrap(err, "cannot stop vm '%s'", name);
    }
  }
  if (in.status != AGT_LIMA_RUNNING) {
    warn_global_lima_config(c);
    agt_note(c,
             "starting vm '%s' (the first boot downloads an image and provisions agtd: "
             "minutes)",
             name);
    if (agt_lima_start(&c->lima, name, timeout, err) < 0) {
      struct agt_lima_instance now;
      int f2;
      agt_lima_instance_release(&in);
      agt_error_wrap(err, "cannot start vm '%s'", name);
      if (agt_vm_state(c, &now, &f2, NULL) == 0 && f2 && now.status == AGT_LIMA_RUNNING)
        fprintf(stderr,
                "agt: vm '%s' is running but not ready; 'agt status' shows more, "
                "'agt stop --force' stops it\n",
                name);
      if (f2)
        agt_lima_instance_release(&now);
      return -1;
    }
  }
  agt_lima_instance_release(&in);
  if (wait_for_agtd(c, err) < 0)
    return -1;
  printf("vm '%s' is up: agtd %s at %s\n", name,
         json_string_value(json_object_get(c->target.rpc.hello, "agtd_version")),
         agt_target_describe(&c->target, desc, sizeof desc));
  return 0;
}
