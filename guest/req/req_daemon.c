/* hello and daemon.status */
#include "req_daemon.h"

#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agt_version.h"
#include "disk.h"
#include "jail.h"
#include "jail_warm.h"
#include "server.h"
#include "start_prio.h"

int agt_req_hello(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t version = 0;

  if (agt_param_u64(req->params, "version", 1, &version, err) < 0)
    return -1;
  if (version != AGT_PROTO_VERSION)
    return agt_error_kind(err, AGT_E_PROTO,
                          "protocol version %llu is not supported (agtd speaks %d)",
                          (unsigned long long)version, AGT_PROTO_VERSION);
  *result = json_pack("{s:i, s:s, s:s, s:i}", "version", AGT_PROTO_VERSION, "server", "agtd",
                      "agtd_version", AGT_VERSION, "max_frame", AGT_FRAME_MAX);
  return 0;
}

int agt_req_daemon_status(agt_req_t *req, json_t **result, agt_error_t *err)
{
  agtd_t *d = req->d;
  unsigned running = 0;

  (void)err;
  for (agt_jail_t *j = d->jails; j; j = j->next)
    if (j->rec.state == AGT_JAIL_RUNNING || j->rec.state == AGT_JAIL_STARTING ||
        j->rec.state == AGT_JAIL_STOPPING)
      running++;
  *result = json_pack("{s:s, s:I, s:i, s:I, s:I, s:I, s:s}", "agtd_version", AGT_VERSION, "uptime",
                      (json_int_t)(time(NULL) - d->started), "cgroup_version", d->cgroup->version,
                      "jails", (json_int_t)d->njails, "running", (json_int_t)running, "clients",
                      (json_int_t)d->nclients, "state_dir", d->cfg.state_dir);
  json_object_set_new(*result, "warm",
                      json_pack("{s:b, s:I, s:I, s:s?}", "enabled", d->warm->enabled, "ready",
                                (json_int_t)agt_warm_ready(d), "target",
                                (json_int_t)d->warm->target, "rootfs", d->warm->rootfs_id));
  /* The machine (uname -m): which builds of an agent's npm packages it runs. */
  {
    struct utsname un;
    if (uname(&un) == 0)
      json_object_set_new(*result, "arch", json_string(un.machine));
  }
  /* Its pid: agt down stops the agtd it started on target local with SIGTERM. */
  json_object_set_new(*result, "pid", json_integer((json_int_t)getpid()));
  /* Where workspaces may be (agt checks a project directory against them before a run). */
  json_t *roots = json_array();
  for (size_t i = 0; i < d->cfg.nworkspace_roots; i++)
    json_array_append_new(roots, json_string(d->cfg.workspace_roots[i]));
  json_object_set_new(*result, "workspace_roots", roots);
  /* Whether starts run SCHED_FIFO (start_prio.h). */
  json_object_set_new(*result, "realtime_starts", json_boolean(d->prio->enabled));
  /* The kernel's cgroup flag favordynmods, as agtd found it (it never sets it). */
  json_object_set_new(*result, "favordynmods", json_boolean(d->cgroup->fast_attach));
  /* Where the jails' writable layers are and whether each has a disk limit. */
  if (d->disk->enabled)
    json_object_set_new(*result, "disk",
                        json_pack("{s:b, s:s, s:I}", "limits", 1, "fs", "btrfs", "size",
                                  (json_int_t)d->disk->size));
  else
    json_object_set_new(*result, "disk",
                        json_pack("{s:b, s:s}", "limits", 0, "why", d->disk->why_off));
  return 0;
}
