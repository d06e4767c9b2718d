/* The limactl driver.  Every call is `limactl --tty=false --log-format=json COMMAND ...`
 * run through agt_subprocess with LIMA_HOME set and a scratch working directory; stdout
 * and stderr are captured, and a failure becomes an error that quotes limactl's own
 * message.  The behaviour relied on is limactl's documented contract (see docs/HOST.md):
 * `list --json` prints one object per line; `stop` of a stopped instance and `create` of
 * an existing one fail; `delete` and `factory-reset` of a missing one succeed; `clone`
 * and `rename` need a source that is not running; `start` of a running instance succeeds. */
#ifndef AGT_HOST_LIMA_H
#define AGT_HOST_LIMA_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "subprocess.h"

#define AGT_LIMA_DEFAULT_INSTANCE "agt_agent_sandbox"
#define AGT_LIMA_NAME_MAX 76
#define AGT_LIMA_SOCKET_MAX 104 /* sun_path on macOS: Lima checks its longest socket path */

enum agt_lima_status {
  AGT_LIMA_UNKNOWN = 0, /* "" or a value this agt does not know */
  AGT_LIMA_UNINITIALIZED,
  AGT_LIMA_INSTALLING,
  AGT_LIMA_BROKEN,
  AGT_LIMA_STOPPED,
  AGT_LIMA_RUNNING,
};

/* What `limactl list --json NAME` says about one instance.  Fields it leaves out stay 0 or
 * NULL; fields this agt does not know are ignored. */
struct agt_lima_instance {
  char *name;
  char *status_text; /* as limactl wrote it */
  enum agt_lima_status status;
  char *dir;
  char *vm_type;
  char *arch;
  uint64_t cpus, memory, disk; /* memory and disk in bytes */
  unsigned ssh_port;           /* sshLocalPort */
  char *ssh_address;           /* sshAddress, else "127.0.0.1" */
  char *user;                  /* config.user.name */
  char *identity_file;         /* IdentityFile (deprecated field), may be NULL */
  long hostagent_pid, driver_pid;
  char **errors; /* NULL-terminated, may be NULL */
  char *message;
  char *lima_version;
  int is_protected;
  char *jails_disk; /* config.param.AgtJailsDisk: the Lima disk agt made for its jails */
};

/* What `limactl disk ls --json NAME` says about one Lima disk (lima.md: `_disks/NAME/`,
 * attached to one instance at a time, never deleted with it). */
struct agt_lima_disk {
  char *name;
  uint64_t size; /* bytes */
  char *format;
  char *dir;      /* $LIMA_HOME/_disks/NAME, holding `datadisk` */
  char *instance; /* the instance it is attached to (locked by), or NULL */
};

struct agt_lima {
  char *limactl; /* program name or path */
  char *home;    /* LIMA_HOME given to every call */
  char *workdir; /* the calls' working directory (limactl may drop files there) */
  /* Progress of long calls (start): one message per line limactl logs. */
  void (*progress)(void *ctx, const char *level, const char *msg);
  void *progress_ctx;
};

int agt_lima_name_check(const char *name, agt_error_t *err);
enum agt_lima_status agt_lima_status_parse(const char *s);
const char *agt_lima_status_name(enum agt_lima_status s);

void agt_lima_init(struct agt_lima *l, const char *limactl, const char *home, const char *workdir);
void agt_lima_release(struct agt_lima *l);

/* Argument vectors (NULL-terminated, newly allocated: agt_strv_free). */
char **agt_lima_argv_create(const struct agt_lima *l, const char *name, const char *yaml_file);
char **agt_lima_argv_start(const struct agt_lima *l, const char *name, uint64_t timeout_s);
char **agt_lima_argv_stop(const struct agt_lima *l, const char *name, int force);
char **agt_lima_argv_delete(const struct agt_lima *l, const char *name, int force);
/* set: `--set EXPR` each (yq expressions applied to the clone's lima.yaml), may be NULL. */
char **agt_lima_argv_clone(const struct agt_lima *l, const char *src, const char *dst,
                           char *const *set);
/* size: as Lima writes sizes ("50GiB": agt_lima_size) */
char **agt_lima_argv_disk_create(const struct agt_lima *l, const char *name, const char *size);
char **agt_lima_argv_disk_import(const struct agt_lima *l, const char *name, const char *file);
char **agt_lima_argv_disk_delete(const struct agt_lima *l, const char *name, int force);
char **agt_lima_argv_disk_list(const struct agt_lima *l, const char *name);
char **agt_lima_argv_rename(const struct agt_lima *l, const char *src, const char *dst);
char **agt_lima_argv_factory_reset(const struct agt_lima *l, const char *name);
char **agt_lima_argv_list(const struct agt_lima *l, const char *name);
char **agt_lima_argv_shell(const struct agt_lima *l, const char *name, const char *workdir,
                           char *const *cmd);
/* The environment edits of every call ("LIMA_HOME=..."). */
char **agt_lima_env(const struct agt_lima *l);

/* Parse `list --json` output: JSON objects one after another (one a line, or indented as
 * on a terminal).  Fills *inst from the object named `name` and sets *found. */
int agt_lima_parse_list(const char *out, size_t len, const char *name,
                        struct agt_lima_instance *inst, int *found, agt_error_t *err);
void agt_lima_instance_release(struct agt_lima_instance *inst);
/* Parse `disk ls --json` output (one object a line): *d from the disk named `name`. */
int agt_lima_parse_disk_list(const char *out, size_t len, const char *name, struct agt_lima_disk *d,
                             int *found, agt_error_t *err);
void agt_lima_disk_release(struct agt_lima_disk *d);

/* limactl's own message from its stderr: the fatal one, else the errors, else the last
 * line.  JSON log lines ({"level","msg"}) and text lines (level=fatal msg="...") are both
 * understood.  Newly allocated; never NULL. */
char *agt_lima_message(const char *err_buf);

/* The calls.  `what` in errors is the vm's name. */
int agt_lima_list(struct agt_lima *l, const char *name, struct agt_lima_instance *inst, int *found,
                  agt_error_t *err);
int agt_lima_create(struct agt_lima *l, const char *name, const char *yaml_file, agt_error_t *err);
int agt_lima_start(struct agt_lima *l, const char *name, uint64_t timeout_s, agt_error_t *err);
int agt_lima_stop(struct agt_lima *l, const char *name, int force, agt_error_t *err);
int agt_lima_delete(struct agt_lima *l, const char *name, int force, agt_error_t *err);
int agt_lima_clone(struct agt_lima *l, const char *src, const char *dst, char *const *set,
                   agt_error_t *err);
/* Lima disks: create (raw, size as "50GiB"), import (a copy of file), delete (one that is missing
 * is no error, as with limactl; without force, limactl skips one that a VM holds or that a
 * VM's lima.yaml names, with a warning and exit 0), list (the one named; *found 0 when there
 * is none). */
int agt_lima_disk_create(struct agt_lima *l, const char *name, const char *size, agt_error_t *err);
int agt_lima_disk_import(struct agt_lima *l, const char *name, const char *file, agt_error_t *err);
int agt_lima_disk_delete(struct agt_lima *l, const char *name, int force, agt_error_t *err);
int agt_lima_disk_list(struct agt_lima *l, const char *name, struct agt_lima_disk *d, int *found,
                       agt_error_t *err);
int agt_lima_rename(struct agt_lima *l, const char *src, const char *dst, agt_error_t *err);
int agt_lima_factory_reset(struct agt_lima *l, const char *name, agt_error_t *err);
/* Whether the name stays within Lima's socket-path limit under l->home (create, clone and
 * rename refuse longer ones). */
int agt_lima_sock_check(const struct agt_lima *l, const char *name, agt_error_t *err);
/* Interactive: limactl shares agt's terminal; *exit_code is the remote command's. */
int agt_lima_shell(struct agt_lima *l, const char *name, const char *workdir, char *const *cmd,
                   int *exit_code, agt_error_t *err);

/* $LIMA_HOME/_config/user, Lima's own SSH key. */
char *agt_lima_identity(const struct agt_lima *l);

#endif
