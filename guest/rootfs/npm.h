/* `npm` sources: a package and its dependencies installed with the guest's npm from the
 * registry the guest reaches (npm's own configuration: npm_config_registry, .npmrc). */
#ifndef AGT_ROOTFS_NPM_H
#define AGT_ROOTFS_NPM_H

#include "error.h"

/* Run `npm install` of spec (NAME@VERSION) into prefix (an empty directory), so the package
 * and its dependencies land in prefix/node_modules.  No install scripts run (--ignore-scripts):
 * nothing of the package executes on the guest.  cache: npm's cache directory.  On failure
 * *err quotes the end of npm's output. */
int rootfs_npm_install(const char *spec, const char *prefix, const char *cache, agt_error_t *err);

/* The version of prefix/node_modules/NAME from its package.json, or NULL. */
char *rootfs_npm_version(const char *prefix, const char *name);

#endif
