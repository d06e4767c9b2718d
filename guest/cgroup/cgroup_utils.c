/* What cgroup.c and its backends share (cgroup_utils.h). */
#include "cgroup_utils.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

ssize_t agt_cgroup_read_small(const char *path, char *buf, size_t size)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t len = 0;
  ssize_t n = 0;

  if (fd < 0 || size == 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  /* cgroupfs and procfs give a small file in one read: a short one is its end */
  while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0) {
    len += (size_t)n;
    if ((size_t)n < size - 1 - (len - (size_t)n))
      break;
  }
  close(fd);
  if (n < 0)
    return -1;
  buf[len] = '\0';
  return (ssize_t)len;
}

uint64_t agt_cgroup_read_u64(const char *dir, const char *file)
{
  char path[4096], buf[64];

  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path ||
      agt_cgroup_read_small(path, buf, sizeof buf) <= 0)
    return 0;
  return strtoull(buf, NULL, 10);
}
