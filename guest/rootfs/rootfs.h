/* The rootfs store: read-only root filesystems for jails, built from YAML manifests
 * (rootfs/NAME.yaml) and kept content-addressed under a store directory.
 *
 * Layout of the store (default /var/lib/agt/rootfs):
 *   <store>/<id>/root        the tree jails use as their overlay lower layer (read-only)
 *   <store>/<id>/info.json   what agt_rootfs_build() returned for it
 * where <id> is the lowercase hex sha256 of the tree's content (paths, types, modes,
 * symlink targets and file contents), so building the same inputs twice gives the same id,
 * and changing any input (a toybox update, say) gives a new one while the old one stays
 * for the jails that use it.
 *
 * All functions are blocking and thread-safe with respect to each other (agtd calls
 * agt_rootfs_build() from libuv's threadpool); none touches the caller's event loop. */
#ifndef AGT_ROOTFS_H
#define AGT_ROOTFS_H

#include <jansson.h>
#include <sys/types.h>

#include "error.h"

/* Whom a build reads host files as (the client that asked): the manifest, its host and env
 * sources, trees, the library closure.  Writes into the store stay the caller's. */
#define AGT_ROOTFS_MAX_GROUPS 256
struct agt_rootfs_reader {
  uid_t uid;
  gid_t gid;
  size_t ngroups;
  const gid_t *groups;
};

struct agt_rootfs_build_opts {
  int allow_download; /* may fetch `download` sources (upstream static toybox) */
  const char *arch;   /* NULL: the machine's (uname -m) */
  const struct agt_rootfs_reader *reader; /* NULL: read as the caller (agtd: root) */
  int dry_run;         /* resolve and read every input, write nothing: *info has "id" (what a
                        * build would give now), "name", "manifest", "sources", "inputs" */
  const char *content; /* non-NULL: the manifest's text; manifest_path only names it */
  size_t content_len;
};

/* Build the manifest at manifest_path into the store.  On success *info is a new JSON object:
 *   {"id": "<sha256 hex>", "name": "<manifest name>", "manifest": "<path>",
 *    "path": "<store>/<id>/root", "created": <unix seconds>, "bytes": N, "files": N,
 *    "sources": {...what was used for each manifest entry, e.g. toybox "distro 0.8.9"...}}
 * and also "names" (every manifest name that built this tree), "arch", "updated" and
 * "updated_ns" (the last build that produced it), "dirs", "symlinks", "warnings" (strings),
 * "inputs" ({input: {"sha256", "source"}}: each manifest entry by its path, each library of
 * the closure by its path in the tree; what agt_rootfs_update compares),
 * "ld_library_path" (only when a library came from an ld.so.conf directory the jail's
 * loader does not search by itself), and "reused": true when the tree existed already and
 * was kept.  Each "sources" value is keyed by the entry's path: {"kind": "host" | "env" |
 * "download" | "symlink" | "content", "summary": "...", "tried": [{"source", "result"}]...}.
 * Manifest errors name file:line:column; the format is docs/ROOTFS.md. */
int agt_rootfs_build(const char *store_dir, const char *manifest_path,
                     const struct agt_rootfs_build_opts *opts, json_t **info, agt_error_t *err);

/* All builds in the store, newest first (by "updated_ns"), as an array of info objects.  A
 * store that does not exist yet is empty. */
int agt_rootfs_list(const char *store_dir, json_t **list, agt_error_t *err);

/* Find one build by full id, unique id prefix (at least 6 hex digits) or manifest name (the
 * newest build of that name).  AGT_E_NOTFOUND when nothing matches, AGT_E_INVALID when a
 * prefix is ambiguous. */
int agt_rootfs_resolve(const char *store_dir, const char *ref, json_t **info, agt_error_t *err);
/* The same in a list agt_rootfs_list made (store_dir for errors only). */
int agt_rootfs_resolve_in(json_t *list, const char *store_dir, const char *ref, json_t **info,
                          agt_error_t *err);

/* Re-resolve every input of the manifest the newest build named `name` was built from (a
 * dry run), and build it again when the tree would differ.  *result:
 *   {"name", "changed": false, "id"}  nothing changed, nothing built, or
 *   {"name", "changed": true, "old_id", "id", "reused": bool,
 *    "changes": [{"input", "old", "new"}...]}  (old/new: "source (sha256 12 hex)" or null)
 * Builds of the old id stay in the store for the jails that use them.  A build whose manifest
 * is gone (or that records none) is an error of kind AGT_E_NOTFOUND saying what to do. */
int agt_rootfs_update(const char *store_dir, const char *name,
                      const struct agt_rootfs_build_opts *opts, json_t **result, agt_error_t *err);

/* Delete a build by exact id.  The caller has already checked that no jail uses it. */
int agt_rootfs_remove(const char *store_dir, const char *id, agt_error_t *err);

#endif
