/* The jails' disk of a Lima VM: a Lima disk of its own (`limactl disk`, $LIMA_HOME/_disks/
 * NAME), listed under additionalDisks in the VM's rendered template and named by its param
 * AgtJailsDisk.  Lima attaches it unformatted; the VM's provisioning (lima/provision/agtd.sh)
 * makes it btrfs at the first boot and agtd keeps the jails' writable layers there, with a
 * quota per jail.  Lima attaches a disk to one VM at a time and never deletes one with its
 * VM, so every VM gets its own, and agt makes and removes them:
 *
 *   agt up       makes NAME-jails (vm.jails_disk big) before it creates the VM
 *   agt clone    copies the source's disk for the clone (the jails' layers go with the
 *                jails' records, which are on the copied root disk)
 *   agt restore  the same copy from the gold VM; the replaced VM's disk goes with it
 *   agt reset    an empty disk of the same size in place of the old one
 *   agt delete   the VM, then its disk
 *
 * A VM made before agt gave the jails a disk has no AgtJailsDisk: agtd keeps its image inside
 * the root disk there, as with target local. */
#ifndef AGT_HOST_JAILS_DISK_H
#define AGT_HOST_JAILS_DISK_H

#include <stdint.h>

#include "agt.h"
#include "error.h"

/* Make a new, empty jails' disk for the VM `instance`: NAME-jails, or NAME-jails-2 ... when
 * that one exists (a VM renamed by agt restore keeps its disk's name); size bytes.  *name:
 * newly allocated. */
int agt_jails_disk_make(struct agt_ctx *c, const char *instance, uint64_t size, char **name,
                        agt_error_t *err);
/* Delete the disk `name` if it is there (not attached to a running VM). */
int agt_jails_disk_delete(struct agt_ctx *c, const char *name, agt_error_t *err);
/* Clone the stopped VM src to dst (limactl clone), with a copy of src's jails' disk as
 * dst's own.  On failure neither the clone nor the copy is left. */
int agt_vm_clone(struct agt_ctx *c, const char *src, const char *dst, agt_error_t *err);
/* Delete the VM `name` (by force) and then its jails' disk. */
int agt_vm_delete(struct agt_ctx *c, const char *name, agt_error_t *err);
/* After a factory reset of the VM `name`: its jails' disk, if it has one, replaced by an
 * empty one of the same name and size. */
int agt_jails_disk_reset(struct agt_ctx *c, const char *name, agt_error_t *err);

#endif
