/* The rootfs store: build a manifest into a content-addressed tree, list, resolve, remove.
 *
 * A build plans the whole tree in memory (tree.c): the manifest's dirs and files, the
 * applet symlinks of multicall binaries, and the shared-library closure of every ELF file,
 * computed from the ELF headers (elfinfo.c) the way the dynamic loader would search.  Then
 * it writes the tree into <store>/.build-XXXXXX/root, hashing every file as it copies it,
 * which gives the id, and renames the build directory to <store>/<id> in one step.  When
 * <id> exists already the new copy is dropped and the existing build kept.
 *
 * Locks: <store>/.lock (flock) serialises the short steps that change the store's names
 * (claiming a build directory, renaming into place, updating info.json, renaming away for
 * removal).  Each build directory is flocked by the build that owns it, so a build that
 * died leaves an unlocked .build-* directory that the next build removes. */
#include "rootfs.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "elfinfo.h"
#include "fetch.h"
#include "manifest.h"
#include "names.h"
#include "npm.h"
#include "reader.h"
#include "tree.h"
#include "xalloc.h"

#define DPKG_STATUS "/var/lib/dpkg/status"
#define LD_SO_CONF "/etc/ld.so.conf"
#define MAX_LINK_HOPS 16
#define MAX_TREE_DEPTH 32
#define MAX_TREE_ENTRIES 200000

struct arch_info {
  const char *arch;
  unsigned machine;
  int bits;
  const char *triplet;
};

static const struct arch_info arches[] = {
    {"x86_64", EM_X86_64, 64, "x86_64-linux-gnu"},
    {"aarch64", EM_AARCH64, 64, "aarch64-linux-gnu"},
    {"riscv64", EM_RISCV, 64, "riscv64-linux-gnu"},
    {"ppc64le", EM_PPC64, 64, "powerpc64le-linux-gnu"},
    {"s390x", EM_S390, 64, "s390x-linux-gnu"},
    {"armv7l", EM_ARM, 32, "arm-linux-gnueabihf"},
    {"i686", EM_386, 32, "i386-linux-gnu"},
};

/* A library search directory: where to look on this machine, and where the same directory
 * is in the tree (they differ only for $ORIGIN-relative ones). */
struct sdir {
  char *host;
  char *tree;
};

struct sdirs {
  struct sdir *v;
  size_t n;
};

/* An ELF file of the tree whose libraries still have to be found. */
struct obj {
  char *host;             /* the file on this machine */
  char *tree;             /* canonical path in the tree */
  char *origin;           /* for messages */
  int strict;             /* a missing library or a foreign machine is an error (else a warning) */
  struct sdirs inherited; /* DT_RPATH of the objects that loaded it */
};

struct applet_job {
  const struct rootfs_entry *e;
  char *src;  /* the binary as chosen */
  char *tree; /* its canonical path in the tree */
  json_t *report;
};

struct build {
  const struct rootfs_manifest *m;
  struct rootfs_reader rd; /* whom host files are read as (the client) */
  const struct arch_info *ai;
  int allow_download;
  struct rootfs_tree *t;
  int dir_fd;     /* <store>/.build-XXXXXX */
  char *dir_path; /* its path */
  unsigned dl_seq;
  char **dl_names; /* downloaded files in dir_fd, removed before the rename */
  size_t n_dl;
  json_t *sources;       /* entry path -> what was used */
  json_t *warnings;      /* strings */
  json_t *libpath;       /* directories the jail's loader must be told (no ld.so.cache there) */
  json_t *input_desc;    /* input -> what it is, for inputs that are no manifest entry */
  struct sdirs conf;     /* /etc/ld.so.conf directories, in order */
  struct sdirs defaults; /* the loader's built-in directories */
  struct obj *q;
  size_t nq, capq, qhead;
  struct applet_job *jobs;
  size_t njobs;
};

/* ---- small helpers ---- */

static void sdirs_add(struct sdirs *s, const char *host, const char *tree)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i].host, host) == 0)
      return;
  s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
  s->v[s->n].host = xstrdup(host);
  s->v[s->n].tree = xstrdup(tree);
  s->n++;
}

static void sdirs_release(struct sdirs *s)
{
  for (size_t i = 0; i < s->n; i++) {
    free(s->v[i].host);
    free(s->v[i].tree);
  }
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

static void sdirs_copy(struct sdirs *dst, const struct sdirs *src)
{
  for (size_t i = 0; i < src->n; i++)
    sdirs_add(dst, src->v[i].host, src->v[i].tree);
}

static int sdirs_has(const struct sdirs *s, const char *host)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i].host, host) == 0)
      return 1;
  return 0;
}

static char *dir_of(const char *path)
{
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    return xstrdup(".");
  if (slash == path)
    return xstrdup("/");
  return xstrndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Lexically clean an absolute path: no "", "." or ".." components ("/.." stays "/"). */
static char *clean_path(const char *path)
{
  char *out = xmalloc(strlen(path) + 2);
  size_t n = 0;
  const char *p = path;

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
      while (n > 0 && out[n - 1] != '/')
        n--;
      if (n > 0)
        n--;
      continue;
    }
    out[n++] = '/';
    memcpy(out + n, seg, len);
    n += len;
  }
  if (n == 0)
    out[n++] = '/';
  out[n] = '\0';
  return out;
}

static void warn(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct build *b, const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start(ap, fmt);
  msg = xvasprintf(fmt, ap);
  va_end(ap);
  json_array_append_new(b->warnings, json_string(msg));
  free(msg);
}

static int is_hex(const char *s, size_t min, size_t max)
{
  size_t n = strlen(s);
  if (n < min || n > max)
    return 0;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return 0;
  return 1;
}

static const struct arch_info *find_arch(const char *arch)
{
  for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
    if (strcmp(arches[i].arch, arch) == 0)
      return &arches[i];
  return NULL;
}

/* The installed version of a Debian package, from dpkg's status file, or NULL. */
static char *dpkg_version(const char *pkg)
{
  cleanup_file FILE *f = fopen(DPKG_STATUS, "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int match = 0, installed = 0;
  char *version = NULL;

  if (f == NULL)
    return NULL;
  for (;;) {
    len = getline(&line, &cap, f);
    if (len <= 1) { /* blank line or EOF: end of a paragraph */
      if (match && installed && version)
        return version;
      free(version);
      version = NULL;
      match = installed = 0;
      if (len < 0)
        return NULL;
      continue;
    }
    if (line[len - 1] == '\n')
      line[--len] = '\0';
    if (strncmp(line, "Package: ", 9) == 0)
      match = strcmp(line + 9, pkg) == 0;
    else if (strncmp(line, "Status: ", 8) == 0)
      installed = len > 10 && strcmp(line + len - 10, " installed") == 0;
    else if (strncmp(line, "Version: ", 9) == 0) {
      free(version);
      version = xstrdup(line + 9);
    }
  }
}

/* ---- the loader's search path ---- */

static void conf_parse(struct build *b, const char *path, int depth)
{
  cleanup_file FILE *f = NULL;
  cleanup_free char *line = NULL;
  size_t cap = 0;

  if (depth > 8 || (f = fopen(path, "re")) == NULL)
    return;
  while (getline(&line, &cap, f) >= 0) {
    char *hash = strchr(line, '#'), *save = NULL;
    if (hash)
      *hash = '\0';
    char *tok = strtok_r(line, " \t\r\n", &save);
    if (tok == NULL)
      continue;
    if (strcmp(tok, "include") == 0) {
      char *pat;
      while ((pat = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        cleanup_free char *full = NULL;
        glob_t g;
        if (pat[0] != '/') {
          cleanup_free char *d = dir_of(path);
          full = xasprintf("%s/%s", d, pat);
        } else {
          full = xstrdup(pat);
        }
        if (glob(full, 0, NULL, &g) == 0) {
          for (size_t i = 0; i < g.gl_pathc; i++)
            conf_parse(b, g.gl_pathv[i], depth + 1);
        }
        globfree(&g);
      }
      continue;
    }
    if (strcmp(tok, "hwcap") == 0)
      continue;
    do {
      char *s2 = NULL;
      for (char *d = strtok_r(tok, ":,", &s2); d; d = strtok_r(NULL, ":,", &s2)) {
        char *eq = strchr(d, '=');
        if (eq)
          *eq = '\0';
        if (d[0] == '/') {
          cleanup_free char *c = clean_path(d);
          sdirs_add(&b->conf, c, c);
        }
      }
    } while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL);
  }
}

static void search_init(struct build *b)
{
  const char *t = b->ai->triplet;
  cleanup_free char *a = xasprintf("/lib/%s", t);
  cleanup_free char *c = xasprintf("/usr/lib/%s", t);

  conf_parse(b, LD_SO_CONF, 0);
  sdirs_add(&b->defaults, a, a);
  sdirs_add(&b->defaults, c, c);
  sdirs_add(&b->defaults, "/lib", "/lib");
  sdirs_add(&b->defaults, "/usr/lib", "/usr/lib");
  if (b->ai->bits == 64) {
    sdirs_add(&b->defaults, "/lib64", "/lib64");
    sdirs_add(&b->defaults, "/usr/lib64", "/usr/lib64");
  }
}

/* Expand a DT_RPATH/DT_RUNPATH list.  $ORIGIN is the object's directory: on this machine for
 * finding the library, in the tree for placing it (they differ when a binary is installed
 * under another path, as opencode is). */
static void expand_rpath(struct build *b, const char *list, const char *host_origin,
                         const char *tree_origin, struct sdirs *out)
{
  cleanup_free char *copy = xstrdup(list);
  char *save = NULL;

  for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    cleanup_free char *h = xstrdup(""), *tr = xstrdup("");
    const char *p = d;
    while (*p) {
      const char *hv = NULL, *tv = NULL;
      size_t skip = 0;
      if (strncmp(p, "$ORIGIN", 7) == 0 || strncmp(p, "${ORIGIN}", 9) == 0) {
        hv = host_origin;
        tv = tree_origin;
        skip = p[1] == '{' ? 9 : 7;
      } else if (strncmp(p, "$LIB", 4) == 0 || strncmp(p, "${LIB}", 6) == 0) {
        hv = tv = b->ai->bits == 64 ? "lib64" : "lib";
        skip = p[1] == '{' ? 6 : 4;
      } else if (strncmp(p, "$PLATFORM", 9) == 0 || strncmp(p, "${PLATFORM}", 11) == 0) {
        hv = tv = b->ai->arch;
        skip = p[1] == '{' ? 11 : 9;
      }
      char *nh, *nt;
      if (hv) {
        nh = xasprintf("%s%s", h, hv);
        nt = xasprintf("%s%s", tr, tv);
        p += skip;
      } else {
        nh = xasprintf("%s%c", h, *p);
        nt = xasprintf("%s%c", tr, *p);
        p++;
      }
      free(h);
      free(tr);
      h = nh;
      tr = nt;
    }
    if (h[0] != '/') {
      warn(b, "ignoring the relative library path '%s'", d);
      continue;
    }
    cleanup_free char *ch = clean_path(h), *ct = clean_path(tr);
    sdirs_add(out, ch, ct);
  }
}

/* Is path an ELF object for our machine? */
static int elf_matches(struct build *b, const char *path)
{
  agt_error_t e = NULL;
  int bits;
  unsigned machine;
  int r = rootfs_elf_ident(path, &bits, &machine, &e);

  agt_error_release(&e);
  return r == 0 && bits == b->ai->bits && machine == b->ai->machine;
}

/* Find a DT_NEEDED name as the loader would.  *host and *tree are set on success; *from_conf
 * when only an ld.so.conf directory had it. */
static int find_lib(struct build *b, const char *name, const struct sdirs *first, char **host,
                    char **tree, const char **conf_dir)
{
  const struct sdirs *lists[] = {first, &b->conf, &b->defaults};

  *conf_dir = NULL;
  for (size_t l = 0; l < 3; l++) {
    if (lists[l] == NULL)
      continue;
    for (size_t i = 0; i < lists[l]->n; i++) {
      cleanup_free char *cand = xasprintf("%s/%s", lists[l]->v[i].host, name);
      if (access(cand, F_OK) != 0 || !elf_matches(b, cand))
        continue;
      *host = steal_pointer(&cand);
      *tree = xasprintf("%s/%s", lists[l]->v[i].tree, name);
      if (lists[l] == &b->conf && !sdirs_has(&b->defaults, lists[l]->v[i].host))
        *conf_dir = lists[l]->v[i].host;
      return 0;
    }
  }
  return -1;
}

/* A library came from an ld.so.conf directory that the jail's loader, which has no
 * ld.so.cache, does not search: say so in info.json's "ld_library_path". */
static void note_libpath(struct build *b, const char *dir)
{
  for (size_t i = 0; i < json_array_size(b->libpath); i++)
    if (strcmp(json_string_value(json_array_get(b->libpath, i)), dir) == 0)
      return;
  json_array_append_new(b->libpath, json_string(dir));
}

static void queue_obj(struct build *b, const char *host, const char *tree, const char *origin,
                      int strict, const struct sdirs *inherited)
{
  struct obj *o;

  if (b->nq == b->capq) {
    b->capq = b->capq ? b->capq * 2 : 64;
    b->q = xrealloc(b->q, b->capq * sizeof *b->q);
  }
  o = &b->q[b->nq++];
  memset(o, 0, sizeof *o);
  o->host = xstrdup(host);
  o->tree = xstrdup(tree);
  o->origin = xstrdup(origin);
  o->strict = strict;
  if (inherited)
    sdirs_copy(&o->inherited, inherited);
}

/* Put a library into the tree at the path it has on this machine, symlinks and all
 * (libfoo.so.1 -> libfoo.so.1.2.3), and queue the file for its own libraries. */
static int add_lib(struct build *b, const char *host, const char *tree, const char *origin,
                   const struct sdirs *inherited, agt_error_t *err)
{
  cleanup_free char *h = xstrdup(host);
  cleanup_free char *t = rootfs_tree_canon(b->t, tree, err);

  if (t == NULL)
    return -1;
  for (int hops = 0;; hops++) {
    struct stat st;
    if (hops > MAX_LINK_HOPS)
      return agt_error_kind(err, AGT_E_INVALID, "'%s': too many levels of symbolic links", host);
    if (lstat(h, &st) < 0)
      return agt_error_make(err, errno, "library '%s' (for %s)", h, origin);
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(h, target, sizeof target - 1);
      if (n <= 0)
        return agt_error_make(err, n < 0 ? errno : EINVAL, "readlink '%s'", h);
      target[n] = '\0';
      int added = rootfs_tree_add_link(b->t, t, target, origin, 1, err);
      if (added < 0)
        return -1;
      if (added == 1)
        rootfs_tree_set_input(b->t, t, t);
      struct rootfs_node *have = rootfs_tree_get(b->t, t);
      if (have && (have->type != ROOTFS_NODE_LINK || strcmp(have->target, target) != 0)) {
        warn(b, "kept %s '%s' (%s); not replaced by the symlink '%s' -> '%s' (%s)",
             have->type == ROOTFS_NODE_FILE ? "the file" : "the entry", t, have->origin, h, target,
             origin);
        return 0;
      }
      cleanup_free char *hdir = dir_of(h);
      char *nh = target[0] == '/' ? xstrdup(target) : xasprintf("%s/%s", hdir, target);
      char *nt = rootfs_tree_resolve(b->t, t, target, err);
      if (nt == NULL) {
        free(nh);
        return -1;
      }
      free(h);
      free(t);
      h = nh;
      t = nt;
      continue;
    }
    if (!S_ISREG(st.st_mode))
      return agt_error_kind(err, AGT_E_INVALID, "library '%s' (for %s) is not a regular file", h,
                            origin);
    int r = rootfs_tree_add_file(b->t, t, h, (st.st_mode & 0111) ? 0755 : 0644, origin, 1, err);
    if (r < 0)
      return -1;
    if (r == 0) {
      struct rootfs_node *have = rootfs_tree_get(b->t, t);
      if (have &&
          (have->type != ROOTFS_NODE_FILE || have->dev != st.st_dev || have->ino != st.st_ino))
        warn(b, "kept '%s' (%s); '%s' (%s) was not copied over it", t, have->origin, h, origin);
      return 0;
    }
    rootfs_tree_set_input(b->t, t, t);
    cleanup_free char *o = xasprintf("library %s", t);
    queue_obj(b, h, t, o, 1, inherited);
    return 1;
  }
}

/* Find and add the libraries one ELF file needs. */
static int closure_one(struct build *b, struct obj *o, agt_error_t *err)
{
  struct rootfs_elf e;
  struct sdirs first = {0}, pass = {0};
  cleanup_free char *real = realpath(o->host, NULL);
  cleanup_free char *horig = dir_of(real ? real : o->host);
  cleanup_free char *torig = dir_of(o->tree);
  int r, ret = -1;

  r = rootfs_elf_read(o->host, &e, err);
  if (r < 0)
    return agt_error_wrap(err, "%s", o->origin);
  if (r == 1)
    return 0;
  if (e.bits != b->ai->bits || e.machine != b->ai->machine) {
    if (o->strict) {
      agt_error_kind(err, AGT_E_INVALID, "%s: '%s' is a %d-bit ELF file for machine %u, not for %s",
                     o->origin, o->host, e.bits, e.machine, b->ai->arch);
      goto out;
    }
    warn(b, "%s: '%s' is an ELF file for another machine; its libraries were not copied", o->origin,
         o->host);
    ret = 0;
    goto out;
  }
  if (e.interp) {
    if (e.interp[0] != '/') {
      agt_error_kind(err, AGT_E_INVALID, "%s: '%s' has a relative interpreter '%s'", o->origin,
                     o->host, e.interp);
      goto out;
    }
    cleanup_free char *why = xasprintf("interpreter of %s", o->tree);
    cleanup_free char *ci = clean_path(e.interp);
    if (add_lib(b, ci, ci, why, NULL, err) < 0)
      goto out;
  }
  if (e.runpath == NULL) {
    if (e.rpath)
      expand_rpath(b, e.rpath, horig, torig, &pass);
    sdirs_copy(&pass, &o->inherited);
    sdirs_copy(&first, &pass);
  }
  if (e.runpath)
    expand_rpath(b, e.runpath, horig, torig, &first);

  for (char **n = e.needed; *n; n++) {
    cleanup_free char *host = NULL, *tree = NULL, *why = NULL;
    const char *conf_dir;
    if (strchr(*n, '/')) {
      if ((*n)[0] != '/') {
        agt_error_kind(err, AGT_E_INVALID, "%s: '%s' needs '%s', a relative path", o->origin,
                       o->host, *n);
        goto out;
      }
      host = clean_path(*n);
      tree = xstrdup(host);
      conf_dir = NULL;
    } else if (find_lib(b, *n, &first, &host, &tree, &conf_dir) < 0) {
      if (o->strict) {
        agt_error_kind(err, AGT_E_NOTFOUND,
                       "%s: '%s' needs %s, which is in none of the library directories (its "
                       "rpath/runpath, " LD_SO_CONF ", /lib/%s, /usr/lib/%s, /lib, /usr/lib)",
                       o->origin, o->host, *n, b->ai->triplet, b->ai->triplet);
        goto out;
      }
      warn(b, "%s: '%s' needs %s, which was not found; the file is copied without it", o->origin,
           o->host, *n);
      continue;
    }
    if (conf_dir)
      note_libpath(b, conf_dir);
    why = xasprintf("%s, needed by %s", *n, o->tree);
    if (add_lib(b, host, tree, why, &pass, err) < 0)
      goto out;
  }
  ret = 0;
out:
  sdirs_release(&first);
  sdirs_release(&pass);
  rootfs_elf_release(&e);
  return ret;
}

/* ---- sources ---- */

static json_t *tried_item(const char *source, const char *result)
{
  return json_pack("{s:s, s:s}", "source", source, "result", result);
}

/* Fetch a download source into the build directory.  Returns 1 and *src when it can be used,
 * 0 when it cannot (the reason is added to tried), -1 on a local failure. */
static int try_download(struct build *b, const struct rootfs_entry *e,
                        const struct rootfs_source *s, json_t *tried, char **src, json_t **used,
                        agt_error_t *err)
{
  const struct rootfs_pin *pin = rootfs_source_pin(s, b->ai->arch);
  cleanup_free char *label = NULL, *name = NULL, *msg = NULL;
  cleanup_close int fd = -1;
  agt_error_t fe = NULL;
  char actual[65];
  unsigned long long size = 0;

  if (pin == NULL) {
    label = xasprintf("download %s", s->version ? s->version : "");
    json_array_append_new(tried, tried_item(label, "skipped: no download for this architecture"));
    return 0;
  }
  label = xasprintf("download %s", pin->url);
  if (pin->sha256 == NULL) {
    msg = xasprintf("skipped: sha256 pin unknown for %s: download disabled for this arch",
                    b->ai->arch);
    json_array_append_new(tried, tried_item(label, msg));
    return 0;
  }
  if (!b->allow_download) {
    json_array_append_new(tried, tried_item(label, "skipped: downloads are not allowed"));
    return 0;
  }
  name = xasprintf("download-%u", b->dl_seq++);
  fd = openat(b->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return agt_error_make(err, errno, "create '%s/%s'", b->dir_path, name);
  b->dl_names = xrealloc(b->dl_names, (b->n_dl + 1) * sizeof *b->dl_names);
  b->dl_names[b->n_dl++] = xstrdup(name);
  if (rootfs_fetch(pin->url, s->max_bytes, fd, actual, &size, &fe) < 0) {
    msg = xasprintf("failed: %s", fe->msg);
    agt_error_release(&fe);
    json_array_append_new(tried, tried_item(label, msg));
    warn(b, "%s: %s", e->path, msg);
    return 0;
  }
  if (fsync(fd) < 0)
    return agt_error_make(err, errno, "fsync '%s/%s'", b->dir_path, name);
  if (strcmp(actual, pin->sha256) != 0) {
    msg = xasprintf("refused: sha256 mismatch for %s: expected %s, got %s", pin->url, pin->sha256,
                    actual);
    json_t *it = tried_item(label, msg);
    json_object_set_new(it, "expected_sha256", json_string(pin->sha256));
    json_object_set_new(it, "actual_sha256", json_string(actual));
    json_array_append_new(tried, it);
    warn(b, "%s: %s", e->path, msg);
    return 0;
  }
  *src = xasprintf("%s/%s", b->dir_path, name);
  if (rootfs_elf_ident(*src, &(int){0}, &(unsigned){0}, &fe) == 0) {
    if (!elf_matches(b, *src)) {
      msg = xasprintf("refused: %s is not an ELF file for %s", pin->url, b->ai->arch);
      json_array_append_new(tried, tried_item(label, msg));
      free(*src);
      *src = NULL;
      return 0;
    }
    if (fchmod(fd, 0700) < 0) /* an executable: the tree's copy gets 0755 (unless 'mode') */
      return agt_error_make(err, errno, "chmod '%s'", *src);
  }
  agt_error_release(&fe);
  *used = json_pack("{s:s, s:s, s:s, s:I}", "kind", "download", "url", pin->url, "sha256", actual,
                    "bytes", (json_int_t)size);
  if (s->version)
    json_object_set_new(*used, "version", json_string(s->version));
  json_object_set_new(*used, "summary",
                      json_sprintf("download %s%s%s (sha256 verified)",
                                   s->version ? s->version : "", s->version ? " " : "", pin->url));
  return 1;
}

/* A source that exists must be readable by the client: a file it may not read is refused
 * (never copied with agtd's rights, never skipped for the next candidate in silence).  The
 * build is reading as the client here (plan), so open() says. */
static int readable_check(struct build *b, const struct rootfs_entry *e,
                          const struct rootfs_source *s, const char *path, int want_dir,
                          agt_error_t *err)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (want_dir ? O_DIRECTORY : 0));

  if (fd >= 0) {
    close(fd);
    return 0;
  }
  if ((errno == EACCES || errno == EPERM) && b->rd.as)
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s:%d:%d: %s: '%s' is not readable by uid %u, who asked for this build "
                          "(%s): agtd reads a manifest's host files with the rights of the user "
                          "who asks",
                          b->m->file, s->line, s->col, e->path, path, (unsigned)b->rd.as->uid,
                          strerror(errno));
  return agt_error_make(err, errno, "%s:%d:%d: %s: open '%s'", b->m->file, s->line, s->col, e->path,
                        path);
}

/* Install an npm source into the build directory: its node_modules is the tree's source.
 * Returns 1 and *src when it can be used, 0 when downloads are not allowed, -1 when npm
 * failed (a pinned package that does not install is an error, not a reason to fall back). */
static int try_npm(struct build *b, const struct rootfs_entry *e, const struct rootfs_source *s,
                   json_t *tried, char **src, json_t **used, agt_error_t *err)
{
  cleanup_free char *label = xasprintf("npm %s", s->npm), *name = NULL, *prefix = NULL;
  cleanup_free char *store =
      xstrndup(b->dir_path, (size_t)(strrchr(b->dir_path, '/') - b->dir_path));
  cleanup_free char *cache = xasprintf("%s/.npm-cache", store);
  cleanup_free char *pkg = NULL, *version = NULL;
  const char *at = strchr(s->npm + 1, '@');

  if (!b->allow_download) {
    json_array_append_new(tried, tried_item(label, "skipped: downloads are not allowed"));
    return 0;
  }
  /* npm runs as agtd (the caller left the client's identity), and the tree then reads what
   * it installed as the client: the build directory must let it through (0711: no listing) */
  if (fchmod(b->dir_fd, 0711) < 0)
    return agt_error_make(err, errno, "chmod '%s'", b->dir_path);
  name = xasprintf("npm-%u", b->dl_seq++);
  if (mkdirat(b->dir_fd, name, 0755) < 0)
    return agt_error_make(err, errno, "create '%s/%s'", b->dir_path, name);
  b->dl_names = xrealloc(b->dl_names, (b->n_dl + 1) * sizeof *b->dl_names);
  b->dl_names[b->n_dl++] = xstrdup(name);
  prefix = xasprintf("%s/%s", b->dir_path, name);
  if (rootfs_npm_install(s->npm, prefix, cache, err) < 0)
    return agt_error_wrap(err, "%s:%d:%d: %s", b->m->file, s->line, s->col, e->path);
  pkg = xstrndup(s->npm, (size_t)(at - s->npm));
  version = rootfs_npm_version(prefix, pkg);
  if (version == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL,
                          "%s:%d:%d: %s: npm installed %s but left no "
                          "node_modules/%s/package.json with a version",
                          b->m->file, s->line, s->col, e->path, s->npm, pkg);
  *src = xasprintf("%s/node_modules", prefix);
  *used = json_pack("{s:s, s:s, s:s, s:s}", "kind", "npm", "package", pkg, "spec", s->npm,
                    "version", version);
  json_object_set_new(*used, "summary", json_sprintf("npm %s@%s", pkg, version));
  return 1;
}

/* Pick the first usable source of a file or tree entry.  Returns 1 with *src and *used, 0 when
 * none was usable and the entry is optional, -1 on error. */
static int pick_source(struct build *b, const struct rootfs_entry *e, char **src, json_t **used,
                       agt_error_t *err)
{
  int want_dir = e->kind == ROOTFS_ENTRY_TREE;
  json_t *tried = json_array();
  int r;

  *src = NULL;
  *used = NULL;
  for (size_t i = 0; i < e->n_sources; i++) {
    const struct rootfs_source *s = &e->sources[i];
    struct stat st;

    if (s->kind == ROOTFS_SRC_NPM) {
      if (rootfs_reader_leave(&b->rd, err) < 0)
        goto fail;
      r = try_npm(b, e, s, tried, src, used, err); /* npm writes into the store */
      if (r >= 0 && rootfs_reader_enter(&b->rd, err) < 0)
        r = -1;
      if (r < 0)
        goto fail;
      if (r == 1)
        goto found;
      continue;
    }
    if (s->kind == ROOTFS_SRC_DOWNLOAD) {
      if (rootfs_reader_leave(&b->rd, err) < 0)
        goto fail;
      r = try_download(b, e, s, tried, src, used, err); /* writes into the store */
      if (r >= 0 && rootfs_reader_enter(&b->rd, err) < 0)
        r = -1;
      if (r < 0)
        goto fail;
      if (r == 1)
        goto found;
      continue;
    }
    if (s->kind == ROOTFS_SRC_ENV) {
      const char *v = getenv(s->env);
      cleanup_free char *label = xasprintf("env %s", s->env);
      agt_error_t pe = NULL;
      if (v == NULL || *v == '\0') {
        json_array_append_new(tried, tried_item(label, "not set"));
        continue;
      }
      /* set on purpose: a bad value is an error, not a reason to fall back */
      if (agt_abspath_check(s->env, v, &pe) < 0) {
        agt_error_kind(err, AGT_E_INVALID, "%s:%d:%d: %s: %s", b->m->file, s->line, s->col, e->path,
                       pe->msg);
        agt_error_release(&pe);
        goto fail;
      }
      if (stat(v, &st) < 0) {
        agt_error_make(err, errno, "%s:%d:%d: %s: %s=%s", b->m->file, s->line, s->col, e->path,
                       s->env, v);
        goto fail;
      }
      if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        agt_error_kind(err, AGT_E_INVALID, "%s:%d:%d: %s: %s=%s is not a %s", b->m->file, s->line,
                       s->col, e->path, s->env, v, want_dir ? "directory" : "regular file");
        goto fail;
      }
      if (readable_check(b, e, s, v, want_dir, err) < 0)
        goto fail;
      *src = xstrdup(v);
      *used = json_pack("{s:s, s:s, s:s}", "kind", "env", "env", s->env, "path", v);
      json_object_set_new(*used, "summary", json_sprintf("$%s = %s", s->env, v));
      goto found;
    }
    for (char **p = s->paths; *p; p++) {
      cleanup_free char *label = xasprintf("host %s", *p);
      if (stat(*p, &st) < 0) {
        json_array_append_new(tried, tried_item(label, strerror(errno)));
        continue;
      }
      if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        json_array_append_new(
            tried, tried_item(label, want_dir ? "not a directory" : "not a regular file"));
        continue;
      }
      if (readable_check(b, e, s, *p, want_dir, err) < 0)
        goto fail;
      *src = xstrdup(*p);
      *used = json_pack("{s:s, s:s}", "kind", "host", "path", *p);
      if (s->package) {
        cleanup_free char *ver = dpkg_version(s->package);
        json_object_set_new(*used, "package", json_string(s->package));
        if (ver)
          json_object_set_new(*used, "version", json_string(ver));
        json_object_set_new(
            *used, "summary",
            json_sprintf("distro %s %s (%s)", s->package, ver ? ver : "(version unknown)", *p));
      } else {
        /* through symlinks, the file's own path names what it is (a versioned directory) */
        cleanup_free char *real = realpath(*p, NULL);
        if (real && strcmp(real, *p) != 0) {
          json_object_set_new(*used, "real_path", json_string(real));
          json_object_set_new(*used, "summary", json_sprintf("host %s (%s)", *p, real));
        } else {
          json_object_set_new(*used, "summary", json_sprintf("host %s", *p));
        }
      }
      goto found;
    }
  }

  /* nothing usable */
  if (e->optional) {
    *used = json_pack("{s:n, s:s}", "kind", "summary", "optional: no source found, left out");
    json_object_set_new(*used, "tried", tried);
    return 0;
  }
  {
    cleanup_free char *why = xstrdup("");
    size_t i;
    json_t *it;
    json_array_foreach(tried, i, it)
    {
      char *n = xasprintf("%s%s%s: %s", why, *why ? "; " : "",
                          json_string_value(json_object_get(it, "source")),
                          json_string_value(json_object_get(it, "result")));
      free(why);
      why = n;
    }
    agt_error_kind(err, AGT_E_NOTFOUND, "%s:%d:%d: no source found for '%s' (tried %s)%s%s",
                   b->m->file, e->line, e->col, e->path, why, e->hint ? "; " : "",
                   e->hint ? e->hint : "");
  }
fail:
  json_decref(tried);
  if (*used) {
    json_decref(*used);
    *used = NULL;
  }
  free(*src);
  *src = NULL;
  return -1;
found:
  if (json_array_size(tried) > 0)
    json_object_set(*used, "tried", tried);
  json_decref(tried);
  return 1;
}

/* ---- planning ---- */

static int copy_tree(struct build *b, const struct rootfs_entry *e, const char *host,
                     const char *tree, int depth, size_t *count, agt_error_t *err)
{
  cleanup_dir DIR *d = NULL;
  struct dirent *de;
  int fd;

  if (depth > MAX_TREE_DEPTH)
    return agt_error_kind(err, AGT_E_LIMIT, "'%s' is nested too deeply", host);
  fd = open(host, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
  if (fd < 0)
    return agt_error_make(err, errno, "open directory '%s'", host);
  d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return agt_error_make(err, errno, "opendir '%s'", host);
  }
  while ((errno = 0, de = readdir(d)) != NULL) {
    struct stat st;
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (++*count > MAX_TREE_ENTRIES)
      return agt_error_kind(err, AGT_E_LIMIT, "'%s' has more than %d entries", e->path,
                            MAX_TREE_ENTRIES);
    cleanup_free char *h = xasprintf("%s/%s", host, de->d_name);
    cleanup_free char *t = xasprintf("%s/%s", tree, de->d_name);
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      return agt_error_make(err, errno, "stat '%s'", h);
    if (S_ISDIR(st.st_mode)) {
      if (rootfs_tree_add_dir(b->t, t, 0755, e->path, err) < 0 ||
          copy_tree(b, e, h, t, depth + 1, count, err) < 0)
        return -1;
    } else if (S_ISREG(st.st_mode)) {
      int r = rootfs_tree_add_file(b->t, t, h, (st.st_mode & 0111) ? 0755 : 0644, e->path, 0, err);
      if (r < 0)
        return -1;
      if (r == 1 && e->libs) { /* ELF files only: closure_one looks */
        cleanup_free char *c = rootfs_tree_canon(b->t, t, err);
        if (c == NULL)
          return -1;
        queue_obj(b, h, c, t, 0, NULL);
      }
    } else if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof target - 1);
      if (n <= 0)
        return agt_error_make(err, n < 0 ? errno : EINVAL, "readlink '%s'", h);
      target[n] = '\0';
      if (rootfs_tree_add_link(b->t, t, target, e->path, 0, err) < 0)
        return -1;
    } else {
      warn(b, "%s: skipped '%s', which is not a file, directory or symlink", e->path, h);
    }
  }
  if (errno)
    return agt_error_make(err, errno, "readdir '%s'", host);
  return 0;
}

static int plan_entry(struct build *b, const struct rootfs_entry *e, agt_error_t *err)
{
  cleanup_free char *src = NULL, *c = NULL;
  json_t *used = NULL;
  struct stat st;
  int r;

  switch (e->kind) {
  case ROOTFS_ENTRY_SYMLINK:
    if (rootfs_tree_add_link(b->t, e->path, e->target, e->path, 0, err) < 0)
      goto bad;
    json_object_set_new(b->sources, e->path,
                        json_pack("{s:s, s:s}", "kind", "symlink", "target", e->target));
    return 0;
  case ROOTFS_ENTRY_CONTENT:
    if (rootfs_tree_add_data(b->t, e->path, e->content, e->content_len,
                             e->mode >= 0 ? (unsigned)e->mode : 0644, e->path, err) < 0)
      goto bad;
    json_object_set_new(
        b->sources, e->path,
        json_pack("{s:s, s:I}", "kind", "content", "bytes", (json_int_t)e->content_len));
    return 0;
  case ROOTFS_ENTRY_FILE:
  case ROOTFS_ENTRY_TREE:
    break;
  }

  r = pick_source(b, e, &src, &used, err);
  if (r < 0)
    return -1;
  json_object_set_new(b->sources, e->path, used);
  if (r == 0)
    return 0;

  if (e->kind == ROOTFS_ENTRY_TREE) {
    size_t count = 0;
    if (rootfs_tree_add_dir(b->t, e->path, 0755, e->path, err) < 0)
      goto bad;
    c = rootfs_tree_canon(b->t, e->path, err);
    if (c == NULL || copy_tree(b, e, src, c, 0, &count, err) < 0)
      goto bad;
    json_object_set_new(used, "entries", json_integer((json_int_t)count));
    return 0;
  }

  if (stat(src, &st) < 0)
    return agt_error_make(err, errno, "stat '%s'", src);
  unsigned mode = e->mode >= 0 ? (unsigned)e->mode : (st.st_mode & 0111) ? 0755 : 0644;
  if (rootfs_tree_add_file(b->t, e->path, src, mode, e->path, 0, err) < 0)
    goto bad;
  c = rootfs_tree_canon(b->t, e->path, err);
  if (c == NULL)
    goto bad;
  if (e->libs)
    queue_obj(b, src, c, e->path, 1, NULL);
  if (e->applets != ROOTFS_APPLETS_NONE) {
    b->jobs = xrealloc(b->jobs, (b->njobs + 1) * sizeof *b->jobs);
    b->jobs[b->njobs++] = (struct applet_job){e, xstrdup(src), xstrdup(c), used};
  }
  return 0;
bad:
  return agt_error_wrap(err, "%s:%d:%d: %s", b->m->file, e->line, e->col, e->path);
}

/* One symlink per applet beside the binary, as toybox's installer does ("install_flat"),
 * skipping names something else already provides there. */
static int plan_applets(struct build *b, struct applet_job *j, agt_error_t *err)
{
  cleanup_strv char **names = NULL;
  const char *self = base_of(j->tree);
  cleanup_free char *dir = dir_of(j->tree);
  cleanup_free char *input = xasprintf("%s applets", j->e->path);
  size_t added = 0, skipped = 0;

  if (rootfs_elf_applets(j->src, j->e->applets, &names, err) < 0)
    return agt_error_wrap(err, "%s:%d:%d: %s: applets", b->m->file, j->e->line, j->e->col,
                          j->e->path);
  for (char **n = names; *n; n++) {
    if (strcmp(*n, self) == 0 || strcmp(*n, ".") == 0 || strcmp(*n, "..") == 0)
      continue;
    cleanup_free char *p = xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, *n);
    int r = rootfs_tree_add_link(b->t, p, self, j->e->path, 1, err);
    if (r < 0)
      return -1;
    if (r == 1)
      rootfs_tree_set_input(b->t, p, input);
    if (r == 1)
      added++;
    else
      skipped++;
  }
  json_object_set_new(j->report, "applets", json_integer((json_int_t)added));
  json_object_set_new(
      b->input_desc, input,
      json_sprintf("%zu applet links to %s (%zu provided elsewhere)", added, self, skipped));
  json_object_set_new(j->report, "applets_provided_elsewhere", json_integer((json_int_t)skipped));
  return 0;
}

static int plan_library(struct build *b, const struct rootfs_lib *l, agt_error_t *err)
{
  cleanup_free char *host = NULL, *tree = NULL, *why = NULL;
  const char *conf_dir = NULL;

  why = xasprintf("libraries: %s", l->name);
  if (l->name[0] == '/') {
    host = xstrdup(l->name);
    tree = xstrdup(l->name);
    if (access(host, F_OK) != 0)
      return agt_error_make(err, errno, "%s:%d:%d: libraries: '%s'", b->m->file, l->line, l->col,
                            l->name);
  } else if (find_lib(b, l->name, NULL, &host, &tree, &conf_dir) < 0) {
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "%s:%d:%d: libraries: %s is in none of the library directories "
                          "(" LD_SO_CONF ", /lib/%s, /usr/lib/%s, /lib, /usr/lib)",
                          b->m->file, l->line, l->col, l->name, b->ai->triplet, b->ai->triplet);
  }
  if (conf_dir)
    note_libpath(b, conf_dir);
  if (add_lib(b, host, tree, why, NULL, err) < 0)
    return agt_error_wrap(err, "%s:%d:%d", b->m->file, l->line, l->col);
  return 0;
}

static int plan(struct build *b, agt_error_t *err)
{
  const struct rootfs_manifest *m = b->m;

  for (size_t i = 0; i < m->n_dirs; i++)
    if (rootfs_tree_add_dir(b->t, m->dirs[i].path, (unsigned)m->dirs[i].mode, m->dirs[i].path,
                            err) < 0)
      return agt_error_wrap(err, "%s:%d:%d: dirs", m->file, m->dirs[i].line, m->dirs[i].col);
  for (size_t i = 0; i < m->n_entries; i++)
    if (plan_entry(b, &m->entries[i], err) < 0)
      return -1;
  for (size_t i = 0; i < b->njobs; i++)
    if (plan_applets(b, &b->jobs[i], err) < 0)
      return -1;
  for (size_t i = 0; i < m->n_libraries; i++)
    if (plan_library(b, &m->libraries[i], err) < 0)
      return -1;
  for (; b->qhead < b->nq; b->qhead++) {
    /* copy: closure_one may grow b->q */
    struct obj o = b->q[b->qhead];
    int r = closure_one(b, &o, err);
    if (r < 0)
      return -1;
  }
  return 0;
}

static void build_release(struct build *b)
{
  rootfs_tree_free(b->t);
  for (size_t i = 0; i < b->nq; i++) {
    free(b->q[i].host);
    free(b->q[i].tree);
    free(b->q[i].origin);
    sdirs_release(&b->q[i].inherited);
  }
  free(b->q);
  for (size_t i = 0; i < b->njobs; i++) {
    free(b->jobs[i].src);
    free(b->jobs[i].tree);
  }
  free(b->jobs);
  for (size_t i = 0; i < b->n_dl; i++)
    free(b->dl_names[i]);
  free(b->dl_names);
  sdirs_release(&b->conf);
  sdirs_release(&b->defaults);
  json_decref(b->sources);
  json_decref(b->warnings);
  json_decref(b->libpath);
  json_decref(b->input_desc);
  free(b->dir_path);
  if (b->dir_fd >= 0)
    close(b->dir_fd);
}

/* What each input of the tree was, for `rootfs.update` to say what changed:
 * {input: {"sha256": over its nodes, "source": where it came from}}.  An input is a manifest
 * entry (its file, applet links or tree), a library of the closure (by its path in the
 * tree), or a directory of `dirs`. */
static json_t *inputs_of(struct build *b)
{
  json_t *hashes = rootfs_tree_inputs(b->t), *out = json_object(), *v;
  const char *key;

  json_object_foreach(hashes, key, v)
  {
    json_t *src = json_object_get(b->sources, key);
    struct rootfs_node *n = rootfs_tree_get(b->t, key);
    json_t *it = json_pack("{s:O}", "sha256", v);
    const char *kind = json_string_value(json_object_get(src, "kind"));

    if (json_is_string(json_object_get(b->input_desc, key)))
      json_object_set(it, "source", json_object_get(b->input_desc, key));
    else if (json_is_string(json_object_get(src, "summary")))
      json_object_set(it, "source", json_object_get(src, "summary"));
    else if (kind && strcmp(kind, "symlink") == 0)
      json_object_set_new(
          it, "source",
          json_sprintf("symlink to %s", json_string_value(json_object_get(src, "target"))));
    else if (kind && strcmp(kind, "content") == 0)
      json_object_set_new(it, "source", json_string("inline content"));
    else if (n && n->type == ROOTFS_NODE_FILE && n->src)
      json_object_set_new(it, "source", json_sprintf("host %s", n->src));
    else if (n && n->type == ROOTFS_NODE_LINK)
      json_object_set_new(it, "source", json_sprintf("symlink to %s", n->target));
    else
      json_object_set_new(it, "source", json_string("directory"));
    json_object_set_new(out, key, it);
  }
  json_decref(hashes);
  return out;
}

/* A build thread that cannot go back to agtd's own identity must not run anything else
 * (libuv reuses it): stop agtd rather than write the store, or serve the next build, as a
 * client. */
static void reader_leave_or_die(const struct rootfs_reader *rd)
{
  agt_error_t e = NULL;

  if (rootfs_reader_leave(rd, &e) < 0) {
    fprintf(stderr, "agtd: fatal: %s\n", e->msg);
    abort();
  }
}

/* ---- the store on disk ---- */

static int rm_rf_at(int dfd, const char *name, int depth)
{
  cleanup_dir DIR *d = NULL;
  struct dirent *de;
  int fd;

  if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -1;
  if (depth > 256) {
    errno = ELOOP;
    return -1;
  }
  fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  if (geteuid() != 0)
    fchmod(fd, 0700); /* a 0555 directory of ours would stop an unprivileged delete */
  d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return -1;
  }
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (rm_rf_at(dirfd(d), de->d_name, depth + 1) < 0)
      return -1;
  }
  if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return -1;
  return 0;
}

static int store_open(const char *store, int create, agt_error_t *err)
{
  int fd;

  if (store == NULL || *store == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "the rootfs store path is empty");
  if (create) {
    cleanup_free char *p = xstrdup(store);
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
      if (s)
        *s = '\0';
      if (mkdir(p, 0755) < 0 && errno != EEXIST)
        return agt_error_make(err, errno, "create the rootfs store '%s'", p);
      if (s == NULL)
        break;
      *s = '/';
    }
  }
  fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return agt_error_make(err, errno, "open the rootfs store '%s'", store);
  return fd;
}

static int store_lock(int store_fd, const char *store, agt_error_t *err)
{
  int fd = openat(store_fd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

  if (fd < 0)
    return agt_error_make(err, errno, "open '%s/.lock'", store);
  while (flock(fd, LOCK_EX) < 0) {
    if (errno != EINTR) {
      int e = errno;
      close(fd);
      return agt_error_make(err, e, "lock '%s/.lock'", store);
    }
  }
  return fd;
}

/* Remove build and removal directories that nobody holds any more (a crashed build). */
static void clean_stale(int store_fd)
{
  cleanup_dir DIR *d = NULL;
  struct dirent *de;
  int fd = fcntl(store_fd, F_DUPFD_CLOEXEC, 3);

  if (fd < 0 || (d = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return;
  }
  while ((de = readdir(d)) != NULL) {
    cleanup_close int dfd = -1;
    if (strncmp(de->d_name, ".build-", 7) != 0 && strncmp(de->d_name, ".rm-", 4) != 0)
      continue;
    dfd = openat(store_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || flock(dfd, LOCK_EX | LOCK_NB) < 0)
      continue;
    rm_rf_at(store_fd, de->d_name, 0);
  }
}

static json_t *read_info(int store_fd, const char *store, const char *id)
{
  cleanup_free char *rel = xasprintf("%s/info.json", id);
  cleanup_close int fd = openat(store_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_free char *text = NULL;
  size_t len = 0, cap = 0;
  json_error_t je;
  json_t *info;
  ssize_t n;

  if (fd < 0)
    return NULL;
  /* Read it whole first: json_loadfd reads one byte per system call. */
  do {
    if (len + 4096 > cap) {
      cap = cap ? cap * 2 : 8192;
      if (cap > (1u << 20))
        return NULL;
      text = xrealloc(text, cap);
    }
    n = read(fd, text + len, cap - len);
    if (n < 0 && errno != EINTR)
      return NULL;
    if (n > 0)
      len += (size_t)n;
  } while (n != 0);
  info = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (info == NULL || !json_is_object(info)) {
    json_decref(info);
    return NULL;
  }
  json_object_set_new(info, "id", json_string(id));
  json_object_set_new(info, "path", json_sprintf("%s/%s/root", store, id));
  return info;
}

static int write_json_at(int dfd, const char *name, json_t *j, const char *what, agt_error_t *err)
{
  cleanup_free char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
  cleanup_close int fd = -1;
  size_t len, done = 0;

  if (text == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "encode %s", what);
  len = strlen(text);
  fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return agt_error_make(err, errno, "create %s", what);
  while (done < len) {
    ssize_t w = write(fd, text + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return agt_error_make(err, errno, "write %s", what);
    done += (size_t)w;
  }
  if (write(fd, "\n", 1) != 1 || fchmod(fd, 0644) < 0 || fsync(fd) < 0)
    return agt_error_make(err, errno, "write %s", what);
  return 0;
}

static json_int_t info_int(json_t *info, const char *key)
{
  return json_integer_value(json_object_get(info, key));
}

/* When a build last produced this tree, in ns (seconds for info.json files without it). */
static json_int_t info_time(json_t *info)
{
  json_int_t ns = info_int(info, "updated_ns");
  json_int_t u = info_int(info, "updated");
  if (ns)
    return ns;
  return (u ? u : info_int(info, "created")) * 1000000000;
}

static json_int_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int info_newer(json_t *a, json_t *b)
{
  if (info_time(a) != info_time(b))
    return info_time(a) > info_time(b);
  if (info_int(a, "created") != info_int(b, "created"))
    return info_int(a, "created") > info_int(b, "created");
  return strcmp(json_string_value(json_object_get(a, "id")),
                json_string_value(json_object_get(b, "id"))) < 0;
}

static int info_has_name(json_t *info, const char *name)
{
  json_t *names = json_object_get(info, "names");
  const char *n = json_string_value(json_object_get(info, "name"));

  if (n && strcmp(n, name) == 0)
    return 1;
  for (size_t i = 0; i < json_array_size(names); i++) {
    const char *v = json_string_value(json_array_get(names, i));
    if (v && strcmp(v, name) == 0)
      return 1;
  }
  return 0;
}

/* The same tree again: keep the existing build.  Its info.json now describes this build
 * (sources, manifest, time) and remembers every name it was built under; "created" stays. */
static json_t *reuse_existing(int store_fd, const char *store, const char *id, json_t *fresh,
                              agt_error_t *err)
{
  static const char *const take[] = {"sources",         "inputs",      "warnings",
                                     "ld_library_path", "manifest",    "updated",
                                     "updated_ns",      "description", NULL};
  json_t *info = read_info(store_fd, store, id);
  json_t *names;
  const char *name = json_string_value(json_object_get(fresh, "name"));
  cleanup_free char *tmp = xasprintf("%s/info.json.tmp", id);
  cleanup_free char *final = xasprintf("%s/info.json", id);

  if (info == NULL)
    return agt_error_kind(err, AGT_E_STATE, "'%s/%s' exists but its info.json is unreadable", store,
                          id),
           NULL;
  names = json_object_get(info, "names");
  if (!json_is_array(names)) {
    names = json_array();
    if (json_is_string(json_object_get(info, "name")))
      json_array_append(names, json_object_get(info, "name"));
    json_object_set_new(info, "names", names);
  }
  if (name && !info_has_name(info, name))
    json_array_append_new(names, json_string(name));
  for (const char *const *k = take; *k; k++) {
    json_t *v = json_object_get(fresh, *k);
    if (v)
      json_object_set(info, *k, v);
    else
      json_object_del(info, *k);
  }
  json_object_del(info, "path");
  if (write_json_at(store_fd, tmp, info, "info.json", err) < 0 ||
      (renameat(store_fd, tmp, store_fd, final) < 0 &&
       agt_error_make(err, errno, "rename '%s/%s'", store, tmp) < 0)) {
    json_decref(info);
    return NULL;
  }
  json_object_set_new(info, "path", json_sprintf("%s/%s/root", store, id));
  return info;
}

int agt_rootfs_build(const char *store_dir, const char *manifest_path,
                     const struct agt_rootfs_build_opts *opts, json_t **info, agt_error_t *err)
{
  struct rootfs_manifest *m = NULL;
  struct build b = {.dir_fd = -1};
  struct utsname un;
  const char *arch;
  cleanup_close int store_fd = -1, lock_fd = -1, root_fd = -1;
  cleanup_free char *tmpl = NULL, *build_name = NULL, *mpath = NULL;
  struct rootfs_tree_stats st;
  char id[65];
  json_t *out = NULL;
  json_int_t now = (json_int_t)time(NULL);
  int ret = -1, r;

  *info = NULL;
  if (opts && opts->arch) {
    arch = opts->arch;
  } else {
    if (uname(&un) < 0)
      return agt_error_make(err, errno, "uname");
    arch = un.machine;
  }
  b.ai = find_arch(arch);
  if (b.ai == NULL)
    return agt_error_kind(err, AGT_E_INVALID, "unsupported architecture '%s'", arch);
  b.allow_download = opts ? opts->allow_download : 0;
  if (rootfs_reader_init(&b.rd, opts ? opts->reader : NULL, err) < 0)
    return -1;

  /* the manifest, as the client (or its text, from the request) */
  if (rootfs_reader_enter(&b.rd, err) < 0) {
    reader_leave_or_die(&b.rd);
    return -1;
  }
  m = opts && opts->content
          ? rootfs_manifest_load_string(manifest_path, opts->content, opts->content_len, err)
          : rootfs_manifest_load(manifest_path, err);
  if (m && !(opts && opts->content))
    mpath = realpath(manifest_path, NULL);
  reader_leave_or_die(&b.rd);
  if (m == NULL)
    return -1;
  b.m = m;
  b.t = rootfs_tree_new(m->merged_usr, b.ai->bits == 64);
  b.sources = json_object();
  b.warnings = json_array();
  b.libpath = json_array();
  b.input_desc = json_pack("{s:s}", "parent directory", "directories made as parents");
  search_init(&b);

  /* claim a build directory */
  store_fd = store_open(store_dir, 1, err);
  if (store_fd < 0)
    goto out;
  lock_fd = store_lock(store_fd, store_dir, err);
  if (lock_fd < 0)
    goto out;
  clean_stale(store_fd);
  tmpl = xasprintf("%s/.build-XXXXXX", store_dir);
  if (mkdtemp(tmpl) == NULL) {
    agt_error_make(err, errno, "create a build directory in '%s'", store_dir);
    goto out;
  }
  b.dir_path = xstrdup(tmpl);
  build_name = xstrdup(base_of(tmpl));
  b.dir_fd = openat(store_fd, build_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (b.dir_fd < 0 || flock(b.dir_fd, LOCK_EX | LOCK_NB) < 0) {
    agt_error_make(err, errno, "open '%s'", tmpl);
    goto out;
  }
  close(lock_fd);
  lock_fd = -1;

  /* plan (reading as the client), then write (as agtd; the tree reads its sources as the
   * client again) */
  r = rootfs_reader_enter(&b.rd, err);
  if (r == 0)
    r = plan(&b, err);
  reader_leave_or_die(&b.rd);
  if (r < 0)
    goto out;
  rootfs_tree_set_reader(b.t, &b.rd);
  if (opts && opts->dry_run) {
    if (rootfs_tree_write(b.t, -1, &st, id, err) < 0) {
      agt_error_wrap(err, "read the inputs of '%s'", manifest_path);
      goto out;
    }
    out = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "id", id, "name", m->name, "manifest",
                    mpath ? mpath : manifest_path, "arch", b.ai->arch, "bytes",
                    (json_int_t)st.bytes, "files", (json_int_t)st.files);
    json_object_set(out, "sources", b.sources);
    json_object_set_new(out, "inputs", inputs_of(&b));
    json_object_set(out, "warnings", b.warnings);
    rm_rf_at(store_fd, build_name, 0);
    *info = steal_pointer(&out);
    ret = 0;
    goto out;
  }
  if (mkdirat(b.dir_fd, "root", 0700) < 0 ||
      (root_fd = openat(b.dir_fd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
      (geteuid() == 0 && fchown(root_fd, 0, 0) < 0) || fchmod(root_fd, 0755) < 0) {
    agt_error_make(err, errno, "create '%s/root'", tmpl);
    goto out;
  }
  if (rootfs_tree_write(b.t, root_fd, &st, id, err) < 0) {
    agt_error_wrap(err, "write the tree of '%s'", manifest_path);
    goto out;
  }
  for (size_t i = 0; i < b.n_dl; i++) /* downloaded files, npm's directories */
    rm_rf_at(b.dir_fd, b.dl_names[i], 0);

  out = json_object();
  json_object_set_new(out, "id", json_string(id));
  json_object_set_new(out, "name", json_string(m->name));
  json_object_set_new(out, "names", json_pack("[s]", m->name));
  if (m->description)
    json_object_set_new(out, "description", json_string(m->description));
  json_object_set_new(out, "manifest", json_string(mpath ? mpath : manifest_path));
  json_object_set_new(out, "arch", json_string(b.ai->arch));
  json_object_set_new(out, "created", json_integer(now));
  json_object_set_new(out, "updated", json_integer(now));
  json_object_set_new(out, "bytes", json_integer((json_int_t)st.bytes));
  json_object_set_new(out, "files", json_integer((json_int_t)st.files));
  json_object_set_new(out, "dirs", json_integer((json_int_t)st.dirs));
  json_object_set_new(out, "symlinks", json_integer((json_int_t)st.links));
  json_object_set(out, "sources", b.sources);
  json_object_set_new(out, "inputs", inputs_of(&b));
  json_object_set(out, "warnings", b.warnings);
  if (json_array_size(b.libpath))
    json_object_set(out, "ld_library_path", b.libpath);
  /* the tree must be on disk before its name says it is complete */
  if (syncfs(b.dir_fd) < 0 || fchmod(b.dir_fd, 0755) < 0) {
    agt_error_make(err, errno, "sync '%s'", tmpl);
    goto out;
  }

  /* rename into place, or keep the one that is there */
  lock_fd = store_lock(store_fd, store_dir, err);
  if (lock_fd < 0)
    goto out;
  json_object_set_new(out, "updated_ns", json_integer(now_ns()));
  if (write_json_at(b.dir_fd, "info.json", out, "info.json", err) < 0) /* fsynced */
    goto out;
  r = renameat2(store_fd, build_name, store_fd, id, RENAME_NOREPLACE);
  if (r < 0 && (errno == EINVAL || errno == ENOSYS))
    r = renameat(store_fd, build_name, store_fd, id); /* a non-empty target is never replaced */
  if (r == 0) {
    json_object_set_new(out, "path", json_sprintf("%s/%s/root", store_dir, id));
    *info = steal_pointer(&out);
    ret = 0;
  } else if (errno == EEXIST || errno == ENOTEMPTY) {
    json_t *have = reuse_existing(store_fd, store_dir, id, out, err);
    close(lock_fd);
    lock_fd = -1;
    if (have) {
      json_object_set_new(have, "reused", json_true());
      *info = have;
      ret = 0;
    }
    rm_rf_at(store_fd, build_name, 0);
  } else {
    agt_error_make(err, errno, "rename '%s' to '%s/%s'", tmpl, store_dir, id);
  }

out:
  if (ret < 0 && build_name && store_fd >= 0)
    rm_rf_at(store_fd, build_name, 0);
  json_decref(out);
  build_release(&b);
  rootfs_manifest_free(m);
  return ret;
}

/* All builds, unsorted. */
static json_t *scan(const char *store_dir, int store_fd)
{
  cleanup_dir DIR *d = NULL;
  struct dirent *de;
  json_t *all = json_array();
  int fd = fcntl(store_fd, F_DUPFD_CLOEXEC, 3);

  if (fd < 0 || (d = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return all;
  }
  while ((de = readdir(d)) != NULL) {
    json_t *info;
    if (!is_hex(de->d_name, 64, 64))
      continue;
    info = read_info(store_fd, store_dir, de->d_name);
    if (info == NULL) {
      struct stat st;
      if (fstatat(store_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        continue; /* removed meanwhile */
      info = json_pack("{s:s, s:s}", "id", de->d_name, "error", "info.json is missing or invalid");
      json_object_set_new(info, "path", json_sprintf("%s/%s/root", store_dir, de->d_name));
    }
    json_array_append_new(all, info);
  }
  return all;
}

static int cmp_newest(const void *a, const void *b)
{
  json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  return info_newer(x, y) ? -1 : info_newer(y, x) ? 1 : 0;
}

int agt_rootfs_list(const char *store_dir, json_t **list, agt_error_t *err)
{
  cleanup_close int store_fd = -1;
  json_t *all, *sorted;
  json_t **v;
  size_t n, i;

  *list = NULL;
  store_fd = store_open(store_dir, 0, err);
  if (store_fd < 0) {
    if ((*err)->kind != AGT_E_NOTFOUND)
      return -1;
    agt_error_release(err); /* no store yet: no builds */
    *list = json_array();
    return 0;
  }
  all = scan(store_dir, store_fd);
  n = json_array_size(all);
  v = xmalloc((n ? n : 1) * sizeof *v);
  for (i = 0; i < n; i++)
    v[i] = json_array_get(all, i);
  qsort(v, n, sizeof *v, cmp_newest);
  sorted = json_array();
  for (i = 0; i < n; i++)
    json_array_append(sorted, v[i]);
  free(v);
  json_decref(all);
  *list = sorted;
  return 0;
}

int agt_rootfs_resolve(const char *store_dir, const char *ref, json_t **info, agt_error_t *err)
{
  json_t *list = NULL;
  int r;

  *info = NULL;
  if (agt_rootfs_list(store_dir, &list, err) < 0)
    return -1;
  r = agt_rootfs_resolve_in(list, store_dir, ref, info, err);
  json_decref(list);
  return r;
}

int agt_rootfs_resolve_in(json_t *list, const char *store_dir, const char *ref, json_t **info,
                          agt_error_t *err)
{
  json_t *it, *best = NULL;
  size_t i, nprefix = 0;
  cleanup_free char *ids = xstrdup("");

  *info = NULL;
  if (ref == NULL || *ref == '\0')
    return agt_error_kind(err, AGT_E_INVALID, "empty rootfs reference");
  if (strlen(ref) > 64 || strchr(ref, '/'))
    return agt_error_kind(err, AGT_E_INVALID, "'%.64s' is not a rootfs id or name", ref);

  if (is_hex(ref, 6, 64)) {
    json_array_foreach(list, i, it)
    {
      const char *id = json_string_value(json_object_get(it, "id"));
      if (id && strncmp(id, ref, strlen(ref)) == 0) {
        char *n = xasprintf("%s%s%.12s", ids, *ids ? ", " : "", id);
        free(ids);
        ids = n;
        if (nprefix++ == 0)
          best = it;
      }
    }
    if (nprefix > 1)
      return agt_error_kind(err, AGT_E_INVALID, "rootfs id prefix '%s' is ambiguous: %s", ref, ids);
  }
  if (best == NULL) {
    /* newest build of that name: the list is newest first */
    for (i = 0; i < json_array_size(list) && best == NULL; i++)
      if (info_has_name(json_array_get(list, i), ref))
        best = json_array_get(list, i);
  }
  if (best == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND, "no rootfs '%s' in '%s'", ref, store_dir);
  *info = json_incref(best);
  return 0;
}

int agt_rootfs_remove(const char *store_dir, const char *id, agt_error_t *err)
{
  cleanup_close int store_fd = -1, lock_fd = -1, dfd = -1;
  cleanup_free char *away = NULL;
  struct stat a, b2;

  if (id == NULL || !is_hex(id, 64, 64))
    return agt_error_kind(err, AGT_E_INVALID, "'%.80s' is not a full rootfs id (64 hex digits)",
                          id ? id : "");
  store_fd = store_open(store_dir, 0, err);
  if (store_fd < 0)
    return -1;
  /* the build's lock first, then the store's: the same order as agt_rootfs_build */
  dfd = openat(store_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT)
      return agt_error_kind(err, AGT_E_NOTFOUND, "no rootfs '%s' in '%s'", id, store_dir);
    return agt_error_make(err, errno, "open '%s/%s'", store_dir, id);
  }
  while (flock(dfd, LOCK_EX) < 0)
    if (errno != EINTR)
      return agt_error_make(err, errno, "lock '%s/%s'", store_dir, id);
  lock_fd = store_lock(store_fd, store_dir, err);
  if (lock_fd < 0)
    return -1;
  if (fstat(dfd, &a) < 0 || fstatat(store_fd, id, &b2, AT_SYMLINK_NOFOLLOW) < 0 ||
      a.st_ino != b2.st_ino || a.st_dev != b2.st_dev)
    return agt_error_kind(err, AGT_E_NOTFOUND, "no rootfs '%s' in '%s'", id, store_dir);
  for (unsigned i = 0;; i++) {
    free(away);
    away = xasprintf(".rm-%.16s-%d-%u", id, (int)getpid(), i);
    if (renameat2(store_fd, id, store_fd, away, RENAME_NOREPLACE) == 0)
      break;
    if (errno == EINVAL || errno == ENOSYS) {
      if (renameat(store_fd, id, store_fd, away) == 0)
        break;
    }
    if (errno != EEXIST || i > 1000)
      return agt_error_make(err, errno, "remove '%s/%s'", store_dir, id);
  }
  close(lock_fd);
  lock_fd = -1;
  if (rm_rf_at(store_fd, away, 0) < 0)
    return agt_error_make(err, errno, "delete '%s/%s'", store_dir, away);
  return 0;
}
