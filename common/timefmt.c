/* Times on the command line, and as --timestamps prints them (timefmt.h). */
#include "timefmt.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS 1000000000LL

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
  int64_t era;
  unsigned yoe, doy, doe;

  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = (unsigned)(y - era * 400);
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
  int64_t era;
  unsigned doe, yoe, doy, mp;

  z += 719468;
  era = (z >= 0 ? z : z - 146096) / 146097;
  doe = (unsigned)(z - era * 146097);
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

int64_t agt_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

void agt_format_time(int64_t ns, char *buf, size_t n)
{
  int64_t secs = ns >= 0 ? ns / NS : (ns - NS + 1) / NS, y;
  int64_t frac = ns - secs * NS, days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t rem = secs - days * 86400;
  unsigned m, d;

  civil_from_days(days, &y, &m, &d);
  snprintf(buf, n, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%09lldZ", (long long)y, m, d,
           (long long)(rem / 3600), (long long)(rem / 60 % 60), (long long)(rem % 60),
           (long long)frac);
}

/* n digits at *p as a number; -1 when they are not all digits. */
static int digits(const char **p, int n)
{
  int v = 0;

  for (int i = 0; i < n; i++, (*p)++) {
    if (!isdigit((unsigned char)**p))
      return -1;
    v = v * 10 + (**p - '0');
  }
  return v;
}

/* ".123" after the seconds: nanoseconds. */
static int64_t fraction(const char **p)
{
  int64_t ns = 0, scale = NS / 10;

  if (**p != '.' && **p != ',')
    return 0;
  for ((*p)++; isdigit((unsigned char)**p); (*p)++, scale /= 10)
    ns += (**p - '0') * scale;
  return ns;
}

static int rfc3339(const char *what, const char *s, int64_t *out, agt_error_t *err)
{
  const char *p = s;
  int y = digits(&p, 4), mo = -1, d = -1, h = 0, mi = 0, sec = 0, zone = 0, local = 1;
  int64_t frac = 0, t;

  if (y >= 0 && *p++ == '-' && (mo = digits(&p, 2)) >= 1 && mo <= 12 && *p++ == '-' &&
      (d = digits(&p, 2)) >= 1 && d <= 31) {
    if (*p == 'T' || *p == 't' || *p == ' ') {
      p++;
      if ((h = digits(&p, 2)) < 0 || h > 23 || *p++ != ':' || (mi = digits(&p, 2)) < 0 || mi > 59)
        goto bad;
      if (*p == ':') {
        p++;
        if ((sec = digits(&p, 2)) < 0 || sec > 60)
          goto bad;
        frac = fraction(&p);
      }
      if (*p == 'Z' || *p == 'z') {
        local = 0;
        p++;
      } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, zh = digits(&p, 2), zm;
        if (*p == ':')
          p++;
        zm = digits(&p, 2);
        if (zh < 0 || zh > 23 || zm < 0 || zm > 59)
          goto bad;
        zone = sign * (zh * 3600 + zm * 60);
        local = 0;
      }
    }
    if (*p != '\0')
      goto bad;
    if (local) {
      struct tm tm;
      time_t tt;
      memset(&tm, 0, sizeof tm);
      tm.tm_year = y - 1900;
      tm.tm_mon = mo - 1;
      tm.tm_mday = d;
      tm.tm_hour = h;
      tm.tm_min = mi;
      tm.tm_sec = sec;
      tm.tm_isdst = -1;
      tt = mktime(&tm);
      if (tt == (time_t)-1)
        goto bad;
      *out = (int64_t)tt * NS + frac;
      return 0;
    }
    t = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec - zone;
    *out = t * NS + frac;
    return 0;
  }
bad:
  return agt_error_kind(err, AGT_E_INVALID,
                        "%s '%s' is not a time: give RFC 3339 (2026-12-02T03:51:38Z, "
                        "2026-12-02), a Unix time in seconds, or a duration before now (10m, "
                        "1h30m)",
                        what, s);
}

/* Go's time.ParseDuration: [number unit]..., units ns us ms s m h. */
static int duration(const char *s, int64_t *out)
{
  /* longest first, so that ms is not m followed by s */
  static const struct {
    const char *unit;
    int64_t ns;
  } units[] = {{"\xc2\xb5s", 1000}, {"ns", 1},      {"us", 1000}, {"ms", 1000000},
               {"h", 3600 * NS},    {"m", 60 * NS}, {"s", NS}};
  const char *p = s;
  double total = 0;

  if (*p == '\0')
    return -1;
  while (*p) {
    double v = 0, scale = 1;
    size_t k;
    int any = 0;
    for (; isdigit((unsigned char)*p); p++, any = 1)
      v = v * 10 + (*p - '0');
    if (*p == '.')
      for (p++; isdigit((unsigned char)*p); p++, any = 1)
        v += (*p - '0') * (scale /= 10);
    if (!any)
      return -1;
    for (k = 0; k < sizeof units / sizeof units[0]; k++)
      if (strncmp(p, units[k].unit, strlen(units[k].unit)) == 0)
        break;
    if (k == sizeof units / sizeof units[0])
      return -1;
    total += v * (double)units[k].ns;
    p += strlen(units[k].unit);
  }
  if (total > 9e18)
    return -1;
  *out = (int64_t)total;
  return 0;
}

int agt_parse_time(const char *what, const char *s, int64_t now_ns, int64_t *out, agt_error_t *err)
{
  const char *p = s;
  int64_t d;

  if (*s == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "%s: an empty time", what);
  /* a Unix time: digits, and a fraction */
  while (isdigit((unsigned char)*p))
    p++;
  if (p > s && p - s <= 11 && (*p == '\0' || (*p == '.' && isdigit((unsigned char)p[1])))) {
    int64_t secs = 0;
    for (const char *q = s; q < p; q++)
      secs = secs * 10 + (*q - '0');
    d = fraction(&p);
    if (*p == '\0') {
      *out = secs * NS + d;
      return 0;
    }
  }
  if (duration(s, &d) == 0) {
    *out = now_ns - d;
    return 0;
  }
  return rfc3339(what, s, out, err);
}
