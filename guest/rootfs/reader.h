/* Reading host files as the client that asked for a build.
 *
 * agtd runs as root, and any member of its socket group may ask for a build: the manifest,
 * its `host`/`env` sources, trees and the library closure must be read with that client's
 * rights, never root's, or a member could copy a root-only file (/etc/shadow, a key) into a
 * rootfs and read it from a jail.  A build thread switches only its own filesystem identity
 * (fsuid, fsgid and supplementary groups: per thread on Linux) around those reads, and back
 * to the process's own for the writes into the store. */
#ifndef AGT_ROOTFS_READER_H
#define AGT_ROOTFS_READER_H

#include <sys/types.h>

#include "error.h"
#include "rootfs.h"

struct rootfs_reader {
  const struct agt_rootfs_reader *as; /* NULL: read as the process itself, no switching */
  uid_t self_uid;                     /* the thread's own identity, to go back to */
  gid_t self_gid;
  size_t self_ngroups;
  gid_t self_groups[AGT_ROOTFS_MAX_GROUPS];
};

/* Remember the calling thread's own identity (before any switch). */
int rootfs_reader_init(struct rootfs_reader *rd, const struct agt_rootfs_reader *as,
                       agt_error_t *err);
/* Read as rd->as from now on in this thread. */
int rootfs_reader_enter(const struct rootfs_reader *rd, agt_error_t *err);
/* Back to the thread's own identity. */
int rootfs_reader_leave(const struct rootfs_reader *rd, agt_error_t *err);
/* open(path, flags) as rd->as, from a thread that is running as itself; errno as open's. */
int rootfs_reader_open(const struct rootfs_reader *rd, const char *path, int flags,
                       agt_error_t *err);

#endif
