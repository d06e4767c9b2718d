/* A jail's log on disk (guest/keeper/outlog.c): the index of when output was written, read by
 * --since, --until and --timestamps: its records, its bound, rotation with its file, and a
 * record cut short.  The base offsets live in trusted.* xattrs: root only. */
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

#include "outlog.h"

static char dir[64], path[128], old[128], idx[160], oldidx[160];

static int setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/agt-test-outlog.XXXXXX");
  if (mkdtemp(dir) == NULL)
    return -1;
  snprintf(path, sizeof path, "%s/console.log", dir);
  snprintf(old, sizeof old, "%s/console.log.1", dir);
  snprintf(idx, sizeof idx, "%s.idx", path);
  snprintf(oldidx, sizeof oldidx, "%s.idx", old);
  return 0;
}

static int teardown(void **state)
{
  char cmd[128];
  (void)state;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd);
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static off_t size_of(const char *p)
{
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : 0;
}

static void test_records(void **state)
{
  struct agt_outlog l;
  struct agt_outlog_time *t = NULL;
  char line[100];
  int64_t before, mid = 0;
  size_t n;

  (void)state;
  if (geteuid() != 0)
    skip();
  memset(line, 'x', sizeof line - 1);
  line[sizeof line - 1] = '\n';
  agt_outlog_open(&l, path, old, 1 << 20);
  before = now_ns();
  for (int i = 0; i < 3; i++) { /* 100 bytes each, 5 ms apart: a record each */
    if (i == 2)
      mid = now_ns();
    assert_int_equal(agt_outlog_append(&l, line, sizeof line), 0);
    sleep_ms(5);
  }
  /* small writes close together: the first is dated (100 bytes since the last record), the
   * others share its record */
  for (int i = 0; i < 50; i++)
    assert_int_equal(agt_outlog_append(&l, "y", 1), 0);
  agt_outlog_close(&l);
  n = agt_outlog_times(path, old, 0, 1000, &t);
  assert_int_equal(n, 4);
  assert_int_equal(size_of(idx), 4 * sizeof *t);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(t[i].off, i * sizeof line);
    assert_true(t[i].ns >= before);
    if (i)
      assert_true(t[i].ns >= t[i - 1].ns + 5000000);
  }
  /* the first output written at mid or later: the third line */
  assert_int_equal(agt_outlog_offset_at(path, old, mid, 350), 200);
  assert_int_equal(agt_outlog_offset_at(path, old, now_ns(), 350), 350);
  free(t);
  /* only the record dating `from`, and those before `to` */
  n = agt_outlog_times(path, old, 150, 160, &t);
  assert_int_equal(n, 1);
  assert_int_equal(t[0].off, 100);
  free(t);
}

static void test_torn_record(void **state)
{
  struct agt_outlog l;
  struct agt_outlog_time *t = NULL;
  FILE *f;

  (void)state;
  if (geteuid() != 0)
    skip();
  agt_outlog_open(&l, path, old, 1 << 20);
  assert_int_equal(agt_outlog_append(&l, "one\n", 4), 0);
  agt_outlog_close(&l);
  f = fopen(idx, "a"); /* a crash in the middle of a record */
  fwrite("\1\2\3\4\5\6\7", 1, 7, f);
  fclose(f);
  assert_int_equal(agt_outlog_times(path, old, 0, 100, &t), 1);
  free(t);
  sleep_ms(1100);
  agt_outlog_open(&l, path, old, 1 << 20);
  assert_int_equal(agt_outlog_append(&l, "two\n", 4), 0);
  agt_outlog_close(&l);
  assert_int_equal(size_of(idx), 2 * sizeof *t);
  assert_int_equal(agt_outlog_times(path, old, 0, 100, &t), 2);
  assert_int_equal(t[1].off, 4);
  assert_true(t[1].ns > t[0].ns + 1000000000LL);
  free(t);
}

static void test_rotation_bounded(void **state)
{
  struct agt_outlog l;
  struct agt_outlog_time *t = NULL;
  char chunk[200];
  size_t n;

  (void)state;
  if (geteuid() != 0)
    skip();
  memset(chunk, 'z', sizeof chunk);
  agt_outlog_open(&l, path, old, 8192);
  for (int i = 0; i < 100; i++) { /* 20000 bytes, a record each: rotated several times */
    assert_int_equal(agt_outlog_append(&l, chunk, sizeof chunk), 0);
    sleep_ms(2);
  }
  agt_outlog_close(&l);
  assert_true(size_of(path) + size_of(idx) + size_of(old) + size_of(oldidx) <= 8192);
  assert_true(size_of(oldidx) > 0);
  n = agt_outlog_times(path, old, 0, 20000, &t);
  assert_true(n > 2);
  /* what is left dates the last bytes: records in order, the newest at the newest chunk */
  for (size_t i = 1; i < n; i++)
    assert_true(t[i].off > t[i - 1].off && t[i].ns >= t[i - 1].ns);
  assert_true(t[n - 1].off > 19600 && t[n - 1].off < 20000);
  free(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_torn_record, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rotation_bounded, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
