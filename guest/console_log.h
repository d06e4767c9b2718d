/* The kernel's console loglevel.  A jail that runs out of memory makes the kernel report
 * the kill ("Memory cgroup out of memory: Killed process ...", KERN_ERR), and with a
 * serial console (console=ttyS0, as Lima's and most VMs have) printing that line holds a
 * CPU for milliseconds with preemption off: every other jail's start and agtd itself wait
 * (docs/SECURITY.md, E15).  agtd sets the console loglevel to 3, so that errors and the
 * levels below go to the kernel log (dmesg, the journal) but not to the console; critical
 * messages still print.  Once, for the machine, until someone sets it again. */
#ifndef AGT_CONSOLE_LOG_H
#define AGT_CONSOLE_LOG_H

#include "error.h"

#define AGT_CONSOLE_LOGLEVEL 3

/* 1: lowered (from *was), 0: it was low enough already. */
int agt_console_log_quiet(int *was, agt_error_t *err);
/* The same on another file (tests). */
int agt_console_log_quiet_at(const char *printk_file, int *was, agt_error_t *err);

#endif
