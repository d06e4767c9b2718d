/* agt-rpc-bench: the driver behind bench/ssh.sh.  It reaches agtd the way agt does and
 * times what that costs, printing "key value" lines for ssh.sh to tabulate.
 *
 *   agt-rpc-bench ssh OPTIONS    through agt's own SSH transport (host/ssh.c, libssh): a
 *                                connection with the same host key check and key as
 *                                `agt --target ssh://...`, a direct-streamlocal channel to
 *                                agtd's socket, hello; then --runs requests over that one
 *                                open connection.  --connects more connections are set up
 *                                and torn down first, timed step by step.
 *   agt-rpc-bench unix OPTIONS   the same requests straight on agtd's unix socket (no SSH),
 *                                for comparison: run inside the VM's mount namespace.
 *   agt-rpc-bench algos OPTIONS  what libssh, set up as host/ssh.c sets it up, negotiates with
 *                                that sshd (key exchange, ciphers); no authentication.
 *
 * Every request is timed on the client from just before it is written to just after the
 * whole reply is read (CLOCK_MONOTONIC). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libssh/libssh.h>

#include "cli.h"
#include "error.h"
#include "rpc.h"
#include "series.h"
#include "ssh.h"
#include "xalloc.h"

enum {
  OPT_HOST = 256,
  OPT_PORT,
  OPT_USER,
  OPT_IDENTITY,
  OPT_KNOWN_HOSTS,
  OPT_SOCKET,
  OPT_METHOD,
  OPT_RUNS,
  OPT_WARMUP,
  OPT_CONNECTS,
};

static const struct agt_opt options[] = {
    {OPT_CONNECTS, "connects", "N", "ssh: connections set up and torn down, timed (20)"},
    {OPT_HOST, "host", "HOST", "ssh: the host sshd listens on (127.0.0.1)"},
    {OPT_IDENTITY, "identity", "FILE", "ssh: the private key (ssh-agent and ~/.ssh/id_*)"},
    {OPT_KNOWN_HOSTS, "known-hosts", "FILE", "ssh: the known_hosts file (~/.ssh/known_hosts)"},
    {OPT_METHOD, "method", "NAME", "the request timed (jail.ls)"},
    {OPT_PORT, "port", "PORT", "ssh: sshd's port (22)"},
    {OPT_RUNS, "runs", "N", "measured requests over the open connection (1000)"},
    {OPT_SOCKET, "socket", "PATH", "agtd's socket, on the far side for ssh (/run/agt/agtd.sock)"},
    {OPT_USER, "user", "USER", "ssh: the user (root)"},
    {OPT_WARMUP, "warmup", "N", "unmeasured requests first (100)"},
    {0, NULL, NULL, NULL},
};

struct cfg {
  const char *host, *user, *identity, *known_hosts, *socket, *method;
  uint64_t port, runs, warmup, connects;
};

static int set_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct cfg *c = ctx;

  switch (key) {
  case OPT_HOST:
    c->host = arg;
    return 0;
  case OPT_PORT:
    if (agt_parse_u64("--port", arg, &c->port, err) < 0)
      return -1;
    if (c->port == 0 || c->port > 65535)
      return agt_error_kind(err, AGT_E_INVALID, "--port: %s is not a port", arg);
    return 0;
  case OPT_USER:
    c->user = arg;
    return 0;
  case OPT_IDENTITY:
    c->identity = arg;
    return 0;
  case OPT_KNOWN_HOSTS:
    c->known_hosts = arg;
    return 0;
  case OPT_SOCKET:
    c->socket = arg;
    return 0;
  case OPT_METHOD:
    c->method = arg;
    return 0;
  case OPT_RUNS:
    return agt_parse_u64("--runs", arg, &c->runs, err);
  case OPT_WARMUP:
    return agt_parse_u64("--warmup", arg, &c->warmup, err);
  case OPT_CONNECTS:
    return agt_parse_u64("--connects", arg, &c->connects, err);
  default:
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  }
}

/* ---- Requests over one open connection ---- */

static int requests(agt_rpc_t *rpc, const struct cfg *c, agt_error_t *err)
{
  struct series req;
  json_t *res = NULL;
  uint64_t begin;

  for (uint64_t i = 0; i < c->warmup; i++) {
    if (agt_rpc_call(rpc, c->method, NULL, &res, err) < 0)
      return agt_error_wrap(err, "%s (warm-up %llu)", c->method, (unsigned long long)i + 1);
    json_decref(res);
  }
  series_init(&req, "req_us", c->runs);
  begin = now_ns();
  for (uint64_t i = 0; i < c->runs; i++) {
    uint64_t t0 = now_ns();
    if (agt_rpc_call(rpc, c->method, NULL, &res, err) < 0) {
      free(req.v);
      return agt_error_wrap(err, "%s (request %llu)", c->method, (unsigned long long)i + 1);
    }
    req.v[req.n++] = (double)(now_ns() - t0) / 1e3;
    if (i == 0) {
      char *text = json_dumps(res, JSON_COMPACT);
      printf("reply_bytes %zu\n", text ? strlen(text) : 0);
      free(text);
    }
    json_decref(res);
  }
  printf("method %s\nreq_wall_s %.3f\n", c->method, (double)(now_ns() - begin) / 1e9);
  series_print(&req);
  free(req.v);
  return 0;
}

static int mode_unix(const struct cfg *c, agt_error_t *err)
{
  agt_rpc_t rpc;
  int r;

  if (agt_rpc_connect_unix(&rpc, c->socket, err) < 0)
    return agt_error_wrap(err, "agtd at %s", c->socket);
  r = requests(&rpc, c, err);
  agt_rpc_close(&rpc);
  return r;
}

/* One connection, as agt_target_connect makes it for an ssh:// target: SSH connect, host
 * key check and authentication; a channel to agtd's socket; hello.  Each step's time is
 * added to its series (when given). */
static int ssh_open(const struct cfg *c, agt_ssh_t **s, agt_rpc_t *rpc, struct series *t_ssh,
                    struct series *t_chan, agt_error_t *err)
{
  struct agt_ssh_opts o;
  uint64_t t0 = now_ns(), t1;
  int fd;

  memset(&o, 0, sizeof o);
  o.host = c->host;
  o.port = (unsigned)c->port;
  o.user = c->user;
  o.identity = c->identity;
  o.policy = AGT_HOSTKEY_KNOWN_HOSTS;
  o.known_hosts = c->known_hosts;
  o.timeout_s = 10;
  o.use_ssh_config = 1;
  if (agt_ssh_connect(&o, s, err) < 0)
    return -1;
  t1 = now_ns();
  if (agt_ssh_open_unix(*s, c->socket, &fd, err) < 0) {
    agt_ssh_free(*s);
    return -1;
  }
  if (agt_rpc_open_fd(rpc, fd, err) < 0) {
    const char *why = agt_ssh_dropped(*s);
    if (why) {
      agt_error_release(err);
      agt_error_kind(err, AGT_E_STATE, "%s", why);
    }
    agt_rpc_close(rpc);
    agt_ssh_free(*s);
    return agt_error_wrap(err, "agtd at %s", c->socket);
  }
  if (t_ssh)
    t_ssh->v[t_ssh->n++] = (double)(t1 - t0) / 1e6;
  if (t_chan)
    t_chan->v[t_chan->n++] = (double)(now_ns() - t1) / 1e6;
  return 0;
}

static int mode_ssh(const struct cfg *c, agt_error_t *err)
{
  struct series t_ssh, t_chan, t_first, t_close;
  agt_ssh_t *s = NULL;
  agt_rpc_t rpc;
  json_t *res = NULL;
  int r = -1;

  series_init(&t_ssh, "connect_ms", c->connects);
  series_init(&t_chan, "channel_hello_ms", c->connects);
  series_init(&t_first, "first_req_ms", c->connects);
  series_init(&t_close, "close_ms", c->connects);
  /* Connections as one `agt jail ls` makes them, each step timed; an unmeasured one first. */
  for (uint64_t i = 0; i <= c->connects; i++) {
    int timed = i > 0;
    uint64_t t0;

    if (ssh_open(c, &s, &rpc, timed ? &t_ssh : NULL, timed ? &t_chan : NULL, err) < 0)
      goto out;
    t0 = now_ns();
    if (agt_rpc_call(&rpc, c->method, NULL, &res, err) < 0) {
      agt_rpc_close(&rpc);
      agt_ssh_free(s);
      goto out;
    }
    json_decref(res);
    if (timed)
      t_first.v[t_first.n++] = (double)(now_ns() - t0) / 1e6;
    t0 = now_ns();
    agt_rpc_close(&rpc);
    agt_ssh_free(s);
    if (timed)
      t_close.v[t_close.n++] = (double)(now_ns() - t0) / 1e6;
  }
  series_print(&t_ssh);
  series_print(&t_chan);
  series_print(&t_first);
  series_print(&t_close);
  /* Then one connection kept open, and the requests over it. */
  if (ssh_open(c, &s, &rpc, NULL, NULL, err) < 0)
    goto out;
  r = requests(&rpc, c, err);
  agt_rpc_close(&rpc);
  agt_ssh_free(s);
out:
  free(t_ssh.v);
  free(t_chan.v);
  free(t_first.v);
  free(t_close.v);
  return r;
}

/* The options agt_ssh_connect gives libssh; none of them chooses algorithms. */
static int mode_algos(const struct cfg *c, agt_error_t *err)
{
  ssh_session ss = ssh_new();
  unsigned port = (unsigned)c->port;
  long timeout = 10;
  bool process_config = true;
  int nodelay = 1, r = 0;

  if (ss == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot create an ssh session");
  ssh_options_set(ss, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  ssh_options_set(ss, SSH_OPTIONS_HOST, c->host);
  ssh_options_set(ss, SSH_OPTIONS_PORT, &port);
  ssh_options_set(ss, SSH_OPTIONS_USER, c->user);
  ssh_options_set(ss, SSH_OPTIONS_TIMEOUT, &timeout);
  ssh_options_set(ss, SSH_OPTIONS_NODELAY, &nodelay);
  if (c->known_hosts)
    ssh_options_set(ss, SSH_OPTIONS_KNOWNHOSTS, c->known_hosts);
  if (ssh_connect(ss) != SSH_OK) {
    r = agt_error_kind(err, AGT_E_INTERNAL, "ssh to %s:%u: %s", c->host, port, ssh_get_error(ss));
  } else {
    printf("libssh %s\nkex %s\ncipher_out %s\ncipher_in %s\nhmac_out %s\n", ssh_version(0),
           ssh_get_kex_algo(ss), ssh_get_cipher_out(ss), ssh_get_cipher_in(ss),
           ssh_get_hmac_out(ss));
    ssh_disconnect(ss);
  }
  ssh_free(ss);
  return r;
}

int main(int argc, char **argv)
{
  static const char usage[] = "agt-rpc-bench ssh|unix|algos [OPTIONS]";
  struct cfg c = {.host = "127.0.0.1",
                  .user = "root",
                  .socket = "/run/agt/agtd.sock",
                  .method = "jail.ls",
                  .port = 22,
                  .runs = 1000,
                  .warmup = 100,
                  .connects = 20};
  const char *mode = argc > 1 ? argv[1] : "";
  agt_error_t err = NULL;
  int i, r;

  i = agt_opts_parse(argc - 1, argv + 1, options, set_opt, &c, &err);
  if (i == -2 || (i >= 0 && i + 1 != argc)) {
    agt_opts_usage(i == -2 ? stdout : stderr, usage,
                   "Time requests to agtd over agt's SSH transport, or on its socket directly.",
                   options);
    return i == -2 ? 0 : 2;
  }
  if (i < 0)
    r = -1;
  else if (strcmp(mode, "ssh") == 0)
    r = mode_ssh(&c, &err);
  else if (strcmp(mode, "unix") == 0)
    r = mode_unix(&c, &err);
  else if (strcmp(mode, "algos") == 0)
    r = mode_algos(&c, &err);
  else
    r = agt_error_kind(&err, AGT_E_INVALID, "unknown mode '%s' (usage: %s)", mode, usage);
  fflush(stdout);
  if (r < 0) {
    fprintf(stderr, "agt-rpc-bench: %s\n", err ? err->msg : "failed");
    agt_error_release(&err);
    return 1;
  }
  return 0;
}
