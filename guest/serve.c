/* agtd serve: make agtd's parts, in order, and the method table the server serves; run the
 * loop; take the parts apart. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "disk.h"
#include "fsutil.h"
#include "jail.h"
#include "jail_keep.h"
#include "jail_run.h"
#include "jail_usage.h"
#include "jail_seccomp.h"
#include "jail_setup.h"
#include "jail_warm.h"
#include "log.h"
#include "netns_pool.h"
#include "req_daemon.h"
#include "req_home.h"
#include "req_jail.h"
#include "req_rootfs.h"
#include "rootfs_cache.h"
#include "server.h"
#include "start_prio.h"
#include "stream.h"
#include "xalloc.h"

/* The requests agtd serves: one handler each, in req_*.c. */
static const struct agt_method methods[] = {
    {"hello", agt_req_hello, 0},
    {"daemon.status", agt_req_daemon_status, AGT_METHOD_NEEDS_HELLO},
    {"jail.create", agt_req_jail_create, AGT_METHOD_NEEDS_HELLO},
    {"jail.run", agt_req_jail_run, AGT_METHOD_NEEDS_HELLO},
    {"jail.start", agt_req_jail_start, AGT_METHOD_NEEDS_HELLO},
    {"jail.stop", agt_req_jail_stop, AGT_METHOD_NEEDS_HELLO},
    {"jail.kill", agt_req_jail_kill, AGT_METHOD_NEEDS_HELLO},
    {"jail.rm", agt_req_jail_rm, AGT_METHOD_NEEDS_HELLO},
    {"jail.ls", agt_req_jail_ls, AGT_METHOD_NEEDS_HELLO},
    {"jail.inspect", agt_req_jail_inspect, AGT_METHOD_NEEDS_HELLO},
    {"jail.logs", agt_req_jail_logs, AGT_METHOD_NEEDS_HELLO},
    {"jail.wait", agt_req_jail_wait, AGT_METHOD_NEEDS_HELLO},
    {"jail.net", agt_req_jail_net, AGT_METHOD_NEEDS_HELLO},
    {"jail.attach", agt_req_jail_attach, AGT_METHOD_NEEDS_HELLO},
    {"jail.port", agt_req_jail_port, AGT_METHOD_NEEDS_HELLO},
    {"jail.exec", agt_req_jail_exec, AGT_METHOD_NEEDS_HELLO},
    {"home.inspect", agt_req_home_inspect, AGT_METHOD_NEEDS_HELLO},
    {"home.reset", agt_req_home_reset, AGT_METHOD_NEEDS_HELLO},
    {"rootfs.build", agt_req_rootfs_build, AGT_METHOD_NEEDS_HELLO},
    {"rootfs.ls", agt_req_rootfs_ls, AGT_METHOD_NEEDS_HELLO},
    {"rootfs.rm", agt_req_rootfs_rm, AGT_METHOD_NEEDS_HELLO},
    {"rootfs.update", agt_req_rootfs_update, AGT_METHOD_NEEDS_HELLO},
};

static void on_signal(uv_signal_t *s, int signum)
{
  agtd_t *d = s->data;

  agt_log_info("signal %d: shutting down; running jails go on under their keepers", signum);
  d->shutting_down = 1;
  /* Running jails are not agtd's: their keepers hold them until the next agtd (keeper.h). */
  agt_server_close(d);
  uv_signal_stop(&d->sigterm);
  uv_signal_stop(&d->sigint);
  uv_stop(d->loop);
}

/* One agtd per state directory and per socket: an flock held for agtd's life on path, which
 * says whose it is.  A second agtd refuses to start, before it touches the state or the
 * socket of the first. */
static int take_lock(const char *path, const char *what, const char *name, agt_error_t *err)
{
  char buf[32];
  ssize_t n;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0)
    return agt_error_make(err, errno, "open the lock '%s'", path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    int e = errno;
    n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    close(fd);
    if (e == EWOULDBLOCK)
      return agt_error_kind(err, AGT_E_BUSY, "another agtd (pid %s) serves the %s '%s' (lock '%s')",
                            buf[0] ? buf : "unknown", what, name, path);
    return agt_error_make(err, e, "lock '%s'", path);
  }
  n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
  if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
    agt_error_make(err, errno, "write the lock '%s'", path);
    close(fd);
    return -1;
  }
  return fd;
}

static int take_locks(agtd_t *d, agt_error_t *err)
{
  const char *sock = d->cfg.socket_path;
  cleanup_free char *state_lock = xasprintf("%s/agtd.lock", d->cfg.state_dir);
  cleanup_free char *sock_lock = xasprintf("%s.lock", sock);
  cleanup_free char *dir = xstrdup(sock);
  char *slash = strrchr(dir, '/');

  d->state_lock_fd = take_lock(state_lock, "state directory", d->cfg.state_dir, err);
  if (d->state_lock_fd < 0)
    return -1;
  if (slash && slash != dir) {
    *slash = '\0';
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
      return agt_error_make(err, errno, "mkdir '%s'", dir);
  }
  d->socket_lock_fd = take_lock(sock_lock, "socket", sock, err);
  return d->socket_lock_fd < 0 ? -1 : 0;
}

int agtd_init(agtd_t *d, uv_loop_t *loop, const struct agtd_config *cfg, agt_error_t *err)
{
  struct rlimit rl;

  memset(d, 0, sizeof *d);
  d->cgroup = xzalloc(sizeof *d->cgroup);
  d->seccomp = xzalloc(sizeof *d->seccomp);
  d->seccomp_ahead = xzalloc(sizeof *d->seccomp_ahead);
  d->seccomp_tail = xzalloc(sizeof *d->seccomp_tail);
  d->netns = xzalloc(sizeof *d->netns);
  d->disk = xzalloc(sizeof *d->disk);
  d->warm = xzalloc(sizeof *d->warm);
  d->prio = xzalloc(sizeof *d->prio);
  d->usage = xzalloc(sizeof *d->usage);
  d->loop = loop;
  d->output_watch = &agt_stream_watch;
  agt_usage_init(d->usage, d);
  d->cfg = *cfg;
  d->started = time(NULL);
  d->state_lock_fd = d->socket_lock_fd = -1;
  d->keeper_fd = -1;
  d->init_fd = -1;
  d->jails_dir = xasprintf("%s/jails", cfg->state_dir);
  d->rootfs_dir = xasprintf("%s/rootfs", cfg->state_dir);
  d->workspaces_dir = xasprintf("%s/workspaces", cfg->state_dir);
  d->layers_dir =
      cfg->layers_dir ? xstrdup(cfg->layers_dir) : xasprintf("%s/layers", cfg->state_dir);

  if (geteuid() != 0)
    return agt_error_kind(err, AGT_E_STATE, "agtd must run as root");
  /* A peer that hangs up (a client, a jail's pipe or proxy connection) is an error return
   * from write, never a signal that would take every jail down with agtd.  Jails get the
   * default back before their agent's exec. */
  signal(SIGPIPE, SIG_IGN);
  /* Not dumpable: no jail process can reach agtd's memory or fds through /proc or ptrace. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  /* Many jails hold several fds each (pidfd, three pipes, a log). */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  umask(022);
  if (agt_mkdir_p(cfg->state_dir, 0711, err) < 0)
    return agt_error_wrap(err, "state directory");
  if (take_locks(d, err) < 0)
    return -1;
  if (agt_mkdir_p(d->jails_dir, 0700, err) < 0 || agt_mkdir_p(d->rootfs_dir, 0755, err) < 0 ||
      agt_mkdir_p(d->workspaces_dir, 0755, err) < 0)
    return agt_error_wrap(err, "state directory");
  if (agt_disk_init(d->disk, cfg->state_dir, d->layers_dir, cfg->disk_size, err) < 0)
    return agt_error_wrap(err, "the jails' disk");
  if (d->disk->enabled)
    agt_log_info("jails' writable layers: btrfs at %s (%llu MiB), a quota per jail", d->layers_dir,
                 (unsigned long long)(d->disk->size >> 20));
  else
    agt_log_warning("jails' writable layers: NO DISK LIMIT (%s)", d->disk->why_off);
  if (agt_cgroup_root_init(d->cgroup, cfg->cgroup_parent, err) < 0)
    return agt_error_wrap(err, "cgroups");
  /* Machine-wide settings are the machine's (lima/provision/machine.sh): agtd reads them. */
  d->cgroup->fast_attach = agt_cgroup_favordynmods();
  if (!d->cgroup->fast_attach)
    agt_log_info("cgroups: the kernel's cgroup flag favordynmods is off: moving a process between "
                 "cgroups waits for an RCU grace period (lima/provision/machine.sh turns it on)");
  if (agt_seccomp_compile(d->seccomp, err) < 0 ||
      agt_seccomp_compile_split(d->seccomp_ahead, d->seccomp_tail, err) < 0)
    return agt_error_wrap(err, "seccomp filter");
  if (agt_netns_pool_init(d->netns, loop, cfg->netns_pool, err) < 0)
    return agt_error_wrap(err, "network namespace pool");
  if (agt_keep_init(d, err) < 0)
    return -1;
  /* executable by the jail's user, not readable: an init that execs it stays non-dumpable */
  d->init_fd = agt_memfd_program("agt-init", agt_init_blob, agt_init_blob_end, 0111, err);
  if (d->init_fd < 0)
    return -1;
  if (agt_jail_load_all(d, agt_jail_find_again, err) < 0)
    return -1;
  agt_warm_init(d, cfg->warm, d->cgroup->fast_attach);
  if (agt_disk_sweep(d->disk, d->jails_dir) > 0)
    agt_log_info("removed the jails' layers left over from starts cut short");
  agt_start_prio_init(d, cfg->realtime_starts, d->warm->enabled ? d->warm->target : 0);
  if (agt_server_listen(d, methods, sizeof methods / sizeof methods[0], err) < 0)
    return -1;
  uv_signal_init(loop, &d->sigterm);
  uv_signal_init(loop, &d->sigint);
  d->sigterm.data = d->sigint.data = d;
  uv_signal_start(&d->sigterm, on_signal, SIGTERM);
  uv_signal_start(&d->sigint, on_signal, SIGINT);
  agt_log_info("listening on %s (cgroup v%d, %u jail records)", cfg->socket_path,
               d->cgroup->version, d->njails);
  return 0;
}

int agtd_run(agtd_t *d)
{
  return uv_run(d->loop, UV_RUN_DEFAULT);
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

void agtd_release(agtd_t *d)
{
  /* Close every handle first (their callbacks still see the jails), then free the jails. */
  int kept = 0;

  d->shutting_down = 1;
  for (agt_jail_t *j = d->jails; j; j = j->next)
    kept += j->run.keep_open;
  if (kept)
    agt_log_info("%d jails go on running under their keepers", kept);
  agt_start_prio_release(d);
  uv_walk(d->loop, close_walk_cb, NULL);
  uv_run(d->loop, UV_RUN_DEFAULT);
  while (d->jails) {
    agt_jail_t *j = d->jails;
    d->jails = j->next;
    agt_jail_free_now(j);
  }
  agt_warm_drain(d, NULL);
  agt_usage_release(d->usage);
  free(d->warm->rootfs_id);
  free(d->warm->rootfs_path);
  agt_netns_pool_release(d->netns);
  agt_seccomp_release(d->seccomp);
  agt_seccomp_release(d->seccomp_ahead);
  agt_seccomp_release(d->seccomp_tail);
  agt_cgroup_root_release(d->cgroup);
  if (kept)
    d->disk->mounted = 0; /* the running jails' layers are on it: the next agtd uses it */
  agt_disk_release(d->disk);
  free(d->cgroup);
  free(d->seccomp);
  free(d->seccomp_ahead);
  free(d->seccomp_tail);
  free(d->netns);
  free(d->disk);
  free(d->warm);
  free(d->prio);
  free(d->usage);
  if (d->keeper_fd >= 0)
    close(d->keeper_fd);
  if (d->init_fd >= 0)
    close(d->init_fd);
  if (d->spawner_stack)
    munmap(d->spawner_stack, 256u * 1024);
  agtd_rootfs_changed(d);
  free(d->jails_dir);
  free(d->rootfs_dir);
  free(d->workspaces_dir);
  free(d->layers_dir);
  /* the socket is gone (agt_server_close): the locks last */
  if (d->socket_lock_fd >= 0)
    close(d->socket_lock_fd);
  if (d->state_lock_fd >= 0)
    close(d->state_lock_fd);
}
