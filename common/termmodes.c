#include "termmodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GROUND, ESC, CSI };

void agt_termmodes_init(struct agt_termmodes *t)
{
  memset(t, 0, sizeof *t);
}

static const struct {
  unsigned mode;
  unsigned bit;
  int set_means_on; /* 0: the mode's reset is what agt undoes (25: the cursor hidden) */
} dec[] = {
    {1049, AGT_TM_ALT_1049, 1},    {1047, AGT_TM_ALT_1047, 1},   {47, AGT_TM_ALT_47, 1},
    {1000, AGT_TM_MOUSE_1000, 1},  {1002, AGT_TM_MOUSE_1002, 1}, {1003, AGT_TM_MOUSE_1003, 1},
    {1005, AGT_TM_MOUSE_1005, 1},  {1006, AGT_TM_MOUSE_1006, 1}, {1015, AGT_TM_MOUSE_1015, 1},
    {1016, AGT_TM_MOUSE_1016, 1},  {1004, AGT_TM_FOCUS, 1},      {2004, AGT_TM_PASTE, 1},
    {25, AGT_TM_CURSOR_HIDDEN, 0}, {1, AGT_TM_APP_CURSOR, 1},
};

/* The numbers of a parameter string "1049;1006"; returns how many (at most max). */
static size_t numbers(const char *p, unsigned *out, size_t max)
{
  size_t n = 0;

  while (n < max) {
    char *end;
    unsigned long v = strtoul(p, &end, 10);
    out[n++] = end == p ? 0 : (unsigned)v;
    if (*end != ';')
      break;
    p = end + 1;
  }
  return n;
}

static void csi(struct agt_termmodes *t, char final)
{
  unsigned v[16];
  size_t n;
  char lead = t->len ? t->buf[0] : '\0';

  if (t->len > sizeof t->buf - 1)
    return; /* too long to be one of ours */
  t->buf[t->len] = '\0';
  if (lead == '?' && (final == 'h' || final == 'l')) {
    n = numbers(t->buf + 1, v, 16);
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < sizeof dec / sizeof dec[0]; k++)
        if (dec[k].mode == v[i]) {
          if ((final == 'h') == (dec[k].set_means_on != 0))
            t->on |= dec[k].bit;
          else
            t->on &= ~dec[k].bit;
        }
  } else if (lead == '>' && final == 'u') {
    t->kitty++;
  } else if (lead == '<' && final == 'u') {
    n = numbers(t->buf + 1, v, 1);
    unsigned pop = n && v[0] ? v[0] : 1;
    t->kitty = pop >= t->kitty ? 0 : t->kitty - pop;
  } else if (lead == '=' && final == 'u') {
    n = numbers(t->buf + 1, v, 2);
    if (n && v[0])
      t->on |= AGT_TM_KITTY_SET;
    else
      t->on &= ~AGT_TM_KITTY_SET;
  } else if (lead == '>' && final == 'm') {
    n = numbers(t->buf + 1, v, 2);
    if (n && v[0] == 4) {
      if (n == 2 && v[1] > 0)
        t->on |= AGT_TM_MODIFY_KEYS;
      else
        t->on &= ~AGT_TM_MODIFY_KEYS;
    }
  }
}

void agt_termmodes_feed(struct agt_termmodes *t, const char *data, size_t len)
{
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)data[i];
    switch (t->state) {
    case GROUND:
      if (c == 0x1b)
        t->state = ESC;
      break;
    case ESC:
      t->state = GROUND;
      if (c == '[') {
        t->state = CSI;
        t->len = 0;
      } else if (c == '=') {
        t->on |= AGT_TM_APP_KEYPAD;
      } else if (c == '>') {
        t->on &= ~AGT_TM_APP_KEYPAD;
      } else if (c == 'c') { /* a full reset: all off */
        t->on = 0;
        t->kitty = 0;
      } else if (c == 0x1b) {
        t->state = ESC;
      }
      break;
    case CSI:
      if (c >= 0x40 && c <= 0x7e) {
        csi(t, (char)c);
        t->state = GROUND;
      } else if (c == 0x1b) {
        t->state = ESC; /* cut short */
      } else if (c < 0x20) {
        /* a control character inside a sequence is acted on, the sequence goes on */
      } else if (t->len < sizeof t->buf) {
        t->buf[t->len++] = (char)c;
      } else {
        t->len = sizeof t->buf + 1;
      }
      break;
    }
  }
}

const char *agt_termmodes_reset(const struct agt_termmodes *t)
{
  static char out[512];
  size_t n = 0;

  out[0] = '\0';
  if (t->on == 0 && t->kitty == 0)
    return out;
#define PUT(s) n += (size_t)snprintf(out + n, sizeof out - n, "%s", s)
  for (size_t k = 0; k < sizeof dec / sizeof dec[0]; k++)
    if ((t->on & dec[k].bit) && dec[k].bit != AGT_TM_CURSOR_HIDDEN)
      n += (size_t)snprintf(out + n, sizeof out - n, "\033[?%ul", dec[k].mode);
  if (t->on & AGT_TM_CURSOR_HIDDEN)
    PUT("\033[?25h");
  if (t->on & AGT_TM_APP_KEYPAD)
    PUT("\033>");
  if (t->on & AGT_TM_MODIFY_KEYS)
    PUT("\033[>4m");
  if (t->on & AGT_TM_KITTY_SET)
    PUT("\033[=0;1u");
  if (t->kitty)
    n += (size_t)snprintf(out + n, sizeof out - n, "\033[<%uu", t->kitty);
  PUT("\033[0m");
#undef PUT
  return out;
}
