/* The loop's read buffer (readbuf.h). */
#include "readbuf.h"

void agt_read_buffer(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  static char slab[65536];

  (void)h;
  (void)suggested;
  buf->base = slab;
  buf->len = sizeof slab;
}
