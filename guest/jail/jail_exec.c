#include "jail_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
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
  uv_pipe_t in;         /* stdin: the write end of the command's pipe (-i without -t) */
  uv_shutdown_t in_end; /* eof: after the writes before it */
  uv_poll_t console;    /* -t: where the child sends the terminal's master */
  uv_pipe_t tty;        /* -t: the master, once received: output, and input */
  int master;           /* its fd, for resizes */
  int handles;
  int out_open, status_open, exited, paused;
  int in_open, console_open, tty_open, detached;
  int holding; /* the client's input waits: the command has not read what came before */
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

  if (!x->exited || x->out_open || x->status_open || x->tty_open || x->console_open)
    return;
  if (x->in_open) {
    x->in_open = 0;
    uv_close((uv_handle_t *)&x->in, exec_free_cb);
  }
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

/* The terminal's output: as the pipe's; EIO once nothing holds its slave. */
static void tty_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct agt_exec_s *x = s->data;

  if (n < 0) {
    x->tty_open = 0;
    x->master = -1; /* closed with the handle */
    uv_close((uv_handle_t *)s, exec_free_cb);
    finish(x);
    return;
  }
  out_cb(s, n, buf);
}

static void resume(struct agt_exec_s *x)
{
  if (!x->paused)
    return;
  x->paused = 0;
  if (x->out_open)
    uv_read_start((uv_stream_t *)&x->out, agt_read_buffer, out_cb);
  if (x->tty_open && x->master >= 0)
    uv_read_start((uv_stream_t *)&x->tty, agt_read_buffer, tty_cb);
}

static void exec_drained(void *data)
{
  struct agt_exec_s *x = data;

  if (x->client && x->client->out_queued < AGT_STREAM_LOW)
    resume(x);
}

/* -t: the master from the child (SCM_RIGHTS on the console socket); EOF without one: the
 * child failed before (the status pipe says why). */
static void console_cb(uv_poll_t *p, int status, int events)
{
  struct agt_exec_s *x = p->data;
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm;
  uv_os_fd_t sock;
  int fd = -1;
  ssize_t n;

  (void)status;
  (void)events;
  uv_fileno((uv_handle_t *)p, &sock);
  n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  x->console_open = 0;
  uv_close((uv_handle_t *)p, exec_free_cb); /* stops polling it: then it may be closed */
  close(sock);
  if (fd >= 0) {
    x->master = fd;
    uv_pipe_init(p->loop, &x->tty, 0);
    x->tty.data = x;
    x->handles++;
    if (uv_pipe_open(&x->tty, fd) == 0) {
      x->tty_open = 1;
      if (!x->paused) /* else resume() starts it */
        uv_read_start((uv_stream_t *)&x->tty, agt_read_buffer, tty_cb);
    } else {
      close(fd);
      x->master = -1;
      uv_close((uv_handle_t *)&x->tty, exec_free_cb);
    }
  }
  finish(x);
}

/* Input is read from the client while the command takes it: above this much queued, agtd
 * stops reading the client until the command has read most of it. */
#define IN_HIGH (1u << 20)
#define IN_LOW (256u << 10)

struct exec_write {
  uv_write_t req;
  char *data;
  struct agt_exec_s *x;
};

static void write_done(uv_write_t *w, int status)
{
  struct exec_write *ew = (struct exec_write *)w;
  struct agt_exec_s *x = ew->x;

  (void)status;
  if (x->holding && uv_stream_get_write_queue_size(w->handle) < IN_LOW) {
    x->holding = 0;
    if (x->client)
      agt_client_resume(x->client);
  }
  free(ew->data);
  free(ew);
}

static void exec_error(struct agt_exec_s *x, const char *msg)
{
  json_t *m = json_pack("{s:{s:s, s:s}}", "error", "kind", "invalid", "message", msg);
  agt_client_send(x->client, m);
  json_decref(m);
}

static void in_ended(uv_shutdown_t *sd, int status)
{
  (void)status;
  uv_close((uv_handle_t *)sd->handle, exec_free_cb);
}

/* Detached: the command goes on, its output is read and dropped, its stdin closed. */
static void detach(struct agt_exec_s *x)
{
  struct agt_client_s *c = x->client;

  x->detached = 1;
  x->client = NULL;
  agt_client_set_mode(c, NULL, NULL); /* so that closing the connection does not kill it */
  if (x->in_open) {
    x->in_open = 0;
    uv_close((uv_handle_t *)&x->in, exec_free_cb);
  }
  resume(x);
  agt_client_close(c);
}

static void exec_input(void *mode_data, json_t *msg)
{
  struct agt_exec_s *x = mode_data;
  json_t *v;

  if ((v = json_object_get(msg, "in")) != NULL) {
    uv_stream_t *to = x->tty_open  ? (uv_stream_t *)&x->tty
                      : x->in_open ? (uv_stream_t *)&x->in
                                   : NULL;
    struct exec_write *ew;
    size_t len;
    char *data;
    uv_buf_t b;

    if (to == NULL) {
      exec_error(x, x->console_open ? "the command's terminal is not there yet"
                                    : "the command's stdin is closed (jail.exec without stdin, "
                                      "or after eof)");
      return;
    }
    data = json_is_string(v) ? agt_base64_decode(json_string_value(v), &len) : NULL;
    if (data == NULL) {
      exec_error(x, "'in' must be base64");
      return;
    }
    ew = xzalloc(sizeof *ew);
    ew->data = data;
    ew->x = x;
    b = uv_buf_init(data, (unsigned)len);
    if (uv_write(&ew->req, to, &b, 1, write_done) < 0) {
      free(data);
      free(ew);
    } else if (uv_stream_get_write_queue_size(to) > IN_HIGH && !x->holding) {
      x->holding = 1;
      agt_client_hold(x->client);
    }
    return;
  }
  if ((v = json_object_get(msg, "resize")) != NULL) {
    json_int_t rows = json_integer_value(json_array_get(v, 0));
    json_int_t cols = json_integer_value(json_array_get(v, 1));
    struct winsize ws;
    if (!json_is_array(v) || rows < 1 || rows > 1000 || cols < 1 || cols > 1000) {
      exec_error(x, "'resize' takes [rows, cols] within 1..1000");
      return;
    }
    if (x->master < 0)
      return; /* no terminal: nothing to size */
    memset(&ws, 0, sizeof ws);
    ws.ws_row = (unsigned short)rows;
    ws.ws_col = (unsigned short)cols;
    ioctl(x->master, TIOCSWINSZ, &ws);
    return;
  }
  if (json_is_true(json_object_get(msg, "eof"))) {
    /* after what was written before it: the shutdown waits for the writes (on a pipe it
     * then fails, ENOTSOCK, and the close is what ends the command's stdin) */
    if (x->in_open) {
      x->in_open = 0;
      if (uv_shutdown(&x->in_end, (uv_stream_t *)&x->in, in_ended) < 0)
        uv_close((uv_handle_t *)&x->in, exec_free_cb);
    }
    return;
  }
  if (json_is_true(json_object_get(msg, "detach"))) {
    detach(x);
    return;
  }
  exec_error(x, "an exec's stream takes 'in', 'resize', 'eof' or 'detach'");
}

static void exec_client_gone(void *data)
{
  struct agt_exec_s *x = data;

  x->client = NULL;
  if (!x->exited)
    syscall(SYS_pidfd_send_signal, x->pidfd, SIGKILL, NULL, 0);
  resume(x); /* drain what is left so the pipe reaches EOF */
}

/* Its input: stdin, the terminal's size, eof, detach (jail_exec.h). */
static const struct agt_client_mode exec_mode = {
    .name = "exec",
    .input = exec_input,
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
  sigset_t all, old;
  struct agt_exec_s *x;
  json_t *a = json_object_get(params, "argv"), *reply, *size = json_object_get(params, "size");
  int pidfd = -1, tty = 0, in = 0, extra[2] = {-1, -1}; /* agtd's end, the child's */
  pid_t pid;
  size_t i, n;

  if (j->rec.state != AGT_JAIL_RUNNING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: exec needs it running", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  if (agt_param_bool(params, "tty", &tty, err) < 0 || agt_param_bool(params, "stdin", &in, err) < 0)
    return -1;
  if (size && (!json_is_array(size) || json_array_size(size) != 2 ||
               json_integer_value(json_array_get(size, 0)) < 1 ||
               json_integer_value(json_array_get(size, 0)) > 1000 ||
               json_integer_value(json_array_get(size, 1)) < 1 ||
               json_integer_value(json_array_get(size, 1)) > 1000))
    return agt_error_kind(err, AGT_E_INVALID, "'size' takes [rows, cols] within 1..1000");
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
  for (n = 0; j->rec.env[n]; n++)
    ;
  env = xzalloc((n + 1) * sizeof *env);
  for (i = 0; i < n; i++)
    env[i] = xstrdup(j->rec.env[i]);

  for (i = 0; i < 6; i += 2)
    if (pipe2(fds + i, O_CLOEXEC) < 0) {
      for (size_t k = 0; k < 6; k++)
        if (fds[k] >= 0)
          close(fds[k]);
      return agt_error_make(err, errno, "pipe");
    }
  /* -t: a socket the child sends the terminal on; -i alone: the command's stdin */
  if ((tty && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, extra) < 0) ||
      (!tty && in && pipe2(extra, O_CLOEXEC) < 0)) {
    for (size_t k = 0; k < 6; k++)
      close(fds[k]);
    return agt_error_make(err, errno, "%s", tty ? "socketpair" : "pipe");
  }
  if (!tty && in) { /* the pipe's read end is the child's */
    int t = extra[0];
    extra[0] = extra[1];
    extra[1] = t;
  }
  memset(&plan, 0, sizeof plan);
  plan.landlock_fd = -1;
  plan.init_fd = j->d->init_fd;
  plan.cwd = "/work";
  plan.path = "/usr/local/bin:/usr/bin:/bin";
  for (i = 0; env[i]; i++)
    if (strncmp(env[i], "PATH=", 5) == 0)
      plan.path = env[i] + 5;
  plan.argv = argv;
  plan.envp = env;
  plan.uid = j->rec.uid;
  plan.gid = j->rec.gid;
  plan.nofile = j->rec.limits.nofile;
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
  plan.fds[4] = j->run.pidfd;
  plan.fds[5] = extra[1];
  plan.stdin_pipe = !tty && in;
  if (size) {
    plan.rows = (unsigned short)json_integer_value(json_array_get(size, 0));
    plan.cols = (unsigned short)json_integer_value(json_array_get(size, 1));
  }

  memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  args.exit_signal = SIGCHLD;
  /* every signal blocked across the clone (see jail_keep.c): the child unblocks them
   * before the command's exec and in its init loop */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0)
    agt_jail_exec_child(&plan);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(fds[0]);
  close(fds[3]);
  close(fds[5]);
  if (extra[1] >= 0)
    close(extra[1]);
  if (pid < 0) {
    close(fds[1]);
    close(fds[2]);
    close(fds[4]);
    if (extra[0] >= 0)
      close(extra[0]);
    return agt_error_make(err, errno, "clone");
  }
  if (agt_cgroup_attach(j->d->cgroup, j->rec.name, pid, err) < 0 || write(fds[1], "g", 1) != 1) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    if (*err == NULL)
      agt_error_make(err, errno, "start the command");
  }
  close(fds[1]);

  x = xzalloc(sizeof *x);
  x->client = *err ? NULL : c;
  x->id = id;
  x->pidfd = pidfd;
  x->master = -1;
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
  if (tty) {
    uv_poll_init(j->d->loop, &x->console, extra[0]);
    x->console.data = x;
    x->handles++;
    x->console_open = 1;
    uv_poll_start(&x->console, UV_READABLE, console_cb);
  } else if (in) {
    uv_pipe_init(j->d->loop, &x->in, 0);
    x->in.data = x;
    x->handles++;
    uv_pipe_open(&x->in, extra[0]);
    x->in_open = 1;
  }
  if (*err)
    return -1; /* x cleans itself up once the killed child is reaped */
  agt_client_set_mode(c, &exec_mode, x);
  reply = json_pack("{s:s, s:i}", "name", j->rec.name, "pid", (int)pid);
  agt_reply(c, id, reply);
  json_decref(reply);
  return 0;
}
