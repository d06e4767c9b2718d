/* agt verify: N jails of the real opencode agent at once, each completing a real agent turn
 * against a test model server on the guest's loopback that only its allowlist lets it
 * reach; then checks, one table row per check and per jail, that the jails ran at once,
 * saw nothing of each other or of the guest, held their limits, and left nothing behind
 * once removed.  Exits 1 when any check fails.
 *
 * The model server is the one installed with agtd (guest/tools/model_server.py, as
 * libexecdir/agt/model-server, and beside agtd in a build tree): verify finds it from the
 * path of the agtd it talks to.  Tests break things from outside (tests/e2e/verify.sh). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"
#include "base64.h"
#include "cleanup.h"
#include "guest.h"
#include "layers.h"
#include "profile.h"
#include "util.h"
#include "xalloc.h"

#define VERIFY_MAX_JAILS 64
#define VERIFY_MEMORY (1024ull * 1024 * 1024) /* each jail's memory limit */
#define VERIFY_PIDS 128                       /* and process limit */
#define VERIFY_DISK (1024ull * 1024 * 1024)   /* --agent: and disk limit */
#define VERIFY_LISTEN_BASE 4100               /* jail k listens on its own 127.0.0.1:4100+k */
#define VERIFY_GUEST_SRC "/opt/agt/src"       /* lima/agt.yaml's param AgtSourceDir */
#define VERIFY_TURN_PEAK (560ull << 20)       /* what one opencode turn peaks at, measured */
#define VERIFY_MAX_AGENTS 16
#define VERIFY_AGENT_JAILS 2       /* --agent: jails of each agent, unless --jails says */
#define VERIFY_KEY "sk-agt-verify" /* the key the agents send: the model server takes any */
#define VERIFY_MODEL "mock"        /* {model} in the profiles' files and batch */

enum {
  OPT_TIMEOUT = 256,
  OPT_ROOTFS,
  OPT_AGENT,
};

static const struct agt_opt opts[] = {
    AGT_OPT_KEY('n', "jails", "N", "how many jails run at once (8; at most 64)"),
    AGT_OPT_KEY(
        OPT_ROOTFS, "rootfs", "REF",
        "the jails' rootfs (jail.rootfs: default, built from rootfs/default.yaml when missing)"),
    AGT_OPT_KEY(OPT_TIMEOUT, "timeout", "DURATION", "how long the agent turns may take (5m)"),
    AGT_OPT_KEY(OPT_AGENT, "agent", "NAME",
                "real turns of that agent (its profile: claude, codex, gemini, pi, opencode; "
                "NAME,NAME or all), --jails N of each (2), its layers built when missing"),
    AGT_OPT_FORMAT_ENTRY,
    AGT_OPT_JSON_ENTRY,
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt verify [--agent NAME|all] [--jails N] [--rootfs REF] [--timeout DURATION] "
    "[--json | --format TEMPLATE]",
    "Run N jails of the real opencode agent at once (--agent: of each agent named, from its "
    "profile) against a test model on the guest, and check what they did, saw and left "
    "behind; an agent that cannot run offline is reported as skipped, with why (--json: the "
    "rows and the sums as one JSON object at the end; --format: each row).",
    opts};

/* A growing string. */
struct sb {
  char *s;
  size_t len, cap;
};

static void sb_addf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(struct sb *b, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *s = NULL;
  size_t n;

  va_start(ap, fmt);
  s = xvasprintf(fmt, ap);
  va_end(ap);
  n = strlen(s);
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    b->s = xrealloc(b->s, b->cap);
  }
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

static void sb_add_quoted(struct sb *b, const char *s)
{
  cleanup_free char *q = agt_sh_quote(s);
  sb_addf(b, "%s", q);
}

/* An agent of --agent: its profile, its layers, its jails. */
struct vagent {
  const struct agt_profile *p;
  json_t *layers; /* the store names of its layers, top first (empty: none) */
  char *broken;   /* why its layers could not be built; NULL when they were */
  unsigned first, count;
};

struct vjail {
  char name[64];
  struct vagent *a; /* --agent: its agent; NULL: opencode from the default rootfs */
  unsigned port;    /* its own loopback listener, inside its network namespace */
  int started;
  double start_ms;
  char *workspace; /* as the guest sees it */
  /* the turn, from its log */
  struct sb log;
  uint64_t log_off;
  int turn_started, turn_done, gone;
  double t0, t1; /* the guest's uptime at the turn's start and end */
  int rc;
  char *reason; /* why it ended early, from agtd */
  /* the proxy's log */
  int allowed, blocked;
  char *blocked_reason;
  struct agt_strv refused; /* the other hosts the proxy refused it, HOST:PORT */
  /* seen from the guest after the turns */
  char *file; /* out.txt in its workspace; NULL when absent */
  struct agt_strv elsewhere;
  uint64_t cg_memory, cg_pids, cg_peak;
  int cg_found;
  char *guest_conn;
  json_t *info; /* jail.inspect */
  /* seen from inside, by the probe */
  char *probe;
  int probe_code;
  /* after the removal */
  struct agt_strv left;
};

struct verify {
  struct agt_ctx *c;
  unsigned n; /* jails in all */
  const char *rootfs;
  const char *agent_arg; /* --agent */
  int jails_given;
  struct agt_profile_set profiles;
  struct vagent a[VERIFY_MAX_AGENTS];
  unsigned na;
  char *arch; /* the guest's machine (daemon.status) */
  uint64_t timeout_s;
  char tag[16];
  char mark[64];     /* a directory on the guest that only the guest sees */
  char *src;         /* the agt source tree, as the guest sees it */
  char *src_missing; /* why there is none */
  char *state_dir;
  long long agtd_pid;
  char *model_path; /* the model server installed with agtd, as the guest sees it */
  unsigned model_port;
  struct agt_guest_proc model;
  int model_up;
  struct vjail j[VERIFY_MAX_JAILS];
  unsigned checks, failed, skipped;
  struct sb failures;
  json_t *json; /* --json: the rows, printed at the end */
  int guest_procs;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
  (void)sig;
  interrupted = 1;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A request to agtd over the target's connection; params (a new reference) is consumed. */
static int tcall(struct verify *v, const char *method, json_t *params, json_t **res,
                 agt_error_t *err)
{
  int r = agt_target_call(&v->c->target, method, params, res, err);
  json_decref(params);
  return r;
}

static const char *str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* One row of the table, printed at once. */
static void row(struct verify *v, const char *check, const char *jail, int ok, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void row(struct verify *v, const char *check, const char *jail, int ok, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *detail = NULL;

  va_start(ap, fmt);
  detail = xvasprintf(fmt, ap);
  va_end(ap);
  v->checks++;
  if (ok == 2)
    v->skipped++;
  if (!ok) {
    v->failed++;
    sb_addf(&v->failures, "%s%s%s%s: %s", v->failures.len ? "; " : "", check, *jail ? " " : "",
            jail, detail);
  }
  if (v->json) {
    json_array_append_new(v->json, json_pack("{s:s, s:s?, s:s, s:s}", "check", check, "jail",
                                             *jail ? jail : NULL, "result",
                                             ok == 2 ? "skip"
                                             : ok    ? "ok"
                                                     : "FAIL",
                                             "detail", detail));
    return;
  }
  printf("%-11s %-16s %-6s %s\n", check, *jail ? jail : "-",
         ok == 2 ? "skip"
         : ok    ? "ok"
                 : "FAIL",
         detail);
  fflush(stdout);
}

static void random_tag(char *buf, size_t len)
{
  unsigned char b[2] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

  if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
    b[0] = (unsigned char)getpid();
    b[1] = (unsigned char)time(NULL);
  }
  if (fd >= 0)
    close(fd);
  snprintf(buf, len, "%02x%02x", b[0], b[1]);
}

/* A script on the guest, as root; its stdout in *out.  A failure to run it, or a non-zero
 * status, is an error quoting its stderr. */
static int guest(struct verify *v, const char *script, char **out, agt_error_t *err)
{
  cleanup_free char *errout = NULL;
  int code = 0;

  if (agt_guest_sh(v->c, script, out, &errout, &code, err) < 0)
    return -1;
  if (code != 0) {
    size_t n = strlen(errout);
    while (n && errout[n - 1] == '\n')
      errout[--n] = '\0';
    agt_error_kind(err, AGT_E_STATE, "a script on the guest exited with status %d%s%s", code,
                   n ? ": " : "", errout);
    free(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* Each line of out starting with "J<k> ": fn(jail, rest of the line). */
static void per_jail_lines(struct verify *v, char *out,
                           void (*fn)(struct verify *v, struct vjail *j, char *rest))
{
  char *save = NULL;

  for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    char *end;
    long k;
    if (l[0] != 'J')
      continue;
    k = strtol(l + 1, &end, 10);
    if (*end != ' ' || k < 1 || (unsigned long)k > v->n)
      continue;
    fn(v, &v->j[k - 1], end + 1);
  }
}

/* Setup: where the source tree is on the guest (for the default rootfs's manifest), the model
 * server installed with the agtd that answers (beside it in a build tree, else
 * ../libexec/agt/ from it), a marker directory only the guest has, and how many processes the
 * guest runs. */
static int setup_guest(struct verify *v, agt_error_t *err)
{
  struct sb s = {0};
  cleanup_free char *out = NULL, *host_src = NULL, *agtd_exe = NULL;
  const char *hs = agt_config_get(&v->c->cfg, AGT_CFG_VM_AGT_SOURCE);
  unsigned long long avail = 0;
  char *save = NULL;
  int r;

  host_src = xstrdup(hs ? hs : "");
  sb_addf(&s, "for d in");
  if (v->c->target.kind != AGT_TARGET_LOCAL)
    sb_addf(&s, " %s", VERIFY_GUEST_SRC);
  if (*host_src) {
    sb_addf(&s, " ");
    sb_add_quoted(&s, host_src);
  }
  sb_addf(
      &s,
      "; do if [ -f \"$d/rootfs/default.yaml\" ]; then echo \"src $d\"; break; fi; done\n"
      "exe=$(readlink /proc/%lld/exe); exe=${exe%% (deleted)}; echo \"agtd $exe\"\n"
      "for m in \"${exe%%/*}/model-server\" \"${exe%%/*}/../libexec/agt/model-server\"; do "
      "if [ -f \"$m\" ] && [ -x \"$m\" ]; then echo \"model $(readlink -f \"$m\")\"; break; fi; "
      "done\n"
      "mkdir -m 0755 %s && echo guest-only > %s/guest-only || exit 1\n"
      "echo \"procs $(ls -d /proc/[0-9]* | wc -l)\"\n"
      "echo \"memkb $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)\"\n",
      v->agtd_pid, v->mark, v->mark);
  r = guest(v, s.s, &out, err);
  free(s.s);
  if (r < 0)
    return agt_error_wrap(err, "prepare the guest");
  for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    if (strncmp(l, "src ", 4) == 0)
      v->src = xstrdup(l + 4);
    else if (strncmp(l, "agtd ", 5) == 0)
      agtd_exe = xstrdup(l + 5);
    else if (strncmp(l, "model ", 6) == 0)
      v->model_path = xstrdup(l + 6);
    else if (strncmp(l, "procs ", 6) == 0)
      v->guest_procs = atoi(l + 6);
    else if (strncmp(l, "memkb ", 6) == 0)
      avail = strtoull(l + 6, NULL, 10) * 1024;
  }
  if (avail && avail < (unsigned long long)v->n * VERIFY_TURN_PEAK) {
    char a[32], b[32];
    agt_note(v->c,
             "warning: the guest has %s of memory available, and %u opencode turns at once "
             "peak near %s: some may be killed (fewer --jails, or more vm.memory)",
             agt_human_bytes(avail, a, sizeof a), v->n,
             agt_human_bytes((unsigned long long)v->n * VERIFY_TURN_PEAK, b, sizeof b));
  }
  if (v->model_path == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "no model server installed with agtd (%s, pid %lld): looked for "
                          "model-server beside it and in ../libexec/agt/ (meson install puts it "
                          "in libexecdir/agt/)",
                          agtd_exe && *agtd_exe ? agtd_exe : "its path unreadable", v->agtd_pid);
  if (v->src == NULL && strcmp(v->rootfs, "default") == 0)
    v->src_missing = xasprintf("the guest has no agt source tree (rootfs/default.yaml) at %s%s "
                               "(vm.agt_source; a VM mounts it at %s)",
                               v->c->target.kind != AGT_TARGET_LOCAL ? VERIFY_GUEST_SRC " or " : "",
                               host_src, VERIFY_GUEST_SRC);
  return 0;
}

static int find_rootfs(json_t *ls, const char *ref, char *id, size_t len)
{
  size_t i;
  json_t *r;

  json_array_foreach(json_object_get(ls, "rootfs"), i, r)
  {
    const char *rid = str(r, "id");
    if (strcmp(str(r, "name"), ref) == 0 ||
        (strlen(ref) >= 6 && strncmp(rid, ref, strlen(ref)) == 0)) {
      snprintf(id, len, "%.12s", rid);
      return 1;
    }
  }
  return 0;
}

static int ensure_rootfs(struct verify *v, agt_error_t *err)
{
  json_t *ls = NULL, *res = NULL;
  cleanup_free char *manifest = NULL;
  char id[16] = "";
  double t;

  if (agt_target_call(&v->c->target, "rootfs.ls", NULL, &ls, err) < 0)
    return -1;
  if (find_rootfs(ls, v->rootfs, id, sizeof id)) {
    json_decref(ls);
    row(v, "rootfs", "", 1, "'%s' is there (%s)", v->rootfs, id);
    return 0;
  }
  json_decref(ls);
  if (strcmp(v->rootfs, "default") != 0)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "no rootfs '%s' on the guest ('agt rootfs ls' lists them)", v->rootfs);
  if (v->src == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND, "%s", v->src_missing);
  manifest = xasprintf("%s/rootfs/default.yaml", v->src);
  agt_note(v->c, "building the default rootfs from %s", manifest);
  t = now_s();
  if (tcall(v, "rootfs.build", json_pack("{s:s, s:b}", "manifest", manifest, "allow_download", 1),
            &res, err) < 0)
    return agt_error_wrap(err, "build the default rootfs (%s)", manifest);
  row(v, "rootfs", "", 1, "'default' built from %s in %.1f s (%.12s)", manifest, now_s() - t,
      str(res, "id"));
  json_decref(res);
  return 0;
}

/* The test model server on the guest's 127.0.0.1, run as the login user; it ends when its
 * stdin does. */
static int start_model(struct verify *v, agt_error_t *err)
{
  struct sb s = {0};
  char line[512];
  int r;

  sb_add_quoted(&s, v->model_path);
  sb_addf(&s, " --host 127.0.0.1 --port 0 </dev/null & p=$!\n"
              "cat >/dev/null\n"
              "kill $p 2>/dev/null; wait $p 2>/dev/null; exit 0\n");
  r = agt_guest_spawn(v->c, s.s, &v->model, err);
  free(s.s);
  if (r < 0)
    return agt_error_wrap(err, "start the test model server");
  v->model_up = 1;
  for (;;) {
    const char *at;
    r = agt_guest_proc_line(&v->model, line, sizeof line, 20000, err);
    if (r < 0)
      return agt_error_wrap(err, "the test model server did not start");
    if (r == 0)
      return agt_error_kind(err, AGT_E_STATE, "the test model server exited before listening");
    if (strncmp(line, "listening on ", 13) == 0 && (at = strrchr(line, ':')) != NULL) {
      v->model_port = (unsigned)atoi(at + 1);
      break;
    }
    agt_note(v->c, "model server: %s", line);
  }
  row(v, "model", "", v->model_port != 0, "%s on the guest's 127.0.0.1:%u", v->model_path,
      v->model_port);
  return 0;
}

/* --agent: the agents named (NAME,NAME or all: every agent profile that speaks a model API),
 * each with --jails N jails (2). */
static int select_agents(struct verify *v, agt_error_t *err)
{
  cleanup_free char *list = xstrdup(v->agent_arg);
  unsigned per = v->jails_given ? v->n : VERIFY_AGENT_JAILS;
  char *save = NULL;

  if (agt_profiles_load_for(v->c->cfg.user_file, &v->profiles, err) < 0)
    return agt_error_wrap(err, "--agent: the agent profiles");
  for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int all = strcmp(t, "all") == 0;
    const struct agt_profile *p = all ? NULL : agt_profiles_find(&v->profiles, t);
    if (!all && (p == NULL || p->kind != AGT_PROFILE_AGENT))
      return agt_error_kind(err, AGT_E_INVALID,
                            "--agent %s: no agent profile of that name "
                            "('agt agents ls' lists them)",
                            t);
    if (!all && p->api == AGT_API_NONE)
      return agt_error_kind(err, AGT_E_INVALID,
                            "--agent %s: its profile (%s) speaks no model API: nothing to verify "
                            "a turn against",
                            t, p->file);
    for (size_t i = 0; i < v->profiles.n; i++) {
      const struct agt_profile *q = v->profiles.p[i];
      int dup = 0;
      if (all ? q->kind != AGT_PROFILE_AGENT || q->api == AGT_API_NONE : q != p)
        continue;
      for (unsigned k = 0; k < v->na; k++)
        dup |= v->a[k].p == q;
      if (dup)
        continue;
      if (v->na == VERIFY_MAX_AGENTS || (v->na + 1) * per > VERIFY_MAX_JAILS)
        return agt_error_kind(err, AGT_E_INVALID, "--agent %s: at most %d jails in all",
                              v->agent_arg, VERIFY_MAX_JAILS);
      v->a[v->na].p = q;
      v->a[v->na].first = v->na * per;
      v->a[v->na].count = per;
      v->a[v->na].layers = json_array();
      v->na++;
    }
  }
  if (v->na == 0)
    return agt_error_kind(err, AGT_E_INVALID, "--agent %s: no agent", v->agent_arg);
  v->n = v->na * per;
  return 0;
}

static void say_building(void *ctx, const struct agt_layer *l)
{
  struct verify *v = ctx;
  agt_note(v->c, "building layer %s (npm %s)", l->name, l->spec);
}

/* Each agent's layers, built when agtd lacks them.  An agent whose layers cannot be built
 * fails its "layers" row and starts no jail; the others go on. */
static void agent_layers(struct verify *v)
{
  for (unsigned k = 0; k < v->na; k++) {
    struct vagent *a = &v->a[k];
    struct agt_layer l[2];
    struct sb names = {0};
    size_t n = 0;
    int built = 0;
    double t = now_s();
    agt_error_t e = NULL;

    if (agt_agent_layers(&v->c->cfg, &v->profiles, a->p, v->arch, l, &n, &e) == 0 &&
        agt_layers_build(&v->c->target, l, n, NULL, say_building, v, &built, &e) == 0) {
      for (size_t i = 0; i < n; i++) {
        json_array_append_new(a->layers, json_string(l[i].name));
        sb_addf(&names, "%s%s", i ? " over " : "", l[i].name);
      }
      if (n == 0)
        row(v, "layers", a->p->name, 1, "none: the base rootfs has it");
      else if (built)
        row(v, "layers", a->p->name, 1, "%s: %d built in %.1f s", names.s, built, now_s() - t);
      else
        row(v, "layers", a->p->name, 1, "%s: there", names.s);
    } else {
      a->broken = xstrdup(e->msg);
      row(v, "layers", a->p->name, 0, "%s", e->msg);
      agt_error_release(&e);
    }
    for (size_t i = 0; i < n; i++)
      agt_layer_release(&l[i]);
    free(names.s);
  }
}

/* s with each {key} replaced by its value. */
static char *fill(const char *s, const char *const *kv)
{
  struct sb b = {0};

  while (*s) {
    const char *const *p = NULL;
    if (*s == '{')
      for (p = kv; *p; p += 2)
        if (strncmp(s + 1, p[0], strlen(p[0])) == 0 && s[1 + strlen(p[0])] == '}')
          break;
    if (p && *p) {
      sb_addf(&b, "%s", p[1]);
      s += strlen(p[0]) + 2;
    } else {
      sb_addf(&b, "%c", *s++);
    }
  }
  return b.s ? b.s : xstrdup("");
}

/* Where the agent's profile points it: its API's base URL on the guest's loopback. */
static char *agent_base_url(const struct verify *v, const struct agt_profile *p)
{
  int v1 = p->api == AGT_API_OPENAI_RESPONSES || p->api == AGT_API_OPENAI_CHAT;
  return xasprintf("http://127.0.0.1:%u%s", v->model_port, v1 ? "/v1" : "");
}

/* What an agent's jail runs: its profile's files written into $HOME, then its batch form
 * timed (as jail_script's opencode turn), its listener, and the wait. */
static char *agent_script(const struct verify *v, const struct agt_profile *p)
{
  cleanup_free char *url = agent_base_url(v, p);
  const char *kv[] = {
      "base_url", url, "model", VERIFY_MODEL, "key_env", p->key_env ? p->key_env : "", NULL};
  struct sb s = {0};

  for (size_t i = 0; i < p->nfiles; i++) {
    cleanup_free char *path = xasprintf("$HOME/%s", p->files[i].path);
    cleanup_free char *content = fill(p->files[i].content, kv);
    size_t n = strlen(content);
    sb_addf(&s,
            "f=\"%s\"; [ -e \"$f\" ] || { mkdir -p \"${f%%/*}\" && cat >\"$f\" <<'AGT_VERIFY_EOF'\n"
            "%s%sAGT_VERIFY_EOF\n} || exit 1\n",
            path, content, n && content[n - 1] == '\n' ? "" : "\n");
  }
  sb_addf(&s, "read t0 _ </proc/uptime\n"
              "echo \"agt-verify: turn-start $t0\"\n"
              "cd /work && \"$@\" </dev/null 2>&1\n"
              "rc=$?\n"
              "read t1 _ </proc/uptime\n"
              "echo \"agt-verify: turn-end $t1 $rc\"\n"
              "(while :; do nc -l -p \"$AGT_VERIFY_PORT\" -e echo \"agt-verify $AGT_VERIFY_NAME\"; "
              "done) </dev/null >/dev/null 2>&1 &\n"
              "exec sleep 3600\n");
  return s.s;
}

/* An agent jail's argv and environment, from its profile: the batch form with the prompt
 * and the flags that skip its permission prompts (nobody answers them), its variables, its
 * key (a fake one) and its base URL (the model server, through agtd's proxy). */
static void agent_params(const struct verify *v, const struct vjail *j, json_t **argv, json_t **env)
{
  const struct agt_profile *p = j->a->p;
  cleanup_free char *script = agent_script(v, p);
  cleanup_free char *prompt = xasprintf("AGT-WRITE /work/out.txt %s", j->name);
  cleanup_free char *url = agent_base_url(v, p);
  const char *kv[] = {"prompt", prompt, "model", VERIFY_MODEL, NULL};
  char port[16];

  *argv = json_pack("[s, s, s, s]", "/bin/sh", "-c", script, "agt-verify");
  for (char **a = p->batch; a && *a; a++) {
    cleanup_free char *x = fill(*a, kv);
    json_array_append_new(*argv, json_string(x));
  }
  for (char **a = p->skip_permissions; a && *a; a++)
    json_array_append_new(*argv, json_string(*a));
  snprintf(port, sizeof port, "%u", j->port);
  *env = json_pack("{s:s, s:s, s:s, s:s}", "NO_PROXY", "localhost,::1", "no_proxy", "localhost,::1",
                   "AGT_VERIFY_NAME", j->name, "AGT_VERIFY_PORT", port);
  for (char **e = p->set_env; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    cleanup_free char *name = xstrndup(*e, (size_t)(eq - *e));
    json_object_set_new(*env, name, json_string(eq + 1));
  }
  if (p->key_env)
    json_object_set_new(*env, p->key_env, json_string(VERIFY_KEY));
  if (p->base_url_env)
    json_object_set_new(*env, p->base_url_env, json_string(url));
}

/* What each jail runs: a timed opencode turn, then a listener of its own on its loopback,
 * then it waits to be probed and removed.  The agent's stderr goes where the turn's marks go,
 * so that its last words (its error) come before the turn's end in its log even from an
 * agtd that had a jail's stdout and stderr on two pipes, whose order the log did not keep. */
static const char jail_script[] =
    "read t0 _ </proc/uptime\n"
    "echo \"agt-verify: turn-start $t0\"\n"
    "opencode run --dir /work \"AGT-WRITE out.txt $AGT_VERIFY_NAME\" </dev/null 2>&1\n"
    "rc=$?\n"
    "read t1 _ </proc/uptime\n"
    "echo \"agt-verify: turn-end $t1 $rc\"\n"
    "(while :; do nc -l -p \"$AGT_VERIFY_PORT\" -e echo \"agt-verify $AGT_VERIFY_NAME\"; done) "
    "</dev/null >/dev/null 2>&1 &\n"
    "exec sleep 3600\n";

static json_t *jail_env(struct verify *v, struct vjail *j)
{
  static const char *const off[] = {"OPENCODE_DISABLE_MODELS_FETCH",
                                    "OPENCODE_DISABLE_AUTOUPDATE",
                                    "OPENCODE_DISABLE_LSP_DOWNLOAD",
                                    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                                    "OPENCODE_DISABLE_SHARE",
                                    "OPENCODE_DISABLE_CLAUDE_CODE",
                                    "OPENCODE_DISABLE_EXTERNAL_SKILLS",
                                    "OPENCODE_DISABLE_FFF",
                                    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER",
                                    NULL};
  cleanup_free char *cfg = xasprintf(
      "{\"$schema\":\"https://opencode.ai/config.json\",\"provider\":{\"local\":{\"npm\":"
      "\"@ai-sdk/openai-compatible\",\"name\":\"agt verify's test model\",\"options\":{"
      "\"baseURL\":\"http://127.0.0.1:%u/v1\",\"apiKey\":\"sk-local\"},\"models\":{\"mock\":{"
      "\"name\":\"Mock\",\"tool_call\":true}}}},\"model\":\"local/mock\",\"small_model\":"
      "\"local/mock\",\"autoupdate\":false,\"share\":\"disabled\",\"permission\":{\"bash\":"
      "\"allow\",\"edit\":\"allow\",\"webfetch\":\"deny\"}}",
      v->model_port);
  char port[16];
  json_t *env;

  snprintf(port, sizeof port, "%u", j->port);
  /* NO_PROXY without 127.0.0.1: the model is on the guest's loopback, not the jail's, and
   * only agtd's proxy reaches it.  The OPENCODE_DISABLE_* variables skip fetches that the
   * allowlist refuses anyway, and work a one-shot turn does not need. */
  env = json_pack("{s:s, s:s, s:s, s:s, s:s}", "OPENCODE_CONFIG_CONTENT", cfg, "NO_PROXY",
                  "localhost,::1", "no_proxy", "localhost,::1", "AGT_VERIFY_NAME", j->name,
                  "AGT_VERIFY_PORT", port);
  for (size_t i = 0; off[i]; i++)
    json_object_set_new(env, off[i], json_string("1"));
  return env;
}

static void start_jails(struct verify *v)
{
  char allow[64];

  snprintf(allow, sizeof allow, "127.0.0.1:%u", v->model_port);
  if (v->na)
    agt_note(v->c, "starting %u jails: %u of each agent", v->n, v->a[0].count);
  else
    agt_note(v->c, "starting %u jails of opencode", v->n);
  for (unsigned k = 0; k < v->n && !interrupted; k++) {
    struct vjail *j = &v->j[k];
    json_t *params, *res = NULL, *argv, *env;
    agt_error_t e = NULL;

    if (j->a && j->a->broken) {
      row(v, "start", j->name, 0, "not started: %s's layers could not be built", j->a->p->name);
      continue;
    }
    if (j->a) {
      agent_params(v, j, &argv, &env);
    } else {
      argv = json_pack("[s,s,s]", "/bin/sh", "-c", jail_script);
      env = jail_env(v, j);
    }
    params =
        json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:I, s:I}, s:{s:s, s:o}}", "name", j->name, "agent",
                  j->a ? j->a->p->name : "opencode", "rootfs", v->rootfs, "argv", argv, "env", env,
                  "limits", "memory", (json_int_t)VERIFY_MEMORY, "pids", (json_int_t)VERIFY_PIDS,
                  "network", "mode", "allow", "allow", json_pack("[s]", allow));
    if (j->a && json_array_size(j->a->layers))
      json_object_set(params, "layers", j->a->layers);
    if (j->a) /* agtd's default disk limit, times 10 jails, is more than a small disk has */
      json_object_set_new(json_object_get(params, "limits"), "disk",
                          json_integer((json_int_t)VERIFY_DISK));
    if (agt_target_call(&v->c->target, "jail.run", params, &res, &e) < 0) {
      row(v, "start", j->name, 0, "jail.run failed: %s", e->msg);
      agt_error_release(&e);
    } else {
      j->started = 1;
      j->start_ms = json_number_value(json_object_get(res, "start_ms"));
      j->workspace = xstrdup(str(res, "workspace"));
      row(v, "start", j->name, 1, "%s started in %.1f ms; allowlist %s",
          j->a ? j->a->p->name : "opencode", j->start_ms, allow);
    }
    json_decref(params);
    json_decref(res);
  }
}

static void parse_turn_log(struct vjail *j)
{
  const char *p;

  if (!j->turn_started && (p = strstr(j->log.s ? j->log.s : "", "agt-verify: turn-start ")))
    j->turn_started = sscanf(p + 23, "%lf", &j->t0) == 1;
  if (!j->turn_done && (p = strstr(j->log.s ? j->log.s : "", "agt-verify: turn-end ")))
    j->turn_done = sscanf(p + 21, "%lf %d", &j->t1, &j->rc) == 2;
}

/* Follow the jails' logs until every turn has ended (or its jail did). */
static int wait_turns(struct verify *v, agt_error_t *err)
{
  double deadline = now_s() + (double)v->timeout_s;
  unsigned last = 0;

  for (;;) {
    unsigned pending = 0, done = 0;
    for (unsigned k = 0; k < v->n; k++) {
      struct vjail *j = &v->j[k];
      json_t *res = NULL;
      const char *b64;
      cleanup_free char *data = NULL;
      size_t len = 0;

      if (!j->started || j->turn_done || j->gone)
        continue;
      if (tcall(v, "jail.logs",
                json_pack("{s:s, s:I}", "name", j->name, "offset", (json_int_t)j->log_off), &res,
                err) < 0)
        return agt_error_wrap(err, "jail '%s'", j->name);
      b64 = json_string_value(json_object_get(res, "data_b64"));
      data = b64 ? agt_base64_decode(b64, &len) : NULL;
      if (data && len)
        sb_addf(&j->log, "%.*s", (int)len, data);
      j->log_off = (uint64_t)json_integer_value(json_object_get(res, "next"));
      parse_turn_log(j);
      if (!j->turn_done && strcmp(str(res, "state"), "exited") == 0 &&
          j->log_off >= (uint64_t)json_integer_value(json_object_get(res, "end")))
        j->gone = 1;
      json_decref(res);
    }
    for (unsigned k = 0; k < v->n; k++) {
      if (!v->j[k].started)
        continue;
      if (v->j[k].turn_done || v->j[k].gone)
        done++;
      else
        pending++;
    }
    if (done != last) {
      agt_note(v->c, "%u of %u turns done", done, done + pending);
      last = done;
    }
    if (pending == 0)
      return 0;
    if (interrupted)
      return agt_error_kind(err, AGT_E_STATE, "interrupted");
    if (now_s() > deadline) {
      agt_note(v->c, "%u turns still running after %llu s (--timeout)", pending,
               (unsigned long long)v->timeout_s);
      return 0;
    }
    sleep_ms(250);
  }
}

/* What the proxy allowed and refused for each jail. */
static void read_netlogs(struct verify *v)
{
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    json_t *res = NULL, *e;
    agt_error_t err = NULL;
    size_t i;

    if (!j->started)
      continue;
    if (tcall(v, "jail.net", json_pack("{s:s, s:I}", "name", j->name, "offset", (json_int_t)0),
              &res, &err) < 0) {
      agt_error_release(&err);
      continue;
    }
    json_array_foreach(json_object_get(res, "entries"), i, e)
    {
      const char *d = str(e, "decision");
      if (json_integer_value(json_object_get(e, "port")) != (json_int_t)v->model_port ||
          strcmp(str(e, "host"), "127.0.0.1") != 0) {
        /* another host: what an agent wants besides the model (refused offline) */
        cleanup_free char *hp = xasprintf(
            "%s:%lld", str(e, "host"), (long long)json_integer_value(json_object_get(e, "port")));
        int seen = 0;
        for (size_t h = 0; h < j->refused.n; h++)
          seen |= strcmp(j->refused.v[h], hp) == 0;
        if (strcmp(d, "blocked") == 0 && !seen)
          agt_strv_push(&j->refused, hp);
        continue;
      }
      if (strcmp(d, "allowed") == 0) {
        j->allowed++;
      } else if (strcmp(d, "blocked") == 0) {
        j->blocked++;
        free(j->blocked_reason);
        j->blocked_reason =
            xasprintf("%s %s:%lld refused: %s", str(e, "method"), str(e, "host"),
                      (long long)json_integer_value(json_object_get(e, "port")), str(e, "reason"));
      }
    }
    json_decref(res);
  }
}

static void on_after_line(struct verify *v, struct vjail *j, char *rest)
{
  (void)v;
  if (strncmp(rest, "file ", 5) == 0) {
    free(j->file);
    j->file = xstrdup(rest + 5);
  } else if (strncmp(rest, "elsewhere ", 10) == 0) {
    agt_strv_push(&j->elsewhere, rest + 10);
  } else if (strncmp(rest, "cg ", 3) == 0) {
    char f[64];
    unsigned long long val;
    if (sscanf(rest + 3, "%63s %llu", f, &val) == 2) {
      j->cg_found = 1;
      if (strcmp(f, "memory.max") == 0 || strcmp(f, "memory.limit_in_bytes") == 0)
        j->cg_memory = val;
      else if (strcmp(f, "pids.max") == 0)
        j->cg_pids = val;
      else if (strcmp(f, "memory.peak") == 0 || strcmp(f, "memory.max_usage_in_bytes") == 0)
        j->cg_peak = val;
    } else if (sscanf(rest + 3, "%63s", f) == 1) {
      j->cg_found = 1;
    }
  } else if (strncmp(rest, "conn ", 5) == 0) {
    free(j->guest_conn);
    j->guest_conn = xstrdup(rest + 5);
  }
}

/* From the guest, after the turns: each workspace's out.txt, where each jail's word is
 * found besides its own workspace, each jail's cgroup files, and whether the guest reaches
 * each jail's loopback listener. */
static int look_from_guest(struct verify *v, agt_error_t *err)
{
  struct sb s = {0};
  cleanup_free char *out = NULL;
  int r;

  sb_addf(&s, "conn() { python3 -c 'import socket, sys\n"
              "for p in sys.argv[1:]:\n"
              "    s = socket.socket(); s.settimeout(2)\n"
              "    try:\n"
              "        s.connect((\"127.0.0.1\", int(p)))\n"
              "    except OSError:\n"
              "        print(p, \"refused\"); continue\n"
              "    try:\n"
              "        print(p, \"open:\" + s.recv(200).decode(errors=\"replace\").strip())\n"
              "    except OSError:\n"
              "        print(p, \"open:\")\n"
              "' \"$@\"; }\n");
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    if (!j->started || !j->workspace)
      continue;
    sb_addf(&s, "ws=");
    sb_add_quoted(&s, j->workspace);
    sb_addf(&s,
            "\nif [ -f \"$ws/out.txt\" ]; then echo \"J%u file $(head -c 200 \"$ws/out.txt\" | tr "
            "-d '\\n')\"; fi\n",
            k + 1);
    for (unsigned o = 0; o < v->n; o++) {
      if (o == k || !v->j[o].started || !v->j[o].workspace)
        continue;
      sb_addf(&s, "grep -rlF -- %s ", j->name);
      sb_add_quoted(&s, v->j[o].workspace);
      sb_addf(&s, " 2>/dev/null | sed 's/^/J%u elsewhere /'\n", k + 1);
    }
    sb_addf(
        &s,
        "for d in $(find /sys/fs/cgroup -maxdepth 3 -type d -name %s 2>/dev/null); do "
        "echo \"J%u cg dir\"; for f in memory.max memory.limit_in_bytes pids.max memory.peak "
        "memory.max_usage_in_bytes; do [ -f \"$d/$f\" ] && echo \"J%u cg $f $(cat \"$d/$f\")\"; "
        "done; done\n",
        j->name, k + 1, k + 1);
    sb_addf(&s, "conn %u | sed 's/^[0-9]* /J%u conn /'\n", j->port, k + 1);
  }
  r = guest(v, s.s, &out, err);
  free(s.s);
  if (r < 0)
    return agt_error_wrap(err, "look at the workspaces from the guest");
  per_jail_lines(v, out, on_after_line);
  return 0;
}

/* The probe each jail runs (jail.exec) after its turn, while every jail is still up. */
static const char probe_script[] =
    "own=$1 model=$2 tries=$3 others=$4; shift 4\n"
    "echo \"word $(cat /work/out.txt 2>/dev/null)\"\n"
    "for p in \"$@\"; do [ -e \"$p\" ] && echo \"sees $p\"; done\n"
    "n=0; for d in /proc/[0-9]*; do n=$((n + 1)); "
    "echo \"proc ${d#/proc/} $(tr '\\0\\n' '  ' <\"$d/cmdline\" 2>/dev/null | cut -c1-120)\"; "
    "done\n"
    "echo \"procs $n\"\n"
    "conn() { /bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0 || exit 1; IFS= read -t 1 -r l <&3; "
    "echo \"open:$l\"' \"$1\" 2>/dev/null || echo refused; }\n"
    "echo \"own $(conn \"$own\")\"\n"
    "for p in $others; do echo \"other $p $(conn \"$p\")\"; done\n"
    "echo \"model $(conn \"$model\")\"\n"
    "rm -f /tmp/agt-verify-pids /tmp/agt-verify-forked\n"
    "( i=0; while [ $i -lt \"$tries\" ]; do sleep 30 </dev/null >/dev/null 2>&1 & "
    "echo $! >>/tmp/agt-verify-pids; i=$((i + 1)); echo $i >/tmp/agt-verify-forked; done ) "
    "2>/dev/null\n"
    "read forked </tmp/agt-verify-forked\n"
    "while read p; do kill $p; done </tmp/agt-verify-pids\n"
    "echo \"forked $forked\"\n";

/* The guest paths no jail may see: agtd's state and socket, the marker, the model server's
 * script, every workspace as the guest names it.  Those that exist on the guest. */
static int guest_paths(struct verify *v, struct agt_strv *paths, agt_error_t *err)
{
  struct agt_strv cand = {0};
  struct sb s = {0};
  cleanup_free char *out = NULL;
  char *save = NULL;
  int r;

  agt_strv_push(&cand, v->state_dir);
  agt_strv_push(&cand, agt_config_get(&v->c->cfg, AGT_CFG_AGTD_SOCKET));
  agt_strv_pushf(&cand, "%s/guest-only", v->mark);
  agt_strv_push(&cand, v->model_path);
  for (unsigned k = 0; k < v->n; k++)
    if (v->j[k].workspace && *v->j[k].workspace)
      agt_strv_push(&cand, v->j[k].workspace);
  sb_addf(&s, "for p in");
  for (size_t i = 0; i < cand.n; i++) {
    sb_addf(&s, " ");
    sb_add_quoted(&s, cand.v[i]);
  }
  sb_addf(&s, "; do [ -e \"$p\" ] && echo \"$p\"; done; exit 0\n");
  agt_strv_clear(&cand);
  r = guest(v, s.s, &out, err);
  free(s.s);
  if (r < 0)
    return -1;
  for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    agt_strv_push(paths, l);
  return 0;
}

/* Run the probe in every jail at once: one connection each, then read them in turn. */
static int probe_jails(struct verify *v, char *const *paths, agt_error_t *err)
{
  agt_rpc_t rpc[VERIFY_MAX_JAILS];
  char own[16], model[16], tries[16];
  struct sb others = {0};

  (void)err;
  snprintf(model, sizeof model, "%u", v->model_port);
  snprintf(tries, sizeof tries, "%d", VERIFY_PIDS + 16);
  for (unsigned k = 0; k < v->n; k++)
    sb_addf(&others, "%s%u", k ? " " : "", v->j[k].port);
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    json_t *argv, *params, *res = NULL;
    agt_error_t e = NULL;

    rpc[k].fd = -1;
    if (!j->started || !j->turn_done)
      continue;
    snprintf(own, sizeof own, "%u", j->port);
    argv = json_pack("[s, s, s, s, s, s, s, s]", "/bin/sh", "-c", probe_script, "agt-verify-probe",
                     own, model, tries, others.s ? others.s : "");
    for (size_t i = 0; paths[i]; i++)
      json_array_append_new(argv, json_string(paths[i]));
    params = json_pack("{s:s, s:o}", "name", j->name, "argv", argv);
    if (agt_guest_rpc(v->c, &rpc[k], &e) < 0 ||
        agt_rpc_call(&rpc[k], "jail.exec", params, &res, &e) < 0) {
      j->probe = xasprintf("jail.exec failed: %s", e->msg);
      j->probe_code = -1;
      agt_error_release(&e);
      agt_rpc_close(&rpc[k]);
      rpc[k].fd = -1;
    }
    json_decref(params);
    json_decref(res);
  }
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    struct sb o = {0};
    agt_error_t e = NULL;

    if (rpc[k].fd < 0)
      continue;
    j->probe_code = -1;
    for (;;) {
      json_t *msg = NULL, *x;
      if (agt_rpc_read_msg(&rpc[k], &msg, &e) < 0) {
        sb_addf(&o, "\n(the stream ended: %s)", e->msg);
        agt_error_release(&e);
        break;
      }
      if ((x = json_object_get(msg, "out")) != NULL) {
        size_t len = 0;
        cleanup_free char *d = agt_base64_decode(json_string_value(x), &len);
        if (d && len)
          sb_addf(&o, "%.*s", (int)len, d);
      } else if ((x = json_object_get(msg, "exit")) != NULL) {
        j->probe_code = (int)json_integer_value(json_object_get(x, "exit_code"));
        json_decref(msg);
        break;
      }
      json_decref(msg);
    }
    agt_rpc_close(&rpc[k]);
    j->probe = o.s ? o.s : xstrdup("");
  }
  free(others.s);
  return 0;
}

/* The value after "key " on a line of the probe's output, or NULL. */
static char *probe_value(const char *probe, const char *key)
{
  size_t n = strlen(key);

  for (const char *l = probe; l && *l;) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    if (len >= n + 1 && strncmp(l, key, n) == 0 && l[n] == ' ')
      return xstrndup(l + n + 1, len - n - 1);
    if (len == n && strncmp(l, key, n) == 0)
      return xstrdup("");
    l = nl ? nl + 1 : NULL;
  }
  return NULL;
}

static void inspect_jails(struct verify *v)
{
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    agt_error_t e = NULL;

    if (!j->started)
      continue;
    if (tcall(v, "jail.inspect", json_pack("{s:s}", "name", j->name), &j->info, &e) < 0)
      agt_error_release(&e);
    if (j->gone && j->info && json_object_get(j->info, "reason"))
      j->reason = xstrdup(str(j->info, "reason"));
  }
}

static const char *mib(uint64_t n, char *buf, size_t len)
{
  return agt_human_bytes(n, buf, len);
}

/* The last line the agent printed before its turn ended (its error, when it failed). */
static char *last_words(const struct vjail *j)
{
  const char *log = j->log.s ? j->log.s : "", *end = strstr(log, "agt-verify: turn-end ");
  const char *b;

  if (end == NULL)
    end = log + strlen(log);
  while (end > log && (end[-1] == '\n' || end[-1] == ' '))
    end--;
  for (b = end; b > log && b[-1] != '\n'; b--)
    ;
  if (strncmp(b, "agt-verify: turn-start", 22) == 0 || b == end)
    return xstrdup("nothing");
  return xasprintf("'%.*s'", (int)(end - b > 300 ? 300 : end - b), b);
}

static void check_turns(struct verify *v)
{
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    const char *who = j->a ? j->a->p->name : "opencode";
    cleanup_free char *why = NULL, *words = NULL;
    struct sb others = {0};

    if (!j->started)
      continue;
    if (j->file && strcmp(j->file, j->name) == 0 && j->turn_done) {
      row(v, "turn", j->name, 1,
          "%s wrote out.txt = %s into its workspace in %.1f s (exit %d); %d model "
          "requests through the proxy",
          who, j->file, j->t1 - j->t0, j->rc, j->allowed);
      continue;
    }
    if (!j->turn_done)
      why = xasprintf("the turn did not end%s%s%s%s",
                      j->gone ? ": the jail exited" : " within --timeout", j->reason ? " (" : "",
                      j->reason ? j->reason : "", j->reason ? ")" : "");
    else
      why = xasprintf("%s exited %d after %.1f s", who, j->rc, j->t1 - j->t0);
    if (j->a)
      words = last_words(j);
    for (size_t i = 0; i < j->refused.n; i++)
      sb_addf(&others, "%s%s", i ? ", " : "", j->refused.v[i]);
    if (j->a && others.len) /* it wanted more than the model, and could not do without it */
      row(v, "turn", j->name, 2,
          "%s cannot run offline here: it insists on %s (refused: only the model is on its "
          "allowlist); %s; its last words: %s",
          who, others.s, why, words);
    else if (j->file)
      row(v, "turn", j->name, 0, "out.txt holds '%s', not its name; %s", j->file, why);
    else
      row(v, "turn", j->name, 0,
          "no out.txt in its workspace %s: the agent could not complete its turn; %s; %d "
          "model requests allowed, %d refused%s%s%s%s%s",
          j->workspace ? j->workspace : "", why, j->allowed, j->blocked,
          j->blocked_reason ? " (the proxy: " : "", j->blocked_reason ? j->blocked_reason : "",
          j->blocked_reason ? ")" : "", words ? "; its last words: " : "", words ? words : "");
    free(others.s);
  }
}

/* --agent: one row per agent, from its jails' turn rows: ok when every turn wrote its file,
 * skipped when a turn could not run offline (and none failed otherwise). */
static void check_agents(struct verify *v)
{
  for (unsigned k = 0; k < v->na; k++) {
    struct vagent *a = &v->a[k];
    const char *ver = a->p->npm ? agt_layer_pin(&v->c->cfg, a->p) : NULL;
    unsigned ok = 0, skip = 0;
    double lo = 0, hi = 0;
    int req = 0;
    struct sb need = {0};

    for (unsigned i = a->first; i < a->first + a->count; i++) {
      struct vjail *j = &v->j[i];
      if (!j->started)
        continue;
      if (j->file && strcmp(j->file, j->name) == 0 && j->turn_done) {
        double d = j->t1 - j->t0;
        if (ok == 0 || d < lo)
          lo = d;
        if (ok == 0 || d > hi)
          hi = d;
        ok++;
        req += j->allowed;
      } else if (j->refused.n) {
        skip++;
        for (size_t h = 0; h < j->refused.n; h++)
          if (need.s == NULL || strstr(need.s, j->refused.v[h]) == NULL)
            sb_addf(&need, "%s%s", need.len ? ", " : "", j->refused.v[h]);
      }
    }
    if (ok == a->count)
      row(v, "agent", a->p->name, 1,
          "%s %s (%s, %s): %u of %u turns wrote their files offline, in %.1f to %.1f s; %d "
          "model requests",
          a->p->name, ver ? ver : "from the base rootfs", agt_profile_runtime_name(a->p->runtime),
          agt_profile_api_name(a->p->api), ok, a->count, lo, hi, req);
    else if (skip && ok + skip == a->count)
      row(v, "agent", a->p->name, 2, "skipped: %s cannot run offline: it insists on %s", a->p->name,
          need.s);
    else
      row(v, "agent", a->p->name, 0, "%u of %u turns wrote their files%s%s", ok, a->count,
          a->broken ? ": its layers could not be built: " : "", a->broken ? a->broken : "");
    free(need.s);
  }
}

static void check_leaks(struct verify *v)
{
  unsigned others = 0;

  for (unsigned k = 0; k < v->n; k++)
    others += v->j[k].started && v->j[k].workspace;
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    if (!j->started)
      continue;
    if (j->elsewhere.n == 0) {
      row(v, "only-here", j->name, 1, "its name is in no other workspace (%u checked)",
          others ? others - 1 : 0);
    } else {
      struct sb where = {0};
      for (size_t i = 0; i < j->elsewhere.n; i++)
        sb_addf(&where, "%s%s", i ? ", " : "", j->elsewhere.v[i]);
      row(v, "only-here", j->name, 0, "its file leaked: its name is also in %s", where.s);
      free(where.s);
    }
  }
}

static void check_concurrency(struct verify *v)
{
  double max_t0 = 0, min_t1 = 0;
  const char *late = NULL, *early = NULL;
  unsigned n = 0;

  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    if (!j->turn_started || !j->turn_done)
      continue;
    if (n == 0 || j->t0 > max_t0) {
      max_t0 = j->t0;
      late = j->name;
    }
    if (n == 0 || j->t1 < min_t1) {
      min_t1 = j->t1;
      early = j->name;
    }
    n++;
  }
  if (n < 2) {
    row(v, "concurrent", "", v->n == 1 && n == 1, "%u turn%s timed (one jail runs alone)", n,
        n == 1 ? "" : "s");
    return;
  }
  if (max_t0 < min_t1)
    row(v, "concurrent", "", 1,
        "all %u turns ran at once for %.1f s (the last started at %.2f, "
        "the first ended at %.2f, guest uptime)",
        n, min_t1 - max_t0, max_t0, min_t1);
  else
    row(v, "concurrent", "", 0,
        "the turns did not overlap: %s ended (%.2f) before %s started (%.2f)", early, min_t1, late,
        max_t0);
}

static int own_proc(const char *cmd)
{
  static const char *const own[] = {"agt-init", "sleep", "nc ", "/bin/sh",   "sh ",   "tr ",
                                    "cut ",     "cat ",  "ls ", "/bin/bash", "bash ", NULL};
  if (*cmd == '\0')
    return 1; /* a process that just exited, or a kernel thread's empty cmdline */
  for (const char *const *p = own; *p; p++)
    if (strncmp(cmd, *p, strlen(*p)) == 0)
      return 1;
  return 0;
}

static void check_isolation(struct verify *v, size_t npaths)
{
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    struct sb seen = {0}, foreign = {0}, nets = {0};
    cleanup_free char *word = NULL, *procs = NULL, *own = NULL, *model = NULL;
    const char *l;
    int nprocs;

    if (!j->started)
      continue;
    if (j->probe == NULL) {
      row(v, "isolation", j->name, 0, "not probed: its turn did not end");
      continue;
    }
    if (j->probe_code != 0) {
      row(v, "isolation", j->name, 0, "the probe (jail.exec) failed with %d: %.200s", j->probe_code,
          j->probe);
      continue;
    }
    word = probe_value(j->probe, "word");
    procs = probe_value(j->probe, "procs");
    own = probe_value(j->probe, "own");
    model = probe_value(j->probe, "model");
    for (l = j->probe; l && *l;) {
      const char *nl = strchr(l, '\n');
      cleanup_free char *line = nl ? xstrndup(l, (size_t)(nl - l)) : xstrdup(l);
      l = nl ? nl + 1 : NULL;
      if (strncmp(line, "sees ", 5) == 0)
        sb_addf(&seen, "%s%s", seen.len ? ", " : "", line + 5);
      if (strncmp(line, "proc ", 5) == 0) {
        const char *cmd = strchr(line + 5, ' ');
        int bad;
        cmd = cmd ? cmd + 1 : "";
        bad = !own_proc(cmd);
        for (unsigned o = 0; o < v->n && !strstr(cmd, "agt-verify-probe"); o++)
          if (o != k && strstr(cmd, v->j[o].name))
            bad = 1;
        if (bad)
          sb_addf(&foreign, "%s%s", foreign.len ? ", " : "", line + 5);
      }
      if (strncmp(line, "other ", 6) == 0) {
        unsigned port = (unsigned)atoi(line + 6);
        const char *res = strchr(line + 6, ' ');
        res = res ? res + 1 : "";
        if (port != j->port && strncmp(res, "refused", 7) != 0)
          sb_addf(&nets, "%s127.0.0.1:%u answered (%s)", nets.len ? ", " : "", port, res);
      }
    }
    if (model && strncmp(model, "refused", 7) != 0)
      sb_addf(&nets, "%sthe guest's 127.0.0.1:%u answered directly (%s)", nets.len ? ", " : "",
              v->model_port, model);
    if (j->guest_conn && strncmp(j->guest_conn, "refused", 7) != 0 &&
        strstr(j->guest_conn, j->name))
      sb_addf(&nets, "%sthe guest reached the jail's 127.0.0.1:%u", nets.len ? ", " : "", j->port);

    /* files: what it sees of the guest; its /work/out.txt, when there is one, is its own */
    if (seen.len)
      row(v, "files", j->name, 0, "it sees guest paths: %s", seen.s);
    else if (word && *word && strcmp(word, j->name) != 0)
      row(v, "files", j->name, 0, "/work/out.txt holds '%s', not its own name", word);
    else
      row(v, "files", j->name, 1,
          "%s; none of %zu guest paths is visible (agtd's state and socket, the workspaces as "
          "the guest names them, the model server, a guest-only file)",
          word && *word ? "/work/out.txt is its own" : "no /work/out.txt (see its turn)", npaths);
    /* processes */
    nprocs = procs ? atoi(procs) : -1;
    if (foreign.len == 0 && nprocs > 0 && nprocs < 32)
      row(v, "processes", j->name, 1, "it sees %d processes, all its own (the guest runs %d)",
          nprocs, v->guest_procs);
    else
      row(v, "processes", j->name, 0, "it sees %d processes%s%s", nprocs,
          foreign.len ? ", not all its own: " : "", foreign.len ? foreign.s : "");
    /* network */
    {
      cleanup_free char *banner = xasprintf("open:agt-verify %s", j->name);
      if (own == NULL || strcmp(own, banner) != 0)
        row(v, "network", j->name, 0,
            "its own listener on 127.0.0.1:%u did not answer inside it (%s): the probe is broken",
            j->port, own ? own : "no answer");
      else if (nets.len)
        row(v, "network", j->name, 0, "%s", nets.s);
      else
        row(v, "network", j->name, 1,
            "its 127.0.0.1:%u answers inside it only; the other jails' ports and the guest's "
            "127.0.0.1:%u are closed to it; the guest cannot reach its port",
            j->port, v->model_port);
    }
    free(seen.s);
    free(foreign.s);
    free(nets.s);
  }
}

static void check_limits(struct verify *v)
{
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    json_t *lim = json_object_get(j->info, "limits");
    uint64_t mem = (uint64_t)json_integer_value(json_object_get(lim, "memory"));
    uint64_t pids = (uint64_t)json_integer_value(json_object_get(lim, "pids"));
    cleanup_free char *forked_s = j->probe ? probe_value(j->probe, "forked") : NULL;
    int forked = forked_s ? atoi(forked_s) : -1;
    char a[32], b[32];
    struct sb bad = {0};

    if (!j->started)
      continue;
    if (mem != VERIFY_MEMORY || pids != VERIFY_PIDS)
      sb_addf(&bad, "agtd reports memory %llu, pids %llu; ", (unsigned long long)mem,
              (unsigned long long)pids);
    if (!j->cg_found)
      sb_addf(&bad, "no cgroup named %s on the guest; ", j->name);
    else if (j->cg_memory != VERIFY_MEMORY || j->cg_pids != VERIFY_PIDS)
      sb_addf(&bad, "its cgroup says memory %llu, pids %llu; ", (unsigned long long)j->cg_memory,
              (unsigned long long)j->cg_pids);
    if (j->cg_peak > VERIFY_MEMORY)
      sb_addf(&bad, "its memory peaked at %llu; ", (unsigned long long)j->cg_peak);
    if (j->probe && (forked < 0 || forked >= VERIFY_PIDS))
      sb_addf(&bad, "%d processes forked past the pids limit %d; ", forked, VERIFY_PIDS);
    if (bad.len) {
      bad.s[bad.len - 2] = '\0';
      row(v, "limits", j->name, 0, "%s", bad.s);
    } else {
      cleanup_free char *forks =
          j->probe ? xasprintf("forks stopped after %d of %d tries", forked, VERIFY_PIDS + 16)
                   : xstrdup("no fork test: not probed");
      row(v, "limits", j->name, 1,
          "memory %s (peak %s) and pids %d set, read back from agtd and its cgroup; %s",
          mib(VERIFY_MEMORY, a, sizeof a), j->cg_peak ? mib(j->cg_peak, b, sizeof b) : "n/a",
          VERIFY_PIDS, forks);
    }
    free(bad.s);
  }
}

static void on_left_line(struct verify *v, struct vjail *j, char *rest)
{
  (void)v;
  agt_strv_push(&j->left, rest);
}

/* Remove the jails, then look for anything of theirs on the guest. */
static int remove_and_check(struct verify *v, double *removal_s, agt_error_t *err)
{
  struct sb s = {0};
  cleanup_free char *out = NULL;
  double t = now_s();
  int r;

  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    json_t *res = NULL;
    agt_error_t e = NULL;
    if (!j->started)
      continue;
    if (tcall(v, "jail.rm", json_pack("{s:s, s:b}", "name", j->name, "force", 1), &res, &e) < 0) {
      agt_strv_pushf(&j->left, "jail.rm failed: %s", e->msg);
      agt_error_release(&e);
    }
    json_decref(res);
  }
  *removal_s = now_s() - t;
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    if (!j->started)
      continue;
    sb_addf(
        &s,
        "n=%s\n"
        "awk -v n=\"$n\" 'index($0, n) { print \"J%u mount \" $5 \" (\" $(NF-2) \")\" }' "
        "/proc/self/mountinfo\n"
        "find /sys/fs/cgroup -maxdepth 4 -type d -name \"$n\" 2>/dev/null | sed 's/^/J%u cgroup "
        "/'\n"
        "grep -lE \"/$n\\$\" /proc/[0-9]*/cgroup 2>/dev/null | sed 's/^/J%u process in its cgroup: "
        "/'\n"
        "grep -laF \"AGT_VERIFY_NAME=$n\" /proc/[0-9]*/environ 2>/dev/null | grep -v '/self/' | "
        "sed 's/^/J%u process with its environment: /'\n",
        j->name, k + 1, k + 1, k + 1, k + 1);
    sb_addf(&s, "[ -e ");
    {
      cleanup_free char *d = xasprintf("%s/jails/%s", v->state_dir, j->name);
      sb_add_quoted(&s, d);
    }
    sb_addf(&s, " ] && echo \"J%u its directory in agtd's state\"\n", k + 1);
  }
  sb_addf(&s, "exit 0\n");
  r = guest(v, s.s, &out, err);
  free(s.s);
  if (r < 0)
    return agt_error_wrap(err, "look for what the jails left behind");
  per_jail_lines(v, out, on_left_line);
  for (unsigned k = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    struct sb what = {0};
    if (!j->started)
      continue;
    if (j->left.n == 0) {
      row(v, "cleanup", j->name, 1, "removed: no mount, cgroup, process or directory is left");
      continue;
    }
    for (size_t i = 0; i < j->left.n; i++)
      sb_addf(&what, "%s%s", i ? "; " : "", j->left.v[i]);
    row(v, "cleanup", j->name, 0, "left behind after jail.rm: %s", what.s);
    free(what.s);
  }
  return 0;
}

/* Whatever happened: the jails, the marker, the model server. */
static void teardown(struct verify *v)
{
  struct sb s = {0};
  cleanup_free char *out = NULL;
  agt_error_t e = NULL;

  for (unsigned k = 0; k < v->n; k++) {
    json_t *res = NULL;
    if (!v->j[k].started)
      continue;
    if (tcall(v, "jail.rm", json_pack("{s:s, s:b}", "name", v->j[k].name, "force", 1), &res, &e) <
        0)
      agt_error_release(&e);
    json_decref(res);
  }
  if (v->mark[0]) {
    sb_addf(&s, "rm -rf %s; exit 0\n", v->mark);
    if (guest(v, s.s, &out, &e) < 0) {
      agt_note(v->c, "could not clean %s on the guest: %s", v->mark, e->msg);
      agt_error_release(&e);
    }
    free(s.s);
  }
  if (v->model_up)
    agt_guest_proc_end(&v->model);
  v->model_up = 0;
}

static int verify_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct verify *v = ctx;
  uint64_t n;

  switch (key) {
  case 'n':
    if (agt_parse_u64("--jails", arg, &n, err) < 0)
      return -1;
    if (n < 1 || n > VERIFY_MAX_JAILS)
      return agt_error_kind(err, AGT_E_INVALID, "--jails %s: give 1 to %d", arg, VERIFY_MAX_JAILS);
    v->n = (unsigned)n;
    v->jails_given = 1;
    return 0;
  case OPT_ROOTFS:
    v->rootfs = arg;
    return 0;
  case OPT_TIMEOUT:
    return agt_parse_duration("--timeout", arg, &v->timeout_s, err);
  case OPT_AGENT:
    v->agent_arg = arg;
    return 0;
  case AGT_OPT_JSON:
    if (v->json == NULL)
      v->json = json_array();
    return 0;
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

static void release(struct verify *v)
{
  json_decref(v->json);
  for (unsigned k = 0; k < VERIFY_MAX_JAILS; k++) {
    struct vjail *j = &v->j[k];
    free(j->workspace);
    free(j->log.s);
    free(j->reason);
    free(j->blocked_reason);
    agt_strv_clear(&j->refused);
    free(j->file);
    agt_strv_clear(&j->elsewhere);
    free(j->guest_conn);
    json_decref(j->info);
    free(j->probe);
    agt_strv_clear(&j->left);
  }
  for (unsigned k = 0; k < v->na; k++) {
    json_decref(v->a[k].layers);
    free(v->a[k].broken);
  }
  agt_profiles_release(&v->profiles);
  free(v->arch);
  free(v->src);
  free(v->src_missing);
  free(v->model_path);
  free(v->state_dir);
  free(v->failures.s);
}

int cmd_verify(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct verify *v = xzalloc(sizeof *v);
  struct agt_strv paths = {0};
  struct sigaction sa, old_int, old_term;
  json_t *st = NULL;
  char desc[256];
  double t_begin = now_s(), t_turns = 0, t_turns_end = 0, removal = 0, tmin = 0, tmax = 0;
  int i, r = -1;

  v->c = c;
  v->n = 8;
  v->rootfs = agt_config_get(&c->cfg, AGT_CFG_JAIL_ROOTFS);
  v->timeout_s = 300;
  i = agt_cmd_opts(argc, argv, &help, verify_opt, v, err);
  if (i == -2 || i < 0 || i < argc) {
    if (i >= 0 && i < argc)
      agt_error_kind(err, AGT_E_INVALID, "agt verify takes no operands");
    free(v);
    return i == -2 ? 0 : -1;
  }
  if (v->agent_arg && select_agents(v, err) < 0) {
    release(v);
    free(v);
    return -1;
  }
  random_tag(v->tag, sizeof v->tag);
  for (unsigned k = 0; k < v->na; k++)
    for (unsigned x = v->a[k].first; x < v->a[k].first + v->a[k].count; x++)
      v->j[x].a = &v->a[k];
  for (unsigned k = 0; k < v->n; k++) {
    snprintf(v->j[k].name, sizeof v->j[k].name, "verify-%s-%02u", v->tag, k + 1);
    v->j[k].port = VERIFY_LISTEN_BASE + k + 1;
    v->j[k].rc = -1;
  }

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  interrupted = 0;

  if (agt_target_call(&c->target, "daemon.status", NULL, &st, err) < 0) {
    agt_error_wrap(err, "agtd at %s ('agt up' starts it)", c->target.spec);
    goto out;
  }
  v->state_dir = xstrdup(str(st, "state_dir"));
  v->agtd_pid = (long long)json_integer_value(json_object_get(st, "pid"));
  if (json_string_value(json_object_get(st, "arch")))
    v->arch = xstrdup(json_string_value(json_object_get(st, "arch")));
  else {
    struct utsname un;
    v->arch = xstrdup(uname(&un) == 0 ? un.machine : "unknown");
  }
  if (v->json == NULL)
    printf("%-11s %-16s %-6s %s\n", "CHECK", "JAIL", "RESULT", "DETAIL");
  row(v, "agtd", "", 1, "%s at %s, cgroup v%lld, state %s",
      json_string_value(json_object_get(c->target.rpc.hello, "agtd_version")),
      agt_target_describe(&c->target, desc, sizeof desc),
      (long long)json_integer_value(json_object_get(st, "cgroup_version")), v->state_dir);
  snprintf(v->mark, sizeof v->mark, "/tmp/agt-verify-%s", v->tag);
  if (setup_guest(v, err) < 0)
    goto out;
  if (ensure_rootfs(v, err) < 0 || start_model(v, err) < 0)
    goto out;
  agent_layers(v);

  t_turns = now_s();
  start_jails(v);
  if (wait_turns(v, err) < 0)
    goto out;
  t_turns_end = now_s();
  read_netlogs(v);
  inspect_jails(v);
  if (look_from_guest(v, err) < 0 || guest_paths(v, &paths, err) < 0)
    goto out;
  probe_jails(v, paths.v, err);
  check_turns(v);
  check_agents(v);
  check_leaks(v);
  check_concurrency(v);
  check_isolation(v, paths.n);
  check_limits(v);
  if (remove_and_check(v, &removal, err) < 0)
    goto out;
  for (unsigned k = 0, n = 0; k < v->n; k++) {
    struct vjail *j = &v->j[k];
    double d;
    if (!j->turn_done || !j->turn_started)
      continue;
    d = j->t1 - j->t0;
    if (n == 0 || d < tmin)
      tmin = d;
    if (n == 0 || d > tmax)
      tmax = d;
    n++;
  }
  row(v, "wall", "", 1,
      "whole run %.1f s: setup %.1f s, %u turns %.1f s (each %.1f to %.1f s), checks %.1f s, "
      "removal %.1f s",
      now_s() - t_begin, t_turns - t_begin, v->n, t_turns_end - t_turns, tmin, tmax,
      now_s() - t_turns_end - removal, removal);
  r = 0;
out:
  teardown(v);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (r == 0 && v->json) {
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:f, s:O}", "jails", (int)v->n, "checks",
                          (int)v->checks, "passed", (int)(v->checks - v->failed - v->skipped),
                          "failed", (int)v->failed, "skipped", (int)v->skipped, "seconds",
                          now_s() - t_begin, "rows", v->json);
    if (agt_print_out(o, v->json, err) < 0)
      r = -1;
    json_decref(o);
  } else if (r == 0) {
    printf("verify: %u jails, %u checks, %u passed, %u failed, %u skipped, %.1f s\n", v->n,
           v->checks, v->checks - v->failed - v->skipped, v->failed, v->skipped, now_s() - t_begin);
  }
  if (r == 0) {
    if (v->failed)
      r = agt_error_kind(err, AGT_E_STATE, "verify: %u of %u checks failed: %s", v->failed,
                         v->checks, v->failures.s);
  }
  agt_strv_clear(&paths);
  json_decref(st);
  release(v);
  free(v);
  return r;
}
