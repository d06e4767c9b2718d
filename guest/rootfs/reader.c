/* Per-thread filesystem identity for the reads of a build (reader.h).  Raw system calls:
 * glibc's setgroups() changes every thread of the process (it broadcasts set*id calls),
 * and setfsuid()/setfsgid() report no errors; the kernel's own calls change only the
 * calling thread, and reading the identity back says whether the switch happened. */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"

#if defined(SYS_setgroups32)
#define SYS_SETGROUPS SYS_setgroups32
#define SYS_SETFSUID SYS_setfsuid32
#define SYS_SETFSGID SYS_setfsgid32
#else
#define SYS_SETGROUPS SYS_setgroups
#define SYS_SETFSUID SYS_setfsuid
#define SYS_SETFSGID SYS_setfsgid
#endif

static int set_ids(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups, agt_error_t *err)
{
  /* groups and gid first: with a non-root fsuid the thread may still change them (they need
   * CAP_SETGID, which the fsuid does not drop), but keep the order that never widens rights */
  if (syscall(SYS_SETGROUPS, ngroups, groups) < 0)
    return agt_error_make(err, errno, "setgroups for a build's reads");
  syscall(SYS_SETFSGID, gid);
  syscall(SYS_SETFSUID, uid);
  if ((uid_t)syscall(SYS_SETFSUID, (uid_t)-1) != uid ||
      (gid_t)syscall(SYS_SETFSGID, (gid_t)-1) != gid)
    return agt_error_kind(err, AGT_E_INTERNAL,
                          "could not switch a build thread's file identity to %u:%u", (unsigned)uid,
                          (unsigned)gid);
  return 0;
}

int rootfs_reader_init(struct rootfs_reader *rd, const struct agt_rootfs_reader *as,
                       agt_error_t *err)
{
  int n;

  rd->as = as;
  rd->self_uid = (uid_t)syscall(SYS_SETFSUID, (uid_t)-1);
  rd->self_gid = (gid_t)syscall(SYS_SETFSGID, (gid_t)-1);
  n = getgroups(AGT_ROOTFS_MAX_GROUPS, rd->self_groups);
  if (n < 0)
    return agt_error_make(err, errno, "getgroups");
  rd->self_ngroups = (size_t)n;
  if (as && as->ngroups > AGT_ROOTFS_MAX_GROUPS)
    return agt_error_kind(err, AGT_E_LIMIT, "uid %u is in more than %d groups", (unsigned)as->uid,
                          AGT_ROOTFS_MAX_GROUPS);
  return 0;
}

int rootfs_reader_enter(const struct rootfs_reader *rd, agt_error_t *err)
{
  if (rd == NULL || rd->as == NULL)
    return 0;
  return set_ids(rd->as->uid, rd->as->gid, rd->as->ngroups, rd->as->groups, err);
}

int rootfs_reader_leave(const struct rootfs_reader *rd, agt_error_t *err)
{
  if (rd == NULL || rd->as == NULL)
    return 0;
  return set_ids(rd->self_uid, rd->self_gid, rd->self_ngroups, rd->self_groups, err);
}

int rootfs_reader_open(const struct rootfs_reader *rd, const char *path, int flags,
                       agt_error_t *err)
{
  int fd, saved;

  if (rootfs_reader_enter(rd, err) < 0)
    return -1;
  fd = open(path, flags);
  saved = errno;
  if (rootfs_reader_leave(rd, err) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  errno = saved;
  return fd;
}
