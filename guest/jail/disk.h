/* The disk of the jails' writable layers.  Each jail's overlay upper and work directories
 * live in a btrfs subvolume of their own with a quota (a qgroup limit), so that a jail that
 * fills its root file system stops at its limit instead of filling the guest's disk.
 *
 * The layers live on a file system of their own, <state>/layers (agtd serve --layers-dir),
 * never on the one of the jails' records and logs (<state>/jails): a jail that fills its
 * layer cannot take the space its record, its log or another jail's log needs.  A jail's
 * <jail dir>/rw is a symlink to its layer, <layers>/<name>.<stamp>.
 *
 * When the layers directory is on btrfs already, agtd uses it as it is.  One agt made (the
 * Lima VM's jails disk, a Lima disk of its own that agt's provisioning formats and marks with
 * AGT_DISK_MARK) is agtd's like its image: agtd turns its quotas on.  Any other has limits
 * when its quotas are on and none when they are off, for agtd never turns on quotas on a
 * file system agt did not make.  Otherwise agtd makes a sparse image
 * <state>/layers.img (mkfs.btrfs, once), mounts it there through a loop device and turns its
 * quotas on.  Without btrfs (no mkfs.btrfs, no loop device) agtd still runs, the layers in
 * plain directories on the state's file system and no disk limit, and says so in its log and
 * in daemon.status.
 *
 * What the running jails may write (their limits) and what the disk holds already never add
 * up to more than the disk (agt_disk_promise): a start that would is refused, so no jail can
 * make another's writes fail short of its limit. */
#ifndef AGT_DISK_H
#define AGT_DISK_H

#include <stdint.h>

#include "error.h"

/* At the root of a btrfs agt made for the layers (not agtd's image): the file system's UUID,
 * written by its maker right after mkfs.btrfs (lima/provision/agtd.sh). */
#define AGT_DISK_MARK ".agt-jails-disk"

struct agt_disk {
  int enabled;       /* jails get subvolumes with quotas */
  int mounted;       /* agtd mounted the image (and unmounts it at exit) */
  int shared;        /* ... from a loop device a mount elsewhere had attached already */
  int own;           /* agt made the file system (agtd its image, or AGT_DISK_MARK) */
  char *dir;         /* <state>/layers, or --layers-dir */
  char *image;       /* <state>/layers.img */
  char *why_off;     /* when !enabled: the reason, for the log and daemon.status */
  char *owner;       /* the state directory, marked on each layer agtd makes (AGT_LAYER_XATTR) */
  uint64_t size;     /* bytes of the file system (statfs) */
  uint64_t capacity; /* what may be promised to jails' limits: size less btrfs's own share */
};

/* Set up dk for layers_dir.  image_size: the size of a new image, 0 for half of the free
 * space of the state directory's file system; UINT64_MAX: do not use an image (no disk
 * limits).  Failing to get btrfs is not an error: dk->enabled says what happened.  Errors:
 * the state holds an older agtd's jails.img (the jails' records were on it).  The image is
 * never attached twice (two loop devices would make two btrfs on one image, and corrupt it):
 * one attached by a mount (autoclear) already, elsewhere or going away, is mounted from that
 * device (the same btrfs); one attached otherwise (losetup) is an error. */
int agt_disk_init(struct agt_disk *dk, const char *state_dir, const char *layers_dir,
                  uint64_t image_size, agt_error_t *err);
void agt_disk_release(struct agt_disk *dk);

/* a + b, or UINT64_MAX when that does not fit: what limits add up to (each may be as much
 * as UINT64_MAX) counts as more than any disk, never as a little. */
static inline uint64_t agt_disk_sum(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* May a jail with this limit (0: none, i.e. all of the disk) start when the limits of the
 * running jails add up to running?  What the disk holds already counts too.  A clear error
 * when not. */
int agt_disk_promise(struct agt_disk *dk, uint64_t running, uint64_t limit, const char *name,
                     agt_error_t *err);

/* Make <jail_dir>/rw, with upper/ and work/ in it: a link to a new layer limited to limit
 * bytes when dk is enabled (0: no limit), else a directory. */
int agt_disk_jail_create(struct agt_disk *dk, const char *jail_dir, uint64_t limit,
                         agt_error_t *err);
/* Set the limit of <jail_dir>/rw's layer (a prepared jail's, made without one); 0: none. */
int agt_disk_jail_limit(struct agt_disk *dk, const char *jail_dir, uint64_t limit,
                        agt_error_t *err);
/* An agent home (home.h) at path, whose parent exists: a subvolume of its own, so that it
 * can have a limit, when dk is enabled; else a directory.  0700, root's. */
int agt_disk_home_make(struct agt_disk *dk, const char *path, agt_error_t *err);
/* What may be written into the home at path (a subvolume agt_disk_home_make made): the limit
 * of the jail starting with it, the last such start winning (0: none).  Not promised as a
 * jail's limit is (agt_disk_promise counts what homes hold, not what they may still take). */
int agt_disk_home_limit(struct agt_disk *dk, const char *path, uint64_t limit, agt_error_t *err);
/* Remove <jail_dir> and its layer.  The space the layer held is free when this returns. */
int agt_disk_jail_remove(struct agt_disk *dk, const char *jail_dir, agt_error_t *err);
/* Remove the layers no directory in jails_dir links to; how many. */
int agt_disk_sweep(struct agt_disk *dk, const char *jails_dir);

#endif
