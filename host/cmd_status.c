/* agt status: the VM's state (from limactl), then agtd's: its version, jails, rootfs. */
#include <stdio.h>
#include <string.h>

#include "agt.h"
#include "cleanup.h"
#include "util.h"

static const struct agt_cmd_help help = {
    "agt status [--json | --format TEMPLATE]",
    "Show the VM's state, agtd's version and uptime, the jails and the root filesystems.",
    agt_json_format_opts};

static json_t *vm_json(const struct agt_lima_instance *in)
{
  json_t *o = json_pack("{s:s, s:s}", "name", in->name, "status", agt_lima_status_name(in->status));

  if (in->vm_type)
    json_object_set_new(o, "vm_type", json_string(in->vm_type));
  if (in->arch)
    json_object_set_new(o, "arch", json_string(in->arch));
  json_object_set_new(o, "cpus", json_integer((json_int_t)in->cpus));
  json_object_set_new(o, "memory", json_integer((json_int_t)in->memory));
  json_object_set_new(o, "disk", json_integer((json_int_t)in->disk));
  if (in->ssh_port)
    json_object_set_new(o, "ssh_port", json_integer(in->ssh_port));
  if (in->dir)
    json_object_set_new(o, "dir", json_string(in->dir));
  if (in->errors) {
    json_t *e = json_array();
    for (size_t i = 0; in->errors[i]; i++)
      json_array_append_new(e, json_string(in->errors[i]));
    json_object_set_new(o, "errors", e);
  }
  return o;
}

static void print_vm(const struct agt_lima_instance *in)
{
  char mem[32], disk[32];

  printf("vm:      %s: %s", in->name, agt_lima_status_name(in->status));
  if (in->vm_type)
    printf(", %s %s, %llu cpus, %s memory, %s disk", in->vm_type, in->arch ? in->arch : "",
           (unsigned long long)in->cpus, agt_human_bytes(in->memory, mem, sizeof mem),
           agt_human_bytes(in->disk, disk, sizeof disk));
  printf("\n");
  for (size_t i = 0; in->errors && in->errors[i]; i++)
    printf("         error: %s\n", in->errors[i]);
}

int cmd_status(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *out = json_object(), *st = NULL, *jails = NULL, *rootfs = NULL;
  agt_error_t e = NULL, pe = NULL;
  char desc[256];
  struct agt_flags f = {0, 0, 0};
  int i, r = 0, vm_running = 1, printed = 0;

  i = agt_cmd_opts(argc, argv, &help, NULL, &f, err);
  if (i == -2 || i < 0 || i < argc) {
    json_decref(out);
    if (i >= 0 && i < argc)
      return agt_error_kind(err, AGT_E_INVALID, "agt status takes no operands");
    return i == -2 ? 0 : -1;
  }
  json_object_set_new(out, "target", json_string(c->target.spec));
  if (c->target.kind == AGT_TARGET_LIMA) {
    struct agt_lima_instance in;
    int found;
    if (agt_vm_state(c, &in, &found, err) < 0) {
      json_decref(out);
      return -1;
    }
    if (!found) {
      json_object_set_new(out, "vm",
                          json_pack("{s:s, s:s}", "name", c->target.instance, "status", "absent"));
      if (f.json)
        r = agt_print_out(out, NULL, err);
      else
        printf("vm:      %s: does not exist ('agt up' creates it)\n", c->target.instance);
      json_decref(out);
      return r;
    }
    json_object_set_new(out, "vm", vm_json(&in));
    if (!f.json)
      print_vm(&in);
    vm_running = in.status == AGT_LIMA_RUNNING;
    agt_lima_instance_release(&in);
  }
  if (vm_running) {
    if (agt_target_call(&c->target, "daemon.status", NULL, &st, &e) == 0 &&
        agt_target_call(&c->target, "jail.ls", NULL, &jails, &e) == 0 &&
        agt_target_call(&c->target, "rootfs.ls", NULL, &rootfs, &e) == 0) {
      json_object_set(out, "agtd", st);
      json_object_set(out, "jails", json_object_get(jails, "jails"));
      json_object_set(out, "rootfs", json_object_get(rootfs, "rootfs"));
    } else {
      json_object_set_new(out, "agtd", json_pack("{s:s}", "error", e->msg));
      r = -1;
    }
  }
  if (f.json) {
    printed = agt_print_out(out, NULL, r < 0 ? &pe : err);
    agt_error_release(&pe); /* agtd's error is the one to say */
  } else if (st && jails && rootfs) {
    size_t running = 0, n;
    json_t *j;
    json_int_t up = json_integer_value(json_object_get(st, "uptime"));
    json_array_foreach(json_object_get(jails, "jails"), n, j)
    {
      const char *state = json_string_value(json_object_get(j, "state"));
      if (state && strcmp(state, "running") == 0)
        running++;
    }
    printf("agtd:    %s at %s, up %lldh%02lldm, cgroup v%lld\n",
           json_string_value(json_object_get(st, "agtd_version")),
           agt_target_describe(&c->target, desc, sizeof desc), (long long)(up / 3600),
           (long long)(up / 60 % 60),
           (long long)json_integer_value(json_object_get(st, "cgroup_version")));
    printf("jails:   %zu (%zu running)\n", json_array_size(json_object_get(jails, "jails")),
           running);
    printf("rootfs:  %zu\n", json_array_size(json_object_get(rootfs, "rootfs")));
  } else if (!vm_running) {
    printf("agtd:    not reachable while the vm is not running\n");
  } else {
    printf("agtd:    not answering (why: below, on stderr)\n");
  }
  json_decref(st);
  json_decref(jails);
  json_decref(rootfs);
  json_decref(out);
  if (r < 0) {
    *err = e;
    return agt_error_wrap(err, "agtd");
  }
  return printed;
}
