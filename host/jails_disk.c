/* The jails' disk of a Lima VM (jails_disk.h). */
#include "jails_disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

/* A name no Lima disk has yet for the VM `instance`: NAME-jails, else NAME-jails-2 ... */
static int free_name(struct agt_ctx *c, const char *instance, char **name, agt_error_t *err)
{
  *name = NULL;
  for (int i = 1; i < 100; i++) {
    cleanup_free char *n =
        i == 1 ? xasprintf("%s-jails", instance) : xasprintf("%s-jails-%d", instance, i);
    struct agt_lima_disk d;
    int found;

    if (agt_lima_name_check(n, err) < 0)
      return agt_error_wrap(err, "the jails' disk of vm '%s'", instance);
    if (agt_lima_disk_list(&c->lima, n, &d, &found, err) < 0)
      return agt_error_wrap(err, "the jails' disk of vm '%s'", instance);
    if (!found) {
      *name = steal_pointer(&n);
      return 0;
    }
    agt_lima_disk_release(&d);
  }
  return agt_error_kind(err, AGT_E_EXISTS,
                        "the jails' disk of vm '%s': %s-jails and 98 more names are taken "
                        "(limactl disk ls)",
                        instance, instance);
}

int agt_jails_disk_make(struct agt_ctx *c, const char *instance, uint64_t size, char **name,
                        agt_error_t *err)
{
  cleanup_free char *n = NULL, *sz = NULL;

  *name = NULL;
  if (free_name(c, instance, &n, err) < 0)
    return -1;
  agt_note(c, "making the jails' disk '%s' (%llu MiB, a Lima disk)", n,
           (unsigned long long)(size >> 20));
  sz = agt_lima_size(size);
  if (agt_lima_disk_create(&c->lima, n, sz, err) < 0)
    return agt_error_wrap(err, "cannot make the jails' disk of vm '%s'", instance);
  *name = steal_pointer(&n);
  return 0;
}

/* Delete the disk and check that it is gone: limactl skips a disk a VM still names with
 * a warning and exit 0, and a disk left behind would be leaked. */
static int disk_delete(struct agt_ctx *c, const char *name, int force, agt_error_t *err)
{
  struct agt_lima_disk d;
  int found;

  if (agt_lima_disk_delete(&c->lima, name, force, err) < 0 ||
      agt_lima_disk_list(&c->lima, name, &d, &found, err) < 0)
    return agt_error_wrap(err, "cannot delete the jails' disk '%s'", name);
  if (found) {
    agt_error_kind(err, AGT_E_STATE,
                   "cannot delete the jails' disk '%s': limactl kept it (held by %s, or named by "
                   "a VM: limactl disk ls)",
                   name, d.instance ? d.instance : "no running VM");
    agt_lima_disk_release(&d);
    return -1;
  }
  return 0;
}

int agt_jails_disk_delete(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  return disk_delete(c, name, 0, err);
}

/* The yq expressions that point a clone's lima.yaml at its own jails' disk. */
static char **disk_set(const char *disk)
{
  struct agt_strv s = {0};

  agt_strv_pushf(&s,
                 ".additionalDisks = [{\"name\": \"%s\", \"format\": false, \"fsType\": "
                 "\"btrfs\"}]",
                 disk);
  agt_strv_pushf(&s, ".param.AgtJailsDisk = \"%s\"", disk);
  return agt_strv_steal(&s);
}

/* The file of the jails' disk of the VM `name` into *file, NULL when the VM has none (made
 * before the jails had a disk of their own). */
static int disk_file(struct agt_ctx *c, const char *name, char **disk, char **file,
                     agt_error_t *err)
{
  struct agt_lima_instance in;
  struct agt_lima_disk d;
  int found;

  *disk = *file = NULL;
  if (agt_lima_list(&c->lima, name, &in, &found, err) < 0)
    return agt_error_wrap(err, "vm '%s'", name);
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist", name);
  *disk = steal_pointer(&in.jails_disk);
  agt_lima_instance_release(&in);
  if (*disk == NULL)
    return 0;
  if (agt_lima_disk_list(&c->lima, *disk, &d, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "vm '%s' has no jails' disk: its Lima disk '%s' is gone (limactl "
                          "disk ls)",
                          name, *disk);
  *file = xasprintf("%s/datadisk", d.dir);
  agt_lima_disk_release(&d);
  return 0;
}

int agt_vm_clone(struct agt_ctx *c, const char *src, const char *dst, agt_error_t *err)
{
  cleanup_free char *src_disk = NULL, *file = NULL, *disk = NULL;
  cleanup_strv char **set = NULL;
  agt_error_t e2 = NULL;

  if (disk_file(c, src, &src_disk, &file, err) < 0)
    return -1;
  if (src_disk == NULL)
    return agt_lima_clone(&c->lima, src, dst, NULL, err);
  if (free_name(c, dst, &disk, err) < 0)
    return -1;
  agt_note(c, "copying the jails' disk '%s' to '%s'", src_disk, disk);
  if (agt_lima_disk_import(&c->lima, disk, file, err) < 0)
    return agt_error_wrap(err, "cannot copy the jails' disk of vm '%s'", src);
  set = disk_set(disk);
  if (agt_lima_clone(&c->lima, src, dst, set, err) < 0) {
    if (agt_lima_disk_delete(&c->lima, disk, 0, &e2) < 0) {
      fprintf(stderr, "agt: the copy '%s' of the jails' disk is left: %s\n", disk, e2->msg);
      agt_error_release(&e2);
    }
    return -1;
  }
  return 0;
}

int agt_vm_delete(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  struct agt_lima_instance in;
  cleanup_free char *disk = NULL;
  int found;

  if (agt_lima_list(&c->lima, name, &in, &found, err) < 0)
    return agt_error_wrap(err, "vm '%s'", name);
  if (found) {
    disk = steal_pointer(&in.jails_disk);
    agt_lima_instance_release(&in);
  }
  if (agt_lima_delete(&c->lima, name, 1, err) < 0)
    return -1;
  if (disk && agt_jails_disk_delete(c, disk, err) < 0)
    return agt_error_wrap(err, "vm '%s' deleted", name);
  return 0;
}

int agt_jails_disk_reset(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  struct agt_lima_instance in;
  struct agt_lima_disk d;
  cleanup_free char *disk = NULL;
  uint64_t size = 0;
  int found;

  if (agt_lima_list(&c->lima, name, &in, &found, err) < 0)
    return agt_error_wrap(err, "vm '%s'", name);
  if (!found)
    return 0;
  disk = steal_pointer(&in.jails_disk);
  agt_lima_instance_release(&in);
  if (disk == NULL)
    return 0;
  if (agt_lima_disk_list(&c->lima, disk, &d, &found, err) < 0)
    return -1;
  if (found) {
    size = d.size;
    if (d.instance) {
      agt_error_kind(err, AGT_E_STATE,
                     "the jails' disk '%s' is held by vm '%s': it cannot be made afresh", disk,
                     d.instance);
      agt_lima_disk_release(&d);
      return -1;
    }
    agt_lima_disk_release(&d);
    /* --force: the reset VM still names it (limactl skips such a disk without it); the
     * factory reset stopped that VM, and no VM holds it (checked above) */
    if (disk_delete(c, disk, 1, err) < 0)
      return -1;
  }
  if (size == 0 && agt_config_size(&c->cfg, AGT_CFG_VM_JAILS_DISK, &size, err) < 0)
    return -1;
  agt_note(c, "the jails' disk '%s' made afresh (%llu MiB)", disk,
           (unsigned long long)(size >> 20));
  {
    cleanup_free char *sz = agt_lima_size(size);
    if (agt_lima_disk_create(&c->lima, disk, sz, err) < 0)
      return agt_error_wrap(err, "cannot make the jails' disk '%s' again", disk);
  }
  return 0;
}
