/* A jail's run, from agtd's side: its beginning once its init runs, and finding it again
 * under its keeper when agtd starts; and what a cold start (jail_spawn.c) and a prepared one
 * (jail_warm.c) share.  Supervision of the run is supervise.c's. */
#include "jail_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "egress.h"
#include "jail_keep.h"
#include "log.h"
#include "netns_pool.h"
#include "xalloc.h"

int agt_cap_last(void)
{
  static int cached = -1;
  FILE *f;

  if (cached >= 0)
    return cached;
  cached = 63;
  f = fopen("/proc/sys/kernel/cap_last_cap", "re");
  if (f) {
    if (fscanf(f, "%d", &cached) != 1)
      cached = 63;
    fclose(f);
  }
  return cached;
}

const char *agt_env_path(char *const *env)
{
  for (char *const *e = env; e && *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0)
      return *e + 5;
  return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

/* The proxy listens inside the jail's network namespace; agtd serves it from outside. */
int agt_jail_start_egress(agt_jail_t *j, int netns, pid_t pid, agt_error_t *err)
{
  int fd = netns, lfd;

  if (fd < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return agt_error_make(err, errno, "open the network namespace of jail '%s'", j->rec.name);
  }
  lfd = agt_egress_listen_in(fd, j->d->netns->home_fd, err);
  if (fd != netns)
    close(fd);
  if (lfd < 0)
    return agt_error_wrap(err, "jail '%s'", j->rec.name);
  j->run.egress =
      agt_egress_start(j->d->loop, j->rec.name, &j->rec.net, lfd, j->rec.net_log_path, err);
  return j->run.egress ? 0 : -1;
}

/* Paths relative to the jail's directory (the child mounts from there), so the jail's mount
 * table does not spell out where the guest keeps its rootfs store.  layers (top first, NULL
 * or NULL-terminated) stack over lower, the base rootfs. */
void agt_jail_overlay_opts(struct agtd_s *d, char *const *layers, const char *lower,
                           const char *dir, char *buf, size_t size)
{
  size_t n = strlen(d->rootfs_dir), used = 0;
  int rel = strncmp(dir, d->jails_dir, strlen(d->jails_dir)) == 0 &&
            strcmp(d->jails_dir + strlen(d->cfg.state_dir), "/jails") == 0 &&
            strcmp(d->rootfs_dir + strlen(d->cfg.state_dir), "/rootfs") == 0;

  used += (size_t)snprintf(buf, size, "lowerdir=");
  for (size_t i = 0; used < size; i++) {
    const char *l = layers && layers[i] ? layers[i] : lower;
    int r = rel && strncmp(l, d->rootfs_dir, n) == 0 && l[n] == '/';
    used += (size_t)snprintf(buf + used, size - used, "%s%s%s", r ? "../../rootfs" : "",
                             r ? l + n : l, l == lower ? "" : ":");
    if (l == lower)
      break;
  }
  if (used >= size)
    return;
  if (rel && strncmp(lower, d->rootfs_dir, n) == 0 && lower[n] == '/')
    snprintf(buf + used, size - used, ",upperdir=rw/upper,workdir=rw/work");
  else
    snprintf(buf + used, size - used, ",upperdir=%s/rw/upper,workdir=%s/rw/work", dir, dir);
}

/* The jail runs (its init is pid): the record's run state, then supervision of its pipes. */
int agt_jail_begin_run(agt_jail_t *j, pid_t pid, int pidfd, int keep_fd, int keeper_pidfd,
                       int status_fd, agt_error_t *err)
{
  cleanup_free char *exit_path = xasprintf("%s/%s", j->rec.dir, AGT_KEEP_EXIT);

  j->run.pid = pid;
  j->run.pidfd = pidfd;
  j->rec.state = AGT_JAIL_STARTING;
  j->rec.started = time(NULL);
  j->rec.finished = 0;
  j->rec.exit_code = 0;
  j->rec.exit_signal = 0;
  free(j->rec.exit_reason);
  j->rec.exit_reason = NULL;
  j->rec.runs++;
  j->run.status_len = 0;
  j->run.exited_seen = 0;
  j->run.usage_ns = 0; /* the figures of the last run's cgroup */
  unlink(exit_path);   /* the last run's */
  /* the log's budget, before the agent can write */
  agt_keep_send_budget(keep_fd, j->rec.limits.log_bytes);
  if (agt_jail_supervise(j, keep_fd, keeper_pidfd, status_fd, err) < 0) {
    /* cannot watch it: kill it rather than leave it unsupervised */
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    agt_jail_release_init(j);
    return -1;
  }
  return 0;
}

/* A jail that was running when the last agtd went: its keeper, found again. */
static int adopt(agt_jail_t *j)
{
  struct agt_keep_hdr h;
  agt_error_t e = NULL;
  int fds[2] = {-1, -1};
  int fd = agt_keep_connect(j->rec.dir, &h, fds, &e), r;

  if (fd < 0) {
    /* no socket, or no one behind it: the keeper has gone (agt_jail_find_again says how) */
    if (e->status != ENOENT && e->status != ECONNREFUSED)
      agt_log_warning("jail '%s': %s", j->rec.name, e->msg);
    agt_error_release(&e);
    return -1;
  }
  r = agt_jail_adopt(j, fd, &h, fds, &e);
  if (r < 0) {
    /* cannot watch it: kill it rather than leave it unsupervised (its keeper records the
     * exit; the supervision's end says it) */
    syscall(SYS_pidfd_send_signal, j->run.pidfd, SIGKILL, NULL, 0);
    agt_log_warning("jail '%s': found under its keeper, but killed: %s", j->rec.name, e->msg);
  } else if (h.exited) {
    agt_log_info("jail '%s': ended while agtd was away (exit code %d)", j->rec.name,
                 j->rec.exit_code);
  } else if (j->rec.net.mode == AGT_NET_ALLOW && agt_jail_start_egress(j, -1, j->run.pid, &e) < 0) {
    /* it runs on, with what it has; its proxy comes back with its next start */
    agt_log_warning("jail '%s': found running (pid %d) under its keeper, but without its proxy "
                    "(it reaches nothing until it is started again): %s",
                    j->rec.name, (int)j->run.pid, e->msg);
  } else {
    agt_log_info("jail '%s': found running (pid %d) under its keeper", j->rec.name,
                 (int)j->run.pid);
  }
  agt_error_release(&e);
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  return 0;
}

void agt_jail_find_again(agt_jail_t *j)
{
  int code, sig;
  int64_t finished;

  if (adopt(j) == 0)
    return;
  /* Its keeper is gone: what it recorded of the exit, else the jail died with it. */
  j->rec.state = AGT_JAIL_EXITED;
  free(j->rec.exit_reason);
  j->rec.exit_reason = NULL;
  if (agt_keep_read_exit(j->rec.dir, &code, &sig, &finished) == 0) {
    j->rec.exit_code = code;
    j->rec.exit_signal = sig;
    j->rec.finished = (time_t)finished;
    agt_log_info("jail '%s': ended while agtd was away (exit code %d)", j->rec.name, code);
  } else {
    agt_log_warning("jail '%s': its keeper was gone, and with it the jail", j->rec.name);
    j->rec.exit_code = 128 + SIGKILL;
    j->rec.exit_signal = SIGKILL;
    j->rec.finished = time(NULL);
    j->rec.exit_reason = xstrdup("its keeper was gone at agtd's start; the jail ended with it");
  }
}
