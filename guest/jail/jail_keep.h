/* agtd's side of a jail's keeper (keeper.h): starting a jail under a keeper, and finding the
 * keepers of running jails again after a restart of agtd. */
#ifndef AGT_JAIL_KEEP_H
#define AGT_JAIL_KEEP_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "keeper.h"

struct agtd_s;
struct agt_spawn_plan;

/* The keeper program, embedded in agtd and exec'd from a sealed memfd (agtd's own binary
 * may be replaced by an upgrade while jails run). */
int agt_keep_init(struct agtd_s *d, agt_error_t *err);

struct agt_keep_spawn {
  /* in */
  const struct agt_spawn_plan *plan;
  const char *name;
  int new_netns, cgroup_fd;
  /* Not born in its cgroup (cgroup v1): moved into this one by the spawner, before the
   * keeper's exec, so before the init gets far (NULL: the caller moves it). */
  const char *attach_cgroup;
  int out_rd, err_rd, console_rd; /* the keeper's; -1 when none */
  int dir_fd;                     /* the jail's directory */
  /* out */
  pid_t pid; /* the jail's init */
  int pidfd;
  int keep_fd;            /* agtd's end of the connection to the keeper */
  int keeper_pidfd;       /* the keeper, agtd's child until agtd goes (agtd reaps it) */
  int attached;           /* in its cgroup */
  agt_error_t attach_err; /* the spawner failed to move it there (the caller kills it) */
};

/* Clone the jail's init from a short-lived child of agtd (sharing its memory, agtd waits)
 * that becomes the init's keeper by an exec: the init is the keeper's child, not agtd's.
 * The fds given to the keeper stay open in agtd (the caller closes them). */
int agt_keep_spawn(struct agtd_s *d, struct agt_keep_spawn *s, agt_error_t *err);

/* One record from a keeper: header, data (at most AGT_KEEP_DATA_MAX, in buf), up to two fds
 * (-1 when absent).  1 a record, 0 none waiting (EAGAIN), -1 the keeper is gone (EOF or
 * an error; errno says). */
int agt_keep_recv(int fd, struct agt_keep_hdr *h, char *buf, int fds[2]);

/* Connect to the keeper of the jail in dir and read its HELLO (blocking, 2 s at most).
 * Returns the connection; fds[0] the init's pidfd, fds[1] the terminal's master or -1. */
int agt_keep_connect(const char *dir, struct agt_keep_hdr *hello, int fds[2], agt_error_t *err);

/* The exit a keeper recorded in dir (keeper.h); -1 when there is none. */
int agt_keep_read_exit(const char *dir, int *code, int *sig, int64_t *finished);

/* Tell the keeper the log's budget. */
void agt_keep_send_budget(int fd, uint64_t budget);

#endif
