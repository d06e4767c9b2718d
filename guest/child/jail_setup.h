/* The jail's side of a start: everything done between clone() and the agent's exec, in
 * the order it happens.  This runs in a child of a multi-threaded daemon, so it allocates
 * nothing and takes no locks: the parent precomputes every string in a plan, and the child
 * only makes system calls.  A failing step writes {errno, step} to the status pipe and
 * exits 127; the pipe closing on exec tells the parent the agent is running. */
#ifndef AGT_JAIL_SETUP_H
#define AGT_JAIL_SETUP_H

#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

#define AGT_PLAN_PATH 4096

/* Fixed fd numbers inside the child, after it has tidied its fd table. */
enum {
  AGT_CHILD_SYNC_FD = 3,    /* read: the parent says go once the cgroup is joined (a prepared
                             * jail: the claim); its end's close then says the start is
                             * answered, and the init becomes agt-init */
  AGT_CHILD_STATUS_FD = 4,  /* write: setup errors; closed on the agent's exec */
  AGT_CHILD_OUT_FD = 5,     /* write: the agent's stdout (with a terminal: the pty slave) */
  AGT_CHILD_ERR_FD = 6,     /* write: the agent's stderr (jail.exec's; a run's goes to its
                             * stdout pipe, one pipe, so the log has them in the order written) */
  AGT_CHILD_NETNS_FD = 7,   /* a ready network namespace from the pool, if any */
  AGT_CHILD_CONSOLE_FD = 8, /* a socket to send the pty master on, for a jail on a terminal */
  AGT_CHILD_INIT_FD = 9,    /* the program agt-init (init.c), or closed: the init stays as is */
  AGT_CHILD_FIRST_FREE = 10,
  AGT_CHILD_NFDS = 6,
};

/* The priorities of a realtime start, agtd's loop above the jail's init above its agent
 * (start_prio.h). */
enum {
  AGT_PRIO_AGTD = 3,  /* agtd's loop while a start is in flight */
  AGT_PRIO_INIT = 2,  /* a prepared jail, from its ready byte to its agent's exec */
  AGT_PRIO_AGENT = 1, /* the agent's exec, until its init takes it back */
};

struct agt_setup_error {
  int errnum;
  char step[252];
};

/* A prepared jail (jail_warm.c) is built up to the point where its request matters, then
 * says it is ready (one byte "r") and waits on its control socket (at AGT_CHILD_SYNC_FD) for
 * the claim: this header, then the strings (each NUL-terminated) hostname, PATH, cwd,
 * passwd, group, the remount options of the jail's tmpfs (its size, or "" to keep it),
 * argv[argc], env[envc]; with the workspace's detached mount (open_tree) as SCM_RIGHTS, and
 * after it the persistent home's when `home` says so. */
struct agt_claim {
  uint32_t uid, gid;
  uint64_t nofile;
  uint16_t rows, cols;
  uint32_t tty; /* 1: the agent gets a terminal (the console socket is used) */
  uint32_t argc, envc;
  uint32_t len;  /* bytes of the strings after the header */
  uint32_t home; /* 1: a second fd, the persistent home's detached mount for /home/agent */
};
#define AGT_CLAIM_MAX (192u * 1024)

/* /dev/shm's share of a jail's tmpfs. */
#define AGT_JAIL_SHM_BYTES (64ULL << 20)

/* The size of a jail's one tmpfs, which holds its /tmp, /dev/shm and an ephemeral home
 * (jail_setup.c): the sizes each had as a tmpfs of its own, added up (`tmp` bytes for /tmp
 * and for the home, AGT_JAIL_SHM_BYTES for /dev/shm), so that together they hold what they
 * did; one of them may now take what the others leave.  At most UINT64_MAX. */
static inline uint64_t agt_jail_tmpfs_bytes(uint64_t tmp, int ephemeral_home)
{
  uint64_t n = tmp + AGT_JAIL_SHM_BYTES;

  if (n < tmp)
    return UINT64_MAX;
  if (ephemeral_home)
    n = n + tmp < n ? UINT64_MAX : n + tmp;
  return n;
}

/* A guest directory or file bound at its own path in the jail (read-only unless writable). */
struct agt_plan_mount {
  const char *path;
  int writable;
};

/* A file written into an ephemeral home at the start (a lockdown's clean copy). */
struct agt_plan_file {
  const char *path; /* relative to /home/agent, clean (agtd checked it) */
  const char *content;
  size_t len;
};

struct agt_spawn_plan {
  int warm;     /* a prepared jail: no workspace or hostname yet, it waits for its claim */
  int realtime; /* a prepared jail: SCHED_FIFO from its ready byte to the agent's exec */
  const char *passwd, *group; /* a prepared jail: for uid and gid, the likely jail user */
  int landlock_fd;            /* a Landlock ruleset made ahead, or -1 (made at the end) */
  /* A prepared jail loads seccomp_ahead before its claim and `seccomp` (the rest) after. */
  const struct sock_fprog *seccomp_ahead;
  const char *hostname;
  char overlay_opts[3 * AGT_PLAN_PATH + 64];
  const char *jail_dir;  /* the overlay options are relative to it */
  const char *merged;    /* the overlay mount point */
  const char *workspace; /* bind source, an absolute guest path */
  const char *home;      /* bound read-write at /home/agent (a persistent home), or NULL */
  int home_ephemeral;    /* an ephemeral home: a directory of the jail's tmpfs at /home/agent */
  const struct agt_plan_file *home_files; /* written into the ephemeral home, the jail user's */
  size_t nhome_files;
  const struct agt_plan_mount *mounts; /* cold starts only: a prepared jail takes none (its
                                        * home comes with the claim) */
  size_t nmounts;
  char tmpfs_opts[64]; /* the jail's tmpfs: agt_jail_tmpfs_bytes() as size=, and a mode */
  const char *cwd;
  const char *path; /* the jail's PATH, searched for argv[0] */
  char *const *argv;
  char *const *envp;
  uid_t uid;
  gid_t gid;
  unsigned short rows, cols; /* the terminal's first size */
  int stdin_pipe;            /* jail.exec with stdin and no terminal: fds[5] is the read end of the
                                command's stdin, not a console socket */
  uint64_t nofile;
  int cap_last;
  const struct sock_fprog *seccomp;
  /* In the parent's numbering: sync read, status write, out write, err write, netns (or -1:
   * then clone3 makes the network namespace or the jail shares the guest's), console (or -1:
   * no terminal). */
  int fds[AGT_CHILD_NFDS];
  /* agt-init (init.c), a sealed memfd its user may execute and not read: once the agent
   * runs, the init execs it, and drops its copy of agtd.  -1: the init stays a copy. */
  int init_fd;
};

/* agt-init's static binary, linked into agtd (init_blob.S, made by meson). */
extern const char agt_init_blob[];
extern const char agt_init_blob_end[];

/* agtd's argv strings (argv[0] up to the end of the last one), blanked in each jail's init. */
void agt_jail_set_title_area(char *start, size_t len);

/* Runs in the child; never returns. */
__attribute__((noreturn)) void agt_jail_child(const struct agt_spawn_plan *p);
/* jail.exec's child: fds[4] is the pidfd of the jail's init, whose namespaces it joins. */
__attribute__((noreturn)) void agt_jail_exec_child(const struct agt_spawn_plan *p);

#endif
