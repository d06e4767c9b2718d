/* stamp: the benchmarks' payload.  First thing after exec it writes CLOCK_MONOTONIC in
 * nanoseconds and a newline to stdout, then exits 0.  Static, so nothing runs between the
 * exec and the clock read but the C runtime's start-up.  CLOCK_MONOTONIC is shared with the
 * driver outside the jail: neither agtd nor bubblewrap makes a time namespace. */
#include <time.h>
#include <unistd.h>

int main(void)
{
  struct timespec ts;
  unsigned long long ns;
  char buf[24];
  int i = (int)sizeof buf;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
  buf[--i] = '\n';
  do {
    buf[--i] = (char)('0' + ns % 10);
    ns /= 10;
  } while (ns > 0);
  return write(1, buf + i, sizeof buf - (size_t)i) == (ssize_t)(sizeof buf - (size_t)i) ? 0 : 1;
}
