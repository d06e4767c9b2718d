#include "target.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cleanup.h"
#include "mux.h"
#include "subprocess.h"
#include "util.h"
#include "xalloc.h"

int agt_target_parse(const char *spec, struct agt_target *t, agt_error_t *err)
{
  memset(t, 0, sizeof *t);
  t->rpc.fd = -1;
  if (spec == NULL || *spec == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "empty target");
  t->spec = xstrdup(spec);
  if (strcmp(spec, "local") == 0) {
    t->kind = AGT_TARGET_LOCAL;
    return 0;
  }
  if (strncmp(spec, "ssh://", 6) == 0) {
    const char *p = spec + 6, *at = strchr(p, '@'), *hp, *colon;
    char *end;
    unsigned long port = 22;

    t->kind = AGT_TARGET_SSH;
    if (at == NULL || at == p)
      return agt_error_kind(err, AGT_E_INVALID, "target '%s': write ssh://USER@HOST[:PORT]", spec);
    t->user = xstrndup(p, (size_t)(at - p));
    hp = at + 1;
    if (*hp == '[') { /* [v6 address]:port */
      const char *close = strchr(hp, ']');
      if (close == NULL)
        return agt_error_kind(err, AGT_E_INVALID, "target '%s': unclosed '['", spec);
      t->host = xstrndup(hp + 1, (size_t)(close - hp - 1));
      colon = close[1] == ':' ? close + 1 : NULL;
      if (close[1] && !colon)
        return agt_error_kind(err, AGT_E_INVALID, "target '%s': junk after ']'", spec);
    } else {
      colon = strchr(hp, ':');
      t->host = colon ? xstrndup(hp, (size_t)(colon - hp)) : xstrdup(hp);
    }
    if (strchr(t->host, '/') || *t->host == '\0')
      return agt_error_kind(err, AGT_E_INVALID, "target '%s': bad host", spec);
    if (colon) {
      errno = 0;
      port = strtoul(colon + 1, &end, 10);
      if (errno || *end || colon[1] == '\0' || port == 0 || port > 65535)
        return agt_error_kind(err, AGT_E_INVALID, "target '%s': bad port", spec);
    }
    t->port = (unsigned)port;
    return 0;
  }
  t->kind = AGT_TARGET_LIMA;
  t->instance = xstrdup(strncmp(spec, "lima:", 5) == 0 ? spec + 5 : spec);
  return agt_lima_name_check(t->instance, err);
}

void agt_target_release(struct agt_target *t)
{
  agt_target_disconnect(t);
  free(t->kept_peer);
  free(t->dropped);
  free(t->spec);
  free(t->instance);
  free(t->user);
  free(t->host);
  memset(t, 0, sizeof *t);
  t->rpc.fd = -1;
}

int agt_target_default(const struct agt_config *cfg, char **spec, const char **why,
                       agt_error_t *err)
{
  cleanup_free char *limactl = agt_find_program(agt_config_get(cfg, AGT_CFG_LIMA_LIMACTL));
  struct utsname u;

  if (limactl) {
    *spec = xasprintf("lima:%s", agt_config_get(cfg, AGT_CFG_VM_NAME));
    *why = "limactl found";
    return 0;
  }
  if (uname(&u) == 0 && strcmp(u.sysname, "Linux") == 0) {
    *spec = xstrdup("local");
    *why = "Linux without limactl";
    return 0;
  }
  *spec = NULL;
  return agt_error_kind(err, AGT_E_NOTFOUND,
                        "no target: limactl is not in PATH (install Lima, or set target: "
                        "ssh://USER@HOST in the config)");
}

const char *agt_target_describe(struct agt_target *t, char *buf, size_t len)
{
  if (t->ssh)
    snprintf(buf, len, "%s (%s)", t->spec, agt_ssh_peer(t->ssh));
  else if (t->kept_peer)
    snprintf(buf, len, "%s (%s)", t->spec, t->kept_peer);
  else
    snprintf(buf, len, "%s", t->spec);
  return buf;
}

static int connect_lima(struct agt_target *t, agt_error_t *err)
{
  struct agt_lima_instance in;
  struct agt_ssh_opts o;
  cleanup_free char *key = NULL, *pin = NULL, *cache = NULL;
  uint64_t timeout = 10;
  int found, r;

  if (t->lima == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "lima target without limactl");
  if (agt_lima_list(t->lima, t->instance, &in, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' does not exist: 'agt up' creates it",
                          t->instance);
  if (in.status != AGT_LIMA_RUNNING) {
    r = agt_error_kind(
        err, AGT_E_STATE, "vm '%s' is %s%s%s%s: %s", t->instance, agt_lima_status_name(in.status),
        in.errors ? " (" : "", in.errors ? in.errors[0] : "", in.errors ? ")" : "",
        in.status == AGT_LIMA_BROKEN ? "'agt stop --force', then 'agt up'" : "'agt up' starts it");
    agt_lima_instance_release(&in);
    return r;
  }
  if (in.ssh_port == 0 || in.user == NULL) {
    r = agt_error_kind(err, AGT_E_PROTO,
                       "limactl list gave no SSH %s for vm '%s' (sshLocalPort, config.user.name)",
                       in.ssh_port == 0 ? "port" : "user", t->instance);
    agt_lima_instance_release(&in);
    return r;
  }
  key = agt_lima_identity(t->lima);
  cache = agt_cache_dir();
  pin = xasprintf("%s/hostkeys/%s", cache, t->instance);
  agt_config_seconds(t->cfg, AGT_CFG_SSH_CONNECT_TIMEOUT, &timeout, NULL);
  memset(&o, 0, sizeof o);
  o.host = in.ssh_address;
  o.port = in.ssh_port;
  o.user = in.user;
  o.identity = key;
  o.policy = AGT_HOSTKEY_LIMA_PIN;
  o.pin_file = pin;
  o.pin_tag = in.hostagent_pid;
  o.timeout_s = (long)timeout;
  r = agt_ssh_connect(&o, &t->ssh, err);
  agt_lima_instance_release(&in);
  return r;
}

static int connect_ssh(struct agt_target *t, agt_error_t *err)
{
  struct agt_ssh_opts o;
  uint64_t timeout = 10;

  agt_config_seconds(t->cfg, AGT_CFG_SSH_CONNECT_TIMEOUT, &timeout, NULL);
  memset(&o, 0, sizeof o);
  o.host = t->host;
  o.port = t->port;
  o.user = t->user;
  o.identity = agt_config_get(t->cfg, AGT_CFG_SSH_IDENTITY);
  o.policy = AGT_HOSTKEY_KNOWN_HOSTS;
  o.known_hosts = agt_config_get(t->cfg, AGT_CFG_SSH_KNOWN_HOSTS);
  o.timeout_s = (long)timeout;
  o.use_ssh_config = 1;
  return agt_ssh_connect(&o, &t->ssh, err);
}

/* For the connection keeper: the connection it holds. */
static int keeper_connect(void *arg, agt_ssh_t **out, agt_error_t *err)
{
  struct agt_target *t = arg;
  int r = t->kind == AGT_TARGET_LIMA ? connect_lima(t, err) : connect_ssh(t, err);

  *out = t->ssh;
  t->ssh = NULL;
  return r;
}

/* The keeper of this target (mux.h): 1, or 0 when ssh.persist is 0. */
static int kept_mux(struct agt_target *t, struct agt_mux *m, agt_error_t *err)
{
  uint64_t persist = 0;
  cleanup_free char *key = NULL;

  memset(m, 0, sizeof *m);
  if (agt_config_seconds(t->cfg, AGT_CFG_SSH_PERSIST, &persist, err) < 0)
    return -1;
  if (persist == 0)
    return 0;
  /* two targets share a keeper only when everything that makes the connection is equal */
  key = xasprintf("%s\n%s\n%s\n%s\n%s", t->spec, agt_config_get(t->cfg, AGT_CFG_AGTD_SOCKET) ?: "",
                  agt_config_get(t->cfg, AGT_CFG_SSH_IDENTITY) ?: "",
                  agt_config_get(t->cfg, AGT_CFG_SSH_KNOWN_HOSTS) ?: "",
                  agt_config_get(t->cfg, AGT_CFG_LIMA_HOME) ?: "");
  if (agt_mux_init(m, key, err) < 0)
    return -1;
  m->agtd_socket = agt_config_get(t->cfg, AGT_CFG_AGTD_SOCKET);
  m->idle_s = persist;
  m->timeout_s = 10;
  agt_config_seconds(t->cfg, AGT_CFG_SSH_CONNECT_TIMEOUT, &m->timeout_s, NULL);
  m->connect = keeper_connect;
  m->arg = t;
  return 1;
}

/* A socket to agtd through agt's connection keeper, or 0 with *fd -1 when ssh.persist is
 * 0. */
static int open_kept(struct agt_target *t, int *fd, agt_error_t *err)
{
  cleanup_free char *note = NULL, *peer = NULL;
  struct agt_mux m;
  int r;

  *fd = -1;
  r = kept_mux(t, &m, err);
  if (r <= 0)
    return r;
  r = agt_mux_open(&m, fd, &peer, &note, err);
  if (note && !t->quiet)
    fprintf(stderr, "agt: %s\n", note);
  if (r == 0 && t->kept_peer == NULL) {
    t->kept_peer = peer;
    peer = NULL;
  }
  agt_mux_release(&m);
  return r;
}

const char *agt_target_dropped(struct agt_target *t)
{
  struct agt_mux m;
  agt_error_t e = NULL;

  if (t->ssh)
    return agt_ssh_dropped(t->ssh);
  if (t->kept_peer == NULL || kept_mux(t, &m, &e) <= 0) {
    agt_error_release(&e);
    return NULL;
  }
  free(t->dropped);
  t->dropped = agt_mux_dropped(&m);
  agt_mux_release(&m);
  return t->dropped;
}

int agt_target_connect(struct agt_target *t, agt_error_t *err)
{
  const char *sock = agt_config_get(t->cfg, AGT_CFG_AGTD_SOCKET);
  int fd;

  if (t->connected)
    return 0;
  if (t->kind == AGT_TARGET_LOCAL) {
    if (agt_rpc_connect_unix(&t->rpc, sock, err) < 0) {
      if ((*err)->status == ENOENT || (*err)->status == ECONNREFUSED) {
        /* nothing listens: say what starts it (the status stays, agt up looks at it) */
        char *msg = xasprintf("%s: agtd is not running; 'agt up' starts it", (*err)->msg);
        free((*err)->msg);
        (*err)->msg = msg;
      } else if ((*err)->status == EACCES) {
        char *msg = xasprintf("%s: agt may not use agtd's socket (run agt as root, or as a "
                              "member of the group agtd serves, agtd --group)",
                              (*err)->msg);
        free((*err)->msg);
        (*err)->msg = msg;
      }
      return agt_error_wrap(err, "target local");
    }
    t->connected = 1;
    return 0;
  }
  if (open_kept(t, &fd, err) < 0)
    return -1;
  if (fd >= 0) {
    if (agt_rpc_open_fd(&t->rpc, fd, err) < 0) {
      agt_error_wrap(err, "agtd at %s", t->spec);
      agt_rpc_close(&t->rpc);
      t->rpc.fd = -1;
      return -1;
    }
    t->connected = 1;
    return 0;
  }
  if ((t->kind == AGT_TARGET_LIMA ? connect_lima(t, err) : connect_ssh(t, err)) < 0)
    return -1;
  if (agt_ssh_open_unix(t->ssh, sock, &fd, err) < 0) {
    agt_target_disconnect(t);
    return -1;
  }
  if (agt_rpc_open_fd(&t->rpc, fd, err) < 0) {
    const char *why = agt_ssh_dropped(t->ssh);
    if (why) {
      agt_error_release(err);
      agt_error_kind(err, AGT_E_STATE, "%s", why);
    }
    agt_error_wrap(err, "agtd at %s", t->spec);
    agt_rpc_close(&t->rpc);
    agt_target_disconnect(t);
    return -1;
  }
  t->connected = 1;
  return 0;
}

void agt_target_disconnect(struct agt_target *t)
{
  if (t->connected)
    agt_rpc_close(&t->rpc);
  t->connected = 0;
  t->rpc.fd = -1;
  agt_ssh_free(t->ssh);
  t->ssh = NULL;
}

int agt_target_open(struct agt_target *t, agt_rpc_t *rpc, agt_error_t *err)
{
  const char *sock = agt_config_get(t->cfg, AGT_CFG_AGTD_SOCKET);
  int fd;

  memset(rpc, 0, sizeof *rpc);
  rpc->fd = -1;
  if (t->ssh && agt_ssh_dropped(t->ssh))
    agt_target_disconnect(t);
  if (agt_target_connect(t, err) < 0)
    return -1;
  if (t->kind == AGT_TARGET_LOCAL) {
    if (agt_rpc_connect_unix(rpc, sock, err) < 0)
      return agt_error_wrap(err, "target local");
    return 0;
  }
  if (t->ssh == NULL) { /* the first connection went through the keeper */
    if (open_kept(t, &fd, err) < 0)
      return -1;
    if (fd < 0)
      return agt_error_kind(err, AGT_E_INTERNAL, "no connection to %s", t->spec);
  } else if (agt_ssh_open_unix(t->ssh, sock, &fd, err) < 0) {
    return -1;
  }
  if (agt_rpc_open_fd(rpc, fd, err) < 0) {
    agt_rpc_close(rpc);
    return agt_error_wrap(err, "agtd at %s", t->spec);
  }
  return 0;
}

/* Whether the connection under the RPC client is gone (rather than agtd answering with an
 * error). */
static int broken(struct agt_target *t, agt_error_t e)
{
  struct pollfd pf = {t->rpc.fd, POLLIN, 0};
  char c;

  if (t->ssh && agt_ssh_dropped(t->ssh))
    return 1;
  if (e && (e->status == EPIPE || e->status == ECONNRESET || e->status == ENOTCONN))
    return 1;
  if (t->rpc.fd < 0)
    return 1;
  if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLIN | POLLHUP | POLLERR)))
    return recv(t->rpc.fd, &c, 1, MSG_PEEK) <= 0;
  return 0;
}

static int is_safe(const char *method)
{
  static const char *const safe[] = {"hello",        "daemon.status", "jail.ls",
                                     "jail.inspect", "jail.logs",     "rootfs.ls",
                                     "jail.wait",    "jail.net",      NULL};
  for (const char *const *p = safe; *p; p++)
    if (strcmp(*p, method) == 0)
      return 1;
  return 0;
}

int agt_target_call(struct agt_target *t, const char *method, json_t *params, json_t **result,
                    agt_error_t *err)
{
  cleanup_free char *why = NULL;
  const char *dropped;
  agt_error_t e2 = NULL;

  *result = NULL;
  if (agt_target_connect(t, err) < 0)
    return -1;
  if (agt_rpc_call(&t->rpc, method, params, result, err) == 0)
    return 0;
  if (!broken(t, *err))
    return -1;
  dropped = agt_target_dropped(t); /* once: with a keeper, asking connects to it */
  why = xstrdup(dropped ? dropped : (*err)->msg);
  agt_error_release(err);
  agt_target_disconnect(t);
  if (!is_safe(method))
    return agt_error_kind(err, AGT_E_STATE,
                          "%s during '%s', which agt does not send again: agtd may have acted "
                          "on it (look with 'agt jail ls')",
                          why, method);
  if (!t->quiet)
    fprintf(stderr, "agt: %s; connecting again\n", why);
  if (agt_target_connect(t, &e2) < 0) {
    agt_error_kind(err, e2->kind, "%s, and connecting again failed: %s", why, e2->msg);
    agt_error_release(&e2);
    return -1;
  }
  return agt_rpc_call(&t->rpc, method, params, result, err);
}
