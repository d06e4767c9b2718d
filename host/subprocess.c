#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

extern char **environ;

#define STREAM_MAX (64u * 1024 * 1024)

struct sink {
  char *buf;
  size_t len, cap;
  size_t line_start; /* start of the line not yet passed to the callback */
};

static int set_cloexec(int fd)
{
  int fl = fcntl(fd, F_GETFD);
  if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
    return -1;
  return 0;
}

static int cloexec_pipe(int p[2])
{
  if (pipe(p) < 0)
    return -1;
  if (set_cloexec(p[0]) < 0 || set_cloexec(p[1]) < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    errno = e;
    return -1;
  }
  return 0;
}

static int is_executable(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *agt_find_program(const char *prog)
{
  const char *path = getenv("PATH");
  const char *p, *end;

  if (prog == NULL || *prog == '\0')
    return NULL;
  if (strchr(prog, '/'))
    return is_executable(prog) ? xstrdup(prog) : NULL;
  if (path == NULL || *path == '\0')
    path = "/usr/bin:/bin";
  for (p = path;; p = end + 1) {
    size_t n;
    end = strchr(p, ':');
    n = end ? (size_t)(end - p) : strlen(p);
    {
      cleanup_free char *cand =
          n == 0 ? xasprintf("./%s", prog) : xasprintf("%.*s/%s", (int)n, p, prog);
      if (is_executable(cand))
        return steal_pointer(&cand);
    }
    if (end == NULL)
      return NULL;
  }
}

char **agt_env_with(char *const *set)
{
  size_t n = 0, m = 0, k = 0;
  char **env;

  while (environ && environ[n])
    n++;
  while (set && set[m])
    m++;
  env = xzalloc((n + m + 1) * sizeof *env);
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < m; j++)
      if (strncmp(set[j], environ[i], klen) == 0 && set[j][klen] == '=')
        replaced = 1;
    if (!replaced)
      env[k++] = environ[i];
  }
  for (size_t j = 0; j < m; j++)
    env[k++] = set[j];
  env[k] = NULL;
  return env;
}

static void sink_add(struct sink *s, const char *data, size_t n, agt_line_cb cb, void *ctx)
{
  if (s->len + n > STREAM_MAX)
    n = s->len < STREAM_MAX ? STREAM_MAX - s->len : 0;
  if (s->len + n + 1 > s->cap) {
    s->cap = (s->len + n + 1) * 2;
    s->buf = xrealloc(s->buf, s->cap);
  }
  memcpy(s->buf + s->len, data, n);
  s->len += n;
  s->buf[s->len] = '\0';
  if (cb == NULL)
    return;
  for (;;) {
    char *nl = memchr(s->buf + s->line_start, '\n', s->len - s->line_start);
    if (nl == NULL)
      break;
    *nl = '\0';
    cb(ctx, s->buf + s->line_start);
    *nl = '\n';
    s->line_start = (size_t)(nl - s->buf) + 1;
  }
}

/* Child side, after fork: only async-signal-safe calls from here on. */
static void child(struct agt_subprocess *p, const char *path, char **env, int in, int out,
                  int errfd, int report)
{
  struct sigaction sa;
  int e;

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGQUIT, &sa, NULL);
  if (in >= 0 && dup2(in, STDIN_FILENO) < 0)
    goto fail;
  if (out >= 0 && dup2(out, STDOUT_FILENO) < 0)
    goto fail;
  if (errfd >= 0 && dup2(errfd, STDERR_FILENO) < 0)
    goto fail;
  if (p->cwd && chdir(p->cwd) < 0)
    goto fail;
  execve(path, p->argv, env);
fail:
  e = errno;
  if (write(report, &e, sizeof e) < 0) {
    /* nothing more to do: the parent sees the exit code */
  }
  _exit(127);
}

int agt_subprocess_run(struct agt_subprocess *p, agt_error_t *err)
{
  cleanup_free char *path = NULL;
  cleanup_free char **env = NULL;
  int outp[2] = {-1, -1}, errp[2] = {-1, -1}, rep[2] = {-1, -1};
  int devnull = -1, status = 0, child_errno = 0, r = -1;
  struct sigaction ign, old_int, old_quit;
  struct sink so = {0}, se = {0};
  pid_t pid;
  ssize_t n;

  p->out_buf = p->err_buf = NULL;
  p->out_len = p->err_len = 0;
  p->exit_code = -1;
  path = agt_find_program(p->argv[0]);
  if (path == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND, "cannot run '%s': not found%s", p->argv[0],
                          strchr(p->argv[0], '/') ? "" : " in PATH");
  env = agt_env_with(p->env_set);
  if (cloexec_pipe(rep) < 0)
    return agt_error_make(err, errno, "pipe");
  if (p->capture) {
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || cloexec_pipe(outp) < 0 || cloexec_pipe(errp) < 0) {
      agt_error_make(err, errno, "pipe");
      goto out;
    }
  }
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  if (!p->capture) {
    /* like system(): the terminal's ^C belongs to the child while it runs */
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
  }
  pid = fork();
  if (pid < 0) {
    agt_error_make(err, errno, "fork");
    goto restore;
  }
  if (pid == 0)
    child(p, path, env, devnull, outp[1], errp[1], rep[1]);
  close(rep[1]);
  rep[1] = -1;
  if (p->capture) {
    close(outp[1]);
    close(errp[1]);
    outp[1] = errp[1] = -1;
  }
  do
    n = read(rep[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  if (n != sizeof child_errno)
    child_errno = 0;

  while (p->capture && (outp[0] >= 0 || errp[0] >= 0)) {
    struct pollfd pf[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
    char buf[16384];
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (int i = 0; i < 2; i++) {
      int *fd = i == 0 ? &outp[0] : &errp[0];
      if (*fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      n = read(*fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        close(*fd);
        *fd = -1;
        continue;
      }
      if (i == 0)
        sink_add(&so, buf, (size_t)n, NULL, NULL);
      else
        sink_add(&se, buf, (size_t)n, p->on_err_line, p->cb_ctx);
    }
  }
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      agt_error_make(err, errno, "wait for '%s'", p->argv[0]);
      goto restore;
    }
  }
  if (child_errno) {
    agt_error_make(err, child_errno, "cannot run '%s'", path);
    goto restore;
  }
  if (p->capture && se.line_start < se.len && p->on_err_line)
    p->on_err_line(p->cb_ctx, se.buf + se.line_start);
  if (WIFEXITED(status))
    p->exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    p->exit_code = 128 + WTERMSIG(status);
  p->out_buf = so.buf ? steal_pointer(&so.buf) : xstrdup("");
  p->out_len = so.len;
  p->err_buf = se.buf ? steal_pointer(&se.buf) : xstrdup("");
  p->err_len = se.len;
  r = 0;
restore:
  if (!p->capture) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
  }
out:
  for (int i = 0; i < 2; i++) {
    if (outp[i] >= 0)
      close(outp[i]);
    if (errp[i] >= 0)
      close(errp[i]);
    if (rep[i] >= 0)
      close(rep[i]);
  }
  if (devnull >= 0)
    close(devnull);
  free(so.buf);
  free(se.buf);
  return r;
}

void agt_subprocess_release(struct agt_subprocess *p)
{
  free(p->out_buf);
  free(p->err_buf);
  p->out_buf = p->err_buf = NULL;
  p->out_len = p->err_len = 0;
}
