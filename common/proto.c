#include "proto.h"

#include <string.h>

#include "xalloc.h"

void agt_decoder_init(agt_decoder_t *d)
{
  memset(d, 0, sizeof *d);
}

void agt_decoder_release(agt_decoder_t *d)
{
  free(d->buf);
  memset(d, 0, sizeof *d);
}

void agt_decoder_feed(agt_decoder_t *d, const void *data, size_t len)
{
  const unsigned char *p = data;

  if (d->skip > 0) {
    size_t n = d->skip < len ? (size_t)d->skip : len;
    d->skip -= n;
    p += n;
    len -= n;
  }
  if (len == 0)
    return;
  if (d->len + len > d->cap) {
    size_t cap = d->cap ? d->cap : 4096;
    while (cap < d->len + len)
      cap *= 2;
    d->buf = xrealloc(d->buf, cap);
    d->cap = cap;
  }
  memcpy(d->buf + d->len, p, len);
  d->len += len;
}

static void consume(agt_decoder_t *d, size_t n)
{
  memmove(d->buf, d->buf + n, d->len - n);
  d->len -= n;
  /* Give memory back after a large frame so an idle connection stays small. */
  if (d->cap > 65536 && d->len < d->cap / 4) {
    d->cap = d->len > 4096 ? d->len : 4096;
    d->buf = xrealloc(d->buf, d->cap);
  }
}

int agt_decoder_next(agt_decoder_t *d, json_t **msg, agt_error_t *err)
{
  uint32_t n;
  json_error_t jerr;
  json_t *v;

  *msg = NULL;
  if (d->len < AGT_FRAME_HDR)
    return 0;
  n = (uint32_t)d->buf[0] << 24 | (uint32_t)d->buf[1] << 16 | (uint32_t)d->buf[2] << 8 |
      (uint32_t)d->buf[3];
  if (n == 0) {
    consume(d, AGT_FRAME_HDR);
    return agt_error_kind(err, AGT_E_PROTO, "empty frame");
  }
  if (n > AGT_FRAME_MAX) {
    size_t have = d->len - AGT_FRAME_HDR;
    size_t drop = have < n ? have : n;
    consume(d, AGT_FRAME_HDR + drop);
    d->skip = n - drop;
    return agt_error_kind(err, AGT_E_PROTO, "frame of %u bytes exceeds the limit of %u bytes", n,
                          (unsigned)AGT_FRAME_MAX);
  }
  if (d->len - AGT_FRAME_HDR < n)
    return 0;
  v = json_loadb((const char *)d->buf + AGT_FRAME_HDR, n, JSON_REJECT_DUPLICATES, &jerr);
  consume(d, AGT_FRAME_HDR + n);
  if (v == NULL)
    return agt_error_kind(err, AGT_E_PROTO, "frame is not valid JSON: %s at byte %d", jerr.text,
                          jerr.position);
  if (!json_is_object(v)) {
    json_decref(v);
    return agt_error_kind(err, AGT_E_PROTO, "frame is not a JSON object");
  }
  *msg = v;
  return 1;
}

int agt_frame_encode(json_t *msg, unsigned char **out, size_t *outlen, agt_error_t *err)
{
  char *s = json_dumps(msg, JSON_COMPACT);
  size_t n;
  unsigned char *f;

  if (s == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "cannot encode message");
  n = strlen(s);
  if (n > AGT_FRAME_MAX) {
    free(s);
    return agt_error_kind(err, AGT_E_LIMIT, "message of %zu bytes exceeds the frame limit", n);
  }
  f = xmalloc(AGT_FRAME_HDR + n);
  f[0] = (unsigned char)(n >> 24);
  f[1] = (unsigned char)(n >> 16);
  f[2] = (unsigned char)(n >> 8);
  f[3] = (unsigned char)n;
  memcpy(f + AGT_FRAME_HDR, s, n);
  free(s);
  *out = f;
  *outlen = AGT_FRAME_HDR + n;
  return 0;
}

json_t *agt_msg_request(uint64_t id, const char *method, json_t *params)
{
  json_t *m = json_object();

  json_object_set_new(m, "id", json_integer((json_int_t)id));
  json_object_set_new(m, "method", json_string(method));
  json_object_set(m, "params", params ? params : json_object());
  if (params == NULL)
    json_decref(json_object_get(m, "params"));
  return m;
}

json_t *agt_msg_result(uint64_t id, json_t *result)
{
  json_t *m = json_object();

  json_object_set_new(m, "id", json_integer((json_int_t)id));
  if (result)
    json_object_set(m, "result", result);
  else
    json_object_set_new(m, "result", json_object());
  return m;
}

json_t *agt_msg_error(uint64_t id, agt_error_t e)
{
  json_t *m = json_object();

  json_object_set_new(m, "id", json_integer((json_int_t)id));
  json_object_set_new(m, "error",
                      json_pack("{s:s, s:s}", "kind", agt_errkind_name(e ? e->kind : 0), "message",
                                e && e->msg ? e->msg : "unknown error"));
  return m;
}

static int get_id(json_t *msg, uint64_t *id, agt_error_t *err)
{
  json_t *v = json_object_get(msg, "id");

  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return agt_error_kind(err, AGT_E_PROTO, "field 'id' must be a non-negative integer");
  *id = (uint64_t)json_integer_value(v);
  return 0;
}

int agt_msg_parse_request(json_t *msg, uint64_t *id, const char **method, json_t **params,
                          agt_error_t *err)
{
  json_t *m, *p;

  *id = 0;
  if (get_id(msg, id, err) < 0)
    return -1;
  m = json_object_get(msg, "method");
  if (!json_is_string(m))
    return agt_error_kind(err, AGT_E_PROTO, "field 'method' must be a string");
  p = json_object_get(msg, "params");
  if (p == NULL)
    p = json_null();
  else if (!json_is_object(p))
    return agt_error_kind(err, AGT_E_PROTO, "field 'params' must be an object");
  *method = json_string_value(m);
  *params = p;
  return 0;
}

int agt_msg_parse_reply(json_t *msg, uint64_t *id, json_t **result, agt_error_t *err)
{
  json_t *e;

  *result = NULL;
  if (get_id(msg, id, err) < 0)
    return -1;
  e = json_object_get(msg, "error");
  if (e) {
    const char *kind = json_string_value(json_object_get(e, "kind"));
    const char *text = json_string_value(json_object_get(e, "message"));
    return agt_error_kind(err, agt_errkind_from_name(kind), "%s", text ? text : "error");
  }
  *result = json_object_get(msg, "result");
  if (*result == NULL)
    return agt_error_kind(err, AGT_E_PROTO, "reply has neither 'result' nor 'error'");
  return 0;
}

int agt_param_str(json_t *params, const char *key, int required, const char **out, agt_error_t *err)
{
  json_t *v = json_is_object(params) ? json_object_get(params, key) : NULL;

  *out = NULL;
  if (v == NULL || json_is_null(v)) {
    if (required)
      return agt_error_kind(err, AGT_E_INVALID, "missing field '%s'", key);
    return 0;
  }
  if (!json_is_string(v))
    return agt_error_kind(err, AGT_E_INVALID, "field '%s' must be a string", key);
  *out = json_string_value(v);
  return 0;
}

int agt_param_u64(json_t *params, const char *key, int required, uint64_t *out, agt_error_t *err)
{
  json_t *v = json_is_object(params) ? json_object_get(params, key) : NULL;

  if (v == NULL || json_is_null(v)) {
    if (required)
      return agt_error_kind(err, AGT_E_INVALID, "missing field '%s'", key);
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return agt_error_kind(err, AGT_E_INVALID, "field '%s' must be a non-negative integer", key);
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

int agt_param_limit(json_t *params, const char *key, uint64_t *out, agt_error_t *err)
{
  json_t *v = json_is_object(params) ? json_object_get(params, key) : NULL;

  if (v == NULL || json_is_null(v))
    return 0;
  if (json_is_string(v) && strcmp(json_string_value(v), "unlimited") == 0) {
    *out = UINT64_MAX;
    return 0;
  }
  if (json_is_integer(v) && json_integer_value(v) == 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "field '%s' is 0, which is not a limit: write \"unlimited\" for none",
                          key);
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "field '%s' must be a positive integer or \"unlimited\"", key);
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

json_t *agt_limit_json(uint64_t v)
{
  return v == UINT64_MAX ? json_string("unlimited") : json_integer((json_int_t)v);
}

int agt_param_bool(json_t *params, const char *key, int *out, agt_error_t *err)
{
  json_t *v = json_is_object(params) ? json_object_get(params, key) : NULL;

  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_boolean(v))
    return agt_error_kind(err, AGT_E_INVALID, "field '%s' must be true or false", key);
  *out = json_is_true(v);
  return 0;
}

int agt_param_only(json_t *obj, const char *const *known, const char *prefix, agt_error_t *err)
{
  const char *k;
  json_t *v;

  json_object_foreach(obj, k, v)
  {
    const char *const *q;
    for (q = known; *q; q++)
      if (strcmp(k, *q) == 0)
        break;
    if (*q == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "unknown field '%s%.64s'", prefix, k);
  }
  return 0;
}
