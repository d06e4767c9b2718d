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
    AGT_OPT_KEY('f', "follow", NULL, "follow"),
    AGT_OPT_KEY(256, "since", "OFFSET", "from"),
    AGT_OPT_KEY('n', "name", "NAME", "name"),
    AGT_OPT_END,
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

/* Entries that point at the fields they fill, as a command declares them. */
struct fields {
  int follow, tty, called;
  const char *name;
  uint64_t offset;
  char last[16];
};

static int upper(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  char *out = field;

  if (strlen(arg) >= 16)
    return agt_error_kind(err, AGT_E_INVALID, "--%s: too long", o->name);
  for (size_t i = 0; arg[i]; i++)
    out[i] = (char)(arg[i] >= 'a' && arg[i] <= 'z' ? arg[i] - 32 : arg[i]);
  out[strlen(arg)] = '\0';
  return 0;
}

static int count_call(void *ctx, int key, const char *arg, agt_error_t *err)
{
  (void)arg;
  (void)err;
  if (key == 300)
    ((struct fields *)ctx)->called++;
  return 0;
}

static const struct agt_opt field_opts[] = {
    AGT_OPT_BOOL('f', "follow", struct fields, follow, "follow"),
    AGT_OPT_SETINT('t', "tty", struct fields, tty, 1, "a terminal"),
    AGT_OPT_SETINT(0, "no-tty", struct fields, tty, 0, "none"),
    AGT_OPT_STRING('n', "name", "NAME", struct fields, name, "name"),
    AGT_OPT_UINT(0, "offset", "BYTES", struct fields, offset, "from"),
    AGT_OPT_CALLBACK(0, "shout", "WORD", struct fields, last, upper, 0, "a word"),
    AGT_OPT_KEY(300, "count", NULL, "counted by the callback"),
    AGT_OPT_END,
};

static int parse(struct fields *f, agt_opt_fn fn, agt_error_t *err, int n, ...)
{
  char *argv[16];
  va_list ap;
  int r;

  argv[0] = strdup("cmd");
  va_start(ap, n);
  for (int i = 1; i <= n; i++)
    argv[i] = strdup(va_arg(ap, const char *));
  va_end(ap);
  r = agt_opts_parse(n + 1, argv, field_opts, fn, f, err);
  for (int i = 0; i <= n; i++)
    if (f->name != argv[i])
      free(argv[i]);
  return r;
}

static void test_fields(void **state)
{
  struct fields f = {0, -1, 0, NULL, 0, ""};
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(parse(&f, count_call, &err, 9, "-f", "--tty", "--no-tty", "-n", "x",
                         "--offset=42", "--shout", "hey", "--count"),
                   10);
  assert_int_equal(f.follow, 1);
  assert_int_equal(f.tty, 0); /* the last of --tty, --no-tty wins */
  assert_string_equal(f.name, "x");
  free((char *)f.name);
  f.name = NULL;
  assert_true(f.offset == 42);
  assert_string_equal(f.last, "HEY");
  assert_int_equal(f.called, 1);

  /* a number that is not one: the option named */
  assert_int_equal(parse(&f, count_call, &err, 2, "--offset", "x1"), -1);
  assert_string_equal(err->msg, "--offset 'x1' is not a number");
  agt_error_release(&err);
  /* the entry's own check */
  assert_int_equal(parse(&f, count_call, &err, 2, "--shout", "abcdefghijklmnopq"), -1);
  assert_string_equal(err->msg, "--shout: too long");
  agt_error_release(&err);
  /* a callback entry without a callback is refused, not dropped */
  assert_int_equal(parse(&f, NULL, &err, 1, "--count"), -1);
  assert_non_null(strstr(err->msg, "--count"));
  agt_error_release(&err);
  assert_int_equal(parse(&f, NULL, &err, 1, "--nope"), -1);
  assert_non_null(strstr(err->msg, "unknown option '--nope'"));
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_permute),
      cmocka_unit_test(test_closest),
      cmocka_unit_test(test_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
