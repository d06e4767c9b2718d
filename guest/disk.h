/* The disk of the jails' writable layers.  Each jail's overlay upper and work directories
 * live in a btrfs subvolume of their own with a quota (a qgroup limit), so that a jail that
 * fills its root file system stops at its limit instead of filling the guest's disk.
 *
 * agtd keeps <state>/jails on btrfs: when that directory is not on btrfs already, agtd makes
 * a sparse image <state>/jails.img (mkfs.btrfs, once) and mounts it there through a loop
 * device.  Without btrfs (no mkfs.btrfs, no loop device, an old state directory with jails
 * in it) agtd still runs, with the writable layers on the state directory's file system and
 * no disk limit, and says so in its log and in daemon.status. */
#ifndef AGT_DISK_H
#define AGT_DISK_H

#include <stdint.h>

#include "error.h"

struct agt_disk {
  int enabled;   /* jails get subvolumes with quotas */
  int mounted;   /* agtd mounted the image (and unmounts it at exit) */
  int shared;    /* ... from a loop device a mount elsewhere had attached already */
  char *dir;     /* <state>/jails */
  char *image;   /* <state>/jails.img */
  char *why_off; /* when !enabled: the reason, for the log and daemon.status */
  uint64_t size; /* bytes of the file system (statfs) */
};

/* Set up dk for jails_dir.  image_size: the size of a new image, 0 for half of the free space
 * of the state directory's file system; UINT64_MAX: do not use an image (no disk limits).
 * Failing to get btrfs is not an error: dk->enabled says what happened.  The image is never
 * attached twice (two loop devices would make two btrfs on one image, and corrupt it): one
 * attached by a mount (autoclear) already, elsewhere or going away, is mounted from that
 * device (the same btrfs); one attached otherwise (losetup) is an error. */
int agt_disk_init(struct agt_disk *dk, const char *state_dir, const char *jails_dir,
                  uint64_t image_size, agt_error_t *err);
void agt_disk_release(struct agt_disk *dk);

/* Make <jail_dir>/rw, with upper/ and work/ in it: a subvolume limited to limit bytes when dk
 * is enabled (0: no limit), else a directory. */
int agt_disk_jail_create(struct agt_disk *dk, const char *jail_dir, uint64_t limit,
                         agt_error_t *err);
/* Set the limit of <jail_dir>/rw (a prepared jail's, made without one); 0: none. */
int agt_disk_jail_limit(struct agt_disk *dk, const char *jail_dir, uint64_t limit,
                        agt_error_t *err);
/* Remove <jail_dir>: its rw subvolume at once (its blocks freed in the background), then the
 * rest. */
int agt_disk_jail_remove(struct agt_disk *dk, const char *jail_dir, agt_error_t *err);

#endif
