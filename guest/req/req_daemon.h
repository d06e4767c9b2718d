/* Requests about agtd itself: hello, daemon.status.  Each is a handler of the method table
 * (server.h). */
#ifndef AGT_REQ_DAEMON_H
#define AGT_REQ_DAEMON_H

#include <jansson.h>

#include "error.h"
#include "server.h"

int agt_req_hello(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_daemon_status(agt_req_t *req, json_t **result, agt_error_t *err);

#endif
