/* The rootfs.* requests.  Each is a handler of the method table (server.h). */
#ifndef AGT_REQ_ROOTFS_H
#define AGT_REQ_ROOTFS_H

#include <jansson.h>

#include "error.h"
#include "server.h"

int agt_req_rootfs_build(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_rootfs_ls(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_rootfs_rm(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_rootfs_update(agt_req_t *req, json_t **result, agt_error_t *err);

#endif
