/* A rootfs reference (an id, a prefix of one, a name) resolved in the store through the list
 * of its builds, kept until the store changes. */
#ifndef AGT_ROOTFS_CACHE_H
#define AGT_ROOTFS_CACHE_H

#include <jansson.h>

#include "daemon.h"
#include "error.h"

int agtd_rootfs_resolve(agtd_t *d, const char *ref, json_t **info, agt_error_t *err);
/* A build or rm changed the store: forget the list. */
void agtd_rootfs_changed(agtd_t *d);

#endif
