/* An agent's rootfs layers: the Node.js runtime (shared by every node agent) and the
 * agent's own pinned npm package, each a rootfs manifest agt writes from the profiles
 * (profile.h) and agtd builds into its content-addressed store (docs/ROOTFS.md).  A jail
 * stacks them over its base rootfs, the agent's on top. */
#ifndef AGT_HOST_LAYERS_H
#define AGT_HOST_LAYERS_H

#include <stddef.h>

#include "config.h"
#include "error.h"
#include "profile.h"

struct agt_layer {
  const struct agt_profile *p; /* the agent or runtime whose package it holds; NULL: tools */
  const char *file;            /* the manifest's name in messages: the profile's file */
  char *version;               /* the pin */
  char *name;                  /* its name in the store: NAME-VERSION */
  char *spec;                  /* the npm spec installed: NAME@VERSION */
  char *manifest;              /* the manifest's text */
};

/* The pinned version of a profile's package: agents.NAME.version in the config, else the
 * profile's. */
const char *agt_layer_pin(const struct agt_config *cfg, const struct agt_profile *p);

/* The layer of one profile's package at version for an architecture (uname -m spelling). */
int agt_layer_make(const struct agt_profile *p, const char *version, const char *march,
                   struct agt_layer *l, agt_error_t *err);
void agt_layer_release(struct agt_layer *l);

/* An agent's layers, top first: its own (runtime native or node), then node's (runtime
 * node).  *n is 0 for runtime none.  out has room for 2. */
int agt_agent_layers(const struct agt_config *cfg, const struct agt_profile_set *set,
                     const struct agt_profile *p, const char *march, struct agt_layer *out,
                     size_t *n, agt_error_t *err);

/* jail.tools as one layer: each tool at /usr/local/bin/NAME with its shared-library
 * closure; a name is looked for in the jails' PATH directories on the guest
 * (/usr/local/sbin ... /bin), a path is taken as it is.  Named tools-HASH after the sorted
 * list (FNV-1a 64), so runs with the same tools share one build.  n == 0: nothing to do
 * (*l zeroed, 0). */
int agt_tools_layer(const struct agt_cfg_item *tools, size_t n, struct agt_layer *l,
                    agt_error_t *err);
/* A failed build of the tools layer: the message says which jail.tools entry (its
 * file:line:column, or the flag) when it is about one. */
void agt_tools_error(const struct agt_cfg_item *tools, size_t n, agt_error_t *err);

struct agt_target;
#include <jansson.h>

/* Build each layer agtd does not have yet (by name), in order; *built counts them.  note:
 * called before each build with the layer (NULL: say nothing).  store: rootfs.ls's list,
 * or NULL to ask agtd. */
int agt_layers_build(struct agt_target *t, struct agt_layer *l, size_t n, json_t *store,
                     void (*note)(void *ctx, const struct agt_layer *l), void *ctx, int *built,
                     agt_error_t *err);
/* The newest build of a store name in rootfs.ls's list, or NULL (borrowed). */
json_t *agt_layer_find(json_t *store, const char *name);

/* Pin a profile's version in the user's config file (agents.NAME.version), creating the
 * file or the keys as needed and keeping the rest of it as it is.  *where: "FILE:LINE". */
int agt_layer_pin_write(const char *config_file, const char *agent, const char *version,
                        char **where, agt_error_t *err);
#endif
