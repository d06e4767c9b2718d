#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cleanup.h"
#include "reader.h"
#include "xalloc.h"

#define MAX_HOPS 40
#define COPY_BUF (1u << 20)

struct rootfs_tree {
  struct rootfs_node **nodes;
  size_t n, cap;
  size_t *slots; /* open addressing: node index + 1, 0 = empty */
  size_t nslots;
  const struct rootfs_reader *rd; /* sources are opened as this reader */
};

void rootfs_hex(const unsigned char sha[32], char out[65])
{
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = digits[sha[i] >> 4];
    out[2 * i + 1] = digits[sha[i] & 15];
  }
  out[64] = '\0';
}

static uint64_t hash_str(const char *s)
{
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static struct rootfs_node *lookup(struct rootfs_tree *t, const char *path)
{
  if (t->nslots == 0)
    return NULL;
  for (size_t i = hash_str(path) & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1)) {
    if (t->slots[i] == 0)
      return NULL;
    if (strcmp(t->nodes[t->slots[i] - 1]->path, path) == 0)
      return t->nodes[t->slots[i] - 1];
  }
}

static void slot_put(struct rootfs_tree *t, size_t idx)
{
  for (size_t i = hash_str(t->nodes[idx]->path) & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1))
    if (t->slots[i] == 0) {
      t->slots[i] = idx + 1;
      return;
    }
}

static struct rootfs_node *insert(struct rootfs_tree *t, const char *path,
                                  enum rootfs_node_type type, unsigned mode, const char *origin)
{
  struct rootfs_node *n = xzalloc(sizeof *n);

  n->path = xstrdup(path);
  n->type = type;
  n->mode = mode & 01777;
  n->origin = xstrdup(origin ? origin : "?");
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 256;
    t->nodes = xrealloc(t->nodes, t->cap * sizeof *t->nodes);
  }
  t->nodes[t->n++] = n;
  if (2 * t->n > t->nslots) {
    free(t->slots);
    t->nslots = t->nslots ? t->nslots * 2 : 1024;
    while (2 * t->n > t->nslots)
      t->nslots *= 2;
    t->slots = xzalloc(t->nslots * sizeof *t->slots);
    for (size_t i = 0; i < t->n; i++)
      slot_put(t, i);
  } else {
    slot_put(t, t->n - 1);
  }
  return n;
}

struct rootfs_tree *rootfs_tree_new(int merged_usr, int lib64)
{
  struct rootfs_tree *t = xzalloc(sizeof *t);

  if (merged_usr) {
    static const char *const dirs[] = {"bin", "sbin", "lib", "lib64"};
    insert(t, "/usr", ROOTFS_NODE_DIR, 0755, "layout merged-usr");
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
      char *p, *tg;
      if (strcmp(dirs[i], "lib64") == 0 && !lib64)
        continue;
      p = xasprintf("/usr/%s", dirs[i]);
      insert(t, p, ROOTFS_NODE_DIR, 0755, "layout merged-usr");
      free(p);
      p = xasprintf("/%s", dirs[i]);
      tg = xasprintf("usr/%s", dirs[i]);
      insert(t, p, ROOTFS_NODE_LINK, 0777, "layout merged-usr")->target = tg;
      free(p);
    }
  }
  return t;
}

void rootfs_tree_free(struct rootfs_tree *t)
{
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->n; i++) {
    struct rootfs_node *n = t->nodes[i];
    free(n->path);
    free(n->target);
    free(n->src);
    free(n->data);
    free(n->origin);
    free(n->input);
    free(n);
  }
  free(t->nodes);
  free(t->slots);
  free(t);
}

/* ---- path resolution inside the tree ---- */

/* Resolve rel (absolute, or relative to the canonical directory base; "" is the root) through
 * planned symlinks.  The last component is followed only when follow_last. */
static char *resolve(struct rootfs_tree *t, const char *base, const char *rel, int follow_last,
                     int *hops, agt_error_t *err)
{
  char *cur = xstrdup(rel[0] == '/' ? "" : base);
  const char *p = rel;

  while (*p) {
    const char *seg;
    size_t len;
    while (*p == '/')
      p++;
    seg = p;
    while (*p && *p != '/')
      p++;
    len = (size_t)(p - seg);
    if (len == 0 || (len == 1 && seg[0] == '.'))
      continue;
    if (len == 2 && seg[0] == '.' && seg[1] == '.') {
      char *slash = strrchr(cur, '/');
      if (slash)
        *slash = '\0';
      continue;
    }
    char *next = xasprintf("%s/%.*s", cur, (int)len, seg);
    free(cur);
    cur = next;

    const char *q = p;
    while (*q == '/')
      q++;
    int last = *q == '\0';
    struct rootfs_node *n;
    if ((last && !follow_last) || (n = lookup(t, cur)) == NULL || n->type != ROOTFS_NODE_LINK)
      continue;
    if (++*hops > MAX_HOPS) {
      agt_error_kind(err, AGT_E_INVALID, "too many levels of symbolic links at '%s' in the tree",
                     cur);
      free(cur);
      return NULL;
    }
    *strrchr(cur, '/') = '\0';
    next = resolve(t, cur, n->target, 1, hops, err);
    free(cur);
    if (next == NULL)
      return NULL;
    cur = next;
  }
  if (*cur == '\0') {
    free(cur);
    cur = xstrdup("/");
  }
  return cur;
}

char *rootfs_tree_canon(struct rootfs_tree *t, const char *path, agt_error_t *err)
{
  int hops = 0;
  return resolve(t, "", path, 0, &hops, err);
}

char *rootfs_tree_resolve(struct rootfs_tree *t, const char *link_path, const char *target,
                          agt_error_t *err)
{
  int hops = 0;
  cleanup_free char *c = rootfs_tree_canon(t, link_path, err);
  char *slash;

  if (c == NULL)
    return NULL;
  slash = strrchr(c, '/');
  *slash = '\0';
  return resolve(t, c, target, 0, &hops, err);
}

struct rootfs_node *rootfs_tree_get(struct rootfs_tree *t, const char *path)
{
  agt_error_t e = NULL;
  cleanup_free char *c = rootfs_tree_canon(t, path, &e);

  agt_error_release(&e);
  return c ? lookup(t, c) : NULL;
}

/* ---- adding nodes ---- */

static const char *type_word(enum rootfs_node_type type)
{
  return type == ROOTFS_NODE_DIR    ? "a directory"
         : type == ROOTFS_NODE_FILE ? "a file"
                                    : "a symlink";
}

/* Make sure every directory above the canonical path c is planned. */
static int ensure_parents(struct rootfs_tree *t, const char *c, agt_error_t *err)
{
  cleanup_free char *p = xstrdup(c);

  for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
    struct rootfs_node *n;
    *s = '\0';
    n = lookup(t, p);
    if (n == NULL)
      insert(t, p, ROOTFS_NODE_DIR, 0755, "parent directory")->implicit = 1;
    else if (n->type != ROOTFS_NODE_DIR)
      return agt_error_kind(err, AGT_E_INVALID,
                            "'%s' must be a directory for '%s', but it is %s (%s)", p, c,
                            type_word(n->type), n->origin);
    *s = '/';
  }
  return 0;
}

static char *canon_for_add(struct rootfs_tree *t, const char *path, agt_error_t *err)
{
  char *c;

  if (path[0] != '/')
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is not an absolute path", path), NULL;
  c = rootfs_tree_canon(t, path, err);
  if (c == NULL)
    return NULL;
  if (strcmp(c, "/") == 0) {
    free(c);
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is the root of the tree", path), NULL;
  }
  if (ensure_parents(t, c, err) < 0) {
    free(c);
    return NULL;
  }
  return c;
}

static int conflict(const struct rootfs_node *n, const char *what, const char *origin,
                    agt_error_t *err)
{
  return agt_error_kind(err, AGT_E_INVALID, "'%s' is planned twice: %s (%s) and %s (%s)", n->path,
                        type_word(n->type), n->origin, what, origin);
}

int rootfs_tree_add_dir(struct rootfs_tree *t, const char *path, unsigned mode, const char *origin,
                        agt_error_t *err)
{
  cleanup_free char *c = canon_for_add(t, path, err);
  struct rootfs_node *n;

  if (c == NULL)
    return -1;
  n = lookup(t, c);
  if (n == NULL) {
    insert(t, c, ROOTFS_NODE_DIR, mode, origin);
    return 1;
  }
  if (n->type != ROOTFS_NODE_DIR)
    return conflict(n, "a directory", origin, err);
  if (n->implicit) {
    n->implicit = 0;
    n->mode = mode & 01777;
    free(n->origin);
    n->origin = xstrdup(origin);
    return 1;
  }
  if (n->mode != (mode & 01777))
    return agt_error_kind(err, AGT_E_INVALID,
                          "directory '%s' is planned with mode %04o (%s) and %04o (%s)", c, n->mode,
                          n->origin, mode & 01777, origin);
  return 0;
}

int rootfs_tree_add_file(struct rootfs_tree *t, const char *path, const char *src, unsigned mode,
                         const char *origin, int weak, agt_error_t *err)
{
  cleanup_free char *c = NULL;
  struct rootfs_node *n;
  struct stat st;

  if (stat(src, &st) < 0)
    return agt_error_make(err, errno, "stat '%s'", src);
  if (!S_ISREG(st.st_mode))
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is not a regular file", src);
  c = canon_for_add(t, path, err);
  if (c == NULL)
    return -1;
  n = lookup(t, c);
  if (n) {
    if (n->type == ROOTFS_NODE_FILE && n->src && n->dev == st.st_dev && n->ino == st.st_ino)
      return 0;
    if (weak)
      return 0;
    cleanup_free char *what = xasprintf("a copy of '%s'", src);
    return conflict(n, what, origin, err);
  }
  n = insert(t, c, ROOTFS_NODE_FILE, mode & 0777, origin);
  n->src = xstrdup(src);
  n->dev = st.st_dev;
  n->ino = st.st_ino;
  return 1;
}

void rootfs_tree_set_input(struct rootfs_tree *t, const char *path, const char *input)
{
  struct rootfs_node *n = rootfs_tree_get(t, path);

  if (n) {
    free(n->input);
    n->input = xstrdup(input);
  }
}

int rootfs_tree_add_data(struct rootfs_tree *t, const char *path, const char *data, size_t len,
                         unsigned mode, const char *origin, agt_error_t *err)
{
  cleanup_free char *c = canon_for_add(t, path, err);
  struct rootfs_node *n;

  if (c == NULL)
    return -1;
  n = lookup(t, c);
  if (n) {
    if (n->type == ROOTFS_NODE_FILE && n->data && n->len == len && memcmp(n->data, data, len) == 0)
      return 0;
    return conflict(n, "a file", origin, err);
  }
  n = insert(t, c, ROOTFS_NODE_FILE, mode & 0777, origin);
  n->data = xmalloc(len + 1);
  memcpy(n->data, data, len);
  n->data[len] = '\0';
  n->len = len;
  return 1;
}

int rootfs_tree_add_link(struct rootfs_tree *t, const char *path, const char *target,
                         const char *origin, int weak, agt_error_t *err)
{
  cleanup_free char *c = NULL;
  struct rootfs_node *n;

  if (*target == '\0' || strlen(target) >= 4096)
    return agt_error_kind(err, AGT_E_INVALID, "bad symlink target for '%s'", path);
  c = canon_for_add(t, path, err);
  if (c == NULL)
    return -1;
  n = lookup(t, c);
  if (n) {
    if (n->type == ROOTFS_NODE_LINK && strcmp(n->target, target) == 0)
      return 0;
    if (weak)
      return 0;
    return conflict(n, "a symlink", origin, err);
  }
  n = insert(t, c, ROOTFS_NODE_LINK, 0777, origin);
  n->target = xstrdup(target);
  return 1;
}

/* ---- writing ---- */

static int node_cmp(const void *a, const void *b)
{
  return strcmp((*(struct rootfs_node *const *)a)->path, (*(struct rootfs_node *const *)b)->path);
}

/* Open the directory at canonical path dir ("" = root) below root_fd without following links. */
static int open_dir(int root_fd, const char *dir, agt_error_t *err)
{
  cleanup_free char *p = xstrdup(dir);
  int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
  char *save = NULL;

  if (fd < 0)
    return agt_error_make(err, errno, "dup");
  for (char *c = strtok_r(p, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
    int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(fd);
    if (next < 0)
      return agt_error_make(err, e, "open directory '%s' in the tree", dir);
    fd = next;
  }
  return fd;
}

static int write_all(int fd, const void *buf, size_t n)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int set_owner_mode(int fd, unsigned mode, const char *path, agt_error_t *err)
{
  if (geteuid() == 0 && fchown(fd, 0, 0) < 0)
    return agt_error_make(err, errno, "chown '%s'", path);
  if (fchmod(fd, mode) < 0)
    return agt_error_make(err, errno, "chmod '%s'", path);
  return 0;
}

void rootfs_tree_set_reader(struct rootfs_tree *t, const struct rootfs_reader *rd)
{
  t->rd = rd;
}

static int write_file(const struct rootfs_reader *rd, struct rootfs_node *n, int pfd,
                      const char *leaf, unsigned char *buf, agt_error_t *err)
{
  cleanup_close int out = -1, in = -1;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int ret = -1;
  unsigned dlen;

  if (md == NULL || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 init");
    goto out;
  }
  if (pfd >= 0)
    out = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (pfd >= 0 && out < 0) {
    agt_error_make(err, errno, "create '%s' in the tree", n->path);
    goto out;
  }
  n->size = 0;
  if (n->src == NULL) {
    if (!EVP_DigestUpdate(md, n->data, n->len) ||
        (out >= 0 && write_all(out, n->data, n->len) < 0)) {
      agt_error_make(err, errno, "write '%s' in the tree", n->path);
      goto out;
    }
    n->size = n->len;
  } else {
    struct stat st;
    in = rootfs_reader_open(rd, n->src, O_RDONLY | O_CLOEXEC | O_NOCTTY, err);
    if (in < 0 && *err)
      goto out;
    if (in < 0 || fstat(in, &st) < 0) {
      agt_error_make(err, errno, "open '%s'", n->src);
      goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != n->dev || st.st_ino != n->ino) {
      agt_error_kind(err, AGT_E_STATE, "'%s' was replaced during the build", n->src);
      goto out;
    }
    posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (;;) {
      ssize_t r = read(in, buf, COPY_BUF);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        agt_error_make(err, errno, "read '%s'", n->src);
        goto out;
      }
      if (r == 0)
        break;
      if (!EVP_DigestUpdate(md, buf, (size_t)r) ||
          (out >= 0 && write_all(out, buf, (size_t)r) < 0)) {
        agt_error_make(err, errno, "write '%s' in the tree", n->path);
        goto out;
      }
      n->size += (unsigned long long)r;
    }
  }
  if (!EVP_DigestFinal_ex(md, n->sha256, &dlen)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 final");
    goto out;
  }
  if (out >= 0 && set_owner_mode(out, n->mode & 0777, n->path, err) < 0)
    goto out;
  ret = 0;
out:
  EVP_MD_CTX_free(md);
  return ret;
}

static int write_node(const struct rootfs_reader *rd, struct rootfs_node *n, int pfd,
                      const char *leaf, unsigned char *buf, agt_error_t *err)
{
  if (pfd < 0 && n->type != ROOTFS_NODE_FILE) /* hashing only */
    return 0;
  if (n->type == ROOTFS_NODE_DIR) {
    cleanup_close int fd = -1;
    if (mkdirat(pfd, leaf, 0700) < 0)
      return agt_error_make(err, errno, "mkdir '%s' in the tree", n->path);
    fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return agt_error_make(err, errno, "open '%s' in the tree", n->path);
    return set_owner_mode(fd, n->mode & 01777, n->path, err);
  }
  if (n->type == ROOTFS_NODE_LINK) {
    if (symlinkat(n->target, pfd, leaf) < 0)
      return agt_error_make(err, errno, "symlink '%s' in the tree", n->path);
    if (geteuid() == 0 && fchownat(pfd, leaf, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
      return agt_error_make(err, errno, "chown '%s'", n->path);
    return 0;
  }
  return write_file(rd, n, pfd, leaf, buf, err);
}

static int hash_node(EVP_MD_CTX *md, const struct rootfs_node *n)
{
  char head[16], hex[65];
  const char *payload = "";

  snprintf(head, sizeof head, "%c %04o ",
           n->type == ROOTFS_NODE_DIR    ? 'd'
           : n->type == ROOTFS_NODE_FILE ? 'f'
                                         : 'l',
           n->mode);
  if (n->type == ROOTFS_NODE_FILE) {
    rootfs_hex(n->sha256, hex);
    payload = hex;
  } else if (n->type == ROOTFS_NODE_LINK) {
    payload = n->target;
  }
  return EVP_DigestUpdate(md, head, strlen(head)) &&
         EVP_DigestUpdate(md, n->path, strlen(n->path) + 1) &&
         EVP_DigestUpdate(md, payload, strlen(payload) + 1);
}

int rootfs_tree_write(struct rootfs_tree *t, int root_fd, struct rootfs_tree_stats *st, char id[65],
                      agt_error_t *err)
{
  cleanup_free unsigned char *buf = xmalloc(COPY_BUF);
  cleanup_free char *cached = NULL;
  cleanup_close int pfd = -1;
  EVP_MD_CTX *md = NULL;
  unsigned char digest[32];
  unsigned dlen;
  int ret = -1;

  memset(st, 0, sizeof *st);
  qsort(t->nodes, t->n, sizeof *t->nodes, node_cmp);
  /* the order changed: rebuild the index */
  if (t->nslots)
    memset(t->slots, 0, t->nslots * sizeof *t->slots);
  for (size_t i = 0; i < t->n; i++)
    slot_put(t, i);

  for (size_t i = 0; i < t->n; i++) {
    struct rootfs_node *n = t->nodes[i];
    char *slash = strrchr(n->path, '/');
    cleanup_free char *dir = xstrndup(n->path, (size_t)(slash - n->path));

    if (root_fd >= 0 && (cached == NULL || strcmp(cached, dir) != 0)) {
      if (pfd >= 0)
        close(pfd);
      pfd = open_dir(root_fd, dir, err);
      if (pfd < 0)
        return -1;
      free(cached);
      cached = steal_pointer(&dir);
    }
    if (write_node(t->rd, n, pfd, slash + 1, buf, err) < 0)
      return -1;
    if (n->type == ROOTFS_NODE_FILE) {
      st->files++;
      st->bytes += n->size;
    } else if (n->type == ROOTFS_NODE_DIR) {
      st->dirs++;
    } else {
      st->links++;
    }
  }

  md = EVP_MD_CTX_new();
  if (md == NULL || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 init");
    goto out;
  }
  for (size_t i = 0; i < t->n; i++)
    if (!hash_node(md, t->nodes[i])) {
      agt_error_kind(err, AGT_E_INTERNAL, "sha256 update");
      goto out;
    }
  if (!EVP_DigestFinal_ex(md, digest, &dlen)) {
    agt_error_kind(err, AGT_E_INTERNAL, "sha256 final");
    goto out;
  }
  rootfs_hex(digest, id);
  ret = 0;
out:
  EVP_MD_CTX_free(md);
  return ret;
}

static const char *input_of(const struct rootfs_node *n)
{
  return n->input ? n->input : n->origin ? n->origin : n->path;
}

json_t *rootfs_tree_inputs(struct rootfs_tree *t)
{
  json_t *out = json_object();
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char digest[32];
  unsigned dlen;
  char hex[65];
  int *done = xzalloc((t->n ? t->n : 1) * sizeof *done);

  /* nodes are sorted by path (rootfs_tree_write): each input's nodes in path order */
  for (size_t i = 0; md && i < t->n; i++) {
    const char *key = input_of(t->nodes[i]);
    if (done[i])
      continue;
    size_t count = 0;
    if (!EVP_DigestInit_ex(md, EVP_sha256(), NULL))
      break;
    for (size_t k = i; k < t->n; k++) {
      if (done[k] || strcmp(input_of(t->nodes[k]), key) != 0)
        continue;
      done[k] = 1;
      count++;
      if (!hash_node(md, t->nodes[k]))
        break;
    }
    if (!EVP_DigestFinal_ex(md, digest, &dlen))
      break;
    /* one file alone: its content's hash, the one sha256sum prints */
    rootfs_hex(count == 1 && t->nodes[i]->type == ROOTFS_NODE_FILE ? t->nodes[i]->sha256 : digest,
               hex);
    json_object_set_new(out, key, json_string(hex));
  }
  free(done);
  EVP_MD_CTX_free(md);
  return out;
}
