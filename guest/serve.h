/* agtd serve: agtd's parts made in order, the loop run, the parts taken apart. */
#ifndef AGT_SERVE_H
#define AGT_SERVE_H

#include <uv.h>

#include "daemon.h"
#include "error.h"

int agtd_init(agtd_t *d, uv_loop_t *loop, const struct agtd_config *cfg, agt_error_t *err);
int agtd_run(agtd_t *d);
void agtd_release(agtd_t *d);

#endif
