#include "jail_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "daemon.h"
#include "jail.h"
#include "jail_seccomp.h"
#include "jail_setup.h"
#include "readbuf.h"
#include "server.h"
#include "xalloc.h"

struct agt_exec_s {
  struct agt_client_s *client; /* NULL once gone */
  uint64_t id;
  int pidfd;
  uv_poll_t poll;
  uv_pipe_t out, status;
  int handles;
  int out_open, status_open, exited, paused;
  int code;
  char status_buf[sizeof(struct agt_setup_error)];
  size_t status_len;
};

static void exec_free_cb(uv_handle_t *h)
{
  struct agt_exec_s *x = h->data;

  if (--x->handles > 0)
    return;
  if (x->pidfd >= 0)
    close(x->pidfd);
  free(x);
}

static void finish(struct agt_exec_s *x)
{
  struct agt_client_s *c = x->client;

  if (!x->exited || x->out_open || x->status_open)
    return;
  if (c) {
    json_t *m;
    if (x->status_len >= sizeof(struct agt_setup_error)) {
      struct agt_setup_error e;
      memcpy(&e, x->status_buf, sizeof e);
      e.step[sizeof e.step - 1] = '\0';
      m = json_pack("{s:{s:s, s:s}}", "error", "kind", "state", "message", e.step);
      json_object_set_new(json_object_get(m, "error"), "message",
                          json_sprintf("exec: %s: %s", e.step, strerror(e.errnum)));
      agt_client_send(c, m);
      json_decref(m);
    }
    m = json_pack("{s:{s:i}}", "exit", "exit_code", x->code);
    agt_client_send(c, m);
    json_decref(m);
    agt_client_set_mode(c, NULL, NULL);
    x->client = NULL;
    agt_client_finish(c);
  }
  uv_close((uv_handle_t *)&x->poll, exec_free_cb);
}

static void out_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct agt_exec_s *x = s->data;

  if (n < 0) {
    x->out_open = 0;
    uv_close((uv_handle_t *)s, exec_free_cb);
    finish(x);
    return;
  }
  if (n == 0 || x->client == NULL)
    return;
  {
    char *b64 = agt_base64_encode(buf->base, (size_t)n);
    json_t *m = json_pack("{s:s}", "out", b64);
    agt_client_send(x->client, m);
    json_decref(m);
    free(b64);
  }
  if (x->client && x->client->out_queued > AGT_STREAM_HIGH) {
    uv_read_stop(s);
    x->paused = 1;
  }
}

static void exec_drained(void *data)
{
  struct agt_exec_s *x = data;

  if (x->paused && x->out_open && x->client && x->client->out_queued < AGT_STREAM_LOW) {
    x->paused = 0;
    uv_read_start((uv_stream_t *)&x->out, agt_read_buffer, out_cb);
  }
}

static void exec_client_gone(void *data)
{
  struct agt_exec_s *x = data;

  x->client = NULL;
  if (!x->exited)
    syscall(SYS_pidfd_send_signal, x->pidfd, SIGKILL, NULL, 0);
  if (x->paused && x->out_open) /* drain what is left so the pipe reaches EOF */
    uv_read_start((uv_stream_t *)&x->out, agt_read_buffer, out_cb);
}

/* A command's stream takes no input (its stdin is /dev/null): frames are dropped. */
static const struct agt_client_mode exec_mode = {
    .name = "exec",
    .drained = exec_drained,
    .gone = exec_client_gone,
    .keep_on_eof = 1,
};

static void status_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct agt_exec_s *x = s->data;

  if (n > 0) {
    size_t take = (size_t)n < sizeof x->status_buf - x->status_len
                      ? (size_t)n
                      : sizeof x->status_buf - x->status_len;
    memcpy(x->status_buf + x->status_len, buf->base, take);
    x->status_len += take;
    return;
  }
  if (n < 0) {
    x->status_open = 0;
    uv_close((uv_handle_t *)s, exec_free_cb);
    finish(x);
  }
}

static void exited_cb(uv_poll_t *p, int status, int events)
{
  struct agt_exec_s *x = p->data;
  siginfo_t info;

  (void)status;
  (void)events;
  memset(&info, 0, sizeof info);
  if (syscall(SYS_waitid, P_PIDFD, x->pidfd, &info, WEXITED | WNOHANG, NULL) < 0 ||
      info.si_pid == 0)
    return;
  x->code = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  x->exited = 1;
  uv_poll_stop(p);
  finish(x);
}

int agt_jail_exec(struct agt_jail_s *j, struct agt_client_s *c, uint64_t id, json_t *params,
                  agt_error_t *err)
{
  struct agt_spawn_plan plan;
  int fds[6] = {-1, -1, -1, -1, -1, -1}; /* sync, status, out: read end first */
  cleanup_strv char **argv = NULL;
  cleanup_strv char **env = NULL;
  struct clone_args args;
  struct agt_exec_s *x;
  json_t *a = json_object_get(params, "argv"), *reply;
  int pidfd = -1;
  pid_t pid;
  size_t i, n;

  if (j->state != AGT_JAIL_RUNNING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: exec needs it running", j->name,
                          agt_jail_state_name(j->state));
  n = json_array_size(a);
  if (!json_is_array(a) || n == 0 || n > AGT_JAIL_ARGV_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "'argv' must be 1..%d strings", AGT_JAIL_ARGV_MAX);
  argv = xzalloc((n + 1) * sizeof *argv);
  for (i = 0; i < n; i++) {
    json_t *s = json_array_get(a, i);
    if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s))
      return agt_error_kind(err, AGT_E_INVALID, "'argv[%zu]' must be a string without NUL", i);
    argv[i] = xstrdup(json_string_value(s));
  }
  /* The jail's environment (its proxy settings included). */
  for (n = 0; j->env[n]; n++)
    ;
  env = xzalloc((n + 1) * sizeof *env);
  for (i = 0; i < n; i++)
    env[i] = xstrdup(j->env[i]);

  for (i = 0; i < 6; i += 2)
    if (pipe2(fds + i, O_CLOEXEC) < 0) {
      for (size_t k = 0; k < 6; k++)
        if (fds[k] >= 0)
          close(fds[k]);
      return agt_error_make(err, errno, "pipe");
    }
  memset(&plan, 0, sizeof plan);
  plan.landlock_fd = -1;
  plan.cwd = "/work";
  plan.path = "/usr/local/bin:/usr/bin:/bin";
  for (i = 0; env[i]; i++)
    if (strncmp(env[i], "PATH=", 5) == 0)
      plan.path = env[i] + 5;
  plan.argv = argv;
  plan.envp = env;
  plan.uid = j->uid;
  plan.gid = j->gid;
  plan.nofile = j->limits.nofile;
  plan.cap_last = 40;
  {
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
    if (f) {
      if (fscanf(f, "%d", &plan.cap_last) != 1)
        plan.cap_last = 63;
      fclose(f);
    }
  }
  plan.seccomp = &j->d->seccomp->prog;
  plan.fds[0] = fds[0];
  plan.fds[1] = fds[3];
  plan.fds[2] = fds[5];
  plan.fds[3] = fds[5]; /* stdout and stderr share one pipe: their order is kept */
  plan.fds[4] = j->pidfd;
  plan.fds[5] = -1;

  memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  args.exit_signal = SIGCHLD;
  pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0)
    agt_jail_exec_child(&plan);
  close(fds[0]);
  close(fds[3]);
  close(fds[5]);
  if (pid < 0) {
    close(fds[1]);
    close(fds[2]);
    close(fds[4]);
    return agt_error_make(err, errno, "clone");
  }
  if (agt_cgroup_attach(j->d->cgroup, j->name, pid, err) < 0 || write(fds[1], "g", 1) != 1) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    if (*err == NULL)
      agt_error_make(err, errno, "start the command");
  }
  close(fds[1]);

  x = xzalloc(sizeof *x);
  x->client = *err ? NULL : c;
  x->id = id;
  x->pidfd = pidfd;
  uv_pipe_init(j->d->loop, &x->out, 0);
  uv_pipe_init(j->d->loop, &x->status, 0);
  uv_poll_init(j->d->loop, &x->poll, pidfd);
  x->out.data = x->status.data = x->poll.data = x;
  x->handles = 3;
  uv_pipe_open(&x->out, fds[4]);
  uv_pipe_open(&x->status, fds[2]);
  x->out_open = x->status_open = 1;
  uv_read_start((uv_stream_t *)&x->out, agt_read_buffer, out_cb);
  uv_read_start((uv_stream_t *)&x->status, agt_read_buffer, status_cb);
  uv_poll_start(&x->poll, UV_READABLE, exited_cb);
  if (*err)
    return -1; /* x cleans itself up once the killed child is reaped */
  agt_client_set_mode(c, &exec_mode, x);
  reply = json_pack("{s:s, s:i}", "name", j->name, "pid", (int)pid);
  agt_reply(c, id, reply);
  json_decref(reply);
  return 0;
}
