/* Prepared jails (jail_warm.h). */
#include "jail_warm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "disk.h"
#include "fsutil.h"
#include "jail.h"
#include "jail_keep.h"
#include "jail_run.h"
#include "jail_seccomp.h"
#include "jail_setup.h"
#include "log.h"
#include "netns_pool.h"
#include "start_prio.h"
#include "xalloc.h"

#define FILL_INTERVAL_MS 1
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
/* After a take, the pool is filled again once the start it served is over (supervise.c
 * calls agt_warm_refill when the agent runs), and never while a start is in flight, so that
 * building the next prepared jail does not compete with a start for the loop or the CPU;
 * this is the fallback. */
#define REFILL_LATER_MS 100

static void warm_free(struct agt_warm_s *w)
{
  int *fds[] = {&w->pidfd, &w->ctl_fd, &w->status_fd, &w->keep_fd, &w->keeper_pidfd, &w->netns_fd};

  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    if (*fds[i] >= 0)
      close(*fds[i]);
  free(w->name);
  free(w->dir);
  free(w->rootfs_id);
  free(w);
}

/* The cgroup of a prepared jail is gone once its processes are: retry a little. */
static void destroy_cgroup(struct agtd_s *d, const char *name)
{
  agt_error_t e = NULL;

  for (int i = 0; i < 200; i++) {
    if (agt_cgroup_destroy(d->cgroup, name, &e) == 0)
      return;
    if (e->kind != AGT_E_BUSY)
      break;
    agt_error_release(&e);
    usleep(1000);
  }
  if (e) {
    agt_log_warning("prepared jail %s: %s", name, e->msg);
    agt_error_release(&e);
  }
}

/* A prepared jail on its way out.  Its init is killed at once; then its keeper is heard out
 * (once it has said the exit, which it has recorded in the directory, it touches the
 * directory no more), reaped when it is agtd's child, and its cgroup and directory go.  While
 * agtd serves, all of that waits in the loop (no client waits for a keeper); at agtd's start
 * and end it is waited for, up to END_WAIT_MS for each step. */
#define END_WAIT_MS 5000
#define END_CGROUP_TRIES 200

struct agt_warm_end {
  struct agt_warm_end *next;
  struct agtd_s *d;
  uv_poll_t keep_poll, pid_poll;
  uv_timer_t timer; /* the bound on the keeper's goodbye, then the cgroup's retries */
  int keep_fd, keeper_pidfd;
  int handles; /* open uv handles */
  int let_go;  /* the keeper's connection is shut */
  unsigned tries;
  char *name; /* its cgroup */
  char *dir;  /* its directory, NULL when a jail took it */
};

/* Read what the keeper sent, up to its exit.  1: it said the exit (or is gone, or talks
 * nonsense), 0: not yet. */
static int heard_out(int keep_fd)
{
  for (;;) {
    struct agt_keep_hdr h;
    int fds[2];
    int r = agt_keep_recv(keep_fd, &h, NULL, fds);
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0)
        close(fds[i]);
    if (r == 0)
      return 0;
    if (r < 0 || h.type == AGT_KEEP_EXIT_MSG)
      return 1;
  }
}

/* The keeper reaped: 1, or 0 while it runs. */
static int reaped(int keeper_pidfd)
{
  siginfo_t info;

  memset(&info, 0, sizeof info);
  if (syscall(SYS_waitid, P_PIDFD, keeper_pidfd, &info, WEXITED | WNOHANG, NULL) < 0)
    return errno != EINTR; /* ECHILD: reaped already */
  return info.si_pid != 0;
}

static void end_free(struct agt_warm_end *e)
{
  if (e->keep_fd >= 0)
    close(e->keep_fd);
  if (e->keeper_pidfd >= 0)
    close(e->keeper_pidfd);
  free(e->name);
  free(e->dir);
  free(e);
}

static void end_unlink(struct agt_warm_end *e)
{
  for (struct agt_warm_end **p = &e->d->warm->ending; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      return;
    }
}

static void end_handle_closed(uv_handle_t *h)
{
  struct agt_warm_end *e = h->data;

  if (--e->handles == 0)
    end_free(e);
}

/* The keeper is gone: the cgroup and the directory follow. */
static void end_finish(struct agt_warm_end *e)
{
  agt_error_t err = NULL;

  if (agt_cgroup_destroy(e->d->cgroup, e->name, &err) < 0) {
    if (err->kind == AGT_E_BUSY && ++e->tries < END_CGROUP_TRIES) {
      agt_error_release(&err);
      return; /* its processes are still going: the timer tries again */
    }
    agt_log_warning("prepared jail %s: %s", e->name, err->msg);
    agt_error_release(&err);
  }
  if (e->dir)
    agt_disk_jail_remove(e->d->disk, e->dir, NULL);
  end_unlink(e);
  uv_timer_stop(&e->timer);
  uv_close((uv_handle_t *)&e->timer, end_handle_closed);
  if (!uv_is_closing((uv_handle_t *)&e->keep_poll))
    uv_close((uv_handle_t *)&e->keep_poll, end_handle_closed);
  if (e->keeper_pidfd >= 0 && !uv_is_closing((uv_handle_t *)&e->pid_poll))
    uv_close((uv_handle_t *)&e->pid_poll, end_handle_closed);
}

static void end_retry_cb(uv_timer_t *t)
{
  end_finish(t->data);
}

static void end_reaped(struct agt_warm_end *e)
{
  if (e->keeper_pidfd >= 0)
    uv_poll_stop(&e->pid_poll);
  uv_timer_stop(&e->timer);
  uv_timer_start(&e->timer, end_retry_cb, 1, 1);
  end_finish(e);
}

static void end_pid_cb(uv_poll_t *p, int status, int events)
{
  struct agt_warm_end *e = p->data;

  (void)status;
  (void)events;
  if (reaped(e->keeper_pidfd))
    end_reaped(e);
}

/* The keeper said the exit, or kept silent too long: agtd lets it go (it exits once its
 * connection closes) and reaps it. */
static void end_let_go(struct agt_warm_end *e)
{
  e->let_go = 1;
  uv_poll_stop(&e->keep_poll);
  uv_timer_stop(&e->timer);
  /* the fd closes with the handle (libuv must not poll a closed fd) */
  uv_close((uv_handle_t *)&e->keep_poll, end_handle_closed);
  shutdown(e->keep_fd, SHUT_RDWR);
  if (e->keeper_pidfd < 0 || reaped(e->keeper_pidfd)) {
    end_reaped(e);
    return;
  }
  uv_poll_start(&e->pid_poll, UV_READABLE, end_pid_cb);
}

static void end_keep_cb(uv_poll_t *p, int status, int events)
{
  struct agt_warm_end *e = p->data;

  (void)events;
  if (status < 0 || heard_out(e->keep_fd))
    end_let_go(e);
}

static void end_silent_cb(uv_timer_t *t)
{
  struct agt_warm_end *e = t->data;

  agt_log_warning("prepared jail %s: its keeper did not say the exit in %d ms; let go", e->name,
                  END_WAIT_MS);
  end_let_go(e);
}

/* Waited for, a step at a time, each up to END_WAIT_MS (agtd's start and end). */
static void end_now(struct agtd_s *d, int keep_fd, int keeper_pidfd, const char *name,
                    const char *dir)
{
  struct pollfd p = {.fd = keep_fd, .events = POLLIN};

  while (poll(&p, 1, END_WAIT_MS) > 0 && !heard_out(keep_fd))
    ;
  close(keep_fd);
  if (keeper_pidfd >= 0) {
    struct pollfd q = {.fd = keeper_pidfd, .events = POLLIN};
    if (poll(&q, 1, END_WAIT_MS) > 0)
      reaped(keeper_pidfd);
  }
  destroy_cgroup(d, name);
  if (dir)
    agt_disk_jail_remove(d->disk, dir, NULL);
}

/* Kill the init whose pidfd this is; the rest as the comment above says.  Takes keep_fd,
 * keeper_pidfd (-1: not agtd's child) and a copy of name and dir (NULL: not to remove). */
static void end_keeper(struct agtd_s *d, int pidfd, int keep_fd, int keeper_pidfd, const char *name,
                       const char *dir)
{
  struct agt_warm_end *e;

  syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
  if (d->shutting_down || !d->warm->serving) {
    end_now(d, keep_fd, keeper_pidfd, name, dir);
    if (keeper_pidfd >= 0)
      close(keeper_pidfd);
    return;
  }
  e = xzalloc(sizeof *e);
  e->d = d;
  e->keep_fd = keep_fd;
  e->keeper_pidfd = keeper_pidfd;
  e->name = xstrdup(name);
  e->dir = dir ? xstrdup(dir) : NULL;
  uv_timer_init(d->loop, &e->timer);
  e->timer.data = e;
  e->handles++;
  uv_poll_init(d->loop, &e->keep_poll, keep_fd);
  e->keep_poll.data = e;
  e->handles++;
  if (keeper_pidfd >= 0) {
    uv_poll_init(d->loop, &e->pid_poll, keeper_pidfd);
    e->pid_poll.data = e;
    e->handles++;
  }
  e->next = d->warm->ending;
  d->warm->ending = e;
  uv_poll_start(&e->keep_poll, UV_READABLE, end_keep_cb);
  uv_timer_start(&e->timer, end_silent_cb, END_WAIT_MS, 0);
}

/* agtd ends: what is still ending is waited for (its handles are closed already). */
static void end_all_now(struct agtd_s *d)
{
  struct agt_warm_end **p = &d->warm->ending;

  while (*p) {
    struct agt_warm_end *e = *p;
    if (!uv_is_closing((uv_handle_t *)&e->timer)) {
      p = &e->next; /* the loop still has it (a drain before agtd_release): later */
      continue;
    }
    *p = e->next;
    if (e->let_go) {
      /* only the reaping and the rest are left */
      struct pollfd q = {.fd = e->keeper_pidfd, .events = POLLIN};
      if (e->keeper_pidfd >= 0 && poll(&q, 1, END_WAIT_MS) > 0)
        reaped(e->keeper_pidfd);
      destroy_cgroup(d, e->name);
      if (e->dir)
        agt_disk_jail_remove(d->disk, e->dir, NULL);
      close(e->keep_fd);
    } else {
      end_now(d, e->keep_fd, e->keeper_pidfd, e->name, e->dir);
    }
    e->keep_fd = -1;
    end_free(e);
  }
}

void agt_warm_discard(struct agtd_s *d, struct agt_warm_s *w, int dir_taken)
{
  if (w->pidfd >= 0 && w->keep_fd >= 0) {
    end_keeper(d, w->pidfd, w->keep_fd, w->keeper_pidfd, w->name, dir_taken ? NULL : w->dir);
    w->keep_fd = w->keeper_pidfd = -1;
  } else {
    destroy_cgroup(d, w->name);
    if (!dir_taken && w->dir)
      agt_disk_jail_remove(d->disk, w->dir, NULL);
  }
  warm_free(w);
}

/* Take out of the pool, and discard, the prepared jails `gone` says so of. */
static void discard_if(struct agtd_s *d, int (*gone)(struct agt_warm_s *w, const char *rootfs_id),
                       const char *rootfs_id)
{
  struct agt_warm_s **p = &d->warm->list;

  while (*p) {
    struct agt_warm_s *w = *p;
    if (!gone(w, rootfs_id)) {
      p = &w->next;
      continue;
    }
    *p = w->next;
    d->warm->n--;
    agt_warm_discard(d, w, 0);
  }
}

static int on_rootfs(struct agt_warm_s *w, const char *rootfs_id)
{
  return rootfs_id == NULL || strcmp(w->rootfs_id, rootfs_id) == 0;
}

/* Died: killed, or its setup failed. */
static int dead(struct agt_warm_s *w, const char *unused)
{
  struct pollfd pfd = {.fd = w->pidfd, .events = POLLIN};

  (void)unused;
  return poll(&pfd, 1, 0) != 0;
}

void agt_warm_drain(struct agtd_s *d, const char *rootfs_id)
{
  if (d->shutting_down)
    end_all_now(d);
  if (rootfs_id && d->warm->rootfs_id && strcmp(rootfs_id, d->warm->rootfs_id) == 0) {
    /* that rootfs goes away: none are made of it any more */
    free(d->warm->rootfs_id);
    free(d->warm->rootfs_path);
    d->warm->rootfs_id = d->warm->rootfs_path = NULL;
  }
  discard_if(d, on_rootfs, rootfs_id);
}

/* The pool makes new ones for the prepared jails that died. */
static void sweep_dead(struct agtd_s *d)
{
  discard_if(d, dead, NULL);
}

static int pipe_pair(int fds[2], agt_error_t *err)
{
  if (pipe2(fds, O_CLOEXEC) < 0)
    return agt_error_make(err, errno, "pipe");
  return 0;
}

/* Build one prepared jail on the pool's rootfs. */
static int fill_one(struct agtd_s *d, agt_error_t *err)
{
  struct agt_warm_s *w = xzalloc(sizeof *w);
  struct agt_spawn_plan plan;
  int status[2] = {-1, -1}, out[2] = {-1, -1};
  int ctl[2] = {-1, -1}, console[2] = {-1, -1};
  int netns = -1, cgroup_fd, attached = 0, cgroup_made = 0, dir_fd = -1, r;
  struct agt_keep_spawn ks;
  cleanup_free char *merged = NULL;
  cleanup_free char *passwd = NULL;
  cleanup_free char *group = NULL;
  unsigned char rnd[8];
  pid_t pid;

  w->pidfd = w->ctl_fd = w->status_fd = w->keep_fd = w->keeper_pidfd = -1;
  w->netns_fd = -1;
  if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
    agt_error_make(err, errno, "getrandom");
    goto fail_nodir;
  }
  w->name = xasprintf("w-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                      rnd[5], rnd[6], rnd[7]);
  w->dir = xasprintf("%s/.%s", d->jails_dir, w->name);
  w->rootfs_id = xstrdup(d->warm->rootfs_id);
  w->tmp_bytes = AGT_JAIL_DEFAULT_TMP;
  merged = xasprintf("%s/root", w->dir);
  if (mkdir(w->dir, 0700) < 0) {
    agt_error_make(err, errno, "mkdir '%s'", w->dir);
    goto fail_nodir;
  }
  if (agt_disk_jail_create(d->disk, w->dir, 0, err) < 0)
    goto fail;
  if (mkdir(merged, 0755) < 0) {
    agt_error_make(err, errno, "mkdir '%s'", merged);
    goto fail;
  }
  w->limits.memory_bytes = AGT_JAIL_DEFAULT_MEMORY;
  w->limits.pids = AGT_JAIL_DEFAULT_PIDS;
  w->limits.cpu_millis = AGT_JAIL_DEFAULT_CPU;
  if (agt_cgroup_create(d->cgroup, w->name, &w->limits, err) < 0)
    goto fail;
  cgroup_made = 1;
  /* Without its budget (the parent's is spent) this one starts at normal priority. */
  if (d->prio->budgets)
    agt_cgroup_rt_budget(d->cgroup, w->name, AGT_RT_BUDGET_US, NULL);
  /* one pipe for stdout and stderr: the log has them in the order written (jail_spawn.c) */
  if (pipe_pair(status, err) < 0 || pipe_pair(out, err) < 0)
    goto fail;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, console) < 0) {
    agt_error_make(err, errno, "socketpair");
    goto fail;
  }
  {
    int sz = (int)(AGT_CLAIM_MAX + 4096);
    setsockopt(ctl[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
    setsockopt(ctl[1], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
  }

  memset(&plan, 0, sizeof plan);
  plan.landlock_fd = -1;
  plan.init_fd = d->init_fd;
  plan.warm = 1;
  plan.realtime = d->prio->enabled;
  agt_jail_overlay_opts(d, NULL, d->warm->rootfs_path, w->dir, plan.overlay_opts,
                        sizeof plan.overlay_opts);
  plan.jail_dir = w->dir;
  plan.merged = merged;
  snprintf(plan.tmpfs_opts, sizeof plan.tmpfs_opts, "mode=0700,size=%llu",
           (unsigned long long)agt_jail_tmpfs_bytes(w->tmp_bytes, 0));
  plan.cap_last = agt_cap_last();
  plan.seccomp = &d->seccomp_tail->prog;
  plan.seccomp_ahead = &d->seccomp_ahead->prog;
  if (d->warm->uid) {
    w->uid = plan.uid = d->warm->uid;
    w->gid = plan.gid = d->warm->gid;
    plan.passwd = passwd = agt_identity_passwd(w->uid, w->gid);
    plan.group = group = agt_identity_group(w->gid);
  }
  netns = agt_netns_pool_take(d->netns);
  plan.fds[0] = ctl[1];
  plan.fds[1] = status[1];
  plan.fds[2] = out[1];
  plan.fds[3] = -1; /* stderr: into out */
  plan.fds[4] = netns;
  plan.fds[5] = console[1];

  dir_fd = open(w->dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir_fd < 0) {
    agt_error_make(err, errno, "open '%s'", w->dir);
    goto fail;
  }
  cgroup_fd = agt_cgroup_open(d->cgroup, w->name);
  /* Under a keeper from the start: a jail that claims it must outlive agtd. */
  memset(&ks, 0, sizeof ks);
  ks.plan = &plan;
  ks.name = w->name;
  ks.new_netns = netns < 0;
  ks.cgroup_fd = cgroup_fd;
  ks.attach_cgroup = w->name;
  ks.out_rd = out[0];
  ks.err_rd = -1;
  ks.console_rd = console[0];
  ks.dir_fd = dir_fd;
  r = agt_keep_spawn(d, &ks, err);
  if (cgroup_fd >= 0)
    close(cgroup_fd);
  close(dir_fd);
  if (r < 0) {
    agt_error_wrap(err, "a prepared jail");
    goto fail;
  }
  pid = ks.pid;
  attached = ks.attached;
  w->pid = pid;
  w->pidfd = ks.pidfd;
  w->keep_fd = ks.keep_fd;
  w->keeper_pidfd = ks.keeper_pidfd;
  close(ctl[1]);
  close(status[1]);
  close(out[1]);
  close(console[1]);
  close(out[0]);
  close(console[0]);
  if (ks.attach_err) {
    *err = ks.attach_err;
    w->ctl_fd = ctl[0];
    w->status_fd = status[0];
    w->netns_fd = netns;
    agt_warm_discard(d, w, 0);
    return -1;
  }
  /* Its network namespace, kept for the proxy of a jail in network mode allow. */
  if (netns < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    netns = open(path, O_RDONLY | O_CLOEXEC);
  }
  w->netns_fd = netns;
  netns = -1;
  w->ctl_fd = ctl[0];
  w->status_fd = status[0];
  if (!attached && agt_cgroup_attach(d->cgroup, w->name, pid, err) < 0) {
    agt_warm_discard(d, w, 0);
    return -1;
  }
  w->next = d->warm->list;
  d->warm->list = w;
  d->warm->n++;
  return 0;

fail:
  agt_disk_jail_remove(d->disk, w->dir, NULL);
fail_nodir:
  if (cgroup_made)
    destroy_cgroup(d, w->name);
  {
    int *all[] = {status, out, ctl, console};
    for (size_t i = 0; i < 4; i++)
      for (int k = 0; k < 2; k++)
        if (all[i][k] >= 0)
          close(all[i][k]);
  }
  if (netns >= 0)
    close(netns);
  warm_free(w);
  return -1;
}

static void fill_cb(uv_timer_t *t)
{
  struct agtd_s *d = t->data;
  agt_error_t err = NULL;

  if (d->shutting_down || !d->warm->enabled || !d->warm->rootfs_id)
    return;
  sweep_dead(d);
  if (d->warm->n >= d->warm->target)
    return;
  if (agt_starts_in_flight(d)) {
    /* the start's end calls agt_warm_refill; this is the fallback */
    uv_timer_start(&d->warm->timer, fill_cb, REFILL_LATER_MS, 0);
    return;
  }
  if (fill_one(d, &err) < 0) {
    /* Say it once; keep trying now and then (the disk may be full, the netns pool dry). */
    if (d->warm->failures++ == 0)
      agt_log_warning("prepared jails: %s", err->msg);
    agt_error_release(&err);
    uv_timer_start(&d->warm->timer, fill_cb, 1000, 0);
    return;
  }
  d->warm->failures = 0;
  if (d->warm->n < d->warm->target)
    uv_timer_start(&d->warm->timer, fill_cb, FILL_INTERVAL_MS, 0);
}

static void schedule_fill(struct agtd_s *d, uint64_t delay_ms)
{
  if (d->warm->enabled && !d->shutting_down && !uv_is_active((uv_handle_t *)&d->warm->timer))
    uv_timer_start(&d->warm->timer, fill_cb, delay_ms, 0);
}

void agt_warm_refill(struct agtd_s *d)
{
  if (d->warm->n < d->warm->target) {
    uv_timer_stop(&d->warm->timer);
    schedule_fill(d, FILL_INTERVAL_MS);
  }
}

/* What an agtd that died left: prepared jails' directories (.w-*) and their cgroups. */
static void remove_leftovers(struct agtd_s *d)
{
  cleanup_dir DIR *dir = opendir(d->jails_dir);
  struct dirent *de;

  while (dir && (de = readdir(dir)) != NULL) {
    if (strncmp(de->d_name, ".w-", 3) != 0)
      continue;
    cleanup_free char *path = xasprintf("%s/%s", d->jails_dir, de->d_name);
    struct agt_keep_hdr h;
    int fds[2] = {-1, -1};
    int fd = agt_keep_connect(path, &h, fds, NULL);
    /* Its keeper, if still there (its init ends when the claim socket of the agtd that made
     * it closes): killed and waited for, so that it writes nothing more in the directory. */
    if (fd >= 0) {
      if (fds[1] >= 0)
        close(fds[1]);
      end_keeper(d, fds[0], fd, -1, de->d_name + 1, path);
      close(fds[0]);
      continue;
    }
    destroy_cgroup(d, de->d_name + 1);
    agt_disk_jail_remove(d->disk, path, NULL);
  }
}

void agt_warm_init(struct agtd_s *d, unsigned target, int cheap_moves)
{
  memset(d->warm, 0, sizeof *d->warm);
  d->warm->target = target;
  d->warm->enabled = target > 0 && cheap_moves;
  uv_timer_init(d->loop, &d->warm->timer);
  d->warm->timer.data = d;
  remove_leftovers(d);
  d->warm->serving = 1;
  if (target > 0 && !cheap_moves)
    agt_log_info("prepared jails: off (moving a process between cgroups waits for RCU here)");
}

void agt_warm_note_run(struct agtd_s *d, const char *rootfs_id, const char *rootfs_path, uid_t uid,
                       gid_t gid)
{
  if (!d->warm->enabled)
    return;
  d->warm->uid = uid;
  d->warm->gid = gid;
  if (d->warm->rootfs_id == NULL || strcmp(d->warm->rootfs_id, rootfs_id) != 0) {
    agt_warm_drain(d, NULL);
    free(d->warm->rootfs_id);
    free(d->warm->rootfs_path);
    d->warm->rootfs_id = xstrdup(rootfs_id);
    d->warm->rootfs_path = xstrdup(rootfs_path);
  }
  schedule_fill(d, FILL_INTERVAL_MS);
}

/* The claim's strings, in the order of struct agt_claim's comment. */
static size_t claim_strings(struct agt_jail_s *j, const char **s, size_t max, char *tmp_opts,
                            size_t tmp_size, uint64_t warm_tmp, char *passwd, char *group)
{
  size_t n = 0;

  if (j->rec.limits.tmp_bytes != warm_tmp)
    snprintf(tmp_opts, tmp_size, "size=%llu",
             (unsigned long long)agt_jail_tmpfs_bytes(j->rec.limits.tmp_bytes, 0));
  else
    tmp_opts[0] = '\0';
  s[n++] = j->rec.name;
  s[n++] = agt_env_path(j->rec.env);
  s[n++] = "/work";
  s[n++] = passwd;
  s[n++] = group;
  s[n++] = tmp_opts;
  for (char **a = j->rec.argv; *a && n < max; a++)
    s[n++] = *a;
  for (char **e = j->rec.env; e && *e && n < max; e++)
    s[n++] = *e;
  return n;
}

static size_t strv_len(char **v)
{
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

/* Whether the prepared jail has said it is ready (and alive). */
static int warm_ready(struct agt_warm_s *w)
{
  char b;

  if (!w->ready && recv(w->ctl_fd, &b, 1, MSG_DONTWAIT) == 1 && b == 'r')
    w->ready = 1;
  return w->ready;
}

unsigned agt_warm_ready(struct agtd_s *d)
{
  unsigned n = 0;

  for (struct agt_warm_s *w = d->warm->list; w; w = w->next)
    n += (unsigned)warm_ready(w);
  return n;
}

struct agt_warm_s *agt_warm_take(struct agtd_s *d, struct agt_jail_s *j)
{
  struct agt_warm_s **p = &d->warm->list;
  size_t bytes = 4096; /* hostname, PATH, cwd, passwd, group, /tmp options */

  /* mounts or an ephemeral home: a cold start makes them (the claim carries the workspace
   * and a persistent home only) */
  if (!d->warm->enabled || j->rec.net.mode == AGT_NET_OPEN ||
      j->rec.binds.home_mode == AGT_HOME_EPHEMERAL || j->rec.binds.nmounts > 0)
    return NULL;
  for (char **a = j->rec.argv; a && *a; a++)
    bytes += strlen(*a) + 1;
  for (char **e = j->rec.env; e && *e; e++)
    bytes += strlen(*e) + 1;
  if (bytes > AGT_CLAIM_MAX)
    return NULL;
  sweep_dead(d);
  while (*p) {
    struct agt_warm_s *w = *p;

    if (strcmp(w->rootfs_id, j->rec.rootfs_id) != 0 || !warm_ready(w)) {
      p = &w->next;
      continue;
    }
    *p = w->next;
    d->warm->n--;
    w->next = NULL;
    schedule_fill(d, REFILL_LATER_MS);
    return w;
  }
  schedule_fill(d, REFILL_LATER_MS);
  return NULL;
}

static int send_claim(struct agt_jail_s *j, struct agt_warm_s *w, int mount_fd, int home_fd,
                      agt_error_t *err)
{
  int fds[2] = {mount_fd, home_fd};
  size_t nfds = home_fd >= 0 ? 2 : 1;
  cleanup_free char *passwd = NULL;
  cleanup_free char *group = NULL;
  cleanup_free const char **s = NULL;
  cleanup_free struct iovec *iov = NULL;
  size_t max = 6 + strv_len(j->rec.argv) + strv_len(j->rec.env), n, total = 0;
  char tmp_opts[64];
  struct agt_claim c;
  union {
    char b[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr mh;
  struct cmsghdr *cm;

  if (j->rec.uid == w->uid && j->rec.gid == w->gid) {
    passwd = xstrdup(""); /* made for this user already */
    group = xstrdup("");
  } else {
    agt_jail_identity(j, &passwd, &group);
  }
  s = xzalloc(max * sizeof *s);
  n = claim_strings(j, s, max, tmp_opts, sizeof tmp_opts, w->tmp_bytes, passwd, group);
  iov = xzalloc((n + 1) * sizeof *iov);
  for (size_t i = 0; i < n; i++) {
    iov[i + 1].iov_base = (void *)s[i];
    iov[i + 1].iov_len = strlen(s[i]) + 1;
    total += iov[i + 1].iov_len;
  }
  memset(&c, 0, sizeof c);
  c.uid = j->rec.uid;
  c.gid = j->rec.gid;
  c.nofile = j->rec.limits.nofile;
  c.rows = j->out.rows;
  c.cols = j->out.cols;
  c.tty = (uint32_t)j->rec.tty;
  c.argc = (uint32_t)strv_len(j->rec.argv);
  c.envc = (uint32_t)strv_len(j->rec.env);
  c.len = (uint32_t)total;
  c.home = home_fd >= 0;
  iov[0].iov_base = &c;
  iov[0].iov_len = sizeof c;

  memset(&u, 0, sizeof u);
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = n + 1;
  mh.msg_control = u.b;
  mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
  cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
  if (sendmsg(w->ctl_fd, &mh, MSG_NOSIGNAL) < 0)
    return agt_error_make(err, errno, "send the claim to prepared jail %s", w->name);
  return 0;
}

/* A directory's mount tree, detached: opened as a cold start's child opens it (no symlink
 * anywhere in the path), cloned with its submounts as a recursive bind would, nosuid and
 * nodev when asked.  The claim moves it into place: the workspace onto /work, a persistent
 * home (nosuid, nodev) onto /home/agent.  `what` names it in errors. */
static int detached_mount(const char *what, const char *path, int nosuid_nodev, agt_error_t *err)
{
  struct open_how how = {
      .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
      .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
  cleanup_close int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  int mfd;

  if (fd < 0)
    return agt_error_make(err, errno, "open %s %s", what, path);
  mfd = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (mfd < 0)
    return agt_error_make(err, errno, "clone the mount of %s %s", what, path);
  if (nosuid_nodev &&
      mount_setattr(mfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0) {
    agt_error_make(err, errno, "make %s %s nosuid,nodev", what, path);
    close(mfd);
    return -1;
  }
  return mfd;
}

/* The start on a prepared jail is answered: make the ones missing now. */
static void started(struct agt_jail_s *j)
{
  agt_warm_refill(j->d);
}

/* A prepared jail that j took and cannot use: its directory goes back to its own name and
 * with it (its keeper may write there until it ends), and j's is made again if j starts cold. */
static void give_back_dir(struct agt_jail_s *j, struct agt_warm_s *w)
{
  if (rename(j->rec.dir, w->dir) == 0) {
    agt_warm_discard(j->d, w, 0);
    return;
  }
  agt_log_warning("jail '%s': rename '%s' back: %s", j->rec.name, j->rec.dir, strerror(errno));
  agt_warm_discard(j->d, w, 1);
}

int agt_warm_start(struct agt_jail_s *j, agt_error_t *err)
{
  struct agtd_s *d = j->d;
  struct agt_warm_s *w = j->run.warm;
  int mfd, hfd = -1, r;

  j->run.warm = NULL;
  if (dead(w, NULL)) {
    give_back_dir(j, w);
    return 1;
  }
  if (agt_cgroup_adopt(d->cgroup, w->name, j->rec.name, w->pid, &j->rec.limits.cg, &w->limits,
                       err) < 0 ||
      agt_disk_jail_limit(d->disk, j->rec.dir, j->rec.limits.disk_bytes, err) < 0)
    goto fail;
  mfd = detached_mount("workspace", j->rec.workspace, 0, err);
  if (mfd < 0)
    goto fail;
  if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT &&
      (hfd = detached_mount("home", j->rec.binds.home_path, 1, err)) < 0) {
    close(mfd);
    goto fail;
  }
  /* The proxy listens before the agent can run, as in a cold start. */
  if (j->rec.net.mode == AGT_NET_ALLOW && agt_jail_start_egress(j, w->netns_fd, w->pid, err) < 0) {
    close(mfd);
    if (hfd >= 0)
      close(hfd);
    goto fail;
  }
  agt_keep_send_budget(w->keep_fd, j->rec.limits.log_bytes);
  r = send_claim(j, w, mfd, hfd, err);
  close(mfd);
  if (hfd >= 0)
    close(hfd);
  if (r < 0)
    goto fail;
  /* The claim socket stays open until the start is answered: the init waits for its close
   * before it becomes agt-init (jail_setup.h). */
  agt_jail_release_init(j);
  j->run.answer_fd = w->ctl_fd;
  w->ctl_fd = -1;
  /* The keeper reads the agent's output from the pty (its master arrives on the console
   * socket) or from the pipes, whichever the claim made the jail use. */
  r = agt_jail_begin_run(j, w->pid, w->pidfd, w->keep_fd, w->keeper_pidfd, w->status_fd, err);
  j->run.started_warm = 1;
  j->run.on_started = started;
  agt_jail_save(j, NULL); /* the record, "starting", while the jail applies its claim */
  w->pidfd = w->status_fd = w->keep_fd = w->keeper_pidfd = -1; /* the jail's now */
  warm_free(w);
  return r < 0 || *err ? -1 : 0;

fail:
  agt_error_wrap(err, "start jail '%s'", j->rec.name);
  agt_jail_stop_egress(j);
  give_back_dir(j, w);
  agt_cgroup_destroy(d->cgroup, j->rec.name, NULL);
  return -1;
}

/* A prepared jail on j's rootfs becomes j: its directory is renamed here (the jail user's
 * files come with the claim). */
static struct agt_warm_s *take_for_run(agt_jail_t *j)
{
  struct agt_warm_s *w;

  agt_warm_note_run(j->d, j->rec.rootfs_id, j->rec.rootfs_path, j->rec.uid, j->rec.gid);
  w = agt_warm_take(j->d, j);
  if (w && rename(w->dir, j->rec.dir) < 0) {
    agt_warm_discard(j->d, w, 0);
    w = NULL;
  }
  return w;
}

static void give_back(agt_jail_t *j)
{
  agt_warm_discard(j->d, j->run.warm, 1);
}

const struct agt_jail_prepared agt_warm_for_run = {
    .take = take_for_run,
    .give_back = give_back,
};
