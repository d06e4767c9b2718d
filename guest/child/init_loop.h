/* The life of a jail's pid 1 once its agent runs: forward signals to the agent, reap
 * orphans, exit with the agent's status (128 + signal when the agent was killed).  The same
 * loop in agt-init (init.c) and in the init that stays a clone of agtd when agt-init cannot
 * be run (jail_setup.c).  No allocation, no stdio. */
#ifndef AGT_INIT_LOOP_H
#define AGT_INIT_LOOP_H

#include <signal.h>
#include <sys/types.h>

/* the signals the init passes on to the agent */
#define AGT_INIT_FORWARDED SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH

/* Installs the forwarding handlers, unblocks every signal (those that arrived while they were
 * held go to the agent now) and waits until the agent ends. */
__attribute__((noreturn)) void agt_init_loop(pid_t agent);

#endif
