/* agt-init: a jail's pid 1 once its agent runs.  A static program of a few pages, embedded in
 * agtd and run from a sealed memfd: the jail's init execs it (jail_setup.c) after starting the
 * agent, so that what stays for the jail's life is not a copy-on-write clone of agtd (its page
 * tables, its mappings and whatever pages of agtd's it held).  It forwards signals to the
 * agent, reaps orphans, and exits with the agent's status (128 + signal when the agent was
 * killed).  No allocation, no stdio.
 *
 * usage (by a jail's init only): agt-init AGENT-PID, with the signals it forwards blocked. */
#include <sys/prctl.h>
#include <unistd.h>

#include "init_loop.h"

int main(int argc, char **argv)
{
  long pid = 0;

  /* Not readable by the jail's user, so the exec left it non-dumpable already (no ptrace,
   * no /proc/1/fd, exe, environ for the agent): said once more. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (argc != 2)
    _exit(125);
  prctl(PR_SET_NAME, argv[0], 0, 0, 0);
  for (const char *s = argv[1]; *s; s++) {
    if (*s < '0' || *s > '9' || pid > 1000000000L)
      _exit(125);
    pid = pid * 10 + (*s - '0');
  }
  if (pid <= 0)
    _exit(125);
  /* what arrived since the exec was held (blocked), and goes to the agent now */
  agt_init_loop((pid_t)pid);
}
