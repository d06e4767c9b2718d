/* Realtime scheduling for the path of a start, so that jails busy with the CPU do not
 * stretch other jails' starts (docs/SECURITY.md, E15).  While a jail.run is in flight,
 * agtd's loop thread runs SCHED_FIFO.  A prepared jail runs SCHED_FIFO from its ready byte
 * to its agent's exec (jail_setup.c), the agent's exec one priority lower and with
 * SCHED_RESET_ON_FORK.  The jail's init, on the CPU the agent was born on, waits for the
 * exec's close-on-exec on a pipe and takes the agent back to SCHED_OTHER before its first
 * instruction, then itself; once agtd sees the exec (the status pipe's end) it sets every
 * process of the jail to SCHED_OTHER again.  No code of the jail's runs realtime, whatever
 * it forks is SCHED_OTHER, and RLIMIT_RTPRIO 0 keeps every jail from going realtime itself.
 * On cgroup v1 with RT group scheduling a prepared jail's cgroup gets a realtime budget for
 * its start, taken back after the exec.  Whatever is missing (permission, budget), the start
 * runs at normal priority.  All of this only with `agtd serve --realtime-starts` (the Lima
 * guest's service passes it); by default agtd leaves scheduling alone: a machine-wide change
 * (agtd's loop, proxy relaying included, outranks everything else while a start is in flight)
 * that no one should get from a daemon on their own machine without asking. */
#ifndef AGT_START_PRIO_H
#define AGT_START_PRIO_H

#include <uv.h>

#include "jail_setup.h" /* the priorities, AGT_PRIO_* */

struct agtd_s;

/* A prepared jail's cgroup (cgroup v1 with RT group scheduling): realtime µs a second. */
#define AGT_RT_BUDGET_US 20000

struct agt_start_prio {
  int enabled;      /* agtd could run SCHED_FIFO at its start */
  int budgets;      /* cgroup v1 RT group scheduling: prepared jails' cgroups need a budget */
  int boosted;      /* agtd's loop runs SCHED_FIFO now */
  uv_timer_t timer; /* takes the boost back should a start hang */
};

/* Find out whether starts can run realtime; !on: never.  warm: the prepared jails kept (0:
 * none), whose cgroups may need realtime budgets. */
void agt_start_prio_init(struct agtd_s *d, int on, unsigned warm);
/* Back to normal priority (the timer is closed with the loop's other handles). */
void agt_start_prio_release(struct agtd_s *d);
/* A start begins: agtd's loop runs SCHED_FIFO. */
void agt_start_prio_boost(struct agtd_s *d);
/* A start ended: agtd's loop goes back to SCHED_OTHER when no other is in flight. */
void agt_start_prio_settle(struct agtd_s *d);
/* A prepared jail's agent has exec'd: its init and agent back to SCHED_OTHER, its cgroup's
 * realtime budget given back. */
struct agt_jail_s;
void agt_start_prio_exec(struct agtd_s *d, struct agt_jail_s *j);
/* A start is waiting for its agent's exec (one stuck for a second does not count). */
int agt_starts_in_flight(struct agtd_s *d);

#endif
