/* What running jails' disk limits promise (guest/jail/disk.h): the sum of limits that each
 * fit the disk, or whose record says more than any disk has, never wraps around to room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon.h"
#include "disk.h"
#include "jail.h"

#define TIB (1ULL << 40)

static struct agt_disk dk;
static struct agtd_s d;
static agt_jail_t running[3], starting;

/* n running jails with these limits, then whether a jail asking `want` may start. */
static int may_start(const uint64_t *limits, size_t n, uint64_t want)
{
  agt_error_t err = NULL;
  int r;

  memset(&d, 0, sizeof d);
  memset(running, 0, sizeof running);
  memset(&starting, 0, sizeof starting);
  d.disk = &dk;
  for (size_t i = 0; i < n; i++) {
    running[i].rec.name = (char *)"running";
    running[i].rec.state = AGT_JAIL_RUNNING;
    running[i].rec.limits.disk_bytes = limits[i];
    running[i].next = d.jails;
    d.jails = &running[i];
  }
  starting.rec.name = (char *)"new";
  starting.rec.limits.disk_bytes = want;
  r = agt_jail_disk_promise(&d, &starting, &err);
  agt_error_release(&err);
  return r == 0;
}

static void test_fits(void **state)
{
  uint64_t l[2] = {TIB, TIB};

  (void)state;
  assert_true(may_start(l, 2, TIB));
  assert_false(may_start(l, 2, 1023 * TIB));
}

static void test_sum_of_limits_saturates(void **state)
{
  /* 2^63 + 2^63 wraps to 0 in 64 bits: it must count as more than the disk */
  uint64_t half[2] = {1ULL << 63, 1ULL << 63};
  uint64_t three[3] = {UINT64_MAX, UINT64_MAX, 2};

  (void)state;
  assert_false(may_start(half, 2, TIB));
  assert_false(may_start(three, 3, TIB));
}

static void test_written_plus_promised_saturates(void **state)
{
  /* what is written (statfs of dk.dir) plus limits near 2^64 */
  uint64_t l[1] = {UINT64_MAX - 4096};

  (void)state;
  assert_false(may_start(l, 1, TIB));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fits),
      cmocka_unit_test(test_sum_of_limits_saturates),
      cmocka_unit_test(test_written_plus_promised_saturates),
  };

  /* a disk of 1 PiB (more than anything written on the file system of "/") */
  dk.enabled = 1;
  dk.dir = (char *)"/";
  dk.size = 1024 * TIB;
  dk.capacity = 1024 * TIB;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
