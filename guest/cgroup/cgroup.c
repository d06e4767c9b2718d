#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup_v1.h"
#include "cgroup_v2.h"
#include "cleanup.h"
#include "fsutil.h"
#include "xalloc.h"

int agt_cgroup_root_init_at(struct agt_cgroup_root *r, const char *parent, const char *fsroot,
                            int version, agt_error_t *err)
{
  struct statfs sfs;

  memset(r, 0, sizeof *r);
  r->parent = xstrdup(parent);
  r->fsroot = xstrdup(fsroot);
  if (version == 0) {
    if (statfs(fsroot, &sfs) < 0)
      return agt_error_make(err, errno, "statfs '%s'", fsroot);
    version = sfs.f_type == CGROUP2_SUPER_MAGIC ? 2 : 1;
  }
  r->version = version;
  return version == 2 ? agt_cgroup_v2_init(r, err) : agt_cgroup_v1_init(r, err);
}

int agt_cgroup_root_init(struct agt_cgroup_root *r, const char *parent, agt_error_t *err)
{
  return agt_cgroup_root_init_at(r, parent, "/sys/fs/cgroup", 0, err);
}

int agt_cgroup_favordynmods(void)
{
  cleanup_file FILE *f = fopen("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;

  /* The flag is the kernel's, one for every hierarchy: any cgroup mount shows it. */
  while (f && getline(&line, &cap, f) > 0) {
    char fstype[32], opts[512];
    const char *sep = strstr(line, " - ");

    if (sep && sscanf(sep, " - %31s %*s %511s", fstype, opts) == 2 &&
        strncmp(fstype, "cgroup", 6) == 0 && strstr(opts, "favordynmods"))
      return 1;
  }
  return 0;
}

int agt_cgroup_open(struct agt_cgroup_root *r, const char *jail)
{
  cleanup_free char *dir = NULL;

  if (r->version != 2)
    return -1;
  dir = xasprintf("%s/%s", r->v2_base, jail);
  return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

void agt_cgroup_root_release(struct agt_cgroup_root *r)
{
  /* agtd's own parent cgroup goes when it holds no jail any more (rmdir fails otherwise). */
  if (r->v2_base)
    rmdir(r->v2_base);
  for (int i = 0; i < 3; i++)
    if (r->v1_base[i])
      rmdir(r->v1_base[i]);
  free(r->parent);
  free(r->fsroot);
  free(r->v2_base);
  for (int i = 0; i < 3; i++)
    free(r->v1_base[i]);
  memset(r, 0, sizeof *r);
}

int agt_cgroup_create(struct agt_cgroup_root *r, const char *jail,
                      const struct agt_cgroup_limits *l, agt_error_t *err)
{
  int ret = r->version == 2 ? agt_cgroup_v2_create(r, jail, l, err)
                            : agt_cgroup_v1_create(r, jail, l, err);
  if (ret < 0)
    agt_error_wrap(err, "cgroup v%d for jail '%s'", r->version, jail);
  return ret;
}

int agt_cgroup_adopt(struct agt_cgroup_root *r, const char *from, const char *jail, pid_t pid,
                     const struct agt_cgroup_limits *l, const struct agt_cgroup_limits *have,
                     agt_error_t *err)
{
  if (r->version == 1) {
    for (int i = 0; i < 3; i++) {
      cleanup_free char *a = xasprintf("%s/%s", r->v1_base[i], from);
      cleanup_free char *b = xasprintf("%s/%s", r->v1_base[i], jail);
      if (rename(a, b) < 0)
        return agt_error_make(err, errno, "rename cgroup '%s' to '%s'", a, b);
    }
    if (memcmp(l, have, sizeof *l) == 0)
      return 0;
    return agt_cgroup_create(r, jail, l, err); /* the directories exist: the limits */
  }
  /* cgroup v2 cannot rename: a new cgroup, the process moved into it, the old one gone. */
  if (agt_cgroup_create(r, jail, l, err) < 0 || agt_cgroup_attach(r, jail, pid, err) < 0)
    return -1;
  return agt_cgroup_destroy(r, from, err);
}

int agt_cgroup_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err)
{
  return r->version == 2 ? agt_cgroup_v2_attach(r, jail, pid, err)
                         : agt_cgroup_v1_attach(r, jail, pid, err);
}

int agt_cgroup_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err)
{
  return r->version == 2 ? agt_cgroup_v2_destroy(r, jail, err)
                         : agt_cgroup_v1_destroy(r, jail, err);
}

int agt_cgroup_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s)
{
  memset(s, 0, sizeof *s);
  return r->version == 2 ? agt_cgroup_v2_stats(r, jail, s) : agt_cgroup_v1_stats(r, jail, s);
}

char *agt_cgroup_path(struct agt_cgroup_root *r, const char *jail)
{
  return xasprintf("%s/%s", r->version == 2 ? r->v2_base : r->v1_base[0], jail);
}

int agt_cgroup_rt_budget(struct agt_cgroup_root *r, const char *jail, uint64_t usec,
                         agt_error_t *err)
{
  cleanup_free char *file = NULL;
  char buf[32];

  if (r->version != 1)
    return 0;
  file = jail ? xasprintf("%s/%s/cpu.rt_runtime_us", r->v1_base[2], jail)
              : xasprintf("%s/cpu.rt_runtime_us", r->v1_base[2]);
  if (access(file, F_OK) < 0)
    return 0;
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)usec);
  if (agt_write_str(file, buf, err) < 0)
    return -1;
  return 1;
}
