/* A pool of fresh network namespaces, made ahead of time in libuv's threadpool.  Creating a
 * network namespace is the most expensive step of a jail start (about a millisecond, much
 * of it in the kernel's per-namespace setup), so a jail takes a ready one, with its
 * loopback already up, and the pool refills in the background.  Each namespace is used by
 * exactly one jail and never returned.  An empty pool only costs speed: the jail then gets
 * a new namespace from clone3 itself. */
#ifndef AGT_NETNS_POOL_H
#define AGT_NETNS_POOL_H

#include <uv.h>

#include "error.h"

#define AGT_NETNS_POOL_MAX 64

struct agt_netns_pool {
  uv_loop_t *loop;
  int fds[AGT_NETNS_POOL_MAX];
  unsigned count;
  unsigned target; /* 0: no pool */
  int home_fd;     /* agtd's own network namespace, to return threads to */
  int filling;
  int closing;
  uv_work_t work;
  int made[AGT_NETNS_POOL_MAX];
  unsigned nmade;
};

int agt_netns_pool_init(struct agt_netns_pool *p, uv_loop_t *loop, unsigned target,
                        agt_error_t *err);
/* A ready namespace fd (the caller owns it), or -1 when the pool is empty. */
int agt_netns_pool_take(struct agt_netns_pool *p);
void agt_netns_pool_release(struct agt_netns_pool *p);

#endif
