/* A jail: its record (what was asked for, persisted as <state>/jails/<name>/jail.json) and
 * its run-time state (the supervised process tree, log pipes, stop timer).
 *
 * States: created -> starting -> running -> (stopping ->) exited; a created or exited jail can
 * be started again (its overlay upper layer is kept until rm). */
#ifndef AGT_JAIL_H
#define AGT_JAIL_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

#include "cgroup.h"
#include "egress.h"
#include "error.h"
#include "jail_mounts.h"
#include "jailspec.h"
#include "outlog.h"

struct agtd_s;
struct agt_pending_s;

enum agt_jail_state {
  AGT_JAIL_CREATED,
  AGT_JAIL_STARTING,
  AGT_JAIL_RUNNING,
  AGT_JAIL_STOPPING,
  AGT_JAIL_EXITED,
};

struct agt_jail_limits {
  struct agt_cgroup_limits cg;
  uint64_t nofile;     /* RLIMIT_NOFILE */
  uint64_t tmp_bytes;  /* size of the jail's /tmp (its tmpfs: agt_jail_tmpfs_bytes) */
  uint64_t log_bytes;  /* the captured output kept on disk */
  uint64_t disk_bytes; /* the jail's writable layer (btrfs quota); 0: no limit */
};

/* Defaults for limits a request leaves out: the jail spec's (common/jailspec.h). */
#define AGT_JAIL_DEFAULT_MEMORY (agt_jail_spec_keys[AGT_SPEC_MEMORY].def)
#define AGT_JAIL_DEFAULT_DISK (agt_jail_spec_keys[AGT_SPEC_DISK].def)
#define AGT_JAIL_DEFAULT_PIDS (agt_jail_spec_keys[AGT_SPEC_PIDS].def)
#define AGT_JAIL_DEFAULT_CPU (agt_jail_spec_keys[AGT_SPEC_CPU].def)
#define AGT_JAIL_DEFAULT_NOFILE (agt_jail_spec_keys[AGT_SPEC_NOFILE].def)
#define AGT_JAIL_DEFAULT_TMP (agt_jail_spec_keys[AGT_SPEC_TMP].def)
#define AGT_JAIL_DEFAULT_LOG (agt_jail_spec_keys[AGT_SPEC_LOG].def)
#define AGT_JAIL_ARGV_MAX 256
#define AGT_JAIL_ENV_MAX 256
#define AGT_JAIL_LAYERS_MAX 8
#define AGT_JAIL_STR_MAX 4096
#define AGT_JAIL_MOUNTS_MAX 32
#define AGT_SCREEN_MAX (64u * 1024) /* recent terminal output replayed on attach */

/* What is persisted in <state>/jails/<name>/jail.json: what was asked for, where the jail's
 * files are, how its last run went. */
struct agt_jail_record {
  char *name;
  char *agent; /* label, e.g. "opencode" or "shell" */
  char *rootfs_id;
  char *rootfs_path;   /* the lowest layer (the base rootfs) */
  char **layer_ids;    /* layers stacked over it, top first (agent, runtime); NULL: none */
  char **layer_paths;  /* their trees, in the same order */
  char **secrets;      /* names of env entries whose values are never in jail.json (secrets.h) */
  char **secrets_lost; /* not in jail.json: those whose values were gone at agtd's start */
  char *workspace;     /* bound read-write at /work */
  int workspace_owned; /* agtd created it under <state>/workspaces and removes it with the jail */
  char **argv;
  char **env;
  uid_t uid;
  gid_t gid;
  struct agt_jail_limits limits;
  struct agt_net_policy net;
  time_t created;
  struct agt_jail_binds binds; /* its home, mounts and lockdown (jail_mounts.h) */
  int tty;                     /* the agent runs on a terminal (a pty from the jail's devpts) */

  /* Paths under <state>/jails/<name>. */
  char *dir, *upper, *work, *merged, *log_path, *log_old_path, *net_log_path;

  enum agt_jail_state state;
  time_t started, finished;
  int exit_code;   /* valid when state == EXITED and exit_signal == 0 */
  int exit_signal; /* non-zero when the init was killed by a signal */
  char *exit_reason;
  unsigned runs;
};

struct agt_jail_s;

/* The running state of the current run: the processes, the handles that watch them, the
 * cgroup and the proxy; nothing of it is persisted (a new agtd finds it again, jail_run.c). */
struct agt_jail_run {
  pid_t pid; /* the jail's init, as seen from agtd */
  int pidfd;
  uint64_t start_request_ns; /* when the start request arrived (for latency reporting) */
  uint64_t exec_ns;          /* when the agent's exec was confirmed */

  /* libuv handles of the current run; the jail is freed only once all are closed. */
  uv_poll_t pidfd_poll; /* the keeper's exit, when agtd started it (agtd reaps it) */
  uv_poll_t keep_poll;  /* the connection to the jail's keeper (keeper.h) */
  uv_pipe_t status_pipe;
  uv_timer_t stop_timer;
  int keep_fd, keep_open;
  int keeper_pidfd;     /* -1: a keeper that an earlier agtd started */
  agt_egress_t *egress; /* the proxy of a jail in network mode allow, while it runs */
  /* The cgroup's figures (memory, pids, CPU time) as last read, at usage_ns (agt_now_ns;
   * 0: not yet in this run): listings show them and have them read again in the threadpool
   * once they are older than AGT_JAIL_USAGE_MAX_AGE_MS (jail_usage.h); usage_failed: that
   * read found no cgroup. */
  struct agt_cgroup_stats usage;
  uint64_t usage_ns;
  int usage_failed;
  int usage_reading; /* in a read in the threadpool: not freed until it is done */
  int handles_open;
  int streams_open; /* the keeper's connection and the status pipe, still being read */
  int exited_seen;  /* the pidfd reported the exit */
  char status_buf[512];
  size_t status_len;

  int removing;       /* removed: free once the run is cleaned up */
  int rm_on_exit;     /* rm --force of a running jail */
  int rm_if_no_start; /* jail.run: remove the jail if its agent never runs */
  int cgroup_pending; /* cgroup still to be removed */
  /* A cgroup v1 migration running in the threadpool (see jail_spawn.c). */
  uv_work_t attach_work;
  int attach_pending;
  pid_t attach_pid;
  int attach_go_fd, attach_pidfd;
  agt_error_t attach_err;
  /* agtd's end of the start's go pipe or claim socket, from the go (or the claim) until the
   * start is answered: the jail's init waits for its close before it becomes agt-init
   * (jail_setup.h).  -1 otherwise. */
  int answer_fd;
  int freeing;
  struct agt_warm_s *warm;                  /* a prepared jail this record took, until its start */
  int started_warm;                         /* the last start claimed a prepared jail */
  void (*on_started)(struct agt_jail_s *j); /* the start is answered: the starter's (jail_warm.c) */
};

/* What the jail's run gives out, and who waits for it: its log, its terminal, the streams
 * that follow it, the requests answered at its start and at its end. */
struct agt_jail_output {
  /* Captured output: one log file, rotated once at half of limits.log_bytes (outlog.h). */
  struct agt_outlog log;
  unsigned short rows, cols;
  int tty_fd; /* the pty master (a copy of the keeper's, for input and size), while it runs */
  uv_pipe_t tty_pipe; /* written only: the keeper reads the terminal */
  int tty_open;
  int paused;   /* a stream's client is behind: the jail's output waits */
  char *screen; /* the last AGT_SCREEN_MAX bytes of output, replayed on attach */
  size_t screen_len;
  struct agt_stream_s *streams; /* stream.c's */
  unsigned nstreams;
  struct agt_pending_s *start_waiters; /* requests answered when start completes */
  struct agt_pending_s *exit_waiters;  /* requests answered when the jail exits */
  /* Connections refused by the proxies of the jail's finished runs, and by those before
   * this agtd loaded the jail (counted once then in net.log and net.log.1); the running
   * proxy counts its own (agt_egress_blocked).  agt_jail_refused adds them up. */
  uint64_t refused;
};

/* A jail: its record, its running state, its output. */
struct agt_jail_s {
  struct agt_jail_s *next;
  struct agtd_s *d;
  struct agt_jail_record rec;
  struct agt_jail_run run;
  struct agt_jail_output out;
};
typedef struct agt_jail_s agt_jail_t;

/* Who follows the jails' output (stream.c), handed to their supervision through the context
 * (daemon.h): told of each piece of a jail's output, once its keeper has logged it, and of
 * the jail's end. */
struct agt_output_watch {
  void (*output)(agt_jail_t *j, const char *data, size_t len);
  void (*end)(agt_jail_t *j, json_t *info);
};

const char *agt_jail_state_name(enum agt_jail_state s);

/* Records. */
agt_jail_t *agt_jail_find(struct agtd_s *d, const char *name);
/* May path (clean, absolute, opened with no symlink) be shown to a jail: below one of
 * agtd's workspace roots, and nothing of agtd's state, layers or another jail's own
 * workspace.  what names it in errors ("workspace", "mount"). */
int agt_jail_path_allowed(struct agtd_s *d, const char *what, const char *path, agt_error_t *err);
/* Make the jail's persistent home, or give it to the jail's user when another uid owns it
 * (refused while a jail runs with it); at create and again at each start. */
int agt_jail_home_prepare(agt_jail_t *j, agt_error_t *err);
/* A persistent home in use by a jail that runs (or starts, or stops), else NULL. */
agt_jail_t *agt_jail_home_user(struct agtd_s *d, const char *home_path);
/* Create a jail record from a jail.create request's params (validated here). */
int agt_jail_create(struct agtd_s *d, json_t *params, agt_jail_t **out, agt_error_t *err);
/* jail.run's prepared jails, handed to agt_jail_create_for_run (jail_warm.c's
 * agt_warm_for_run): take one for j, its directory become j's, or NULL; give back the one j
 * took when j is not made after all. */
struct agt_jail_prepared {
  struct agt_warm_s *(*take)(agt_jail_t *j);
  void (*give_back)(agt_jail_t *j);
};
/* The same for jail.run: the jail may take a prepared jail and start faster. */
int agt_jail_create_for_run(struct agtd_s *d, json_t *params,
                            const struct agt_jail_prepared *prepared, agt_jail_t **out,
                            agt_error_t *err);
int agt_jail_save(agt_jail_t *j, agt_error_t *err);
/* jail.start's `secrets` {NAME: VALUE}: values again for some of the jail's secrets (those a
 * reboot took: secrets_lost), set in its environment and kept (secrets.h).  Only names among
 * the jail's secrets, and only while it is not running: 0, or -1 with err. */
int agt_jail_secrets_again(agt_jail_t *j, json_t *values, agt_error_t *err);
/* May j start: do the running jails' disk limits, what the jails' disk holds and j's limit
 * fit on it (disk.h)?  A clear error when not. */
int agt_jail_disk_promise(struct agtd_s *d, const agt_jail_t *j, agt_error_t *err);
/* A jail whose record says it runs, loaded by a new agtd (jail_run.c's agt_jail_find_again). */
typedef void (*agt_jail_find_fn)(struct agt_jail_s *j);
/* Load every record under <state>/jails; jails that were running when agtd went away are
 * handed to find_again (found under their keepers, keeper.h, or marked exited), and the
 * cgroups of those that do not run are removed. */
int agt_jail_load_all(struct agtd_s *d, agt_jail_find_fn find_again, agt_error_t *err);
/* The jail as listings show it (jail.ls, jail.inspect with full): its record, and for a
 * running jail the cgroup's figures ("usage", with their age in ms) and the connections
 * its proxy refused. */
json_t *agt_jail_to_json(agt_jail_t *j, int full);
/* The same for a listing of many jails (jail.ls): the cgroup's figures as last read, none
 * read here (jail_usage.h reads them off the loop). */
json_t *agt_jail_listing_json(agt_jail_t *j);
/* jail.ls's columns (docs/PROTOCOL.md): a column's number for agt_jail_row, -1 for a name
 * that is none; the names, NULL-terminated. */
int agt_jail_column(const char *name);
const char *const *agt_jail_columns(void);
/* The jail as a row of those columns: a value each, null where the jail has none (a
 * running jail's exit code, a jail's usage not read yet).  The usage columns are the
 * cgroup's figures as last read: none is read here. */
json_t *agt_jail_row(agt_jail_t *j, const int *cols, size_t n);
/* Whether column col shows the cgroup's figures. */
int agt_jail_column_is_usage(int col);
/* Starting, running or stopping: its processes and cgroup exist. */
int agt_jail_runs_now(const agt_jail_t *j);
/* How old the cgroup figures of a listing may be before it has them read again: a listing
 * of many jails reads each jail's cgroup files at most this often (jail.ls among 1000
 * jails, docs/BENCH.md 8). */
#define AGT_JAIL_USAGE_MAX_AGE_MS 2000
/* The running jail's cgroup figures, read again here when older than max_age_ms (0:
 * always): for one jail (jail.inspect).  Their age in ms in *age_ms.  -1 when the cgroup
 * cannot be read. */
int agt_jail_usage(agt_jail_t *j, uint64_t max_age_ms, struct agt_cgroup_stats *s,
                   uint64_t *age_ms);
/* The figures as last read, and their age in ms: -1 when the jail does not run or has none
 * yet. */
int agt_jail_usage_cached(const agt_jail_t *j, struct agt_cgroup_stats *s, uint64_t *age_ms);
/* Connections the jail's proxies refused (decision "blocked" in its net.log), kept in
 * memory: no file is read. */
uint64_t agt_jail_refused(const agt_jail_t *j);
/* Stop the jail's proxy (if any), its count of refused connections kept in the jail's. */
void agt_jail_stop_egress(agt_jail_t *j);
/* Remove the jail's directory, workspace (when agtd made it) and cgroup, and free it once
 * its handles are closed.  The jail must not be running. */
int agt_jail_remove(agt_jail_t *j, agt_error_t *err);
void agt_jail_free(agt_jail_t *j);
/* Free a removed jail once nothing refers to it any more (handles, cgroup, threadpool). */
void agt_jail_maybe_free(agt_jail_t *j);
/* Free at once; for shutdown, after the loop has closed every handle. */
void agt_jail_free_now(agt_jail_t *j);
/* The start is answered (or over): the jail's init may become agt-init (run.answer_fd). */
void agt_jail_release_init(agt_jail_t *j);

/* Run (jail_spawn.c). */
int agt_jail_start(agt_jail_t *j, agt_error_t *err);
/* Whether the jail stands on the rootfs build id (as its base or one of its layers). */
int agt_jail_uses_rootfs(const agt_jail_t *j, const char *id);
/* Make the jail's directory: its disk layer with the jail's limit, the root's mount point,
 * and the jail user's passwd, group and home in the upper layer.  On failure, none of it. */
int agt_jail_make_dir(agt_jail_t *j, agt_error_t *err);
/* The jail user's /etc/passwd and /etc/group; newly allocated. */
void agt_jail_identity(agt_jail_t *j, char **passwd, char **group);
char *agt_identity_passwd(uid_t uid, gid_t gid);
char *agt_identity_group(gid_t gid);
/* SIGTERM to the agent, SIGKILL after grace_ms. */
int agt_jail_stop(agt_jail_t *j, uint64_t grace_ms, agt_error_t *err);
int agt_jail_kill(agt_jail_t *j, int sig, agt_error_t *err);

/* Supervision (supervise.c). */
/* A run under its keeper: keep_fd the connection to it, keeper_pidfd its pidfd when agtd is
 * its parent (else -1), status_fd the start's status pipe (-1: the start is over). */
int agt_jail_supervise(agt_jail_t *j, int keep_fd, int keeper_pidfd, int status_fd,
                       agt_error_t *err);
/* A running jail's keeper, found again by a new agtd: its connection, HELLO and fds (the
 * init's pidfd, the terminal's master or -1; taken). */
struct agt_keep_hdr;
int agt_jail_adopt(agt_jail_t *j, int keep_fd, const struct agt_keep_hdr *h, int fds[2],
                   agt_error_t *err);
/* Read captured output from absolute offset `from`, at most max bytes. */
int agt_jail_log_read(agt_jail_t *j, uint64_t from, size_t max, char **data, size_t *len,
                      uint64_t *start, agt_error_t *err);
/* Pause or resume reading the jail's output (a stream's client is behind). */
void agt_jail_output_pause(agt_jail_t *j, int pause);
/* Called when a run is fully over (process reaped, pipes drained). */
void agt_jail_run_finished(agt_jail_t *j);

#endif
