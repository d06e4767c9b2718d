#include "rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"

int agt_rpc_send_raw(agt_rpc_t *r, const void *data, size_t len, agt_error_t *err)
{
  const char *p = data;

  while (len > 0) {
    /* Callers ignore SIGPIPE (agt and agtd do): a closed peer is EPIPE here. */
    ssize_t n = write(r->fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return agt_error_make(err, errno, "send to agtd");
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int agt_rpc_read_msg(agt_rpc_t *r, json_t **msg, agt_error_t *err)
{
  char buf[65536];

  for (;;) {
    int k = agt_decoder_next(&r->dec, msg, err);
    ssize_t n;

    if (k != 0)
      return k < 0 ? -1 : 0;
    n = read(r->fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return agt_error_make(err, errno, "read from agtd");
    }
    if (n == 0)
      return agt_error_kind(err, AGT_E_PROTO, "agtd closed the connection");
    agt_decoder_feed(&r->dec, buf, (size_t)n);
  }
}

int agt_rpc_send(agt_rpc_t *r, const char *method, json_t *params, uint64_t *id, agt_error_t *err)
{
  json_t *req;
  unsigned char *frame;
  size_t len;
  int ret;

  *id = ++r->next_id;
  req = agt_msg_request(*id, method, params);
  ret = agt_frame_encode(req, &frame, &len, err);
  json_decref(req);
  if (ret < 0)
    return -1;
  ret = agt_rpc_send_raw(r, frame, len, err);
  free(frame);
  return ret;
}

int agt_rpc_call(agt_rpc_t *r, const char *method, json_t *params, json_t **result,
                 agt_error_t *err)
{
  uint64_t id;

  *result = NULL;
  if (agt_rpc_send(r, method, params, &id, err) < 0)
    return -1;
  return agt_rpc_await(r, id, result, err);
}

int agt_rpc_await(agt_rpc_t *r, uint64_t id, json_t **result, agt_error_t *err)
{
  uint64_t got;
  int ret;

  *result = NULL;
  for (;;) {
    json_t *msg, *res;
    if (agt_rpc_read_msg(r, &msg, err) < 0)
      return -1;
    ret = agt_msg_parse_reply(msg, &got, &res, err);
    if (got != id && ret == 0) {
      json_decref(msg); /* a reply to something else: not ours */
      continue;
    }
    if (got != id && got != 0) {
      json_decref(msg);
      agt_error_release(err);
      continue;
    }
    if (ret == 0)
      *result = json_incref(res);
    json_decref(msg);
    return ret;
  }
}

int agt_rpc_open_fd(agt_rpc_t *r, int fd, agt_error_t *err)
{
  json_t *params;
  int ret;

  memset(r, 0, sizeof *r);
  r->fd = fd;
  agt_decoder_init(&r->dec);
  params = json_pack("{s:i, s:s}", "version", AGT_PROTO_VERSION, "client", "agt");
  ret = agt_rpc_call(r, "hello", params, &r->hello, err);
  json_decref(params);
  if (ret < 0)
    return agt_error_wrap(err, "hello");
  return 0;
}

int agt_rpc_connect_unix(agt_rpc_t *r, const char *path, agt_error_t *err)
{
  struct sockaddr_un sa;
  int fd;

  memset(r, 0, sizeof *r);
  r->fd = -1;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path)
    return agt_error_kind(err, AGT_E_INVALID, "socket path '%s' is too long", path);
  strcpy(sa.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM, 0); /* SOCK_CLOEXEC is not POSIX (macOS lacks it) */
  if (fd < 0)
    return agt_error_make(err, errno, "socket");
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    close(fd);
    return agt_error_make(err, e, "connect to agtd at '%s'", path);
  }
  if (agt_rpc_open_fd(r, fd, err) < 0) {
    agt_rpc_close(r);
    return -1;
  }
  return 0;
}

void agt_rpc_close(agt_rpc_t *r)
{
  if (r->fd >= 0)
    close(r->fd);
  r->fd = -1;
  agt_decoder_release(&r->dec);
  json_decref(r->hello);
  r->hello = NULL;
}
