/* The cgroup v1 backend of cgroup.h: one hierarchy per controller. */
#ifndef AGT_CGROUP_V1_H
#define AGT_CGROUP_V1_H

#include "cgroup_utils.h"

int agt_cgroup_v1_init(struct agt_cgroup_root *r, agt_error_t *err);
int agt_cgroup_v1_create(struct agt_cgroup_root *r, const char *jail,
                         const struct agt_cgroup_limits *l, agt_error_t *err);
int agt_cgroup_v1_attach(struct agt_cgroup_root *r, const char *jail, pid_t pid, agt_error_t *err);
int agt_cgroup_v1_destroy(struct agt_cgroup_root *r, const char *jail, agt_error_t *err);
int agt_cgroup_v1_stats(struct agt_cgroup_root *r, const char *jail, struct agt_cgroup_stats *s);

#endif
