/* cgroup v1: one hierarchy per controller (memory, pids, cpu), as on hosts that never
 * switched to the unified hierarchy. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup_v1.h"
#include "cleanup.h"
#include "fsutil.h"
#include "xalloc.h"

static const char *const controllers[3] = {"memory", "pids", "cpu"};

int agt_cgroup_v1_init(struct agt_cgroup_root *r, agt_error_t *err)
{
  struct stat st;

  for (int i = 0; i < 3; i++) {
    cleanup_free char *mnt = xasprintf("%s/%s", r->fsroot, controllers[i]);
    if (stat(mnt, &st) < 0)
      return agt_error_make(err, errno, "cgroup v1 controller '%s' is not mounted at '%s'",
                            controllers[i], mnt);
    r->v1_base[i] = xasprintf("%s/%s", mnt, r->parent);
    if (mkdir(r->v1_base[i], 0755) < 0 && errno != EEXIST)
      return agt_error_make(err, errno, "mkdir '%s'", r->v1_base[i]);
  }
  /* cpuacct mounted with cpu (cpu,cpuacct, as on most distros) or a hierarchy of its own:
   * asked once here, not at every jail's stats */
  {
    cleanup_free char *usage = xasprintf("%s/cpu/cpuacct.usage", r->fsroot);
    r->v1_cpuacct = access(usage, F_OK) == 0;
  }
  return 0;
}

static int write_limit(const char *dir, const char *file, unsigned long long v, agt_error_t *err)
{
  cleanup_free char *path = xasprintf("%s/%s", dir, file);
  char buf[32];

  snprintf(buf, sizeof buf, "%llu", v);
  return agt_write_str(path, buf, err);
}

int agt_cgroup_v1_create(struct agt_cgroup_root *r, const char *jail,
                         const struct agt_cgroup_limits *l, agt_error_t *err)
{
  cleanup_free char *mem = xasprintf("%s/%s", r->v1_base[0], jail);
  cleanup_free char *pids = xasprintf("%s/%s", r->v1_base[1], jail);
  cleanup_free char *cpu = xasprintf("%s/%s", r->v1_base[2], jail);
  const char *dirs[3] = {mem, pids, cpu};

  for (int i = 0; i < 3; i++)
    if (mkdir(dirs[i], 0755) < 0 && errno != EEXIST)
      return agt_error_make(err, errno, "mkdir '%s'", dirs[i]);
  /* Every limit is written, "no limit" too (-1, max): a prepared jail's cgroup, renamed
   * to the jail's, holds the default limits until then. */
  {
    cleanup_free char *limit = xasprintf("%s/memory.limit_in_bytes", mem);
    cleanup_free char *memsw = xasprintf("%s/memory.memsw.limit_in_bytes", mem);
    char v[32];
    snprintf(v, sizeof v, "%lld", l->memory_bytes ? (long long)l->memory_bytes : -1LL);
    /* With swap accounting, memsw must be limited too or the hog just swaps.  It may never
     * be below memory.limit_in_bytes: lowering writes that first, raising memsw first. */
    if (access(memsw, F_OK) != 0) {
      if (agt_write_str(limit, v, err) < 0)
        return -1;
    } else if (agt_write_str(limit, v, NULL) == 0) {
      if (agt_write_str(memsw, v, err) < 0)
        return -1;
    } else if (agt_write_str(memsw, v, err) < 0 || agt_write_str(limit, v, err) < 0) {
      return -1;
    }
  }
  if (l->pids) {
    if (write_limit(pids, "pids.max", l->pids, err) < 0)
      return -1;
  } else {
    cleanup_free char *pmax = xasprintf("%s/pids.max", pids);
    if (agt_write_str(pmax, "max", err) < 0)
      return -1;
  }
  if (l->cpu_millis) {
    if (write_limit(cpu, "cpu.cfs_period_us", 100000, err) < 0 ||
        write_limit(cpu, "cpu.cfs_quota_us", l->cpu_millis * 100, err) < 0)
      return -1;
  } else {
    cleanup_free char *quota = xasprintf("%s/cpu.cfs_quota_us", cpu);
    if (agt_write_str(quota, "-1", err) < 0)
      return -1;
  }
  return 0;
}

int agt_cgroup_v1_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err)
{
  char buf[32];

  snprintf(buf, sizeof buf, "%d", (int)pid);
  for (int i = 0; i < 3; i++) {
    cleanup_free char *procs = xasprintf("%s/%s/cgroup.procs", r->v1_base[i], jail);
    if (agt_write_str(procs, buf, err) < 0)
      return -1;
  }
  return 0;
}

int agt_cgroup_v1_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err)
{
  int busy = 0;

  for (int i = 0; i < 3; i++) {
    const char *base = r->v1_base[i];
    cleanup_free char *dir = xasprintf("%s/%s", base, jail);
    cleanup_free char *procs = xasprintf("%s/cgroup.procs", dir);
    agt_error_t e = NULL;

    agt_cgroup_kill_procs(procs);
    if (agt_cgroup_rmdir(dir, &e) < 0) {
      if (e->kind != AGT_E_BUSY) {
        *err = e;
        return -1;
      }
      agt_error_release(&e);
      busy = 1;
    }
  }
  if (busy)
    return agt_error_kind(err, AGT_E_BUSY, "cgroup of jail '%s' still has processes", jail);
  return 0;
}

static uint64_t pid_cpu_usec(long pid, long tick)
{
  char path[64], buf[1024], *q;
  unsigned long long ut, st;

  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  if (agt_cgroup_read_small(path, buf, sizeof buf) <= 0 || (q = strrchr(buf, ')')) == NULL)
    return 0;
  /* after "pid (comm)": state and 10 more fields, then utime and stime */
  if (sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return 0;
  return (ut + st) * 1000000ull / (unsigned long long)tick;
}

/* The CPU time of the processes listed in a cgroup.procs file: utime and stime of each
 * from /proc/PID/stat. */
static uint64_t procs_cpu_usec(const char *procs_file)
{
  long tick = sysconf(_SC_CLK_TCK);
  cleanup_close int fd = open(procs_file, O_RDONLY | O_CLOEXEC);
  char list[4096];
  size_t keep = 0;
  uint64_t usec = 0;
  ssize_t n;

  if (fd < 0 || tick <= 0)
    return 0;
  /* one pid a line; a line cut at the end of a read is kept for the next */
  while ((n = read(fd, list + keep, sizeof list - keep)) > 0) {
    size_t len = keep + (size_t)n;
    char *p = list, *nl;
    while ((nl = memchr(p, '\n', len - (size_t)(p - list))) != NULL) {
      usec += pid_cpu_usec(strtol(p, NULL, 10), tick);
      p = nl + 1;
    }
    keep = len - (size_t)(p - list);
    memmove(list, p, keep);
  }
  if (keep > 0 && keep < sizeof list) {
    list[keep] = '\0';
    usec += pid_cpu_usec(strtol(list, NULL, 10), tick);
  }
  return usec;
}

int agt_cgroup_v1_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s)
{
  cleanup_free char *mem = xasprintf("%s/%s", r->v1_base[0], jail);
  cleanup_free char *pids = xasprintf("%s/%s", r->v1_base[1], jail);

  s->memory_bytes = agt_cgroup_read_u64(mem, "memory.usage_in_bytes");
  s->pids = agt_cgroup_read_u64(pids, "pids.current");
  if (r->v1_cpuacct) {
    cleanup_free char *cpu = xasprintf("%s/%s", r->v1_base[2], jail);
    s->cpu_usec = agt_cgroup_read_u64(cpu, "cpuacct.usage") / 1000;
  } else {
    /* cpuacct on a hierarchy of its own (jails do not join it: one migration fewer on the
     * start path, and one cgroup fewer per jail): add up the CPU time of the jail's live
     * processes instead (the pids hierarchy lists the same ones as memory). */
    cleanup_free char *procs = xasprintf("%s/cgroup.procs", pids);
    s->cpu_usec = procs_cpu_usec(procs);
  }
  return 0;
}
