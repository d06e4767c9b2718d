/* SSH transport (libssh): one connection to the machine agtd runs on, and a
 * direct-streamlocal channel (what `ssh -L local:/remote.sock` uses; OpenSSH's sshd allows
 * it unless AllowStreamLocalForwarding is off) to agtd's unix socket there.
 *
 * Each channel is bridged to one end of a socketpair by a thread, so agt's blocking RPC
 * client (common/rpc.h) works on it as on any socket.  One connection carries any number
 * of channels (agt jail port opens one per forwarded connection); the thread serves them
 * all, and it alone touches the libssh session once it runs: new channels are opened at
 * its hands.  A reader that does not keep up holds back its own channel only.  When the
 * connection drops, the thread records why and closes its ends: the RPC clients then see
 * end-of-file, and agt_ssh_dropped() says what happened. */
#ifndef AGT_HOST_SSH_H
#define AGT_HOST_SSH_H

#include "error.h"

enum agt_hostkey_policy {
  /* The host key must be in known_hosts (ssh:// targets).  An unknown or changed key is
   * refused, never added. */
  AGT_HOSTKEY_KNOWN_HOSTS,
  /* A Lima VM on a port its host agent forwards on 127.0.0.1: Lima itself does not check
   * host keys (they change at every boot and clones share them).  agt pins the key for the
   * life of the host agent process: a different key while the same host agent runs is
   * refused. */
  AGT_HOSTKEY_LIMA_PIN,
};

struct agt_ssh_opts {
  const char *host;
  unsigned port;
  const char *user;
  const char *identity; /* private key file; NULL: ssh-agent and ~/.ssh/id_* */
  enum agt_hostkey_policy policy;
  const char *known_hosts; /* AGT_HOSTKEY_KNOWN_HOSTS: the file (NULL: libssh's default) */
  const char *pin_file;    /* AGT_HOSTKEY_LIMA_PIN: where the pin is kept */
  long pin_tag;            /* AGT_HOSTKEY_LIMA_PIN: the host agent's pid */
  long timeout_s;          /* connect and authentication */
  int use_ssh_config;      /* read ~/.ssh/config (ssh:// targets) */
};

typedef struct agt_ssh_s agt_ssh_t;

int agt_ssh_connect(const struct agt_ssh_opts *o, agt_ssh_t **out, agt_error_t *err);
/* Open a channel to a unix socket on the far side (starting the bridge on the first).  *fd
 * is the local end, owned by the caller; closing it ends the channel. */
int agt_ssh_open_unix(agt_ssh_t *s, const char *path, int *fd, agt_error_t *err);
/* The same, bridged to `fd` (a connected socket, taken over on success: the bridge closes
 * it with the channel; left to the caller on failure), to which the bridge first writes
 * `greeting` (a few bytes).  For agt's connection keeper (mux.h). */
int agt_ssh_adopt_unix(agt_ssh_t *s, const char *path, int fd, const char *greeting,
                       agt_error_t *err);
/* How many channels are open. */
int agt_ssh_channels(agt_ssh_t *s);
/* Why the bridge stopped, when it stopped because of the connection; NULL otherwise. */
const char *agt_ssh_dropped(agt_ssh_t *s);
/* "user@host:port" */
const char *agt_ssh_peer(agt_ssh_t *s);
/* Ends the bridge, every channel (what was written to them is sent first) and the
 * connection. */
void agt_ssh_free(agt_ssh_t *s);

#endif
