#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "subprocess.h"
#include "util.h"
#include "xalloc.h"

extern char **environ;

/* Root for the script in $0: directly, or through sudo when the login user is not root. */
/* $0 is "sh", the name the shell's own errors begin with (sh: 1: exec: sudo: not found); $1 the
 * script. */
static const char root_wrap[] =
    "if [ \"$(id -u)\" = 0 ]; then exec sh -c \"$1\"; else exec sudo -n sh -c \"$1\"; fi";

char *agt_sh_quote(const char *s)
{
  size_t n = 3;
  char *out, *p;

  for (const char *q = s; *q; q++)
    n += *q == '\'' ? 4 : 1;
  out = p = xmalloc(n);
  *p++ = '\'';
  for (const char *q = s; *q; q++) {
    if (*q == '\'') {
      memcpy(p, "'\\''", 4);
      p += 4;
    } else {
      *p++ = *q;
    }
  }
  *p++ = '\'';
  *p = '\0';
  return out;
}

/* The argv (and environment edits) that run `sh -c script` on the guest. */
static char **guest_argv(struct agt_ctx *c, const char *script, int as_root, char ***env)
{
  struct agt_strv a = {0};

  *env = NULL;
  switch (c->target.kind) {
  case AGT_TARGET_LOCAL:
    agt_strv_push(&a, "/bin/sh");
    agt_strv_push(&a, "-c");
    agt_strv_push(&a, as_root ? root_wrap : script);
    if (as_root) {
      agt_strv_push(&a, "sh");
      agt_strv_push(&a, script);
    }
    return agt_strv_steal(&a);
  case AGT_TARGET_LIMA: {
    cleanup_strv char **cmd = NULL;
    agt_strv_push(&a, "sh");
    agt_strv_push(&a, "-c");
    agt_strv_push(&a, as_root ? root_wrap : script);
    if (as_root) {
      agt_strv_push(&a, "sh");
      agt_strv_push(&a, script);
    }
    cmd = agt_strv_steal(&a);
    *env = agt_lima_env(&c->lima);
    return agt_lima_argv_shell(&c->lima, c->target.instance, "/", cmd);
  }
  case AGT_TARGET_SSH: {
    const char *id = agt_config_get(&c->cfg, AGT_CFG_SSH_IDENTITY);
    cleanup_free char *q1 = agt_sh_quote(as_root ? root_wrap : script);
    cleanup_free char *q2 = agt_sh_quote(script);
    agt_strv_push(&a, "ssh");
    agt_strv_pushf(&a, "-p%u", c->target.port);
    agt_strv_push(&a, "-oStrictHostKeyChecking=yes");
    agt_strv_pushf(&a, "-oUserKnownHostsFile=%s", agt_config_get(&c->cfg, AGT_CFG_SSH_KNOWN_HOSTS));
    agt_strv_push(&a, "-oBatchMode=yes");
    agt_strv_push(&a, "-oLogLevel=ERROR");
    if (id)
      agt_strv_pushf(&a, "-i%s", id);
    agt_strv_pushf(&a, "%s@%s", c->target.user, c->target.host);
    agt_strv_push(&a, "--");
    if (as_root)
      agt_strv_pushf(&a, "sh -c %s sh %s", q1, q2);
    else
      agt_strv_pushf(&a, "sh -c %s", q1);
    return agt_strv_steal(&a);
  }
  }
  return agt_strv_steal(&a);
}

int agt_guest_sh(struct agt_ctx *c, const char *script, char **out, char **errout, int *exit_code,
                 agt_error_t *err)
{
  cleanup_strv char **env = NULL;
  cleanup_strv char **argv = guest_argv(c, script, 1, &env);
  struct agt_subprocess p = {0};

  *out = NULL;
  if (errout)
    *errout = NULL;
  p.argv = argv;
  p.env_set = env;
  p.cwd = c->target.kind == AGT_TARGET_LIMA ? c->lima.workdir : NULL;
  p.capture = 1;
  if (agt_subprocess_run(&p, err) < 0)
    return agt_error_wrap(err, "run a script on the guest");
  *exit_code = p.exit_code;
  *out = steal_pointer(&p.out_buf);
  if (errout)
    *errout = steal_pointer(&p.err_buf);
  agt_subprocess_release(&p);
  return 0;
}

static void set_cloexec(int fd)
{
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

int agt_guest_spawn(struct agt_ctx *c, const char *script, struct agt_guest_proc *p,
                    agt_error_t *err)
{
  cleanup_strv char **edits = NULL;
  cleanup_strv char **argv = guest_argv(c, script, 0, &edits);
  cleanup_free char **env = agt_env_with(edits);
  cleanup_free char *path = agt_find_program(argv[0]);
  const char *cwd = c->target.kind == AGT_TARGET_LIMA ? c->lima.workdir : NULL;
  int inp[2] = {-1, -1}, outp[2] = {-1, -1};
  pid_t pid;

  memset(p, 0, sizeof *p);
  p->pid = -1;
  p->in_fd = p->out_fd = -1;
  if (path == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND, "cannot run '%s': not found", argv[0]);
  if (pipe(inp) < 0)
    return agt_error_make(err, errno, "pipe");
  if (pipe(outp) < 0) {
    int e = errno;
    close(inp[0]);
    close(inp[1]);
    return agt_error_make(err, e, "pipe");
  }
  set_cloexec(inp[1]);
  set_cloexec(outp[0]);
  pid = fork();
  if (pid < 0) {
    int e = errno;
    close(inp[0]);
    close(inp[1]);
    close(outp[0]);
    close(outp[1]);
    return agt_error_make(err, e, "fork");
  }
  if (pid == 0) { /* only async-signal-safe calls from here on */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &sa, NULL);
    if (dup2(inp[0], STDIN_FILENO) < 0 || dup2(outp[1], STDOUT_FILENO) < 0 ||
        dup2(outp[1], STDERR_FILENO) < 0)
      _exit(127);
    if (inp[0] > 2)
      close(inp[0]);
    if (outp[1] > 2)
      close(outp[1]);
    if (cwd && chdir(cwd) < 0)
      _exit(127);
    setpgid(0, 0); /* the terminal's ^C goes to agt, which then ends this cleanly */
    execve(path, argv, env);
    _exit(127);
  }
  close(inp[0]);
  close(outp[1]);
  p->pid = pid;
  p->in_fd = inp[1];
  p->out_fd = outp[0];
  return 0;
}

static long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int agt_guest_proc_line(struct agt_guest_proc *p, char *line, size_t len, int timeout_ms,
                        agt_error_t *err)
{
  long deadline = now_ms() + timeout_ms;

  for (;;) {
    char *nl = memchr(p->buf, '\n', p->len);
    struct pollfd pf = {p->out_fd, POLLIN, 0};
    long left;
    ssize_t n;

    if (nl || p->len == sizeof p->buf) {
      size_t k = nl ? (size_t)(nl - p->buf) : p->len;
      size_t copy = k < len - 1 ? k : len - 1;
      memcpy(line, p->buf, copy);
      line[copy] = '\0';
      k += nl ? 1 : 0;
      memmove(p->buf, p->buf + k, p->len - k);
      p->len -= k;
      return 1;
    }
    if (p->out_fd < 0) {
      if (p->len == 0)
        return 0;
      memcpy(line, p->buf, p->len < len - 1 ? p->len : len - 1);
      line[p->len < len - 1 ? p->len : len - 1] = '\0';
      p->len = 0;
      return 1;
    }
    left = deadline - now_ms();
    if (left <= 0)
      return agt_error_kind(err, AGT_E_STATE, "no answer within %d ms", timeout_ms);
    if (poll(&pf, 1, (int)left) < 0) {
      if (errno == EINTR)
        continue;
      return agt_error_make(err, errno, "poll");
    }
    if (!(pf.revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    n = read(p->out_fd, p->buf + p->len, sizeof p->buf - p->len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      close(p->out_fd);
      p->out_fd = -1;
      continue;
    }
    p->len += (size_t)n;
  }
}

void agt_guest_proc_end(struct agt_guest_proc *p)
{
  int status;

  if (p->in_fd >= 0)
    close(p->in_fd);
  p->in_fd = -1;
  if (p->pid > 0) {
    for (int i = 0; i < 100; i++) { /* 5 s */
      struct timespec ts = {0, 50 * 1000 * 1000};
      pid_t r = waitpid(p->pid, &status, WNOHANG);
      if (r == p->pid || (r < 0 && errno != EINTR)) {
        p->pid = -1;
        break;
      }
      nanosleep(&ts, NULL);
    }
    if (p->pid > 0) {
      kill(p->pid, SIGTERM);
      while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
      p->pid = -1;
    }
  }
  if (p->out_fd >= 0)
    close(p->out_fd);
  p->out_fd = -1;
}

int agt_guest_rpc(struct agt_ctx *c, agt_rpc_t *r, agt_error_t *err)
{
  const char *sock = agt_config_get(&c->cfg, AGT_CFG_AGTD_SOCKET);

  memset(r, 0, sizeof *r);
  r->fd = -1;
  if (c->target.kind == AGT_TARGET_LOCAL)
    return agt_rpc_connect_unix(r, sock, err);
  return agt_target_open(&c->target, r, err);
}
