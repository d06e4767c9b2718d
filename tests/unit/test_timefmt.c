/* Times as --since and --until take them, and as --timestamps prints them (common/timefmt.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "timefmt.h"

#define NS 1000000000LL
static const int64_t now = 1764647498LL * NS + 250000000; /* 2025-12-02T03:51:38.25Z */

static int64_t parsed(const char *s)
{
  int64_t v = 0;
  agt_error_t err = NULL;

  if (agt_parse_time("--since", s, now, &v, &err) < 0)
    fail_msg("'%s': %s", s, err->msg);
  return v;
}

static void test_rfc3339(void **state)
{
  (void)state;
  assert_int_equal(parsed("2025-12-02T03:51:38Z"), 1764647498LL * NS);
  assert_int_equal(parsed("2025-12-02T03:51:38.5Z"), 1764647498LL * NS + NS / 2);
  assert_int_equal(parsed("2025-12-02T04:51:38+01:00"), 1764647498LL * NS);
  assert_int_equal(parsed("2025-12-01T22:51:38-0500"), 1764647498LL * NS);
  assert_int_equal(parsed("1970-01-01T00:00:00Z"), 0);
  assert_int_equal(parsed("2000-02-29T00:00:00Z"), 951782400LL * NS);
  setenv("TZ", "UTC", 1);
  assert_int_equal(parsed("2025-12-02"), 1764633600LL * NS);
  assert_int_equal(parsed("2025-12-02T03:51"), 1764647460LL * NS);
}

static void test_unix_and_durations(void **state)
{
  (void)state;
  assert_int_equal(parsed("1764647498"), 1764647498LL * NS);
  assert_int_equal(parsed("1764647498.25"), 1764647498LL * NS + NS / 4);
  assert_int_equal(parsed("10m"), now - 600 * NS);
  assert_int_equal(parsed("1h30m"), now - 5400 * NS);
  assert_int_equal(parsed("1.5h"), now - 5400 * NS);
  assert_int_equal(parsed("250ms"), now - 250000000);
  assert_int_equal(parsed("90s"), now - 90 * NS);
}

static void test_bad(void **state)
{
  static const char *const bad[] = {
      "", "yesterday", "10x", "2025-13-01", "2025-12-02T25:00Z", "2025-12-02T03:51:38Q", "m"};
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v;
    agt_error_t err = NULL;
    if (agt_parse_time("--since", bad[i], now, &v, &err) == 0)
      fail_msg("'%s' was taken as %lld", bad[i], (long long)v);
    assert_non_null(strstr(err->msg, "--since"));
    agt_error_release(&err);
  }
}

static void test_format(void **state)
{
  char buf[40];

  (void)state;
  agt_format_time(1764647498LL * NS + 123456789, buf, sizeof buf);
  assert_string_equal(buf, "2025-12-02T03:51:38.123456789Z");
  agt_format_time(0, buf, sizeof buf);
  assert_string_equal(buf, "1970-01-01T00:00:00.000000000Z");
  agt_format_time(951782400LL * NS, buf, sizeof buf);
  assert_string_equal(buf, "2000-02-29T00:00:00.000000000Z");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rfc3339),
      cmocka_unit_test(test_unix_and_durations),
      cmocka_unit_test(test_bad),
      cmocka_unit_test(test_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
