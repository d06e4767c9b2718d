/* Rootfs manifests (the YAML files in rootfs/, format in docs/ROOTFS.md), loaded and checked.
 *
 * The loader checks everything that can be checked without looking at the machine: keys,
 * shapes, absolute clean paths, modes, pins.  Every error names file:line:column and the key.
 * Whether a source exists is decided at build time (store.c). */
#ifndef AGT_ROOTFS_MANIFEST_H
#define AGT_ROOTFS_MANIFEST_H

#include <stddef.h>

#include "elfinfo.h"
#include "error.h"

/* The placeholder a manifest writes for a sha256 it does not know yet.  The download is then
 * disabled for that architecture and the next source is used. */
#define ROOTFS_SHA256_UNKNOWN "unknown"

enum rootfs_source_kind {
  ROOTFS_SRC_HOST,     /* a file or directory on this machine (first that exists) */
  ROOTFS_SRC_ENV,      /* the path in an environment variable, when it is set */
  ROOTFS_SRC_DOWNLOAD, /* fetched over HTTP(S) and checked against a pinned sha256 */
  ROOTFS_SRC_NPM,      /* tree: node_modules of `npm install SPEC` from the guest's registry */
};

struct rootfs_pin {
  char *arch;   /* uname -m spelling: x86_64, aarch64, ... */
  char *url;    /* http:// or https:// */
  char *sha256; /* 64 lowercase hex digits, or NULL when the pin is unknown */
  int line, col;
};

struct rootfs_source {
  enum rootfs_source_kind kind;
  char **paths;  /* host: candidate paths in order, NULL-terminated */
  char *package; /* host: the distro package they come from (reported with its version) */
  char *env;     /* env: the variable's name */
  char *npm;     /* npm: the spec installed, NAME@VERSION (an exact version) */
  char *version; /* download: a label for `sources` ("0.8.13") */
  unsigned long long max_bytes; /* download: refuse anything larger */
  struct rootfs_pin *pins;      /* download: one per architecture */
  size_t n_pins;
  int line, col;
};

enum rootfs_entry_kind {
  ROOTFS_ENTRY_FILE,    /* a regular file copied from a source */
  ROOTFS_ENTRY_TREE,    /* a directory copied recursively from a source */
  ROOTFS_ENTRY_SYMLINK, /* a symlink with the given target */
  ROOTFS_ENTRY_CONTENT, /* a file with inline content */
};

struct rootfs_entry {
  char *path; /* absolute, clean: where it goes in the tree */
  enum rootfs_entry_kind kind;
  struct rootfs_source *sources; /* file, tree: tried in order */
  size_t n_sources;
  char *target;  /* symlink */
  char *content; /* content */
  size_t content_len;
  int mode;                          /* file, content: permission bits, or -1 for the default */
  enum rootfs_applet_format applets; /* file: install one symlink per applet beside it */
  int optional;                      /* file, tree: no source found is not an error */
  int libs;                          /* file, tree: copy the shared-library closure (default 1) */
  char *hint;                        /* what to install when no source is found */
  int line, col;
};

struct rootfs_dir {
  char *path;
  int mode; /* permission bits, sticky allowed */
  int line, col;
};

struct rootfs_lib {
  char *name; /* a soname searched like the loader does, or an absolute path */
  int line, col;
};

struct rootfs_manifest {
  char *file; /* the path it was loaded from, for messages */
  char *name; /* a rootfs name (agt_name_check) */
  char *description;
  int merged_usr; /* layout: /bin, /sbin, /lib, /lib64 are symlinks into /usr (default) */
  struct rootfs_dir *dirs;
  size_t n_dirs;
  struct rootfs_entry *entries;
  size_t n_entries;
  struct rootfs_lib *libraries;
  size_t n_libraries;
};

#define ROOTFS_CONTENT_MAX (1024 * 1024)

/* Load and check a manifest.  NULL with *err set (AGT_E_INVALID, "file:line:col: ...") on any
 * problem. */
struct rootfs_manifest *rootfs_manifest_load(const char *path, agt_error_t *err);
struct rootfs_manifest *rootfs_manifest_load_string(const char *name, const char *buf, size_t len,
                                                    agt_error_t *err);
void rootfs_manifest_free(struct rootfs_manifest *m);

/* The pin of a download source for an architecture, or NULL. */
const struct rootfs_pin *rootfs_source_pin(const struct rootfs_source *s, const char *arch);

#endif
