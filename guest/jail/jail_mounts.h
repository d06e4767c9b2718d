/* What a jail sees besides its root and workspace: its home (home.h), the guest directories
 * or files a request binds in at their own paths (`mounts`), and lockdown, which takes both
 * away.  Parsed from jail.create/jail.run (jail.c then checks each mount against agtd's
 * paths as it checks a workspace) and kept in the jail's record. */
#ifndef AGT_JAIL_MOUNTS_H
#define AGT_JAIL_MOUNTS_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "jailspec.h"

struct agtd_s;

#define AGT_JAIL_MOUNTS_MAX 32

/* The jail's $HOME (/home/agent): in its writable layer (none), a per-user, per-agent
 * directory kept across jails (persistent, home.h), or a tmpfs gone with the jail
 * (ephemeral: lockdown). */
enum agt_home_mode {
  AGT_HOME_NONE,
  AGT_HOME_PERSISTENT,
  AGT_HOME_EPHEMERAL,
};

/* A guest directory or file bound into the jail at the same path (jail_mounts.c). */
struct agt_jail_mount {
  char *path;
  int writable;
};

/* A file of an ephemeral home's clean copy (`home_files`), written into the fresh tmpfs at
 * every start: relative to $HOME, clean. */
struct agt_home_file {
  char *path;
  char *content;
  size_t len;
};

#define AGT_HOME_FILES_MAX 64
#define AGT_HOME_FILE_BYTES (64 * 1024)
#define AGT_HOME_FILES_BYTES (256 * 1024)

struct agt_jail_binds {
  enum agt_home_mode home_mode;
  char *home_user; /* persistent: whose home (a name) */
  char *home_path; /* persistent: the home's directory on the guest */
  int lockdown;    /* an untrusted repository: ephemeral home, no mounts, no open network */
  struct agt_jail_mount *mounts;
  size_t nmounts;
  struct agt_home_file *home_files; /* ephemeral: what its home holds at each start */
  size_t nhome_files;
};

/* A request's home, user, lockdown, mounts, as the jail spec's check of it found them
 * (run: agt_jail_run_from_json), and home_files (params'): each mount clean, absolute,
 * clear of the jail's system paths, with no symlink in it, a directory or a file; the home
 * files an ephemeral home's only: relative, clean, none inside another; agent names the
 * home, net_open says the request asked for network mode open.  The home is not made
 * here. */
int agt_binds_from_json(struct agtd_s *d, json_t *params, const struct agt_run_opts *run,
                        const char *agent, int net_open, struct agt_jail_binds *b,
                        agt_error_t *err);
int agt_binds_from_record(json_t *rec, struct agt_jail_binds *b, agt_error_t *err);
void agt_binds_to_json(const struct agt_jail_binds *b, json_t *o);
void agt_binds_release(struct agt_jail_binds *b);
/* Sort mounts so that a directory comes before what is mounted inside it. */
void agt_binds_sort(struct agt_jail_mount *m, size_t n);

#endif
