#include "platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#include "xalloc.h"

enum agt_os agt_os_native(void)
{
#ifdef __APPLE__
  return AGT_OS_DARWIN;
#else
  return AGT_OS_LINUX;
#endif
}

enum agt_os agt_os_from_name(const char *name)
{
  return strcmp(name, "darwin") == 0 ? AGT_OS_DARWIN : AGT_OS_LINUX;
}

static const char *home_dir(void)
{
  const char *home = getenv("HOME");
  return home && *home ? home : "/tmp";
}

/* $VAR/agt/TAIL when $VAR is an absolute path (the XDG rule), else NULL. */
static char *xdg(const char *var, const char *tail)
{
  const char *v = getenv(var);

  if (v && v[0] == '/')
    return xasprintf("%s/agt%s", v, tail);
  return NULL;
}

char *agt_platform_config_file(enum agt_os os)
{
  char *p = xdg("XDG_CONFIG_HOME", "/config.yaml");

  if (p)
    return p;
  if (os == AGT_OS_DARWIN)
    return xasprintf("%s/Library/Application Support/agt/config.yaml", home_dir());
  return xasprintf("%s/.config/agt/config.yaml", home_dir());
}

char *agt_platform_cache_dir(enum agt_os os)
{
  char *p = xdg("XDG_CACHE_HOME", "");

  if (p)
    return p;
  if (os == AGT_OS_DARWIN)
    return xasprintf("%s/Library/Caches/agt", home_dir());
  return xasprintf("%s/.cache/agt", home_dir());
}

char *agt_platform_lima_home(enum agt_os os)
{
  (void)os; /* Lima's default is the same on macOS and Linux */
  return xasprintf("%s/.lima", home_dir());
}

int agt_macos_has_vz(const char *version)
{
  return version && atoi(version) >= 13;
}

/* An integer sysctl of 4 or 8 bytes; -1 when absent. */
static int sysctl_u64(agt_sysctl_fn fn, void *ctx, const char *name, uint64_t *out)
{
  union {
    uint32_t u32;
    uint64_t u64;
  } v = {0};
  size_t len = sizeof v;

  if (fn(ctx, name, &v, &len) < 0)
    return -1;
  if (len == sizeof v.u32)
    *out = v.u32;
  else if (len == sizeof v.u64)
    *out = v.u64;
  else
    return errno = EINVAL, -1;
  return 0;
}

int agt_host_facts_darwin(agt_sysctl_fn sysctl, agt_exists_fn exists, void *ctx,
                          struct agt_host_facts *f)
{
  uint64_t n = 0;
  size_t len = sizeof f->os_version - 1;

  memset(f, 0, sizeof *f);
  f->os = AGT_OS_DARWIN;
  if (sysctl_u64(sysctl, ctx, "hw.logicalcpu", &n) < 0 &&
      sysctl_u64(sysctl, ctx, "hw.ncpu", &n) < 0)
    return -1;
  f->cpus = (unsigned)n;
  if (sysctl_u64(sysctl, ctx, "hw.memsize", &f->memory) < 0)
    return -1;
  if (sysctl(ctx, "kern.osproductversion", f->os_version, &len) < 0)
    return -1;
  f->os_version[len < sizeof f->os_version ? len : sizeof f->os_version - 1] = '\0';
  /* hw.optional.arm64 exists on Apple silicon only; it says 1 to x86_64 processes under
   * Rosetta too, whose uname says x86_64 */
  f->apple_silicon = sysctl_u64(sysctl, ctx, "hw.optional.arm64", &n) == 0 && n == 1;
  f->translated = sysctl_u64(sysctl, ctx, "sysctl.proc_translated", &n) == 0 && n == 1;
  snprintf(f->arch, sizeof f->arch, "%s", f->apple_silicon ? "aarch64" : "x86_64");
  f->vz = agt_macos_has_vz(f->os_version);
  f->rosetta = f->apple_silicon && exists(ctx, AGT_ROSETTA_PATH) == 0;
  return 0;
}

int agt_host_facts_linux(struct agt_host_facts *f)
{
  struct utsname u;
  long n = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES),
       psize = sysconf(_SC_PAGESIZE);

  memset(f, 0, sizeof *f);
  f->os = AGT_OS_LINUX;
  f->cpus = n > 0 ? (unsigned)n : 0;
  f->memory = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
  if (uname(&u) < 0)
    return -1;
  snprintf(f->os_version, sizeof f->os_version, "%.31s", u.release);
  if (strcmp(u.machine, "arm64") == 0 || strcmp(u.machine, "aarch64") == 0)
    snprintf(f->arch, sizeof f->arch, "aarch64");
  else
    snprintf(f->arch, sizeof f->arch, "%.15s", u.machine);
  return 0;
}

#ifdef __APPLE__
static int native_sysctl(void *ctx, const char *name, void *buf, size_t *len)
{
  (void)ctx;
  return sysctlbyname(name, buf, len, NULL, 0);
}

static int native_exists(void *ctx, const char *path)
{
  (void)ctx;
  return access(path, F_OK);
}
#endif

int agt_host_facts_native(struct agt_host_facts *f)
{
#ifdef __APPLE__
  return agt_host_facts_darwin(native_sysctl, native_exists, NULL, f);
#else
  return agt_host_facts_linux(f);
#endif
}

static struct agt_fact_row *add_row(struct agt_fact_row *rows, size_t *n, const char *check,
                                    enum agt_fact_result r, const char *fix)
{
  struct agt_fact_row *row = &rows[(*n)++];

  row->check = check;
  row->result = r;
  row->fix = r == AGT_FACT_OK ? NULL : fix;
  row->detail[0] = '\0';
  return row;
}

static double gib(uint64_t n)
{
  return (double)n / (double)(1ull << 30);
}

size_t agt_host_fact_rows(const struct agt_host_facts *f, const struct agt_vm_wants *want,
                          struct agt_fact_row rows[AGT_FACT_ROWS])
{
  size_t n = 0;
  struct agt_fact_row *row;
  int darwin = f->os == AGT_OS_DARWIN;

  if (darwin && f->translated) {
    row = add_row(rows, &n, "system", AGT_FACT_WARN,
                  "use the arm64 build of agt: Homebrew's in /opt/homebrew, not /usr/local");
    snprintf(row->detail, sizeof row->detail,
             "macOS %s, Apple silicon; this agt is the x86_64 build, running under Rosetta",
             f->os_version);
  } else {
    row = add_row(rows, &n, "system", AGT_FACT_OK, NULL);
    snprintf(row->detail, sizeof row->detail, "%s %s, %s", darwin ? "macOS" : "Linux",
             f->os_version[0] ? f->os_version : "?",
             darwin ? (f->apple_silicon ? "Apple silicon" : "Intel") : f->arch);
  }

  if (darwin) {
    int asked = want->vm_type && strcmp(want->vm_type, "vz") == 0;
    if (f->vz) {
      row = add_row(rows, &n, "vz", AGT_FACT_OK, NULL);
      snprintf(row->detail, sizeof row->detail,
               "available (macOS 13 or later): Lima's vz driver, mounts over virtiofs");
    } else {
      row =
          add_row(rows, &n, "vz", asked ? AGT_FACT_FAIL : AGT_FACT_WARN,
                  asked ? "set vm.vm_type to auto or qemu (brew install qemu), or upgrade macOS"
                        : "brew install qemu (vm_type auto uses it here), or upgrade macOS to 13");
      snprintf(row->detail, sizeof row->detail, "not available before macOS 13 (this is %s)%s",
               f->os_version, asked ? ", and vm.vm_type is vz" : ": the VM runs on QEMU");
    }
    if (f->apple_silicon) {
      if (f->rosetta) {
        row = add_row(rows, &n, "rosetta", AGT_FACT_OK, NULL);
        snprintf(row->detail, sizeof row->detail, "installed%s",
                 want->rosetta ? "; the VM runs x86_64 "
                                 "binaries with it (vm.rosetta)"
                               : " (vm.rosetta off)");
      } else {
        row = add_row(rows, &n, "rosetta", want->rosetta ? AGT_FACT_FAIL : AGT_FACT_OK,
                      "softwareupdate --install-rosetta --agree-to-license");
        snprintf(row->detail, sizeof row->detail, "not installed (no %s)%s", AGT_ROSETTA_PATH,
                 want->rosetta ? ", and vm.rosetta is on" : "; vm.rosetta is off");
      }
    }
  }

  if (f->cpus == 0) {
    row = add_row(rows, &n, "cpus", AGT_FACT_WARN, "none: agt could not count them");
    snprintf(row->detail, sizeof row->detail, "unknown");
  } else {
    row = add_row(rows, &n, "cpus", want->cpus > f->cpus ? AGT_FACT_WARN : AGT_FACT_OK,
                  "lower vm.cpus to this machine's count or less");
    snprintf(row->detail, sizeof row->detail, "%u; the VM gets %u (vm.cpus)", f->cpus, want->cpus);
  }

  if (f->memory == 0) {
    row = add_row(rows, &n, "memory", AGT_FACT_WARN, "none: agt could not read it");
    snprintf(row->detail, sizeof row->detail, "unknown");
  } else {
    enum agt_fact_result r = want->memory >= f->memory          ? AGT_FACT_FAIL
                             : want->memory > f->memory / 4 * 3 ? AGT_FACT_WARN
                                                                : AGT_FACT_OK;
    row = add_row(rows, &n, "memory", r,
                  "lower vm.memory: the host needs some for itself (then agt reset)");
    snprintf(row->detail, sizeof row->detail, "%.1f GiB; the VM gets %.1f GiB (vm.memory)%s",
             gib(f->memory), gib(want->memory),
             r == AGT_FACT_FAIL   ? ": all of it or more"
             : r == AGT_FACT_WARN ? ": more than three quarters"
                                  : "");
  }
  return n;
}
