/* netbench: the egress proxy's cost, measured from inside jails (bench/proxy.sh).
 *
 *   netbench serve PORT [ADDR]
 *       on ADDR:PORT (127.0.0.1), a process per connection: first byte 'e' = echo 64-byte messages,
 *       'b' = read an 8-byte count N, then send N bytes.
 *   netbench run HOST PORT ROUNDS BYTES [PROXYPORT]
 *       ROUNDS new connections (timed to the first echoed message), then ROUNDS round trips
 *       on one connection, then BYTES bulk; through the HTTP proxy at 127.0.0.1:PROXYPORT
 *       (CONNECT) when given, else directly.  Prints "connect_us P50 P99", "rtt_us P50 P99",
 *       "bulk_mib_s X".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int full_read(int fd, void *buf, size_t n)
{
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int full_write(int fd, const void *buf, size_t n)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      fprintf(stderr, "netbench: write: %s\n", w < 0 ? strerror(errno) : "nothing written");
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void serve_one(int c)
{
  char mode, buf[65536];
  uint64_t n;

  if (full_read(c, &mode, 1) < 0)
    return;
  if (mode == 'e') {
    while (full_read(c, buf, 64) == 0 && full_write(c, buf, 64) == 0)
      ;
  } else if (mode == 'b' && full_read(c, &n, sizeof n) == 0) {
    memset(buf, 'x', sizeof buf);
    while (n > 0) {
      size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
      if (full_write(c, buf, k) < 0)
        return;
      n -= k;
    }
  }
}

static int serve(int port, const char *addr)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    fprintf(stderr, "netbench serve: not an IPv4 address: %s\n", addr);
    return 2;
  }
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 128) < 0) {
    perror("netbench serve");
    return 1;
  }
  {
    socklen_t len = sizeof sa; /* port 0: the kernel picks one */
    getsockname(s, (struct sockaddr *)&sa, &len);
  }
  signal(SIGCHLD, SIG_IGN);
  printf("serving on %s:%d\n", addr, ntohs(sa.sin_port));
  fflush(stdout);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0)
      continue;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fork() == 0) {
      close(s);
      serve_one(c);
      _exit(0);
    }
    close(c);
  }
}

/* A connection to HOST:PORT, through the proxy when proxy_port > 0; -1 on failure. */
static int open_conn(const char *host, int port, int proxy_port)
{
  struct sockaddr_in sa = {.sin_family = AF_INET};
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

  sa.sin_port = htons((uint16_t)(proxy_port > 0 ? proxy_port : port));
  inet_pton(AF_INET, proxy_port > 0 ? "127.0.0.1" : host, &sa.sin_addr);
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(s);
    return -1;
  }
  if (proxy_port > 0) {
    char req[256], resp[1024];
    size_t got = 0;
    snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host,
             port);
    if (full_write(s, req, strlen(req)) < 0)
      return close(s), -1;
    while (got < sizeof resp - 1) { /* the answer's head, byte by byte: nothing more is read */
      if (read(s, resp + got, 1) != 1)
        return close(s), -1;
      got++;
      resp[got] = '\0';
      if (got >= 4 && strcmp(resp + got - 4, "\r\n\r\n") == 0)
        break;
    }
    if (strncmp(resp, "HTTP/1.1 200", 12) != 0) {
      fprintf(stderr, "netbench: the proxy said: %.80s\n", resp);
      return close(s), -1;
    }
  }
  return s;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  printf("%s %.1f %.1f\n", what, (double)v[(n - 1) / 2] / 1000.0,
         (double)v[(n * 99 + 99) / 100 - 1] / 1000.0);
}

static int run(const char *host, int port, int rounds, uint64_t bytes, int proxy)
{
  uint64_t *t = calloc((size_t)rounds, sizeof *t), t0, left;
  char msg[64], buf[65536];
  int s;

  memset(msg, 'm', sizeof msg);
  for (int i = 0; i < rounds; i++) {
    t0 = now_ns();
    char first[65] = "e";
    memcpy(first + 1, msg, 64);
    s = open_conn(host, port, proxy);
    if (s < 0 || full_write(s, first, sizeof first) < 0 || full_read(s, buf, 64) < 0) {
      fprintf(stderr, "netbench: connection %d failed\n", i);
      return 1;
    }
    t[i] = now_ns() - t0;
    close(s);
  }
  report("connect_us", t, rounds);
  s = open_conn(host, port, proxy);
  if (s < 0 || full_write(s, "e", 1) < 0) {
    fprintf(stderr, "netbench: echo connection: %s\n", strerror(errno));
    return 1;
  }
  for (int i = 0; i < rounds; i++) {
    t0 = now_ns();
    if (full_write(s, msg, 64) < 0 || full_read(s, buf, 64) < 0)
      return 1;
    t[i] = now_ns() - t0;
  }
  report("rtt_us", t, rounds);
  close(s);
  s = open_conn(host, port, proxy);
  {
    char req[9] = "b";
    memcpy(req + 1, &bytes, sizeof bytes);
    if (s < 0 || full_write(s, req, sizeof req) < 0) {
      fprintf(stderr, "netbench: bulk request: %s\n", strerror(errno));
      return 1;
    }
  }
  t0 = now_ns();
  for (left = bytes; left > 0;) {
    ssize_t r = read(s, buf, sizeof buf);
    if (r <= 0) {
      fprintf(stderr, "netbench: bulk read with %llu bytes left: %s\n", (unsigned long long)left,
              r == 0 ? "end of stream" : strerror(errno));
      return 1;
    }
    left -= (uint64_t)r;
  }
  printf("bulk_mib_s %.1f\n", (double)bytes / 1048576.0 / ((double)(now_ns() - t0) / 1e9));
  close(s);
  free(t);
  return 0;
}

int main(int argc, char **argv)
{
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "serve") == 0)
    return serve(atoi(argv[2]), argc == 4 ? argv[3] : "127.0.0.1");
  if ((argc == 6 || argc == 7) && strcmp(argv[1], "run") == 0)
    return run(argv[2], atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10),
               argc == 7 ? atoi(argv[6]) : 0);
  fprintf(stderr,
          "usage: netbench serve PORT [ADDR] | netbench run HOST PORT ROUNDS BYTES [PROXYPORT]\n");
  return 2;
}
