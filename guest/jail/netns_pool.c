#include "netns_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"

static int loopback_up(void)
{
  struct ifreq ifr;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

  if (s < 0)
    return -1;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  close(s);
  return r;
}

/* In a worker thread: a network namespace is a property of the thread, so the thread
 * enters a new one, keeps an fd to it, and goes back home. */
static void fill_work(uv_work_t *w)
{
  struct agt_netns_pool *p = w->data;

  p->nmade = 0;
  while (p->count + p->nmade < p->target) {
    int fd;
    if (unshare(CLONE_NEWNET) < 0)
      break;
    fd = loopback_up() == 0 ? open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) : -1;
    if (setns(p->home_fd, CLONE_NEWNET) < 0) {
      /* This thread cannot go home: it must not serve other work in a jail's namespace. */
      agt_log_warning("netns pool: cannot return a worker thread to agtd's namespace: %s",
                      strerror(errno));
      _exit(70);
    }
    if (fd < 0)
      break;
    p->made[p->nmade++] = fd;
  }
}

static void fill_done(uv_work_t *w, int status)
{
  struct agt_netns_pool *p = w->data;

  (void)status;
  p->filling = 0;
  for (unsigned i = 0; i < p->nmade; i++) {
    if (p->closing || p->count >= AGT_NETNS_POOL_MAX)
      close(p->made[i]);
    else
      p->fds[p->count++] = p->made[i];
  }
  p->nmade = 0;
}

static void refill(struct agt_netns_pool *p)
{
  if (p->filling || p->closing || p->count >= p->target)
    return;
  p->filling = 1;
  p->work.data = p;
  uv_queue_work(p->loop, &p->work, fill_work, fill_done);
}

int agt_netns_pool_init(struct agt_netns_pool *p, uv_loop_t *loop, unsigned target,
                        agt_error_t *err)
{
  memset(p, 0, sizeof *p);
  p->loop = loop;
  p->home_fd = -1;
  p->target = target > AGT_NETNS_POOL_MAX ? AGT_NETNS_POOL_MAX : target;
  p->home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (p->home_fd < 0)
    return agt_error_make(err, errno, "open agtd's network namespace");
  refill(p);
  return 0;
}

int agt_netns_pool_take(struct agt_netns_pool *p)
{
  int fd = -1;

  if (p->count > 0)
    fd = p->fds[--p->count];
  refill(p);
  return fd;
}

void agt_netns_pool_release(struct agt_netns_pool *p)
{
  p->closing = 1;
  for (unsigned i = 0; i < p->count; i++)
    close(p->fds[i]);
  p->count = 0;
  if (p->home_fd >= 0)
    close(p->home_fd);
  p->home_fd = -1;
}
