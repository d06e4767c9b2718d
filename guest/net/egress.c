#include "egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "jailspec.h"
#include "proto.h"
#include "relay.h"
#include "xalloc.h"

#define HEADER_MAX 16384
#define CONNECT_TIMEOUT_MS 30000
#define NETLOG_MAX (4u << 20)

/* Policy */

const char *agt_net_mode_name(enum agt_net_mode m)
{
  return m == AGT_NET_NONE ? "none" : m == AGT_NET_OPEN ? "open" : "allow";
}

static int host_chars_ok(const char *h)
{
  if (*h == '\0' || strlen(h) > 253)
    return 0;
  for (; *h; h++)
    if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-' && *h != ':' && *h != '_')
      return 0;
  return 1;
}

static int is_ip_literal(const char *h)
{
  unsigned char buf[16];
  return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

/* "host", "host:port", "*.suffix:port", "[v6]:port", "v4:port". */
static int parse_allow(const char *spec, struct agt_allow *a, agt_error_t *err)
{
  cleanup_free char *s = xstrdup(spec);
  char *host = s, *port = NULL;
  unsigned long pn = 0;

  memset(a, 0, sizeof *a);
  if (*s == '[') {
    char *close = strchr(s, ']');
    if (close == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "allow entry '%.100s': missing ']'", spec);
    *close = '\0';
    host = s + 1;
    if (close[1] == ':')
      port = close + 2;
    else if (close[1] != '\0')
      return agt_error_kind(err, AGT_E_INVALID, "allow entry '%.100s': junk after ']'", spec);
  } else {
    char *c = strrchr(s, ':');
    if (c && strchr(s, ':') == c) { /* one colon: host:port (more: a bare IPv6 address) */
      *c = '\0';
      port = c + 1;
    }
  }
  if (port) {
    char *end;
    errno = 0;
    pn = strtoul(port, &end, 10);
    if (errno || *end || pn == 0 || pn > 65535 || !isdigit((unsigned char)*port))
      return agt_error_kind(err, AGT_E_INVALID, "allow entry '%.100s': bad port", spec);
  }
  for (char *p = host; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  if (strncmp(host, "*.", 2) == 0) {
    a->wildcard = 1;
    host += 2;
  }
  if (!host_chars_ok(host) || (strchr(host, ':') && !is_ip_literal(host)))
    return agt_error_kind(err, AGT_E_INVALID, "allow entry '%.100s': not a host name or address",
                          spec);
  a->literal = !a->wildcard && is_ip_literal(host);
  a->host = xstrdup(host);
  a->port = (uint16_t)pn;
  return 0;
}

void agt_net_policy_release(struct agt_net_policy *p)
{
  for (size_t i = 0; i < p->nallow; i++)
    free(p->allow[i].host);
  free(p->allow);
  memset(p, 0, sizeof *p);
}

int agt_net_policy_from_json(json_t *obj, struct agt_net_policy *p, agt_error_t *err)
{
  static const char *const known[] = {"mode", "allow", "max_conns", "idle_ms", NULL};
  const char *mode = AGT_RUN_DEFAULT(NET);
  json_t *v, *allow;
  size_t i;

  memset(p, 0, sizeof *p);
  p->mode = AGT_NET_ALLOW;
  p->max_conns = AGT_EGRESS_DEFAULT_CONNS;
  p->idle_ms = AGT_EGRESS_DEFAULT_IDLE_MS;
  if (obj == NULL || json_is_null(obj))
    return 0;
  if (!json_is_object(obj))
    return agt_error_kind(err, AGT_E_INVALID, "'network' must be an object");
  if (agt_param_only(obj, known, "network.", err) < 0)
    return -1;
  /* the jail spec's choices, in enum agt_net_mode's order (a request's were checked by
   * it; a record's are checked here) */
  v = json_object_get(obj, "mode");
  if (v)
    mode = json_string_value(v);
  if (mode == NULL || agt_jail_run_choice(AGT_RUN_NET, mode) < 0) {
    cleanup_free char *choices = agt_jail_run_choices_text(AGT_RUN_NET);
    return agt_error_kind(err, AGT_E_INVALID, "'network.mode' must be %s%s%.32s%s", choices,
                          mode ? ", not '" : "", mode ? mode : "", mode ? "'" : "");
  }
  p->mode = (enum agt_net_mode)agt_jail_run_choice(AGT_RUN_NET, mode);
  v = json_object_get(obj, "max_conns");
  if (v) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096)
      return agt_error_kind(err, AGT_E_INVALID, "'network.max_conns' must be within 1..4096");
    p->max_conns = (unsigned)json_integer_value(v);
  }
  v = json_object_get(obj, "idle_ms");
  if (v) {
    if (!json_is_integer(v) || json_integer_value(v) < 100 ||
        json_integer_value(v) > 24 * 3600 * 1000)
      return agt_error_kind(err, AGT_E_INVALID, "'network.idle_ms' must be within 100..86400000");
    p->idle_ms = (uint64_t)json_integer_value(v);
  }
  allow = json_object_get(obj, "allow");
  if (allow == NULL)
    return 0;
  if (!json_is_array(allow) || json_array_size(allow) > AGT_EGRESS_ALLOW_MAX)
    return agt_error_kind(err, AGT_E_INVALID,
                          "'network.allow' must be an array of at most %d hosts",
                          AGT_EGRESS_ALLOW_MAX);
  p->allow = xzalloc((json_array_size(allow) + 1) * sizeof *p->allow);
  json_array_foreach(allow, i, v)
  {
    if (!json_is_string(v)) {
      agt_net_policy_release(p);
      return agt_error_kind(err, AGT_E_INVALID, "'network.allow[%zu]' must be a string", i);
    }
    if (parse_allow(json_string_value(v), &p->allow[p->nallow], err) < 0) {
      agt_net_policy_release(p);
      return -1;
    }
    p->nallow++;
  }
  return 0;
}

json_t *agt_net_policy_to_json(const struct agt_net_policy *p)
{
  json_t *allow = json_array();

  for (size_t i = 0; i < p->nallow; i++) {
    const struct agt_allow *a = &p->allow[i];
    char buf[300], port[8] = "";
    if (a->port)
      snprintf(port, sizeof port, ":%u", a->port);
    if (strchr(a->host, ':') && a->port)
      snprintf(buf, sizeof buf, "[%s]%s", a->host, port);
    else
      snprintf(buf, sizeof buf, "%s%s%s", a->wildcard ? "*." : "", a->host, port);
    json_array_append_new(allow, json_string(buf));
  }
  return json_pack("{s:s, s:o, s:i, s:I}", "mode", agt_net_mode_name(p->mode), "allow", allow,
                   "max_conns", (int)p->max_conns, "idle_ms", (json_int_t)p->idle_ms);
}

static int host_matches(const struct agt_allow *a, const char *host)
{
  size_t hl = strlen(host), al = strlen(a->host);

  if (!a->wildcard)
    return strcmp(a->host, host) == 0;
  /* "*.example.com" matches "api.example.com", not "example.com" or "badexample.com" */
  return hl > al + 1 && host[hl - al - 1] == '.' && strcmp(host + hl - al, a->host) == 0;
}

const char *agt_net_check_host(const struct agt_net_policy *p, const char *host, uint16_t port)
{
  if (p->mode != AGT_NET_ALLOW)
    return "the jail's network mode has no proxy";
  for (size_t i = 0; i < p->nallow; i++)
    if ((p->allow[i].port == 0 || p->allow[i].port == port) && host_matches(&p->allow[i], host))
      return NULL;
  return "host not on the jail's allowlist";
}

/* Loopback, private, link-local (metadata at 169.254.169.254 included), shared, multicast,
 * reserved and unspecified addresses: not reachable through a name. */
static int addr_is_special(const struct sockaddr *sa)
{
  if (sa->sa_family == AF_INET) {
    uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
    return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 || (a >> 16) == 0xa9fe ||
           (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a >> 22) == (0x64400000u >> 22) ||
           (a >> 28) >= 0xe || (a >> 8) == 0xc00000 || (a >> 17) == (0xc6120000u >> 17);
  }
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a)) {
      struct sockaddr_in v4 = {.sin_family = AF_INET};
      memcpy(&v4.sin_addr, &a->s6_addr[12], 4);
      return addr_is_special((struct sockaddr *)&v4);
    }
    return IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
           IN6_IS_ADDR_SITELOCAL(a) || IN6_IS_ADDR_MULTICAST(a) || (a->s6_addr[0] & 0xfe) == 0xfc;
  }
  return 1;
}

static void addr_string(const struct sockaddr *sa, char *buf, size_t n)
{
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)n);
  else
    snprintf(buf, n, "?");
}

const char *agt_net_check_addr(const struct agt_net_policy *p, const struct sockaddr *sa,
                               const char *host, uint16_t port)
{
  char a[INET6_ADDRSTRLEN];

  (void)host;
  if (!addr_is_special(sa))
    return NULL;
  addr_string(sa, a, sizeof a);
  for (size_t i = 0; i < p->nallow; i++)
    if (p->allow[i].literal && (p->allow[i].port == 0 || p->allow[i].port == port) &&
        strcmp(p->allow[i].host, a) == 0)
      return NULL;
  return "the address is private, loopback, link-local or reserved, and not listed by address";
}

/* The proxy */

enum conn_state { C_HEADERS, C_RESOLVING, C_CONNECTING, C_RELAY, C_REFUSING, C_CLOSING };

struct conn {
  struct conn *next;
  agt_egress_t *e;
  enum conn_state state;
  uv_tcp_t client, upstream;
  uv_timer_t timer;
  uv_getaddrinfo_t gai;
  uv_connect_t connect_req;
  int handles;
  int gai_pending, connect_pending;
  int upstream_open;
  char *head;
  size_t head_len;
  char *forward; /* plain HTTP: the request as sent upstream */
  size_t forward_len;
  char method[16];
  char *host;
  uint16_t port;
  int is_connect;
  size_t own_down; /* bytes of the proxy's own answer ahead of the relayed ones (CONNECT) */
  char addr[INET6_ADDRSTRLEN];
  agt_relay_t relay; /* C_RELAY: side 0 the client, side 1 upstream */
  uint64_t t0;
};

struct agt_egress_s {
  uv_loop_t *loop;
  char *jail;
  struct agt_net_policy policy;
  uv_tcp_t listener;
  int listener_open;
  int log_fd;
  char *log_path;
  uint64_t log_size;
  struct conn *conns;
  unsigned nconns;
  uint64_t blocked; /* connections refused by the policy ("blocked" in the log) */
  int stopping;
};

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t agt_netlog_blocked(const char *path)
{
  static const char mark[] = "\"decision\":\"blocked\"";
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  char buf[65536 + sizeof mark];
  size_t keep = 0;
  uint64_t n = 0;
  ssize_t r;

  if (fd < 0)
    return 0;
  /* a mark can straddle two reads: the last bytes of one are kept before the next */
  while ((r = read(fd, buf + keep, sizeof buf - keep)) > 0) {
    size_t len = keep + (size_t)r;
    const char *p = buf, *end = buf + len;
    while ((p = memmem(p, (size_t)(end - p), mark, sizeof mark - 1)) != NULL) {
      n++;
      p += sizeof mark - 1;
    }
    keep = len < sizeof mark - 1 ? len : sizeof mark - 2;
    memmove(buf, end - keep, keep);
  }
  return n;
}

/* bytes_up and bytes_down: what was delivered to each side, not what was read. */
static void netlog(agt_egress_t *e, struct conn *c, const char *decision, const char *reason)
{
  json_t *o =
      json_pack("{s:I, s:s, s:s, s:s, s:i}", "time_ms", (json_int_t)now_ms(), "decision", decision,
                "method", c->method, "host", c->host ? c->host : "", "port", (int)c->port);
  char *line;

  if (reason)
    json_object_set_new(o, "reason", json_string(reason));
  if (c->addr[0])
    json_object_set_new(o, "address", json_string(c->addr));
  if (strcmp(decision, "closed") == 0) {
    json_object_set_new(o, "bytes_up", json_integer((json_int_t)c->relay.dir[0].delivered));
    uint64_t down = c->relay.dir[1].delivered;
    down = down > c->own_down ? down - c->own_down : 0;
    json_object_set_new(o, "bytes_down", json_integer((json_int_t)down));
    json_object_set_new(o, "duration_ms", json_integer((json_int_t)(now_ms() - c->t0)));
  }
  line = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (line == NULL)
    return;
  if (e->log_fd >= 0) {
    size_t n = strlen(line);
    line[n] = '\n';
    if (e->log_size + n + 1 > NETLOG_MAX) {
      cleanup_free char *old = xasprintf("%s.1", e->log_path);
      close(e->log_fd);
      rename(e->log_path, old);
      e->log_fd = open(e->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
      e->log_size = 0;
    }
    if (e->log_fd >= 0 && write(e->log_fd, line, n + 1) > 0)
      e->log_size += n + 1;
  }
  free(line);
}

static void egress_maybe_free(agt_egress_t *e);

static void conn_free(struct conn *c)
{
  agt_egress_t *e = c->e;
  struct conn **p;

  for (p = &e->conns; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      e->nconns--;
      break;
    }
  free(c->head);
  free(c->forward);
  free(c->host);
  free(c);
  egress_maybe_free(e);
}

static void conn_handle_closed(uv_handle_t *h)
{
  struct conn *c = h->data;

  if (--c->handles == 0 && !c->gai_pending && !c->connect_pending)
    conn_free(c);
}

/* Close at once (both sockets: what is still queued is dropped).  reason: why a relayed
 * connection ended early, for the log. */
static void conn_close_why(struct conn *c, const char *reason)
{
  if (c->state == C_CLOSING)
    return;
  if (c->state == C_RELAY) {
    agt_relay_stop(&c->relay);
    netlog(c->e, c, "closed", reason);
  }
  c->state = C_CLOSING;
  c->client.data = c; /* the relay had them */
  c->upstream.data = c;
  if (c->gai_pending)
    uv_cancel((uv_req_t *)&c->gai);
  uv_close((uv_handle_t *)&c->client, conn_handle_closed);
  uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
  if (c->upstream_open)
    uv_close((uv_handle_t *)&c->upstream, conn_handle_closed);
}

static void conn_close(struct conn *c)
{
  conn_close_why(c, NULL);
}

struct wreq {
  uv_write_t req;
  struct conn *c;
  char *data;
};

static void write_done(uv_write_t *w, int status)
{
  struct wreq *wr = (struct wreq *)w;
  struct conn *c = wr->c;

  free(wr->data);
  free(wr);
  if (status < 0 && status != UV_ECANCELED)
    conn_close(c);
}

/* Queue the proxy's own answer (taken) to the client. */
static void send_client(struct conn *c, char *data, size_t len)
{
  struct wreq *wr = xzalloc(sizeof *wr);
  uv_buf_t b = uv_buf_init(data, (unsigned)len);

  wr->c = c;
  wr->data = data;
  if (uv_write(&wr->req, (uv_stream_t *)&c->client, &b, 1, write_done) < 0) {
    free(data);
    free(wr);
    conn_close(c);
  }
}

static void refused_cb(uv_shutdown_t *sd, int status)
{
  struct conn *c = sd->data;

  (void)status;
  free(sd);
  conn_close(c);
}

/* Answer with an error and close once the answer is out.  The same request always gets
 * the same answer: a status, a reason header and the reason as the body. */
static void refuse(struct conn *c, int code, const char *reason)
{
  const char *text = code == 403   ? "Forbidden"
                     : code == 400 ? "Bad Request"
                     : code == 502 ? "Bad Gateway"
                     : code == 504 ? "Gateway Timeout"
                                   : "Too Many Requests";
  char *resp = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Agt-Reason: %s\r\n"
                         "Connection: close\r\nContent-Length: %zu\r\n\r\nagt: %s\n",
                         code, text, reason, strlen(reason) + 6, reason);
  uv_shutdown_t *sd = xzalloc(sizeof *sd);

  if (code == 403 || code == 429)
    c->e->blocked++;
  netlog(c->e, c, code == 403 || code == 429 ? "blocked" : "failed", reason);
  c->state = C_REFUSING;
  uv_read_stop((uv_stream_t *)&c->client);
  send_client(c, resp, strlen(resp));
  if (c->state == C_CLOSING) {
    free(sd);
    return;
  }
  sd->data = c;
  if (uv_shutdown(sd, (uv_stream_t *)&c->client, refused_cb) < 0) {
    free(sd);
    conn_close(c);
  }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)h;
  (void)suggested;
  buf->base = xmalloc(65536);
  buf->len = 65536;
}

static void idle_cb(uv_timer_t *t)
{
  struct conn *c = t->data;

  if (c->state == C_RELAY) {
    uint64_t idle = uv_now(c->e->loop) - c->relay.last_ms;
    if (idle < c->e->policy.idle_ms) { /* bytes moved meanwhile */
      uv_timer_start(&c->timer, idle_cb, c->e->policy.idle_ms - idle, 0);
      return;
    }
    netlog(c->e, c, "idle", "idle timeout");
    conn_close(c);
  } else if (c->state == C_RESOLVING || c->state == C_CONNECTING) {
    refuse(c, 504, "timed out reaching the host");
  } else if (c->state == C_HEADERS) {
    snprintf(c->method, sizeof c->method, "?");
    refuse(c, 400, "no complete request in time");
  } else {
    conn_close(c);
  }
}

static void relay_done(agt_relay_t *r, int status)
{
  struct conn *c = r->data;

  conn_close_why(c, status < 0 ? uv_strerror(status) : NULL);
}

static void connected(uv_connect_t *req, int status)
{
  struct conn *c = req->data;

  c->connect_pending = 0;
  if (c->state != C_CONNECTING) { /* refused meanwhile (timeout) or closing */
    if (c->state == C_CLOSING && c->handles == 0 && !c->gai_pending)
      conn_free(c);
    return;
  }
  if (status < 0) {
    char reason[128];
    snprintf(reason, sizeof reason, "cannot connect to %s port %u: %s", c->addr, c->port,
             uv_strerror(status));
    refuse(c, 502, reason);
    return;
  }
  netlog(c->e, c, "allowed", NULL);
  c->state = C_RELAY;
  agt_relay_init(&c->relay, (uv_stream_t *)&c->client, (uv_stream_t *)&c->upstream, relay_done, c);
  uv_timer_stop(&c->timer);
  uv_timer_start(&c->timer, idle_cb, c->e->policy.idle_ms, 0);
  /* The answer to CONNECT goes ahead of the relayed bytes (not counted in bytes_down: it
   * is the proxy's own); the request head (plain HTTP) or what followed CONNECT's head goes
   * upstream first. */
  if (c->is_connect) {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    int rc = agt_relay_write(&c->relay, 0, xstrdup(ok), sizeof ok - 1);
    c->own_down = sizeof ok - 1;
    if (rc < 0) {
      conn_close_why(c, uv_strerror(rc));
      return;
    }
  }
  if (c->forward) {
    int rc = agt_relay_write(&c->relay, 1, steal_pointer(&c->forward), c->forward_len);
    if (rc < 0) {
      conn_close_why(c, uv_strerror(rc));
      return;
    }
  }
  agt_relay_start(&c->relay);
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
  struct conn *c = req->data;
  const char *why = "the name did not resolve";
  struct addrinfo *ai, *pick = NULL;

  c->gai_pending = 0;
  if (c->state != C_RESOLVING) { /* refused meanwhile (timeout) or closing */
    uv_freeaddrinfo(res);
    if (c->state == C_CLOSING && c->handles == 0 && !c->connect_pending)
      conn_free(c);
    return;
  }
  if (status < 0) {
    char reason[160];
    snprintf(reason, sizeof reason, "cannot resolve %s: %s", c->host, uv_strerror(status));
    uv_freeaddrinfo(res);
    refuse(c, 502, reason);
    return;
  }
  for (ai = res; ai; ai = ai->ai_next) {
    const char *w = agt_net_check_addr(&c->e->policy, ai->ai_addr, c->host, c->port);
    if (w == NULL) {
      pick = ai;
      break;
    }
    why = w;
    if (c->addr[0] == '\0')
      addr_string(ai->ai_addr, c->addr, sizeof c->addr);
  }
  if (pick == NULL) {
    uv_freeaddrinfo(res);
    refuse(c, 403, why);
    return;
  }
  addr_string(pick->ai_addr, c->addr, sizeof c->addr);
  if (pick->ai_family == AF_INET)
    ((struct sockaddr_in *)pick->ai_addr)->sin_port = htons(c->port);
  else
    ((struct sockaddr_in6 *)pick->ai_addr)->sin6_port = htons(c->port);
  uv_tcp_init(c->e->loop, &c->upstream);
  uv_tcp_nodelay(&c->upstream, 1); /* a relay must not add Nagle's delay to small writes */
  c->upstream.data = c;
  c->upstream_open = 1;
  c->handles++;
  c->state = C_CONNECTING;
  c->connect_req.data = c;
  if (uv_tcp_connect(&c->connect_req, &c->upstream, pick->ai_addr, connected) < 0) {
    uv_freeaddrinfo(res);
    refuse(c, 502, "cannot connect");
    return;
  }
  c->connect_pending = 1;
  uv_freeaddrinfo(res);
}

/* "host:port" or "[v6]:port" into c->host / c->port. */
static int split_hostport(struct conn *c, const char *s, size_t n, uint16_t default_port)
{
  cleanup_free char *t = xstrndup(s, n);
  char *host = t, *port = NULL;
  unsigned long pn = default_port;

  if (*t == '[') {
    char *close = strchr(t, ']');
    if (!close)
      return -1;
    *close = '\0';
    host = t + 1;
    if (close[1] == ':')
      port = close + 2;
    else if (close[1])
      return -1;
  } else {
    char *colon = strchr(t, ':');
    if (colon) {
      *colon = '\0';
      port = colon + 1;
    }
  }
  if (port) {
    char *end;
    pn = strtoul(port, &end, 10);
    if (*end || !isdigit((unsigned char)*port) || pn == 0 || pn > 65535)
      return -1;
  }
  if (pn == 0)
    return -1;
  for (char *p = host; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  if (!host_chars_ok(host) || (strchr(host, ':') && !is_ip_literal(host)))
    return -1;
  c->host = xstrdup(host);
  c->port = (uint16_t)pn;
  return 0;
}

static int header_is(const char *line, size_t n, const char *name)
{
  size_t k = strlen(name);
  return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* Parse the request head; returns 0, or -1 after refusing. */
static int parse_request(struct conn *c, size_t head_end)
{
  char *h = c->head, *eol = memchr(h, '\n', head_end);
  char *sp1, *sp2, *target;
  size_t tlen;

  if (eol == NULL)
    return -1;
  sp1 = memchr(h, ' ', (size_t)(eol - h));
  sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2 || (size_t)(sp1 - h) >= sizeof c->method || sp1 == h) {
    snprintf(c->method, sizeof c->method, "?");
    refuse(c, 400, "not an HTTP request");
    return -1;
  }
  memcpy(c->method, h, (size_t)(sp1 - h));
  c->method[sp1 - h] = '\0';
  for (char *m = c->method; *m; m++)
    if (!isupper((unsigned char)*m)) {
      refuse(c, 400, "not an HTTP method");
      return -1;
    }
  target = sp1 + 1;
  tlen = (size_t)(sp2 - target);
  if (strcmp(c->method, "CONNECT") == 0) {
    c->is_connect = 1;
    if (split_hostport(c, target, tlen, 0) < 0) {
      refuse(c, 400, "CONNECT needs host:port");
      return -1;
    }
    return 0;
  }
  if (tlen < 8 || strncasecmp(target, "http://", 7) != 0) {
    refuse(c, 400, "only CONNECT and absolute http:// requests go through this proxy");
    return -1;
  }
  {
    char *auth = target + 7, *path = memchr(auth, '/', tlen - 7);
    size_t alen = path ? (size_t)(path - auth) : tlen - 7;
    const char *p = path ? path : "/";
    size_t plen = path ? tlen - 7 - alen : 1;
    size_t cap = head_end + 64, n;
    char *out, *line, *next;

    if (memchr(auth, '@', alen) || split_hostport(c, auth, alen, 80) < 0) {
      refuse(c, 400, "bad host in the request URL");
      return -1;
    }
    /* Rewrite to origin form, drop hop-by-hop proxy headers, ask for one request per
     * connection (the next one may be for another host and must be checked again). */
    out = xmalloc(cap + (c->head_len - head_end));
    n = (size_t)snprintf(out, cap, "%s %.*s%.*s", c->method, (int)plen, p, (int)(eol - sp2 + 1),
                         sp2);
    for (line = eol + 1; line < h + head_end; line = next) {
      char *e = memchr(line, '\n', (size_t)(h + head_end - line));
      size_t ln;
      next = e ? e + 1 : h + head_end;
      ln = (size_t)(next - line);
      if (ln <= 2) /* the blank line */
        break;
      if (header_is(line, ln, "Proxy-Connection") || header_is(line, ln, "Proxy-Authorization") ||
          header_is(line, ln, "Connection") || header_is(line, ln, "Keep-Alive"))
        continue;
      memcpy(out + n, line, ln);
      n += ln;
    }
    memcpy(out + n, "Connection: close\r\n\r\n", 21);
    n += 21;
    /* whatever body bytes came with the head */
    memcpy(out + n, c->head + head_end, c->head_len - head_end);
    n += c->head_len - head_end;
    c->forward = out;
    c->forward_len = n;
  }
  return 0;
}

static void head_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct conn *c = s->data;
  char *end;
  size_t head_end;
  const char *why;
  char portbuf[8];
  struct addrinfo hints;

  if (n <= 0) {
    free(buf->base);
    if (n < 0)
      conn_close(c);
    return;
  }
  c->head = xrealloc(c->head, c->head_len + (size_t)n + 1);
  memcpy(c->head + c->head_len, buf->base, (size_t)n);
  c->head_len += (size_t)n;
  c->head[c->head_len] = '\0';
  free(buf->base);
  end = strstr(c->head, "\r\n\r\n");
  if (end == NULL) {
    if (c->head_len > HEADER_MAX) {
      uv_read_stop(s);
      snprintf(c->method, sizeof c->method, "?");
      refuse(c, 400, "request head too large");
    }
    return;
  }
  uv_read_stop(s);
  head_end = (size_t)(end - c->head) + 4;
  if (parse_request(c, head_end) < 0)
    return;
  if (c->is_connect && c->head_len > head_end) {
    /* bytes after a CONNECT head belong to the tunnel */
    c->forward_len = c->head_len - head_end;
    c->forward = xmalloc(c->forward_len);
    memcpy(c->forward, c->head + head_end, c->forward_len);
  }
  why = agt_net_check_host(&c->e->policy, c->host, c->port);
  if (why) {
    refuse(c, 403, why);
    return;
  }
  c->state = C_RESOLVING;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(portbuf, sizeof portbuf, "%u", c->port);
  c->gai.data = c;
  if (uv_getaddrinfo(c->e->loop, &c->gai, resolved, c->host, portbuf, &hints) < 0) {
    refuse(c, 502, "cannot resolve");
    return;
  }
  c->gai_pending = 1;
}

static void on_connection(uv_stream_t *server, int status)
{
  agt_egress_t *e = server->data;
  struct conn *c;

  if (status < 0 || e->stopping)
    return;
  c = xzalloc(sizeof *c);
  c->e = e;
  c->t0 = now_ms();
  uv_tcp_init(e->loop, &c->client);
  c->client.data = c;
  uv_timer_init(e->loop, &c->timer);
  c->timer.data = c;
  c->handles = 2;
  c->next = e->conns;
  e->conns = c;
  e->nconns++;
  if (uv_accept(server, (uv_stream_t *)&c->client) < 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->client, 1);
  uv_timer_start(&c->timer, idle_cb, CONNECT_TIMEOUT_MS, 0);
  if (e->nconns > e->policy.max_conns) {
    snprintf(c->method, sizeof c->method, "?");
    refuse(c, 429, "too many connections from this jail");
    return;
  }
  uv_read_start((uv_stream_t *)&c->client, alloc_cb, head_read);
}

static int policy_copy(struct agt_net_policy *dst, const struct agt_net_policy *src)
{
  *dst = *src;
  dst->allow = xzalloc((src->nallow + 1) * sizeof *dst->allow);
  for (size_t i = 0; i < src->nallow; i++) {
    dst->allow[i] = src->allow[i];
    dst->allow[i].host = xstrdup(src->allow[i].host);
  }
  return 0;
}

agt_egress_t *agt_egress_start(uv_loop_t *loop, const char *jail, const struct agt_net_policy *p,
                               int listen_fd, const char *log_path, agt_error_t *err)
{
  agt_egress_t *e = xzalloc(sizeof *e);
  struct stat st;
  int r;

  e->loop = loop;
  e->jail = xstrdup(jail);
  policy_copy(&e->policy, p);
  e->log_path = xstrdup(log_path);
  e->log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (e->log_fd >= 0 && fstat(e->log_fd, &st) == 0)
    e->log_size = (uint64_t)st.st_size;
  uv_tcp_init(loop, &e->listener);
  e->listener.data = e;
  e->listener_open = 1;
  r = uv_tcp_open(&e->listener, listen_fd);
  if (r == 0)
    r = uv_listen((uv_stream_t *)&e->listener, 128, on_connection);
  if (r < 0) {
    agt_error_kind(err, AGT_E_INTERNAL, "serve the egress proxy of jail '%s': %s", jail,
                   uv_strerror(r));
    agt_egress_stop(e);
    return NULL;
  }
  return e;
}

uint64_t agt_egress_blocked(const agt_egress_t *e)
{
  return e ? e->blocked : 0;
}

static void listener_closed(uv_handle_t *h)
{
  agt_egress_t *e = h->data;

  e->listener_open = 0;
  egress_maybe_free(e);
}

static void egress_maybe_free(agt_egress_t *e)
{
  if (!e->stopping || e->listener_open || e->conns)
    return;
  if (e->log_fd >= 0)
    close(e->log_fd);
  agt_net_policy_release(&e->policy);
  free(e->log_path);
  free(e->jail);
  free(e);
}

void agt_egress_stop(agt_egress_t *e)
{
  if (e == NULL || e->stopping)
    return;
  e->stopping = 1;
  for (struct conn *c = e->conns; c; c = c->next)
    conn_close(c);
  uv_close((uv_handle_t *)&e->listener, listener_closed);
}

int agt_egress_listen_in(int netns_fd, int home_fd, agt_error_t *err)
{
  struct sockaddr_in sa;
  int fd = -1, one = 1, e = 0;

  if (setns(netns_fd, CLONE_NEWNET) < 0)
    return agt_error_make(err, errno, "enter the jail's network namespace");
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(AGT_EGRESS_PORT);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0)
    e = errno;
  if (setns(home_fd, CLONE_NEWNET) < 0) {
    /* The loop thread must not stay in a jail's namespace. */
    fprintf(stderr, "agtd: cannot return to agtd's network namespace: %s\n", strerror(errno));
    abort();
  }
  if (e) {
    if (fd >= 0)
      close(fd);
    return agt_error_make(err, e, "listen on 127.0.0.1:%d in the jail", AGT_EGRESS_PORT);
  }
  return fd;
}
