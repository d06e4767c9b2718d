/* Agent homes (home.h). */
#include "home.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "fsutil.h"
#include "names.h"
#include "xalloc.h"

#define HOME_DEPTH_MAX 64

char *agt_home_root(struct agtd_s *d)
{
  if (d->disk->enabled)
    return xasprintf("%s/.homes", d->disk->dir);
  return xasprintf("%s/homes", d->cfg.state_dir);
}

int agt_home_path(struct agtd_s *d, const char *user, const char *agent, char **path,
                  agt_error_t *err)
{
  cleanup_free char *root = NULL;

  if (agt_name_check("home user", user, err) < 0 || agt_name_check("agent", agent, err) < 0)
    return -1;
  root = agt_home_root(d);
  *path = xasprintf("%s/%s/%s", root, user, agent);
  return 0;
}

int agt_home_ensure(struct agt_disk *dk, const char *path, uid_t uid, gid_t gid, uid_t *owner,
                    gid_t *group, agt_error_t *err)
{
  cleanup_free char *parent = xstrdup(path);
  cleanup_close int fd = -1;
  char *slash = strrchr(parent, '/');
  struct stat st;

  *slash = '\0';
  /* the homes and each user's directory: root's, not the jails' */
  if (agt_mkdir_p(parent, 0711, err) < 0)
    return agt_error_wrap(err, "home");
  if (lstat(path, &st) < 0) {
    if (errno != ENOENT)
      return agt_error_make(err, errno, "stat home '%s'", path);
    if (agt_disk_home_make(dk, path, err) < 0)
      return agt_error_wrap(err, "home");
    if (chown(path, uid, gid) < 0)
      return agt_error_make(err, errno, "chown home '%s'", path);
  }
  fd = agt_open_nofollow(path, O_PATH | O_DIRECTORY, err);
  if (fd < 0)
    return agt_error_wrap(err, "home");
  if (fstat(fd, &st) < 0)
    return agt_error_make(err, errno, "stat home '%s'", path);
  if (st.st_uid == 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "home '%s' is owned by root, not by a jail user: agtd does not hand "
                          "it to a jail (agt agents home --reset empties it)",
                          path);
  *owner = st.st_uid;
  *group = st.st_gid;
  return 0;
}

/* Walk the tree under dfd (a directory of the home), calling fn on each entry; no symlink is
 * followed and no other file system entered. */
typedef int (*walk_fn)(int dfd, const char *name, const char *rel, const struct stat *st,
                       void *ctx);

static int walk(int dfd, dev_t dev, const char *rel, int depth, walk_fn fn, void *ctx)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int fd = dup(dfd);

  if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  while ((de = readdir(dir)) != NULL) {
    struct stat st;
    cleanup_free char *sub = NULL;
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    sub = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
    if (S_ISDIR(st.st_mode) && st.st_dev == dev && depth < HOME_DEPTH_MAX) {
      cleanup_close int sfd =
          openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sfd >= 0 && walk(sfd, dev, sub, depth + 1, fn, ctx) < 0)
        return -1;
    }
    if (fn(dfd, de->d_name, sub, &st, ctx) < 0)
      return -1;
  }
  return 0;
}

struct chown_ctx {
  uid_t uid;
  gid_t gid;
};

static int chown_one(int dfd, const char *name, const char *rel, const struct stat *st, void *ctx)
{
  struct chown_ctx *c = ctx;

  (void)rel;
  if (st->st_uid == c->uid && st->st_gid == c->gid)
    return 0;
  if (fchownat(dfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  /* chown drops set-id bits; a regular file keeps its other modes */
  return 0;
}

int agt_home_chown(const char *path, uid_t uid, gid_t gid, agt_error_t *err)
{
  struct chown_ctx c = {uid, gid};
  cleanup_close int fd = agt_open_nofollow(path, O_RDONLY | O_DIRECTORY, err);
  struct stat st;

  if (fd < 0)
    return agt_error_wrap(err, "home");
  if (fstat(fd, &st) < 0)
    return agt_error_make(err, errno, "stat home '%s'", path);
  if (walk(fd, st.st_dev, "", 0, chown_one, &c) < 0 || fchown(fd, uid, gid) < 0)
    return agt_error_make(err, errno, "give home '%s' to uid %u", path, (unsigned)uid);
  return 0;
}

struct describe_ctx {
  uint64_t bytes, files;
  size_t max;
  json_t *entries;
};

static int describe_one(int dfd, const char *name, const char *rel, const struct stat *st,
                        void *ctx)
{
  struct describe_ctx *c = ctx;

  (void)dfd;
  (void)name;
  c->bytes += (uint64_t)st->st_blocks * 512;
  if (!S_ISDIR(st->st_mode))
    c->files++;
  if (json_array_size(c->entries) < c->max) {
    cleanup_free char *e = S_ISDIR(st->st_mode) ? xasprintf("%s/", rel) : xstrdup(rel);
    json_array_append_new(c->entries, json_string(e));
  }
  return 0;
}

static int cmp_json_str(const void *a, const void *b)
{
  return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

json_t *agt_home_describe(const char *path, size_t max)
{
  struct describe_ctx c = {0, 0, max, json_array()};
  agt_error_t e = NULL;
  int fd = agt_open_nofollow(path, O_RDONLY | O_DIRECTORY, &e);
  json_t *out, *sorted = json_array();
  struct stat st;
  size_t n;

  agt_error_release(&e);
  if (fd < 0) {
    json_decref(c.entries);
    json_decref(sorted);
    return json_pack("{s:s, s:b, s:I, s:I, s:[]}", "path", path, "exists", 0, "bytes",
                     (json_int_t)0, "files", (json_int_t)0, "entries");
  }
  if (fstat(fd, &st) == 0) {
    c.bytes = (uint64_t)st.st_blocks * 512;
    walk(fd, st.st_dev, "", 0, describe_one, &c);
  }
  close(fd);
  /* readdir's order is the file system's: sort, so the listing reads the same every time */
  n = json_array_size(c.entries);
  {
    json_t **v = xzalloc((n + 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
      v[i] = json_array_get(c.entries, i);
    qsort(v, n, sizeof *v, cmp_json_str);
    for (size_t i = 0; i < n; i++)
      json_array_append(sorted, v[i]);
    free(v);
  }
  json_decref(c.entries);
  out = json_pack("{s:s, s:b, s:I, s:I, s:o, s:i, s:i}", "path", path, "exists", 1, "bytes",
                  (json_int_t)c.bytes, "files", (json_int_t)c.files, "entries", sorted, "uid",
                  (int)st.st_uid, "gid", (int)st.st_gid);
  return out;
}

int agt_home_empty(const char *path, agt_error_t *err)
{
  cleanup_close int fd = agt_open_nofollow(path, O_RDONLY | O_DIRECTORY, err);
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;

  if (fd < 0) {
    if (*err && (*err)->status == ENOENT) {
      agt_error_release(err);
      return 0;
    }
    return agt_error_wrap(err, "home");
  }
  dir = fdopendir(fd);
  if (dir == NULL)
    return agt_error_make(err, errno, "read home '%s'", path);
  fd = -1; /* the DIR owns it */
  while ((de = readdir(dir)) != NULL) {
    cleanup_free char *sub = NULL;
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    sub = xasprintf("%s/%s", path, de->d_name);
    if (agt_rm_rf(sub, err) < 0)
      return agt_error_wrap(err, "empty home '%s'", path);
  }
  return 0;
}
