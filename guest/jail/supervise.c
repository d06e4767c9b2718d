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
#include "clock.h"
#include "daemon.h"
#include "jail.h"
#include "jail_keep.h"
#include "jail_setup.h"
#include "log.h"
#include "readbuf.h"
#include "server.h"
#include "start_prio.h"
#include "xalloc.h"

static void handle_closed(uv_handle_t *h)
{
  agt_jail_t *j = h->data;

  j->run.handles_open--;
  if (j->d->shutting_down)
    return;
  if (j->run.handles_open == 0 && j->run.exited_seen && j->run.streams_open == 0)
    agt_jail_run_finished(j);
}

static void close_handle(agt_jail_t *j, uv_handle_t *h)
{
  if (!uv_is_closing(h)) {
    h->data = j;
    uv_close(h, handle_closed);
  }
}

/* The log as its keeper writes it (outlog.h), up to the position agtd knows of. */
int agt_jail_log_read(agt_jail_t *j, uint64_t from, size_t max, char **data, size_t *len,
                      uint64_t *start, agt_error_t *err)
{
  uint64_t end = j->out.log.pos.base + j->out.log.pos.size, oldest;
  cleanup_free char *buf = NULL;
  struct agt_outlog_snap snap;
  size_t got = 0;

  agt_outlog_snapshot(j->rec.log_path, j->rec.log_old_path, &snap);
  oldest = snap.old_fd >= 0 ? snap.old_base : snap.fd >= 0 ? snap.base : end;
  if (from < oldest)
    from = oldest; /* older output was rotated away */
  if (from > end)
    from = end;
  if (max > end - from)
    max = (size_t)(end - from);
  buf = xmalloc(max + 1);
  while (got < max) {
    ssize_t n = agt_outlog_pread(&snap, from + got, buf + got, max - got);
    if (n < 0) {
      int e = errno;
      agt_outlog_snap_close(&snap);
      return agt_error_make(err, e, "read '%s'", j->rec.log_path);
    }
    if (n == 0 && got == 0 && snap.fd >= 0 && from < snap.base) {
      /* the old file was replaced meanwhile: on from the current file's first byte */
      from = snap.base;
      if (max > end - from)
        max = (size_t)(end - from);
      continue;
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  agt_outlog_snap_close(&snap);
  buf[got] = '\0';
  *start = from;
  *len = got;
  *data = steal_pointer(&buf);
  return 0;
}

static void keep_cb(uv_poll_t *p, int status, int events);

void agt_jail_output_pause(agt_jail_t *j, int pause)
{
  if (j->out.paused == pause)
    return;
  j->out.paused = pause;
  if (!j->run.keep_open)
    return;
  /* Not reading from the keeper: it stops reading the jail's output once its record waits. */
  if (pause)
    uv_poll_stop(&j->run.keep_poll);
  else
    uv_poll_start(&j->run.keep_poll, UV_READABLE, keep_cb);
}

/* The terminal's master, from the keeper: agtd writes the attached client's input to it and
 * sets its size; the keeper reads it. */
static void take_terminal(agt_jail_t *j, int fd)
{
  int r;

  if (j->out.tty_open) {
    close(fd);
    return;
  }
  j->out.tty_fd = fd;
  uv_pipe_init(j->d->loop, &j->out.tty_pipe, 0);
  j->out.tty_pipe.data = j;
  j->run.handles_open++;
  r = uv_pipe_open(&j->out.tty_pipe, fd);
  if (r < 0) {
    agt_log_warning("jail '%s': write to its terminal: %s", j->rec.name, uv_strerror(r));
    close(fd);
    j->out.tty_fd = -1;
    close_handle(j, (uv_handle_t *)&j->out.tty_pipe);
    return;
  }
  j->out.tty_open = 1;
}

/* The keeper's record of the exit; when it died without one, the jail died with it. */
static void set_exit(agt_jail_t *j, int code, int sig, int64_t finished)
{
  j->rec.exit_code = code;
  j->rec.exit_signal = sig;
  j->rec.finished = (time_t)finished;
  j->run.exited_seen = 1;
  uv_timer_stop(&j->run.stop_timer);
}

static void keeper_done(agt_jail_t *j)
{
  if (!j->run.exited_seen) {
    int code, sig;
    int64_t finished;
    if (agt_keep_read_exit(j->rec.dir, &code, &sig, &finished) == 0) {
      set_exit(j, code, sig, finished);
    } else {
      set_exit(j, 128 + SIGKILL, SIGKILL, (int64_t)time(NULL));
      free(j->rec.exit_reason);
      j->rec.exit_reason = xstrdup("its keeper died");
    }
  }
  if (!j->run.keep_open)
    return;
  j->run.keep_open = 0;
  uv_poll_stop(&j->run.keep_poll);
  close_handle(j, (uv_handle_t *)&j->run.keep_poll);
  close(j->run.keep_fd); /* the keeper exits once it sees this */
  j->run.keep_fd = -1;
  if (j->out.tty_open) {
    j->out.tty_open = 0;
    close_handle(j, (uv_handle_t *)&j->out.tty_pipe);
  }
  j->run.streams_open--;
}

static void keep_cb(uv_poll_t *p, int status, int events)
{
  agt_jail_t *j = p->data;
  static char data[AGT_KEEP_DATA_MAX];

  (void)status;
  (void)events;
  while (j->run.keep_open && !j->out.paused) {
    struct agt_keep_hdr h;
    int fds[2];
    int r = agt_keep_recv(j->run.keep_fd, &h, data, fds);

    if (r == 0)
      return;
    if (r < 0) {
      if (errno != EPIPE && errno != ECONNRESET)
        agt_log_warning("jail '%s': its keeper: %s", j->rec.name, strerror(errno));
      keeper_done(j);
      return;
    }
    switch (h.type) {
    case AGT_KEEP_OUT:
      j->out.log.pos.base = h.base;
      j->out.log.pos.size = h.size;
      j->out.log.pos.old_base = h.old_base;
      if (j->d->output_watch)
        j->d->output_watch->output(j, data, h.len);
      break;
    case AGT_KEEP_TTY:
      if (fds[0] >= 0)
        take_terminal(j, fds[0]);
      fds[0] = -1;
      break;
    case AGT_KEEP_EXIT_MSG:
      set_exit(j, h.code, h.signal, h.finished);
      keeper_done(j);
      break;
    default:
      break;
    }
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0)
        close(fds[i]);
  }
}

int agt_jail_adopt(agt_jail_t *j, int keep_fd, const struct agt_keep_hdr *h, int fds[2],
                   agt_error_t *err)
{
  j->run.pid = h->pid;
  j->run.pidfd = fds[0];
  fds[0] = -1;
  j->rec.state = AGT_JAIL_RUNNING; /* a stop or start in progress ended with the last agtd */
  j->out.log.pos.base = h->base;
  j->out.log.pos.size = h->size;
  j->out.log.pos.old_base = h->old_base;
  j->run.exited_seen = 0;
  if (agt_jail_supervise(j, keep_fd, -1, -1, err) < 0)
    return -1;
  if (fds[1] >= 0)
    take_terminal(j, fds[1]);
  fds[1] = -1;
  if (h->exited) {
    set_exit(j, h->code, h->signal, h->finished);
    keeper_done(j);
    return 0;
  }
  /* What the terminal showed lately, for attach: the log's tail. */
  if (j->rec.tty) {
    uint64_t end = j->out.log.pos.base + j->out.log.pos.size, start;
    uint64_t from = end > AGT_SCREEN_MAX ? end - AGT_SCREEN_MAX : 0;
    char *data;
    size_t len;
    if (agt_jail_log_read(j, from, AGT_SCREEN_MAX, &data, &len, &start, NULL) == 0) {
      free(j->out.screen);
      j->out.screen = xmalloc(AGT_SCREEN_MAX);
      memcpy(j->out.screen, data, len);
      j->out.screen_len = len;
      free(data);
    }
  }
  return 0;
}

/* A keeper that is agtd's child (it started the jail) is reaped by agtd once it exits. */
static void keeper_exit_cb(uv_poll_t *p, int status, int events)
{
  agt_jail_t *j = p->data;
  siginfo_t info;

  (void)status;
  (void)events;
  memset(&info, 0, sizeof info);
  if (syscall(SYS_waitid, P_PIDFD, j->run.keeper_pidfd, &info, WEXITED | WNOHANG, NULL) == 0 &&
      info.si_pid == 0)
    return; /* not yet */
  uv_poll_stop(p);
  close_handle(j, (uv_handle_t *)p);
}

static void status_eof(agt_jail_t *j)
{
  if (j->run.status_len >= sizeof(struct agt_setup_error)) {
    struct agt_setup_error e;
    agt_error_t err = NULL;

    memcpy(&e, j->run.status_buf, sizeof e);
    e.step[sizeof e.step - 1] = '\0';
    agt_error_make(&err, e.errnum, "start jail '%s': %s", j->rec.name, e.step);
    free(j->rec.exit_reason);
    j->rec.exit_reason = xstrdup(err->msg);
    agt_log_warning("%s", err->msg);
    /* jail.run removes a jail that never started, and answers once it is gone. */
    if (j->run.rm_if_no_start)
      j->run.rm_on_exit = 1;
    else
      agt_pending_answer(&j->out.start_waiters, NULL, err);
    agt_error_release(&err);
    agt_jail_release_init(j);
    return;
  }
  j->run.rm_if_no_start = 0;
  j->run.exec_ns = agt_now_ns();
  if (j->rec.state == AGT_JAIL_STARTING)
    j->rec.state = AGT_JAIL_RUNNING;
  {
    json_t *info = agt_jail_to_json(j, 0);
    if (j->run.start_request_ns)
      json_object_set_new(info, "start_ms",
                          json_real((double)(j->run.exec_ns - j->run.start_request_ns) / 1e6));
    json_object_set_new(info, "warm", json_boolean(j->run.started_warm));
    if (j->run.on_started)
      j->run.on_started(j);
    agt_pending_answer(&j->out.start_waiters, info, NULL);
    json_decref(info);
  }
  /* The start is over once it is answered: the rest at normal priority, behind the agent
   * (which its init has taken back to normal priority already; this makes sure). */
  agt_start_prio_exec(j->d, j);
  j->run.start_request_ns = 0;
  agt_start_prio_settle(j->d);
  agt_jail_save(j, NULL);
  /* Only now does the init become agt-init (jail_setup.h): dropping its copy of agtd's memory
   * took the CPUs from agtd's answer and the agent's first steps on a small machine. */
  agt_jail_release_init(j);
}

static void status_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  agt_jail_t *j = s->data;

  if (n > 0) {
    size_t room = sizeof j->run.status_buf - j->run.status_len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(j->run.status_buf + j->run.status_len, buf->base, take);
    j->run.status_len += take;
    return;
  }
  if (n < 0) {
    status_eof(j);
    uv_read_stop(s);
    j->run.streams_open--;
    close_handle(j, (uv_handle_t *)s);
  }
}

int agt_jail_supervise(agt_jail_t *j, int keep_fd, int keeper_pidfd, int status_fd,
                       agt_error_t *err)
{
  uv_loop_t *loop = j->d->loop;
  int r;

  j->run.streams_open = 0;
  j->run.keep_fd = keep_fd;
  j->run.keeper_pidfd = keeper_pidfd;
  uv_poll_init(loop, &j->run.keep_poll, keep_fd);
  j->run.keep_poll.data = j;
  j->run.handles_open++;
  j->run.keep_open = 1;
  j->run.streams_open++;
  r = uv_poll_start(&j->run.keep_poll, UV_READABLE, keep_cb);
  if (r < 0) {
    keeper_done(j);
    return agt_error_kind(err, AGT_E_INTERNAL, "watch the keeper of jail '%s': %s", j->rec.name,
                          uv_strerror(r));
  }
  if (j->out.paused)
    uv_poll_stop(&j->run.keep_poll);
  if (keeper_pidfd >= 0) {
    uv_poll_init(loop, &j->run.pidfd_poll, keeper_pidfd);
    j->run.pidfd_poll.data = j;
    j->run.handles_open++;
    uv_poll_start(&j->run.pidfd_poll, UV_READABLE, keeper_exit_cb);
  }
  if (status_fd >= 0) {
    uv_pipe_init(loop, &j->run.status_pipe, 0);
    j->run.status_pipe.data = j;
    j->run.handles_open++;
    r = uv_pipe_open(&j->run.status_pipe, status_fd);
    if (r == 0)
      r = uv_read_start((uv_stream_t *)&j->run.status_pipe, agt_read_buffer, status_cb);
    if (r < 0) {
      close(status_fd);
      close_handle(j, (uv_handle_t *)&j->run.status_pipe);
      return agt_error_kind(err, AGT_E_INTERNAL, "watch the start of jail '%s': %s", j->rec.name,
                            uv_strerror(r));
    }
    j->run.streams_open++;
  }
  return 0;
}

static void cgroup_retry_cb(uv_timer_t *t);

static void cleanup_cgroup(agt_jail_t *j)
{
  agt_error_t err = NULL;

  if (agt_cgroup_destroy(j->d->cgroup, j->rec.name, &err) == 0) {
    j->run.cgroup_pending = 0;
    agt_jail_maybe_free(j);
    return;
  }
  if (err->kind != AGT_E_BUSY || j->run.cgroup_pending > 200)
    agt_log_warning("jail '%s': %s", j->rec.name, err->msg);
  agt_error_release(&err);
  j->run.cgroup_pending++;
  j->run.stop_timer.data = j;
  uv_timer_start(&j->run.stop_timer, cgroup_retry_cb, 10, 0);
}

static void cgroup_retry_cb(uv_timer_t *t)
{
  cleanup_cgroup(t->data);
}

void agt_jail_run_finished(agt_jail_t *j)
{
  struct agtd_s *d = j->d;
  json_t *info;

  close(j->run.pidfd);
  j->run.pidfd = -1;
  j->run.pid = 0;
  if (j->run.keeper_pidfd >= 0)
    close(j->run.keeper_pidfd);
  j->run.keeper_pidfd = -1;
  j->out.tty_fd = -1; /* closed with tty_pipe */
  j->out.paused = 0;
  agt_jail_release_init(j);
  agt_jail_stop_egress(j);
  if (j->rec.state == AGT_JAIL_STARTING && j->run.status_len == 0 && !j->rec.exit_reason)
    j->rec.exit_reason = xstrdup("the jail exited before its agent started");
  j->rec.state = AGT_JAIL_EXITED;
  agt_outlog_close(&j->out.log);
  agt_log_info("jail '%s' exited: code %d%s%s", j->rec.name, j->rec.exit_code,
               j->rec.exit_reason ? ", " : "", j->rec.exit_reason ? j->rec.exit_reason : "");
  info = agt_jail_to_json(j, 0);
  j->run.cgroup_pending = 1;
  if (j->run.rm_on_exit) {
    agt_error_t err = NULL;
    if (agt_jail_remove(j, &err) < 0) {
      agt_pending_answer(&j->out.exit_waiters, NULL, err);
      agt_error_release(&err);
    } else {
      json_object_set_new(info, "removed", json_true());
    }
  } else {
    agt_jail_save(j, NULL);
  }
  agt_pending_answer(&j->out.exit_waiters, info, NULL);
  if (j->d->output_watch)
    j->d->output_watch->end(j, info);
  json_decref(info);
  if (j->out.start_waiters) {
    agt_error_t err = NULL;
    agt_error_kind(&err, AGT_E_STATE, "%s",
                   j->rec.exit_reason ? j->rec.exit_reason
                                      : "the jail exited before its agent started");
    agt_pending_answer(&j->out.start_waiters, NULL, err);
    agt_error_release(&err);
  }
  cleanup_cgroup(j);
  agt_start_prio_settle(d);
}
