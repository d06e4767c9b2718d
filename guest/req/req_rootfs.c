/* rootfs.* requests.  Builds copy hundreds of megabytes, so they run in libuv's threadpool
 * and answer when done; the loop keeps serving meanwhile. */
#include "req_rootfs.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail.h"
#include "jail_warm.h"
#include "log.h"
#include "names.h"
#include "rootfs/rootfs.h"
#include "rootfs_cache.h"
#include "server.h"
#include "xalloc.h"

#define MAX_PENDING_BUILDS 4

/* Whom a build reads host files as: the client that asked (its uid, its gid from
 * SO_PEERCRED and the groups its passwd entry's name is in), so that a member of agtd's
 * socket group cannot have root-only files copied into a rootfs.  Root reads as root:
 * returns 0 and leaves r->uid at 0 with the caller passing no reader. */
struct client_reader {
  struct agt_rootfs_reader r;
  gid_t groups[AGT_ROOTFS_MAX_GROUPS];
  int use;
};

static int client_reader(agt_req_t *req, struct client_reader *cr, agt_error_t *err)
{
  agt_client_t *c = req->client;
  struct passwd pw, *pwp = NULL;
  char buf[4096];
  int n = AGT_ROOTFS_MAX_GROUPS;

  memset(cr, 0, sizeof *cr);
  if (c == NULL || c->uid == (uid_t)-1 || c->gid == (gid_t)-1)
    return agt_error_kind(err, AGT_E_STATE,
                          "the client's uid is unknown (SO_PEERCRED): a build reads host files as "
                          "the user who asks");
  if (c->uid == 0)
    return 0;
  cr->use = 1;
  cr->r.uid = c->uid;
  cr->r.gid = c->gid;
  cr->r.groups = cr->groups;
  if (getpwuid_r(c->uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp != NULL) {
    if (getgrouplist(pw.pw_name, c->gid, cr->groups, &n) < 0)
      return agt_error_kind(err, AGT_E_LIMIT, "uid %u is in more than %d groups", (unsigned)c->uid,
                            AGT_ROOTFS_MAX_GROUPS);
    cr->r.ngroups = (size_t)n;
  } else {
    cr->groups[0] = c->gid; /* no passwd entry: its own group only */
    cr->r.ngroups = 1;
  }
  return 0;
}

struct build_job {
  uv_work_t work;
  agtd_t *d;
  char *store;
  char *manifest;
  char *content; /* the manifest's text, when the request carried it */
  struct agt_rootfs_build_opts opts;
  struct client_reader reader;
  json_t *info;
  agt_error_t err;
  agt_pending_t *waiters;
};

static void build_work(uv_work_t *w)
{
  struct build_job *b = w->data;

  agt_rootfs_build(b->store, b->manifest, &b->opts, &b->info, &b->err);
}

static void build_done(uv_work_t *w, int status)
{
  struct build_job *b = w->data;

  (void)status;
  b->d->pending_builds--;
  agtd_rootfs_changed(b->d);
  if (b->err) {
    agt_log_warning("rootfs build of '%s' failed: %s", b->manifest, b->err->msg);
    agt_pending_answer(&b->waiters, NULL, b->err);
  } else {
    agt_log_info("rootfs '%s' built from '%s'", json_string_value(json_object_get(b->info, "id")),
                 b->manifest);
    agt_pending_answer(&b->waiters, b->info, NULL);
  }
  agt_error_release(&b->err);
  json_decref(b->info);
  free(b->store);
  free(b->manifest);
  free(b->content);
  free(b);
}

int agt_req_rootfs_build(agt_req_t *req, json_t **result, agt_error_t *err)
{
  const char *manifest, *content = NULL;
  int download = 1;
  struct build_job *b;

  (void)result;
  if (agt_param_str(req->params, "manifest", 1, &manifest, err) < 0 ||
      agt_param_str(req->params, "content", 0, &content, err) < 0 ||
      agt_param_bool(req->params, "allow_download", &download, err) < 0)
    return -1;
  if (content) { /* the manifest itself; "manifest" names it in messages */
    if (*manifest == '\0' || strlen(manifest) > 256 || strchr(manifest, '\n'))
      return agt_error_kind(err, AGT_E_INVALID,
                            "'manifest' must name the manifest in 1-256 characters on one line");
  } else {
    if (agt_abspath_check("manifest", manifest, err) < 0)
      return -1;
    if (access(manifest, R_OK) < 0)
      return agt_error_make(err, errno, "manifest '%s'", manifest);
  }
  if (req->d->pending_builds >= MAX_PENDING_BUILDS)
    return agt_error_kind(err, AGT_E_LIMIT, "%d rootfs builds are running already",
                          MAX_PENDING_BUILDS);
  b = xzalloc(sizeof *b);
  if (client_reader(req, &b->reader, err) < 0) {
    free(b);
    return -1;
  }
  b->opts.reader = b->reader.use ? &b->reader.r : NULL;
  b->d = req->d;
  b->store = xstrdup(req->d->rootfs_dir);
  b->manifest = xstrdup(manifest);
  b->opts.allow_download = download;
  if (content) {
    b->content = xstrdup(content);
    b->opts.content = b->content;
    b->opts.content_len = strlen(content);
  }
  b->work.data = b;
  agt_pending_add(&b->waiters, req);
  req->d->pending_builds++;
  uv_queue_work(req->d->loop, &b->work, build_work, build_done);
  return 1;
}

/* rootfs.update: each name in turn, in the threadpool like a build. */
struct update_job {
  uv_work_t work;
  agtd_t *d;
  char *store;
  char **names; /* NULL-terminated */
  int every;    /* no name was given: each name in the store */
  struct agt_rootfs_build_opts opts;
  struct client_reader reader;
  json_t *updates;
  agt_pending_t *waiters;
};

static void update_work(uv_work_t *w)
{
  struct update_job *u = w->data;

  for (char **n = u->names; *n; n++) {
    json_t *res = NULL;
    agt_error_t e = NULL;
    if (agt_rootfs_update(u->store, *n, &u->opts, &res, &e) < 0) {
      /* a name not asked for, with nothing to rebuild from: noted, not a failure */
      res = json_pack("{s:s, s:s}", "name", *n,
                      u->every && e->kind == AGT_E_NOTFOUND ? "skipped" : "error", e->msg);
      agt_error_release(&e);
    }
    json_array_append_new(u->updates, res);
  }
}

static void update_done(uv_work_t *w, int status)
{
  struct update_job *u = w->data;
  json_t *res = json_pack("{s:O}", "updates", u->updates), *it;
  size_t i;

  (void)status;
  u->d->pending_builds--;
  agtd_rootfs_changed(u->d);
  json_array_foreach(u->updates, i, it)
  {
    const char *name = json_string_value(json_object_get(it, "name"));
    if (json_object_get(it, "error"))
      agt_log_warning("rootfs update of '%s' failed: %s", name,
                      json_string_value(json_object_get(it, "error")));
    else if (json_is_true(json_object_get(it, "changed")))
      agt_log_info("rootfs '%s' updated: %.12s -> %.12s", name,
                   json_string_value(json_object_get(it, "old_id")),
                   json_string_value(json_object_get(it, "id")));
  }
  agt_pending_answer(&u->waiters, res, NULL);
  json_decref(res);
  json_decref(u->updates);
  for (char **n = u->names; *n; n++)
    free(*n);
  free(u->names);
  free(u->store);
  free(u);
}

int agt_req_rootfs_update(agt_req_t *req, json_t **result, agt_error_t *err)
{
  const char *name = NULL;
  int download = 1;
  struct update_job *u;
  json_t *list = NULL, *info;
  size_t n = 0, i;

  (void)result;
  if (agt_param_str(req->params, "name", 0, &name, err) < 0 ||
      agt_param_bool(req->params, "allow_download", &download, err) < 0)
    return -1;
  if (req->d->pending_builds >= MAX_PENDING_BUILDS)
    return agt_error_kind(err, AGT_E_LIMIT, "%d rootfs builds are running already",
                          MAX_PENDING_BUILDS);
  u = xzalloc(sizeof *u);
  if (client_reader(req, &u->reader, err) < 0) {
    free(u);
    return -1;
  }
  u->opts.reader = u->reader.use ? &u->reader.r : NULL;
  if (name) {
    if (agtd_rootfs_resolve(req->d, name, &info, err) < 0) {
      free(u);
      return -1;
    }
    json_decref(info);
    u->names = xzalloc(2 * sizeof *u->names);
    u->names[n++] = xstrdup(name);
  } else {
    /* every name in the store, each once (the list is newest first) */
    u->every = 1;
    if (agt_rootfs_list(req->d->rootfs_dir, &list, err) < 0) {
      free(u);
      return -1;
    }
    u->names = xzalloc((json_array_size(list) + 1) * sizeof *u->names);
    json_array_foreach(list, i, info)
    {
      const char *nm = json_string_value(json_object_get(info, "name"));
      int seen = 0;
      for (size_t k = 0; nm && k < n; k++)
        seen |= strcmp(u->names[k], nm) == 0;
      if (nm && !seen)
        u->names[n++] = xstrdup(nm);
    }
    json_decref(list);
  }
  u->d = req->d;
  u->store = xstrdup(req->d->rootfs_dir);
  u->opts.allow_download = download;
  u->updates = json_array();
  u->work.data = u;
  agt_pending_add(&u->waiters, req);
  req->d->pending_builds++;
  uv_queue_work(req->d->loop, &u->work, update_work, update_done);
  return 1;
}

int agt_req_rootfs_ls(agt_req_t *req, json_t **result, agt_error_t *err)
{
  json_t *list;
  size_t i;
  json_t *info;

  if (agt_rootfs_list(req->d->rootfs_dir, &list, err) < 0)
    return -1;
  json_array_foreach(list, i, info)
  {
    json_t *users = json_array();
    const char *id = json_string_value(json_object_get(info, "id"));
    for (agt_jail_t *j = req->d->jails; j; j = j->next)
      if (id && agt_jail_uses_rootfs(j, id))
        json_array_append_new(users, json_string(j->rec.name));
    json_object_set_new(info, "jails", users);
  }
  *result = json_pack("{s:o}", "rootfs", list);
  return 0;
}

int agt_req_rootfs_rm(agt_req_t *req, json_t **result, agt_error_t *err)
{
  const char *ref, *id;
  json_t *info;
  char users[512] = "";
  size_t n = 0;

  if (agt_param_str(req->params, "ref", 1, &ref, err) < 0)
    return -1;
  if (agtd_rootfs_resolve(req->d, ref, &info, err) < 0)
    return -1;
  id = json_string_value(json_object_get(info, "id"));
  for (agt_jail_t *j = req->d->jails; j; j = j->next)
    if (agt_jail_uses_rootfs(j, id) && n + strlen(j->rec.name) + 3 < sizeof users) {
      n += (size_t)snprintf(users + n, sizeof users - n, "%s%s", n ? ", " : "", j->rec.name);
    }
  if (n > 0) {
    agt_error_kind(err, AGT_E_BUSY, "rootfs %.12s is used by jails: %s", id, users);
    json_decref(info);
    return -1;
  }
  agt_warm_drain(req->d, id); /* prepared jails on it go first */
  agtd_rootfs_changed(req->d);
  if (agt_rootfs_remove(req->d->rootfs_dir, id, err) < 0) {
    json_decref(info);
    return -1;
  }
  *result = json_pack("{s:s, s:b}", "id", id, "removed", 1);
  json_decref(info);
  return 0;
}
