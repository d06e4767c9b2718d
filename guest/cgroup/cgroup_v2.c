/* cgroup v2: the unified hierarchy.  agtd keeps its jails under /sys/fs/cgroup/<parent>,
 * a sibling of its own service cgroup, with memory, pids and cpu delegated to it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup_v2.h"
#include "cleanup.h"
#include "fsutil.h"
#include "xalloc.h"

static int enable_controllers(const char *dir, agt_error_t *err)
{
  cleanup_free char *ctl = xasprintf("%s/cgroup.subtree_control", dir);
  cleanup_free char *have = NULL;
  const char *want[] = {"memory", "pids", "cpu"};

  if (agt_read_file(ctl, 4096, &have, NULL, err) < 0)
    return -1;
  for (size_t i = 0; i < 3; i++) {
    char buf[16];
    if (strstr(have, want[i]))
      continue;
    snprintf(buf, sizeof buf, "+%s", want[i]);
    if (agt_write_str(ctl, buf, err) < 0)
      return agt_error_wrap(err, "enable the %s controller", want[i]);
  }
  return 0;
}

int agt_cgroup_v2_init(struct agt_cgroup_root *r, agt_error_t *err)
{
  r->v2_base = xasprintf("%s/%s", r->fsroot, r->parent);
  if (enable_controllers(r->fsroot, err) < 0)
    return -1;
  if (mkdir(r->v2_base, 0755) < 0 && errno != EEXIST)
    return agt_error_make(err, errno, "mkdir '%s'", r->v2_base);
  return enable_controllers(r->v2_base, err);
}

static int write_file(const char *dir, const char *file, const char *val, agt_error_t *err)
{
  cleanup_free char *path = xasprintf("%s/%s", dir, file);
  return agt_write_str(path, val, err);
}

int agt_cgroup_v2_create(struct agt_cgroup_root *r, const char *jail,
                         const struct agt_cgroup_limits *l, agt_error_t *err)
{
  cleanup_free char *dir = xasprintf("%s/%s", r->v2_base, jail);
  char buf[64];

  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return agt_error_make(err, errno, "mkdir '%s'", dir);
  /* Every limit is written, "no limit" too (max), as cgroup v1 does. */
  if (l->memory_bytes)
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)l->memory_bytes);
  else
    snprintf(buf, sizeof buf, "max");
  if (write_file(dir, "memory.max", buf, err) < 0)
    return -1;
  write_file(dir, "memory.swap.max", "0", NULL); /* absent without swap accounting */
  if (l->pids)
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)l->pids);
  else
    snprintf(buf, sizeof buf, "max");
  if (write_file(dir, "pids.max", buf, err) < 0)
    return -1;
  if (l->cpu_millis)
    snprintf(buf, sizeof buf, "%llu 100000", (unsigned long long)l->cpu_millis * 100);
  else
    snprintf(buf, sizeof buf, "max 100000");
  if (write_file(dir, "cpu.max", buf, err) < 0)
    return -1;
  return 0;
}

int agt_cgroup_v2_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err)
{
  cleanup_free char *dir = xasprintf("%s/%s", r->v2_base, jail);
  char buf[32];

  snprintf(buf, sizeof buf, "%d", (int)pid);
  return write_file(dir, "cgroup.procs", buf, err);
}

int agt_cgroup_v2_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err)
{
  cleanup_free char *dir = xasprintf("%s/%s", r->v2_base, jail);
  cleanup_free char *procs = xasprintf("%s/cgroup.procs", dir);

  if (write_file(dir, "cgroup.kill", "1", NULL) < 0)
    agt_cgroup_kill_procs(procs);
  return agt_cgroup_rmdir(dir, err);
}

int agt_cgroup_v2_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s)
{
  cleanup_free char *dir = xasprintf("%s/%s", r->v2_base, jail);
  cleanup_free char *stat = xasprintf("%s/cpu.stat", dir);
  cleanup_file FILE *f = NULL;
  char key[64];
  unsigned long long v;

  s->memory_bytes = agt_cgroup_read_u64(dir, "memory.current");
  s->pids = agt_cgroup_read_u64(dir, "pids.current");
  f = fopen(stat, "re");
  while (f && fscanf(f, "%63s %llu", key, &v) == 2)
    if (strcmp(key, "usage_usec") == 0)
      s->cpu_usec = v;
  return 0;
}
