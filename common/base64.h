/* Base64 (RFC 4648, with padding) for bytes that travel inside JSON strings. */
#ifndef AGT_BASE64_H
#define AGT_BASE64_H

#include <stddef.h>

char *agt_base64_encode(const void *data, size_t len);
/* Returns a newly allocated buffer and its length, or NULL on malformed input. */
void *agt_base64_decode(const char *s, size_t *len);

#endif
