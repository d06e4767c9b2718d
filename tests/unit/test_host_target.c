/* Target strings: lima:NAME, ssh://USER@HOST[:PORT], local. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "target.h"

static void test_parse(void **state)
{
  struct agt_target t;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_target_parse("lima:agt_agent_sandbox", &t, &err), 0);
  assert_int_equal(t.kind, AGT_TARGET_LIMA);
  assert_string_equal(t.instance, "agt_agent_sandbox");
  agt_target_release(&t);

  assert_int_equal(agt_target_parse("gold", &t, &err), 0); /* a bare name is a Lima VM */
  assert_int_equal(t.kind, AGT_TARGET_LIMA);
  assert_string_equal(t.instance, "gold");
  agt_target_release(&t);

  assert_int_equal(agt_target_parse("local", &t, &err), 0);
  assert_int_equal(t.kind, AGT_TARGET_LOCAL);
  agt_target_release(&t);

  assert_int_equal(agt_target_parse("ssh://dev@build.example.com", &t, &err), 0);
  assert_int_equal(t.kind, AGT_TARGET_SSH);
  assert_string_equal(t.user, "dev");
  assert_string_equal(t.host, "build.example.com");
  assert_int_equal(t.port, 22);
  agt_target_release(&t);

  assert_int_equal(agt_target_parse("ssh://root@127.0.0.1:2222", &t, &err), 0);
  assert_string_equal(t.host, "127.0.0.1");
  assert_int_equal(t.port, 2222);
  agt_target_release(&t);

  assert_int_equal(agt_target_parse("ssh://me@[::1]:22022", &t, &err), 0);
  assert_string_equal(t.host, "::1");
  assert_int_equal(t.port, 22022);
  agt_target_release(&t);
}

static void test_refusals(void **state)
{
  static const char *const bad[] = {
      "",
      "ssh://host",
      "ssh://@host",
      "ssh://me@host:0",
      "ssh://me@host:65536",
      "ssh://me@host:22x",
      "ssh://me@host:",
      "ssh://me@",
      "ssh://me@[::1",
      "ssh://me@host/path",
      "lima:",
      "lima:bad name",
      NULL,
  };
  (void)state;
  for (size_t i = 0; bad[i]; i++) {
    struct agt_target t;
    agt_error_t err = NULL;
    if (agt_target_parse(bad[i], &t, &err) == 0)
      fail_msg("'%s' accepted", bad[i]);
    assert_non_null(err);
    agt_error_release(&err);
    agt_target_release(&t);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
