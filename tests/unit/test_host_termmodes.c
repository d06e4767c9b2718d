/* What agt undoes in the user's terminal when leaving a jail's (common/termmodes.c): the
 * modes opencode's TUI switches on, read from its output even when a sequence is split
 * between two pieces; modes the program switched off again are left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "termmodes.h"

static void feed(struct agt_termmodes *t, const char *s)
{
  agt_termmodes_feed(t, s, strlen(s));
}

/* A TUI's start (as opentui writes it), fed one byte at a time. */
static void test_tui_start_split(void **state)
{
  static const char start[] = "\033[?1049h\033[?1000h\033[?1002h\033[?1003h\033[?1006h"
                              "\033[?2004h\033[?25l\033[>1u\033[?1004hhello\033=";
  struct agt_termmodes t;

  (void)state;
  agt_termmodes_init(&t);
  for (size_t i = 0; i < sizeof start - 1; i++)
    agt_termmodes_feed(&t, start + i, 1);
  assert_string_equal(agt_termmodes_reset(&t),
                      "\033[?1049l\033[?1000l\033[?1002l\033[?1003l\033[?1006l\033[?1004l"
                      "\033[?2004l\033[?25h\033>\033[<1u\033[0m");
}

/* Switched off by the program itself: nothing left to do. */
static void test_switched_off(void **state)
{
  struct agt_termmodes t;

  (void)state;
  agt_termmodes_init(&t);
  feed(&t, "\033[?1049;1006;2004h\033[?25l\033[>5u");
  feed(&t, "\033[?1049;1006;2004l\033[?25h\033[<u");
  assert_string_equal(agt_termmodes_reset(&t), "");
  /* a full reset (ESC c) too */
  feed(&t, "\033[?1000h\033c");
  assert_string_equal(agt_termmodes_reset(&t), "");
}

/* Plain output, colours and unrelated sequences switch nothing on; a sequence too long to
 * be a mode is ignored without harm. */
static void test_plain(void **state)
{
  char longseq[128];
  struct agt_termmodes t;

  (void)state;
  agt_termmodes_init(&t);
  feed(&t, "\033[1;31mred\033[0m \033[2J\033[10;5H\033]0;title\007text");
  memset(longseq, '1', sizeof longseq);
  longseq[0] = '\033';
  longseq[1] = '[';
  longseq[2] = '?';
  longseq[sizeof longseq - 2] = 'h';
  longseq[sizeof longseq - 1] = '\0';
  feed(&t, longseq);
  assert_string_equal(agt_termmodes_reset(&t), "");
  feed(&t, "\033[>4;2m");
  assert_string_equal(agt_termmodes_reset(&t), "\033[>4m\033[0m");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tui_start_split),
      cmocka_unit_test(test_switched_off),
      cmocka_unit_test(test_plain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
