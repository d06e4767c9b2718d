/* agtd's log (log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "log.h"

static enum agt_log_level max_level = AGT_LOG_INFO;

static const char *const level_names[] = {
    [AGT_LOG_ERROR] = "error",
    [AGT_LOG_WARNING] = "warning",
    [AGT_LOG_INFO] = "info",
    [AGT_LOG_DEBUG] = "debug",
};

void agt_log_set_level(enum agt_log_level max)
{
  max_level = max;
}

void agt_log(enum agt_log_level level, const char *fmt, ...)
{
  char line[1024], stamp[32];
  struct timespec ts;
  struct tm tm;
  va_list ap;

  if (level > max_level)
    return;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* one write per line: lines from agtd's threads do not interleave */
  fprintf(stderr, "agtd: %s.%03ldZ %s: %s\n", stamp, ts.tv_nsec / 1000000, level_names[level],
          line);
}
