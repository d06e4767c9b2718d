/* Starting and stopping a jail: the daemon's side of clone().  The jail's own steps are in
 * jail_setup.c; supervision of the running tree is in supervise.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "disk.h"
#include "jail.h"
#include "fsutil.h"
#include "jail_keep.h"
#include "jail_net.h"
#include "jail_run.h"
#include "jail_seccomp.h"
#include "jail_setup.h"
#include "jail_warm.h"
#include "log.h"
#include "netns_pool.h"
#include "xalloc.h"

static void close_all(int *fds, int n)
{
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
}

/* Tell the child to go on to the agent.  The fd is the jail's run.answer_fd then, closed
 * once the start is answered (the init waits for that before it becomes agt-init), unless
 * keep is 0 or the child is gone: then it is closed now. */
static void send_go(agt_jail_t *j, int fd, int keep)
{
  if (write(fd, "g", 1) != 1) {
    /* EPIPE (agtd ignores SIGPIPE): the child is gone already, a setup step having failed
     * before it read this; its status pipe says why, through the supervision. */
    if (errno != EPIPE)
      agt_log_warning("jail '%s': signal the jail to go: %s", j->rec.name, strerror(errno));
    keep = 0;
  }
  if (keep && j->run.answer_fd < 0)
    j->run.answer_fd = fd;
  else
    close(fd);
}

static void attach_work_cb(uv_work_t *w)
{
  agt_jail_t *j = w->data;

  j->run.attach_err = NULL;
  agt_cgroup_attach(j->d->cgroup, j->rec.name, j->run.attach_pid, &j->run.attach_err);
}

static void attach_done_cb(uv_work_t *w, int status)
{
  agt_jail_t *j = w->data;

  (void)status;
  j->run.attach_pending = 0;
  if (j->run.attach_err) {
    agt_log_warning("start jail '%s': %s", j->rec.name, j->run.attach_err->msg);
    if (j->rec.exit_reason == NULL) /* a child that died first has said why already */
      j->rec.exit_reason = xasprintf("start jail '%s': %s", j->rec.name, j->run.attach_err->msg);
    agt_error_release(&j->run.attach_err);
    if (j->run.pidfd >= 0)
      syscall(SYS_pidfd_send_signal, j->run.pidfd, SIGKILL, NULL, 0);
    close(j->run.attach_go_fd);
  } else {
    /* kept only while this run goes on (its end closes the fd) */
    send_go(j, j->run.attach_go_fd, j->run.pidfd >= 0 && j->run.pid == j->run.attach_pid);
  }
  j->run.attach_go_fd = -1;
  agt_jail_maybe_free(j);
}

/* Mode open: the jail's namespace (from the pool, or its init's) gets its way out. */
static int start_open_net(agt_jail_t *j, const struct agt_open_net *on, int netns, pid_t pid,
                          agt_error_t *err)
{
  int fd = netns, r;

  if (fd < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return agt_error_make(err, errno, "open the network namespace of jail '%s'", j->rec.name);
  }
  r = agt_jail_net_open(on, fd, j->d->netns->home_fd, err);
  if (fd != netns)
    close(fd);
  return r;
}

/* Mode open: the machine is set up for it (else a clear error), and the jail's
 * /etc/resolv.conf names the resolvers it may reach. */
static int prepare_open_net(agt_jail_t *j, struct agt_open_net *on, agt_error_t *err)
{
  cleanup_free char *etc = xasprintf("%s/etc", j->rec.upper);
  cleanup_free char *path = xasprintf("%s/etc/resolv.conf", j->rec.upper);

  if (agt_open_net_check(on, err) < 0 || agt_mkdir_p(etc, 0755, err) < 0 ||
      agt_write_file_atomic(path, on->resolv, strlen(on->resolv), 0644, err) < 0)
    return agt_error_wrap(err, "start jail '%s'", j->rec.name);
  return 0;
}

int agt_jail_start(agt_jail_t *j, agt_error_t *err)
{
  struct agt_spawn_plan plan;
  struct agt_plan_mount mounts[AGT_JAIL_MOUNTS_MAX];
  struct agt_plan_file home_files[AGT_HOME_FILES_MAX];
  /* sync[0..1], status[2..3], out[4..5], errout[6..7]: read end first */
  int fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int console[2] = {-1, -1};
  int pidfd = -1, netns = -1, cgroup_fd, attached, dir_fd = -1, r;
  struct agt_keep_spawn ks;
  struct agt_open_net on;
  pid_t pid;

  if (j->rec.state == AGT_JAIL_STARTING || j->rec.state == AGT_JAIL_RUNNING ||
      j->rec.state == AGT_JAIL_STOPPING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  if (j->run.handles_open > 0 || j->run.cgroup_pending)
    return agt_error_kind(err, AGT_E_BUSY, "jail '%s' is still cleaning up its last run",
                          j->rec.name);
  if (agt_jail_disk_promise(j->d, j, err) < 0)
    return -1;
  j->run.started_warm = 0;
  j->run.on_started = NULL;
  /* its persistent home (made again if removed, its user's), taking at most what the jail
   * may write to its root */
  if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT &&
      (agt_jail_home_prepare(j, err) < 0 ||
       agt_disk_home_limit(j->d->disk, j->rec.binds.home_path, j->rec.limits.disk_bytes, err) < 0))
    return agt_error_wrap(err, "home of jail '%s'", j->rec.name);
  if (j->run.warm) {
    r = agt_warm_start(j, err);
    if (r <= 0)
      return r;
    /* the prepared jail was gone, and its directory with it: a cold start in a new one */
    if (agt_jail_make_dir(j, err) < 0)
      return -1;
  }
  if (j->rec.net.mode == AGT_NET_OPEN && prepare_open_net(j, &on, err) < 0)
    return -1;
  if (agt_cgroup_create(j->d->cgroup, j->rec.name, &j->rec.limits.cg, err) < 0)
    return -1;

  memset(&plan, 0, sizeof plan);
  plan.landlock_fd = -1;
  plan.init_fd = j->d->init_fd;
  plan.hostname = j->rec.name;
  agt_jail_overlay_opts(j->d, j->rec.layer_paths, j->rec.rootfs_path, j->rec.dir, plan.overlay_opts,
                        sizeof plan.overlay_opts);
  plan.jail_dir = j->rec.dir;
  plan.merged = j->rec.merged;
  plan.workspace = j->rec.workspace;
  if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT)
    plan.home = j->rec.binds.home_path;
  plan.home_ephemeral = j->rec.binds.home_mode == AGT_HOME_EPHEMERAL;
  for (size_t i = 0; i < j->rec.binds.nhome_files && i < AGT_HOME_FILES_MAX; i++) {
    home_files[i].path = j->rec.binds.home_files[i].path;
    home_files[i].content = j->rec.binds.home_files[i].content;
    home_files[i].len = j->rec.binds.home_files[i].len;
  }
  if (j->rec.binds.home_mode == AGT_HOME_EPHEMERAL) {
    plan.home_files = home_files;
    plan.nhome_files = j->rec.binds.nhome_files < AGT_HOME_FILES_MAX ? j->rec.binds.nhome_files
                                                                     : AGT_HOME_FILES_MAX;
  }
  for (size_t i = 0; i < j->rec.binds.nmounts && i < AGT_JAIL_MOUNTS_MAX; i++) {
    mounts[i].path = j->rec.binds.mounts[i].path;
    mounts[i].writable = j->rec.binds.mounts[i].writable;
  }
  plan.mounts = mounts;
  plan.nmounts =
      j->rec.binds.nmounts < AGT_JAIL_MOUNTS_MAX ? j->rec.binds.nmounts : AGT_JAIL_MOUNTS_MAX;
  snprintf(plan.tmpfs_opts, sizeof plan.tmpfs_opts, "mode=0700,size=%llu",
           (unsigned long long)agt_jail_tmpfs_bytes(j->rec.limits.tmp_bytes, plan.home_ephemeral));
  plan.cwd = "/work";
  plan.path = agt_env_path(j->rec.env);
  plan.argv = j->rec.argv;
  plan.envp = j->rec.env;
  plan.uid = j->rec.uid;
  plan.gid = j->rec.gid;
  plan.nofile = j->rec.limits.nofile;
  plan.cap_last = agt_cap_last();
  plan.seccomp = &j->d->seccomp->prog;

  /* sync, status and output: one pipe for stdout and stderr, so that the log has them in the
   * order the agent wrote them (fds[6], fds[7] stay -1) */
  for (int i = 0; i < 6; i += 2) {
    if (j->rec.tty && i >= 4)
      break; /* on a terminal, output comes from the pty, not from pipes */
    if (pipe2(fds + i, O_CLOEXEC) < 0) {
      agt_error_make(err, errno, "pipe");
      goto fail;
    }
  }
  if (j->rec.tty && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, console) < 0) {
    agt_error_make(err, errno, "socketpair");
    goto fail;
  }
  plan.fds[0] = fds[0]; /* sync: the child reads */
  plan.fds[1] = fds[3]; /* status: the child writes */
  plan.fds[2] = fds[5];
  plan.fds[3] = fds[7];
  plan.fds[5] = console[1];
  plan.rows = j->out.rows;
  plan.cols = j->out.cols;
  /* Network: a namespace of its own in every mode (mode open gets a way out below). */
  netns = agt_netns_pool_take(j->d->netns);
  plan.fds[4] = netns;

  j->run.start_request_ns = j->run.start_request_ns ? j->run.start_request_ns : agt_now_ns();
  dir_fd = open(j->rec.dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir_fd < 0) {
    agt_error_make(err, errno, "open '%s'", j->rec.dir);
    goto fail;
  }
  cgroup_fd = agt_cgroup_open(j->d->cgroup, j->rec.name);
  /* The init is born the child of its keeper, which takes the read ends of its output. */
  memset(&ks, 0, sizeof ks);
  ks.plan = &plan;
  ks.name = j->rec.name;
  ks.new_netns = netns < 0;
  ks.cgroup_fd = cgroup_fd;
  ks.attach_cgroup = j->d->cgroup->fast_attach ? j->rec.name : NULL;
  ks.out_rd = fds[4];
  ks.err_rd = fds[6];
  ks.console_rd = console[0];
  ks.dir_fd = dir_fd;
  r = agt_keep_spawn(j->d, &ks, err);
  if (cgroup_fd >= 0)
    close(cgroup_fd);
  close(dir_fd);
  if (r < 0) {
    agt_error_wrap(err, "start jail '%s'", j->rec.name);
    goto fail;
  }
  pid = ks.pid;
  pidfd = ks.pidfd;
  attached = ks.attached;
  /* With favordynmods a v1 migration is microseconds: done here, without the threadpool's
   * round trip. */
  if (ks.attach_err) {
    *err = ks.attach_err; /* the child is killed below */
    ks.attach_err = NULL;
  }

  /* Parent: keep the read end of status and the write end of sync; the keeper has the
   * rest. */
  close(fds[0]);
  close(fds[3]);
  for (int i = 4; i < 8; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
  fds[0] = fds[3] = -1;
  close_all(console, 2);

  /* The proxy and the cgroup are in place before the child is told to go on to the agent.
   * On failure the child is killed, and supervised below so that it is reaped. */
  if (*err) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    agt_error_wrap(err, "start jail '%s'", j->rec.name);
    close(fds[1]);
  } else if (j->rec.net.mode == AGT_NET_ALLOW && agt_jail_start_egress(j, netns, pid, err) < 0) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    agt_error_wrap(err, "start jail '%s'", j->rec.name);
    close(fds[1]);
  } else if (j->rec.net.mode == AGT_NET_OPEN && start_open_net(j, &on, netns, pid, err) < 0) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    agt_error_wrap(err, "start jail '%s'", j->rec.name);
    close(fds[1]);
  } else if (!attached) {
    /* A cgroup v1 migration waits for an RCU grace period (milliseconds, more under load):
     * it happens in the threadpool, so the loop keeps serving, and concurrent starts share
     * the wait.  The go byte follows from the loop once it is done. */
    j->run.attach_pid = pid;
    j->run.attach_go_fd = fds[1];
    j->run.attach_pidfd = pidfd;
    j->run.attach_work.data = j;
    j->run.attach_pending = 1;
    uv_queue_work(j->d->loop, &j->run.attach_work, attach_work_cb, attach_done_cb);
  } else {
    send_go(j, fds[1], 1);
  }
  fds[1] = -1;

  if (netns >= 0)
    close(netns);
  netns = -1;

  if (agt_jail_begin_run(j, pid, pidfd, ks.keep_fd, ks.keeper_pidfd, fds[2], err) < 0)
    return -1;
  return *err ? -1 : 0;

fail:
  close_all(fds, 8);
  close_all(console, 2);
  if (netns >= 0)
    close(netns);
  agt_cgroup_destroy(j->d->cgroup, j->rec.name, NULL);
  return -1;
}

static void stop_timer_cb(uv_timer_t *t)
{
  agt_jail_t *j = t->data;

  if (j->run.pidfd >= 0 && (j->rec.state == AGT_JAIL_STOPPING || j->rec.state == AGT_JAIL_RUNNING ||
                            j->rec.state == AGT_JAIL_STARTING)) {
    agt_log_info("jail '%s': grace period over, sending SIGKILL", j->rec.name);
    free(j->rec.exit_reason);
    j->rec.exit_reason = xstrdup("killed after the stop grace period");
    syscall(SYS_pidfd_send_signal, j->run.pidfd, SIGKILL, NULL, 0);
  }
}

int agt_jail_stop(agt_jail_t *j, uint64_t grace_ms, agt_error_t *err)
{
  if (j->rec.state != AGT_JAIL_RUNNING && j->rec.state != AGT_JAIL_STARTING &&
      j->rec.state != AGT_JAIL_STOPPING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is not running (%s)", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  if (j->rec.state == AGT_JAIL_STOPPING)
    return 0;
  j->rec.state = AGT_JAIL_STOPPING;
  /* No grace: SIGKILL alone.  A SIGTERM just before it would race it (the agent could end
   * by the SIGTERM first), and the exit would say terminated or killed by chance. */
  if (grace_ms == 0)
    return agt_jail_kill(j, SIGKILL, err);
  /* The init forwards SIGTERM to the agent; before the init has its handler in place the
   * signal is dropped and the grace timer ends it. */
  if (syscall(SYS_pidfd_send_signal, j->run.pidfd, SIGTERM, NULL, 0) < 0 && errno != ESRCH)
    return agt_error_make(err, errno, "signal jail '%s'", j->rec.name);
  j->run.stop_timer.data = j;
  uv_timer_start(&j->run.stop_timer, stop_timer_cb, grace_ms, 0);
  return 0;
}

int agt_jail_kill(agt_jail_t *j, int sig, agt_error_t *err)
{
  if (j->rec.state != AGT_JAIL_RUNNING && j->rec.state != AGT_JAIL_STARTING &&
      j->rec.state != AGT_JAIL_STOPPING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is not running (%s)", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  if (sig <= 0 || sig >= NSIG)
    return agt_error_kind(err, AGT_E_INVALID, "signal %d is out of range", sig);
  if (sig == SIGKILL && !j->rec.exit_reason)
    j->rec.exit_reason = xstrdup("killed");
  if (syscall(SYS_pidfd_send_signal, j->run.pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
    return agt_error_make(err, errno, "signal jail '%s'", j->rec.name);
  return 0;
}
