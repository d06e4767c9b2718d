#include "series.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "xalloc.h"

uint64_t now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void series_init(struct series *s, const char *key, uint64_t cap)
{
  s->key = key;
  s->v = xmalloc((cap ? cap : 1) * sizeof *s->v);
  s->n = 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static double pct(const double *v, size_t n, double p)
{
  size_t rank = (size_t)ceil(p / 100.0 * (double)n);
  return v[rank > 0 ? rank - 1 : 0];
}

void series_print(struct series *s)
{
  double sum = 0;

  if (s->n == 0)
    return;
  qsort(s->v, s->n, sizeof *s->v, cmp_double);
  for (size_t i = 0; i < s->n; i++)
    sum += s->v[i];
  printf("%s.n %zu\n", s->key, s->n);
  printf("%s.p50 %.3f\n%s.p99 %.3f\n", s->key, pct(s->v, s->n, 50), s->key, pct(s->v, s->n, 99));
  printf("%s.mean %.3f\n%s.min %.3f\n%s.max %.3f\n", s->key, sum / (double)s->n, s->key, s->v[0],
         s->key, s->v[s->n - 1]);
}
