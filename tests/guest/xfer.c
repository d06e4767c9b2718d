/* probe xfer: transfers of a known pattern through agtd's relays, each checked by length and
 * hash (the guest and e2e tests).
 *
 *   probe xfer serve PORT           serve on 127.0.0.1:PORT (0: any; prints the port), a
 *                                   process per connection
 *   probe xfer get MODE N HOST PORT [PROXYPORT connect|http] [SLOW_US]
 *                                   one transfer, directly or through the proxy; prints
 *                                   "ok MODE N hash=H", or "FAIL ..." and exits 1
 *   probe xfer gen N                the pattern's first N bytes to stdout
 *   probe xfer check N [SLOW_US]    stdin must be exactly the pattern's first N bytes
 *
 * A transfer is an HTTP/1.0-looking request "GET /MODE/N[/SLOW_US]", answered with
 * "HTTP/1.0 200 OK\r\n\r\n" (19 bytes) and a body; the server always closes first:
 *   down   the body is N pattern bytes
 *   half   the client sends the request, half-closes, then the server sends N bytes
 *   echo   the client sends N pattern bytes and half-closes; the server echoes them
 *   up     the client sends N pattern bytes and half-closes; the server checks them and
 *          answers "ok N" or what was wrong (SLOW_US: reading slowly)
 *   reset  the body is N pattern bytes, then the server resets the connection (SO_LINGER 0)
 *          instead of closing it: the client must see the reset (ECONNRESET), not a clean
 *          end, after an intact prefix of the body
 * SLOW_US on the client side makes it a slow reader: a pause of SLOW_US after every read of
 * at most 16 KiB. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int probe_xfer(int argc, char **argv);

#define HEAD_OK "HTTP/1.0 200 OK\r\n\r\n"

static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The pattern's bytes at offset off. */
static void pattern(uint64_t off, unsigned char *buf, size_t len)
{
  for (size_t i = 0; i < len; i++) {
    uint64_t o = off + i;
    buf[i] = (unsigned char)(mix(o >> 3) >> (8 * (o & 7)));
  }
}

/* A running check of received bytes against the pattern, with an FNV-1a hash. */
struct check {
  uint64_t got, bad_at, hash;
  int bad;
};

static void check_init(struct check *c)
{
  memset(c, 0, sizeof *c);
  c->hash = 0xcbf29ce484222325ull;
}

static void check_feed(struct check *c, const unsigned char *data, size_t len)
{
  unsigned char want[16384];

  while (len > 0) {
    size_t n = len < sizeof want ? len : sizeof want;
    pattern(c->got, want, n);
    for (size_t i = 0; i < n; i++) {
      c->hash = (c->hash ^ data[i]) * 0x100000001b3ull;
      if (!c->bad && data[i] != want[i]) {
        c->bad = 1;
        c->bad_at = c->got + i;
      }
    }
    c->got += n;
    data += n;
    len -= n;
  }
}

static uint64_t pattern_hash(uint64_t n)
{
  struct check c;
  unsigned char buf[16384];

  check_init(&c);
  for (uint64_t off = 0; off < n;) {
    size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
    pattern(off, buf, k);
    check_feed(&c, buf, k);
    off += k;
  }
  return c.hash;
}

/* "ok" or why not, for N expected bytes. */
static int check_verdict(const struct check *c, uint64_t n, const char *what, char *out,
                         size_t outlen)
{
  if (c->bad) {
    snprintf(out, outlen, "FAIL %s %llu: corrupt at byte %llu", what, (unsigned long long)n,
             (unsigned long long)c->bad_at);
    return -1;
  }
  if (c->got != n) {
    snprintf(out, outlen, "FAIL %s %llu: got %llu bytes (%s)", what, (unsigned long long)n,
             (unsigned long long)c->got, c->got < n ? "short" : "long");
    return -1;
  }
  if (c->hash != pattern_hash(n)) {
    snprintf(out, outlen, "FAIL %s %llu: hash differs", what, (unsigned long long)n);
    return -1;
  }
  snprintf(out, outlen, "ok %s %llu hash=%016llx", what, (unsigned long long)n,
           (unsigned long long)c->hash);
  return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
  const char *p = data;

  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

static int send_pattern(int fd, uint64_t n)
{
  unsigned char buf[65536];

  for (uint64_t off = 0; off < n;) {
    size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
    pattern(off, buf, k);
    if (write_all(fd, buf, k) < 0)
      return -1;
    off += k;
  }
  return 0;
}

/* Read up to and including "\r\n\r\n" one byte at a time (nothing past it is consumed). */
static int read_head(int fd, char *buf, size_t max)
{
  size_t n = 0;

  while (n + 1 < max) {
    ssize_t r = read(fd, buf + n, 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    n++;
    buf[n] = '\0';
    if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
      return (int)n;
  }
  return -1;
}

/* Server side */

static void serve_one(int fd)
{
  char head[4096], mode[16];
  unsigned long long n = 0, slow = 0;
  unsigned char buf[65536];

  if (read_head(fd, head, sizeof head) < 0 ||
      sscanf(head, "GET /%15[a-z]/%llu/%llu", mode, &n, &slow) < 2) {
    dprintf(fd, "HTTP/1.0 400 Bad Request\r\n\r\n");
    return;
  }
  if (strcmp(mode, "down") == 0) {
    if (write_all(fd, HEAD_OK, strlen(HEAD_OK)) == 0)
      send_pattern(fd, n);
  } else if (strcmp(mode, "reset") == 0) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    if (write_all(fd, HEAD_OK, strlen(HEAD_OK)) == 0)
      send_pattern(fd, n);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* the close resets */
  } else if (strcmp(mode, "half") == 0) {
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
      ; /* until the client's half-close */
    if (r == 0 && write_all(fd, HEAD_OK, strlen(HEAD_OK)) == 0)
      send_pattern(fd, n);
  } else if (strcmp(mode, "echo") == 0) {
    ssize_t r;
    if (write_all(fd, HEAD_OK, strlen(HEAD_OK)) < 0)
      return;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
      if (r > 0 && write_all(fd, buf, (size_t)r) < 0)
        return;
  } else if (strcmp(mode, "up") == 0) {
    struct check c;
    char verdict[160];
    ssize_t r;
    check_init(&c);
    while ((r = read(fd, buf, slow ? 16384 : sizeof buf)) > 0 || (r < 0 && errno == EINTR)) {
      if (r > 0)
        check_feed(&c, buf, (size_t)r);
      if (slow)
        usleep((useconds_t)slow);
    }
    check_verdict(&c, n, "up", verdict, sizeof verdict);
    dprintf(fd, "%s%s\n", HEAD_OK, verdict);
  } else {
    dprintf(fd, "HTTP/1.0 400 Bad Request\r\n\r\n");
  }
}

static int xfer_serve(int argc, char **argv)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd, one = 1;

  if (argc < 4)
    return 2;
  signal(SIGCHLD, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(argv[3]));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
    printf("xfer serve: %s\n", strerror(errno));
    return 1;
  }
  printf("serving on 127.0.0.1:%u\n", ntohs(sa.sin_port));
  fflush(stdout);
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return 1;
    }
    if (fork() == 0) {
      close(fd);
      serve_one(c);
      close(c); /* the server closes first */
      _exit(0);
    }
    close(c);
  }
}

/* Client side */

static int connect_to(const char *host, int port)
{
  struct sockaddr_in sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

static int fail(const char *mode, unsigned long long n, const char *why)
{
  printf("FAIL %s %llu: %s (%s)\n", mode, n, why, errno ? strerror(errno) : "-");
  return 1;
}

static int xfer_get(int argc, char **argv)
{
  const char *mode, *host, *via = NULL;
  unsigned long long n;
  int port, proxy = 0, fd;
  long slow = 0;
  char head[4096], req[512], verdict[200];
  struct check c;
  int is_up, is_echo, is_reset, was_reset = 0;
  uint64_t sent = 0;
  int sending, rc;

  if (argc < 7)
    return 2;
  mode = argv[3];
  n = strtoull(argv[4], NULL, 10);
  host = argv[5];
  port = atoi(argv[6]);
  if (argc >= 9) {
    proxy = atoi(argv[7]);
    via = argv[8];
  }
  if (argc >= 10)
    slow = atol(argv[9]);
  else if (argc == 8)
    slow = atol(argv[7]);
  is_up = strcmp(mode, "up") == 0;
  is_echo = strcmp(mode, "echo") == 0;
  is_reset = strcmp(mode, "reset") == 0;
  signal(SIGPIPE, SIG_IGN);
  errno = 0;
  fd = connect_to(proxy ? "127.0.0.1" : host, proxy ? proxy : port);
  if (fd < 0)
    return fail(mode, n, "connect");
  if (via && strcmp(via, "connect") == 0) {
    snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host,
             port);
    if (write_all(fd, req, strlen(req)) < 0 || read_head(fd, head, sizeof head) < 0)
      return fail(mode, n, "CONNECT");
    if (strncmp(head, "HTTP/1.1 200", 12) != 0)
      return fail(mode, n, "CONNECT refused");
  }
  snprintf(req, sizeof req, "GET %s%s%s%s/%s/%llu HTTP/1.1\r\nHost: %s:%d\r\n\r\n",
           via && strcmp(via, "http") == 0 ? "http://" : "",
           via && strcmp(via, "http") == 0 ? host : "", via && strcmp(via, "http") == 0 ? ":" : "",
           via && strcmp(via, "http") == 0 ? argv[6] : "", mode, n, host, port);
  if (is_up && slow) /* up with SLOW_US: the server reads slowly */
    snprintf(req, sizeof req, "GET %s%s%s%s/up/%llu/%ld HTTP/1.1\r\nHost: %s:%d\r\n\r\n",
             via && strcmp(via, "http") == 0 ? "http://" : "",
             via && strcmp(via, "http") == 0 ? host : "",
             via && strcmp(via, "http") == 0 ? ":" : "",
             via && strcmp(via, "http") == 0 ? argv[6] : "", n, slow, host, port);
  if (write_all(fd, req, strlen(req)) < 0)
    return fail(mode, n, "send the request");
  sending = is_up || is_echo;
  if (!sending && strcmp(mode, "half") == 0 && shutdown(fd, SHUT_WR) < 0)
    return fail(mode, n, "half-close");
  /* send (up, echo) and receive at once; then the head, then the body */
  check_init(&c);
  {
    char resp[256];
    size_t hl = 0, rl = 0;
    int in_head = 1;
    unsigned char buf[65536], out[65536];
    for (;;) {
      struct pollfd pf = {.fd = fd, .events = POLLIN | (sending ? POLLOUT : 0)};
      if (poll(&pf, 1, -1) < 0) {
        if (errno == EINTR)
          continue;
        return fail(mode, n, "poll");
      }
      if (sending && (pf.revents & POLLOUT)) {
        size_t k = n - sent < sizeof out ? (size_t)(n - sent) : sizeof out;
        ssize_t w;
        pattern(sent, out, k);
        w = send(fd, out, k, MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
          return fail(mode, n, "send");
        if (w > 0)
          sent += (uint64_t)w;
        if (sent == n) {
          sending = 0;
          if (shutdown(fd, SHUT_WR) < 0)
            return fail(mode, n, "half-close");
        }
      }
      if (!(pf.revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      {
        ssize_t r = read(fd, buf, slow && !is_up ? 16384 : sizeof buf);
        size_t off = 0;
        if (r < 0 && errno == EINTR)
          continue;
        if (r < 0 && errno == ECONNRESET && is_reset) {
          was_reset = 1;
          break;
        }
        if (r < 0)
          return fail(mode, n, "read");
        if (r == 0)
          break;
        while (in_head && off < (size_t)r) {
          if (hl < sizeof head - 1)
            head[hl++] = (char)buf[off];
          head[hl] = '\0';
          off++;
          if (hl >= 4 && memcmp(head + hl - 4, "\r\n\r\n", 4) == 0)
            in_head = 0;
        }
        if (is_up) {
          size_t k = (size_t)r - off;
          if (k > sizeof resp - 1 - rl)
            k = sizeof resp - 1 - rl;
          memcpy(resp + rl, buf + off, k);
          rl += k;
          resp[rl] = '\0';
        } else {
          check_feed(&c, buf + off, (size_t)r - off);
        }
        if (slow && !is_up)
          usleep((useconds_t)slow);
      }
    }
    close(fd);
    if (in_head || strncmp(head, HEAD_OK, strlen(HEAD_OK)) != 0) {
      errno = 0;
      return fail(mode, n, in_head ? "no complete answer" : "not 200");
    }
    if (sending || (is_up || is_echo ? sent != n : 0)) {
      errno = 0;
      return fail(mode, n, "could not send everything");
    }
    if (is_up) {
      char want[64];
      snprintf(want, sizeof want, "ok up %llu ", n);
      rc = strncmp(resp, want, strlen(want)) == 0 ? 0 : 1;
      if (rc)
        printf("FAIL up %llu: the server says: %s", n, rl ? resp : "nothing\n");
      else
        printf("%s", resp);
      return rc;
    }
  }
  if (is_reset) {
    /* what came before the reset is a prefix of the body, intact; the end is the reset */
    errno = 0;
    if (!was_reset)
      return fail(mode, n, "a clean end of stream, not the server's reset");
    if (c.bad || c.got > n)
      return fail(mode, n, "what came before the reset is not the body's start");
    printf("ok reset %llu after %llu bytes\n", n, (unsigned long long)c.got);
    return 0;
  }
  rc = check_verdict(&c, n, mode, verdict, sizeof verdict) < 0 ? 1 : 0;
  printf("%s\n", verdict);
  return rc;
}

static int xfer_gen(int argc, char **argv)
{
  if (argc < 4)
    return 2;
  signal(SIGPIPE, SIG_IGN);
  return send_pattern(1, strtoull(argv[3], NULL, 10)) < 0 ? 1 : 0;
}

static int xfer_check(int argc, char **argv)
{
  unsigned long long n;
  long slow;
  unsigned char buf[65536];
  char verdict[200];
  struct check c;
  ssize_t r;

  if (argc < 4)
    return 2;
  n = strtoull(argv[3], NULL, 10);
  slow = argc > 4 ? atol(argv[4]) : 0;
  check_init(&c);
  while ((r = read(0, buf, slow ? 16384 : sizeof buf)) > 0 || (r < 0 && errno == EINTR)) {
    if (r > 0)
      check_feed(&c, buf, (size_t)r);
    if (slow)
      usleep((useconds_t)slow);
  }
  r = check_verdict(&c, n, "stream", verdict, sizeof verdict);
  printf("%s\n", verdict);
  return r < 0 ? 1 : 0;
}

int probe_xfer(int argc, char **argv)
{
  const char *v = argc > 2 ? argv[2] : "";

  if (!strcmp(v, "serve"))
    return xfer_serve(argc, argv);
  if (!strcmp(v, "get"))
    return xfer_get(argc, argv);
  if (!strcmp(v, "gen"))
    return xfer_gen(argc, argv);
  if (!strcmp(v, "check"))
    return xfer_check(argc, argv);
  fprintf(stderr, "usage: probe xfer serve|get|gen|check ...\n");
  return 2;
}
