/* A jail's keeper: the small process that holds what a jail needs to outlive agtd, as conmon
 * holds a container's across its daemon.  It is the parent of the jail's init (so it, not
 * agtd, reaps it and learns its exit status), holds the read ends of the agent's output pipes
 * or the master of its terminal, writes its log (outlog.h), and records its exit in the
 * jail's directory.  agtd talks to it over a SOCK_SEQPACKET connection: the socketpair it was
 * started with, or, for a later agtd, its socket keeper.sock in the jail's directory.
 *
 * The keeper runs as root outside the jail (agtd's namespaces): nothing of it is visible
 * from the jail (another pid namespace, and its socket is outside the jail's root).  It
 * never parses what the jail writes: output is bytes copied to the log and to agtd.  It is a
 * static program of its own (keeper.c, libc only), so that it costs a few pages per jail.
 *
 * Its fds at exec: */
#ifndef AGT_KEEPER_H
#define AGT_KEEPER_H

#include <stdint.h>

enum {
  AGT_KEEP_CTL_FD = 3,     /* the connection to agtd that started it */
  AGT_KEEP_PIDFD = 4,      /* the jail's init */
  AGT_KEEP_OUT_FD = 5,     /* read end of the agent's stdout pipe, or closed */
  AGT_KEEP_ERR_FD = 6,     /* read end of a stderr pipe of its own, or closed (a run's stderr
                            * goes to its stdout pipe: guest/jail/jail_spawn.c) */
  AGT_KEEP_CONSOLE_FD = 7, /* where the jail sends its terminal's master, or closed */
  AGT_KEEP_DIR_FD = 8,     /* the jail's directory (it may be renamed: a prepared jail's) */
  AGT_KEEP_NFDS = 6,
};

#define AGT_KEEP_SOCKET "keeper.sock" /* in the jail's directory */
#define AGT_KEEP_EXIT "exit"          /* in the jail's directory: "code signal finished\n" */
#define AGT_KEEP_VERSION 1
#define AGT_KEEP_DATA_MAX 65536

enum agt_keep_type {
  /* keeper -> agtd */
  AGT_KEEP_HELLO = 1, /* on each connection: pid, state; SCM_RIGHTS pidfd [, master] */
  AGT_KEEP_OUT,       /* output (data), already in the log; pos is the log's after it */
  AGT_KEEP_TTY,       /* the terminal's master arrived: SCM_RIGHTS master */
  AGT_KEEP_EXIT_MSG,  /* the init was reaped and all its output read: code, signal, finished */
  /* agtd -> keeper */
  AGT_KEEP_BUDGET = 100, /* the log's budget in bytes: size */
};

/* Every record (one SOCK_SEQPACKET message) starts with this; data follows (len bytes). */
struct agt_keep_hdr {
  uint32_t type;
  uint32_t len;
  uint32_t version;
  int32_t pid;
  int32_t exited;                /* HELLO: the init is reaped (code, signal, finished valid) */
  int32_t code;                  /* the exit code, 128 + signal when killed */
  int32_t signal;                /* the signal that killed it, or 0 */
  int32_t tty;                   /* HELLO: a terminal master comes with it */
  int64_t finished;              /* when the init was reaped (seconds since the epoch) */
  uint64_t base, size, old_base; /* the log's position (outlog.h) after this record */
};

#endif
