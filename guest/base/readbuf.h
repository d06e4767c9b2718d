/* The loop's read buffer: libuv's alloc callback for reads consumed at once (copied or
 * written before the next read): one buffer for the whole single-threaded loop. */
#ifndef AGT_READBUF_H
#define AGT_READBUF_H

#include <uv.h>

void agt_read_buffer(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

#endif
