/* Prepared jails: a few jails built ahead of their requests, for the rootfs the last
 * jail.run used.  Each is a jail's init that has done everything a start does before the
 * request matters (namespaces, its cgroup, the overlay root with /proc, /dev and /tmp,
 * pivot_root) and waits for a claim (struct agt_claim in jail_setup.h).  jail.run takes one
 * when its rootfs matches, its network mode is not open and it asks for no home or mounts
 * of its own (those start cold): agtd renames the prepared jail's
 * directory and cgroup to the jail's, writes its limits and sends the claim with the
 * workspace's mount; the init mounts the workspace, writes the jail user's passwd and
 * group, and goes on to the agent as a cold start does.  Anything else starts cold. */
#ifndef AGT_JAIL_WARM_H
#define AGT_JAIL_WARM_H

#include <sys/types.h>
#include <uv.h>

#include "cgroup.h"
#include "error.h"

struct agtd_s;
struct agt_jail_s;
struct agt_warm_end;

struct agt_warm_s {
  struct agt_warm_s *next;
  char *name; /* "w-<hex>": its cgroup's name; its directory is <jails>/.<name> */
  char *dir;  /* <jails>/.w-<hex>, until a jail takes it */
  char *rootfs_id;
  uint64_t tmp_bytes;              /* the size its /tmp was mounted with */
  struct agt_cgroup_limits limits; /* its cgroup's: the defaults of a jail */
  uid_t uid;                       /* the jail user it was made for (0: none) */
  gid_t gid;
  pid_t pid;
  int pidfd;
  int ctl_fd; /* the claim goes here (SOCK_SEQPACKET) */
  int ready;  /* it said it waits for its claim: until then its directory is in use */
  int status_fd;
  int keep_fd, keeper_pidfd; /* its keeper (keeper.h), which has its output and terminal */
  int netns_fd;              /* its network namespace */
};

struct agt_warm_pool {
  struct agt_warm_s *list;
  unsigned n, target;
  int enabled;     /* target > 0 and cgroup moves are cheap */
  char *rootfs_id; /* what the prepared jails are built on */
  char *rootfs_path;
  uid_t uid; /* the user of the last jail.run: prepared jails are made for it */
  gid_t gid;
  uv_timer_t timer; /* fills the pool, one jail a tick */
  unsigned failures;
  int serving;                 /* past agt_warm_init: discarded jails end in the loop */
  struct agt_warm_end *ending; /* discarded, their keepers not yet gone */
};

/* Set up the pool (target 0: none) and remove what a previous agtd left of its own. */
void agt_warm_init(struct agtd_s *d, unsigned target, int cheap_moves);
/* jail.run of a jail on this rootfs, for this user: keep prepared jails of them. */
void agt_warm_note_run(struct agtd_s *d, const char *rootfs_id, const char *rootfs_path, uid_t uid,
                       gid_t gid);
/* A prepared jail for j (rootfs, network mode, claim size), or NULL. */
struct agt_warm_s *agt_warm_take(struct agtd_s *d, struct agt_jail_s *j);
/* Start j on the prepared jail it took.  1: the prepared jail was gone; j->warm is cleared
 * and the caller starts cold. */
int agt_warm_start(struct agt_jail_s *j, agt_error_t *err);
/* Kill a prepared jail and remove its cgroup, and its directory unless a jail took it: once
 * its keeper is gone, in the loop (the caller does not wait; at agtd's start and end, it
 * does). */
void agt_warm_discard(struct agtd_s *d, struct agt_warm_s *w, int dir_taken);
/* How many prepared jails are ready to be taken. */
unsigned agt_warm_ready(struct agtd_s *d);
/* A start is over: build the prepared jails that are missing now. */
void agt_warm_refill(struct agtd_s *d);
/* Discard the prepared jails on rootfs_id (NULL: all). */
void agt_warm_drain(struct agtd_s *d, const char *rootfs_id);

/* jail.run's use of the pool (agt_jail_create_for_run, jail.h). */
struct agt_jail_prepared;
extern const struct agt_jail_prepared agt_warm_for_run;

#endif
