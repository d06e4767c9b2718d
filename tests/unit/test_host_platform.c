/* What differs on macOS (host/platform.c), with the macOS branch taken here on Linux: the
 * config, cache and Lima paths, the facts read through sysctl (a table standing in for
 * sysctlbyname), and `agt doctor`'s rows made of them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cleanup.h"
#include "config.h"
#include "platform.h"
#include "util.h"
#include "xalloc.h"

#define GiB (1ull << 30)

static int setup(void **state)
{
  (void)state;
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("LIMA_HOME");
  unsetenv("AGT_CONFIG");
  setenv("HOME", "/Users/tester", 1);
  return 0;
}

static void test_paths(void **state)
{
  cleanup_free char *mac_cfg = NULL, *lin_cfg = NULL, *mac_cache = NULL, *lin_cache = NULL;
  cleanup_free char *mac_lima = NULL, *lin_lima = NULL;

  (void)state;
  mac_cfg = agt_platform_config_file(AGT_OS_DARWIN);
  lin_cfg = agt_platform_config_file(AGT_OS_LINUX);
  assert_string_equal(mac_cfg, "/Users/tester/Library/Application Support/agt/config.yaml");
  assert_string_equal(lin_cfg, "/Users/tester/.config/agt/config.yaml");
  mac_cache = agt_platform_cache_dir(AGT_OS_DARWIN);
  lin_cache = agt_platform_cache_dir(AGT_OS_LINUX);
  assert_string_equal(mac_cache, "/Users/tester/Library/Caches/agt");
  assert_string_equal(lin_cache, "/Users/tester/.cache/agt");
  /* Lima's own default, the same on both */
  mac_lima = agt_platform_lima_home(AGT_OS_DARWIN);
  lin_lima = agt_platform_lima_home(AGT_OS_LINUX);
  assert_string_equal(mac_lima, "/Users/tester/.lima");
  assert_string_equal(lin_lima, "/Users/tester/.lima");
  assert_int_equal(agt_os_from_name("darwin"), AGT_OS_DARWIN);
  assert_int_equal(agt_os_from_name("linux"), AGT_OS_LINUX);
}

static void test_paths_xdg(void **state)
{
  cleanup_free char *cfg = NULL, *cache = NULL, *rel = NULL;

  (void)state;
  /* an XDG variable set is the user's word, on macOS too */
  setenv("XDG_CONFIG_HOME", "/xdg/config", 1);
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  cfg = agt_platform_config_file(AGT_OS_DARWIN);
  cache = agt_platform_cache_dir(AGT_OS_DARWIN);
  assert_string_equal(cfg, "/xdg/config/agt/config.yaml");
  assert_string_equal(cache, "/xdg/cache/agt");
  /* a relative one is invalid (the XDG spec): ignored */
  setenv("XDG_CONFIG_HOME", "relative/config", 1);
  rel = agt_platform_config_file(AGT_OS_DARWIN);
  assert_string_equal(rel, "/Users/tester/Library/Application Support/agt/config.yaml");
}

/* agt_config_load finds the user's file where the named system keeps it. */
static void test_config_load_macos_file(void **state)
{
  char dir[] = "/tmp/agt-test-platform.XXXXXX";
  cleanup_free char *sub = NULL, *file = NULL, *linux_dir = NULL;
  struct agt_config c;
  struct agt_config_paths paths = {NULL, "/", 1, "darwin"};
  agt_error_t err = NULL;
  FILE *f;

  (void)state;
  assert_non_null(mkdtemp(dir));
  setenv("HOME", dir, 1);
  sub = xasprintf("%s/Library/Application Support/agt", dir);
  assert_int_equal(agt_mkdir_p(sub, 0755, &err), 0);
  file = xasprintf("%s/config.yaml", sub);
  f = fopen(file, "w");
  assert_non_null(f);
  fputs("vm:\n  cpus: 6\n", f);
  fclose(f);

  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &paths, &err), 0);
  assert_int_equal(c.nfiles, 1);
  assert_string_equal(c.files[0], file);
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_CPUS), "6");
  agt_config_release(&c);

  /* the Linux branch does not look there */
  paths.os = "linux";
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &paths, &err), 0);
  assert_int_equal(c.nfiles, 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_CPUS), "4");
  /* lima.home without $LIMA_HOME: ~/.lima */
  linux_dir = xasprintf("%s/.lima", dir);
  assert_string_equal(agt_config_get(&c, AGT_CFG_LIMA_HOME), linux_dir);
  agt_config_release(&c);

  unlink(file);
  rmdir(sub);
  {
    cleanup_free char *lib = xasprintf("%s/Library/Application Support", dir);
    cleanup_free char *lib2 = xasprintf("%s/Library", dir);
    rmdir(lib);
    rmdir(lib2);
  }
  rmdir(dir);
}

/* An installed agt (Homebrew's) whose build tree is gone mounts the installed sources. */
static void test_default_agt_source(void **state)
{
  char dir[] = "/tmp/agt-test-source.XXXXXX";
  cleanup_free char *guest = NULL, *file = NULL, *a = NULL, *b = NULL;
  const char *what = NULL;
  agt_error_t err = NULL;
  FILE *f;

  (void)state;
  assert_non_null(mkdtemp(dir));
  a = agt_default_agt_source(dir, "/opt/homebrew/share/agt", &what);
  assert_string_equal(a, "/opt/homebrew/share/agt/src");
  assert_string_equal(what, "installed with agt");
  guest = xasprintf("%s/guest", dir);
  assert_int_equal(agt_mkdir_p(guest, 0755, &err), 0);
  file = xasprintf("%s/meson.build", guest);
  f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  b = agt_default_agt_source(dir, "/opt/homebrew/share/agt", &what);
  assert_string_equal(b, dir);
  assert_string_equal(what, "the source tree agt was built from");
  unlink(file);
  rmdir(guest);
  rmdir(dir);
}

/* A Mac's sysctl values, by name; absent names fail with ENOENT as on a Mac. */
struct fake_mac {
  const char *version;
  int arm64;      /* hw.optional.arm64 present and 1 */
  int translated; /* sysctl.proc_translated present and 1 */
  int rosetta;    /* the Rosetta binary exists */
  int no_memsize;
  const char *asked[16];
  size_t nasked;
};

static int fake_sysctl(void *ctx, const char *name, void *buf, size_t *len)
{
  struct fake_mac *m = ctx;
  int32_t i32 = -1;
  uint64_t u64 = 0;

  if (m->nasked < 16)
    m->asked[m->nasked++] = name;
  if (strcmp(name, "hw.logicalcpu") == 0)
    i32 = 10;
  else if (strcmp(name, "hw.memsize") == 0 && !m->no_memsize)
    u64 = 16 * GiB;
  else if (strcmp(name, "hw.optional.arm64") == 0 && m->arm64)
    i32 = 1;
  else if (strcmp(name, "sysctl.proc_translated") == 0 && m->arm64)
    i32 = m->translated;
  else if (strcmp(name, "kern.osproductversion") == 0) {
    size_t n = strlen(m->version) + 1;
    if (*len < n)
      return errno = ENOMEM, -1;
    memcpy(buf, m->version, n);
    *len = n;
    return 0;
  } else {
    return errno = ENOENT, -1;
  }
  if (u64) {
    assert_true(*len >= sizeof u64);
    memcpy(buf, &u64, sizeof u64);
    *len = sizeof u64;
  } else {
    assert_true(*len >= sizeof i32);
    memcpy(buf, &i32, sizeof i32);
    *len = sizeof i32;
  }
  return 0;
}

static int fake_exists(void *ctx, const char *path)
{
  struct fake_mac *m = ctx;
  return strcmp(path, AGT_ROSETTA_PATH) == 0 && m->rosetta ? 0 : -1;
}

static void test_facts_apple_silicon(void **state)
{
  struct fake_mac m = {"14.5", 1, 0, 1, 0, {0}, 0};
  struct agt_host_facts f;

  (void)state;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  assert_int_equal(f.os, AGT_OS_DARWIN);
  assert_int_equal(f.cpus, 10);
  assert_true(f.memory == 16 * GiB);
  assert_string_equal(f.os_version, "14.5");
  assert_string_equal(f.arch, "aarch64");
  assert_true(f.apple_silicon);
  assert_false(f.translated);
  assert_true(f.vz);
  assert_true(f.rosetta);

  /* an x86_64 agt under Rosetta: the machine is still aarch64 */
  m.translated = 1;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  assert_string_equal(f.arch, "aarch64");
  assert_true(f.translated);
}

static void test_facts_intel_old_macos(void **state)
{
  struct fake_mac m = {"12.7.6", 0, 0, 0, 0, {0}, 0};
  struct agt_host_facts f;

  (void)state;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  assert_string_equal(f.arch, "x86_64");
  assert_false(f.apple_silicon);
  assert_false(f.vz); /* macOS 12: no vz for Lima */
  assert_false(f.rosetta);
  assert_int_equal(agt_macos_has_vz("13.0"), 1);
  assert_int_equal(agt_macos_has_vz("12.7"), 0);
  assert_int_equal(agt_macos_has_vz("26.1"), 1);
  assert_int_equal(agt_macos_has_vz(NULL), 0);

  /* a fact every Mac has, missing: an error, not a guess */
  m.no_memsize = 1;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), -1);
}

static void test_facts_linux(void **state)
{
  struct agt_host_facts f;

  (void)state;
  assert_int_equal(agt_host_facts_linux(&f), 0);
  assert_int_equal(f.os, AGT_OS_LINUX);
  assert_true(f.cpus >= 1);
  assert_true(f.memory >= (64ull << 20));
  assert_true(f.os_version[0] != '\0');
}

static const struct agt_fact_row *find(const struct agt_fact_row *rows, size_t n, const char *check)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].check, check) == 0)
      return &rows[i];
  return NULL;
}

static void test_doctor_rows_macos(void **state)
{
  struct fake_mac m = {"14.5", 1, 0, 1, 0, {0}, 0};
  struct agt_host_facts f;
  struct agt_fact_row rows[AGT_FACT_ROWS];
  struct agt_vm_wants want = {4, 4 * GiB, "auto", 0};
  const struct agt_fact_row *r;
  size_t n;

  (void)state;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(n, 5);
  r = find(rows, n, "system");
  assert_int_equal(r->result, AGT_FACT_OK);
  assert_string_equal(r->detail, "macOS 14.5, Apple silicon");
  assert_int_equal(find(rows, n, "vz")->result, AGT_FACT_OK);
  assert_int_equal(find(rows, n, "rosetta")->result, AGT_FACT_OK);
  assert_string_equal(find(rows, n, "cpus")->detail, "10; the VM gets 4 (vm.cpus)");
  assert_string_equal(find(rows, n, "memory")->detail, "16.0 GiB; the VM gets 4.0 GiB (vm.memory)");
  assert_null(find(rows, n, "memory")->fix);

  /* too much asked of the host */
  want.cpus = 12;
  want.memory = 13 * GiB;
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(find(rows, n, "cpus")->result, AGT_FACT_WARN);
  assert_int_equal(find(rows, n, "memory")->result, AGT_FACT_WARN);
  want.memory = 16 * GiB;
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(find(rows, n, "memory")->result, AGT_FACT_FAIL);
  assert_non_null(find(rows, n, "memory")->fix);

  /* Rosetta wanted and missing; agt itself under Rosetta */
  m.rosetta = 0;
  m.translated = 1;
  want.rosetta = 1;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  n = agt_host_fact_rows(&f, &want, rows);
  r = find(rows, n, "rosetta");
  assert_int_equal(r->result, AGT_FACT_FAIL);
  assert_string_equal(r->fix, "softwareupdate --install-rosetta --agree-to-license");
  assert_int_equal(find(rows, n, "system")->result, AGT_FACT_WARN);
  assert_non_null(strstr(find(rows, n, "system")->detail, "under Rosetta"));
}

static void test_doctor_rows_old_intel_mac(void **state)
{
  struct fake_mac m = {"12.7.6", 0, 0, 0, 0, {0}, 0};
  struct agt_host_facts f;
  struct agt_fact_row rows[AGT_FACT_ROWS];
  struct agt_vm_wants want = {4, 4 * GiB, "auto", 0};
  size_t n;

  (void)state;
  assert_int_equal(agt_host_facts_darwin(fake_sysctl, fake_exists, &m, &f), 0);
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(n, 4); /* no rosetta row on Intel */
  assert_null(find(rows, n, "rosetta"));
  assert_string_equal(find(rows, n, "system")->detail, "macOS 12.7.6, Intel");
  /* auto: QEMU instead, a warning; vz asked for: a failure */
  assert_int_equal(find(rows, n, "vz")->result, AGT_FACT_WARN);
  want.vm_type = "vz";
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(find(rows, n, "vz")->result, AGT_FACT_FAIL);
}

static void test_doctor_rows_linux(void **state)
{
  struct agt_host_facts f;
  struct agt_fact_row rows[AGT_FACT_ROWS];
  struct agt_vm_wants want = {1, 64ull << 20, "auto", 0};
  size_t n;

  (void)state;
  assert_int_equal(agt_host_facts_linux(&f), 0);
  n = agt_host_fact_rows(&f, &want, rows);
  assert_int_equal(n, 3); /* system, cpus, memory: no vz or Rosetta on Linux */
  assert_null(find(rows, n, "vz"));
  assert_int_equal(strncmp(find(rows, n, "system")->detail, "Linux ", 6), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_paths, setup),
      cmocka_unit_test_setup(test_paths_xdg, setup),
      cmocka_unit_test_setup(test_config_load_macos_file, setup),
      cmocka_unit_test(test_default_agt_source),
      cmocka_unit_test(test_facts_apple_silicon),
      cmocka_unit_test(test_facts_intel_old_macos),
      cmocka_unit_test(test_facts_linux),
      cmocka_unit_test(test_doctor_rows_macos),
      cmocka_unit_test(test_doctor_rows_old_intel_mac),
      cmocka_unit_test(test_doctor_rows_linux),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
