/* agtd: the guest daemon.  `agtd serve` runs it; `agtd ctl` is its small client. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "agt_version.h"
#include "cli.h"
#include "ctl.h"
#include "serve.h"
#include "jail_setup.h"
#include "names.h"
#include "netns_pool.h"
#include "xalloc.h"

#define MAX_WORKSPACE_ROOTS 16

enum {
  OPT_STATE = 256,
  OPT_GROUP,
  OPT_MAX_CLIENTS,
  OPT_MAX_CLIENTS_PER_UID,
  OPT_HELLO_TIMEOUT,
  OPT_FRAME_TIMEOUT,
  OPT_MAX_JAILS,
  OPT_CGROUP,
  OPT_WORKSPACE_ROOT,
  OPT_NETNS_POOL,
  OPT_DISK_SIZE,
  OPT_LAYERS_DIR,
  OPT_WARM,
  OPT_REALTIME_STARTS,
};

static const struct agt_opt serve_opts[] = {
    {'s', "socket", "PATH", "unix socket to listen on (/run/agt/agtd.sock)"},
    {OPT_STATE, "state-dir", "DIR", "jails, rootfs store and workspaces, absolute (/var/lib/agt)"},
    {OPT_GROUP, "group", "NAME", "group that may use the socket (root only)"},
    {OPT_MAX_CLIENTS, "max-clients", "N", "connections served at once (256)"},
    {OPT_MAX_CLIENTS_PER_UID, "max-clients-per-uid", "N",
     "connections one user (peer uid) may hold at once (3/4 of --max-clients)"},
    {OPT_HELLO_TIMEOUT, "hello-timeout", "MS",
     "a connection that has not said hello within MS is closed (10000)"},
    {OPT_FRAME_TIMEOUT, "frame-timeout", "MS",
     "a frame not whole MS after its first byte closes its connection (30000); an idle "
     "connection between frames is never closed"},
    {OPT_MAX_JAILS, "max-jails", "N", "jail records at once (2000)"},
    {OPT_CGROUP, "cgroup", "NAME", "cgroup under which jails live (agt)"},
    {OPT_NETNS_POOL, "netns-pool", "N", "network namespaces made ahead of time, 0 for none (8)"},
    {OPT_LAYERS_DIR, "layers-dir", "DIR",
     "the jails' writable layers, on a file system apart from the state's (<state>/layers); "
     "a btrfs there is used as it is, with limits when its quotas are on"},
    {OPT_DISK_SIZE, "disk-size", "SIZE",
     "size of the btrfs image made for the jails' writable layers when the layers directory "
     "is not on btrfs (half the free space); 0: no image and no disk limits"},
    {OPT_WARM, "warm", "N",
     "prepared jails kept ready for jail.run on the last rootfs run, 0 for none (2)"},
    {OPT_REALTIME_STARTS, "realtime-starts", NULL,
     "run starts SCHED_FIFO, from a jail.run to its agent's exec, so that jails busy with the "
     "CPU do not stretch other jails' starts (off: agtd leaves scheduling alone)"},
    {OPT_WORKSPACE_ROOT, "workspace-root", "DIR",
     "allow workspaces below DIR, not DIR itself (repeatable; /home, /Users and the "
     "state's workspaces)"},
    {0, NULL, NULL, NULL},
};

struct serve_args {
  struct agtd_config cfg;
  const char *roots[MAX_WORKSPACE_ROOTS];
  size_t nroots;
};

static int serve_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct serve_args *a = ctx;
  uint64_t v;

  switch (key) {
  case 's':
    a->cfg.socket_path = arg;
    return 0;
  case OPT_STATE:
    a->cfg.state_dir = arg;
    return agt_abspath_check("--state-dir", arg, err);
  case OPT_GROUP:
    a->cfg.group = arg;
    return 0;
  case OPT_CGROUP:
    a->cfg.cgroup_parent = arg;
    return agt_name_check("--cgroup", arg, err);
  case OPT_WORKSPACE_ROOT:
    if (a->nroots >= MAX_WORKSPACE_ROOTS)
      return agt_error_kind(err, AGT_E_LIMIT, "at most %d --workspace-root", MAX_WORKSPACE_ROOTS);
    if (agt_abspath_check("--workspace-root", arg, err) < 0)
      return -1;
    a->roots[a->nroots++] = arg;
    return 0;
  case OPT_LAYERS_DIR:
    if (agt_abspath_check("--layers-dir", arg, err) < 0)
      return -1;
    a->cfg.layers_dir = arg;
    return 0;
  case OPT_DISK_SIZE:
    if (agt_parse_size("--disk-size", arg, &v, err) < 0)
      return -1;
    a->cfg.disk_size = v == 0 ? UINT64_MAX : v;
    return 0;
  case OPT_WARM:
    if (agt_parse_u64("--warm", arg, &v, err) < 0)
      return -1;
    if (v > 64)
      return agt_error_kind(err, AGT_E_INVALID, "--warm is at most 64");
    a->cfg.warm = (unsigned)v;
    return 0;
  case OPT_REALTIME_STARTS:
    a->cfg.realtime_starts = 1;
    return 0;
  case OPT_NETNS_POOL:
    if (agt_parse_u64("--netns-pool", arg, &v, err) < 0)
      return -1;
    if (v > AGT_NETNS_POOL_MAX)
      return agt_error_kind(err, AGT_E_INVALID, "--netns-pool is at most %d", AGT_NETNS_POOL_MAX);
    a->cfg.netns_pool = (unsigned)v;
    return 0;
  case OPT_MAX_CLIENTS_PER_UID:
    if (agt_parse_u64("--max-clients-per-uid", arg, &v, err) < 0)
      return -1;
    if (v == 0 || v > 100000)
      return agt_error_kind(err, AGT_E_INVALID, "--max-clients-per-uid must be within 1..100000");
    a->cfg.max_clients_per_uid = (unsigned)v;
    return 0;
  case OPT_HELLO_TIMEOUT:
  case OPT_FRAME_TIMEOUT:
    if (agt_parse_u64(key == OPT_HELLO_TIMEOUT ? "--hello-timeout" : "--frame-timeout", arg, &v,
                      err) < 0)
      return -1;
    if (v < 100 || v > 3600000)
      return agt_error_kind(err, AGT_E_INVALID, "%s must be within 100..3600000 ms",
                            key == OPT_HELLO_TIMEOUT ? "--hello-timeout" : "--frame-timeout");
    if (key == OPT_HELLO_TIMEOUT)
      a->cfg.hello_timeout_ms = (unsigned)v;
    else
      a->cfg.frame_timeout_ms = (unsigned)v;
    return 0;
  case OPT_MAX_CLIENTS:
  case OPT_MAX_JAILS:
    if (agt_parse_u64(key == OPT_MAX_CLIENTS ? "--max-clients" : "--max-jails", arg, &v, err) < 0)
      return -1;
    if (v == 0 || v > 100000)
      return agt_error_kind(err, AGT_E_INVALID, "%s must be within 1..100000", arg);
    if (key == OPT_MAX_CLIENTS)
      a->cfg.max_clients = (unsigned)v;
    else
      a->cfg.max_jails = (unsigned)v;
    return 0;
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

static void pool_start_work(uv_work_t *w)
{
  (void)w;
}

static void pool_start_done(uv_work_t *w, int status)
{
  (void)w;
  (void)status;
}

static int serve_main(int argc, char **argv)
{
  static uv_work_t pool_start;
  struct serve_args a;
  agt_error_t err = NULL;
  char *ws_default;
  bool own_pool_size;
  agtd_t d;
  int i;

  memset(&a, 0, sizeof a);
  a.cfg.socket_path = AGT_DEFAULT_SOCKET;
  a.cfg.state_dir = AGT_DEFAULT_STATE;
  a.cfg.max_clients = 256;
  a.cfg.hello_timeout_ms = 10000;
  a.cfg.frame_timeout_ms = 30000;
  a.cfg.max_jails = 2000;
  a.cfg.cgroup_parent = "agt";
  a.cfg.netns_pool = 8;
  a.cfg.warm = 2;
  i = agt_opts_parse(argc, argv, serve_opts, serve_opt, &a, &err);
  if (i == -2) {
    agt_opts_usage(stdout, "agtd serve [OPTIONS]",
                   "Run the daemon: build jail roots, run and supervise jails.", serve_opts);
    return 0;
  }
  if (i < 0 || i < argc) {
    fprintf(stderr, "agtd: %s\n", err ? err->msg : "unexpected arguments");
    agt_error_release(&err);
    return 2;
  }
  if (a.nroots == 0) {
    a.roots[a.nroots++] = "/home";
    a.roots[a.nroots++] = "/Users";
  }
  ws_default = xasprintf("%s/workspaces", a.cfg.state_dir);
  a.roots[a.nroots++] = ws_default;
  a.cfg.workspace_roots = a.roots;
  a.cfg.nworkspace_roots = a.nroots;

  /* libuv's threadpool (4 threads unless told) serves rootfs builds (up to 4 at once, for
   * minutes), cgroup v1 migrations of starts and listings' cgroup reads (jail_usage.h): with
   * more threads than builds, the builds cannot hold up the others.  libuv reads it once,
   * when the pool starts: start it now, with a piece of work that does nothing, and take
   * the variable out again so that the programs agtd runs (npm, btrfs) do not inherit it. */
  own_pool_size = getenv("UV_THREADPOOL_SIZE") == NULL;
  if (own_pool_size)
    setenv("UV_THREADPOOL_SIZE", "8", 1);
  uv_queue_work(uv_default_loop(), &pool_start, pool_start_work, pool_start_done);
  if (own_pool_size)
    unsetenv("UV_THREADPOOL_SIZE");
  if (agtd_init(&d, uv_default_loop(), &a.cfg, &err) < 0) {
    fprintf(stderr, "agtd: %s\n", err->msg);
    agt_error_release(&err);
    free(ws_default);
    return 1;
  }
  agtd_run(&d);
  agtd_release(&d);
  uv_loop_close(uv_default_loop());
  free(ws_default);
  return 0;
}

static void usage(FILE *f)
{
  fprintf(f, "usage: agtd serve [OPTIONS]   run the daemon (see agtd serve --help)\n"
             "       agtd ctl [OPTIONS] ...  talk to it (see agtd ctl --help)\n"
             "       agtd --version\n");
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "serve") == 0) {
    char *end = argv[argc - 1] + strlen(argv[argc - 1]);
    agt_jail_set_title_area(argv[0], (size_t)(end - argv[0]));
    return serve_main(argc - 1, argv + 1);
  }
  if (strcmp(argv[1], "ctl") == 0)
    return agtd_ctl_main(argc - 1, argv + 1);
  if (strcmp(argv[1], "--version") == 0) {
    printf("agtd %s\n", AGT_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
