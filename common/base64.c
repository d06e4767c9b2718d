#include "base64.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *agt_base64_encode(const void *data, size_t len)
{
  const unsigned char *p = data;
  char *out = xmalloc(4 * ((len + 2) / 3) + 1), *o = out;
  size_t i;

  for (i = 0; i + 2 < len; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
    *o++ = alphabet[v >> 18 & 63];
    *o++ = alphabet[v >> 12 & 63];
    *o++ = alphabet[v >> 6 & 63];
    *o++ = alphabet[v & 63];
  }
  if (i < len) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0);
    *o++ = alphabet[v >> 18 & 63];
    *o++ = alphabet[v >> 12 & 63];
    *o++ = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
    *o++ = '=';
  }
  *o = '\0';
  return out;
}

static int value(char c)
{
  const char *p = c ? strchr(alphabet, c) : NULL;
  return p ? (int)(p - alphabet) : -1;
}

void *agt_base64_decode(const char *s, size_t *len)
{
  size_t n = strlen(s), i, o = 0;
  unsigned char *out;

  if (n % 4 != 0)
    return NULL;
  out = xmalloc(n / 4 * 3 + 1);
  for (i = 0; i < n; i += 4) {
    int a = value(s[i]), b = value(s[i + 1]), c = value(s[i + 2]), d = value(s[i + 3]);
    int last = i + 4 == n;
    if (a < 0 || b < 0 || (c < 0 && !(last && s[i + 2] == '=' && s[i + 3] == '=')) ||
        (d < 0 && !(last && s[i + 3] == '='))) {
      free(out);
      return NULL;
    }
    out[o++] = (unsigned char)(a << 2 | b >> 4);
    if (c >= 0)
      out[o++] = (unsigned char)((b & 15) << 4 | c >> 2);
    if (c >= 0 && d >= 0)
      out[o++] = (unsigned char)((c & 3) << 6 | d);
  }
  *len = o;
  return out;
}
