/* The store's list of builds, cached (rootfs_cache.h). */
#include "rootfs_cache.h"

#include "rootfs/rootfs.h"

int agtd_rootfs_resolve(agtd_t *d, const char *ref, json_t **info, agt_error_t *err)
{
  if (d->rootfs_list == NULL && agt_rootfs_list(d->rootfs_dir, &d->rootfs_list, err) < 0)
    return -1;
  return agt_rootfs_resolve_in(d->rootfs_list, d->rootfs_dir, ref, info, err);
}

void agtd_rootfs_changed(agtd_t *d)
{
  json_decref(d->rootfs_list);
  d->rootfs_list = NULL;
}
