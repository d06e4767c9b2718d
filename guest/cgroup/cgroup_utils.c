/* What cgroup.c and its backends share (cgroup_utils.h). */
#include "cgroup_utils.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

int agt_cgroup_kill_procs(const char *procs_file)
{
  cleanup_file FILE *f = fopen(procs_file, "re");
  int pid, n = 0;

  if (f == NULL)
    return 0;
  while (fscanf(f, "%d", &pid) == 1)
    if (pid > 0 && kill(pid, SIGKILL) == 0)
      n++;
  return n;
}

int agt_cgroup_rmdir(const char *dir, agt_error_t *err)
{
  if (rmdir(dir) == 0 || errno == ENOENT)
    return 0;
  if (errno == EBUSY)
    return agt_error_kind(err, AGT_E_BUSY, "cgroup '%s' still has processes", dir);
  return agt_error_make(err, errno, "rmdir '%s'", dir);
}

uint64_t agt_cgroup_read_u64(const char *dir, const char *file)
{
  cleanup_free char *path = xasprintf("%s/%s", dir, file);
  cleanup_file FILE *f = fopen(path, "re");
  unsigned long long v = 0;

  if (f == NULL || fscanf(f, "%llu", &v) != 1)
    return 0;
  return v;
}
