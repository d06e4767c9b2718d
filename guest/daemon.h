/* agtd: the daemon's context, handed to every part.  One instance per process; everything
 * per-request or per-jail hangs off it (no process-wide mutable state elsewhere).  It opens
 * none of its subsystems: each is a pointer to a type its own header defines, so this header
 * stands below them all.  serve.c makes and frees them. */
#ifndef AGT_DAEMON_H
#define AGT_DAEMON_H

#include <jansson.h>
#include <sys/types.h>
#include <uv.h>

#include "error.h"

struct agt_jail_s;
struct agt_client_s;
struct agt_method;
struct agt_cgroup_root;
struct agt_seccomp_prog;
struct agt_netns_pool;
struct agt_disk;
struct agt_warm_pool;
struct agt_start_prio;
struct agt_output_watch;
struct agt_usage;

struct agtd_config {
  const char *socket_path;      /* /run/agt/agtd.sock */
  const char *state_dir;        /* /var/lib/agt: jails/, rootfs/, workspaces/ */
  const char *group;            /* socket group, or NULL for root only */
  unsigned max_clients;         /* connections served at once */
  unsigned max_clients_per_uid; /* ... of them for one peer uid (0: 3/4 of max_clients) */
  unsigned hello_timeout_ms;    /* a connection must say hello within this */
  unsigned frame_timeout_ms;    /* a frame, once started, must be whole within this */
  unsigned max_jails;           /* jail records at once */
  const char *cgroup_parent;    /* cgroup under which jails live ("agt") */
  unsigned netns_pool;          /* network namespaces made ahead of time (0: none) */
  unsigned warm;                /* prepared jails kept ready (0: none) */
  int realtime_starts;          /* starts run SCHED_FIFO (start_prio.h); off by default */
  uint64_t disk_size;     /* size of a new layers.img: 0 half the free space, UINT64_MAX none */
  const char *layers_dir; /* the jails' writable layers (NULL: <state>/layers; disk.h) */
  const char *const *workspace_roots; /* a workspace must lie under one of these */
  size_t nworkspace_roots;
};

struct agtd_s {
  uv_loop_t *loop;
  struct agtd_config cfg;
  char *jails_dir;      /* <state>/jails */
  char *rootfs_dir;     /* <state>/rootfs */
  char *workspaces_dir; /* <state>/workspaces */
  char *layers_dir;     /* the jails' writable layers (disk.h) */
  uv_pipe_t listener;
  uv_signal_t sigterm, sigint;
  struct agt_client_s *clients; /* list */
  unsigned nclients;
  struct agt_jail_s *jails; /* list, in creation order */
  unsigned njails;
  unsigned pending_builds;          /* rootfs builds running in the threadpool */
  json_t *rootfs_list;              /* the store's builds (agt_rootfs_list), until a build or rm */
  const struct agt_method *methods; /* the requests served (server.h) */
  size_t nmethods;
  struct agt_cgroup_root *cgroup;
  struct agt_seccomp_prog *seccomp;
  struct agt_seccomp_prog *seccomp_ahead, *seccomp_tail; /* the same, split for prepared jails */
  struct agt_netns_pool *netns;
  struct agt_disk *disk;                       /* the jails' writable layers */
  struct agt_warm_pool *warm;                  /* prepared jails */
  struct agt_start_prio *prio;                 /* realtime scheduling of starts */
  struct agt_usage *usage;                     /* the jails' cgroup figures for listings */
  const struct agt_output_watch *output_watch; /* who follows the jails' output (jail.h) */
  int shutting_down;
  time_t started;
  int keeper_fd;       /* the keeper program, a sealed memfd (jail_keep.h) */
  void *spawner_stack; /* the stack a jail's keeper is spawned on */
  int init_fd;         /* agt-init, a jail's pid 1 once its agent runs (jail_setup.h) */
  /* Held for agtd's life: one agtd per state directory and per socket (serve.c). */
  int state_lock_fd, socket_lock_fd;
};
typedef struct agtd_s agtd_t;

#endif
