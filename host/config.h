/* agt's configuration: built-in defaults, then the user's file
 * (~/.config/agt/config.yaml on Linux, ~/Library/Application Support/agt/config.yaml on
 * macOS, $XDG_CONFIG_HOME/agt/config.yaml, or --config / $AGT_CONFIG), then the
 * repository's overlay (.agt/config.yaml in the current directory or a parent), then
 * environment variables and command-line flags.  Scalars override; lists append.  Every
 * value remembers where it came from, for `agt config show` and for error messages.
 * docs/CONFIG.md describes the keys. */
#ifndef AGT_HOST_CONFIG_H
#define AGT_HOST_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "jailspec.h"

enum agt_cfg_src {
  AGT_CFG_DEFAULT = 0,
  AGT_CFG_FILE, /* file:line:column */
  AGT_CFG_ENV,  /* an environment variable */
  AGT_CFG_FLAG, /* a command-line flag */
};

struct agt_cfg_origin {
  enum agt_cfg_src src;
  const char *file; /* AGT_CFG_FILE: borrowed from agt_config.files */
  unsigned line, col;
  const char *what; /* AGT_CFG_ENV: the variable; AGT_CFG_FLAG: the flag; DEFAULT: a note */
};

struct agt_cfg_value {
  char *text; /* NULL: unset */
  struct agt_cfg_origin origin;
};

struct agt_cfg_mount {
  char *location;    /* absolute host path */
  char *mount_point; /* absolute guest path; NULL: same as location */
  int writable;
  struct agt_cfg_origin origin;
};

/* jail.mounts: a guest directory or file bound into every jail at the same path. */
struct agt_cfg_jmount {
  char *path; /* absolute, as this machine sees it (~ and relative paths resolved) */
  int writable;
  struct agt_cfg_origin origin;
};

struct agt_cfg_item {
  char *text;
  struct agt_cfg_origin origin;
};

/* agents.NAME: the defaults of one agent profile for `agt jail run NAME`. */
struct agt_cfg_agent {
  char *name;
  struct agt_cfg_value net;     /* agents.NAME.net: none, allow or open; text NULL: unset */
  struct agt_cfg_value version; /* agents.NAME.version: its package's pin (agents update) */
  struct agt_cfg_item *allow;   /* agents.NAME.allow: HOST[:PORT] entries (lists append) */
  size_t nallow;
};

#define AGT_CFG_LIMIT_(a, b, ID, ...) AGT_CFG_JAIL_##ID,
/* The config key of the jail spec's key id (enum agt_spec_id). */
#define AGT_CFG_JAIL_LIMIT(id) ((enum agt_cfg_key)(AGT_CFG_JAIL_MEMORY + (int)(id)))

/* The scalar keys, in the order `agt config show` prints them. */
enum agt_cfg_key {
  AGT_CFG_TARGET,
  AGT_CFG_VM_NAME,
  AGT_CFG_VM_CPUS,
  AGT_CFG_VM_MEMORY,
  AGT_CFG_VM_DISK,
  AGT_CFG_VM_JAILS_DISK,
  AGT_CFG_VM_TYPE,
  AGT_CFG_VM_ARCH,
  AGT_CFG_VM_IMAGE,
  AGT_CFG_VM_IMAGE_DIGEST,
  AGT_CFG_VM_KERNEL,
  AGT_CFG_VM_KERNEL_CMDLINE,
  AGT_CFG_VM_INITRD,
  AGT_CFG_VM_MOUNT_TYPE,
  AGT_CFG_VM_ROSETTA,
  AGT_CFG_VM_TEMPLATE,
  AGT_CFG_VM_AGT_SOURCE,
  AGT_CFG_LIMA_LIMACTL,
  AGT_CFG_LIMA_HOME,
  AGT_CFG_LIMA_START_TIMEOUT,
  AGT_CFG_AGTD_SOCKET,
  AGT_CFG_SSH_KNOWN_HOSTS,
  AGT_CFG_SSH_IDENTITY,
  AGT_CFG_SSH_CONNECT_TIMEOUT,
  AGT_CFG_SSH_PERSIST,
  AGT_CFG_JAIL_AGENT,
  AGT_CFG_JAIL_ROOTFS,
  AGT_CFG_JAIL_DETACH_KEYS,
  AGT_CFG_JAIL_HOME,
  /* jail.limits.KEY, from the jail spec's table: AGT_CFG_JAIL_MEMORY, ... */
  AGT_JAIL_LIMITS(AGT_CFG_LIMIT_, _, _) AGT_CFG_NKEYS
};

struct agt_config {
  struct agt_cfg_value v[AGT_CFG_NKEYS];
  struct agt_cfg_mount *mounts; /* vm.mounts */
  size_t nmounts;
  struct agt_cfg_item *env; /* jail.env: "NAME=VALUE", or "NAME" (from agt's environment) */
  size_t nenv;
  struct agt_cfg_jmount *jmounts; /* jail.mounts */
  size_t njmounts;
  struct agt_cfg_item *tools; /* jail.tools: guest binaries copied into the jails */
  size_t ntools;
  struct agt_cfg_agent *agents; /* agents.NAME, in the order they first appear */
  size_t nagents;
  char **files;    /* every file loaded, in order (origins point into these) */
  char *user_file; /* the user's config file, whether it exists or not (agt agents update) */
  size_t nfiles;
};

/* Where the files come from.  NULL members take their defaults: user_file from
 * $AGT_CONFIG, else agt_platform_config_file() for `os` (platform.h);
 * the overlay is searched from `cwd` (the current directory) up to the directory holding
 * .git or to /.  An explicit user_file must exist; the default one may be absent. */
struct agt_config_paths {
  const char *user_file;
  const char *cwd;
  int no_repo;    /* do not look for .agt/config.yaml */
  const char *os; /* "darwin" or "linux": whose default user file; NULL: this machine's */
};

void agt_config_init(struct agt_config *c);
void agt_config_release(struct agt_config *c);

/* Defaults, files, then environment ($AGT_TARGET, $AGT_INSTANCE, $LIMA_HOME as the default
 * of lima.home). */
int agt_config_load(struct agt_config *c, const struct agt_config_paths *paths, agt_error_t *err);
/* Merge one file, as the user's (not a repository's overlay).  `base` resolves relative
 * paths in it (NULL: the file's directory). */
int agt_config_load_file(struct agt_config *c, const char *file, const char *base,
                         agt_error_t *err);
/* Set a value from a flag or variable, checked like a file's. */
int agt_config_set(struct agt_config *c, enum agt_cfg_key key, const char *value,
                   enum agt_cfg_src src, const char *what, agt_error_t *err);

const char *agt_config_get(const struct agt_config *c, enum agt_cfg_key key);
const char *agt_config_key_name(enum agt_cfg_key key);
/* What is wrong with a jail.tools entry (a name on the guest's PATH or an absolute path),
 * or NULL when it is good; overlay: a repository's, which may name only names. */
const char *agt_config_tool_problem(const char *tool, int overlay);
/* Add a tool (checked), unless it is there already. */
int agt_config_add_tool(struct agt_config *c, const char *tool, const struct agt_cfg_origin *o,
                        agt_error_t *err);

/* agents.NAME, or NULL when the config says nothing about that agent. */
const struct agt_cfg_agent *agt_config_agent(const struct agt_config *c, const char *name);
/* Sizes ("4GiB"), numbers and durations ("10m", "90s", "600") as numbers. */
int agt_config_size(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                    agt_error_t *err);
int agt_config_u64(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                   agt_error_t *err);
int agt_config_seconds(const struct agt_config *c, enum agt_cfg_key key, uint64_t *out,
                       agt_error_t *err);
int agt_parse_duration(const char *what, const char *s, uint64_t *seconds, agt_error_t *err);

/* "file:line:col", "default", "env AGT_INSTANCE", "flag --target"; newly allocated. */
char *agt_cfg_origin_str(const struct agt_cfg_origin *o);

/* `agt config show`: YAML with each value's origin in a comment, or JSON. */
void agt_config_show(const struct agt_config *c, FILE *f);
void agt_config_show_json(const struct agt_config *c, FILE *f);

/* vm.agt_source's default: `built_from` (the tree agt was compiled from) while it holds
 * agt's sources, else DATADIR/src, the copy installed with agt (Homebrew's formula puts the
 * release's tree there); *what says which. */
char *agt_default_agt_source(const char *built_from, const char *datadir, const char **what);

/* A path with ~ expanded and, when relative, made absolute against base. */
char *agt_expand_path(const char *path, const char *base);

#endif
