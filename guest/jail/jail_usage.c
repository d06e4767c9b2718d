#include "jail_usage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "clock.h"
#include "daemon.h"
#include "jail.h"
#include "xalloc.h"

static int stale(const agt_jail_t *j, uint64_t now)
{
  return j->run.usage_ns == 0 || now - j->run.usage_ns > AGT_JAIL_USAGE_MAX_AGE_MS * 1000000ull;
}

/* In a worker thread: only the entries' names and agtd's cgroup root (neither changes while
 * agtd runs) are read; the jails are the loop's.  A read that no listing waits for runs at
 * nice 19 (the thread's own, put back after): on a busy machine it takes the CPU of no one,
 * not that of the listing that asked for it. */
static void read_work(uv_work_t *w)
{
  struct agt_usage *u = w->data;
  pid_t tid = (pid_t)syscall(SYS_gettid);

  if (u->background) {
    errno = 0;
    u->nice0 = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno != 0)
      u->nice0 = 0;
    __atomic_store_n(&u->tid, tid, __ATOMIC_RELEASE);
    setpriority(PRIO_PROCESS, (id_t)tid, 19);
  }
  for (size_t i = 0; i < u->n; i++) {
    struct agt_usage_entry *e = &u->e[i];
    e->read_ns = agt_now_ns();
    e->ok = agt_cgroup_stats(u->d->cgroup, e->name, &e->s) == 0;
  }
  if (u->background) {
    __atomic_store_n(&u->tid, 0, __ATOMIC_RELEASE);
    setpriority(PRIO_PROCESS, (id_t)tid, u->nice0);
  }
}

/* A listing waits for the read after this one: this one goes at the worker's own nice. */
static void hurry(struct agt_usage *u)
{
  pid_t tid = __atomic_load_n(&u->tid, __ATOMIC_ACQUIRE);

  if (tid > 0)
    setpriority(PRIO_PROCESS, (id_t)tid, u->nice0);
}

static void read_done(uv_work_t *w, int status);

/* Read the running jails with no figures, and with stale_too those whose figures are old,
 * in the threadpool.  0 when there is no such jail (nothing started). */
static int start_read(struct agt_usage *u, int stale_too)
{
  uint64_t now = agt_now_ns();

  u->n = 0;
  for (agt_jail_t *j = u->d->jails; j; j = j->next) {
    if (!agt_jail_runs_now(j) || !(j->run.usage_ns == 0 || (stale_too && stale(j, now))))
      continue;
    if (u->n == u->cap) {
      u->cap = u->cap ? 2 * u->cap : 64;
      u->e = xrealloc(u->e, u->cap * sizeof *u->e);
    }
    u->e[u->n++] = (struct agt_usage_entry){.j = j, .name = j->rec.name, .runs = j->rec.runs};
    j->run.usage_reading = 1; /* not freed before read_done (agt_jail_maybe_free) */
  }
  if (stale_too)
    u->want_stale = 0;
  if (u->n == 0)
    return 0;
  u->busy = 1;
  u->background = u->waiters == NULL;
  u->started++;
  u->work.data = u;
  uv_queue_work(u->d->loop, &u->work, read_work, read_done);
  return 1;
}

/* Call ready for the waiters whose read has finished (all: every waiter). */
static void wake(struct agt_usage *u, int all)
{
  struct agt_usage_wait **p = &u->waiters, *w;

  while ((w = *p) != NULL) {
    if (all || w->need <= u->finished) {
      *p = w->next;
      w->ready(w);
    } else {
      p = &w->next;
    }
  }
}

static void read_done(uv_work_t *w, int status)
{
  struct agt_usage *u = w->data;

  (void)status;
  u->busy = 0;
  u->finished = u->started;
  for (size_t i = 0; i < u->n; i++) {
    struct agt_usage_entry *e = &u->e[i];
    agt_jail_t *j = e->j;
    j->run.usage_reading = 0;
    if (j->run.removing) {
      agt_jail_maybe_free(j);
      continue;
    }
    /* the same run, and newer than what a jail.inspect may have read meanwhile */
    if (agt_jail_runs_now(j) && j->rec.runs == e->runs && e->read_ns > j->run.usage_ns) {
      j->run.usage = e->s;
      j->run.usage_ns = e->read_ns;
      j->run.usage_failed = !e->ok;
    }
  }
  u->n = 0;
  wake(u, 0);
  if (u->d->shutting_down) {
    wake(u, 1);
    return;
  }
  /* Listings that came while this read ran wait for one of their own: the jails still
   * without figures (those started since).  None: they are answered now. */
  if (u->waiters && !start_read(u, 0))
    wake(u, 1);
  if (!u->busy && u->want_stale)
    start_read(u, 1);
}

void agt_usage_init(struct agt_usage *u, struct agtd_s *d)
{
  memset(u, 0, sizeof *u);
  u->d = d;
}

int agt_usage_for_listing(struct agt_usage *u, struct agt_usage_wait *w)
{
  uint64_t now = agt_now_ns();
  int missing = 0, old = 0;

  for (agt_jail_t *j = u->d->jails; j && !missing; j = j->next)
    if (agt_jail_runs_now(j)) {
      missing = j->run.usage_ns == 0;
      old = old || stale(j, now);
    }
  if (missing) {
    w->need = u->started + 1; /* a read that starts from now on */
    w->next = u->waiters;
    u->waiters = w;
    u->want_stale = 1; /* the others' too, once the missing ones are read */
    if (!u->busy)
      start_read(u, 0); /* not empty: this jail has none */
    else if (u->background)
      hurry(u);
    return 1;
  }
  if (old) {
    u->want_stale = 1;
    if (!u->busy)
      start_read(u, 1);
  }
  return 0;
}

void agt_usage_release(struct agt_usage *u)
{
  wake(u, 1);
  free(u->e);
  u->e = NULL;
  u->n = u->cap = 0;
}
