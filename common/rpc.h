/* A blocking client of agtd's protocol over any connected stream fd: a unix socket on the
 * guest, or a local end bridged to an SSH channel on the host. */
#ifndef AGT_RPC_H
#define AGT_RPC_H

#include <jansson.h>
#include <stdint.h>

#include "error.h"
#include "proto.h"

struct agt_rpc_s {
  int fd;
  agt_decoder_t dec;
  uint64_t next_id;
  json_t *hello; /* agtd's answer to hello */
};
typedef struct agt_rpc_s agt_rpc_t;

/* Connect to a unix socket and exchange hello. */
int agt_rpc_connect_unix(agt_rpc_t *r, const char *path, agt_error_t *err);
/* Take over an already connected fd and exchange hello. */
int agt_rpc_open_fd(agt_rpc_t *r, int fd, agt_error_t *err);
/* One request, one reply.  params is borrowed (NULL for {}).  *result is a new reference. */
int agt_rpc_call(agt_rpc_t *r, const char *method, json_t *params, json_t **result,
                 agt_error_t *err);
/* The same in two steps: send the request (its id in *id), then wait for its reply. */
int agt_rpc_send(agt_rpc_t *r, const char *method, json_t *params, uint64_t *id, agt_error_t *err);
int agt_rpc_await(agt_rpc_t *r, uint64_t id, json_t **result, agt_error_t *err);
/* Send raw bytes (tests use it to send malformed frames). */
int agt_rpc_send_raw(agt_rpc_t *r, const void *data, size_t len, agt_error_t *err);
/* Read the next frame, whatever it is. */
int agt_rpc_read_msg(agt_rpc_t *r, json_t **msg, agt_error_t *err);
void agt_rpc_close(agt_rpc_t *r);

#endif
