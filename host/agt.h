/* agt, the host CLI: what main() sets up for every command, and the commands. */
#ifndef AGT_HOST_AGT_H
#define AGT_HOST_AGT_H

#include <jansson.h>
#include <stdio.h>

#include "cli.h"
#include "config.h"
#include "error.h"
#include "lima.h"
#include "platform.h"
#include "target.h"
#include "template.h"

struct agt_ctx {
  struct agt_config cfg;
  struct agt_target target;
  struct agt_lima lima;
  struct agt_host host;
  struct agt_host_facts host_facts; /* this machine's; host points into it */
  int quiet;
  int exit_code;            /* what agt exits with when the command succeeds (agt shell) */
  agt_error_t config_error; /* AGT_CONFIG_ERRORS_OK: why the config did not load */
};

typedef int (*agt_cmd_fn)(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);

/* What main() does before calling a command. */
enum {
  AGT_NEED_TARGET = 1 << 0,      /* resolve the target (and limactl for lima targets) */
  AGT_NEED_LIMA = 1 << 1,        /* the target must be a Lima VM */
  AGT_CONFIG_ERRORS_OK = 1 << 2, /* run on defaults when the config does not load (doctor) */
};

struct agt_cmd {
  const char *name;
  agt_cmd_fn fn;
  unsigned flags;
  const char *help;
};

/* One command's help: generated from its option table. */
struct agt_cmd_help {
  const char *usage;
  const char *summary;
  const struct agt_opt *opts;
};

/* Parse a command's options, before or after its operands (podman's `logs NAME -f`),
 * except for a command whose usage ends in a COMMAND of its own (jail run AGENT ARGS, jail
 * exec NAME COMMAND, shell COMMAND): there options come first, and what follows the first
 * operand is the command's.  Returns the index of the first operand; -2 after printing the help
 * (the command then returns 0); -1 on a bad option, the error led by the command's name from
 * its usage ("jail ls: unknown option '--x'"). */
int agt_cmd_opts(int argc, char **argv, const struct agt_cmd_help *h, agt_opt_fn fn, void *ctx,
                 agt_error_t *err);
/* A command made of subcommands (agt jail, agt rootfs): argv[1] names one of subs, which
 * runs with argv from there; without one, or with --help, the table is the help. */
struct agt_subcmd {
  const char *name;
  agt_cmd_fn fn;
  const char *help;
};
int agt_subcmd_run(struct agt_ctx *c, const char *cmd, const char *summary,
                   const struct agt_subcmd *subs, size_t n, int argc, char **argv,
                   agt_error_t *err);
#define AGT_OPT_JSON 1000
/* --json for a table whose command has a callback (key AGT_OPT_JSON). */
#define AGT_OPT_JSON_ENTRY AGT_OPT_KEY(AGT_OPT_JSON, "json", NULL, "print JSON")
/* --json setting the int member f of struct T. */
#define AGT_OPT_JSON_FIELD(T, f) AGT_OPT_BOOL(AGT_OPT_JSON, "json", T, f, "print JSON")
/* The flags many commands take, for their option entries to point at. */
struct agt_flags {
  int json, quiet, force;
};
/* The options of a command whose only one is --json (ctx: struct agt_flags). */
extern const struct agt_opt agt_json_opts[];

/* --format TEMPLATE, with --json: agt_print_out formats what --json prints (common/tmpl.h).
 * AGT_OPT_FORMAT_FIELD sets the int member f of struct T as --json does; in the table of a
 * command with a callback, AGT_OPT_FORMAT_ENTRY makes the callback see --json. */
#define AGT_OPT_FORMAT 1001
#define AGT_OPT_FORMAT_HELP                                                                        \
  "print each item through a Go template of the fields --json prints ({{.Name}} is name, "         \
  "{{.ExitCode}} exit_code), 'table ...' for columns under a header, or json (a line each)"
#define AGT_OPT_FORMAT_ENTRY AGT_OPT_KEY(AGT_OPT_FORMAT, "format", "TEMPLATE", AGT_OPT_FORMAT_HELP)
#define AGT_OPT_FORMAT_FIELD(T, f)                                                                 \
  AGT_OPT_CALLBACK(AGT_OPT_FORMAT, "format", "TEMPLATE", T, f, agt_opt_format, 0,                  \
                   AGT_OPT_FORMAT_HELP)
int agt_opt_format(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err);
/* --json and --format (ctx: struct agt_flags). */
extern const struct agt_opt agt_json_format_opts[];

/* A line on stderr, "agt: ...", unless --quiet. */
void agt_note(struct agt_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agt_print_json(json_t *v);
/* What --json prints: v as JSON, or with --format, items (else v) through the template:
 * each of a list, an object once. */
int agt_print_out(json_t *v, json_t *items, agt_error_t *err);
/* Ask on the terminal; 0 (no) without one. */
int agt_confirm(const char *question);
/* Fail unless the target is a Lima VM. */
int agt_need_lima(struct agt_ctx *c, const char *cmd, agt_error_t *err);
/* The VM's state from limactl; *found 0 when it does not exist. */
int agt_vm_state(struct agt_ctx *c, struct agt_lima_instance *in, int *found, agt_error_t *err);

/* What builds the missing rootfs REF: for the default one, 'agt rootfs build' with the manifest
 * agt knows, as the target can read it (cmd_rootfs.c). */
char *agt_rootfs_advice(struct agt_ctx *c, const char *ref);
int cmd_up(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_stop(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_delete(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_reset(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_clone(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_restore(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_shell(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_status(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_template(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_config(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_jail(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_agents(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_rootfs(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_verify(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_doctor(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);
int cmd_completion(struct agt_ctx *c, int argc, char **argv, agt_error_t *err);

#endif
