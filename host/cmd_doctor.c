/* agt doctor: checks the host (limactl, Lima's key, free disk, the config), the VM (running,
 * agtd answering, versions) and the guest (namespaces, cgroups, overlayfs, the rootfs), one
 * row each, with the command that fixes a failure.  Exits 1 when a check fails. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agt.h"
#include "agt_paths.h"
#include "agt_version.h"
#include "cleanup.h"
#include "guest.h"
#include "proto.h"
#include "subprocess.h"
#include "util.h"
#include "xalloc.h"

#define DISK_FAIL (5ull << 30)  /* less than this free fails */
#define DISK_WARN (20ull << 30) /* less than this warns */

static const struct agt_cmd_help help = {
    "agt doctor [--json | --format TEMPLATE]",
    "Check the host, the VM and the guest; each failure comes with its fix (--json: the rows as "
    "a JSON array of {area, check, result, detail, fix}).",
    agt_json_format_opts};

enum result { D_OK, D_WARN, D_FAIL, D_NA, D_SKIP };

struct doctor {
  struct agt_ctx *c;
  unsigned n, warned, failed, skipped;
  const char *na; /* why the VM rows do not apply, or NULL */
  json_t *json;   /* --json: the rows, printed at the end */
  int denied;     /* agtd's socket refused agt (EACCES): agtd runs, agt may not use it */
};

static void row(struct doctor *d, const char *area, const char *check, enum result r,
                const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void row(struct doctor *d, const char *area, const char *check, enum result r,
                const char *fix, const char *fmt, ...)
{
  static const char *const names[] = {"ok", "warn", "FAIL", "n/a", "skip"};
  cleanup_free char *detail = NULL;
  va_list ap;

  va_start(ap, fmt);
  detail = xvasprintf(fmt, ap);
  va_end(ap);
  d->n++;
  d->warned += r == D_WARN;
  d->failed += r == D_FAIL;
  d->skipped += r == D_NA || r == D_SKIP;
  if (d->json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "area", area, "check", check, "result", names[r],
                          "detail", detail);
    if (fix && (r == D_FAIL || r == D_WARN))
      json_object_set_new(o, "fix", json_string(fix));
    json_array_append_new(d->json, o);
    return;
  }
  printf("%-6s %-11s %-6s %s\n", area, check, names[r], detail);
  if (fix && (r == D_FAIL || r == D_WARN))
    printf("%-6s %-11s %-6s fix: %s\n", "", "", "", fix);
  fflush(stdout);
}

/* "1.2.3" >= major.minor */
static int version_at_least(const char *v, int major, int minor)
{
  int a = 0, b = 0;

  if (sscanf(v, "%d.%d", &a, &b) < 1)
    return 0;
  return a > major || (a == major && b >= minor);
}

/* The machine's facts (platform.h): the system, vz and Rosetta on macOS, and its CPUs and
 * memory against the VM's; with another target than Lima, the system alone. */
static void check_facts(struct doctor *d)
{
  static const enum result as[] = {
      [AGT_FACT_OK] = D_OK, [AGT_FACT_WARN] = D_WARN, [AGT_FACT_FAIL] = D_FAIL};
  struct agt_config *cfg = &d->c->cfg;
  struct agt_fact_row rows[AGT_FACT_ROWS];
  struct agt_vm_wants want = {0, 0, agt_config_get(cfg, AGT_CFG_VM_TYPE),
                              strcmp(agt_config_get(cfg, AGT_CFG_VM_ROSETTA), "on") == 0};
  uint64_t cpus = 0;
  agt_error_t e = NULL;
  size_t n;

  if (agt_config_u64(cfg, AGT_CFG_VM_CPUS, &cpus, &e) < 0 ||
      agt_config_size(cfg, AGT_CFG_VM_MEMORY, &want.memory, &e) < 0)
    agt_error_release(&e); /* the config row says what is wrong */
  want.cpus = (unsigned)cpus;
  n = agt_host_fact_rows(&d->c->host_facts, &want, rows);
  for (size_t k = 0; k < (d->na ? 1 : n); k++)
    row(d, "host", rows[k].check, as[rows[k].result], rows[k].fix, "%s", rows[k].detail);
}

static void check_limactl(struct doctor *d)
{
  const char *prog = agt_config_get(&d->c->cfg, AGT_CFG_LIMA_LIMACTL);
  cleanup_free char *path = agt_find_program(prog);
  struct agt_strv a = {0};
  cleanup_strv char **argv = NULL;
  struct agt_subprocess p = {0};
  agt_error_t e = NULL;
  const char *v;

  if (d->na) {
    row(d, "host", "limactl", D_NA, NULL, "%s%s%s", d->na, path ? ": found " : "",
        path ? path : "");
    return;
  }
  if (path == NULL) {
    row(d, "host", "limactl", D_FAIL,
        "install Lima 2.x (macOS: brew install lima; see https://lima-vm.io/docs/installation/)",
        "'%s' is not in PATH (lima.limactl; agt is tested with Lima %s)", prog, AGT_LIMA_PINNED);
    return;
  }
  agt_strv_push(&a, path);
  agt_strv_push(&a, "--version");
  argv = agt_strv_steal(&a);
  p.argv = argv;
  p.capture = 1;
  if (agt_subprocess_run(&p, &e) < 0) {
    row(d, "host", "limactl", D_FAIL, "reinstall Lima", "%s does not run: %s", path, e->msg);
    agt_error_release(&e);
    return;
  }
  v = strstr(p.out_buf, "version ");
  v = v ? v + 8 : "";
  if (p.exit_code != 0 && strstr(p.err_buf, "must not run as the root user")) {
    row(d, "host", "limactl", D_FAIL,
        "run agt as your own user (Lima's VMs are a user's), or use --target local",
        "%s refuses to run as root (agt is tested with Lima %s)", path, AGT_LIMA_PINNED);
  } else if (p.exit_code != 0 || !version_at_least(v, 2, 0)) {
    cleanup_free char *shown = xstrndup(v, strcspn(v, "\n"));
    row(d, "host", "limactl", D_FAIL, "upgrade Lima to 2.x (macOS: brew upgrade lima)",
        "%s, version '%s': agt's template needs Lima 2.0 or later", path, shown);
  } else {
    cleanup_free char *shown = xstrndup(v, strcspn(v, "\n"));
    row(d, "host", "limactl", D_OK, NULL, "%s, version %s (agt is tested with %s)", path, shown,
        AGT_LIMA_PINNED);
  }
  agt_subprocess_release(&p);
}

static void check_key(struct doctor *d, int vm_exists)
{
  cleanup_free char *key = NULL;

  if (d->na) {
    row(d, "host", "lima key", D_NA, NULL, "%s", d->na);
    return;
  }
  key = agt_lima_identity(&d->c->lima);
  if (access(key, D_OK) == 0)
    row(d, "host", "lima key", D_OK, NULL, "%s", key);
  else if (!vm_exists && errno == ENOENT)
    row(d, "host", "lima key", D_WARN, "agt up (Lima makes its key at the first start)",
        "%s does not exist yet", key);
  else
    row(d, "host", "lima key", D_FAIL,
        "agt reset --force && agt up, or remove the file for Lima to make a new one",
        "%s cannot be read: %s", key, strerror(errno));
}

/* The nearest existing directory at or above path. */
static char *existing_dir(const char *path)
{
  char *p = xstrdup(path);
  struct stat st;

  while (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
    char *slash = strrchr(p, '/');
    if (slash == NULL || slash == p) {
      free(p);
      return xstrdup("/");
    }
    *slash = '\0';
  }
  return p;
}

static void check_disk(struct doctor *d, const char *state_dir)
{
  const char *where = d->c->target.kind == AGT_TARGET_LIMA ? d->c->lima.home : state_dir;
  cleanup_free char *dir = existing_dir(where ? where : "/");
  struct statvfs sv;
  unsigned long long avail;
  char buf[32];

  if (d->c->target.kind == AGT_TARGET_SSH) {
    row(d, "host", "disk", D_NA, NULL, "agtd's disk is on %s", d->c->target.host);
    return;
  }
  if (statvfs(dir, &sv) != 0) {
    row(d, "host", "disk", D_FAIL, NULL, "statvfs '%s': %s", dir, strerror(errno));
    return;
  }
  avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
  agt_human_bytes(avail, buf, sizeof buf);
  if (avail < DISK_FAIL)
    row(d, "host", "disk", D_FAIL, "free some disk space there", "%s free on %s (%s)", buf, dir,
        d->c->target.kind == AGT_TARGET_LIMA ? "Lima's VMs" : "agtd's state");
  else if (avail < DISK_WARN)
    row(d, "host", "disk", D_WARN, "free some disk space there",
        "%s free on %s: a VM's disk grows up to vm.disk (%s)", buf, dir,
        agt_config_get(&d->c->cfg, AGT_CFG_VM_DISK));
  else
    row(d, "host", "disk", D_OK, NULL, "%s free on %s", buf, dir);
}

static void check_config(struct doctor *d)
{
  struct agt_config *cfg = &d->c->cfg;

  if (d->c->config_error) {
    row(d, "host", "config", D_FAIL,
        "correct the file at the line and column named (keys: docs/CONFIG.md)", "%s",
        d->c->config_error->msg);
    return;
  }
  if (cfg->nfiles == 0) {
    row(d, "host", "config", D_OK, NULL, "no config file: the defaults; target %s",
        d->c->target.spec);
    return;
  }
  {
    size_t len = 1;
    char *files;
    for (size_t i = 0; i < cfg->nfiles; i++)
      len += strlen(cfg->files[i]) + 2;
    files = xzalloc(len);
    for (size_t i = 0; i < cfg->nfiles; i++) {
      if (i)
        strcat(files, ", ");
      strcat(files, cfg->files[i]);
    }
    row(d, "host", "config", D_OK, NULL, "%s parse%s; target %s", files,
        cfg->nfiles == 1 ? "s" : "", d->c->target.spec);
    free(files);
  }
}

/* The VM: 1 when it runs (or there is no VM), 0 otherwise. */
static int check_vm(struct doctor *d, int *exists)
{
  struct agt_lima_instance in;
  agt_error_t e = NULL;
  int found = 0, running;
  const char *name = d->c->target.instance;

  *exists = 0;
  if (d->na) {
    row(d, "vm", "state", D_NA, NULL, "%s", d->na);
    return 1;
  }
  if (agt_vm_state(d->c, &in, &found, &e) < 0) {
    row(d, "vm", "state", D_FAIL, "install Lima 2.x, or set lima.limactl in the config", "%s",
        e->msg);
    agt_error_release(&e);
    return 0;
  }
  if (!found) {
    row(d, "vm", "state", D_FAIL, "agt up", "vm '%s' does not exist", name);
    return 0;
  }
  *exists = 1;
  running = in.status == AGT_LIMA_RUNNING;
  if (running)
    row(d, "vm", "state", D_OK, NULL, "vm '%s' is Running (%s %s, ssh port %u)", name,
        in.vm_type ? in.vm_type : "?", in.arch ? in.arch : "?", in.ssh_port);
  else if (in.status == AGT_LIMA_BROKEN)
    row(d, "vm", "state", D_FAIL, "agt stop --force && agt up", "vm '%s' is Broken%s%s%s", name,
        in.errors ? " (" : "", in.errors ? in.errors[0] : "", in.errors ? ")" : "");
  else
    row(d, "vm", "state", D_FAIL, "agt up", "vm '%s' is %s", name, agt_lima_status_name(in.status));
  agt_lima_instance_release(&in);
  return running;
}

/* The last line of s, without its newline; s is cut there. */
static const char *last_line(char *s)
{
  size_t n = strlen(s);
  char *nl;

  while (n && s[n - 1] == '\n')
    s[--n] = '\0';
  nl = strrchr(s, '\n');
  return nl ? nl + 1 : s;
}

static const char *agtd_fix(struct doctor *d)
{
  switch (d->c->target.kind) {
  case AGT_TARGET_LIMA:
    return "agt up; if it still fails: agt shell -- sudo systemctl restart agtd "
           "(its log: agt shell -- sudo journalctl -u agtd)";
  case AGT_TARGET_LOCAL:
    if (d->denied)
      return "run agt as root: agtd's socket is root's";
    return "agt up (as root: it starts agtd; its log is /var/log/agt/agtd.log)";
  case AGT_TARGET_SSH:
    break;
  }
  return "start agtd on that host (agtd serve) and check ssh access";
}

/* What lima/provision/machine.sh sets machine-wide (agtd never does): the Lima guest should
 * have it (a warning when not), a local machine or an ssh host may (its owner's choice). */
static void machine_rows(struct doctor *d, const char *out)
{
  const char *p = strstr(out, "printk "), *dm = strstr(out, "dynmods "),
             *on = strstr(out, "opennet ");
  int fwd = 0, br = 0, dns = 0;
  int lima = d->c->target.kind == AGT_TARGET_LIMA;
  enum result miss = lima ? D_WARN : D_OK;
  const char *fix = lima
                        ? "agt shell -- sudo systemctl restart agt-machine agtd"
                        : "as root: lima/provision/machine.sh (of agt's source tree), then restart "
                          "agtd";
  int level = p ? atoi(p + 7) : -1;

  if (dm && atoi(dm + 8) > 0)
    row(d, "guest", "dynmods", D_OK, NULL, "the kernel's cgroup flag favordynmods is on");
  else
    row(d, "guest", "dynmods", miss, fix,
        "favordynmods is off: no prepared jails, cgroup moves wait for RCU%s",
        lima ? "" : " (machine-wide: agtd leaves it to you)");
  if (level >= 0 && level <= 3)
    row(d, "guest", "console log", D_OK, NULL, "console loglevel %d: kernel errors off the console",
        level);
  else
    row(d, "guest", "console log", miss, fix,
        "console loglevel %d: a jail's out-of-memory kill printed on a serial console holds a "
        "CPU%s",
        level, lima ? "" : " (machine-wide: agtd leaves it to you)");
  /* network mode open: the bridge, forwarding and the resolvers (the firewall needs root to
   * read; agtd checks it at every open start) */
  if (on == NULL || sscanf(on + 8, "%d %d %d", &fwd, &br, &dns) != 3)
    fwd = br = dns = 0;
  if (fwd == 1 && br == 1 && dns == 1)
    row(d, "guest", "open net", D_OK, NULL,
        "network mode open is set up: bridge agt0, IPv4 forwarding, resolvers for jails");
  else
    row(d, "guest", "open net", miss, fix, "network mode open is refused: %s%s",
        br != 1    ? "no bridge agt0"
        : fwd != 1 ? "IPv4 forwarding is off"
                   : "no resolvers for jails (/run/agt-open/resolv.conf)",
        lima ? "" : " (machine-wide: agtd leaves it to you)");
}

/* --realtime-starts: the Lima guest's agtd runs with it; elsewhere it is the owner's call. */
static void realtime_row(struct doctor *d, json_t *st)
{
  int lima = d->c->target.kind == AGT_TARGET_LIMA;

  if (json_is_true(json_object_get(st, "realtime_starts")))
    row(d, "guest", "realtime", D_OK, NULL, "starts run SCHED_FIFO (agtd serve --realtime-starts)");
  else
    row(d, "guest", "realtime", lima ? D_WARN : D_OK,
        lima ? "agt stop && agt up (provisioning runs agtd with --realtime-starts)" : NULL,
        "starts at normal priority%s",
        lima ? " (the VM's agtd should run with --realtime-starts)"
             : " (agtd serve --realtime-starts to change: machine-wide)");
}

int cmd_doctor(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct doctor d = {c, 0, 0, 0, 0, NULL, NULL, 0};
  struct agt_flags f = {0, 0, 0};
  json_t *st = NULL, *ls = NULL;
  agt_error_t e = NULL;
  char desc[256], na[64];
  const char *state_dir = "/var/lib/agt", *area;
  int i, vm_exists = 0, vm_up, agtd_up = 0;

  i = agt_cmd_opts(argc, argv, &help, NULL, &f, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt doctor takes no operands");
  if (c->target.kind != AGT_TARGET_LIMA) {
    snprintf(na, sizeof na, "target %s", c->target.kind == AGT_TARGET_LOCAL ? "local" : "ssh://");
    d.na = na;
  }
  if (f.json)
    d.json = json_array();
  else
    printf("%-6s %-11s %-6s %s\n", "AREA", "CHECK", "RESULT", "DETAIL");

  /* host */
  check_facts(&d);
  check_limactl(&d);
  {
    /* the key's row depends on whether the VM exists: ask limactl first, quietly */
    struct agt_lima_instance in;
    int found = 0;
    if (!d.na && agt_vm_state(c, &in, &found, &e) == 0 && found) {
      vm_exists = 1;
      agt_lima_instance_release(&in);
    }
    agt_error_release(&e);
  }
  check_key(&d, vm_exists);
  if (agt_target_call(&c->target, "daemon.status", NULL, &st, &e) == 0)
    state_dir = json_string_value(json_object_get(st, "state_dir"));
  agt_error_release(&e);
  check_disk(&d, state_dir);
  check_config(&d);

  /* the VM and agtd */
  vm_up = check_vm(&d, &vm_exists);
  area = c->target.kind == AGT_TARGET_LIMA    ? "vm"
         : c->target.kind == AGT_TARGET_LOCAL ? "local"
                                              : "ssh";
  if (!vm_up) {
    row(&d, area, "agtd", D_SKIP, NULL, "not checked: the vm is not running");
    row(&d, area, "versions", D_SKIP, NULL, "not checked: the vm is not running");
  } else if (st == NULL && agt_target_call(&c->target, "daemon.status", NULL, &st, &e) < 0) {
    d.denied = e->status == EACCES;
    row(&d, area, "agtd", D_FAIL, agtd_fix(&d), "no answer: %s", e->msg);
    row(&d, area, "versions", D_SKIP, NULL, "not checked: agtd does not answer");
    agt_error_release(&e);
  } else {
    const char *av = json_string_value(json_object_get(st, "agtd_version"));
    json_int_t pv = json_integer_value(json_object_get(c->target.rpc.hello, "version"));
    agtd_up = 1;
    row(&d, area, "agtd", D_OK, NULL, "agtd answers at %s, up %llds",
        agt_target_describe(&c->target, desc, sizeof desc),
        (long long)json_integer_value(json_object_get(st, "uptime")));
    if (av && strcmp(av, AGT_VERSION) == 0 && pv == AGT_PROTO_VERSION)
      row(&d, area, "versions", D_OK, NULL, "agt %s and agtd %s, protocol %d", AGT_VERSION, av,
          AGT_PROTO_VERSION);
    else
      row(&d, area, "versions", D_FAIL,
          c->target.kind == AGT_TARGET_LIMA
              ? "agt stop && agt up (provisioning rebuilds agtd from this source tree)"
              : "restart agtd from the same source tree as agt (agt up starts it)",
          "agt %s (protocol %d), agtd %s (protocol %lld)", AGT_VERSION, AGT_PROTO_VERSION,
          av ? av : "?", (long long)pv);
  }

  /* the guest */
  if (!vm_up) {
    const char *why = "not checked: the vm is not running";
    row(&d, "guest", "namespaces", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "cgroup", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "overlayfs", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "dynmods", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "console log", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "open net", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "realtime", D_SKIP, NULL, "%s", why);
    row(&d, "guest", "rootfs", D_SKIP, NULL, "%s", why);
  } else {
    cleanup_free char *out = NULL;
    int code = 0;
    const char *script = "echo \"ns $(ls /proc/self/ns 2>/dev/null | tr '\\n' ' ')\"\n"
                         "echo \"fs $(grep -cw overlay /proc/filesystems)\"\n"
                         "echo \"kernel $(uname -r)\"\n"
                         "echo \"printk $(cut -f1 /proc/sys/kernel/printk)\"\n"
                         "echo \"dynmods $(grep -E ' - cgroup2? ' /proc/self/mountinfo | "
                         "grep -c favordynmods)\"\n"
                         "echo \"opennet $(cat /proc/sys/net/ipv4/ip_forward) "
                         "$(test -d /sys/class/net/agt0 && echo 1 || echo 0) "
                         "$(test -s /run/agt-open/resolv.conf && echo 1 || echo 0)\"\n";
    static const char *const need[] = {"mnt", "pid", "net", "ipc", "uts", "cgroup", NULL};
    cleanup_free char *errout = NULL;
    if (agt_guest_sh(c, script, &out, &errout, &code, &e) < 0 || code != 0) {
      /* the script runs as root (sudo -n when agt is not): say what stopped it */
      cleanup_free char *why = NULL;
      const char *fix = "agt up, then agt shell to look";
      if (e)
        why = xstrdup(e->msg);
      else if (errout && *errout)
        why = xasprintf("the checks' script failed (exit %d): %s", code, last_line(errout));
      else
        why = xasprintf("the checks' script failed (exit %d)", code);
      if (c->target.kind == AGT_TARGET_LOCAL)
        fix = geteuid() != 0 ? "run agt as root: these checks run as root, through sudo -n "
                               "when agt is not"
                             : "run the failing command of the detail by hand";
      row(&d, "guest", "namespaces", D_FAIL, fix, "%s", why);
      row(&d, "guest", "overlayfs", D_FAIL, fix, "%s", why);
      row(&d, "guest", "dynmods", D_FAIL, fix, "%s", why);
      row(&d, "guest", "console log", D_FAIL, fix, "%s", why);
      row(&d, "guest", "open net", D_FAIL, fix, "%s", why);
      agt_error_release(&e);
    } else {
      cleanup_free char *whole = xstrdup(out); /* out is cut into lines below */
      char *ns = strstr(out, "ns "), *fs = strstr(out, "fs "), *kern = strstr(out, "kernel ");
      struct agt_strv missing = {0};
      if (ns)
        ns[strcspn(ns, "\n")] = '\0';
      if (kern)
        kern[strcspn(kern, "\n")] = '\0';
      for (size_t k = 0; need[k]; k++) {
        cleanup_free char *w = xasprintf(" %s ", need[k]);
        cleanup_free char *have = xasprintf(" %s ", ns ? ns + 3 : "");
        if (strstr(have, w) == NULL)
          agt_strv_push(&missing, need[k]);
      }
      if (missing.n == 0)
        row(&d, "guest", "namespaces", D_OK, NULL, "%s(%s)", ns ? ns + 3 : "", kern ? kern : "");
      else
        row(&d, "guest", "namespaces", D_FAIL,
            "a kernel with mount, pid, net, ipc, uts and cgroup namespaces (Ubuntu 24.04's has "
            "them)",
            "missing: %s%s (%s)", missing.v[0], missing.n > 1 ? " and more" : "",
            ns ? ns + 3 : "none listed");
      agt_strv_clear(&missing);
      if (fs && atoi(fs + 3) > 0)
        row(&d, "guest", "overlayfs", D_OK, NULL, "in /proc/filesystems");
      else
        row(&d, "guest", "overlayfs", D_FAIL,
            c->target.kind == AGT_TARGET_LIMA ? "agt shell -- sudo modprobe overlay"
                                              : "sudo modprobe overlay",
            "overlay is not in /proc/filesystems");
      machine_rows(&d, whole);
    }
    if (!agtd_up) {
      row(&d, "guest", "cgroup", D_SKIP, NULL, "not checked: agtd does not answer");
      row(&d, "guest", "jail disk", D_SKIP, NULL, "not checked: agtd does not answer");
      row(&d, "guest", "realtime", D_SKIP, NULL, "not checked: agtd does not answer");
      row(&d, "guest", "rootfs", D_SKIP, NULL, "not checked: agtd does not answer");
    } else {
      json_int_t cg = json_integer_value(json_object_get(st, "cgroup_version"));
      const char *ref = agt_config_get(&c->cfg, AGT_CFG_JAIL_ROOTFS);
      size_t k;
      json_t *r, *hit = NULL, *disk = json_object_get(st, "disk");
      if (json_is_true(json_object_get(disk, "limits")))
        row(&d, "guest", "jail disk", D_OK, NULL, "btrfs, %lld MiB, a quota per jail",
            (long long)(json_integer_value(json_object_get(disk, "size")) >> 20));
      else
        row(&d, "guest", "jail disk", D_WARN,
            "install btrfs-progs in the guest and restart agtd (docs/SECURITY.md)",
            "no disk limit per jail: %s",
            json_string_value(json_object_get(disk, "why")) ?: "agtd does not report one");
      realtime_row(&d, st);
      if (cg == 2)
        row(&d, "guest", "cgroup", D_OK, NULL, "v2 (agtd's report)");
      else if (cg == 1)
        row(&d, "guest", "cgroup", D_WARN, "boot the guest with cgroup v2 (systemd's default)",
            "v1: limits work, v2 is what agt is built for");
      else
        row(&d, "guest", "cgroup", D_FAIL, "boot the guest with cgroup v2",
            "agtd found no usable cgroup hierarchy");
      if (agt_target_call(&c->target, "rootfs.ls", NULL, &ls, &e) < 0) {
        row(&d, "guest", "rootfs", D_FAIL, agtd_fix(&d), "rootfs.ls: %s", e->msg);
        agt_error_release(&e);
      } else {
        json_array_foreach(json_object_get(ls, "rootfs"), k, r)
        {
          const char *name = json_string_value(json_object_get(r, "name"));
          if (name && strcmp(name, ref) == 0)
            hit = r;
        }
        if (hit)
          row(&d, "guest", "rootfs", D_OK, NULL, "'%s' is built (%.12s, %lld files)", ref,
              json_string_value(json_object_get(hit, "id")),
              (long long)json_integer_value(json_object_get(hit, "files")));
        else {
          /* a manifest path that works from anywhere: the source tree's, else the installed */
          cleanup_free char *src = xasprintf("%s/rootfs/default.yaml", AGT_SOURCE_ROOT);
          cleanup_free char *fix =
              xasprintf("agt verify (builds it), or agt rootfs build %s",
                        c->target.kind == AGT_TARGET_LIMA ? "/opt/agt/src/rootfs/default.yaml"
                        : access(src, R_OK) == 0          ? src
                                                          : AGT_DATADIR "/rootfs/default.yaml");
          row(&d, "guest", "rootfs", D_FAIL, fix, "no rootfs named '%s' (jail.rootfs)", ref);
        }
      }
    }
  }
  if (d.json) {
    int pr = agt_print_out(d.json, NULL, err);
    json_decref(d.json);
    if (pr < 0) {
      json_decref(st);
      json_decref(ls);
      return -1;
    }
  } else {
    printf("doctor: %u ok, %u failed, %u warning%s, %u not checked\n",
           d.n - d.warned - d.failed - d.skipped, d.failed, d.warned, d.warned == 1 ? "" : "s",
           d.skipped);
  }
  json_decref(st);
  json_decref(ls);
  if (d.failed)
    return agt_error_kind(err, AGT_E_STATE, "doctor: %u check%s failed", d.failed,
                          d.failed == 1 ? "" : "s");
  return 0;
}
