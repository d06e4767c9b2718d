/* Times as people write them on a command line (docker's and podman's --since and --until),
 * and as --timestamps prints them. */
#ifndef AGT_TIMEFMT_H
#define AGT_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* s is one of:
 *   RFC 3339: 2026-12-02T03:51:38Z, with a fraction (.5) and a zone (Z, +01:00); without
 *             a zone, or the time (2026-12-02), in this machine's local time
 *   a Unix time in seconds: 1764647498, 1764647498.25
 *   a duration before now, as Go writes them: 10m, 1h30m, 1.5h, 90s, 250ms (units ns, us,
 *             ms, s, m, h)
 * *out: nanoseconds since 1970 (UTC).  `what` names the option in errors. */
int agt_parse_time(const char *what, const char *s, int64_t now_ns, int64_t *out, agt_error_t *err);
/* ns since 1970 as RFC 3339 in UTC with nine decimals, as docker's --timestamps prints:
 * 2026-12-02T03:51:38.123456789Z (buf: 31 bytes or more). */
void agt_format_time(int64_t ns, char *buf, size_t n);
/* Now, in ns since 1970. */
int64_t agt_now_ns(void);

#endif
