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
    "10G, or an eighth of the jails' disk", 16ULL << 20, UINT64_MAX, "",                           \
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

#endif
