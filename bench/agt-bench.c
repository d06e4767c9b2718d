/* agt-bench: the driver behind bench/run.sh.  It starts jails through agtd (over agtd's unix
 * socket with the project's own RPC client, so no client process is spawned per request) and
 * through bubblewrap (posix_spawn), with the same rootfs, workspace, payload, user and seccomp
 * filter, and prints what it measured as "key value" lines for run.sh to tabulate.
 *
 *   agt-bench seccomp FILE           write agtd's seccomp filter (BPF) for bwrap --seccomp
 *   agt-bench check OPTIONS          the payload's view of itself (uid, caps, seccomp) in both
 *   agt-bench latency OPTIONS        sequential starts, agtd and bwrap alternating
 *   agt-bench memory OPTIONS         --count idle jails of each; MemAvailable drop per jail
 *   agt-bench idle OPTIONS           --count idle agtd jails, left running (bench/scale.sh)
 *   agt-bench burst OPTIONS          --count agtd jails started at once from --clients
 *                                    connections; each start's round trip, then removed
 *
 * bwrap runs as the bench user, the way it is meant to run (not setuid: it makes a user
 * namespace).  The driver keeps root as its effective uid (it talks to agtd, reads other
 * processes' smaps) and makes the bench user its real uid, so that POSIX_SPAWN_RESETIDS
 * gives each bwrap the bench user's uid and gid without a fork of the driver. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "cli.h"
#include "error.h"
#include "jail_seccomp.h"
#include "rpc.h"
#include "series.h"
#include "xalloc.h"

extern char **environ;

enum {
  OPT_SOCKET = 256,
  OPT_ROOTFS,
  OPT_ROOT,
  OPT_WORKSPACE,
  OPT_BWRAP,
  OPT_SECCOMP,
  OPT_RUNS,
  OPT_WARMUP,
  OPT_COUNT,
  OPT_SETTLE,
  OPT_UID,
  OPT_AGTD_PID,
  OPT_ONLY,
  OPT_GAP,
  OPT_NET,
  OPT_DISK,
  OPT_CLIENTS,
};

static const struct agt_opt options[] = {
    {OPT_SOCKET, "socket", "PATH", "agtd's socket"},
    {OPT_ROOTFS, "rootfs", "ID", "the rootfs id agtd's jails use"},
    {OPT_ROOT, "root", "DIR", "the same rootfs tree, bound read-only at / by bwrap"},
    {OPT_WORKSPACE, "workspace", "DIR", "bound read-write at /work (owned by --uid)"},
    {OPT_BWRAP, "bwrap", "PATH", "the bwrap binary (/usr/bin/bwrap)"},
    {OPT_SECCOMP, "seccomp", "FILE", "a BPF program bwrap loads with --seccomp (none)"},
    {OPT_RUNS, "runs", "N", "measured starts per tool (200)"},
    {OPT_WARMUP, "warmup", "N", "unmeasured starts per tool first (20)"},
    {OPT_COUNT, "count", "N", "idle jails per tool for memory (100)"},
    {OPT_SETTLE, "settle-ms", "MS", "wait before each memory reading, then until steady (1000)"},
    {OPT_UID, "uid", "UID", "the bench user: bwrap runs as it, it owns the workspace (1000)"},
    {OPT_AGTD_PID, "agtd-pid", "PID", "agtd's pid, for its RSS"},
    {OPT_ONLY, "only", "TOOL", "latency, memory: run only agtd or only bwrap (both)"},
    {OPT_GAP, "gap-ms", "MS", "latency: pause between starts, not measured (0)"},
    {OPT_DISK, "disk", "BYTES", "agtd's jails: what each may write to its root (agtd's default)"},
    {OPT_CLIENTS, "clients", "N", "burst: client connections starting jails at once (16)"},
    {OPT_NET, "net", "MODE", "agtd's jails: network mode none, allow or open (agtd's default)"},
    {0, NULL, NULL, NULL},
};

struct cfg {
  const char *socket, *rootfs_id, *root, *workspace, *bwrap, *seccomp, *only, *net;
  uint64_t runs, warmup, count, settle_ms, uid, agtd_pid, gap_ms, disk, clients;
};

static int set_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct cfg *c = ctx;

  switch (key) {
  case OPT_SOCKET:
    c->socket = arg;
    return 0;
  case OPT_ROOTFS:
    c->rootfs_id = arg;
    return 0;
  case OPT_ROOT:
    c->root = arg;
    return 0;
  case OPT_WORKSPACE:
    c->workspace = arg;
    return 0;
  case OPT_BWRAP:
    c->bwrap = arg;
    return 0;
  case OPT_SECCOMP:
    c->seccomp = arg;
    return 0;
  case OPT_RUNS:
    return agt_parse_u64("--runs", arg, &c->runs, err);
  case OPT_WARMUP:
    return agt_parse_u64("--warmup", arg, &c->warmup, err);
  case OPT_COUNT:
    return agt_parse_u64("--count", arg, &c->count, err);
  case OPT_SETTLE:
    return agt_parse_u64("--settle-ms", arg, &c->settle_ms, err);
  case OPT_UID:
    return agt_parse_u64("--uid", arg, &c->uid, err);
  case OPT_AGTD_PID:
    return agt_parse_u64("--agtd-pid", arg, &c->agtd_pid, err);
  case OPT_ONLY:
    if (strcmp(arg, "agtd") != 0 && strcmp(arg, "bwrap") != 0)
      return agt_error_kind(err, AGT_E_INVALID, "--only takes agtd or bwrap");
    c->only = arg;
    return 0;
  case OPT_GAP:
    return agt_parse_u64("--gap-ms", arg, &c->gap_ms, err);
  case OPT_NET:
    c->net = arg;
    return 0;
  case OPT_DISK:
    return agt_parse_u64("--disk", arg, &c->disk, err);
  case OPT_CLIENTS:
    return agt_parse_u64("--clients", arg, &c->clients, err);
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* ---- /proc ---- */

static long meminfo_kib(const char *field)
{
  cleanup_file FILE *f = fopen("/proc/meminfo", "re");
  size_t len = strlen(field);
  char line[256];

  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':')
      return strtol(line + len + 1, NULL, 10);
  return -1;
}

/* Memory nothing can reclaim: anonymous and shmem pages, unreclaimable slab, kernel stacks,
 * page tables and per-cpu areas.  Less disturbed than MemAvailable by page cache coming and
 * going elsewhere on the machine.  Each part is reported too, so that a difference between
 * the tools shows where it lies. */
static const char *const pinned_fields[] = {"AnonPages",   "Shmem",      "SUnreclaim",
                                            "KernelStack", "PageTables", "Percpu"};
#define NPINNED (sizeof pinned_fields / sizeof pinned_fields[0])

struct pinned {
  long f[NPINNED];
  long sum;
};

static void pinned_read(struct pinned *p)
{
  p->sum = 0;
  for (size_t i = 0; i < NPINNED; i++) {
    long v = meminfo_kib(pinned_fields[i]);
    p->f[i] = v > 0 ? v : 0;
    p->sum += p->f[i];
  }
}

/* Memory readings once the machine has settled: after settle_ms, MemAvailable is read every
 * 250 ms until the last five readings lie within 1 MiB of each other (teardown of earlier
 * jails, network namespaces above all, finishes asynchronously), at most 15 s.  *avail is the
 * median of those five, *pinned the pinned memory at that point.  Returns 0 when it settled. */
static int mem_settled(uint64_t settle_ms, long *avail, struct pinned *pinned)
{
  uint64_t end;
  long v[5], sorted[5];
  int n = 0, settled = 0;

  sleep_ms(settle_ms);
  end = now_ns() + 15000000000ull;
  for (;;) {
    long lo, hi;
    v[n % 5] = meminfo_kib("MemAvailable");
    n++;
    if (n >= 5) {
      lo = hi = v[0];
      for (int i = 1; i < 5; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
      }
      if (hi - lo < 1024) {
        settled = 1;
        break;
      }
      if (now_ns() > end)
        break;
    }
    sleep_ms(250);
  }
  memcpy(sorted, v, sizeof sorted);
  for (int i = 1; i < 5; i++)
    for (int k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
      long t = sorted[k];
      sorted[k] = sorted[k - 1];
      sorted[k - 1] = t;
    }
  *avail = sorted[2];
  pinned_read(pinned);
  return settled ? 0 : -1;
}

static void print_mem(const char *tool, size_t count, long avail0, long avail1,
                      const struct pinned *pin0, const struct pinned *pin1, int unsettled)
{
  printf("mem.%s.%zu.unsettled %d\n", tool, count, unsettled);
  printf("mem.%s.%zu.kib_per_jail %.0f\n", tool, count, (double)(avail0 - avail1) / (double)count);
  printf("mem.%s.%zu.pinned_kib_per_jail %.0f\n", tool, count,
         (double)(pin1->sum - pin0->sum) / (double)count);
  for (size_t i = 0; i < NPINNED; i++)
    printf("mem.%s.%zu.%s_kib_per_jail %.1f\n", tool, count, pinned_fields[i],
           (double)(pin1->f[i] - pin0->f[i]) / (double)count);
}

/* "Field:  123 kB" from a /proc/PID file; -1 when the process or field is gone. */
static long proc_kib(pid_t pid, const char *file, const char *field)
{
  char path[64], line[256];
  size_t len = strlen(field);
  cleanup_file FILE *f = NULL;

  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  f = fopen(path, "re");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':')
      return strtol(line + len + 1, NULL, 10);
  return -1;
}

struct proc_ent {
  pid_t pid, ppid;
  char comm[16];
};

struct proc_table {
  struct proc_ent *e;
  size_t n;
};

static int cmp_pid(const void *a, const void *b)
{
  const struct proc_ent *x = a, *y = b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

static void proc_table_load(struct proc_table *t)
{
  cleanup_dir DIR *d = opendir("/proc");
  size_t cap = 1024;
  struct dirent *de;

  t->n = 0;
  t->e = xmalloc(cap * sizeof *t->e);
  while (d && (de = readdir(d)) != NULL) {
    char path[300], buf[512], *lp, *rp;
    struct proc_ent *p;
    cleanup_close int fd = -1;
    ssize_t len;

    if (!isdigit((unsigned char)de->d_name[0]))
      continue;
    snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || (len = read(fd, buf, sizeof buf - 1)) <= 0)
      continue;
    buf[len] = '\0';
    lp = strchr(buf, '(');
    rp = strrchr(buf, ')');
    if (lp == NULL || rp == NULL || rp < lp || rp[1] == '\0')
      continue;
    if (t->n == cap) {
      cap *= 2;
      t->e = xrealloc(t->e, cap * sizeof *t->e);
    }
    p = &t->e[t->n];
    p->pid = (pid_t)atoi(buf);
    snprintf(p->comm, sizeof p->comm, "%.*s", (int)(rp - lp - 1), lp + 1);
    /* after ") " come the state and the ppid */
    if (sscanf(rp + 2, "%*c %d", &p->ppid) != 1)
      continue;
    t->n++;
  }
  qsort(t->e, t->n, sizeof *t->e, cmp_pid);
}

static const struct proc_ent *proc_find(const struct proc_table *t, pid_t pid)
{
  struct proc_ent key = {.pid = pid};
  return bsearch(&key, t->e, t->n, sizeof *t->e, cmp_pid);
}

static int proc_descends(const struct proc_table *t, pid_t pid, pid_t root)
{
  for (int depth = 0; depth < 64 && pid > 1; depth++) {
    const struct proc_ent *p = proc_find(t, pid);
    if (p == NULL)
      return 0;
    if (p->ppid == root)
      return 1;
    pid = p->ppid;
  }
  return 0;
}

/* Processes named comm below root (other jails on the machine are not ours to count). */
static size_t count_comm(const char *comm, pid_t root)
{
  struct proc_table t;
  size_t n = 0;

  proc_table_load(&t);
  for (size_t i = 0; i < t.n; i++)
    n += strcmp(t.e[i].comm, comm) == 0 && proc_descends(&t, t.e[i].pid, root);
  free(t.e);
  return n;
}

/* Sum of Pss (smaps_rollup) over the descendants of root; *procs counts them. */
static long pss_of_descendants(pid_t root, size_t *procs)
{
  struct proc_table t;
  long sum = 0;

  *procs = 0;
  proc_table_load(&t);
  for (size_t i = 0; i < t.n; i++) {
    long k;
    if (!proc_descends(&t, t.e[i].pid, root))
      continue;
    k = proc_kib(t.e[i].pid, "smaps_rollup", "Pss");
    if (k >= 0) {
      sum += k;
      (*procs)++;
    }
  }
  free(t.e);
  return sum;
}

/* Wait until `want` processes named comm exist below root (or, with down, at most want). */
static int wait_comm(const char *comm, pid_t root, size_t want, int down, uint64_t timeout_ms,
                     agt_error_t *err)
{
  uint64_t end = now_ns() + timeout_ms * 1000000ull;
  size_t n;

  for (;;) {
    n = count_comm(comm, root);
    if (down ? n <= want : n >= want)
      return 0;
    if (now_ns() > end)
      return agt_error_kind(err, AGT_E_INTERNAL, "%zu '%s' processes after %llu ms, want %s%zu", n,
                            comm, (unsigned long long)timeout_ms, down ? "at most " : "", want);
    sleep_ms(20);
  }
}

/* ---- agtd ---- */

static json_t *argv_json(const char *const *argv)
{
  json_t *a = json_array();

  for (; *argv; argv++)
    json_array_append_new(a, json_string(*argv));
  return a;
}

/* jail.run: returns when agtd has confirmed the agent's exec.  *rtt_ns is the client's round
 * trip, *start_ms agtd's own figure (request arrival to confirmed exec). */
static int agtd_run(agt_rpc_t *r, const struct cfg *c, const char *name, const char *const *argv,
                    uint64_t *t0, uint64_t *rtt_ns, double *start_ms, int *warm, agt_error_t *err)
{
  json_t *params = json_pack("{s:s, s:s, s:s, s:o}", "name", name, "rootfs", c->rootfs_id,
                             "workspace", c->workspace, "argv", argv_json(argv));
  json_t *res = NULL;

  if (c->net)
    json_object_set_new(params, "network", json_pack("{s:s}", "mode", c->net));
  if (c->disk) /* many jails at once: the default limit (a tenth of the disk) allows 9 */
    json_object_set_new(params, "limits", json_pack("{s:I}", "disk", (json_int_t)c->disk));
  int ret;

  *t0 = now_ns();
  ret = agt_rpc_call(r, "jail.run", params, &res, err);
  *rtt_ns = now_ns() - *t0;
  json_decref(params);
  if (ret < 0)
    return agt_error_wrap(err, "jail.run %s", name);
  if (start_ms)
    *start_ms = json_real_value(json_object_get(res, "start_ms"));
  if (warm)
    *warm = json_is_true(json_object_get(res, "warm"));
  json_decref(res);
  return 0;
}

/* Until agtd has built its prepared jails again (at most 200 ms): neither tool's start is
 * measured while agtd works in the background.  Returns whether the pool was full. */
static int agtd_settle(agt_rpc_t *r, agt_error_t *err)
{
  for (int i = 0; i < 1000; i++) {
    json_t *res = NULL, *w;
    int full;

    if (agt_rpc_call(r, "daemon.status", NULL, &res, err) < 0)
      return -1;
    w = json_object_get(res, "warm");
    full = !json_is_true(json_object_get(w, "enabled")) ||
           json_integer_value(json_object_get(w, "ready")) >=
               json_integer_value(json_object_get(w, "target"));
    json_decref(res);
    if (full)
      return 1;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static int agtd_simple(agt_rpc_t *r, const char *method, const char *name, int force,
                       json_t **result, agt_error_t *err)
{
  json_t *params =
      force ? json_pack("{s:s, s:b}", "name", name, "force", 1) : json_pack("{s:s}", "name", name);
  json_t *res = NULL;
  int ret = agt_rpc_call(r, method, params, &res, err);

  json_decref(params);
  if (ret < 0)
    return agt_error_wrap(err, "%s %s", method, name);
  if (result)
    *result = res;
  else
    json_decref(res);
  return 0;
}

/* After the agent exited: its whole output, then the jail is removed (*rm_ns: how long the
 * removal took, when not NULL). */
static char *agtd_collect(agt_rpc_t *r, const char *name, uint64_t *rm_ns, agt_error_t *err)
{
  uint64_t t;
  json_t *params, *res = NULL;
  char *out = NULL;
  size_t len;

  if (agtd_simple(r, "jail.wait", name, 0, NULL, err) < 0)
    return NULL;
  params = json_pack("{s:s}", "name", name);
  if (agt_rpc_call(r, "jail.logs", params, &res, err) < 0) {
    json_decref(params);
    agt_error_wrap(err, "jail.logs %s", name);
    return NULL;
  }
  json_decref(params);
  out = agt_base64_decode(json_string_value(json_object_get(res, "data_b64")), &len);
  json_decref(res);
  if (out == NULL) {
    agt_error_kind(err, AGT_E_PROTO, "jail.logs %s: bad data_b64", name);
    return NULL;
  }
  out = xrealloc(out, len + 1);
  out[len] = '\0';
  t = now_ns();
  if (agtd_simple(r, "jail.rm", name, 0, NULL, err) < 0) {
    free(out);
    return NULL;
  }
  if (rm_ns)
    *rm_ns = now_ns() - t;
  return out;
}

/* ---- bubblewrap ---- */

static char **bwrap_argv(const struct cfg *c, const char *const *payload)
{
  const char *const head[] = {
      c->bwrap,
      "--unshare-all", /* user (bwrap runs unprivileged), ipc, pid, uts, cgroup, net */
      "--die-with-parent",
      "--new-session",
      "--cap-drop",
      "ALL",
      "--ro-bind", /* the rootfs tree agtd's overlays use as their lower layer */
      c->root,
      "/",
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--tmpfs",
      "/tmp",
      "--bind",
      c->workspace,
      "/work",
      "--chdir",
      "/work",
      "--hostname",
      "agt-bench",
  };
  size_t nh = sizeof head / sizeof head[0], np = 0, k = 0;
  char **v;

  while (payload[np])
    np++;
  v = xzalloc((nh + 2 + np + 1) * sizeof *v);
  for (size_t i = 0; i < nh; i++)
    v[k++] = (char *)head[i];
  if (c->seccomp) {
    v[k++] = (char *)"--seccomp";
    v[k++] = (char *)"3";
  }
  for (size_t i = 0; i < np; i++)
    v[k++] = (char *)payload[i];
  return v;
}

/* Spawn bwrap as the bench user with stdout on out_fd (or /dev/null when -1). */
static int bwrap_spawn(const struct cfg *c, const char *const *payload, int out_fd, pid_t *pid,
                       agt_error_t *err)
{
  static char *envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", (char *)"HOME=/work", NULL};
  cleanup_free char **argv = bwrap_argv(c, payload);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int r;

  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (c->seccomp)
    posix_spawn_file_actions_addopen(&fa, 3, c->seccomp, O_RDONLY, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_RESETIDS);
  r = posix_spawn(pid, c->bwrap, &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (r != 0)
    return agt_error_make(err, r, "spawn %s", c->bwrap);
  return 0;
}

/* Run bwrap to completion; *t0 is taken just before the spawn.  Returns its output. */
static char *bwrap_run(const struct cfg *c, const char *const *payload, uint64_t *t0,
                       agt_error_t *err)
{
  size_t cap = 4096, len = 0;
  cleanup_free char *out = xmalloc(cap);
  cleanup_close int rd = -1;
  int p[2], st;
  pid_t pid;

  if (pipe2(p, O_CLOEXEC) < 0) {
    agt_error_make(err, errno, "pipe");
    return NULL;
  }
  rd = p[0];
  *t0 = now_ns();
  if (bwrap_spawn(c, payload, p[1], &pid, err) < 0) {
    close(p[1]);
    return NULL;
  }
  close(p[1]);
  for (;;) {
    ssize_t n = read(rd, out + len, cap - len - 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
    if (len + 1 == cap)
      out = xrealloc(out, cap *= 2);
  }
  out[len] = '\0';
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) {
      agt_error_make(err, errno, "waitpid bwrap");
      return NULL;
    }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    agt_error_kind(err, AGT_E_INTERNAL, "bwrap failed (status 0x%x): %.300s", st, out);
    return NULL;
  }
  return steal_pointer(&out);
}

/* The driver's real uid and gid become the bench user's; the effective ones stay root. */
static int become_bench_user(const struct cfg *c, agt_error_t *err)
{
  gid_t gid = (gid_t)c->uid;

  if (setgroups(1, &gid) < 0 || setresgid(gid, 0, 0) < 0 || setresuid((uid_t)c->uid, 0, 0) < 0)
    return agt_error_make(err, errno, "switch the real uid to %llu", (unsigned long long)c->uid);
  return 0;
}

static int parse_stamp(const char *out, uint64_t *ns, agt_error_t *err)
{
  char *end;

  errno = 0;
  *ns = strtoull(out, &end, 10);
  if (errno || end == out || *end != '\n')
    return agt_error_kind(err, AGT_E_INTERNAL, "the payload printed '%.100s', not a timestamp",
                          out);
  return 0;
}

/* ---- Modes ---- */

static int need(const struct cfg *c, int agtd, int bwrap, agt_error_t *err)
{
  if (agtd && (!c->socket || !c->rootfs_id || !c->workspace))
    return agt_error_kind(err, AGT_E_INVALID, "need --socket, --rootfs and --workspace");
  if (bwrap && (!c->root || !c->workspace))
    return agt_error_kind(err, AGT_E_INVALID, "need --root and --workspace");
  return 0;
}

static int mode_seccomp(const char *path, agt_error_t *err)
{
  struct agt_seccomp_prog p;
  cleanup_close int fd = -1;
  size_t len;

  if (agt_seccomp_compile(&p, err) < 0)
    return -1;
  len = p.prog.len * sizeof *p.prog.filter;
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, p.prog.filter, len) != (ssize_t)len) {
    agt_seccomp_release(&p);
    return agt_error_make(err, errno, "write '%s'", path);
  }
  printf("seccomp.instructions %u\n", (unsigned)p.prog.len);
  agt_seccomp_release(&p);
  return 0;
}

static void print_prefixed(const char *prefix, const char *text)
{
  while (*text) {
    size_t n = strcspn(text, "\n");
    printf("%s %.*s\n", prefix, (int)n, text);
    text += n;
    if (*text)
      text++;
  }
}

static int mode_check(const struct cfg *c, agt_error_t *err)
{
  static const char *const status[] = {"/bin/probe", "status", NULL};
  cleanup_free char *a = NULL, *b = NULL;
  agt_rpc_t r;
  uint64_t t0, rtt;

  if (need(c, 1, 1, err) < 0 || become_bench_user(c, err) < 0)
    return -1;
  if (agt_rpc_connect_unix(&r, c->socket, err) < 0)
    return -1;
  if (agtd_run(&r, c, "bench-check", status, &t0, &rtt, NULL, NULL, err) < 0 ||
      (a = agtd_collect(&r, "bench-check", NULL, err)) == NULL) {
    agt_rpc_close(&r);
    return -1;
  }
  agt_rpc_close(&r);
  if ((b = bwrap_run(c, status, &t0, err)) == NULL)
    return -1;
  print_prefixed("check.agtd", a);
  print_prefixed("check.bwrap", b);
  return 0;
}

static int mode_latency(const struct cfg *c, agt_error_t *err)
{
  static const char *const stamp[] = {"/bin/stamp", NULL};
  size_t n = (size_t)c->runs, total = (size_t)(c->runs + c->warmup);
  static const char *const keys[5] = {"lat.agtd_start_ms", "lat.agtd_rtt_ms", "lat.agtd_exec_ms",
                                      "lat.bwrap_exec_ms", "lat.agtd_rm_ms"};
  struct series s[5];
  uint64_t begin = now_ns();
  size_t warm_starts = 0, unsettled = 0;
  agt_rpc_t r;
  int ret = -1;

  if (n == 0)
    return agt_error_kind(err, AGT_E_INVALID, "--runs must be at least 1");
  if (need(c, 1, 1, err) < 0 || become_bench_user(c, err) < 0)
    return -1;
  if (agt_rpc_connect_unix(&r, c->socket, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    series_init(&s[i], keys[i], n);
  for (size_t i = 0; i < total; i++) {
    int measured = i >= c->warmup;
    /* Alternate which tool goes first, so neither always follows the other's teardown. */
    for (int k = 0; k < 2; k++) {
      int agtd = (int)((i + (size_t)k) % 2);
      uint64_t t0, stamp_ns;
      cleanup_free char *out = NULL;

      if (c->only && strcmp(c->only, agtd ? "agtd" : "bwrap") != 0)
        continue;
      if (c->gap_ms)
        sleep_ms(c->gap_ms);
      int settled = agtd_settle(&r, err);
      if (settled < 0)
        goto out;
      unsettled += measured && !settled;
      if (agtd) {
        char name[32];
        uint64_t rtt, rm;
        double start_ms = 0;
        int warm = 0;
        snprintf(name, sizeof name, "bench-lat-%zu", i);
        if (agtd_run(&r, c, name, stamp, &t0, &rtt, &start_ms, &warm, err) < 0 ||
            (out = agtd_collect(&r, name, &rm, err)) == NULL ||
            parse_stamp(out, &stamp_ns, err) < 0)
          goto out;
        if (measured) {
          warm_starts += (size_t)warm;
          s[0].v[s[0].n++] = start_ms;
          s[1].v[s[1].n++] = (double)rtt / 1e6;
          s[2].v[s[2].n++] = (double)(stamp_ns - t0) / 1e6;
          s[4].v[s[4].n++] = (double)rm / 1e6;
        }
      } else {
        if ((out = bwrap_run(c, stamp, &t0, err)) == NULL || parse_stamp(out, &stamp_ns, err) < 0)
          goto out;
        if (measured)
          s[3].v[s[3].n++] = (double)(stamp_ns - t0) / 1e6;
      }
    }
  }
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    if (s[i].n > 0)
      series_print(&s[i]);
  printf("lat.wall_s %.1f\n", (double)(now_ns() - begin) / 1e9);
  printf("lat.agtd_warm_starts %zu\n", warm_starts);
  printf("lat.unsettled %zu\n", unsettled);
  ret = 0;
out:
  agt_rpc_close(&r);
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    free(s[i].v);
  return ret;
}

static int memory_bwrap(const struct cfg *c, size_t count, agt_error_t *err)
{
  static const char *const idle[] = {"/bin/probe", "sleep", "600", NULL};
  cleanup_free pid_t *pids = xzalloc(count * sizeof *pids);
  size_t spawned = 0, procs;
  long before, after, pss;
  struct pinned pin0, pin1;
  int unsettled;
  uint64_t t0;
  int ret = -1;

  unsettled = mem_settled(c->settle_ms, &before, &pin0) < 0;
  t0 = now_ns();
  for (; spawned < count; spawned++)
    if (bwrap_spawn(c, idle, -1, &pids[spawned], err) < 0)
      goto out;
  if (wait_comm("probe", getpid(), count, 0, 120000 + 100 * (uint64_t)count, err) < 0)
    goto out;
  printf("mem.bwrap.%zu.start_s %.2f\n", count, (double)(now_ns() - t0) / 1e9);
  unsettled += mem_settled(c->settle_ms, &after, &pin1) < 0;
  pss = pss_of_descendants(getpid(), &procs);
  print_mem("bwrap", count, before, after, &pin0, &pin1, unsettled);
  printf("mem.bwrap.%zu.pss_kib_per_jail %.0f\n", count, (double)pss / (double)count);
  printf("mem.bwrap.%zu.procs_per_jail %.1f\n", count, (double)procs / (double)count);
  ret = 0;
out:
  t0 = now_ns();
  for (size_t i = 0; i < spawned; i++)
    kill(pids[i], SIGKILL); /* --die-with-parent takes the sandbox's pid 1, and so the rest */
  /* The driver is a subreaper: whatever the sandboxes leave comes back to it to be reaped. */
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
    ;
  if (wait_comm("probe", getpid(), 0, 1, 60000 + 100 * (uint64_t)count, err) < 0)
    ret = -1;
  if (ret == 0)
    printf("mem.bwrap.%zu.cleanup_s %.2f\n", count, (double)(now_ns() - t0) / 1e9);
  return ret;
}

static int memory_agtd(const struct cfg *c, size_t count, agt_error_t *err)
{
  static const char *const idle[] = {"/bin/probe", "sleep", "600", NULL};
  size_t started = 0, procs;
  long before, after, rss0, rss1, pss, pss_agtd;
  struct pinned pin0, pin1;
  int unsettled;
  pid_t apid = (pid_t)c->agtd_pid;
  uint64_t t0, rtt;
  agt_rpc_t r;
  int ret = -1;

  if (agt_rpc_connect_unix(&r, c->socket, err) < 0)
    return -1;
  unsettled = mem_settled(c->settle_ms, &before, &pin0) < 0;
  rss0 = apid ? proc_kib(apid, "status", "VmRSS") : -1;
  t0 = now_ns();
  for (; started < count; started++) {
    char name[32];
    uint64_t t;
    snprintf(name, sizeof name, "bench-mem-%zu", started);
    if (agtd_run(&r, c, name, idle, &t, &rtt, NULL, NULL, err) < 0)
      goto out;
  }
  if (apid && wait_comm("probe", apid, count, 0, 120000 + 100 * (uint64_t)count, err) < 0)
    goto out;
  printf("mem.agtd.%zu.start_s %.2f\n", count, (double)(now_ns() - t0) / 1e9);
  unsettled += mem_settled(c->settle_ms, &after, &pin1) < 0;
  rss1 = apid ? proc_kib(apid, "status", "VmRSS") : -1;
  pss_agtd = apid ? proc_kib(apid, "smaps_rollup", "Pss") : 0;
  pss = apid ? pss_of_descendants(apid, &procs) : 0;
  print_mem("agtd", count, before, after, &pin0, &pin1, unsettled);
  printf("mem.agtd.%zu.pss_kib_per_jail %.0f\n", count, (double)pss / (double)count);
  printf("mem.agtd.%zu.procs_per_jail %.1f\n", count, apid ? (double)procs / (double)count : 0.0);
  printf("mem.agtd.%zu.agtd_rss_before_kib %ld\n", count, rss0);
  printf("mem.agtd.%zu.agtd_rss_after_kib %ld\n", count, rss1);
  printf("mem.agtd.%zu.agtd_pss_kib %ld\n", count, pss_agtd);
  ret = 0;
out:
  t0 = now_ns();
  for (size_t i = 0; i < started; i++) {
    char name[32];
    snprintf(name, sizeof name, "bench-mem-%zu", i);
    if (agtd_simple(&r, "jail.rm", name, 1, NULL, err) < 0)
      ret = -1; /* the first error is kept: the cause */
  }
  agt_rpc_close(&r);
  if (apid && wait_comm("probe", apid, 0, 1, 60000 + 100 * (uint64_t)count, err) < 0)
    ret = -1;
  if (ret == 0)
    printf("mem.agtd.%zu.cleanup_s %.2f\n", count, (double)(now_ns() - t0) / 1e9);
  return ret;
}

static int mode_memory(const struct cfg *c, agt_error_t *err)
{
  if (c->count == 0)
    return agt_error_kind(err, AGT_E_INVALID, "--count must be at least 1");
  if (need(c, 1, 1, err) < 0 || become_bench_user(c, err) < 0)
    return -1;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
    return agt_error_make(err, errno, "become a subreaper");
  printf("mem.baseline_kib %ld\n", meminfo_kib("MemAvailable"));
  fflush(stdout);
  if ((!c->only || strcmp(c->only, "bwrap") == 0) && memory_bwrap(c, (size_t)c->count, err) < 0)
    return -1;
  fflush(stdout);
  if (c->only && strcmp(c->only, "agtd") != 0)
    return 0;
  return memory_agtd(c, (size_t)c->count, err);
}

/* --count idle jails (bench-idle-I), started one after another and left running: the caller
 * (bench/scale.sh) measures with them in place and removes them. */
static int mode_idle(const struct cfg *c, agt_error_t *err)
{
  static const char *const idle[] = {"/bin/probe", "sleep", "3600", NULL};
  pid_t apid = (pid_t)c->agtd_pid;
  long rss0, rss1;
  uint64_t t0, t, rtt;
  agt_rpc_t r;
  int ret = -1;

  if (c->count == 0 || !c->socket || !c->rootfs_id || !c->workspace)
    return agt_error_kind(err, AGT_E_INVALID, "need --count, --socket, --rootfs and --workspace");
  if (agt_rpc_connect_unix(&r, c->socket, err) < 0)
    return -1;
  rss0 = apid ? proc_kib(apid, "status", "VmRSS") : -1;
  printf("idle.agtd_rss_before_kib %ld\n", rss0);
  printf("idle.memavailable_before_kib %ld\n", meminfo_kib("MemAvailable"));
  fflush(stdout);
  t0 = now_ns();
  for (size_t i = 0; i < c->count; i++) {
    char name[48];
    snprintf(name, sizeof name, "bench-idle-%zu", i);
    if (agtd_run(&r, c, name, idle, &t, &rtt, NULL, NULL, err) < 0) {
      printf("idle.started %zu\n", i);
      goto out;
    }
  }
  printf("idle.started %zu\n", (size_t)c->count);
  if (apid && wait_comm("probe", apid, c->count, 0, 300000, err) < 0)
    goto out;
  printf("idle.start_s %.2f\n", (double)(now_ns() - t0) / 1e9);
  rss1 = apid ? proc_kib(apid, "status", "VmRSS") : -1;
  printf("idle.agtd_rss_after_kib %ld\n", rss1);
  printf("idle.memavailable_after_kib %ld\n", meminfo_kib("MemAvailable"));
  ret = 0;
out:
  agt_rpc_close(&r);
  return ret;
}

/* --count jails started at once: --clients processes, each with its own connection to agtd,
 * released together, start jails bench-burst-I (I = client, client + clients, ...) running
 * `probe sleep`; each start's round trip (request -> exec confirmed) goes back over a pipe.
 * Then every jail is removed. */
static int mode_burst(const struct cfg *c, agt_error_t *err)
{
  static const char *const idle[] = {"/bin/probe", "sleep", "3600", NULL};
  size_t clients = c->clients ? (size_t)c->clients : 16, n = (size_t)c->count, got = 0;
  cleanup_free pid_t *kids = xzalloc(clients * sizeof *kids);
  int go[2] = {-1, -1}, res[2] = {-1, -1}, ret = -1, failed = 0;
  struct series s;
  uint64_t t0 = 0;
  agt_rpc_t r;

  if (n == 0 || !c->socket || !c->rootfs_id || !c->workspace)
    return agt_error_kind(err, AGT_E_INVALID, "need --count, --socket, --rootfs and --workspace");
  if (pipe(go) < 0 || pipe(res) < 0)
    return agt_error_make(err, errno, "pipe");
  series_init(&s, "burst.rtt_ms", n);
  fflush(stdout);
  for (size_t k = 0; k < clients; k++) {
    kids[k] = fork();
    if (kids[k] < 0) {
      agt_error_make(err, errno, "fork");
      goto out;
    }
    if (kids[k] == 0) {
      agt_rpc_t cr;
      agt_error_t e = NULL;
      char b;
      close(go[1]);
      close(res[0]);
      if (agt_rpc_connect_unix(&cr, c->socket, &e) < 0)
        _exit(3);
      if (read(go[0], &b, 1) != 0) /* released when the parent closes its end */
        _exit(3);
      for (size_t i = k; i < n; i += clients) {
        char name[48];
        uint64_t t, rtt;
        double ms;
        snprintf(name, sizeof name, "bench-burst-%zu", i);
        if (agtd_run(&cr, c, name, idle, &t, &rtt, NULL, NULL, &e) < 0) {
          fprintf(stderr, "agt-bench: burst: %s\n", e->msg);
          _exit(4);
        }
        ms = (double)rtt / 1e6;
        if (write(res[1], &ms, sizeof ms) != (ssize_t)sizeof ms)
          _exit(5);
      }
      agt_rpc_close(&cr);
      _exit(0);
    }
  }
  close(res[1]);
  res[1] = -1;
  sleep_ms(500); /* every client connected (a late one only starts later: the figure shows it) */
  t0 = now_ns();
  close(go[1]);
  go[1] = -1;
  for (double ms; got < n && read(res[0], &ms, sizeof ms) == (ssize_t)sizeof ms; got++)
    s.v[s.n++] = ms;
  printf("burst.wall_s %.2f\n", (double)(now_ns() - t0) / 1e9);
  printf("burst.started %zu\n", got);
  printf("burst.clients %zu\n", clients);
  series_print(&s);
  ret = 0;
out:
  if (go[1] >= 0)
    close(go[1]);
  for (size_t k = 0; k < clients; k++) {
    int st;
    if (kids[k] <= 0)
      continue;
    if (waitpid(kids[k], &st, 0) == kids[k] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
      failed++;
  }
  if (failed && ret == 0)
    ret =
        agt_error_kind(err, AGT_E_INTERNAL, "burst: %d of %zu clients failed (%zu of %zu started)",
                       failed, clients, got, n);
  if (agt_rpc_connect_unix(&r, c->socket, err) == 0) {
    for (size_t i = 0; i < got; i++) {
      char name[48];
      snprintf(name, sizeof name, "bench-burst-%zu", i);
      agt_error_t e = NULL;
      if (agtd_simple(&r, "jail.rm", name, 1, NULL, &e) < 0) {
        fprintf(stderr, "agt-bench: burst: %s\n", e->msg);
        agt_error_release(&e);
      }
    }
    agt_rpc_close(&r);
  }
  close(res[0]);
  close(go[0]);
  free(s.v);
  return ret;
}

int main(int argc, char **argv)
{
  static const char usage[] = "agt-bench seccomp FILE | check|latency|memory|idle|burst [OPTIONS]";
  struct cfg c = {.bwrap = "/usr/bin/bwrap",
                  .runs = 200,
                  .warmup = 20,
                  .count = 100,
                  .settle_ms = 1000,
                  .uid = 1000};
  const char *mode = argc > 1 ? argv[1] : "";
  agt_error_t err = NULL;
  int i, r;

  if (strcmp(mode, "seccomp") == 0 && argc == 3) {
    r = mode_seccomp(argv[2], &err);
  } else {
    i = agt_opts_parse(argc - 1, argv + 1, options, set_opt, &c, &err);
    if (i == -2 || (i >= 0 && i + 1 != argc)) {
      agt_opts_usage(i == -2 ? stdout : stderr, usage,
                     "Start jails with agtd and with bubblewrap side by side and print what it "
                     "took.",
                     options);
      return i == -2 ? 0 : 2;
    }
    if (i < 0)
      r = -1;
    else if (strcmp(mode, "check") == 0)
      r = mode_check(&c, &err);
    else if (strcmp(mode, "latency") == 0)
      r = mode_latency(&c, &err);
    else if (strcmp(mode, "memory") == 0)
      r = mode_memory(&c, &err);
    else if (strcmp(mode, "idle") == 0)
      r = mode_idle(&c, &err);
    else if (strcmp(mode, "burst") == 0)
      r = mode_burst(&c, &err);
    else
      r = agt_error_kind(&err, AGT_E_INVALID, "unknown mode '%s' (usage: %s)", mode, usage);
  }
  fflush(stdout);
  if (r < 0) {
    fprintf(stderr, "agt-bench: %s\n", err ? err->msg : "failed");
    agt_error_release(&err);
    return 1;
  }
  return 0;
}
