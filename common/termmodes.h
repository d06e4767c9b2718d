/* What a jail's program switched on in the user's terminal, read from its output, so that
 * agt can switch it off again when the user leaves the jail (detach, or the program's end
 * without its own cleanup), as tmux does: the alternate screen, mouse reporting, bracketed
 * paste, focus events, a hidden cursor, application cursor keys and keypad, and the
 * keyboard protocols (kitty's, xterm's modifyOtherKeys) that change what keys send. */
#ifndef AGT_TERMMODES_H
#define AGT_TERMMODES_H

#include <stddef.h>

struct agt_termmodes {
  unsigned on;    /* AGT_TM_* bits */
  unsigned kitty; /* kitty keyboard flags pushed (CSI > flags u), not popped */
  int state;      /* the parser's: ground, ESC, CSI */
  char buf[32];   /* a CSI's parameters so far */
  size_t len;     /* 0..sizeof buf; sizeof buf + 1: too long, ignored */
};

enum {
  AGT_TM_ALT_1049 = 1u << 0,
  AGT_TM_ALT_1047 = 1u << 1,
  AGT_TM_ALT_47 = 1u << 2,
  AGT_TM_MOUSE_1000 = 1u << 3,
  AGT_TM_MOUSE_1002 = 1u << 4,
  AGT_TM_MOUSE_1003 = 1u << 5,
  AGT_TM_MOUSE_1005 = 1u << 6,
  AGT_TM_MOUSE_1006 = 1u << 7,
  AGT_TM_MOUSE_1015 = 1u << 8,
  AGT_TM_MOUSE_1016 = 1u << 9,
  AGT_TM_FOCUS = 1u << 10,         /* 1004 */
  AGT_TM_PASTE = 1u << 11,         /* 2004 */
  AGT_TM_CURSOR_HIDDEN = 1u << 12, /* 25 reset */
  AGT_TM_APP_CURSOR = 1u << 13,    /* 1 */
  AGT_TM_APP_KEYPAD = 1u << 14,    /* ESC = */
  AGT_TM_MODIFY_KEYS = 1u << 15,   /* CSI > 4 ; N m with N > 0 */
  AGT_TM_KITTY_SET = 1u << 16,     /* CSI = flags ; mode u */
};

void agt_termmodes_init(struct agt_termmodes *t);
/* Output of the jail, in pieces as it comes (a sequence may be split anywhere). */
void agt_termmodes_feed(struct agt_termmodes *t, const char *data, size_t len);
/* The sequences that switch off what is on now (empty when nothing is), and reset the
 * character attributes; the result is static. */
const char *agt_termmodes_reset(const struct agt_termmodes *t);

#endif
