#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"
#include "names.h"

static void test_names(void **state)
{
  const char *good[] = {"a", "jail-1", "x.y_z", "0abc", "abcdefghijklmnopqrstuvwxyz0123456789"};
  const char *bad[] = {"",    "-a",
                       ".",   "..",
                       "A",   "a/b",
                       "a b", "../x",
                       "a\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_int_equal(agt_name_check("jail name", good[i], &err), 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(agt_name_check("jail name", bad[i], &err), -1);
    assert_int_equal(err->kind, AGT_E_INVALID);
    assert_non_null(strstr(err->msg, "jail name"));
    agt_error_release(&err);
  }
}

static void test_paths(void **state)
{
  const char *good[] = {"/", "/a", "/home/user/proj", "/a/.b/c..d"};
  const char *bad[] = {"", "a", "./a", "/a/", "/a//b", "/a/./b", "/a/../b", "/.."};
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_int_equal(agt_abspath_check("workspace", good[i], &err), 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(agt_abspath_check("workspace", bad[i], &err), -1);
    assert_non_null(strstr(err->msg, "workspace"));
    agt_error_release(&err);
  }
}

static void test_sizes(void **state)
{
  agt_error_t err = NULL;
  uint64_t v;

  (void)state;
  assert_int_equal(agt_parse_size("memory", "512M", &v, &err), 0);
  assert_int_equal(v, 512ull << 20);
  assert_int_equal(agt_parse_size("memory", "2G", &v, &err), 0);
  assert_int_equal(v, 2ull << 30);
  assert_int_equal(agt_parse_size("memory", "2GiB", &v, &err), 0);
  assert_int_equal(v, 2ull << 30);
  assert_int_equal(agt_parse_size("memory", "4096", &v, &err), 0);
  assert_int_equal(v, 4096);
  assert_int_equal(agt_parse_size("memory", "12X", &v, &err), -1);
  assert_non_null(strstr(err->msg, "unknown unit"));
  agt_error_release(&err);
  assert_int_equal(agt_parse_size("memory", "-1", &v, &err), -1);
  agt_error_release(&err);
  assert_int_equal(agt_parse_size("memory", "99999999999T", &v, &err), -1);
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
