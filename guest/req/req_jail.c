/* jail.* requests */
#include "req_jail.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "jail.h"
#include "server.h"
#include "jail_exec.h"
#include "jail_usage.h"
#include "jail_warm.h"
#include "netns_pool.h"
#include "portfwd.h"
#include "start_prio.h"
#include "stream.h"
#include "xalloc.h"

#define LOGS_MAX_CHUNK (512u * 1024) /* base64 of this fits a frame */

static int find(agt_req_t *req, agt_jail_t **out, agt_error_t *err)
{
  const char *name;

  if (agt_param_str(req->params, "name", 1, &name, err) < 0)
    return -1;
  *out = agt_jail_find(req->d, name);
  if (*out == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND, "no jail named '%.64s'", name);
  return 0;
}

static int start_and_wait(agt_req_t *req, agt_jail_t *j, uint64_t t0, agt_error_t *err)
{
  agt_start_prio_boost(req->d);
  j->run.start_request_ns = t0;
  if (agt_jail_start(j, err) < 0) {
    j->run.start_request_ns = 0;
    agt_start_prio_settle(req->d);
    return -1;
  }
  agt_pending_add(&j->out.start_waiters, req);
  return 1;
}

int agt_req_jail_create(agt_req_t *req, json_t **result, agt_error_t *err)
{
  agt_jail_t *j;

  if (agt_jail_create(req->d, req->params, &j, err) < 0)
    return -1;
  *result = agt_jail_to_json(j, 0);
  return 0;
}

int agt_req_jail_run(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t t0 = agt_now_ns();
  agt_jail_t *j;
  int r;

  (void)result;
  agt_start_prio_boost(req->d); /* from the request on (start_prio.h) */
  if (agt_jail_create_for_run(req->d, req->params, &agt_warm_for_run, &j, err) < 0) {
    agt_start_prio_settle(req->d);
    return -1;
  }
  j->run.rm_if_no_start = 1; /* a jail that cannot start is not left behind */
  r = start_and_wait(req, j, t0, err);
  if (r < 0) {
    agt_error_t e2 = NULL;
    agt_jail_remove(j, &e2); /* a jail that cannot start is not left behind */
    agt_error_release(&e2);
  }
  return r;
}

int agt_req_jail_start(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t t0 = agt_now_ns();
  agt_jail_t *j;

  (void)result;
  if (find(req, &j, err) < 0 ||
      agt_jail_secrets_again(j, json_object_get(req->params, "secrets"), err) < 0)
    return -1;
  return start_and_wait(req, j, t0, err);
}

int agt_req_jail_stop(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t grace = 10000;
  agt_jail_t *j;

  (void)result;
  if (find(req, &j, err) < 0 || agt_param_u64(req->params, "grace_ms", 0, &grace, err) < 0)
    return -1;
  if (grace > 3600 * 1000)
    return agt_error_kind(err, AGT_E_INVALID, "grace_ms is at most an hour");
  if (agt_jail_stop(j, grace, err) < 0)
    return -1;
  agt_pending_add(&j->out.exit_waiters, req);
  return 1;
}

int agt_req_jail_kill(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t sig = SIGKILL;
  agt_jail_t *j;

  if (find(req, &j, err) < 0 || agt_param_u64(req->params, "signal", 0, &sig, err) < 0)
    return -1;
  if (sig == 0 || sig >= NSIG)
    return agt_error_kind(err, AGT_E_INVALID, "signal %llu is out of range",
                          (unsigned long long)sig);
  if (agt_jail_kill(j, (int)sig, err) < 0)
    return -1;
  *result = agt_jail_to_json(j, 0);
  return 0;
}

int agt_req_jail_rm(agt_req_t *req, json_t **result, agt_error_t *err)
{
  int force = 0;
  agt_jail_t *j;

  if (find(req, &j, err) < 0 || agt_param_bool(req->params, "force", &force, err) < 0)
    return -1;
  if (j->rec.state != AGT_JAIL_CREATED && j->rec.state != AGT_JAIL_EXITED) {
    if (!force)
      return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: stop it first, or use force",
                            j->rec.name, agt_jail_state_name(j->rec.state));
    j->run.rm_on_exit = 1;
    if (agt_jail_kill(j, SIGKILL, err) < 0)
      return -1;
    agt_pending_add(&j->out.exit_waiters, req);
    return 1;
  }
  if (agt_jail_remove(j, err) < 0)
    return -1;
  *result = json_pack("{s:s, s:b}", "name", json_string_value(json_object_get(req->params, "name")),
                      "removed", 1);
  return 0;
}

/* The answer of jail.ls: with columns (n of them, numbered in idx), a table; else the short
 * forms.  The cgroup figures as last read (jail_usage.h). */
static json_t *ls_result(agtd_t *d, json_t *cols, const int *idx, size_t n)
{
  json_t *arr = json_array();

  for (agt_jail_t *j = d->jails; j; j = j->next)
    json_array_append_new(arr, cols ? agt_jail_row(j, idx, n) : agt_jail_listing_json(j));
  if (cols == NULL)
    return json_pack("{s:o}", "jails", arr);
  return json_pack("{s:O, s:o}", "columns", cols, "rows", arr);
}

/* A listing that waits for the figures of jails that have none yet. */
struct ls_wait {
  struct agt_usage_wait w; /* first */
  agtd_t *d;
  agt_client_t *client;
  uint64_t id;
  json_t *cols; /* NULL: the short forms */
  int idx[64];
  size_t n;
};

static void ls_ready(struct agt_usage_wait *w)
{
  struct ls_wait *l = (struct ls_wait *)w;
  json_t *result = ls_result(l->d, l->cols, l->idx, l->n);

  agt_reply(l->client, l->id, result);
  json_decref(result);
  json_decref(l->cols);
  agt_client_unref(l->client);
  free(l);
}

/* With "columns": a table, a row of those values per jail (as kubectl asks the API server
 * for a Table): what a listing shows and no more.  Without: each jail's short form.  The
 * cgroup figures are those last read, with their age; a listing that shows them and finds
 * a running jail with none yet waits, off the loop, for its read (jail_usage.h). */
int agt_req_jail_ls(agt_req_t *req, json_t **result, agt_error_t *err)
{
  json_t *cols = json_object_get(req->params, "columns"), *c;
  struct ls_wait *l = xzalloc(sizeof *l);
  int usage = cols == NULL;
  size_t i;

  if (cols && (!json_is_array(cols) || json_array_size(cols) == 0 ||
               json_array_size(cols) > sizeof l->idx / sizeof l->idx[0])) {
    free(l);
    return agt_error_kind(err, AGT_E_INVALID,
                          "jail.ls: 'columns' must be an array of 1 to %zu column names",
                          sizeof l->idx / sizeof l->idx[0]);
  }
  json_array_foreach(cols, i, c)
  {
    const char *name = json_string_value(c);
    if ((l->idx[l->n++] = name ? agt_jail_column(name) : -1) < 0) {
      cleanup_free char *known = NULL;
      for (const char *const *k = agt_jail_columns(); *k; k++) {
        char *more = xasprintf("%s%s%s", known ? known : "", known ? ", " : "", *k);
        free(known);
        known = more;
      }
      free(l);
      return agt_error_kind(err, AGT_E_INVALID, "jail.ls: columns[%zu]: %s%s%s is no column (%s)",
                            i, name ? "'" : "", name ? name : "not a string", name ? "'" : "",
                            known);
    }
    usage = usage || agt_jail_column_is_usage(l->idx[l->n - 1]);
  }
  l->w.ready = ls_ready;
  if (usage && agt_usage_for_listing(req->d->usage, &l->w) == 1) {
    l->d = req->d;
    l->client = req->client;
    l->id = req->id;
    l->cols = cols ? json_incref(cols) : NULL;
    agt_client_ref(req->client);
    return 1;
  }
  *result = ls_result(req->d, cols, l->idx, l->n);
  free(l);
  return 0;
}

int agt_req_jail_inspect(agt_req_t *req, json_t **result, agt_error_t *err)
{
  agt_jail_t *j;

  if (find(req, &j, err) < 0)
    return -1;
  *result = agt_jail_to_json(j, 1);
  return 0;
}

static int has_writer(agt_jail_t *j)
{
  for (struct agt_stream_s *s = j->out.streams; s; s = s->next)
    if (s->writer)
      return 1;
  return 0;
}

/* The first line that starts at or after off (off itself when the byte before it ends a
 * line, or when no line end comes within a chunk). */
static uint64_t line_start(agt_jail_t *j, uint64_t off, uint64_t end)
{
  cleanup_free char *data = NULL;
  uint64_t start;
  size_t len;
  agt_error_t e = NULL;
  char *nl;

  if (off == 0 || off >= end)
    return off;
  if (agt_jail_log_read(j, off - 1, LOGS_MAX_CHUNK, &data, &len, &start, &e) < 0) {
    agt_error_release(&e);
    return off;
  }
  if (start != off - 1 || len == 0 || data[0] == '\n')
    return off;
  nl = memchr(data, '\n', len);
  return nl ? start + (uint64_t)(nl - data) + 1 : off;
}

/* The log's times for [from, to): [[offset, ns], ...], the first dating the bytes at from. */
static json_t *log_times(agt_jail_t *j, uint64_t from, uint64_t to)
{
  struct agt_outlog_time *t = NULL;
  size_t n = agt_outlog_times(j->rec.log_path, j->rec.log_old_path, from, to, &t);
  json_t *a = json_array();

  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_pack("[I, I]", (json_int_t)t[i].off, (json_int_t)t[i].ns));
  free(t);
  return a;
}

int agt_req_jail_logs(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t offset = 0, max = LOGS_MAX_CHUNK, start, since = 0, until = 0, end, stop;
  int follow = 0, times = 0;
  agt_jail_t *j;
  char *data, *b64;
  size_t len;

  if (find(req, &j, err) < 0 || agt_param_u64(req->params, "offset", 0, &offset, err) < 0 ||
      agt_param_u64(req->params, "max", 0, &max, err) < 0 ||
      agt_param_u64(req->params, "since_ns", 0, &since, err) < 0 ||
      agt_param_u64(req->params, "until_ns", 0, &until, err) < 0 ||
      agt_param_bool(req->params, "times", &times, err) < 0 ||
      agt_param_bool(req->params, "follow", &follow, err) < 0)
    return -1;
  if (since > INT64_MAX || until > INT64_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "since_ns and until_ns are nanoseconds since 1970");
  /* since and until by the log's index of times (outlog.h), at whole lines: a line belongs
   * to the time it started */
  end = j->out.log.pos.base + j->out.log.pos.size;
  if (since)
    offset = line_start(
        j, agt_outlog_offset_at(j->rec.log_path, j->rec.log_old_path, (int64_t)since, end), end);
  stop = end;
  if (until)
    stop = line_start(
        j, agt_outlog_offset_at(j->rec.log_path, j->rec.log_old_path, (int64_t)until + 1, end),
        end);
  if (follow && j->rec.state != AGT_JAIL_EXITED) {
    /* A stream from offset: the log's content, then live output, with nothing lost. */
    json_t *reply;
    if (offset < j->out.log.pos.old_base)
      offset = j->out.log.pos.old_base;
    reply = json_pack("{s:s, s:b, s:I}", "name", j->rec.name, "follow", 1, "offset",
                      (json_int_t)offset);
    agt_reply(req->client, req->id, reply);
    json_decref(reply);
    agt_stream_open(j, req->client, AGT_STREAM_FOLLOW, offset, 0);
    return 1;
  }
  if (max > LOGS_MAX_CHUNK)
    max = LOGS_MAX_CHUNK;
  if (offset >= stop)
    max = 0;
  else if (max > stop - offset)
    max = stop - offset;
  if (agt_jail_log_read(j, offset, (size_t)max, &data, &len, &start, err) < 0)
    return -1;
  b64 = agt_base64_encode(data, len);
  free(data);
  *result = json_pack("{s:s, s:I, s:I, s:I, s:s}", "data_b64", b64, "offset", (json_int_t)start,
                      "next", (json_int_t)(start + len), "end", (json_int_t)end, "state",
                      agt_jail_state_name(j->rec.state));
  free(b64);
  if (until)
    json_object_set_new(*result, "stop", json_integer((json_int_t)stop));
  if (times)
    json_object_set_new(*result, "times", log_times(j, start, start + len));
  return 0;
}

int agt_req_jail_wait(agt_req_t *req, json_t **result, agt_error_t *err)
{
  agt_jail_t *j;

  if (find(req, &j, err) < 0)
    return -1;
  if (j->rec.state == AGT_JAIL_EXITED || j->rec.state == AGT_JAIL_CREATED) {
    *result = agt_jail_to_json(j, 0);
    return 0;
  }
  agt_pending_add(&j->out.exit_waiters, req);
  return 1;
}

/* The jail's network log from a byte offset: one JSON object a line. */
int agt_req_jail_net(agt_req_t *req, json_t **result, agt_error_t *err)
{
  uint64_t offset = 0;
  agt_jail_t *j;
  FILE *f;
  char *buf;
  size_t n = 0;
  json_t *lines = json_array();
  long end = 0;

  if (find(req, &j, err) < 0 || agt_param_u64(req->params, "offset", 0, &offset, err) < 0) {
    json_decref(lines);
    return -1;
  }
  f = fopen(j->rec.net_log_path, "re");
  if (f) {
    buf = xmalloc(LOGS_MAX_CHUNK + 1);
    if (fseek(f, (long)offset, SEEK_SET) == 0)
      n = fread(buf, 1, LOGS_MAX_CHUNK, f);
    fseek(f, 0, SEEK_END);
    end = ftell(f);
    fclose(f);
    buf[n] = '\0';
    /* whole lines only; a partial last line is read again next time */
    {
      char *line = buf, *nl;
      while ((nl = strchr(line, '\n')) != NULL) {
        json_t *o;
        *nl = '\0';
        o = json_loads(line, 0, NULL);
        if (o)
          json_array_append_new(lines, o);
        line = nl + 1;
      }
      n = (size_t)(line - buf);
    }
    free(buf);
  }
  *result =
      json_pack("{s:o, s:I, s:I, s:s, s:s}", "entries", lines, "next", (json_int_t)(offset + n),
                "end", (json_int_t)end, "state", agt_jail_state_name(j->rec.state), "mode",
                agt_net_mode_name(j->rec.net.mode));
  return 0;
}

/* jail.attach {name, write, size}: the connection becomes a stream of the jail's terminal
 * (or output).  jail.logs with follow does the same from a log offset. */
int agt_req_jail_attach(agt_req_t *req, json_t **result, agt_error_t *err)
{
  int write = 1;
  agt_jail_t *j;
  json_t *reply;

  if (find(req, &j, err) < 0 || agt_param_bool(req->params, "write", &write, err) < 0)
    return -1;
  if (j->rec.state != AGT_JAIL_RUNNING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s: only a running jail can be attached",
                          j->rec.name, agt_jail_state_name(j->rec.state));
  reply = json_pack("{s:s, s:b, s:b}", "name", j->rec.name, "tty", j->rec.tty, "writer",
                    write && j->rec.tty && !has_writer(j));
  agt_reply(req->client, req->id, reply);
  json_decref(reply);
  agt_stream_open(j, req->client, AGT_STREAM_ATTACH, 0, write);
  (void)result;
  return 1;
}

/* jail.port {name, port}: the connection becomes a raw relay to 127.0.0.1:port inside the
 * jail, answered once the jail's side has connected. */
int agt_req_jail_port(agt_req_t *req, json_t **result, agt_error_t *err)
{
  struct agt_portfwd_target target;
  uint64_t port = 0;
  agt_jail_t *j;

  (void)result;
  if (find(req, &j, err) < 0 || agt_param_u64(req->params, "port", 1, &port, err) < 0)
    return -1;
  if (port == 0 || port > 65535)
    return agt_error_kind(err, AGT_E_INVALID, "port %llu is out of range",
                          (unsigned long long)port);
  if (j->rec.state != AGT_JAIL_RUNNING)
    return agt_error_kind(err, AGT_E_STATE, "jail '%s' is %s", j->rec.name,
                          agt_jail_state_name(j->rec.state));
  target.loop = j->d->loop;
  target.name = j->rec.name;
  target.pid = j->run.pid;
  target.home_netns = j->d->netns->home_fd;
  if (agt_portfwd_open(&target, req->client, req->id, (unsigned)port, err) < 0)
    return -1;
  return 1;
}

/* jail.exec {name, argv}: answered at once with the command's pid; then the connection
 * streams its output and ends with its exit code. */
int agt_req_jail_exec(agt_req_t *req, json_t **result, agt_error_t *err)
{
  agt_jail_t *j;

  (void)result;
  if (find(req, &j, err) < 0 || agt_jail_exec(j, req->client, req->id, req->params, err) < 0)
    return -1;
  return 1;
}
