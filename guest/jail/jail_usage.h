/* The running jails' cgroup figures for listings (jail.ls), read in libuv's threadpool so
 * that agtd's loop never waits for them.  Among 1000 jails a read of every cgroup costs tens
 * of milliseconds (on cgroup v1 with cpuacct on a hierarchy of its own, a /proc/PID/stat per
 * process: docs/BENCH.md 8), which a listing used to spend on the loop, every other client
 * waiting meanwhile.
 *
 * A listing answers from the figures last read, with their age (usage.age_ms), and when some
 * are older than AGT_JAIL_USAGE_MAX_AGE_MS it starts a read of those in the background:
 * stale-while-revalidate, so the next listing has them fresh.  Only a listing that finds a
 * running jail with no figures at all (agtd just started, or the jail did) waits, off the
 * loop, for a read of those jails; the others are served meanwhile. */
#ifndef AGT_JAIL_USAGE_H
#define AGT_JAIL_USAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "cgroup_utils.h"

struct agtd_s;
struct agt_jail_s;

/* A listing waiting for figures: ready(w) is called on the loop once a read that started
 * after the listing arrived has finished (a jail started after that shows none). */
struct agt_usage_wait {
  struct agt_usage_wait *next;
  void (*ready)(struct agt_usage_wait *w);
  uint64_t need; /* the read it waits for (its sequence number) */
};

struct agt_usage_entry {
  struct agt_jail_s *j;
  const char *name; /* the jail's, for the worker thread (j is the loop's) */
  unsigned runs;    /* j's run when the read was asked for */
  uint64_t read_ns; /* when the worker began reading it (agt_now_ns) */
  struct agt_cgroup_stats s;
  int ok;
};

struct agt_usage {
  struct agtd_s *d;
  uv_work_t work;
  int busy;       /* a read is in the threadpool */
  int want_stale; /* a listing found stale figures while busy: read them next */
  int background; /* no listing waits for the read in flight: it runs at nice 19 */
  pid_t tid;      /* ... in this worker thread (0: not now), whose nice was nice0 */
  int nice0;
  uint64_t started, finished; /* sequence numbers of the reads */
  struct agt_usage_entry *e;  /* the read in the threadpool: its jails */
  size_t n, cap;
  struct agt_usage_wait *waiters;
};

void agt_usage_init(struct agt_usage *u, struct agtd_s *d);
/* For a listing that shows figures: 0 when every running jail has some (answer now, from
 * them; the stale ones are read again in the background), 1 when w waits (w->ready). */
int agt_usage_for_listing(struct agt_usage *u, struct agt_usage_wait *w);
/* Free what the reads hold; the loop has run to its end (no read in flight). */
void agt_usage_release(struct agt_usage *u);

#endif
