/* The agt wire protocol: framing and message shapes (docs/PROTOCOL.md).
 *
 * A frame is a 4-byte big-endian payload length followed by that many bytes of one JSON
 * object.  Requests are {"id":N,"method":"...","params":{...}}; replies carry the same id
 * and either "result" or "error":{"kind":"...","message":"..."}.  The first request on a
 * connection must be "hello". */
#ifndef AGT_PROTO_H
#define AGT_PROTO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define AGT_PROTO_VERSION 1
#define AGT_FRAME_MAX (1024 * 1024) /* largest payload either side accepts */
#define AGT_FRAME_HDR 4

struct agt_decoder_s {
  unsigned char *buf; /* bytes received and not yet consumed */
  size_t len, cap;
  uint64_t skip; /* bytes of an oversized frame still to discard */
};
typedef struct agt_decoder_s agt_decoder_t;

void agt_decoder_init(agt_decoder_t *d);
void agt_decoder_release(agt_decoder_t *d);
/* Append received bytes.  Bytes of a frame being skipped are dropped here, so an oversized
 * frame is never buffered. */
void agt_decoder_feed(agt_decoder_t *d, const void *data, size_t len);
/* Take the next complete frame.  Returns 1 and sets *msg (a JSON object the caller must
 * json_decref) when one is ready, 0 when more bytes are needed, and -1 with *err filled
 * (kind AGT_E_PROTO) when a frame was bad: empty, oversized, not JSON, or not an object.
 * After -1 the decoder has dropped the bad frame and can go on. */
int agt_decoder_next(agt_decoder_t *d, json_t **msg, agt_error_t *err);

/* Serialise msg into a newly allocated frame (header + payload).  Fails (kind AGT_E_LIMIT)
 * when the payload would exceed AGT_FRAME_MAX. */
int agt_frame_encode(json_t *msg, unsigned char **out, size_t *outlen, agt_error_t *err);

/* Message builders.  Each steals nothing: the caller keeps its references. */
json_t *agt_msg_request(uint64_t id, const char *method, json_t *params);
json_t *agt_msg_result(uint64_t id, json_t *result);
json_t *agt_msg_error(uint64_t id, agt_error_t e);

/* Request parsing: validates the envelope and sets the borrowed pointers. */
int agt_msg_parse_request(json_t *msg, uint64_t *id, const char **method, json_t **params,
                          agt_error_t *err);
/* Reply parsing: sets *result (borrowed) or turns an error reply into *err. */
int agt_msg_parse_reply(json_t *msg, uint64_t *id, json_t **result, agt_error_t *err);

/* Typed accessors for params with clear errors naming the field. */
int agt_param_str(json_t *params, const char *key, int required, const char **out,
                  agt_error_t *err);
int agt_param_u64(json_t *params, const char *key, int required, uint64_t *out, agt_error_t *err);
int agt_param_bool(json_t *params, const char *key, int *out, agt_error_t *err);
/* A limit that may be lifted: a positive integer, or the string "unlimited" (*out =
 * UINT64_MAX).  0 is refused: it is not a limit.  Absent: *out is left alone. */
int agt_param_limit(json_t *params, const char *key, uint64_t *out, agt_error_t *err);
/* Its wire form: "unlimited" for UINT64_MAX, else the integer. */
json_t *agt_limit_json(uint64_t v);
/* Refuse any key of obj not in the NULL-terminated list known: "unknown field
 * '<prefix><key>'", so a typo is never silently ignored. */
int agt_param_only(json_t *obj, const char *const *known, const char *prefix, agt_error_t *err);

#endif
