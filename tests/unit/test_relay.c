/* The byte relay of the egress proxy and jail.port (guest/net/relay.c), between two real
 * loopback TCP connections: a client thread on one end, a server thread on the other, the
 * relay in a libuv loop between them, as agtd runs it.  Every transfer is checked by length
 * and sha256 at the receiving end:
 *   - large transfers both ways at once, by splice and (pipes unavailable) by copy;
 *   - bytes queued ahead of the relayed ones (agt_relay_write), in order;
 *   - a half-close from either side first: the other direction goes on to its end;
 *   - a peer that resets mid-transfer: the other peer sees a reset, not a clean end;
 *   - a slow reader: what the relay holds stays bounded, and so does the process's memory. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <uv.h>

#include "relay.h"

#define MiB (1024ull * 1024)

/* One end's plan: send `send` bytes of the stream seeded `seed` (after waiting for the end of
 * what comes in, if send_after_eof), then half-close, or reset after reset_after bytes; read
 * to the end, slowly if slow_us (a pause after every read of at most 16 KiB). */
struct plan {
  uint64_t send;
  uint32_t seed;
  int send_after_eof;
  uint64_t reset_after; /* 0: no reset */
  unsigned slow_us;
};

struct peer {
  int fd;
  struct plan p;
  /* results */
  uint64_t got;
  unsigned char sha[32];
  int read_err; /* errno of the read that ended the stream, 0 for a clean end */
  int send_err;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int eof_seen;
};

/* A byte stream that is not a repeat of a short pattern: xorshift32 per 4 bytes. */
static void gen(uint32_t *st, unsigned char *buf, size_t len)
{
  for (size_t i = 0; i < len; i += 4) {
    uint32_t x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *st = x;
    memcpy(buf + i, &x, len - i < 4 ? len - i : 4);
  }
}

static void sha_of_stream(uint32_t seed, uint64_t n, const char *prefix, size_t plen,
                          unsigned char out[32])
{
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  static unsigned char buf[65536];
  uint32_t st = seed;

  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  EVP_DigestUpdate(md, prefix, plen);
  while (n > 0) {
    size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
    gen(&st, buf, k);
    EVP_DigestUpdate(md, buf, k);
    n -= k;
  }
  EVP_DigestFinal_ex(md, out, NULL);
  EVP_MD_CTX_free(md);
}

static void *sender(void *arg)
{
  struct peer *pe = arg;
  unsigned char *buf = malloc(65536);
  uint32_t st = pe->p.seed;
  uint64_t left = pe->p.send, sent = 0;

  if (pe->p.send_after_eof) {
    pthread_mutex_lock(&pe->mu);
    while (!pe->eof_seen)
      pthread_cond_wait(&pe->cv, &pe->mu);
    pthread_mutex_unlock(&pe->mu);
  }
  while (left > 0) {
    size_t k = left < 65536 ? (size_t)left : 65536;
    if (pe->p.reset_after && sent + k > pe->p.reset_after)
      break;
    gen(&st, buf, k);
    for (size_t o = 0; o < k;) {
      ssize_t w = write(pe->fd, buf + o, k - o);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        pe->send_err = errno;
        goto out;
      }
      o += (size_t)w;
    }
    left -= k;
    sent += k;
  }
  if (pe->p.reset_after) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(pe->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    /* a reset, not a clean end: the reader is stopped too by closing */
    shutdown(pe->fd, SHUT_RD);
    close(pe->fd);
    pe->fd = -1;
  } else {
    shutdown(pe->fd, SHUT_WR);
  }
out:
  free(buf);
  return NULL;
}

static void *reader(void *arg)
{
  struct peer *pe = arg;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char *buf = malloc(65536);
  int fd = pe->fd;

  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  for (;;) {
    ssize_t r = read(fd, buf, pe->p.slow_us ? 16384 : 65536);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      pe->read_err = errno;
      break;
    }
    if (r == 0)
      break;
    EVP_DigestUpdate(md, buf, (size_t)r);
    pe->got += (uint64_t)r;
    if (pe->p.slow_us)
      usleep(pe->p.slow_us);
  }
  EVP_DigestFinal_ex(md, pe->sha, NULL);
  EVP_MD_CTX_free(md);
  free(buf);
  pthread_mutex_lock(&pe->mu);
  pe->eof_seen = 1;
  pthread_cond_signal(&pe->cv);
  pthread_mutex_unlock(&pe->mu);
  return NULL;
}

/* A connected pair of loopback TCP sockets (blocking). */
static void tcp_pair(int fds[2])
{
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_true(l >= 0);
  assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(l, 1), 0);
  assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
  fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(connect(fds[0], (struct sockaddr *)&sa, sizeof sa), 0);
  fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
  assert_true(fds[1] >= 0);
  close(l);
}

struct run {
  uv_loop_t loop;
  uv_tcp_t side[2];
  uv_timer_t sampler;
  agt_relay_t relay;
  int status, finished, closed;
  size_t max_held; /* the most the relay held for the slow direction (server -> client) */
};

static void handle_closed(uv_handle_t *h)
{
  struct run *r = h->data;
  r->closed++;
}

static void relay_done(agt_relay_t *rl, int status)
{
  struct run *r = rl->data;

  r->status = status;
  r->finished = 1;
  for (int i = 0; i < 2; i++) {
    r->side[i].data = r;
    uv_close((uv_handle_t *)&r->side[i], handle_closed);
  }
  uv_close((uv_handle_t *)&r->sampler, handle_closed);
}

static void sample(uv_timer_t *t)
{
  struct run *r = t->data;
  size_t held = r->relay.dir[1].queued;

  if (held > r->max_held)
    r->max_held = held;
}

static long vm_hwm_kib(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;

  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &v) == 1)
      break;
  if (f)
    fclose(f);
  return v;
}

static int starve_fds; /* relay_run: no descriptor free when the relay starts */

/* Relay between a client and a server with these plans; heads[i]: bytes queued toward side
 * i before the start (NULL: none).  Fills the peers' results and the run's. */
static void relay_run(struct run *r, struct peer *cl, struct peer *sv, const char *heads[2])
{
  int a[2], b[2];
  pthread_t t[4];

  memset(r, 0, sizeof *r);
  tcp_pair(a); /* client a[0] <-> relay side 0 a[1] */
  tcp_pair(b); /* relay side 1 b[0] <-> server b[1] */
  cl->fd = a[0];
  sv->fd = b[1];
  for (struct peer *pe = cl; pe; pe = pe == cl ? sv : NULL) {
    pthread_mutex_init(&pe->mu, NULL);
    pthread_cond_init(&pe->cv, NULL);
  }
  assert_int_equal(uv_loop_init(&r->loop), 0);
  assert_int_equal(uv_tcp_init(&r->loop, &r->side[0]), 0);
  assert_int_equal(uv_tcp_open(&r->side[0], a[1]), 0);
  assert_int_equal(uv_tcp_init(&r->loop, &r->side[1]), 0);
  assert_int_equal(uv_tcp_open(&r->side[1], b[0]), 0);
  uv_timer_init(&r->loop, &r->sampler);
  r->sampler.data = r;
  uv_timer_start(&r->sampler, sample, 1, 1);
  agt_relay_init(&r->relay, (uv_stream_t *)&r->side[0], (uv_stream_t *)&r->side[1], relay_done, r);
  for (int i = 0; i < 2; i++)
    if (heads && heads[i])
      assert_int_equal(agt_relay_write(&r->relay, i, strdup(heads[i]), strlen(heads[i])), 0);
  pthread_create(&t[0], NULL, reader, cl);
  pthread_create(&t[1], NULL, reader, sv);
  pthread_create(&t[2], NULL, sender, cl);
  pthread_create(&t[3], NULL, sender, sv);
  if (starve_fds) {
    /* the limit at the lowest free descriptor: every one below it is taken */
    struct rlimit old, low;
    int lowest = dup(0);
    assert_true(lowest >= 0);
    close(lowest);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    agt_relay_start(&r->relay);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  } else {
    agt_relay_start(&r->relay);
  }
  uv_run(&r->loop, UV_RUN_DEFAULT);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  if (cl->fd >= 0)
    close(cl->fd);
  if (sv->fd >= 0)
    close(sv->fd);
  assert_int_equal(r->closed, 3);
  assert_int_equal(uv_loop_close(&r->loop), 0);
}

/* What `to` got is the other's stream (after prefix), complete and intact. */
static void assert_got(const struct peer *to, const struct peer *from, const char *prefix)
{
  unsigned char want[32];
  size_t plen = prefix ? strlen(prefix) : 0;

  assert_int_equal(to->read_err, 0);
  assert_int_equal(to->got, from->p.send + plen);
  sha_of_stream(from->p.seed, from->p.send, prefix ? prefix : "", plen, want);
  assert_memory_equal(to->sha, want, 32);
}

static void test_large_both_ways(void **state)
{
  struct peer cl = {.p = {.send = 96 * MiB + 1, .seed = 1}};
  struct peer sv = {.p = {.send = 80 * MiB + 3, .seed = 2}};
  struct run r;

  (void)state;
  relay_run(&r, &cl, &sv, NULL);
  assert_int_equal(r.status, 0);
  assert_true(r.relay.spliced);
  assert_got(&sv, &cl, NULL);
  assert_got(&cl, &sv, NULL);
  assert_int_equal(r.relay.dir[0].delivered, cl.p.send);
  assert_int_equal(r.relay.dir[1].delivered, sv.p.send);
}

/* No pipe can be made (no descriptor left under the limit when the relay starts): the relay
 * copies, as completely. */
static void test_large_by_copy(void **state)
{
  struct peer cl = {.p = {.send = 24 * MiB + 7, .seed = 3}};
  struct peer sv = {.p = {.send = 40 * MiB + 5, .seed = 4}};
  struct run r;

  (void)state;
  starve_fds = 1;
  relay_run(&r, &cl, &sv, NULL);
  starve_fds = 0;
  assert_int_equal(r.status, 0);
  assert_false(r.relay.spliced);
  assert_got(&sv, &cl, NULL);
  assert_got(&cl, &sv, NULL);
}

static void test_heads_first(void **state)
{
  static const char *heads[2] = {"HTTP/1.1 200 Connection established\r\n\r\n",
                                 "GET / HTTP/1.1\r\nHost: x\r\n\r\n"};
  struct peer cl = {.p = {.send = 3 * MiB + 1, .seed = 5}};
  struct peer sv = {.p = {.send = 5 * MiB + 2, .seed = 6}};
  struct run r;

  (void)state;
  relay_run(&r, &cl, &sv, heads);
  assert_int_equal(r.status, 0);
  assert_got(&cl, &sv, heads[0]);
  assert_got(&sv, &cl, heads[1]);
  assert_int_equal(r.relay.dir[0].delivered, cl.p.send + strlen(heads[1]));
}

/* The client half-closes at once; the server answers only after that end, and the answer
 * gets through whole. */
static void test_half_close_client_first(void **state)
{
  struct peer cl = {.p = {.send = 1 * MiB + 1, .seed = 7}};
  struct peer sv = {.p = {.send = 48 * MiB + 9, .seed = 8, .send_after_eof = 1}};
  struct run r;

  (void)state;
  relay_run(&r, &cl, &sv, NULL);
  assert_int_equal(r.status, 0);
  assert_got(&sv, &cl, NULL);
  assert_got(&cl, &sv, NULL);
}

/* The server ends its side first; the client sends its part only after that end. */
static void test_half_close_server_first(void **state)
{
  struct peer cl = {.p = {.send = 48 * MiB + 11, .seed = 9, .send_after_eof = 1}};
  struct peer sv = {.p = {.send = 2 * MiB + 3, .seed = 10}};
  struct run r;

  (void)state;
  relay_run(&r, &cl, &sv, NULL);
  assert_int_equal(r.status, 0);
  assert_got(&cl, &sv, NULL);
  assert_got(&sv, &cl, NULL);
}

/* The server resets after 8 MiB of 64 while the client reads slowly: the client must see the
 * reset, not a clean end of a shorter stream. */
static void test_reset_mid_transfer(void **state)
{
  struct peer cl = {.p = {.send = 0, .seed = 11, .slow_us = 200}};
  struct peer sv = {.p = {.send = 64 * MiB, .seed = 12, .reset_after = 8 * MiB}};
  struct run r;

  (void)state;
  relay_run(&r, &cl, &sv, NULL);
  assert_int_equal(r.status, UV_ECONNRESET);
  assert_int_equal(cl.read_err, ECONNRESET);
  assert_true(cl.got <= 8 * MiB);
}

/* The server answers a few bytes and resets at once, likely before the relay has read them:
 * they still reach the client, and then the reset. */
static void test_reset_after_answer(void **state)
{
  for (int k = 0; k < 50; k++) {
    struct peer cl = {.p = {.send = 0, .seed = 15}};
    struct peer sv = {.p = {.send = 20, .seed = 16, .reset_after = 20}};
    unsigned char want[32];
    struct run r;

    (void)state;
    relay_run(&r, &cl, &sv, NULL);
    assert_int_equal(r.status, UV_ECONNRESET);
    assert_int_equal(cl.read_err, ECONNRESET);
    assert_int_equal(cl.got, 20);
    sha_of_stream(sv.p.seed, 20, "", 0, want);
    assert_memory_equal(cl.sha, want, 32);
  }
}

/* A slow reader (16 KiB per 1 ms) and a fast sender of 32 MiB: all of it arrives; the relay
 * holds no more than its bound for it, and the process's peak memory grows by less. */
static void test_slow_reader_bounded(void **state)
{
  struct peer cl = {.p = {.send = 0, .seed = 13, .slow_us = 1000}};
  struct peer sv = {.p = {.send = 32 * MiB, .seed = 14}};
  struct run r;
  long hwm0 = vm_hwm_kib(), grow;
  size_t bound = AGT_RELAY_PIPE > AGT_RELAY_HIGH ? AGT_RELAY_PIPE : AGT_RELAY_HIGH;

  (void)state;
  relay_run(&r, &cl, &sv, NULL);
  assert_int_equal(r.status, 0);
  assert_got(&cl, &sv, NULL);
  print_message("# the relay held at most %zu bytes for the slow reader\n", r.max_held);
  assert_true(r.max_held > 0);
  assert_true(r.max_held <= bound);
  grow = vm_hwm_kib() - hwm0;
  print_message("# peak memory grew by %ld KiB\n", grow);
  assert_true(grow < 4096);
}

static unsigned long proc_value(const char *path)
{
  FILE *f = fopen(path, "r");
  unsigned long v = 0;

  if (f && fscanf(f, "%lu", &v) != 1)
    v = 0;
  if (f)
    fclose(f);
  return v;
}

static void noop_done(agt_relay_t *rl, int status)
{
  (void)rl;
  (void)status;
}

static void nothing_closed(uv_handle_t *h)
{
  (void)h;
}

/* Many relays at once: their pipes are enlarged only while all of them together stay within
 * fs.pipe-user-pages-soft (the kernel does not hold root to it); the others keep the default
 * size and relay all the same.  Closing them gives the room back. */
static void test_pipes_within_user_limit(void **state)
{
  unsigned long soft = proc_value("/proc/sys/fs/pipe-user-pages-soft");
  size_t budget = soft * (size_t)sysconf(_SC_PAGESIZE), want = AGT_RELAY_PIPE, big;
  unsigned long max = proc_value("/proc/sys/fs/pipe-max-size");
  int nrel, nbig;
  uv_loop_t loop;
  uv_tcp_t(*h)[2];
  int(*peer)[2];
  agt_relay_t *rl;
  struct rlimit lim;

  (void)state;
  if (soft == 0)
    skip(); /* no per-user limit on this machine */
  if (max > 0 && max < want)
    want = max;
  big = 2 * want; /* a relay's two pipes */
  nbig = (int)((budget - agt_relay_pipe_bytes()) / big);
  nrel = nbig + 4;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if ((rlim_t)nrel * 8 + 64 > lim.rlim_cur)
    skip(); /* 8 descriptors a relay: the limit is too low to fill the budget */
  h = calloc((size_t)nrel, sizeof *h);
  peer = calloc((size_t)nrel, sizeof *peer);
  rl = calloc((size_t)nrel, sizeof *rl);
  assert_int_equal(uv_loop_init(&loop), 0);
  for (int k = 0; k < nrel; k++) {
    int a[2], b[2];
    tcp_pair(a);
    tcp_pair(b);
    peer[k][0] = a[0]; /* kept open: the relays wait for bytes */
    peer[k][1] = b[1];
    uv_tcp_init(&loop, &h[k][0]);
    uv_tcp_open(&h[k][0], a[1]);
    uv_tcp_init(&loop, &h[k][1]);
    uv_tcp_open(&h[k][1], b[0]);
    agt_relay_init(&rl[k], (uv_stream_t *)&h[k][0], (uv_stream_t *)&h[k][1], noop_done, NULL);
    agt_relay_start(&rl[k]);
    assert_true(rl[k].spliced);
    assert_false(rl[k].done);
  }
  print_message("# %d relays, %d with pipes of %zu bytes within %zu\n", nrel, nbig, want, budget);
  for (int k = 0; k < nrel; k++)
    for (int i = 0; i < 2; i++) {
      if (k < nbig)
        assert_int_equal(rl[k].dir[i].pipe_cap, want);
      else
        assert_true(rl[k].dir[i].pipe_cap < want);
    }
  assert_true(agt_relay_pipe_bytes() <= budget + 4 * big);
  for (int k = 0; k < nrel; k++) {
    agt_relay_stop(&rl[k]);
    uv_close((uv_handle_t *)&h[k][0], nothing_closed);
    uv_close((uv_handle_t *)&h[k][1], nothing_closed);
    close(peer[k][0]);
    close(peer[k][1]);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(agt_relay_pipe_bytes(), 0);
  free(h);
  free(peer);
  free(rl);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_large_both_ways),
      cmocka_unit_test(test_slow_reader_bounded),
      cmocka_unit_test(test_large_by_copy),
      cmocka_unit_test(test_heads_first),
      cmocka_unit_test(test_half_close_client_first),
      cmocka_unit_test(test_half_close_server_first),
      cmocka_unit_test(test_reset_mid_transfer),
      cmocka_unit_test(test_reset_after_answer),
      cmocka_unit_test(test_pipes_within_user_limit),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
