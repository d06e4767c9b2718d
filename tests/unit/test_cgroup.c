/* The cgroup backends write the files each hierarchy expects.  Run against a directory tree
 * shaped like cgroupfs (the real v1 hierarchy is exercised by the guest tests; this machine
 * has no v2 controllers to test against, so v2's file names and values are checked here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"
#include "fsutil.h"

static char root[64];

static void put(const char *rel, const char *content)
{
  char path[512];
  FILE *f;

  snprintf(path, sizeof path, "%s/%s", root, rel);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static char *get(const char *rel)
{
  static char buf[256];
  char path[512];
  FILE *f;
  size_t n;

  snprintf(path, sizeof path, "%s/%s", root, rel);
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void mk(const char *rel)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  assert_int_equal(mkdir(path, 0755), 0);
}

/* The three v1 hierarchies agtd uses, and agtd's parent in each. */
static void v1_init(struct agt_cgroup_root *r)
{
  agt_error_t err = NULL;

  mk("memory");
  mk("pids");
  mk("cpu");
  assert_int_equal(agt_cgroup_root_init_at(r, "agt", root, 1, &err), 0);
}

static int setup(void **state)
{
  (void)state;
  snprintf(root, sizeof root, "/tmp/agt-cgtest.XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  assert_int_equal(agt_rm_rf(root, NULL), 0);
  return 0;
}

static void test_v2_limits(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_limits l = {.memory_bytes = 64 << 20, .pids = 100, .cpu_millis = 500};
  agt_error_t err = NULL;
  int fd;

  (void)state;
  put("cgroup.subtree_control", "cpu memory pids\n");
  mk("agt");
  put("agt/cgroup.subtree_control", "cpu memory pids\n");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 2, &err), 0);
  assert_int_equal(r.version, 2);
  mk("agt/j1");
  put("agt/j1/memory.max", "");
  put("agt/j1/memory.swap.max", "");
  put("agt/j1/pids.max", "");
  put("agt/j1/cpu.max", "");
  assert_int_equal(agt_cgroup_create(&r, "j1", &l, &err), 0);
  assert_string_equal(get("agt/j1/memory.max"), "67108864");
  assert_string_equal(get("agt/j1/memory.swap.max"), "0");
  assert_string_equal(get("agt/j1/pids.max"), "100");
  assert_string_equal(get("agt/j1/cpu.max"), "50000 100000");
  fd = agt_cgroup_open(&r, "j1");
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(agt_cgroup_attach(&r, "j1", 1234, &err), -1); /* no cgroup.procs */
  agt_error_release(&err);
  put("agt/j1/cgroup.procs", "");
  assert_int_equal(agt_cgroup_attach(&r, "j1", 1234, &err), 0);
  assert_string_equal(get("agt/j1/cgroup.procs"), "1234");
  agt_cgroup_root_release(&r);
}

static void test_v2_missing_controller_is_enabled(void **state)
{
  struct agt_cgroup_root r;
  agt_error_t err = NULL;

  (void)state;
  put("cgroup.subtree_control", "cpu memory pids");
  /* agt/ does not delegate pids yet: init asks for it */
  mk("agt");
  put("agt/cgroup.subtree_control", "cpu memory");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 2, &err), 0);
  assert_string_equal(get("agt/cgroup.subtree_control"), "+pids");
  agt_cgroup_root_release(&r);
}

static void test_v1_limits(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_limits l = {.memory_bytes = 32 << 20, .pids = 0, .cpu_millis = 250};
  agt_error_t err = NULL;

  (void)state;
  v1_init(&r);
  assert_int_equal(agt_cgroup_open(&r, "j"), -1); /* v1 has no CLONE_INTO_CGROUP */
  mk("memory/agt/j");
  mk("pids/agt/j");
  mk("cpu/agt/j");
  put("memory/agt/j/memory.limit_in_bytes", "");
  put("pids/agt/j/pids.max", "");
  put("cpu/agt/j/cpu.cfs_period_us", "");
  put("cpu/agt/j/cpu.cfs_quota_us", "");
  assert_int_equal(agt_cgroup_create(&r, "j", &l, &err), 0);
  assert_string_equal(get("memory/agt/j/memory.limit_in_bytes"), "33554432");
  assert_string_equal(get("pids/agt/j/pids.max"), "max");
  assert_string_equal(get("cpu/agt/j/cpu.cfs_period_us"), "100000");
  assert_string_equal(get("cpu/agt/j/cpu.cfs_quota_us"), "25000");
  /* Lifted limits ("unlimited", 0 here) are written too: a prepared jail's cgroup, renamed
   * to the jail's, holds the defaults until then. */
  l = (struct agt_cgroup_limits){0};
  assert_int_equal(agt_cgroup_create(&r, "j", &l, &err), 0);
  assert_string_equal(get("memory/agt/j/memory.limit_in_bytes"), "-1");
  assert_string_equal(get("pids/agt/j/pids.max"), "max");
  assert_string_equal(get("cpu/agt/j/cpu.cfs_quota_us"), "-1");
  agt_cgroup_root_release(&r);
}

/* cgroup v1 with RT group scheduling: a realtime budget for a jail's cgroup and agtd's
 * parent; without the file (no RT group scheduling) and on v2 there is nothing to give. */
static void test_rt_budget(void **state)
{
  struct agt_cgroup_root r;
  agt_error_t err = NULL;

  (void)state;
  v1_init(&r);
  mk("cpu/agt/j");
  assert_int_equal(agt_cgroup_rt_budget(&r, "j", 20000, &err), 0);
  put("cpu/agt/cpu.rt_runtime_us", "0");
  put("cpu/agt/j/cpu.rt_runtime_us", "0");
  assert_int_equal(agt_cgroup_rt_budget(&r, NULL, 120000, &err), 1);
  assert_string_equal(get("cpu/agt/cpu.rt_runtime_us"), "120000");
  assert_int_equal(agt_cgroup_rt_budget(&r, "j", 20000, &err), 1);
  assert_string_equal(get("cpu/agt/j/cpu.rt_runtime_us"), "20000");
  assert_int_equal(agt_cgroup_rt_budget(&r, "j", 0, &err), 1);
  assert_string_equal(get("cpu/agt/j/cpu.rt_runtime_us"), "0");
  agt_cgroup_root_release(&r);
}

static void test_rt_budget_v2(void **state)
{
  struct agt_cgroup_root r;
  agt_error_t err = NULL;

  (void)state;
  put("cgroup.subtree_control", "cpu memory pids\n");
  mk("agt");
  put("agt/cgroup.subtree_control", "cpu memory pids\n");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 2, &err), 0);
  assert_int_equal(agt_cgroup_rt_budget(&r, NULL, 120000, &err), 0);
  assert_int_equal(agt_cgroup_rt_budget(&r, "j", 20000, &err), 0);
  assert_null(err);
  agt_cgroup_root_release(&r);
}

/* Usage on v1 with cpuacct mounted with cpu: memory, pids and cpuacct.usage (ns) read from
 * the jail's three cgroups. */
static void test_v1_stats_cpuacct(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_stats s = {0};
  agt_error_t err = NULL;

  (void)state;
  mk("memory");
  mk("pids");
  mk("cpu");
  put("cpu/cpuacct.usage", "0\n");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 1, &err), 0);
  assert_true(r.v1_cpuacct);
  mk("memory/agt/j");
  mk("pids/agt/j");
  mk("cpu/agt/j");
  put("memory/agt/j/memory.usage_in_bytes", "233472\n");
  put("pids/agt/j/pids.current", "2\n");
  put("cpu/agt/j/cpuacct.usage", "1500000000\n");
  put("pids/agt/j/cgroup.procs", ""); /* not read: cpuacct.usage says it */
  assert_int_equal(agt_cgroup_stats(&r, "j", &s), 0);
  assert_int_equal(s.memory_bytes, 233472);
  assert_int_equal(s.pids, 2);
  assert_int_equal(s.cpu_usec, 1500000);
  agt_cgroup_root_release(&r);
}

static void burn_cpu(void)
{
  struct timespec t0, t;
  volatile unsigned long x = 0;

  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  do {
    for (int i = 0; i < 100000; i++)
      x += (unsigned long)i;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 60000000L);
}

/* cpuacct a hierarchy of its own: the CPU time of the processes the jail's cgroup.procs
 * lists (this test's own, and a pid that is gone), from /proc/PID/stat; a list longer than
 * one read (4 KiB) is read whole. */
static void test_v1_stats_procs(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_stats s = {0};
  struct timespec cpu;
  char *list = NULL;
  size_t len = 0;
  FILE *f;
  uint64_t mine;

  (void)state;
  v1_init(&r);
  assert_false(r.v1_cpuacct);
  mk("memory/agt/j");
  mk("pids/agt/j");
  mk("cpu/agt/j");
  burn_cpu();
  f = open_memstream(&list, &len);
  for (int i = 0; i < 1000; i++) /* 1000 lines of a pid that does not run: 7000 bytes */
    fprintf(f, "%d\n", 4194303);
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  put("pids/agt/j/cgroup.procs", list);
  free(list);
  assert_int_equal(agt_cgroup_stats(&r, "j", &s), 0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  mine = (uint64_t)cpu.tv_sec * 1000000 + (uint64_t)cpu.tv_nsec / 1000;
  /* /proc counts in clock ticks (10 ms): within two of the process's own clock */
  assert_true(s.cpu_usec > 0);
  assert_true(s.cpu_usec <= mine + 20000 && s.cpu_usec + 20000 >= mine);
  assert_int_equal(s.memory_bytes, 0); /* no file: 0, not an error */
  agt_cgroup_root_release(&r);
}

/* A prepared jail's cgroups become the jail's: renamed, limits written only when they differ
 * from the ones the prepared jail got. */
static void test_v1_adopt(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_limits have = {.memory_bytes = 2u << 30, .pids = 512, .cpu_millis = 1000};
  struct agt_cgroup_limits other = {.memory_bytes = 100 << 20, .pids = 50, .cpu_millis = 1000};
  static const char *const ctl[3] = {"memory", "pids", "cpu"};
  static const char *const file[3] = {"memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us"};
  agt_error_t err = NULL;
  char rel[128];
  struct stat st;

  (void)state;
  v1_init(&r);
  for (int round = 0; round < 2; round++) {
    const char *w = round == 0 ? "w-1" : "w-2", *j = round == 0 ? "j1" : "j2";
    snprintf(rel, sizeof rel, "memory/agt/%s", w);
    mk(rel);
    snprintf(rel, sizeof rel, "pids/agt/%s", w);
    mk(rel);
    snprintf(rel, sizeof rel, "cpu/agt/%s", w);
    mk(rel);
    for (int i = 0; i < 3; i++) {
      snprintf(rel, sizeof rel, "%s/agt/%s/%s", ctl[i], w, file[i]);
      put(rel, "untouched");
    }
    snprintf(rel, sizeof rel, "cpu/agt/%s/cpu.cfs_period_us", w);
    put(rel, "untouched");
    assert_int_equal(agt_cgroup_adopt(&r, w, j, 1234, round == 0 ? &have : &other, &have, &err), 0);
    snprintf(rel, sizeof rel, "%s/memory/agt/%s", root, w);
    assert_int_equal(stat(rel, &st), -1); /* renamed away */
    snprintf(rel, sizeof rel, "memory/agt/%s/%s", j, file[0]);
    assert_string_equal(get(rel), round == 0 ? "untouched" : "104857600");
    snprintf(rel, sizeof rel, "pids/agt/%s/%s", j, file[1]);
    assert_string_equal(get(rel), round == 0 ? "untouched" : "50");
  }
  agt_cgroup_root_release(&r);
}

static void test_v2_adopt(void **state)
{
  struct agt_cgroup_root r;
  struct agt_cgroup_limits l = {.memory_bytes = 64 << 20, .pids = 10, .cpu_millis = 0};
  agt_error_t err = NULL;
  char path[512];
  struct stat st;

  (void)state;
  put("cgroup.subtree_control", "cpu memory pids\n");
  mk("agt");
  put("agt/cgroup.subtree_control", "cpu memory pids\n");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 2, &err), 0);
  mk("agt/w-1"); /* the prepared jail's (empty here, so it can be removed) */
  mk("agt/j");
  put("agt/j/memory.max", "");
  put("agt/j/memory.swap.max", "");
  put("agt/j/pids.max", "");
  put("agt/j/cpu.max", "");
  put("agt/j/cgroup.procs", "");
  assert_int_equal(agt_cgroup_adopt(&r, "w-1", "j", 4321, &l, &l, &err), 0);
  assert_string_equal(get("agt/j/memory.max"), "67108864");
  assert_string_equal(get("agt/j/pids.max"), "10");
  assert_string_equal(get("agt/j/cgroup.procs"), "4321"); /* moved: v2 cannot rename */
  snprintf(path, sizeof path, "%s/agt/w-1", root);
  assert_int_equal(stat(path, &st), -1);
  agt_cgroup_root_release(&r);
}

static void test_v1_missing_controller(void **state)
{
  struct agt_cgroup_root r;
  agt_error_t err = NULL;

  (void)state;
  mk("memory");
  assert_int_equal(agt_cgroup_root_init_at(&r, "agt", root, 1, &err), -1);
  assert_non_null(strstr(err->msg, "controller 'pids' is not mounted"));
  agt_error_release(&err);
  agt_cgroup_root_release(&r);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_v2_limits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v2_missing_controller_is_enabled, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_limits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_missing_controller, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_adopt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_stats_cpuacct, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v1_stats_procs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rt_budget, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rt_budget_v2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_v2_adopt, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
