/* The planned content of a rootfs tree, then written out under a directory fd.
 *
 * Paths are absolute inside the tree.  Adding a node resolves the directories of its path
 * through the symlinks already planned (the merged-usr links /bin -> usr/bin and so on), only
 * inside the tree: ".." stops at the root and absolute targets start at the tree's root.  So
 * every node has a canonical path with no symlink above it, and writing the tree never
 * follows a symlink (mkdirat/openat with O_NOFOLLOW from the root fd). */
#ifndef AGT_ROOTFS_TREE_H
#define AGT_ROOTFS_TREE_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

enum rootfs_node_type {
  ROOTFS_NODE_DIR,
  ROOTFS_NODE_FILE,
  ROOTFS_NODE_LINK,
};

struct rootfs_node {
  char *path; /* canonical */
  enum rootfs_node_type type;
  unsigned mode;            /* permission bits (no setuid/setgid, ever) */
  char *target;             /* link */
  char *src;                /* file: the host file copied in, or NULL for data */
  char *data;               /* file: inline content */
  size_t len;               /* of data */
  dev_t dev;                /* file: identity of src when it was added */
  ino_t ino;                /* ... */
  char *origin;             /* what asked for it, for messages */
  char *input;              /* the input it belongs to (rootfs_tree_inputs), NULL: origin */
  int implicit;             /* a directory made only as a parent */
  unsigned char sha256[32]; /* file: filled by rootfs_tree_write */
  unsigned long long size;  /* file: bytes written */
};

struct rootfs_tree;

struct rootfs_tree_stats {
  unsigned long long bytes; /* sum of regular file sizes */
  unsigned long files, dirs, links;
};

/* merged_usr: plan /bin, /sbin, /lib (and /lib64 when lib64) as symlinks into /usr. */
struct rootfs_tree *rootfs_tree_new(int merged_usr, int lib64);
void rootfs_tree_free(struct rootfs_tree *t);

/* The canonical form of path (its directories resolved through planned symlinks, its last
 * component not), or NULL with *err when a symlink loop or too many links are in the way. */
char *rootfs_tree_canon(struct rootfs_tree *t, const char *path, agt_error_t *err);
/* Where a symlink at link_path with this target points to, canonical (last component not
 * followed), or NULL with *err. */
char *rootfs_tree_resolve(struct rootfs_tree *t, const char *link_path, const char *target,
                          agt_error_t *err);
/* The node at path (canonicalised first), or NULL. */
struct rootfs_node *rootfs_tree_get(struct rootfs_tree *t, const char *path);

/* Add nodes.  They return 1 when the node was added, 0 when an identical node was already
 * there (or, with weak, any node at all), and -1 with *err on a conflict or a bad path. */
int rootfs_tree_add_dir(struct rootfs_tree *t, const char *path, unsigned mode, const char *origin,
                        agt_error_t *err);
int rootfs_tree_add_file(struct rootfs_tree *t, const char *path, const char *src, unsigned mode,
                         const char *origin, int weak, agt_error_t *err);
int rootfs_tree_add_data(struct rootfs_tree *t, const char *path, const char *data, size_t len,
                         unsigned mode, const char *origin, agt_error_t *err);
int rootfs_tree_add_link(struct rootfs_tree *t, const char *path, const char *target,
                         const char *origin, int weak, agt_error_t *err);

/* Say which input the node at path belongs to (its origin when never said): libraries are
 * inputs of their own, not of the entry that needed them first. */
void rootfs_tree_set_input(struct rootfs_tree *t, const char *path, const char *input);

/* Open the sources of files as this reader when writing (rootfs/reader.h; NULL: as is). */
struct rootfs_reader;
void rootfs_tree_set_reader(struct rootfs_tree *t, const struct rootfs_reader *rd);

/* Write every node under root_fd (an empty directory), root-owned when running as root, and
 * compute the tree's id: the sha256 over its sorted nodes (path, type, mode, symlink target,
 * sha256 of the content), as 64 lowercase hex digits.  root_fd < 0: write nothing, only read
 * the files to compute the id (what a build would give now). */
int rootfs_tree_write(struct rootfs_tree *t, int root_fd, struct rootfs_tree_stats *st, char id[65],
                      agt_error_t *err);

/* After rootfs_tree_write: {input: sha256 hex}, one key per input (a node's input, else its
 * origin): the content's sha256 for an input that is one file, else the sha256 over its
 * nodes as the id hashes them (path, type, mode, target or content hash). */
json_t *rootfs_tree_inputs(struct rootfs_tree *t);

/* Lowercase hex of a 32-byte digest. */
void rootfs_hex(const unsigned char sha[32], char out[65]);

#endif
