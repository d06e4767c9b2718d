/* The cgroup v2 backend of cgroup.h: the unified hierarchy. */
#ifndef AGT_CGROUP_V2_H
#define AGT_CGROUP_V2_H

#include "cgroup_utils.h"

int agt_cgroup_v2_init(struct agt_cgroup_root *r, agt_error_t *err);
int agt_cgroup_v2_create(struct agt_cgroup_root *r, const char *jail,
                         const struct agt_cgroup_limits *l, agt_error_t *err);
int agt_cgroup_v2_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err);
int agt_cgroup_v2_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err);
int agt_cgroup_v2_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s);

#endif
