/* Supervision of a running jail: its exit (a pidfd watched by the loop), its output
 * (stdout and stderr pipes into one bounded log), and the setup status pipe that says
 * whether the agent's exec happened. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "jail.h"
#include "jail_setup.h"
#include "server.h"
#include "stream.h"
#include "xalloc.h"

uint64_t agt_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void handle_closed(uv_handle_t *h)
{
  agt_jail_t *j = h->data;

  j->handles_open--;
  if (j->d->shutting_down)
    return;
  if (j->handles_open == 0 && j->exited_seen && j->streams_open == 0)
    agt_jail_run_finished(j);
}

static void close_handle(agt_jail_t *j, uv_handle_t *h)
{
  if (!uv_is_closing(h)) {
    h->data = j;
    uv_close(h, handle_closed);
  }
}

/* Logs: at most limits.log_bytes on disk (outlog.h). */
void agt_jail_log_append(agt_jail_t *j, const char *data, size_t len)
{
  j->log.budget = j->limits.log_bytes;
  if (agt_outlog_append(&j->log, data, len) < 0)
    agtd_log("jail '%s': write log: %s", j->name, strerror(errno));
}

static int read_range(const char *path, uint64_t off, size_t max, char *buf, size_t *got)
{
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  *got = 0;
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  while (*got < max) {
    n = pread(fd, buf + *got, max - *got, (off_t)(off + *got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    *got += (size_t)n;
  }
  return 0;
}

int agt_jail_log_read(agt_jail_t *j, uint64_t from, size_t max, char **data, size_t *len,
                      uint64_t *start, agt_error_t *err)
{
  uint64_t end = j->log.pos.base + j->log.pos.size;
  cleanup_free char *buf = NULL;
  size_t got = 0, n;

  if (from < j->log.pos.old_base)
    from = j->log.pos.old_base; /* older output was rotated away */
  if (from > end)
    from = end;
  *start = from;
  if (max > end - from)
    max = (size_t)(end - from);
  buf = xmalloc(max + 1);
  if (from < j->log.pos.base) {
    if (read_range(j->log_old_path, from - j->log.pos.old_base, max, buf, &n) < 0)
      return agt_error_make(err, errno, "read '%s'", j->log_old_path);
    got = n;
    if (got < max && from + got < j->log.pos.base) {
      /* the old file ended early (it was replaced): continue from the current file */
      from = j->log.pos.base;
      *start = from - got;
    }
  }
  if (got < max) {
    uint64_t off = from + got > j->log.pos.base ? from + got - j->log.pos.base : 0;
    if (read_range(j->log_path, off, max - got, buf + got, &n) < 0)
      return agt_error_make(err, errno, "read '%s'", j->log_path);
    got += n;
  }
  buf[got] = '\0';
  *len = got;
  *data = steal_pointer(&buf);
  return 0;
}

static int *open_flag(agt_jail_t *j, uv_stream_t *s)
{
  if (s == (uv_stream_t *)&j->out_pipe)
    return &j->out_open;
  if (s == (uv_stream_t *)&j->err_pipe)
    return &j->err_open;
  if (s == (uv_stream_t *)&j->tty_pipe)
    return &j->tty_open;
  return NULL;
}

static void stream_done(agt_jail_t *j, uv_stream_t *s)
{
  int *open = open_flag(j, s);

  uv_read_stop(s);
  if (open)
    *open = 0;
  j->streams_open--;
  close_handle(j, (uv_handle_t *)s);
}

/* libuv reports EOF on a terminal as soon as the hangup shows while its last read was
 * short, though the kernel may still be moving what the agent wrote last into the master's
 * buffer; a read flushes that first, and says EIO only once all is read.  So read to EIO. */
static void drain_terminal(agt_jail_t *j)
{
  char buf[16384];

  for (int i = 0; i < 1024; i++) {
    ssize_t n = read(j->tty_fd, buf, sizeof buf);
    if (n > 0)
      agt_jail_output(j, buf, (size_t)n);
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;
  }
}

static void output_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  agt_jail_t *j = s->data;

  if (n > 0) {
    agt_jail_output(j, buf->base, (size_t)n);
    return;
  }
  if (n < 0) {
    /* EOF, or EIO from a terminal whose last user is gone */
    if (s == (uv_stream_t *)&j->tty_pipe && j->tty_fd >= 0)
      drain_terminal(j);
    stream_done(j, s);
  }
}

void agt_jail_output_pause(agt_jail_t *j, int pause)
{
  uv_stream_t *outs[3] = {(uv_stream_t *)&j->out_pipe, (uv_stream_t *)&j->err_pipe,
                          (uv_stream_t *)&j->tty_pipe};

  if (j->output_paused == pause)
    return;
  j->output_paused = pause;
  for (int i = 0; i < 3; i++) {
    int *open = open_flag(j, outs[i]);
    if (!*open)
      continue;
    if (pause)
      uv_read_stop(outs[i]);
    else
      uv_read_start(outs[i], agtd_read_buffer, output_cb);
  }
}

/* The jail sends its terminal's master side over the console socket before the agent's
 * exec, so it is waiting there by the time the exec is confirmed. */
static int take_terminal(agt_jail_t *j, agt_error_t *err)
{
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm;
  int fd = -1, r;

  if (recvmsg(j->console_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) < 1)
    return agt_error_make(err, errno ? errno : EPROTO, "receive the terminal of jail '%s'",
                          j->name);
  cm = CMSG_FIRSTHDR(&mh);
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  close(j->console_fd);
  j->console_fd = -1;
  if (fd < 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "jail '%s' sent no terminal", j->name);
  j->tty_fd = fd;
  uv_pipe_init(j->d->loop, &j->tty_pipe, 0);
  j->tty_pipe.data = j;
  j->handles_open++;
  r = uv_pipe_open(&j->tty_pipe, fd);
  if (r == 0)
    r = uv_read_start((uv_stream_t *)&j->tty_pipe, agtd_read_buffer, output_cb);
  if (r < 0) {
    close_handle(j, (uv_handle_t *)&j->tty_pipe);
    return agt_error_kind(err, AGT_E_INTERNAL, "read the terminal of jail '%s': %s", j->name,
                          uv_strerror(r));
  }
  j->tty_open = 1;
  j->streams_open++;
  if (j->output_paused)
    uv_read_stop((uv_stream_t *)&j->tty_pipe);
  return 0;
}

static void status_eof(agt_jail_t *j)
{
  if (j->status_len >= sizeof(struct agt_setup_error)) {
    struct agt_setup_error e;
    agt_error_t err = NULL;

    memcpy(&e, j->status_buf, sizeof e);
    e.step[sizeof e.step - 1] = '\0';
    agt_error_make(&err, e.errnum, "start jail '%s': %s", j->name, e.step);
    free(j->exit_reason);
    j->exit_reason = xstrdup(err->msg);
    agtd_log("%s", err->msg);
    /* jail.run removes a jail that never started, and answers once it is gone. */
    if (j->rm_if_no_start)
      j->rm_on_exit = 1;
    else
      agt_pending_answer(&j->start_waiters, NULL, err);
    agt_error_release(&err);
    return;
  }
  j->rm_if_no_start = 0;
  j->exec_ns = agt_now_ns();
  if (j->console_fd >= 0) {
    agt_error_t err = NULL;
    if (take_terminal(j, &err) < 0) {
      agtd_log("%s", err->msg);
      agt_error_release(&err);
    }
  }
  if (j->state == AGT_JAIL_STARTING)
    j->state = AGT_JAIL_RUNNING;
  {
    json_t *info = agt_jail_to_json(j, 0);
    if (j->start_request_ns)
      json_object_set_new(info, "start_ms",
                          json_real((double)(j->exec_ns - j->start_request_ns) / 1e6));
    json_object_set_new(info, "warm", json_boolean(j->started_warm));
    if (j->started_warm)
      agt_warm_refill(j->d);
    agt_pending_answer(&j->start_waiters, info, NULL);
    json_decref(info);
  }
  /* The start is over once it is answered: the rest at normal priority, behind the agent
   * (which its init has taken back to normal priority already; this makes sure). */
  agt_start_prio_exec(j->d, j);
  j->start_request_ns = 0;
  agt_start_prio_settle(j->d);
  agt_jail_save(j, NULL);
}

static void status_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  agt_jail_t *j = s->data;

  if (n > 0) {
    size_t room = sizeof j->status_buf - j->status_len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(j->status_buf + j->status_len, buf->base, take);
    j->status_len += take;
    return;
  }
  if (n < 0) {
    status_eof(j);
    stream_done(j, s);
  }
}

static void pidfd_cb(uv_poll_t *p, int status, int events)
{
  agt_jail_t *j = p->data;
  siginfo_t info;

  (void)status;
  (void)events;
  memset(&info, 0, sizeof info);
  if (syscall(SYS_waitid, P_PIDFD, j->pidfd, &info, WEXITED | WNOHANG, NULL) < 0) {
    if (errno == EAGAIN)
      return;
    agtd_log("jail '%s': waitid: %s", j->name, strerror(errno));
  } else if (info.si_pid == 0) {
    return; /* not yet */
  }
  if (info.si_code == CLD_EXITED) {
    j->exit_code = info.si_status;
  } else {
    j->exit_signal = info.si_status;
    j->exit_code = 128 + info.si_status;
  }
  j->exited_seen = 1;
  j->finished = time(NULL);
  uv_poll_stop(p);
  close_handle(j, (uv_handle_t *)p);
  uv_timer_stop(&j->stop_timer);
}

int agt_jail_supervise(agt_jail_t *j, int out_fd, int err_fd, int status_fd, agt_error_t *err)
{
  uv_loop_t *loop = j->d->loop;
  struct {
    uv_pipe_t *pipe;
    int fd;
    uv_read_cb cb;
  } streams[3] = {
      {&j->out_pipe, out_fd, output_cb},
      {&j->err_pipe, err_fd, output_cb},
      {&j->status_pipe, status_fd, status_cb},
  };
  int r;

  j->streams_open = 0;
  for (int i = 0; i < 3; i++) {
    if (streams[i].fd < 0)
      continue; /* a jail on a terminal has no output pipes */
    uv_pipe_init(loop, streams[i].pipe, 0);
    streams[i].pipe->data = j;
    j->handles_open++;
    r = uv_pipe_open(streams[i].pipe, streams[i].fd);
    if (r == 0)
      r = uv_read_start((uv_stream_t *)streams[i].pipe, agtd_read_buffer, streams[i].cb);
    if (r < 0) {
      close(streams[i].fd);
      close_handle(j, (uv_handle_t *)streams[i].pipe);
      agt_error_kind(err, AGT_E_INTERNAL, "watch jail '%s' output: %s", j->name, uv_strerror(r));
      continue;
    }
    j->streams_open++;
    if (i < 2)
      *open_flag(j, (uv_stream_t *)streams[i].pipe) = 1;
  }
  uv_poll_init(loop, &j->pidfd_poll, j->pidfd);
  j->pidfd_poll.data = j;
  j->handles_open++;
  r = uv_poll_start(&j->pidfd_poll, UV_READABLE, pidfd_cb);
  if (r < 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "watch jail '%s': %s", j->name, uv_strerror(r));
  return *err ? -1 : 0;
}

static void cgroup_retry_cb(uv_timer_t *t);

static void cleanup_cgroup(agt_jail_t *j)
{
  agt_error_t err = NULL;

  if (agt_cgroup_destroy(&j->d->cgroup, j->name, &err) == 0) {
    j->cgroup_pending = 0;
    agt_jail_maybe_free(j);
    return;
  }
  if (err->kind != AGT_E_BUSY || j->cgroup_pending > 200)
    agtd_log("jail '%s': %s", j->name, err->msg);
  agt_error_release(&err);
  j->cgroup_pending++;
  j->stop_timer.data = j;
  uv_timer_start(&j->stop_timer, cgroup_retry_cb, 10, 0);
}

static void cgroup_retry_cb(uv_timer_t *t)
{
  cleanup_cgroup(t->data);
}

void agt_jail_run_finished(agt_jail_t *j)
{
  struct agtd_s *d = j->d;
  json_t *info;

  close(j->pidfd);
  j->pidfd = -1;
  j->pid = 0;
  j->tty_fd = -1; /* closed with tty_pipe */
  if (j->console_fd >= 0)
    close(j->console_fd);
  j->console_fd = -1;
  j->output_paused = 0;
  agt_egress_stop(j->egress);
  j->egress = NULL;
  if (j->state == AGT_JAIL_STARTING && j->status_len == 0 && !j->exit_reason)
    j->exit_reason = xstrdup("the jail exited before its agent started");
  j->state = AGT_JAIL_EXITED;
  agt_outlog_close(&j->log);
  agtd_log("jail '%s' exited: code %d%s%s", j->name, j->exit_code, j->exit_reason ? ", " : "",
           j->exit_reason ? j->exit_reason : "");
  info = agt_jail_to_json(j, 0);
  j->cgroup_pending = 1;
  if (j->rm_on_exit) {
    agt_error_t err = NULL;
    if (agt_jail_remove(j, &err) < 0) {
      agt_pending_answer(&j->exit_waiters, NULL, err);
      agt_error_release(&err);
    } else {
      json_object_set_new(info, "removed", json_true());
    }
  } else {
    agt_jail_save(j, NULL);
  }
  agt_pending_answer(&j->exit_waiters, info, NULL);
  agt_jail_streams_end(j, info);
  json_decref(info);
  if (j->start_waiters) {
    agt_error_t err = NULL;
    agt_error_kind(&err, AGT_E_STATE, "%s",
                   j->exit_reason ? j->exit_reason : "the jail exited before its agent started");
    agt_pending_answer(&j->start_waiters, NULL, err);
    agt_error_release(&err);
  }
  cleanup_cgroup(j);
  agt_start_prio_settle(d);
}
