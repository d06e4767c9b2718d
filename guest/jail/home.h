/* Agent homes: a directory per user and agent that a jail gets as its $HOME (/home/agent),
 * so that an agent's login, settings, sessions and MCP tokens outlive the jail.  They live
 * on the disk of the jails' writable layers when agtd has one (<layers>/.homes/USER/AGENT),
 * else under <state>/homes; never on the host.  A home is owned by the jail user of the
 * jails that use it.
 *
 * Jails of the same user and agent that run at once share the home, as the agents share
 * ~/.claude or ~/.codex when a person runs two of them on one machine (each agent writes its
 * state files by rename or with its own locks); agtd itself never writes into a home while a
 * jail uses it, and refuses to reset one in use. */
#ifndef AGT_HOME_H
#define AGT_HOME_H

#include <jansson.h>
#include <sys/types.h>

#include "disk.h"
#include "error.h"

struct agtd_s;

/* Where homes live (newly allocated). */
char *agt_home_root(struct agtd_s *d);
/* The home of user and agent (each checked as a name), newly allocated in *path. */
int agt_home_path(struct agtd_s *d, const char *user, const char *agent, char **path,
                  agt_error_t *err);
/* Make the home when missing (owned by uid:gid, 0700; on the jails' disk a subvolume of its
 * own, disk.h), else leave it as it is.  *owner and *group: who owns it now (the existing
 * home's owner, or uid:gid when made). */
int agt_home_ensure(struct agt_disk *dk, const char *path, uid_t uid, gid_t gid, uid_t *owner,
                    gid_t *group, agt_error_t *err);
/* Give everything in the home to uid:gid (a jail user that changed), never following a
 * symlink nor leaving the home's file system. */
int agt_home_chown(const char *path, uid_t uid, gid_t gid, agt_error_t *err);
/* What the home holds: {"path", "exists", "bytes", "files" (count), "entries" (up to max
 * relative paths, directories ending in '/')}. */
json_t *agt_home_describe(const char *path, size_t max);
/* Empty the home (it stays, empty and owned as before). */
int agt_home_empty(const char *path, agt_error_t *err);

#endif
