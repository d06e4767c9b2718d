/* Fuzz target: the wire protocol (common/proto.c) and base64 (common/base64.c).
 *
 * Input: a control byte, then (ctl & 15) chunk lengths of one byte each, then the byte stream
 * a peer would send.  The stream goes to agt_decoder_feed in chunks of those lengths, used in
 * turn and cycled (0 feeds nothing); with no lengths it goes in at once.  Frames are taken
 * with agt_decoder_next after every chunk, or only after the last one when ctl & 0x10.
 * Every decoded message goes through agt_msg_parse_request, the param accessors,
 * agt_msg_parse_reply and an encode/decode round trip, as does each reply built from a request
 * (agt_msg_result, agt_msg_error); every string param, and the whole stream when ctl & 0x20,
 * through agt_base64_decode.  When ctl & 0x40 the stream is fed 64 times over, so the
 * decoder's buffer grows large and shrinks again.  A broken contract aborts.
 * tests/fuzz/corpus/proto/ holds real frames with this prefix (tests/fuzz/make-corpus.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* A call that fails must fill *err, one that succeeds must not; then *err is released. */
static void check_result(int r, agt_error_t *err)
{
  CHECK(r == 0 || r == -1);
  CHECK((r < 0) == (*err != NULL));
  if (*err)
    CHECK((*err)->msg != NULL);
  agt_error_release(err);
}

/* decode(s) must succeed or fail cleanly; what it decodes must encode back to a string that
 * decodes to the same bytes. */
static void check_base64(const char *s)
{
  size_t len = 0, len2 = 0;
  unsigned char *bytes = agt_base64_decode(s, &len);
  char *again;
  unsigned char *bytes2;

  if (bytes == NULL)
    return;
  CHECK(len <= strlen(s) / 4 * 3);
  again = agt_base64_encode(bytes, len);
  CHECK(strlen(again) == (len + 2) / 3 * 4);
  bytes2 = agt_base64_decode(again, &len2);
  CHECK(bytes2 != NULL);
  CHECK(len2 == len && memcmp(bytes, bytes2, len) == 0);
  free(bytes2);
  free(again);
  free(bytes);
}

static const char *const known_params[] = {
    "name",   "version", "manifest", "ref",    "grace_ms",       "signal", "force",
    "offset", "max",     "agent",    "rootfs", "allow_download", "memory", NULL,
};

static void check_params(json_t *params, int depth)
{
  const char *key;
  json_t *v;
  agt_error_t err = NULL;

  for (const char *const *k = known_params; *k; k++) {
    const char *s = (const char *)1;
    uint64_t u = 7;
    int b = 2, r;

    for (int required = 0; required <= 1; required++) {
      r = agt_param_str(params, *k, required, &s, &err);
      check_result(r, &err);
      r = agt_param_u64(params, *k, required, &u, &err);
      check_result(r, &err);
    }
    r = agt_param_bool(params, *k, &b, &err);
    check_result(r, &err);
  }
  if (!json_is_object(params))
    return;
  json_object_foreach(params, key, v)
  {
    const char *s = NULL;
    uint64_t u = 0;
    int b = 2, r;

    r = agt_param_str(params, key, 1, &s, &err);
    CHECK((r == 0) == json_is_string(v));
    CHECK(r < 0 || strcmp(s, json_string_value(v)) == 0);
    check_result(r, &err);
    if (s)
      check_base64(s);
    r = agt_param_u64(params, key, 1, &u, &err);
    CHECK((r == 0) == (json_is_integer(v) && json_integer_value(v) >= 0));
    CHECK(r < 0 || u == (uint64_t)json_integer_value(v));
    check_result(r, &err);
    r = agt_param_bool(params, key, &b, &err);
    CHECK((r == 0) == (json_is_boolean(v) || json_is_null(v)));
    CHECK(!json_is_boolean(v) || b == json_is_true(v));
    check_result(r, &err);
    /* Nested objects ("limits", "env") are read with the same accessors. */
    if (json_is_object(v) && depth < 4)
      check_params(v, depth + 1);
  }
}

/* Encode msg and decode it again with a fresh decoder: the same message must come back. */
static void check_roundtrip(json_t *msg)
{
  unsigned char *frame = NULL;
  size_t len = 0;
  agt_error_t err = NULL;
  agt_decoder_t d;
  json_t *back = NULL;
  int r;

  r = agt_frame_encode(msg, &frame, &len, &err);
  if (r < 0) {
    /* Compact output can be longer than the input ("1e5" is 100000.0). */
    CHECK(err != NULL && err->kind == AGT_E_LIMIT);
    agt_error_release(&err);
    return;
  }
  CHECK(err == NULL && len > AGT_FRAME_HDR && len - AGT_FRAME_HDR <= AGT_FRAME_MAX);
  agt_decoder_init(&d);
  agt_decoder_feed(&d, frame, len);
  r = agt_decoder_next(&d, &back, &err);
  CHECK(r == 1 && back != NULL && err == NULL);
  CHECK(json_equal(msg, back));
  CHECK(d.len == 0 && d.skip == 0);
  json_decref(back);
  agt_decoder_release(&d);
  free(frame);
}

static void check_message(json_t *msg, int depth)
{
  agt_error_t err = NULL;
  uint64_t id = 1;
  const char *method = NULL;
  json_t *params = NULL, *result = NULL;
  int r;

  CHECK(json_is_object(msg));
  r = agt_msg_parse_request(msg, &id, &method, &params, &err);
  if (r == 0) {
    CHECK(method != NULL && params != NULL);
    CHECK(json_is_object(params) || json_is_null(params));
    check_base64(method);
    check_params(params, 0);
  }
  if (r == 0 && depth == 0) {
    /* What agtd answers: the params as a result, or the error. */
    json_t *reply = agt_msg_result(id, params);
    check_message(reply, depth + 1);
    json_decref(reply);
    reply = agt_msg_request(id, method, json_is_object(params) ? params : NULL);
    check_message(reply, depth + 1);
    json_decref(reply);
  } else if (r < 0 && depth == 0) {
    json_t *reply = agt_msg_error(id, err);
    check_message(reply, depth + 1);
    json_decref(reply);
  }
  check_result(r, &err);
  r = agt_msg_parse_reply(msg, &id, &result, &err);
  CHECK(r < 0 || result != NULL);
  check_result(r, &err);
  check_roundtrip(msg);
}

/* Take every complete frame. */
static void drain(agt_decoder_t *d)
{
  for (;;) {
    json_t *msg = NULL;
    agt_error_t err = NULL;
    int r = agt_decoder_next(d, &msg, &err);

    CHECK(r >= -1 && r <= 1);
    CHECK((r == 1) == (msg != NULL));
    CHECK((r == -1) == (err != NULL));
    CHECK(d->len <= d->cap);
    if (err)
      CHECK(err->kind == AGT_E_PROTO);
    agt_error_release(&err);
    if (r == 0)
      return;
    if (msg) {
      check_message(msg, 0);
      json_decref(msg);
    }
  }
}

/* Feed the stream in the chunk lengths given, draining after each unless ctl & 0x10. */
static void feed(agt_decoder_t *d, unsigned ctl, const uint8_t *chunks, unsigned nchunks,
                 const uint8_t *p, size_t left)
{
  size_t i = 0, idle = 0;

  while (left > 0) {
    size_t n = nchunks ? chunks[i++ % nchunks] : left;
    if (n > left)
      n = left;
    /* Lengths that are all 0 would never end: after a cycle of them, feed the rest. */
    idle = n == 0 ? idle + 1 : 0;
    if (idle > nchunks)
      n = left;
    agt_decoder_feed(d, p, n);
    p += n;
    left -= n;
    if (!(ctl & 0x10))
      drain(d);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  agt_decoder_t d;
  unsigned ctl, nchunks;
  const uint8_t *chunks, *p;
  size_t left;

  if (size == 0)
    return 0;
  ctl = data[0];
  nchunks = ctl & 15;
  if (size < 1 + nchunks)
    return 0;
  chunks = data + 1;
  p = data + 1 + nchunks;
  left = size - 1 - nchunks;

  if (ctl & 0x20) {
    char *s = malloc(left + 1);
    if (s == NULL)
      abort();
    memcpy(s, p, left);
    s[left] = '\0';
    check_base64(s);
    free(s);
  }

  agt_decoder_init(&d);
  for (int round = 0; round < (ctl & 0x40 ? 64 : 1); round++) {
    p = data + 1 + nchunks;
    left = size - 1 - nchunks;
    feed(&d, ctl, chunks, nchunks, p, left);
  }
  agt_decoder_feed(&d, p, 0);
  drain(&d);
  agt_decoder_release(&d);
  return 0;
}