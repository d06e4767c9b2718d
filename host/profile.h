/* Agent profiles: one YAML file per agent (agents/NAME.yaml in the tree, installed to
 * DATADIR/agents; the user's own in the config directory's agents/, which win by name).
 * A profile says what an agent needs (its layers: a pinned npm package, the shared Node.js
 * runtime), how it runs (its command, its non-interactive form, the flags that skip its
 * permission prompts), what it reads (the variables of its key and base URL, the hosts it
 * reaches) and where it keeps its state in $HOME.  agt turns a profile into a jail's run
 * parameters; agtd never reads profiles.  The keys: docs/AGENTS.md. */
#ifndef AGT_HOST_PROFILE_H
#define AGT_HOST_PROFILE_H

#include <stddef.h>

#include "error.h"

enum agt_profile_kind {
  AGT_PROFILE_AGENT = 0, /* something `agt jail run NAME` runs */
  AGT_PROFILE_RUNTIME,   /* a layer agents stand on (node) */
};

enum agt_profile_runtime {
  AGT_RUNTIME_NONE = 0, /* no layer of its own (shell): the base rootfs has it */
  AGT_RUNTIME_NATIVE,   /* a native binary in its own layer */
  AGT_RUNTIME_NODE,     /* JavaScript: its layer over the shared Node.js layer */
};

enum agt_profile_api {
  AGT_API_NONE = 0,
  AGT_API_ANTHROPIC_MESSAGES,
  AGT_API_OPENAI_RESPONSES,
  AGT_API_OPENAI_CHAT,
  AGT_API_GEMINI,
};

struct agt_profile_file {
  char *path;    /* relative to $HOME, clean */
  char *content; /* {base_url}, {model}, {key_env} are filled in when it is written */
};

struct agt_profile {
  char *file; /* where it was loaded from, for messages */
  char *name; /* [a-z0-9-]+, the file's stem */
  char *description;
  enum agt_profile_kind kind;
  enum agt_profile_runtime runtime;
  /* package: (runtime native or node, and every runtime profile) */
  char *npm;       /* package.npm: the package whose versions `agt agents update` follows */
  char *version;   /* package.version: the pin (the user's agents.NAME.version overrides it) */
  char *install;   /* package.install: the npm spec installed into the layer ({version},
                    * {arch}: x64|arm64, {march}: x86_64|aarch64); default NPM@{version} */
  char *bin;       /* package.bin: the executable, relative to the layer's node_modules */
  char **command;  /* argv; `-- ARGS` append to it */
  char **headless; /* optional: what runs instead of command without a terminal */
  char **batch;    /* the non-interactive form; one element holds {prompt} */
  char **skip_permissions; /* added with --yolo */
  char *key_env;           /* env.key: the variable holding its secret */
  char *base_url_env;      /* env.base_url: the variable pointing it at a model server */
  char **set_env;          /* env.set: NAME=VALUE, in file order */
  char **hosts;            /* the default egress allowlist: HOST or HOST:PORT or *.SUFFIX */
  char **home;             /* its state, relative to $HOME */
  enum agt_profile_api api;
  struct agt_profile_file *files;
  size_t nfiles;
  /* clean_home: what a --lockdown jail's throwaway home holds at each start (settings that
   * skip first-run prompts; no keys), written as they are (no templates) */
  struct agt_profile_file *clean_home;
  size_t nclean_home;
};

struct agt_profile_set {
  struct agt_profile **p; /* sorted by name */
  size_t n;
};

/* Parse one profile.  `file` names it in errors ("agents/claude.yaml:12:3: env: unknown key
 * 'keys'") and its stem must be the profile's name. */
int agt_profile_parse(const char *file, const char *buf, size_t len, struct agt_profile **out,
                      agt_error_t *err);
int agt_profile_load(const char *path, struct agt_profile **out, agt_error_t *err);
void agt_profile_free(struct agt_profile *p);

/* Every *.yaml in each directory, in order; a later directory's profile replaces an earlier
 * one of the same name.  Missing directories are skipped; a bad file is an error. */
int agt_profiles_load(const char *const *dirs, size_t ndirs, struct agt_profile_set *set,
                      agt_error_t *err);
void agt_profiles_release(struct agt_profile_set *set);
const struct agt_profile *agt_profiles_find(const struct agt_profile_set *set, const char *name);

/* The directories agt reads profiles from: the tree's agents/ (when agt runs from its build)
 * or DATADIR/agents, then the user's (config_file's directory + /agents).  Newly allocated,
 * NULL-terminated. */
char **agt_profile_dirs(const char *config_file);
/* agt_profiles_load over agt_profile_dirs(config_file). */
int agt_profiles_load_for(const char *config_file, struct agt_profile_set *set, agt_error_t *err);

/* The names used in messages and JSON. */
const char *agt_profile_runtime_name(enum agt_profile_runtime r);
const char *agt_profile_api_name(enum agt_profile_api a);

/* "{arch}"/"{march}"/"{version}" filled in for an architecture (uname -m spelling),
 * newly allocated; NULL with *err for an architecture npm has no name for. */
char *agt_profile_expand(const struct agt_profile *p, const char *tmpl, const char *version,
                         const char *march, agt_error_t *err);

#endif
