#include "start_prio.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "jail.h"
#include "log.h"
#include "xalloc.h"

#define HUNG_START_NS 1000000000ull

/* agtd's loop thread; what it forks or clones meanwhile (a cold start's child, jail.exec's)
 * starts SCHED_OTHER. */
static int set_fifo(int prio)
{
  struct sched_param sp = {.sched_priority = prio};

  return sched_setscheduler(0, (prio ? SCHED_FIFO : SCHED_OTHER) | SCHED_RESET_ON_FORK, &sp);
}

int agt_starts_in_flight(struct agtd_s *d)
{
  uint64_t now = agt_now_ns();

  for (struct agt_jail_s *j = d->jails; j; j = j->next)
    if (j->rec.state == AGT_JAIL_STARTING && j->run.start_request_ns &&
        now - j->run.start_request_ns < HUNG_START_NS)
      return 1;
  return 0;
}

static void hung_cb(uv_timer_t *t)
{
  agt_start_prio_settle(t->data);
}

void agt_start_prio_init(struct agtd_s *d, int on, unsigned warm)
{
  struct agt_start_prio *p = d->prio;

  memset(p, 0, sizeof *p);
  uv_timer_init(d->loop, &p->timer);
  p->timer.data = d;
  if (!on) {
    agt_log_info("starts: normal priority (no --realtime-starts)");
    return;
  }
  if (set_fifo(AGT_PRIO_AGTD) < 0) {
    agt_log_warning("starts: normal priority (SCHED_FIFO: %s)", strerror(errno));
    return;
  }
  set_fifo(0);
  p->enabled = 1;
  /* cgroup v1 with RT group scheduling: realtime tasks in a cgroup need a budget there and
   * in every cgroup above it; the prepared jails' budgets come out of agtd's parent's. */
  if (warm) {
    agt_error_t err = NULL;
    uint64_t want = (uint64_t)(warm + 4) * AGT_RT_BUDGET_US;
    int r = agt_cgroup_rt_budget(d->cgroup, NULL, want < 500000 ? want : 500000, &err);

    if (r < 0) {
      agt_log_warning("starts: prepared jails at normal priority (%s)", err->msg);
      agt_error_release(&err);
    }
    p->budgets = r > 0;
  }
  agt_log_info("starts: realtime (SCHED_FIFO while a start is in flight)");
}

void agt_start_prio_release(struct agtd_s *d)
{
  if (d->prio->boosted)
    set_fifo(0);
  d->prio->boosted = 0;
}

void agt_start_prio_boost(struct agtd_s *d)
{
  struct agt_start_prio *p = d->prio;

  if (!p->enabled || p->boosted)
    return;
  if (set_fifo(AGT_PRIO_AGTD) == 0) {
    p->boosted = 1;
    uv_timer_start(&p->timer, hung_cb, HUNG_START_NS / 1000000 + 100, HUNG_START_NS / 1000000);
  }
}

void agt_start_prio_settle(struct agtd_s *d)
{
  struct agt_start_prio *p = d->prio;

  if (!p->boosted || agt_starts_in_flight(d))
    return;
  set_fifo(0);
  p->boosted = 0;
  uv_timer_stop(&p->timer);
}

void agt_start_prio_exec(struct agtd_s *d, struct agt_jail_s *j)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *procs = NULL;
  cleanup_file FILE *f = NULL;
  struct sched_param sp = {.sched_priority = 0};
  int pid;

  if (!j->run.started_warm || !d->prio->enabled)
    return;
  /* The init and its agent, whatever the agent forked since being SCHED_OTHER already. */
  dir = agt_cgroup_path(d->cgroup, j->rec.name);
  procs = xasprintf("%s/cgroup.procs", dir);
  f = fopen(procs, "re");
  while (f && fscanf(f, "%d", &pid) == 1)
    if (pid > 0)
      sched_setscheduler(pid, SCHED_OTHER, &sp);
  if (d->prio->budgets)
    agt_cgroup_rt_budget(d->cgroup, j->rec.name, 0, NULL);
}
