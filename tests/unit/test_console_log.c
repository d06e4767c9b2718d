/* agtd lowers the kernel's console loglevel to 3 and keeps the other three printk levels;
 * a level at 3 or below already is left alone.  Run against a file shaped like
 * /proc/sys/kernel/printk (the real one is checked by tests/guest/daemon.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "console_log.h"

static char path[64];

static void put(const char *content)
{
  FILE *f = fopen(path, "w");

  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static char *get(void)
{
  static char buf[128];
  FILE *f = fopen(path, "r");
  size_t n;

  assert_non_null(f);
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int setup(void **state)
{
  int fd;

  (void)state;
  snprintf(path, sizeof path, "/tmp/agt-printk.XXXXXX");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  unlink(path);
  return 0;
}

static void test_lowered(void **state)
{
  agt_error_t err = NULL;
  int was = 0;

  (void)state;
  put("7\t4\t1\t7\n");
  assert_int_equal(agt_console_log_quiet_at(path, &was, &err), 1);
  assert_int_equal(was, 7);
  assert_string_equal(get(), "3 4 1 7");
}

static void test_low_already(void **state)
{
  agt_error_t err = NULL;
  int was = 0;

  (void)state;
  put("3\t4\t1\t3\n");
  assert_int_equal(agt_console_log_quiet_at(path, &was, &err), 0);
  assert_int_equal(was, 3);
  assert_string_equal(get(), "3\t4\t1\t3\n");
  put("1 4 1 7\n");
  assert_int_equal(agt_console_log_quiet_at(path, &was, &err), 0);
  assert_string_equal(get(), "1 4 1 7\n");
}

static void test_bad_file(void **state)
{
  agt_error_t err = NULL;
  int was = 0;

  (void)state;
  put("quiet\n");
  assert_int_equal(agt_console_log_quiet_at(path, &was, &err), -1);
  assert_non_null(strstr(err->msg, "does not hold four levels"));
  agt_error_release(&err);
  assert_int_equal(agt_console_log_quiet_at("/nonexistent/printk", &was, &err), -1);
  assert_non_null(strstr(err->msg, "/nonexistent/printk"));
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_lowered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_low_already, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_file, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
