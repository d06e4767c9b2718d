/* What cgroup.c and its two backends share (as crun's cgroup-utils.c): the types of a
 * hierarchy, a jail's limits and its usage, and helpers over cgroupfs.  Below both backends,
 * depending on neither. */
#ifndef AGT_CGROUP_UTILS_H
#define AGT_CGROUP_UTILS_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct agt_cgroup_limits {
  uint64_t memory_bytes; /* 0: no limit */
  uint64_t pids;         /* 0: no limit */
  uint64_t cpu_millis;   /* CPU time per second of wall time, 1000 = one core; 0: no limit */
};

struct agt_cgroup_stats {
  uint64_t memory_bytes;
  uint64_t pids;
  uint64_t cpu_usec;
};

struct agt_cgroup_root {
  int version;      /* 1 or 2 */
  char *fsroot;     /* where the hierarchies are mounted: /sys/fs/cgroup */
  char *parent;     /* "agt" */
  char *v2_base;    /* v2: /sys/fs/cgroup/<parent> */
  char *v1_base[3]; /* v1: /sys/fs/cgroup/{memory,pids,cpu}/<parent> */
  int fast_attach;  /* favordynmods is on: moving a process costs microseconds */
  int v1_cpuacct;   /* v1: cpuacct is mounted with cpu (cpuacct.usage in the cpu hierarchy) */
};

/* Kill every pid listed in a cgroup.procs file; returns how many. */
int agt_cgroup_kill_procs(const char *procs_file);
/* rmdir that reports EBUSY as AGT_E_BUSY and ENOENT as success. */
int agt_cgroup_rmdir(const char *dir, agt_error_t *err);
/* The number at the start of dir/file; 0 when it cannot be read. */
uint64_t agt_cgroup_read_u64(const char *dir, const char *file);
/* Read a small file of cgroupfs or procfs (which give it in one read; a short read is
 * taken as its end) into buf, at most size - 1 bytes, NUL-terminated: its length, or -1.
 * open, read, close: no stdio, as listings read thousands of them. */
ssize_t agt_cgroup_read_small(const char *path, char *buf, size_t size);

#endif
