/* The home.* requests.  Each is a handler of the method table (server.h). */
#ifndef AGT_REQ_HOME_H
#define AGT_REQ_HOME_H

#include <jansson.h>

#include "error.h"
#include "server.h"

int agt_req_home_inspect(agt_req_t *req, json_t **result, agt_error_t *err);
int agt_req_home_reset(agt_req_t *req, json_t **result, agt_error_t *err);

#endif
