#include "console_log.h"

#include <errno.h>
#include <stdio.h>

#include "cleanup.h"
#include "fsutil.h"

int agt_console_log_quiet_at(const char *printk_file, int *was, agt_error_t *err)
{
  int level[4];
  char buf[64];

  {
    cleanup_file FILE *f = fopen(printk_file, "re");
    if (f == NULL)
      return agt_error_make(err, errno, "open '%s'", printk_file);
    if (fscanf(f, "%d %d %d %d", &level[0], &level[1], &level[2], &level[3]) != 4)
      return agt_error_kind(err, AGT_E_INVALID, "'%s' does not hold four levels", printk_file);
  }
  *was = level[0];
  if (level[0] <= AGT_CONSOLE_LOGLEVEL)
    return 0;
  /* the default level of messages without one and the limits stay */
  snprintf(buf, sizeof buf, "%d %d %d %d", AGT_CONSOLE_LOGLEVEL, level[1], level[2], level[3]);
  if (agt_write_str(printk_file, buf, err) < 0)
    return -1;
  return 1;
}

int agt_console_log_quiet(int *was, agt_error_t *err)
{
  return agt_console_log_quiet_at("/proc/sys/kernel/printk", was, err);
}
