/* A jail's pid 1 once its agent runs (init_loop.h). */
#include "init_loop.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t agent_pid;

static void forward_signal(int sig)
{
  if (agent_pid > 0)
    kill(agent_pid, sig);
}

void agt_init_loop(pid_t agent)
{
  static const int forwarded[] = {AGT_INIT_FORWARDED};
  struct sigaction sa;
  sigset_t none;

  agent_pid = agent;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaction(forwarded[i], &sa, NULL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      _exit(125);
    if (w == agent) {
      if (WIFEXITED(st))
        _exit(WEXITSTATUS(st));
      _exit(128 + WTERMSIG(st));
    }
  }
}
