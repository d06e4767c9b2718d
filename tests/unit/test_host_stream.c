/* agt's side of agtd's streams (common/stream_relay.c): the detach keys, output frames copied to
 * stdout in order with their offsets, the exit frame's code, keys sent as "in" frames
 * with the detach sequence held back and turned into "detach", and a connection that
 * ends without an exit frame.  agtd is played by the other end of a socketpair; stdin and
 * stdout are a pipe and a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64.h"
#include "cleanup.h"
#include "proto.h"
#include "rpc.h"
#include "stream_relay.h"
#include "xalloc.h"

static void test_detach_keys(void **state)
{
  static const char *const bad[] = {"",   "ctrl-pp", "ctrl-",  "ab",
                                    "a,", ",",       "ctrl-1", "a,b,c,d,e,f,g,h,i"};
  struct agt_detach_keys k;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_detach_keys_parse("ctrl-p,ctrl-q", &k, &err), 0);
  assert_int_equal(k.n, 2);
  assert_int_equal(k.k[0], 0x10);
  assert_int_equal(k.k[1], 0x11);
  assert_int_equal(agt_detach_keys_parse("ctrl-],x,ctrl-@", &k, &err), 0);
  assert_int_equal(k.n, 3);
  assert_int_equal(k.k[0], 0x1d);
  assert_int_equal(k.k[1], 'x');
  assert_int_equal(k.k[2], 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(agt_detach_keys_parse(bad[i], &k, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->kind, AGT_E_INVALID);
    agt_error_release(&err);
  }
}

/* agtd's side */

static void send_frame(int fd, json_t *m)
{
  unsigned char *f;
  size_t n;

  assert_int_equal(agt_frame_encode(m, &f, &n, NULL), 0);
  assert_int_equal(write(fd, f, n), (ssize_t)n);
  free(f);
  json_decref(m);
}

static void send_out(int fd, const char *text, uint64_t offset)
{
  cleanup_free char *b64 = agt_base64_encode(text, strlen(text));
  send_frame(fd, json_pack("{s:s, s:I}", "out", b64, "offset", (json_int_t)offset));
}

/* stdout to a file for the length of a test */
struct capture {
  char path[64];
  int saved;
};

static void capture_start(struct capture *c)
{
  int fd;

  snprintf(c->path, sizeof c->path, "/tmp/agt-test-stream.XXXXXX");
  fd = mkstemp(c->path);
  assert_true(fd >= 0);
  fflush(stdout);
  c->saved = dup(1);
  dup2(fd, 1);
  close(fd);
}

static char *capture_end(struct capture *c)
{
  char *text = xzalloc(1 << 16);
  FILE *f;

  fflush(stdout);
  dup2(c->saved, 1);
  close(c->saved);
  f = fopen(c->path, "r");
  assert_non_null(f);
  text[fread(text, 1, (1 << 16) - 1, f)] = '\0';
  fclose(f);
  unlink(c->path);
  return text;
}

static void open_rpc(agt_rpc_t *r, int fd)
{
  memset(r, 0, sizeof *r);
  r->fd = fd;
  agt_decoder_init(&r->dec);
}

static void test_output_and_exit(void **state)
{
  struct agt_stream s;
  struct capture cap;
  agt_rpc_t rpc;
  agt_error_t err = NULL;
  cleanup_free char *out = NULL;
  int sp[2];

  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  open_rpc(&rpc, sp[0]);
  send_out(sp[1], "hello ", 100);
  send_frame(sp[1], json_pack("{s:{s:s, s:s}}", "error", "kind", "invalid", "message", "x"));
  send_out(sp[1], "world\n", 106);
  send_frame(sp[1], json_pack("{s:{s:s, s:i}}", "exit", "name", "j", "exit_code", 7));
  memset(&s, 0, sizeof s);
  s.rpc = &rpc;
  capture_start(&cap);
  assert_int_equal(agt_stream_run(&s, &err), 0);
  out = capture_end(&cap);
  assert_null(err);
  assert_string_equal(out, "hello world\n");
  assert_int_equal(s.end, AGT_STREAM_EXITED);
  assert_int_equal(s.exit_code, 7);
  assert_true(s.have_next);
  assert_int_equal(s.next, 112);
  agt_rpc_close(&rpc);
  close(sp[1]);
}

static void test_closed(void **state)
{
  struct agt_stream s;
  struct capture cap;
  agt_rpc_t rpc;
  agt_error_t err = NULL;
  cleanup_free char *out = NULL;
  int sp[2];

  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  open_rpc(&rpc, sp[0]);
  send_out(sp[1], "partial", 0);
  close(sp[1]);
  memset(&s, 0, sizeof s);
  s.rpc = &rpc;
  capture_start(&cap);
  assert_int_equal(agt_stream_run(&s, &err), -1);
  out = capture_end(&cap);
  assert_string_equal(out, "partial");
  assert_true(s.closed);
  assert_int_equal(s.next, 7);
  assert_non_null(err);
  agt_error_release(&err);
  agt_rpc_close(&rpc);
}

/* Keys: what precedes the detach sequence, and a false start of it, reach the jail; the
 * sequence itself does not, and ends the stream with "detach". */
static void test_keys_and_detach(void **state)
{
  static const char typed[] = "ab\x10"
                              "c\x10\x10\x11tail";
  struct agt_detach_keys keys;
  struct agt_stream s;
  struct capture cap;
  agt_rpc_t rpc, far;
  agt_error_t err = NULL;
  cleanup_free char *out = NULL;
  char got[64] = "";
  int sp[2], in[2], saved_in, detached = 0;
  json_t *m;

  (void)state;
  assert_int_equal(agt_detach_keys_parse("ctrl-p,ctrl-q", &keys, &err), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  assert_int_equal(pipe(in), 0);
  assert_int_equal(write(in[1], typed, sizeof typed - 1), (ssize_t)(sizeof typed - 1));
  saved_in = dup(0);
  dup2(in[0], 0);
  close(in[0]);
  open_rpc(&rpc, sp[0]);
  memset(&s, 0, sizeof s);
  s.rpc = &rpc;
  s.interactive = 1;
  s.keys = &keys;
  capture_start(&cap);
  assert_int_equal(agt_stream_run(&s, &err), 0);
  out = capture_end(&cap);
  dup2(saved_in, 0);
  close(saved_in);
  close(in[1]);
  assert_null(err);
  assert_int_equal(s.end, AGT_STREAM_DETACHED);

  /* what agtd received: "in" frames, then "detach" */
  shutdown(sp[0], SHUT_WR);
  open_rpc(&far, sp[1]);
  while (agt_rpc_read_msg(&far, &m, &err) == 0) {
    json_t *v = json_object_get(m, "in");
    assert_false(detached); /* nothing after detach */
    if (v) {
      size_t len;
      cleanup_free char *data = agt_base64_decode(json_string_value(v), &len);
      strncat(got, data, len);
    } else {
      assert_true(json_is_true(json_object_get(m, "detach")));
      detached = 1;
    }
    json_decref(m);
  }
  agt_error_release(&err);
  assert_true(detached);
  assert_string_equal(got, "ab\x10"
                           "c\x10");
  agt_rpc_close(&far);
  agt_rpc_close(&rpc);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_detach_keys),
      cmocka_unit_test(test_output_and_exit),
      cmocka_unit_test(test_closed),
      cmocka_unit_test(test_keys_and_detach),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
