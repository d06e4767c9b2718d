/* The jail spec: a jail's limits, one table for every place that reads them.  Each key has
 * one line below (its field, type, argument, default, bounds, help); from it come agt's and
 * agtd ctl's flags (--memory), agt's config keys (jail.limits.memory), the wire field of a
 * run request (limits.memory) and agtd's checks of it, so a key, its default and its bounds
 * are written once.  Code that makes a spec (an agent profile) fills a struct agt_jail_spec
 * with agt_jail_spec_set or _put, which check as a flag is checked. */
#ifndef AGT_JAILSPEC_H
#define AGT_JAILSPEC_H

#include <jansson.h>
#include <stdint.h>

#include "cli.h"
#include "error.h"
#include "stream_relay.h"

/* How a key's value is written. */
enum agt_spec_type {
  AGT_SPEC_SIZE,  /* bytes, written 512M, 2G (agt_parse_size) */
  AGT_SPEC_COUNT, /* a number */
};

/* How a key may say "no limit". */
enum agt_spec_none {
  AGT_SPEC_NONE_NO,        /* it may not */
  AGT_SPEC_NONE_UNLIMITED, /* "unlimited" (AGT_LIMIT_UNLIMITED); 0 is refused: not a limit */
  AGT_SPEC_NONE_ZERO,      /* 0 */
};

/* X(a, b, ID, field, type, none, ARG, default, "default as written", least, most, "unit",
 * "help"): the unit follows numbers in messages (sizes say MiB).  `most` UINT64_MAX: no
 * bound but the type's. */
#define AGT_JAIL_LIMITS(X, a, b)                                                                   \
  X(a, b, MEMORY, memory, AGT_SPEC_SIZE, AGT_SPEC_NONE_UNLIMITED, "SIZE", 2ULL << 30, "2G",        \
    8ULL << 20, UINT64_MAX, "", "memory limit, e.g. 2G, or unlimited")                             \
  X(a, b, PIDS, pids, AGT_SPEC_COUNT, AGT_SPEC_NONE_UNLIMITED, "N", 512, "512", 1, UINT64_MAX, "", \
    "process limit, or unlimited")                                                                 \
  X(a, b, CPU, cpu, AGT_SPEC_COUNT, AGT_SPEC_NONE_UNLIMITED, "MILLI", 1000, "1000", 10, 1000000,   \
    " (thousandths of a core)", "CPU limit in thousandths of a core (10 or more), or unlimited")   \
  X(a, b, NOFILE, nofile, AGT_SPEC_COUNT, AGT_SPEC_NONE_NO, "N", 4096, "4096", 16, 1ULL << 20, "", \
    "open file limit")                                                                             \
  X(a, b, TMP, tmp, AGT_SPEC_SIZE, AGT_SPEC_NONE_NO, "SIZE", 512ULL << 20, "512M", 1ULL << 20,     \
    UINT64_MAX, "", "size of the jail's /tmp")                                                     \
  X(a, b, LOG, log, AGT_SPEC_SIZE, AGT_SPEC_NONE_NO, "SIZE", 8ULL << 20, "8M", 4096, UINT64_MAX,   \
    "", "output kept on disk")                                                                     \
  X(a, b, DISK, disk, AGT_SPEC_SIZE, AGT_SPEC_NONE_ZERO, "SIZE", 10ULL << 30,                      \
    "10G, or a tenth of the jails' disk", 16ULL << 20, UINT64_MAX, "",                             \
    "what the jail may write to its root, and to its persistent home, 0: no limit")

#define AGT_SPEC_ENUM_(a, b, ID, ...) AGT_SPEC_##ID,
enum agt_spec_id { AGT_JAIL_LIMITS(AGT_SPEC_ENUM_, _, _) AGT_SPEC_N };

/* One jail's limits.  A value AGT_LIMIT_UNLIMITED (cli.h) is no limit; `set` has bit
 * 1 << AGT_SPEC_x for each key given (agtd takes the others' defaults). */
#define AGT_SPEC_FIELD_(a, b, ID, field, ...) uint64_t field;
struct agt_jail_spec {
  AGT_JAIL_LIMITS(AGT_SPEC_FIELD_, _, _)
  unsigned set;
};

struct agt_spec_key {
  const char *key;    /* "memory": the flag --memory, the wire's limits.memory */
  const char *config; /* "jail.limits.memory" */
  enum agt_spec_type type;
  enum agt_spec_none none;
  const char *arg;      /* SIZE, N, MILLI */
  uint64_t def;         /* agtd's default */
  const char *def_text; /* as written: 2G */
  uint64_t least, most; /* bounds of a value that is a limit */
  const char *unit;     /* after a count in messages: " (thousandths of a core)" */
  const char *help;
  size_t off; /* the field in struct agt_jail_spec */
};

extern const struct agt_spec_key agt_jail_spec_keys[AGT_SPEC_N];

/* AGT_SPEC_x of a key ("memory"), or -1. */
int agt_jail_spec_find(const char *key);
/* Every key at its default, none set. */
void agt_jail_spec_init(struct agt_jail_spec *s);
uint64_t agt_jail_spec_get(const struct agt_jail_spec *s, enum agt_spec_id id);
/* Set a key from code: within its bounds, or refused with an error naming `what` (where
 * the value came from: "--memory", "jail.limits.memory", "limits.memory"). */
int agt_jail_spec_put(struct agt_jail_spec *s, enum agt_spec_id id, uint64_t v, const char *what,
                      agt_error_t *err);
/* Set a key from text as people write it ("2G", "unlimited", "512"). */
int agt_jail_spec_set(struct agt_jail_spec *s, enum agt_spec_id id, const char *text,
                      const char *what, agt_error_t *err);
/* The CPU limit in cores, as people write it: "1.5" (at most three decimals). */
int agt_jail_spec_set_cores(struct agt_jail_spec *s, const char *text, const char *what,
                            agt_error_t *err);
/* The wire's limits object: the keys set (all of them when `all`, as jail.inspect shows
 * them); NULL when none is set and not `all`. */
json_t *agt_jail_spec_to_json(const struct agt_jail_spec *s, int all);
/* A run request's limits object (NULL or absent: every default), each field checked as
 * agt_jail_spec_put checks it, errors naming limits.KEY; unknown fields refused.  A record
 * (jail.json of an agtd that took 0 for no limit): 0 keeps that meaning. */
int agt_jail_spec_from_json(struct agt_jail_spec *s, json_t *limits, int record, agt_error_t *err);

/* Option entries (cli.h): o->val is the AGT_SPEC_x; field a struct agt_jail_spec. */
int agt_jail_spec_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err);
/* --cpus CORES into the cpu key. */
int agt_jail_spec_opt_cores(const struct agt_opt *o, void *field, const char *arg,
                            agt_error_t *err);

/* Each key's option entry, filling member f (a struct agt_jail_spec) of struct T; the
 * help ends with the config key (agt: AGT_JAIL_LIMIT_OPTS_CONFIG) or the default (agtd ctl:
 * AGT_JAIL_LIMIT_OPTS_DEFAULT).  Then --cpus, the CPU limit in cores.  A table writes
 * AGT_JAIL_LIMIT_OPTS_CONFIG(T, f), as one of its entries. */
#define AGT_SPEC_OPT_CONFIG_(T, f, ID, field, type, none, arg, def, def_text, least, most, unit,   \
                             help)                                                                 \
  AGT_OPT_CALLBACK(0, #field, arg, T, f, agt_jail_spec_opt, AGT_SPEC_##ID,                         \
                   help " (jail.limits." #field ")"),
#define AGT_SPEC_OPT_DEFAULT_(T, f, ID, field, type, none, arg, def, def_text, least, most, unit,  \
                              help)                                                                \
  AGT_OPT_CALLBACK(0, #field, arg, T, f, agt_jail_spec_opt, AGT_SPEC_##ID, help " (" def_text ")"),
#define AGT_JAIL_LIMIT_OPTS_CONFIG(T, f)                                                           \
  AGT_JAIL_LIMITS(AGT_SPEC_OPT_CONFIG_, T, f)                                                      \
  AGT_OPT_CALLBACK(0, "cpus", "CORES", T, f, agt_jail_spec_opt_cores, AGT_SPEC_CPU,                \
                   "CPU limit in cores, e.g. 1.5, or unlimited (jail.limits.cpu, in thousandths)")
#define AGT_JAIL_LIMIT_OPTS_DEFAULT(T, f)                                                          \
  AGT_JAIL_LIMITS(AGT_SPEC_OPT_DEFAULT_, T, f)                                                     \
  AGT_OPT_CALLBACK(0, "cpus", "CORES", T, f, agt_jail_spec_opt_cores, AGT_SPEC_CPU,                \
                   "CPU limit in cores, e.g. 1.5, or unlimited (1)")

/* The run options beside the limits: what `agt jail run|create` and `agtd ctl jail
 * run|create` take, each on one line below, as the limits are.  From a line come both
 * sides' option entries (the flag, its argument, its check), agt's config key, the run
 * request's field and agtd's check of it; a side adds only what it says about the
 * default (agt: its config key; agtd ctl: agtd's default).  Options one side alone has
 * (agt's --env-file, agtd ctl's --attach) stay on that side. */
enum agt_run_type {
  AGT_RUN_T_TEXT,   /* a string (const char *) */
  AGT_RUN_T_NAME,   /* a name (agt_name_check) */
  AGT_RUN_T_CHOICE, /* one of `choices` ("none|allow|open") */
  AGT_RUN_T_FLAG,   /* a boolean (int: -1 unset, 0, 1) */
  AGT_RUN_T_LIST,   /* repeatable: a JSON array of strings */
  AGT_RUN_T_HOSTS,  /* repeatable HOST[:PORT]: a JSON array of strings */
  AGT_RUN_T_ENV,    /* repeatable NAME[=VALUE]: struct agt_run_env */
  AGT_RUN_T_MOUNT,  /* repeatable PATH[:rw]: a JSON array of {path, writable} */
  AGT_RUN_T_KEYS,   /* detach keys (agt_detach_keys_parse): a client's only, not sent */
};

/* A line: X(a, b, c, ID, field, short, "flag", ARG, type, "wire", "what", "config",
 * "default", "choices", "help").  `wire` is the run request's field (network.mode: the
 * member mode of network; NULL: not sent), `what` names it in agtd's messages, `config`
 * is agt's key (NULL: none), `default` agtd's (agt's config may say another). */
#define AGT_RUN_ROW_NAME(X, a, b, c)                                                               \
  X(a, b, c, NAME, name, 'n', "name", "NAME", AGT_RUN_T_NAME, "name", "jail name", NULL, NULL,     \
    NULL, "the jail's name")
#define AGT_RUN_ROW_AGENT(X, a, b, c)                                                              \
  X(a, b, c, AGENT, agent, 'a', "agent", "AGENT", AGT_RUN_T_NAME, "agent", "agent", "jail.agent",  \
    "shell", NULL, "agent profile: shell or opencode")
#define AGT_RUN_ROW_ROOTFS(X, a, b, c)                                                             \
  X(a, b, c, ROOTFS, rootfs, 'r', "rootfs", "REF", AGT_RUN_T_TEXT, "rootfs", "rootfs",             \
    "jail.rootfs", "default", NULL, "rootfs id, id prefix or manifest name")
#define AGT_RUN_ROW_LAYERS(X, a, b, c)                                                             \
  X(a, b, c, LAYERS, layers, 0, "layer", "REF", AGT_RUN_T_LIST, "layers", "layers", NULL, NULL,    \
    NULL, "a rootfs build stacked over it (repeatable; the first given is the top)")
#define AGT_RUN_ROW_WORKSPACE(X, a, b, c)                                                          \
  X(a, b, c, WORKSPACE, workspace, 'w', "workspace", "DIR", AGT_RUN_T_TEXT, "workspace",           \
    "workspace", NULL, NULL, NULL, "the directory bound read-write at /work")
#define AGT_RUN_ROW_ENV(X, a, b, c)                                                                \
  X(a, b, c, ENV, env, 'e', "env", "NAME[=VALUE]", AGT_RUN_T_ENV, "env", "env", "jail.env", NULL,  \
    NULL, "a variable for the agent")
#define AGT_RUN_ROW_TTY(X, a, b, c)                                                                \
  X(a, b, c, TTY, tty, 't', "tty", NULL, AGT_RUN_T_FLAG, "tty", "tty", NULL, NULL, NULL,           \
    "run on a terminal")
#define AGT_RUN_ROW_NET(X, a, b, c)                                                                \
  X(a, b, c, NET, net, 0, "net", "MODE", AGT_RUN_T_CHOICE, "network.mode", "network.mode",         \
    "agents.AGENT.net", "allow", "none|allow|open",                                                \
    "network: none, allow (through agtd's proxy) or open")
#define AGT_RUN_ROW_ALLOW(X, a, b, c)                                                              \
  X(a, b, c, ALLOW, allow, 0, "allow", "HOST[:PORT]", AGT_RUN_T_HOSTS, "network.allow",            \
    "network.allow", "agents.AGENT.allow", NULL, NULL, "let the jail reach HOST, or *.SUFFIX")
#define AGT_RUN_ROW_HOME(X, a, b, c)                                                               \
  X(a, b, c, HOME, home, 0, "home", "MODE", AGT_RUN_T_CHOICE, "home", "home", "jail.home", "none", \
    "none|persistent|ephemeral",                                                                   \
    "the jail's home: none (in its root), persistent (USER's home of AGENT), ephemeral")
#define AGT_RUN_ROW_USER(X, a, b, c)                                                               \
  X(a, b, c, USER, user, 0, "user", "NAME", AGT_RUN_T_TEXT, "user", "user", NULL, NULL, NULL,      \
    "whose persistent home (with --home persistent)")
#define AGT_RUN_ROW_LOCKDOWN(X, a, b, c)                                                           \
  X(a, b, c, LOCKDOWN, lockdown, 0, "lockdown", NULL, AGT_RUN_T_FLAG, "lockdown", "lockdown",      \
    NULL, NULL, NULL, "for an untrusted repository: a throwaway home")
#define AGT_RUN_ROW_MOUNTS(X, a, b, c)                                                             \
  X(a, b, c, MOUNTS, mounts, 0, "mount", "PATH[:rw]", AGT_RUN_T_MOUNT, "mounts", "mounts",         \
    "jail.mounts", NULL, NULL,                                                                     \
    "bind a directory or file into the jail at the same path, read-only unless :rw")
#define AGT_RUN_ROW_DETACH_KEYS(X, a, b, c)                                                        \
  X(a, b, c, DETACH_KEYS, keys, 0, "detach-keys", "KEYS", AGT_RUN_T_KEYS, NULL, "detach keys",     \
    "jail.detach_keys", AGT_DETACH_KEYS_DEFAULT, NULL, "keys that detach")

#define AGT_JAIL_RUN_OPTS(X, a, b, c)                                                              \
  AGT_RUN_ROW_NAME(X, a, b, c)                                                                     \
  AGT_RUN_ROW_AGENT(X, a, b, c)                                                                    \
  AGT_RUN_ROW_ROOTFS(X, a, b, c)                                                                   \
  AGT_RUN_ROW_LAYERS(X, a, b, c)                                                                   \
  AGT_RUN_ROW_WORKSPACE(X, a, b, c)                                                                \
  AGT_RUN_ROW_ENV(X, a, b, c)                                                                      \
  AGT_RUN_ROW_TTY(X, a, b, c)                                                                      \
  AGT_RUN_ROW_NET(X, a, b, c)                                                                      \
  AGT_RUN_ROW_ALLOW(X, a, b, c)                                                                    \
  AGT_RUN_ROW_HOME(X, a, b, c)                                                                     \
  AGT_RUN_ROW_USER(X, a, b, c)                                                                     \
  AGT_RUN_ROW_LOCKDOWN(X, a, b, c)                                                                 \
  AGT_RUN_ROW_MOUNTS(X, a, b, c)                                                                   \
  AGT_RUN_ROW_DETACH_KEYS(X, a, b, c)

#define AGT_RUN_ENUM_(a, b, c, ID, ...) AGT_RUN_##ID,
enum agt_run_id { AGT_JAIL_RUN_OPTS(AGT_RUN_ENUM_, _, _, _) AGT_RUN_N };

/* One line's parts, as constants: AGT_RUN_CONFIG(ROOTFS) is "jail.rootfs". */
#define AGT_RUN_ARG_(a, b, c, ID, field, s, flag, arg, ...) arg
#define AGT_RUN_WIRE_(a, b, c, ID, field, s, flag, arg, type, wire, ...) wire
#define AGT_RUN_CONFIG_(a, b, c, ID, field, s, flag, arg, type, wire, what, config, ...) config
#define AGT_RUN_DEFAULT_(a, b, c, ID, field, s, flag, arg, type, wire, what, config, def, ...) def
#define AGT_RUN_HELP_(a, b, c, ID, field, s, flag, arg, type, wire, what, config, def, choices,    \
                      help)                                                                        \
  help
#define AGT_RUN_FLAG_(a, b, c, ID, field, s, flag, ...) flag
#define AGT_RUN_FLAG(ID) AGT_RUN_ROW_##ID(AGT_RUN_FLAG_, _, _, _)
#define AGT_RUN_ARG(ID) AGT_RUN_ROW_##ID(AGT_RUN_ARG_, _, _, _)
#define AGT_RUN_WIRE(ID) AGT_RUN_ROW_##ID(AGT_RUN_WIRE_, _, _, _)
#define AGT_RUN_CONFIG(ID) AGT_RUN_ROW_##ID(AGT_RUN_CONFIG_, _, _, _)
#define AGT_RUN_DEFAULT(ID) AGT_RUN_ROW_##ID(AGT_RUN_DEFAULT_, _, _, _)
#define AGT_RUN_HELP(ID) AGT_RUN_ROW_##ID(AGT_RUN_HELP_, _, _, _)

/* --env's variables, and where they came from for messages. */
struct agt_run_env {
  json_t *obj;      /* NAME: "VALUE" */
  const char *flag; /* the first flag that gave one (--env), or NULL */
  /* where NAME alone takes its value, in messages: "agt's environment (export it before
   * running agt)"; NULL: this program's */
  const char *from;
};

/* The options of a run, as given (NULL, -1 or empty: not given), with the limits.  What a
 * line's type says its field is. */
struct agt_run_opts {
  const char *name, *agent, *rootfs, *workspace, *net, *home, *user, *keys;
  json_t *layers, *allow, *mounts;
  struct agt_run_env env;
  int tty, lockdown;
  struct agt_jail_spec limits;
};

struct agt_run_key {
  const char *flag; /* "net": --net */
  const char *arg;
  enum agt_run_type type;
  const char *wire;    /* "network.mode" */
  const char *what;    /* "network.mode", "jail name": agtd's messages */
  const char *config;  /* "agents.AGENT.net" */
  const char *def;     /* agtd's default */
  const char *choices; /* "none|allow|open" */
  const char *help;
  size_t off; /* the field in struct agt_run_opts */
};

extern const struct agt_run_key agt_jail_run_keys[AGT_RUN_N];

/* Nothing given; the arrays and the env object made. */
void agt_jail_run_init(struct agt_run_opts *r);
void agt_jail_run_release(struct agt_run_opts *r);
/* The index of text among line id's choices ("allow": 1), or -1. */
int agt_jail_run_choice(enum agt_run_id id, const char *text);
/* "none, allow or open": a line's choices as messages say them. */
char *agt_jail_run_choices_text(enum agt_run_id id);
/* A HOST[:PORT] entry's likely mistake (empty, a URL, a path, a blank): 0; else 1. */
int agt_jail_allow_ok(const char *v);
/* NAME=VALUE, or NAME: its value in this program's environment (e->from says which).
 * `what` says where it comes from in errors ("--env", "jail.env (FILE:LINE:COL)"); they
 * show the name, never the value. */
int agt_jail_run_env_put(struct agt_run_env *e, const char *what, const char *spec,
                         agt_error_t *err);
/* Put the options given into a run request (params): each line's wire field, and the
 * limits given. */
void agt_jail_run_to_json(const struct agt_run_opts *r, json_t *params);
/* agtd's check of a run request: only the lines' fields, the limits, and `extra` (the
 * request's own: argv, size, ...) at the top; each line's field of its type (a name a
 * name, a choice one of its choices, a flag a boolean, a list an array of strings), with
 * errors naming the field; `name` required.  r's strings point into params; r's arrays
 * and the env object are params' (not to be released: r is not initialised by
 * agt_jail_run_init).  Deeper checks (paths, hosts, variables) stay with their owners. */
int agt_jail_run_from_json(struct agt_run_opts *r, json_t *params, const char *const *extra,
                           agt_error_t *err);

/* The option entry of line ID, filling member f (a struct agt_run_opts) of struct T; its
 * help is the line's, then `note` (what this side says of the default: " (jail.rootfs:
 * default)").  AGT_JAIL_RUN_OPT_AS: under another flag or short option (agt's --add-dir
 * for --mount), filling member m (the line's field's type) of struct T. */
int agt_jail_run_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err);
#define AGT_RUN_OPT_(T, f, note, ID, field, s, flag, arg, type, wire, what, config, def, choices,  \
                     help)                                                                         \
  AGT_OPT_CALLBACK(s, flag, arg, T, f.field, agt_jail_run_opt, AGT_RUN_##ID, help note)
#define AGT_JAIL_RUN_OPT(ID, T, f, note) AGT_RUN_ROW_##ID(AGT_RUN_OPT_, T, f, note)
#define AGT_JAIL_RUN_OPT_AS(ID, key, name, T, m, note)                                             \
  AGT_OPT_CALLBACK(key, name, AGT_RUN_ARG(ID), T, m, agt_jail_run_opt, AGT_RUN_##ID,               \
                   AGT_RUN_HELP(ID) note)
/* The line's flag, with short option key (0: none), filling member m of struct T. */
#define AGT_JAIL_RUN_OPT_IN(ID, key, T, m, note)                                                   \
  AGT_JAIL_RUN_OPT_AS(ID, key, AGT_RUN_FLAG(ID), T, m, note)

#endif
