/* relaycost: what a relay between two TCP connections costs per byte, by method (bench/proxy.sh).
 *
 *   relaycost BYTES
 *
 * A sender thread writes BYTES to a loopback connection; a relay (this process's main
 * thread) moves them to a second loopback connection, whose reader thread counts them.
 * For each method: the wall time and the relay thread's own CPU time (user + system) per
 * GiB.  Methods: read()/write() through a user buffer of 64 KiB, 256 KiB and 1 MiB (what
 * guest/net/relay.c's copy way does, with libuv around it), and splice() through a pipe (no
 * copy through user space): blocking, one call after the other, and non-blocking with poll()
 * between, as guest/net/relay.c's splice way does with libuv.  First, for reference, the same
 * sender and reader on one connection with no relay: what a relay's throughput is to be held
 * against (a relay adds a second connection's kernel work and a third thread on the same
 * CPUs).  Every byte is counted at the reader; a short count fails the run.
 *
 * Then, when CPUs 0 and 1 are both in its affinity mask, where the threads run: no relay and
 * the non-blocking splice again with each thread held to a given CPU (sched_setaffinity, this
 * process's threads only): all on CPU 0, and the relay beside the reader or beside the
 * sender with the third thread alone on CPU 0 or 1.  Each line adds how busy CPUs 0 and 1
 * were over the run (/proc/stat, in ticks of 10 ms: a run of 1 GiB is 30 to 70 of them, so
 * each share is good to a few percent; steal time is left out).  If one placement of the
 * three stages reached the no-relay figure, the loss would be the scheduler's placement; if
 * none does, it is the relay's own work. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t total;

/* Where each thread runs: a CPU, or -1 where the scheduler puts it. */
enum { SENDER, RELAY, READER };
static int place[3] = {-1, -1, -1};
static cpu_set_t main_cpus;    /* the main thread's, given back after each run */
static const char *eol = "\n"; /* what ends a result's line */

static void place_me(int role)
{
  cpu_set_t set;

  if (place[role] < 0)
    return;
  CPU_ZERO(&set);
  CPU_SET(place[role], &set);
  if (sched_setaffinity(0, sizeof set, &set) < 0) {
    perror("relaycost: sched_setaffinity");
    exit(1);
  }
}

static double now_s(clockid_t clk)
{
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A connected pair of loopback TCP sockets. */
static void tcp_pair(int fds[2])
{
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int l = socket(AF_INET, SOCK_STREAM, 0);

  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 1) < 0 ||
      getsockname(l, (struct sockaddr *)&sa, &len) < 0) {
    perror("relaycost: listen");
    exit(1);
  }
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fds[0], (struct sockaddr *)&sa, sizeof sa) < 0) {
    perror("relaycost: connect");
    exit(1);
  }
  fds[1] = accept(l, NULL, NULL);
  close(l);
}

static void *sender(void *arg)
{
  int fd = *(int *)arg;
  static char buf[1 << 16];
  uint64_t left = total;

  place_me(SENDER);
  memset(buf, 'x', sizeof buf);
  while (left > 0) {
    ssize_t w = write(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
    if (w <= 0)
      break;
    left -= (uint64_t)w;
  }
  close(fd);
  return NULL;
}

static void *reader(void *arg)
{
  int fd = *(int *)arg;
  static char buf[1 << 16];
  uint64_t *got = malloc(sizeof *got);
  ssize_t r;

  place_me(READER);
  *got = 0;
  while ((r = read(fd, buf, sizeof buf)) > 0)
    *got += (uint64_t)r;
  close(fd);
  return got;
}

static int relay_copy(int from, int to, size_t bufsize)
{
  char *buf = malloc(bufsize);
  ssize_t r;

  while ((r = read(from, buf, bufsize)) > 0)
    for (ssize_t o = 0; o < r;) {
      ssize_t w = write(to, buf + o, (size_t)(r - o));
      if (w <= 0) {
        free(buf);
        return -1;
      }
      o += w;
    }
  free(buf);
  return r < 0 ? -1 : 0;
}

static int relay_splice(int from, int to)
{
  int p[2];
  ssize_t r;

  if (pipe2(p, O_CLOEXEC) < 0)
    return -1;
  fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  while ((r = splice(from, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE)) > 0)
    while (r > 0) {
      ssize_t w = splice(p[0], NULL, to, NULL, (size_t)r, SPLICE_F_MOVE);
      if (w <= 0)
        return -1;
      r -= w;
    }
  close(p[0]);
  close(p[1]);
  return r < 0 ? -1 : 0;
}

/* What agtd's relay does (guest/net/relay.c): both sockets non-blocking, splice() with
 * SPLICE_F_NONBLOCK into and out of a pipe of 1 MiB, waiting in poll() for the source to
 * have bytes or the destination to take them. */
static int relay_splice_nb(int from, int to)
{
  int p[2], size;
  size_t cap, in_pipe = 0;
  int eof = 0;

  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
    return -1;
  fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  size = fcntl(p[1], F_GETPIPE_SZ);
  cap = size > 0 ? (size_t)size : 65536;
  fcntl(from, F_SETFL, fcntl(from, F_GETFL) | O_NONBLOCK);
  fcntl(to, F_SETFL, fcntl(to, F_GETFL) | O_NONBLOCK);
  while (!eof || in_pipe > 0) {
    struct pollfd pf[2] = {{.fd = from, .events = 0}, {.fd = to, .events = 0}};
    int full = 0;
    for (int round = 0; round < 8; round++) {
      int moved = 0;
      ssize_t n;
      if (in_pipe > 0) {
        n = splice(p[0], NULL, to, NULL, in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno != EAGAIN)
          return -1;
        if (n > 0) {
          in_pipe -= (size_t)n;
          full = 0;
          moved = 1;
        }
      }
      if (!eof && !full && in_pipe < cap) {
        n = splice(from, NULL, p[1], NULL, cap - in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n == 0)
          eof = 1;
        else if (n > 0) {
          in_pipe += (size_t)n;
          moved = 1;
        } else if (errno != EAGAIN)
          return -1;
        else if (in_pipe > 0)
          full = 1;
      }
      if (!moved)
        break;
    }
    if (!eof && !full && in_pipe < cap)
      pf[0].events = POLLIN;
    if (in_pipe > 0)
      pf[1].events = POLLOUT;
    if ((eof && in_pipe == 0) || poll(pf, 2, -1) < 0)
      break;
  }
  close(p[0]);
  close(p[1]);
  return 0;
}

static int run(const char *name, size_t bufsize)
{
  int a[2], b[2];
  pthread_t ts, tr;
  double w0, c0, wall, cpu;
  uint64_t *got;
  int rc;

  tcp_pair(a); /* sender a[0] -> relay reads a[1] */
  tcp_pair(b); /* relay writes b[0] -> reader b[1] */
  pthread_create(&ts, NULL, sender, &a[0]);
  pthread_create(&tr, NULL, reader, &b[1]);
  w0 = now_s(CLOCK_MONOTONIC);
  place_me(RELAY);
  c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  rc = bufsize == 1 ? relay_splice_nb(a[1], b[0])
       : bufsize    ? relay_copy(a[1], b[0], bufsize)
                    : relay_splice(a[1], b[0]);
  cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
  sched_setaffinity(0, sizeof main_cpus, &main_cpus);
  shutdown(b[0], SHUT_WR);
  pthread_join(ts, NULL);
  pthread_join(tr, (void **)&got);
  wall = now_s(CLOCK_MONOTONIC) - w0;
  close(a[1]);
  close(b[0]);
  if (rc < 0 || *got != total) {
    printf("%-16s FAILED: %llu of %llu bytes%s", name, (unsigned long long)*got,
           (unsigned long long)total, eol);
    free(got);
    return 1;
  }
  free(got);
  printf("%-16s %10.1f MiB/s %10.3f relay CPU s/GiB%s", name, (double)total / 1048576.0 / wall,
         cpu / ((double)total / 1073741824.0), eol);
  return 0;
}

/* The sender straight to the reader over one loopback connection: no relay. */
static int run_direct(const char *name)
{
  int a[2];
  pthread_t ts, tr;
  double w0, wall;
  uint64_t *got;
  int ok;

  tcp_pair(a);
  w0 = now_s(CLOCK_MONOTONIC);
  pthread_create(&ts, NULL, sender, &a[0]);
  pthread_create(&tr, NULL, reader, &a[1]);
  pthread_join(ts, NULL);
  pthread_join(tr, (void **)&got);
  wall = now_s(CLOCK_MONOTONIC) - w0;
  ok = *got == total;
  if (!ok)
    printf("%-16s FAILED: %llu of %llu bytes%s", name, (unsigned long long)*got,
           (unsigned long long)total, eol);
  else
    printf("%-16s %10.1f MiB/s%*s%s", name, (double)total / 1048576.0 / wall, *eol == '\n' ? 0 : 27,
           "", eol); /* under the relay lines' CPU column */
  free(got);
  return ok ? 0 : 1;
}

/* CPU cpu's busy and total time so far, in clock ticks (/proc/stat): 0, or -1. */
static int cpu_ticks(int cpu, unsigned long long *busy, unsigned long long *all)
{
  char line[512], want[16];
  FILE *f = fopen("/proc/stat", "r");
  int found = -1;

  if (f == NULL)
    return -1;
  snprintf(want, sizeof want, "cpu%d ", cpu);
  while (found < 0 && fgets(line, sizeof line, f)) {
    unsigned long long v[8] = {0};
    if (strncmp(line, want, strlen(want)) != 0)
      continue;
    sscanf(line + strlen(want), "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
           &v[3], &v[4], &v[5], &v[6], &v[7]);
    *all = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6]; /* steal is not this CPU's */
    *busy = *all - v[3] - v[4];                            /* less idle and iowait */
    found = 0;
  }
  fclose(f);
  return found;
}

/* One run with the threads where `where` puts them (a CPU each for sender, relay, reader),
 * and how busy CPUs 0 and 1 were over it. */
static int run_placed(const char *name, int relay, const int where[3])
{
  unsigned long long b0[2] = {0}, a0[2] = {0}, b1[2] = {0}, a1[2] = {0};
  int rc, failed = 0;

  memcpy(place, where, sizeof place);
  eol = "";
  for (int c = 0; c < 2; c++)
    failed |= cpu_ticks(c, &b0[c], &a0[c]);
  rc = relay ? run(name, 1) : run_direct(name);
  for (int c = 0; c < 2; c++)
    failed |= cpu_ticks(c, &b1[c], &a1[c]);
  if (failed < 0 || a1[0] <= a0[0] || a1[1] <= a0[1])
    printf("   (how busy the CPUs were: /proc/stat could not say)\n");
  else
    printf("   CPU 0 %3.0f %% busy, CPU 1 %3.0f %%\n",
           100.0 * (double)(b1[0] - b0[0]) / (double)(a1[0] - a0[0]),
           100.0 * (double)(b1[1] - b0[1]) / (double)(a1[1] - a0[1]));
  eol = "\n";
  place[SENDER] = place[RELAY] = place[READER] = -1;
  return rc;
}

int main(int argc, char **argv)
{
  static const struct {
    const char *name;
    int relay, where[3]; /* sender, relay, reader */
  } placements[] = {
      {"no relay, 1 CPU", 0, {0, -1, 0}}, {"no relay, 2 CPUs", 0, {0, -1, 1}},
      {"all on CPU 0", 1, {0, 0, 0}},     {"relay by reader", 1, {0, 1, 1}},
      {"relay by sender", 1, {0, 0, 1}},
  };
  int rc = 0;

  total = argc > 1 ? strtoull(argv[1], NULL, 10) : 1ull << 30;
  sched_getaffinity(0, sizeof main_cpus, &main_cpus);
  rc |= run_direct("no relay");
  rc |= run("read/write 64K", 64 << 10);
  rc |= run("read/write 256K", 256 << 10);
  rc |= run("read/write 1M", 1 << 20);
  rc |= run("splice", 0);
  rc |= run("splice, poll", 1);
  if (!CPU_ISSET(0, &main_cpus) || !CPU_ISSET(1, &main_cpus)) {
    printf("where the threads run: not measured (CPUs 0 and 1 are not both this process's)\n");
    return rc;
  }
  printf("where the threads run (the splice, poll relay):\n");
  for (size_t i = 0; i < sizeof placements / sizeof placements[0]; i++)
    rc |= run_placed(placements[i].name, placements[i].relay, placements[i].where);
  return rc;
}
