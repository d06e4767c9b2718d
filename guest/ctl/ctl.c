/* agtd ctl: a small client of agtd for use on the guest itself (by tests, and by a person
 * inside the VM).  One table of commands; each parses its own options from its own table. */
#include "ctl.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "cli.h"
#include "jailfmt.h"
#include "jailspec.h"
#include "port_relay.h"
#include "stream_relay.h"
#include "rpc.h"
#include "xalloc.h"

struct ctl {
  const char *socket;
  int json;
  int exit_code; /* what agtd ctl exits with, e.g. an attached jail's exit code */
  agt_rpc_t rpc;
  int connected;
};

/* agtd ctl's detach keys, docker's (agt's are the jail spec's default). */
#define CTL_DETACH_KEYS "ctrl-p,ctrl-q"

struct attach_args {
  int read_only;
  const char *keys;
};
static int attach_to(struct ctl *c, const char *name, struct attach_args *a, agt_error_t *err);

static int connect_agtd(struct ctl *c, agt_error_t *err)
{
  if (c->connected)
    return 0;
  if (agt_rpc_connect_unix(&c->rpc, c->socket, err) < 0)
    return -1;
  c->connected = 1;
  return 0;
}

static int call(struct ctl *c, const char *method, json_t *params, json_t **result,
                agt_error_t *err)
{
  int r;

  if (connect_agtd(c, err) < 0) {
    json_decref(params);
    return -1;
  }
  r = agt_rpc_call(&c->rpc, method, params, result, err);
  json_decref(params);
  return r;
}

static void print_json(json_t *v)
{
  char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
  if (s) {
    puts(s);
    free(s);
  }
}

/* Commands. */

static int cmd_hello(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  (void)argc;
  (void)argv;
  if (connect_agtd(c, err) < 0)
    return -1;
  if (c->json)
    print_json(c->rpc.hello);
  else
    printf("agtd %s, protocol %d\n",
           json_string_value(json_object_get(c->rpc.hello, "agtd_version")),
           (int)json_integer_value(json_object_get(c->rpc.hello, "version")));
  return 0;
}

static int cmd_status(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res;

  (void)argc;
  (void)argv;
  if (call(c, "daemon.status", NULL, &res, err) < 0)
    return -1;
  print_json(res);
  json_decref(res);
  return 0;
}

/* jail run|create: the jail spec's options, and --attach (agtd ctl's alone). */
struct create_opts {
  struct agt_run_opts run;
  int attach;
};

/* What agtd ctl says of an option's default: agtd's. */
#define RUN(ID, note) AGT_JAIL_RUN_OPT(ID, struct create_opts, run, note)
#define RUN_DEFAULT(ID) RUN(ID, " (" AGT_RUN_DEFAULT(ID) ")")

static const struct agt_opt create_opts[] = {
    RUN(NAME, " (required)"),
    RUN_DEFAULT(AGENT),
    RUN_DEFAULT(ROOTFS),
    RUN(LAYERS, ""),
    RUN(WORKSPACE, " (a new one under agtd's state)"),
    RUN(ENV, " (repeatable; NAME alone takes agtd ctl's own value of it)"),
    AGT_JAIL_LIMIT_OPTS_DEFAULT(struct create_opts, run.limits),
    RUN(TTY, " (attach to it with jail attach)"),
    AGT_OPT_BOOL(0, "attach", struct create_opts, attach,
                 "run only: attach to the jail once it runs (implies --tty)"),
    RUN_DEFAULT(NET),
    RUN(ALLOW, " (repeatable)"),
    RUN(HOME, ""),
    RUN(USER, ""),
    RUN(LOCKDOWN, ", no mounts"),
    RUN(MOUNTS, " (a guest path; repeatable)"),
    AGT_OPT_END,
};

static int create_or_run(struct ctl *c, const char *method, int argc, char **argv, agt_error_t *err)
{
  struct create_opts o;
  json_t *res, *params = json_object();
  int i, r;

  agt_jail_run_init(&o.run);
  o.run.env.from = "agtd ctl's environment";
  o.attach = 0;
  i = agt_opts_parse(argc, argv, create_opts, NULL, &o, err);
  if (i == -2) {
    agt_opts_usage(stdout, "agtd ctl jail run|create --name NAME [OPTIONS] [--] [ARGV...]",
                   "Create a jail (run also starts it and waits until its agent has exec'd).",
                   create_opts);
    r = 0;
    goto out;
  }
  if (i < 0) {
    r = -1;
    goto out;
  }
  if (o.attach)
    o.run.tty = 1;
  agt_jail_run_to_json(&o.run, params);
  if (i < argc) {
    json_t *a = json_array();
    for (; i < argc; i++)
      json_array_append_new(a, json_string(argv[i]));
    json_object_set_new(params, "argv", a);
  }
  if (o.attach && isatty(0)) {
    struct winsize ws;
    if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row)
      json_object_set_new(params, "size", json_pack("[i,i]", ws.ws_row, ws.ws_col));
  }
  r = call(c, method, json_incref(params), &res, err);
  if (r == 0 && o.attach && strcmp(method, "jail.run") == 0) {
    struct attach_args a = {0, CTL_DETACH_KEYS};
    int code = attach_to(c, json_string_value(json_object_get(res, "name")), &a, err);
    json_decref(res);
    if (code > 0)
      c->exit_code = code;
    r = code < 0 ? -1 : 0;
    goto out;
  }
  if (r == 0) {
    if (c->json) {
      print_json(res);
    } else {
      json_t *ms = json_object_get(res, "start_ms");
      printf("%s", json_string_value(json_object_get(res, "name")));
      if (ms)
        printf(" started in %.2f ms%s", json_real_value(ms),
               json_is_true(json_object_get(res, "warm")) ? " (a prepared jail)" : "");
      printf("\n");
    }
    json_decref(res);
  }
out:
  json_decref(params);
  agt_jail_run_release(&o.run);
  return r;
}

static int need_name(int argc, char **argv, const char *usage, agt_error_t *err)
{
  if (argc < 2 || argv[1][0] == '-')
    return agt_error_kind(err, AGT_E_INVALID, "usage: agtd ctl %s", usage);
  return 0;
}

static int simple(struct ctl *c, const char *method, json_t *params, agt_error_t *err)
{
  json_t *res;

  if (call(c, method, params, &res, err) < 0)
    return -1;
  if (c->json) {
    print_json(res);
  } else if (json_object_get(res, "start_ms")) {
    printf("%s started in %.2f ms%s\n", json_string_value(json_object_get(res, "name")),
           json_real_value(json_object_get(res, "start_ms")),
           json_is_true(json_object_get(res, "warm")) ? " (a prepared jail)" : "");
  } else if (json_object_get(res, "state")) {
    json_t *code = json_object_get(res, "exit_code");
    printf("%s: %s", json_string_value(json_object_get(res, "name")),
           json_string_value(json_object_get(res, "state")));
    if (code)
      printf(" (exit code %d)", (int)json_integer_value(code));
    printf("\n");
  } else {
    print_json(res);
  }
  json_decref(res);
  return 0;
}

/* jail net NAME [-f]: the proxy's decisions, one line each. */
static int jail_net(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  int follow = argc > 2 && (strcmp(argv[2], "-f") == 0 || strcmp(argv[2], "--follow") == 0);
  uint64_t offset = 0;

  if (need_name(argc, argv, "jail net NAME [-f]", err) < 0)
    return -1;
  for (;;) {
    json_t *res, *e;
    const char *state;
    size_t i;
    uint64_t next, end;

    if (call(c, "jail.net", json_pack("{s:s, s:I}", "name", argv[1], "offset", (json_int_t)offset),
             &res, err) < 0)
      return -1;
    json_array_foreach(json_object_get(res, "entries"), i, e)
    {
      if (c->json) {
        char *line = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
        puts(line);
        free(line);
        continue;
      }
      printf("%-8s %-7s %s:%lld", json_string_value(json_object_get(e, "decision")),
             json_string_value(json_object_get(e, "method")),
             json_string_value(json_object_get(e, "host")),
             (long long)json_integer_value(json_object_get(e, "port")));
      if (json_object_get(e, "address"))
        printf(" (%s)", json_string_value(json_object_get(e, "address")));
      if (json_object_get(e, "bytes_up"))
        printf(" up %lld down %lld", (long long)json_integer_value(json_object_get(e, "bytes_up")),
               (long long)json_integer_value(json_object_get(e, "bytes_down")));
      if (json_object_get(e, "reason"))
        printf(": %s", json_string_value(json_object_get(e, "reason")));
      printf("\n");
    }
    next = (uint64_t)json_integer_value(json_object_get(res, "next"));
    end = (uint64_t)json_integer_value(json_object_get(res, "end"));
    state = json_string_value(json_object_get(res, "state"));
    offset = next;
    if (next >= end && (!follow || strcmp(state, "exited") == 0 || strcmp(state, "created") == 0)) {
      json_decref(res);
      break;
    }
    json_decref(res);
    fflush(stdout);
    if (next >= end)
      usleep(200000);
  }
  return 0;
}

/* Streams (jail attach, logs -f, exec): the relay agt uses too (common/stream_relay.c).
 * Returns the exit code of what ended, -1 after a detach, -2 on an error. */
static int stream(struct ctl *c, int writer, int attach, const struct agt_detach_keys *keys,
                  agt_error_t *err)
{
  struct agt_stream s;

  memset(&s, 0, sizeof s);
  s.rpc = &c->rpc;
  s.interactive = writer;
  s.watch_keys = attach && !writer && isatty(0); /* read-only: the detach keys work */
  s.attach = attach;
  s.keys = keys;
  s.prog = "agtd ctl";
  if (agt_stream_run(&s, err) < 0)
    return -2;
  return s.end == AGT_STREAM_DETACHED ? -1 : s.exit_code;
}

static const struct agt_opt attach_opts[] = {
    AGT_OPT_BOOL('r', "read-only", struct attach_args, read_only,
                 "watch without typing into the terminal"),
    AGT_JAIL_RUN_OPT_IN(DETACH_KEYS, 'k', struct attach_args, keys,
                        ", comma-separated (" CTL_DETACH_KEYS ")"),
    AGT_OPT_END,
};

static int attach_to(struct ctl *c, const char *name, struct attach_args *a, agt_error_t *err)
{
  struct agt_detach_keys keys;
  json_t *res;
  int code, writer;

  if (agt_detach_keys_parse(a->keys, &keys, err) < 0)
    return agt_error_wrap(err, "--detach-keys");
  if (call(c, "jail.attach", json_pack("{s:s, s:b}", "name", name, "write", !a->read_only), &res,
           err) < 0)
    return -1;
  writer = json_is_true(json_object_get(res, "writer"));
  json_decref(res);
  if (isatty(2))
    fprintf(stderr, "[attached to %s%s; detach with %s]\r\n", name, writer ? "" : ", read-only",
            a->keys);
  code = stream(c, writer, 1, &keys, err);
  if (code == -2)
    return -1;
  if (code < 0) {
    fprintf(stderr, "\r\n[detached from %s; it keeps running]\r\n", name);
    return 0;
  }
  return code;
}

static int jail_attach(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  struct attach_args a = {0, CTL_DETACH_KEYS};
  int i = agt_opts_parse(argc, argv, attach_opts, NULL, &a, err);

  if (i == -2) {
    agt_opts_usage(stdout, "agtd ctl jail attach [OPTIONS] NAME",
                   "Connect this terminal to a running jail's terminal.", attach_opts);
    return 0;
  }
  if (i < 0)
    return -1;
  if (i >= argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: agtd ctl jail attach [OPTIONS] NAME");
  return attach_to(c, argv[i], &a, err);
}

/* jail port NAME GUESTPORT [LOCALPORT]: the relay agt jail port uses (common/port_relay.c),
 * each connection to agtd a new one to its socket. */
static int open_agtd(void *ctx, agt_rpc_t *rpc, agt_error_t *err)
{
  return agt_rpc_connect_unix(rpc, ((struct ctl *)ctx)->socket, err);
}

static void port_listening(void *ctx, unsigned port)
{
  struct agt_portfwd *p = ctx;

  printf("forwarding 127.0.0.1:%u to port %u in jail %s\n", port, p->guest_port, p->jail);
  fflush(stdout);
}

static int jail_port(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  struct agt_portfwd p;
  uint64_t gport, lport = 0;

  if (argc < 3 || agt_parse_u64("guest port", argv[2], &gport, err) < 0 || gport == 0 ||
      gport > 65535)
    return agt_error_kind(err, AGT_E_INVALID,
                          "usage: agtd ctl jail port NAME GUESTPORT [LOCALPORT]");
  if (argc > 3 && (agt_parse_u64("local port", argv[3], &lport, err) < 0 || lport > 65535))
    return agt_error_kind(err, AGT_E_INVALID, "local port '%s' is out of range", argv[3]);
  /* Ask once up front, so a wrong name or a jail that is not running fails here rather
   * than per connection. */
  {
    json_t *res;
    const char *state;
    if (call(c, "jail.inspect", json_pack("{s:s}", "name", argv[1]), &res, err) < 0)
      return -1;
    state = json_string_value(json_object_get(res, "state"));
    if (state == NULL || (strcmp(state, "running") != 0 && strcmp(state, "starting") != 0)) {
      agt_error_kind(err, AGT_E_STATE,
                     "jail '%s' is %s: only a running jail's ports can be reached", argv[1],
                     state ? state : "in no known state");
      json_decref(res);
      return -1;
    }
    json_decref(res);
  }
  memset(&p, 0, sizeof p);
  p.open = open_agtd;
  p.open_ctx = c;
  p.prog = "agtd ctl";
  p.jail = argv[1];
  p.guest_port = (unsigned)gport;
  p.local_port = (unsigned)lport;
  p.listening = port_listening;
  p.ctx = &p;
  return agt_portfwd_run(&p, err);
}

static int cmd_jail(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : "";

  argc--;
  argv++;
  if (strcmp(sub, "run") == 0 || strcmp(sub, "create") == 0)
    return create_or_run(c, strcmp(sub, "run") == 0 ? "jail.run" : "jail.create", argc, argv, err);
  if (strcmp(sub, "ls") == 0) {
    json_t *res;
    if (call(c, "jail.ls", NULL, &res, err) < 0)
      return -1;
    if (c->json)
      print_json(json_object_get(res, "jails"));
    else
      agt_print_jails(stdout, json_object_get(res, "jails"));
    json_decref(res);
    return 0;
  }
  if (strcmp(sub, "start") == 0 || strcmp(sub, "inspect") == 0 || strcmp(sub, "wait") == 0) {
    json_t *res;
    if (need_name(argc, argv, "jail start|inspect|wait NAME", err) < 0)
      return -1;
    if (strcmp(sub, "inspect") == 0) {
      if (call(c, "jail.inspect", json_pack("{s:s}", "name", argv[1]), &res, err) < 0)
        return -1;
      print_json(res);
      json_decref(res);
      return 0;
    }
    return simple(c, strcmp(sub, "start") == 0 ? "jail.start" : "jail.wait",
                  json_pack("{s:s}", "name", argv[1]), err);
  }
  if (strcmp(sub, "stop") == 0) {
    uint64_t grace = 10000;
    if (need_name(argc, argv, "jail stop NAME [GRACE_MS]", err) < 0)
      return -1;
    if (argc > 2 && agt_parse_u64("grace period", argv[2], &grace, err) < 0)
      return -1;
    return simple(c, "jail.stop",
                  json_pack("{s:s, s:I}", "name", argv[1], "grace_ms", (json_int_t)grace), err);
  }
  if (strcmp(sub, "kill") == 0) {
    uint64_t sig = SIGKILL;
    if (need_name(argc, argv, "jail kill NAME [SIGNAL]", err) < 0)
      return -1;
    if (argc > 2 && agt_parse_u64("signal", argv[2], &sig, err) < 0)
      return -1;
    return simple(c, "jail.kill",
                  json_pack("{s:s, s:I}", "name", argv[1], "signal", (json_int_t)sig), err);
  }
  if (strcmp(sub, "rm") == 0) {
    int force = argc > 2 && (strcmp(argv[2], "-f") == 0 || strcmp(argv[2], "--force") == 0);
    if (need_name(argc, argv, "jail rm NAME [--force]", err) < 0)
      return -1;
    return simple(c, "jail.rm", json_pack("{s:s, s:b}", "name", argv[1], "force", force), err);
  }
  if (strcmp(sub, "logs") == 0) {
    int follow = argc > 2 && (strcmp(argv[2], "-f") == 0 || strcmp(argv[2], "--follow") == 0);
    uint64_t offset = 0;
    if (need_name(argc, argv, "jail logs NAME [-f]", err) < 0)
      return -1;
    if (follow) {
      /* A stream: the log so far, then live output until the jail ends, nothing lost. */
      json_t *res;
      if (call(c, "jail.logs", json_pack("{s:s, s:b}", "name", argv[1], "follow", 1), &res, err) <
          0)
        return -1;
      if (!json_object_get(res, "follow")) {
        follow = 0; /* not running: what the log holds is all there is */
        json_decref(res);
      } else {
        json_decref(res);
        return stream(c, 0, 0, NULL, err) == -2 ? -1 : 0;
      }
    }
    for (;;) {
      json_t *res;
      const char *state;
      size_t len;
      uint64_t next, end;

      if (call(c, "jail.logs",
               json_pack("{s:s, s:I}", "name", argv[1], "offset", (json_int_t)offset), &res,
               err) < 0)
        return -1;
      if (agt_print_log_chunk(stdout, res, &len, &next, &end, err) < 0) {
        json_decref(res);
        return -1;
      }
      state = json_string_value(json_object_get(res, "state"));
      offset = next;
      if (next >= end &&
          (!follow || strcmp(state, "exited") == 0 || strcmp(state, "created") == 0)) {
        json_decref(res);
        break;
      }
      json_decref(res);
      fflush(stdout);
      if (next >= end)
        usleep(100000);
    }
    fflush(stdout);
    return 0;
  }
  if (strcmp(sub, "net") == 0)
    return jail_net(c, argc, argv, err);
  if (strcmp(sub, "port") == 0)
    return jail_port(c, argc, argv, err);
  if (strcmp(sub, "exec") == 0) {
    json_t *res, *a = json_array();
    int i = 2, code;
    if (argc > 2 && strcmp(argv[2], "--") == 0)
      i = 3;
    if (argc < 2 || i >= argc) {
      json_decref(a);
      return agt_error_kind(err, AGT_E_INVALID, "usage: agtd ctl jail exec NAME [--] CMD [ARG...]");
    }
    for (; i < argc; i++)
      json_array_append_new(a, json_string(argv[i]));
    if (call(c, "jail.exec", json_pack("{s:s, s:o}", "name", argv[1], "argv", a), &res, err) < 0)
      return -1;
    json_decref(res);
    code = stream(c, 0, 0, NULL, err);
    if (code == -2)
      return -1;
    c->exit_code = code;
    return 0;
  }
  if (strcmp(sub, "attach") == 0) {
    int code = jail_attach(c, argc, argv, err);
    if (code > 0)
      c->exit_code = code;
    return code < 0 ? -1 : 0;
  }
  return agt_error_kind(err, AGT_E_INVALID,
                        "unknown jail command '%s' (run, create, start, stop, kill, rm, ls, "
                        "inspect, logs, net, wait)",
                        sub);
}

static int cmd_rootfs(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : "";
  json_t *res;

  if (strcmp(sub, "build") == 0) {
    int download = 1;
    cleanup_free char *abs = NULL;
    if (argc < 3)
      return agt_error_kind(err, AGT_E_INVALID,
                            "usage: agtd ctl rootfs build MANIFEST [--no-download]");
    download = !(argc > 3 && strcmp(argv[3], "--no-download") == 0);
    abs = realpath(argv[2], NULL);
    if (abs == NULL)
      return agt_error_make(err, errno, "manifest '%s'", argv[2]);
    if (call(c, "rootfs.build",
             json_pack("{s:s, s:b}", "manifest", abs, "allow_download", download), &res, err) < 0)
      return -1;
    if (c->json)
      print_json(res);
    else
      printf("%s %s (%lld files, %.1f MB)\n", json_string_value(json_object_get(res, "id")),
             json_string_value(json_object_get(res, "name")),
             (long long)json_integer_value(json_object_get(res, "files")),
             (double)json_integer_value(json_object_get(res, "bytes")) / 1e6);
    json_decref(res);
    return 0;
  }
  if (strcmp(sub, "ls") == 0) {
    size_t i;
    json_t *r;
    if (call(c, "rootfs.ls", NULL, &res, err) < 0)
      return -1;
    if (c->json) {
      print_json(json_object_get(res, "rootfs"));
    } else {
      printf("%-16s %-12s %-10s %s\n", "ID", "NAME", "SIZE", "JAILS");
      json_array_foreach(json_object_get(res, "rootfs"), i, r)
      {
        printf("%-16.16s %-12s %-10.1f %zu\n", json_string_value(json_object_get(r, "id")),
               json_string_value(json_object_get(r, "name")),
               (double)json_integer_value(json_object_get(r, "bytes")) / 1e6,
               json_array_size(json_object_get(r, "jails")));
      }
    }
    json_decref(res);
    return 0;
  }
  if (strcmp(sub, "rm") == 0) {
    if (argc < 3)
      return agt_error_kind(err, AGT_E_INVALID, "usage: agtd ctl rootfs rm REF");
    return simple(c, "rootfs.rm", json_pack("{s:s}", "ref", argv[2]), err);
  }
  return agt_error_kind(err, AGT_E_INVALID, "unknown rootfs command '%s' (build, ls, rm)", sub);
}

static int cmd_home(struct ctl *c, int argc, char **argv, agt_error_t *err)
{
  const char *sub = argc > 1 ? argv[1] : "";
  const char *method = strcmp(sub, "inspect") == 0 ? "home.inspect"
                       : strcmp(sub, "reset") == 0 ? "home.reset"
                                                   : NULL;
  json_t *res;

  if (method == NULL || argc != 4)
    return agt_error_kind(err, AGT_E_INVALID, "usage: agtd ctl home inspect|reset USER AGENT");
  if (call(c, method, json_pack("{s:s, s:s}", "user", argv[2], "agent", argv[3]), &res, err) < 0)
    return -1;
  print_json(res);
  json_decref(res);
  return 0;
}

static const struct {
  const char *name;
  int (*fn)(struct ctl *c, int argc, char **argv, agt_error_t *err);
  const char *help;
} commands[] = {
    {"hello", cmd_hello, "check that agtd answers, and print its version"},
    {"status", cmd_status, "agtd's state: uptime, cgroup version, jails"},
    {"jail", cmd_jail,
     "run|create|start|stop|kill|rm|ls|inspect|attach|exec|logs [-f]|net [-f]|port|wait"},
    {"rootfs", cmd_rootfs, "build MANIFEST | ls | rm REF"},
    {"home", cmd_home, "inspect|reset USER AGENT: an agent home"},
};

static const struct agt_opt ctl_opts[] = {
    AGT_OPT_STRING('s', "socket", "PATH", struct ctl, socket, "agtd's socket (/run/agt/agtd.sock)"),
    AGT_OPT_BOOL(0, "json", struct ctl, json, "print replies as JSON"),
    AGT_OPT_END,
};

static void ctl_usage(FILE *f)
{
  agt_opts_usage(f, "agtd ctl [OPTIONS] COMMAND [ARGS...]",
                 "Drive agtd on this machine over its unix socket.", ctl_opts);
  fprintf(f, "\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-28s %s\n", commands[i].name, commands[i].help);
}

int agtd_ctl_main(int argc, char **argv)
{
  struct ctl c = {.socket = AGT_DEFAULT_SOCKET};
  agt_error_t err = NULL;
  int i, r = -1;

  i = agt_opts_parse(argc, argv, ctl_opts, NULL, &c, &err);
  if (i == -2 || (i >= 0 && i >= argc)) {
    ctl_usage(i == -2 ? stdout : stderr);
    return i == -2 ? 0 : 2;
  }
  if (i > 0) {
    size_t k;
    for (k = 0; k < sizeof commands / sizeof commands[0]; k++)
      if (strcmp(commands[k].name, argv[i]) == 0)
        break;
    if (k == sizeof commands / sizeof commands[0])
      agt_error_kind(&err, AGT_E_INVALID, "unknown command '%s'", argv[i]);
    else
      r = commands[k].fn(&c, argc - i, argv + i, &err);
  }
  if (c.connected)
    agt_rpc_close(&c.rpc);
  if (r == 0 && !err && c.exit_code)
    return c.exit_code;
  if (r < 0 || err) {
    fprintf(stderr, "agtd ctl: %s\n", err ? err->msg : "failed");
    r = err && err->kind == AGT_E_INVALID ? 2 : 1;
    agt_error_release(&err);
    return r;
  }
  return 0;
}
