/* agt's connection keeper: one SSH connection per target kept open between agt's
 * commands, as OpenSSH's ControlMaster does.
 *
 * The first command that needs a target starts a small background process of its own (a
 * fork of agt, in its own session) that makes the SSH connection, listens on a unix socket
 * only its user can reach (a 0700 directory: $XDG_RUNTIME_DIR/agt, else $TMPDIR/agt-UID or
 * /tmp/agt-UID; the socket 0600), and for each connection to that socket opens a channel to
 * agtd's socket and bridges the two.  Later commands connect to the socket: no TCP, key exchange or
 * authentication, and no `limactl list` for a Lima target.  The keeper exits when its socket
 * is removed or replaced, after `ssh.persist` without any channel open (0 turns the keeper
 * off), and a minute after its SSH connection dropped: meanwhile it tells each client why
 * (the next keeper, started by that client, takes its socket's place).
 *
 * Wire: the keeper writes first 'k', its peer ("user@host:port") and '\n', then the
 * channel's bytes; or 'e' (agtd could not be reached: the error's kind as a decimal number,
 * '\n', the message, then close) or 'd' (the SSH connection had dropped, and why, then '\n':
 * the keeper is going away). */
#ifndef AGT_HOST_MUX_H
#define AGT_HOST_MUX_H

#include <stdint.h>

#include "error.h"
#include "ssh.h"

/* Makes the connection the keeper will hold; errors as agt_ssh_connect's. */
typedef int (*agt_mux_connect_fn)(void *arg, agt_ssh_t **out, agt_error_t *err);

struct agt_mux {
  char *path;              /* the keeper's socket */
  const char *agtd_socket; /* on the far side */
  uint64_t idle_s;         /* ssh.persist */
  uint64_t timeout_s;      /* ssh.connect_timeout: how long a channel's opening may take */
  agt_mux_connect_fn connect;
  void *arg;
};

/* The socket of the keeper for `key` (everything that makes two connections different:
 * target, user, key file, agtd's socket), its directory made (0700, checked to be the
 * user's own). */
int agt_mux_init(struct agt_mux *m, const char *key, agt_error_t *err);
void agt_mux_release(struct agt_mux *m);

/* A connection to agtd through the keeper, starting the keeper when none answers.  *fd is
 * a connected socket, the caller sends hello; *peer ("user@host:port", to be freed) is the
 * keeper's.  *note (NULL or to be freed) says, for stderr, that a kept connection had
 * dropped and a new one was made. */
int agt_mux_open(struct agt_mux *m, int *fd, char **peer, char **note, agt_error_t *err);
/* After a connection through the keeper ended: why, when it was because the keeper's SSH
 * connection dropped or the keeper is gone (to be freed); NULL while the keeper is alive. */
char *agt_mux_dropped(struct agt_mux *m);

#endif
