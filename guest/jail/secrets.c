#include "secrets.h"

#include <errno.h>
#include <linux/keyctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "jail.h"
#include "log.h"
#include "xalloc.h"

/* The kernel's limit for a "user" key's payload. */
#define SECRETS_MAX 32767

/* Permission bits of keyctl(KEYCTL_SETPERM) (the kernel's ABI; its uapi headers leave them
 * to libkeyutils): all of them for the key's user (root: agtd), none for its group, for
 * others, or for a possessor.  Not a possessor's: whoever can reach root's user keyring from
 * its own keyrings possesses the key, whatever its uid, and a possessor's rights add to its
 * user's or others'.  A session keyring that links root's user keyring (pam_keyinit's at a
 * root login) is inherited by what is started from it, agtd and its jails included, and by
 * a process that drops root's uid: with a possessor's read, any of them could read every
 * jail's secrets. */
#define KEY_PERM_ROOT_ONLY 0x003f0000u

/* glibc has no wrappers for these (libkeyutils has; three calls do not need it). */
static long key_add(const char *desc, const void *data, size_t len, long keyring)
{
  return syscall(SYS_add_key, "user", desc, data, len, keyring);
}

static long key_ctl(int op, unsigned long a, unsigned long b, unsigned long c)
{
  return syscall(SYS_keyctl, op, a, b, c, 0UL);
}

static char *description(const struct agt_jail_record *rec)
{
  return xasprintf("agt-jail-secrets:%s:%lld", rec->dir, (long long)rec->created);
}

int agt_secrets_is_one(char **names, const char *entry)
{
  size_t n = strcspn(entry, "=");

  for (; names && *names; names++)
    if (strlen(*names) == n && strncmp(*names, entry, n) == 0)
      return 1;
  return 0;
}

/* The key of rec, or -1 (errno set): agtd's own only.  Root's user keyring gives its
 * possessor the right to link keys into it (the kernel's 0x1f3f0000), and whoever possesses
 * it (a process that dropped root's uid in a session of pam_keyinit's, whose session keyring
 * links it) may link a key of its own there under a jail's description, which displaces
 * agtd's: its values would be the jail's after agtd's next start.  Such a key is another
 * uid's, since only root makes keys of root's: it is taken for none. */
static long find_key(const struct agt_jail_record *rec)
{
  cleanup_free char *desc = description(rec);
  cleanup_free char *info = NULL;
  size_t size = strlen(desc) + 64; /* "user;UID;GID;PERM;" and the description */
  unsigned long uid;
  long id, n;
  int used = 0;

  id = key_ctl(KEYCTL_SEARCH, (unsigned long)KEY_SPEC_USER_KEYRING, (unsigned long)"user",
               (unsigned long)desc);
  if (id < 0)
    return -1;
  info = xmalloc(size);
  n = key_ctl(KEYCTL_DESCRIBE, (unsigned long)id, (unsigned long)info, size);
  if (n <= 0 || (size_t)n > size || info[n - 1] != '\0')
    return -1;
  if (sscanf(info, "user;%lu;%*[^;];%*[^;];%n", &uid, &used) < 1 || used == 0 ||
      uid != (unsigned long)geteuid() || strcmp(info + used, desc) != 0) {
    agt_log_warning("jail '%s': the key under its secrets' description is not agtd's (%.*s): "
                    "not taken",
                    rec->name, used ? used - 1 : 0, info);
    errno = EPERM;
    return -1;
  }
  return id;
}

int agt_secrets_keep(const struct agt_jail_record *rec)
{
  cleanup_free char *desc = NULL;
  cleanup_free char *buf = NULL;
  size_t len = 0;
  long id;

  if (rec->secrets == NULL || rec->secrets[0] == NULL)
    return 0;
  /* NAME=VALUE entries, each ended by a NUL: the order of rec->env */
  for (char **e = rec->env; e && *e; e++)
    if (agt_secrets_is_one(rec->secrets, *e))
      len += strlen(*e) + 1;
  if (len == 0)
    return 0;
  if (len > SECRETS_MAX) {
    agt_log_warning("jail '%s': its secrets (%zu bytes) are more than the kernel's keyring "
                    "holds in one key (%d): kept in agtd's memory only, so a start after agtd "
                    "restarts runs without them",
                    rec->name, len, SECRETS_MAX);
    return -EMSGSIZE;
  }
  buf = xmalloc(len);
  len = 0;
  for (char **e = rec->env; e && *e; e++)
    if (agt_secrets_is_one(rec->secrets, *e)) {
      size_t n = strlen(*e) + 1;
      memcpy(buf + len, *e, n);
      len += n;
    }
  /* Made in agtd's process keyring, where agtd possesses it and may set who else can use
   * it, then moved to root's user keyring, which outlives agtd (by its user's rights: the
   * possessor has none once they are set).  (Under systemd a service's
   * session keyring is its own, not linked to the user keyring: a key added there directly
   * would not be agtd's to change or, after a restart, to read.) */
  desc = description(rec);
  id = key_add(desc, buf, len, KEY_SPEC_PROCESS_KEYRING);
  explicit_bzero(buf, len);
  if (id < 0 ||
      /* root's, in full; nobody else's, not even a possessor's.  The user bits are what
       * agtd links, reads and drops it by. */
      key_ctl(KEYCTL_SETPERM, (unsigned long)id, KEY_PERM_ROOT_ONLY, 0) < 0 ||
      key_ctl(KEYCTL_LINK, (unsigned long)id, (unsigned long)KEY_SPEC_USER_KEYRING, 0) < 0) {
    int e = errno;
    if (id >= 0)
      key_ctl(KEYCTL_INVALIDATE, (unsigned long)id, 0, 0);
    agt_log_warning("jail '%s': the kernel's keyring refused its secrets (%s): kept in agtd's "
                    "memory only, so a start after agtd restarts runs without them",
                    rec->name, strerror(e));
    return -e;
  }
  key_ctl(KEYCTL_UNLINK, (unsigned long)id, (unsigned long)KEY_SPEC_PROCESS_KEYRING, 0);
  return 0;
}

char **agt_secrets_restore(struct agt_jail_record *rec)
{
  size_t nenv = 0, nlost = 0, nsec = 0;
  char **lost;
  char *buf = NULL;
  long id, len = -1;

  if (rec->secrets == NULL || rec->secrets[0] == NULL)
    return NULL;
  for (char **s = rec->secrets; *s; s++)
    nsec++;
  id = find_key(rec);
  if (id >= 0) {
    /* One read into room for the largest payload: KEYCTL_READ answers with the payload's
     * size, not with what it copied, and a key updated between a read of the size and a
     * read of the payload would have been bigger than its buffer. */
    buf = xmalloc(SECRETS_MAX + 1);
    len = key_ctl(KEYCTL_READ, (unsigned long)id, (unsigned long)buf, SECRETS_MAX);
    if (len <= 0 || len > SECRETS_MAX) {
      free(buf);
      buf = NULL;
    } else {
      buf[len] = '\0'; /* the payload ends with a NUL of its own: this one guards a bad one */
    }
  }
  for (char **e = rec->env; e && *e; e++)
    nenv++;
  rec->env = xrealloc(rec->env, (nenv + nsec + 1) * sizeof *rec->env);
  rec->env[nenv] = NULL;
  lost = xzalloc((nsec + 1) * sizeof *lost);
  for (char **s = rec->secrets; *s; s++) {
    const char *found = NULL;
    size_t n = strlen(*s);
    for (long off = 0; buf && off < len; off += (long)strlen(buf + off) + 1)
      if (strncmp(buf + off, *s, n) == 0 && buf[off + (long)n] == '=')
        found = buf + off;
    if (found) {
      rec->env[nenv++] = xstrdup(found);
      rec->env[nenv] = NULL;
    } else {
      lost[nlost++] = xstrdup(*s);
    }
  }
  if (buf) {
    explicit_bzero(buf, (size_t)len);
    free(buf);
  }
  if (nlost == 0) {
    free(lost);
    return NULL;
  }
  return lost;
}

void agt_secrets_forget(const struct agt_jail_record *rec)
{
  long id;

  if (rec->secrets == NULL || rec->secrets[0] == NULL)
    return;
  id = find_key(rec);
  if (id >= 0)
    key_ctl(KEYCTL_INVALIDATE, (unsigned long)id, 0, 0);
}
