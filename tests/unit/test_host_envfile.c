/* Env files (agt jail run --env-file): NAME=VALUE lines, comments, blank lines, "export ",
 * quotes, CRLF; errors that say FILE:LINE and what is wrong without showing the value;
 * NUL bytes refused; reading a file and a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cleanup.h"
#include "envfile.h"
#include "names.h"
#include "xalloc.h"

/* What the parser handed out, as "NAME=VALUE\n" lines. */
struct got {
  char buf[4096];
  size_t n;
  int calls;
  int fail_at; /* the callback fails on this call (1-based); 0: never */
};

static int collect(void *ctx, const char *name, const char *value, agt_error_t *err)
{
  struct got *g = ctx;
  int r;

  if (++g->calls == g->fail_at)
    return agt_error_kind(err, AGT_E_INVALID, "refused %s", name);
  r = snprintf(g->buf + g->n, sizeof g->buf - g->n, "%s=%s\n", name, value);
  assert_true(r > 0 && (size_t)r < sizeof g->buf - g->n);
  g->n += (size_t)r;
  return 0;
}

static int parse(const char *text, size_t len, struct got *g, agt_error_t *err)
{
  memset(g, 0, sizeof *g);
  return agt_envfile_parse("my.env", text, len, collect, g, err);
}

static void test_good(void **state)
{
  static const char text[] = "# secrets for the agent\n"
                             "\n"
                             "   \t\n"
                             "A=1\n"
                             "  B=two words \n"
                             "export C=3\n"
                             "export\tD=x=y==\n"
                             "E=\n"
                             "F=\"quoted # not a comment\"\n"
                             "G='single $HOME'\n"
                             "H=\"\"\n"
                             "I=a\"b'c\n"
                             "J=crlf\r\n"
                             "export=is-a-name\n"
                             "exported=too\n"
                             "   # an indented comment\n"
                             "_k9=last line without a newline";
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(parse(text, sizeof text - 1, &g, &err), 0);
  assert_null(err);
  assert_string_equal(g.buf, "A=1\n"
                             "B=two words \n"
                             "C=3\n"
                             "D=x=y==\n"
                             "E=\n"
                             "F=quoted # not a comment\n"
                             "G=single $HOME\n"
                             "H=\n"
                             "I=a\"b'c\n"
                             "J=crlf\n"
                             "export=is-a-name\n"
                             "exported=too\n"
                             "_k9=last line without a newline\n");
}

static void test_empty(void **state)
{
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(parse("", 0, &g, &err), 0);
  assert_int_equal(g.calls, 0);
  assert_int_equal(parse("\n\n# only comments\n", 18, &g, &err), 0);
  assert_int_equal(g.calls, 0);
}

/* Each bad file: the error names my.env and the line, says why, and never shows the secret
 * (every bad line below holds "s3cr3t"). */
static void test_bad(void **state)
{
  static const struct {
    const char *text;
    const char *want;
  } bad[] = {
      {"s3cr3t\n", "my.env:1: no '='"},
      {"A=1\n\n  s3cr3t  \n", "my.env:3: no '='"},
      {"export s3cr3t\n", "my.env:1: no '='"},
      {"=s3cr3t\n", "my.env:1: the name before '=' is not a variable name: it is empty"},
      {"# c\nc2Vj+cmV0/s3cr3t==\n", "my.env:2: the name before '=' is not a variable name"},
      {"9A=s3cr3t\n",
       "my.env:1: the name before '=' is not a variable name: it starts with a digit"},
      {"A B=s3cr3t\n", "my.env:1: the name before '=' is not a variable name: it has a character"},
      {"A-B=s3cr3t\n", "my.env:1: the name before '=' is not a variable name"},
      {"A =s3cr3t\n", "my.env:1: the name before '=' is not a variable name"},
      {"A=\"s3cr3t\n", "my.env:1: A: the value opens a quote that does not close"},
      {"A='s3cr3t\n'\n", "my.env:1: A: the value opens a quote"},
      {"A=\"s3\"cr3t\"\n", "my.env:1: A: the value opens a quote"},
      {"A=\"s3cr3t\" # comment\n", "my.env:1: A: the value opens a quote"},
      {"A='\n", "my.env:1: A: the value opens a quote"},
  };
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse(bad[i].text, strlen(bad[i].text), &g, &err), -1);
    assert_non_null(err);
    if (strstr(err->msg, bad[i].want) != err->msg)
      fail_msg("case %zu: got '%s', want it to start with '%s'", i, err->msg, bad[i].want);
    if (strstr(err->msg, "s3cr3t") || strstr(err->msg, "c2Vj"))
      fail_msg("case %zu: the error shows the secret: '%s'", i, err->msg);
    assert_int_equal(err->kind, AGT_E_INVALID);
    agt_error_release(&err);
  }
}

/* Names of up to 256 bytes, as agtd takes them. */
static void test_long_name(void **state)
{
  char text[AGT_ENV_NAME_MAX + 8];
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  memset(text, 'N', AGT_ENV_NAME_MAX);
  memcpy(text + AGT_ENV_NAME_MAX, "=v\n", 3);
  assert_int_equal(parse(text, AGT_ENV_NAME_MAX + 3, &g, &err), 0);
  memset(text, 'N', AGT_ENV_NAME_MAX + 1);
  memcpy(text + AGT_ENV_NAME_MAX + 1, "=v\n", 3);
  assert_int_equal(parse(text, AGT_ENV_NAME_MAX + 4, &g, &err), -1);
  assert_non_null(strstr(err->msg, "longer than 256 bytes"));
  agt_error_release(&err);
}

static void test_nul(void **state)
{
  static const char text[] = "A=1\nB=2\nC=s3\0cr3t\nD=4\n";
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(parse(text, sizeof text - 1, &g, &err), -1);
  assert_string_equal(err->msg, "my.env:3: a NUL byte (an env file is text)");
  assert_int_equal(g.calls, 0); /* refused before anything is handed out */
  agt_error_release(&err);
}

/* A callback's error gets the line it came from. */
static void test_callback_error(void **state)
{
  static const char text[] = "A=1\n# x\nB=2\n";
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  memset(&g, 0, sizeof g);
  g.fail_at = 2;
  assert_int_equal(agt_envfile_parse("my.env", text, sizeof text - 1, collect, &g, &err), -1);
  assert_string_equal(err->msg, "my.env:3: refused B");
  agt_error_release(&err);
}

static void test_read(void **state)
{
  char path[] = "/tmp/agt-test-envfile.XXXXXX";
  int fd = mkstemp(path), p[2];
  static const char text[] = "A=1\nB=2\nA=3\n";
  struct got g;
  agt_error_t err = NULL;
  char dev[64];

  (void)state;
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  memset(&g, 0, sizeof g);
  assert_int_equal(agt_envfile_read(path, collect, &g, &err), 0);
  assert_string_equal(g.buf, "A=1\nB=2\nA=3\n"); /* in order: the caller lets the last win */
  unlink(path);

  memset(&g, 0, sizeof g);
  assert_int_equal(agt_envfile_read(path, collect, &g, &err), -1);
  assert_non_null(strstr(err->msg, path));
  agt_error_release(&err);

  /* a pipe, as with --env-file <(pass show token) */
  assert_int_equal(pipe(p), 0);
  assert_int_equal(write(p[1], "T=from-a-pipe\n", 14), 14);
  close(p[1]);
  snprintf(dev, sizeof dev, "/dev/fd/%d", p[0]);
  memset(&g, 0, sizeof g);
  assert_int_equal(agt_envfile_read(dev, collect, &g, &err), 0);
  assert_string_equal(g.buf, "T=from-a-pipe\n");
  close(p[0]);
}

static void test_too_large(void **state)
{
  char path[] = "/tmp/agt-test-envfile.XXXXXX";
  int fd = mkstemp(path);
  cleanup_free char *big = xzalloc(AGT_ENVFILE_MAX + 2);
  struct got g;
  agt_error_t err = NULL;

  (void)state;
  assert_true(fd >= 0);
  memset(big, '#', AGT_ENVFILE_MAX + 1);
  assert_int_equal(write(fd, big, AGT_ENVFILE_MAX + 1), (ssize_t)AGT_ENVFILE_MAX + 1);
  close(fd);
  memset(&g, 0, sizeof g);
  assert_int_equal(agt_envfile_read(path, collect, &g, &err), -1);
  assert_non_null(strstr(err->msg, "larger than"));
  agt_error_release(&err);
  unlink(path);
}

static void test_names(void **state)
{
  const char *good[] = {"A", "_", "a_b", "OPENAI_API_KEY", "x9"};
  const char *bad[] = {"", "9x", "A-B", "A B", "A=B", "é"};
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_int_equal(agt_env_name_check("--env", good[i], &err), 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(agt_env_name_check("--env", bad[i], &err), -1);
    assert_non_null(strstr(err->msg, "is not a variable name"));
    agt_error_release(&err);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),  cmocka_unit_test(test_empty),
      cmocka_unit_test(test_bad),   cmocka_unit_test(test_long_name),
      cmocka_unit_test(test_nul),   cmocka_unit_test(test_callback_error),
      cmocka_unit_test(test_read),  cmocka_unit_test(test_too_large),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
