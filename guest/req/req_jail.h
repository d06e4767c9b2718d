/* The jail.* requests.  Each is a handler of the method table (server.h). */
#ifndef AGT_REQ_JAIL_H
#define AGT_REQ_JAIL_H

#include <jansson.h>

#include "error.h"
#include "server.h"

int agt_req_jail_create(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_run(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_start(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_stop(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_kill(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_rm(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_ls(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_inspect(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_logs(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_wait(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_net(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_attach(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_port(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_jail_exec(agt_req_t *req, json_t **result, agt_error_t *err);

#endif
