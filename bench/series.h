/* What the benchmark drivers share: a monotonic clock and series of measurements printed
 * as "KEY.n / .p50 / .p99 / .mean / .min / .max" lines (nearest-rank percentiles), which
 * the scripts read back. */
#ifndef AGT_BENCH_SERIES_H
#define AGT_BENCH_SERIES_H

#include <stddef.h>
#include <stdint.h>

struct series {
  const char *key;
  double *v;
  size_t n;
};

uint64_t now_ns(void);
/* Room for cap values under key. */
void series_init(struct series *s, const char *key, uint64_t cap);
/* Sort the values and print them; nothing for an empty series. */
void series_print(struct series *s);

#endif
