#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base64.h"
#include "cli.h"
#include "proto.h"

static void frame_of(const char *payload, unsigned char *out, size_t *len)
{
  size_t n = strlen(payload);
  out[0] = (unsigned char)(n >> 24);
  out[1] = (unsigned char)(n >> 16);
  out[2] = (unsigned char)(n >> 8);
  out[3] = (unsigned char)n;
  memcpy(out + 4, payload, n);
  *len = n + 4;
}

static void test_roundtrip_bytewise(void **state)
{
  agt_decoder_t d;
  agt_error_t err = NULL;
  json_t *req = agt_msg_request(7, "jail.ls", NULL), *msg = NULL;
  unsigned char *f;
  size_t len;
  uint64_t id;
  const char *method;
  json_t *params;

  (void)state;
  assert_int_equal(agt_frame_encode(req, &f, &len, &err), 0);
  agt_decoder_init(&d);
  /* one byte at a time: nothing until the last byte */
  for (size_t i = 0; i + 1 < len; i++) {
    agt_decoder_feed(&d, f + i, 1);
    assert_int_equal(agt_decoder_next(&d, &msg, &err), 0);
  }
  agt_decoder_feed(&d, f + len - 1, 1);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  assert_int_equal(agt_msg_parse_request(msg, &id, &method, &params, &err), 0);
  assert_int_equal(id, 7);
  assert_string_equal(method, "jail.ls");
  assert_true(json_is_object(params));
  json_decref(msg);
  json_decref(req);
  free(f);
  agt_decoder_release(&d);
}

static void test_two_frames_in_one_read(void **state)
{
  agt_decoder_t d;
  agt_error_t err = NULL;
  unsigned char buf[256];
  size_t a, b;
  json_t *msg;

  (void)state;
  frame_of("{\"id\":1,\"method\":\"a\"}", buf, &a);
  frame_of("{\"id\":2,\"method\":\"b\"}", buf + a, &b);
  agt_decoder_init(&d);
  agt_decoder_feed(&d, buf, a + b);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 1);
  json_decref(msg);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 2);
  json_decref(msg);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 0);
  agt_decoder_release(&d);
}

static void test_bad_frames_then_good(void **state)
{
  agt_decoder_t d;
  agt_error_t err = NULL;
  unsigned char buf[256], zero[4] = {0, 0, 0, 0};
  size_t n;
  json_t *msg;

  (void)state;
  agt_decoder_init(&d);
  agt_decoder_feed(&d, zero, 4);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), -1);
  assert_int_equal(err->kind, AGT_E_PROTO);
  assert_non_null(strstr(err->msg, "empty"));
  agt_error_release(&err);

  frame_of("{not json", buf, &n);
  agt_decoder_feed(&d, buf, n);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), -1);
  assert_non_null(strstr(err->msg, "not valid JSON"));
  agt_error_release(&err);

  frame_of("[1,2]", buf, &n);
  agt_decoder_feed(&d, buf, n);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), -1);
  assert_non_null(strstr(err->msg, "not a JSON object"));
  agt_error_release(&err);

  frame_of("{\"id\":3,\"method\":\"ok\"}", buf, &n);
  agt_decoder_feed(&d, buf, n);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  json_decref(msg);
  agt_decoder_release(&d);
}

static void test_oversized_is_skipped_not_buffered(void **state)
{
  agt_decoder_t d;
  agt_error_t err = NULL;
  unsigned char hdr[4] = {0x7f, 0xff, 0xff, 0xff}, buf[256];
  static unsigned char junk[65536];
  size_t n;
  json_t *msg;

  (void)state;
  agt_decoder_init(&d);
  agt_decoder_feed(&d, hdr, 4);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), -1);
  assert_non_null(strstr(err->msg, "exceeds the limit"));
  agt_error_release(&err);
  /* 8 MiB of the declared body: dropped as it arrives, never held */
  memset(junk, '{', sizeof junk);
  for (int i = 0; i < 128; i++) {
    agt_decoder_feed(&d, junk, sizeof junk);
    assert_true(d.len == 0);
    assert_int_equal(agt_decoder_next(&d, &msg, &err), 0);
  }
  /* skip the rest of the declared size, then a good frame parses */
  d.skip = 0;
  frame_of("{\"id\":9,\"method\":\"x\"}", buf, &n);
  agt_decoder_feed(&d, buf, n);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  json_decref(msg);
  agt_decoder_release(&d);
}

static void test_oversized_partially_received_then_resync(void **state)
{
  agt_decoder_t d;
  agt_error_t err = NULL;
  unsigned char buf[64];
  size_t n;
  json_t *msg;
  uint32_t big = AGT_FRAME_MAX + 10;
  unsigned char *f = calloc(1, 4 + big);

  (void)state;
  f[0] = (unsigned char)(big >> 24);
  f[1] = (unsigned char)(big >> 16);
  f[2] = (unsigned char)(big >> 8);
  f[3] = (unsigned char)big;
  agt_decoder_init(&d);
  agt_decoder_feed(&d, f, 100);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), -1);
  agt_error_release(&err);
  agt_decoder_feed(&d, f + 100, 4 + big - 100);
  frame_of("{\"id\":4,\"method\":\"x\"}", buf, &n);
  agt_decoder_feed(&d, buf, n);
  assert_int_equal(agt_decoder_next(&d, &msg, &err), 1);
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 4);
  json_decref(msg);
  free(f);
  agt_decoder_release(&d);
}

static void test_envelope_errors(void **state)
{
  agt_error_t err = NULL;
  uint64_t id;
  const char *method;
  json_t *params, *res;
  const char *bad[] = {
      "{\"method\":\"x\"}",
      "{\"id\":-1,\"method\":\"x\"}",
      "{\"id\":\"1\",\"method\":\"x\"}",
      "{\"id\":1}",
      "{\"id\":1,\"method\":3}",
      "{\"id\":1,\"method\":\"x\",\"params\":[]}",
  };

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *m = json_loads(bad[i], 0, NULL);
    assert_non_null(m);
    assert_int_equal(agt_msg_parse_request(m, &id, &method, &params, &err), -1);
    assert_int_equal(err->kind, AGT_E_PROTO);
    agt_error_release(&err);
    json_decref(m);
  }
  {
    json_t *m =
        json_loads("{\"id\":5,\"error\":{\"kind\":\"busy\",\"message\":\"in use\"}}", 0, NULL);
    assert_int_equal(agt_msg_parse_reply(m, &id, &res, &err), -1);
    assert_int_equal(id, 5);
    assert_int_equal(err->kind, AGT_E_BUSY);
    assert_string_equal(err->msg, "in use");
    agt_error_release(&err);
    json_decref(m);
  }
}

static void test_params(void **state)
{
  agt_error_t err = NULL;
  json_t *p = json_loads("{\"s\":\"x\",\"n\":3,\"b\":true,\"neg\":-2,\"str\":\"no\"}", 0, NULL);
  const char *s;
  uint64_t n = 0;
  int b = 0;

  (void)state;
  assert_int_equal(agt_param_str(p, "s", 1, &s, &err), 0);
  assert_string_equal(s, "x");
  assert_int_equal(agt_param_str(p, "missing", 1, &s, &err), -1);
  assert_non_null(strstr(err->msg, "missing field 'missing'"));
  agt_error_release(&err);
  assert_int_equal(agt_param_u64(p, "n", 1, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(agt_param_u64(p, "neg", 1, &n, &err), -1);
  agt_error_release(&err);
  assert_int_equal(agt_param_bool(p, "b", &b, &err), 0);
  assert_int_equal(b, 1);
  assert_int_equal(agt_param_bool(p, "str", &b, &err), -1);
  assert_int_equal(err->kind, AGT_E_INVALID);
  agt_error_release(&err);
  json_decref(p);
}

static void test_base64(void **state)
{
  const char *samples[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char *expect[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

  (void)state;
  for (size_t i = 0; i < 7; i++) {
    char *e = agt_base64_encode(samples[i], strlen(samples[i]));
    size_t n;
    char *d;
    assert_string_equal(e, expect[i]);
    d = agt_base64_decode(e, &n);
    assert_non_null(d);
    assert_int_equal(n, strlen(samples[i]));
    assert_memory_equal(d, samples[i], n);
    free(d);
    free(e);
  }
  {
    size_t n;
    assert_null(agt_base64_decode("Zm9", &n));
    assert_null(agt_base64_decode("Z!==", &n));
  }
}

/* Limits that may be lifted: "unlimited", never 0 (which once meant no limit). */
static void test_limits(void **state)
{
  json_t *p = json_pack("{s:i, s:s, s:i, s:s, s:i}", "a", 512, "b", "unlimited", "c", 0, "d",
                        "none", "e", -1);
  agt_error_t err = NULL;
  uint64_t v = 7;

  (void)state;
  assert_int_equal(agt_param_limit(p, "a", &v, &err), 0);
  assert_int_equal(v, 512);
  assert_int_equal(agt_param_limit(p, "b", &v, &err), 0);
  assert_true(v == UINT64_MAX);
  v = 7; /* a field left out leaves v as it was */
  assert_int_equal(agt_param_limit(p, "missing", &v, &err), 0);
  assert_int_equal(v, 7);
  assert_int_equal(agt_param_limit(p, "c", &v, &err), -1);
  assert_string_equal(err->msg,
                      "field 'c' is 0, which is not a limit: write \"unlimited\" for none");
  agt_error_release(&err);
  assert_int_equal(agt_param_limit(p, "d", &v, &err), -1);
  assert_string_equal(err->msg, "field 'd' must be a positive integer or \"unlimited\"");
  agt_error_release(&err);
  assert_int_equal(agt_param_limit(p, "e", &v, &err), -1);
  agt_error_release(&err);
  json_decref(p);

  p = agt_limit_json(UINT64_MAX);
  assert_string_equal(json_string_value(p), "unlimited");
  json_decref(p);
  p = agt_limit_json(1000);
  assert_int_equal(json_integer_value(p), 1000);
  json_decref(p);

  assert_int_equal(agt_parse_limit("--memory", "2G", 1, &v, &err), 0);
  assert_int_equal(v, 2ull << 30);
  assert_int_equal(agt_parse_limit("--cpu", "unlimited", 0, &v, &err), 0);
  assert_true(v == AGT_LIMIT_UNLIMITED);
  assert_int_equal(agt_parse_limit("--pids", "0", 0, &v, &err), -1);
  assert_string_equal(err->msg, "--pids 0 is not a limit: write 'unlimited' for none");
  agt_error_release(&err);
  assert_int_equal(agt_parse_limit("--memory", "0M", 1, &v, &err), -1);
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_bytewise),
      cmocka_unit_test(test_two_frames_in_one_read),
      cmocka_unit_test(test_bad_frames_then_good),
      cmocka_unit_test(test_oversized_is_skipped_not_buffered),
      cmocka_unit_test(test_oversized_partially_received_then_resync),
      cmocka_unit_test(test_envelope_errors),
      cmocka_unit_test(test_params),
      cmocka_unit_test(test_base64),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
