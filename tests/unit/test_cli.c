/* The option parser's extras (common/cli.c): options moved before operands by the table,
 * an argument after "--" left alone; the nearest name for a typo, and none for a word that
 * is merely different. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

static const struct agt_opt opts[] = {
    {'f', "follow", NULL, "follow"},
    {256, "since", "OFFSET", "from"},
    {'n', "name", "NAME", "name"},
    {0, NULL, NULL, NULL},
};

static void permuted(const char *const *in, const char *const *want, int n)
{
  char *argv[16];

  for (int i = 0; i < n; i++)
    argv[i] = strdup(in[i]);
  agt_opts_permute(n, argv, opts);
  for (int i = 0; i < n; i++) {
    assert_string_equal(argv[i], want[i]);
    free(argv[i]);
  }
}

static void test_permute(void **state)
{
  static const char *const in[] = {"logs", "jail1", "-f", "--since", "20",
                                   "x",    "-n",    "a",  "--",      "-f"};
  static const char *const want[] = {"logs", "-f",    "--since", "20", "-n",
                                     "a",    "jail1", "x",       "--", "-f"};
  static const char *const in2[] = {"logs", "--since=5", "j", "-", "-nb"};
  static const char *const want2[] = {"logs", "--since=5", "-nb", "j", "-"};

  (void)state;
  permuted(in, want, 10);
  permuted(in2, want2, 5);
}

static void test_closest(void **state)
{
  static const char *const names[] = {"jail", "rootfs", "verify", "doctor", "up", "down"};

  (void)state;
  assert_int_equal(agt_edit_distance("jial", "jail"), 2);
  assert_int_equal(agt_edit_distance("", "up"), 2);
  assert_string_equal(agt_closest("jial", names, 6), "jail");
  assert_string_equal(agt_closest("docter", names, 6), "doctor");
  assert_string_equal(agt_closest("rootf", names, 6), "rootfs");
  assert_null(agt_closest("banana", names, 6));
  assert_null(agt_closest("x", names, 6)); /* one letter: too short to guess from */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_permute),
      cmocka_unit_test(test_closest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
