/* A jail's home, mounts and lockdown (jail_mounts.h). */
#include "jail_mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "jailspec.h"
#include "fsutil.h"
#include "home.h"
#include "names.h"
#include "proto.h"
#include "xalloc.h"

static const char *const home_modes[] = {[AGT_HOME_NONE] = "none",
                                         [AGT_HOME_PERSISTENT] = "persistent",
                                         [AGT_HOME_EPHEMERAL] = "ephemeral"};

/* Where a mount may not go: the jail's own system paths, its workspace and its home.  A
 * mount goes at its own path, and its source lies under a workspace root already; this
 * keeps a root such as /usr or /etc (or one below them) from shadowing the jail's. */
static const char *const reserved[] = {"/proc",  "/sys",   "/dev",  "/work", "/home/agent",
                                       "/etc",   "/bin",   "/sbin", "/usr",  "/lib",
                                       "/lib64", "/lib32", "/run",  NULL};

static int at_or_below(const char *path, const char *top)
{
  size_t n = strlen(top);
  return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int mount_cmp(const void *a, const void *b)
{
  const struct agt_jail_mount *x = a, *y = b;
  size_t lx = strlen(x->path), ly = strlen(y->path);
  /* parents before what lies inside them, so no mount hides another */
  return lx < ly ? -1 : lx > ly ? 1 : strcmp(x->path, y->path);
}

static int parse_mount(json_t *m, size_t i, struct agt_jail_mount *out, agt_error_t *err)
{
  static const char *const known[] = {"path", "writable", NULL};
  cleanup_free char *what = xasprintf("mounts[%zu]", i);
  cleanup_close int fd = -1;
  const char *path = NULL;
  struct stat st;
  int writable = 0;

  if (!json_is_object(m))
    return agt_error_kind(err, AGT_E_INVALID, "'%s' must be an object {path, writable}", what);
  if (agt_param_only(m, known, "mounts[].", err) < 0 ||
      agt_param_str(m, "path", 1, &path, err) < 0 ||
      agt_param_bool(m, "writable", &writable, err) < 0)
    return agt_error_wrap(err, "%s", what);
  if (agt_abspath_check(what, path, err) < 0)
    return -1;
  for (const char *const *r = reserved; *r; r++)
    if (at_or_below(path, *r))
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s '%s' would go over the jail's %s: mount something else", what, path,
                            *r);
  /* no symlink anywhere in it: what is checked is what the jail gets */
  fd = agt_open_nofollow(path, O_PATH, err);
  if (fd < 0)
    return agt_error_wrap(err, "%s", what);
  if (fstat(fd, &st) < 0)
    return agt_error_make(err, errno, "stat %s '%s'", what, path);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is neither a directory nor a file", what,
                          path);
  out->path = xstrdup(path);
  out->writable = writable;
  return 0;
}

static int mounts_parse(json_t *arr, struct agt_jail_binds *j, agt_error_t *err)
{
  size_t n = json_array_size(arr);

  if (arr == NULL || json_is_null(arr))
    return 0;
  if (!json_is_array(arr))
    return agt_error_kind(err, AGT_E_INVALID, "'mounts' must be an array of {path, writable}");
  if (n > AGT_JAIL_MOUNTS_MAX)
    return agt_error_kind(err, AGT_E_LIMIT, "'mounts' has more than %d entries",
                          AGT_JAIL_MOUNTS_MAX);
  j->mounts = xzalloc((n ? n : 1) * sizeof *j->mounts);
  for (size_t i = 0; i < n; i++) {
    if (parse_mount(json_array_get(arr, i), i, &j->mounts[i], err) < 0)
      return -1;
    j->nmounts++;
    for (size_t k = 0; k < i; k++)
      if (strcmp(j->mounts[k].path, j->mounts[i].path) == 0)
        return agt_error_kind(err, AGT_E_INVALID, "'mounts' names '%s' twice", j->mounts[i].path);
  }
  return 0;
}

/* A home file's path: relative to $HOME, clean, of ordinary names. */
static int home_file_path_check(const char *what, const char *path, agt_error_t *err)
{
  const char *c = path;

  if (*path == '\0' || *path == '/' || strlen(path) > 255)
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s '%.64s' must be 1-255 characters, relative to $HOME", what, path);
  for (;;) {
    size_t n = strcspn(c, "/");
    if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s '%.64s' must be clean (no empty, '.' or '..' component)", what,
                            path);
    if (c[n] == '\0')
      break;
    c += n + 1;
  }
  for (c = path; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      return agt_error_kind(err, AGT_E_INVALID, "%s has a control character", what);
  return 0;
}

/* The home files of a request or a record: [{path, content}]. */
static int home_files_parse(json_t *arr, struct agt_jail_binds *j, agt_error_t *err)
{
  static const char *const known[] = {"path", "content", NULL};
  size_t n = json_array_size(arr), total = 0;

  if (arr == NULL || json_is_null(arr))
    return 0;
  if (!json_is_array(arr))
    return agt_error_kind(err, AGT_E_INVALID, "'home_files' must be an array of {path, content}");
  if (n > AGT_HOME_FILES_MAX)
    return agt_error_kind(err, AGT_E_LIMIT, "'home_files' has more than %d entries",
                          AGT_HOME_FILES_MAX);
  j->home_files = xzalloc((n ? n : 1) * sizeof *j->home_files);
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_array_get(arr, i);
    cleanup_free char *what = xasprintf("home_files[%zu]", i);
    const char *path = NULL, *content = NULL;
    struct agt_home_file *h = &j->home_files[j->nhome_files];

    if (!json_is_object(f))
      return agt_error_kind(err, AGT_E_INVALID, "'%s' must be an object {path, content}", what);
    if (agt_param_only(f, known, "home_files[].", err) < 0 ||
        agt_param_str(f, "path", 1, &path, err) < 0 ||
        agt_param_str(f, "content", 1, &content, err) < 0)
      return agt_error_wrap(err, "%s", what);
    if (home_file_path_check(what, path, err) < 0)
      return -1;
    h->len = json_string_length(json_object_get(f, "content"));
    if (h->len > AGT_HOME_FILE_BYTES || (total += h->len) > AGT_HOME_FILES_BYTES)
      return agt_error_kind(err, AGT_E_LIMIT,
                            "%s '%s' is too large (%d bytes a file, %d in all at most)", what, path,
                            AGT_HOME_FILE_BYTES, AGT_HOME_FILES_BYTES);
    for (size_t k = 0; k < j->nhome_files; k++) {
      const char *o = j->home_files[k].path;
      size_t lo = strlen(o), lp = strlen(path);
      if (strcmp(o, path) == 0 || (lo < lp && strncmp(o, path, lo) == 0 && path[lo] == '/') ||
          (lp < lo && strncmp(o, path, lp) == 0 && o[lp] == '/'))
        return agt_error_kind(err, AGT_E_INVALID,
                              "%s '%s' clashes with '%s' (the same file, or "
                              "a file where the other needs a directory)",
                              what, path, o);
    }
    h->path = xstrdup(path);
    h->content = xmalloc(h->len + 1);
    memcpy(h->content, content, h->len + 1);
    j->nhome_files++;
  }
  return 0;
}

void agt_binds_sort(struct agt_jail_mount *m, size_t n)
{
  qsort(m, n, sizeof *m, mount_cmp);
}

int agt_binds_from_json(struct agtd_s *d, json_t *params, const struct agt_run_opts *run,
                        const char *agent, int net_open, struct agt_jail_binds *j, agt_error_t *err)
{
  const char *user = run->user;

  j->lockdown = run->lockdown > 0;
  j->home_mode = j->lockdown ? AGT_HOME_EPHEMERAL : AGT_HOME_NONE;
  if (run->home) /* one of the jail spec's choices, in enum agt_home_mode's order */
    j->home_mode = (enum agt_home_mode)agt_jail_run_choice(AGT_RUN_HOME, run->home);
  if (j->lockdown) {
    /* lockdown: nothing of the user's reaches the jail but the workspace */
    if (j->home_mode != AGT_HOME_EPHEMERAL)
      return agt_error_kind(err, AGT_E_INVALID,
                            "'lockdown' takes an ephemeral home, not '%s': a persistent one "
                            "keeps the user's logins",
                            home_modes[j->home_mode]);
    if (json_array_size(run->mounts))
      return agt_error_kind(err, AGT_E_INVALID, "'lockdown' takes no 'mounts'");
    if (net_open)
      return agt_error_kind(err, AGT_E_INVALID,
                            "'lockdown' takes network mode none or allow, not open");
  }
  if (j->home_mode == AGT_HOME_PERSISTENT) {
    if (user == NULL)
      return agt_error_kind(err, AGT_E_INVALID, "a persistent 'home' needs 'user' (whose it is)");
    if (agt_home_path(d, user, agent, &j->home_path, err) < 0)
      return -1;
    j->home_user = xstrdup(user);
  } else if (user) {
    return agt_error_kind(err, AGT_E_INVALID, "'user' goes with a persistent 'home' only");
  }
  if (json_array_size(json_object_get(params, "home_files")) && j->home_mode != AGT_HOME_EPHEMERAL)
    return agt_error_kind(err, AGT_E_INVALID,
                          "'home_files' go with an ephemeral 'home' only (agtd writes into no "
                          "other)");
  if (home_files_parse(json_object_get(params, "home_files"), j, err) < 0)
    return -1;
  return mounts_parse(run->mounts, j, err);
}

int agt_binds_from_record(json_t *rec, struct agt_jail_binds *j, agt_error_t *err)
{
  const char *mode = json_string_value(json_object_get(rec, "home"));
  json_t *arr = json_object_get(rec, "mounts"), *m;
  size_t i;

  j->lockdown = json_is_true(json_object_get(rec, "lockdown"));
  j->home_mode = AGT_HOME_NONE;
  for (i = 0; mode && i < sizeof home_modes / sizeof home_modes[0]; i++)
    if (strcmp(home_modes[i], mode) == 0)
      j->home_mode = (enum agt_home_mode)i;
  if (j->home_mode == AGT_HOME_PERSISTENT) {
    const char *u = json_string_value(json_object_get(rec, "home_user"));
    const char *p = json_string_value(json_object_get(rec, "home_path"));
    if (u == NULL || p == NULL || agt_abspath_check("home_path", p, err) < 0)
      return agt_error_kind(err, AGT_E_INVALID, "a persistent home without its user or path");
    j->home_user = xstrdup(u);
    j->home_path = xstrdup(p);
  }
  if (j->home_mode == AGT_HOME_EPHEMERAL &&
      home_files_parse(json_object_get(rec, "home_files"), j, err) < 0)
    return -1;
  if (json_array_size(arr) > AGT_JAIL_MOUNTS_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "more than %d mounts", AGT_JAIL_MOUNTS_MAX);
  j->mounts = xzalloc((json_array_size(arr) + 1) * sizeof *j->mounts);
  json_array_foreach(arr, i, m)
  {
    const char *p = json_string_value(json_object_get(m, "path"));
    if (p == NULL || agt_abspath_check("mount", p, err) < 0)
      return agt_error_kind(err, AGT_E_INVALID, "mounts[%zu] has no clean path", i);
    j->mounts[j->nmounts].path = xstrdup(p);
    j->mounts[j->nmounts++].writable = json_is_true(json_object_get(m, "writable"));
  }
  return 0;
}

void agt_binds_to_json(const struct agt_jail_binds *j, json_t *o)
{
  json_t *arr = json_array();

  json_object_set_new(o, "home", json_string(home_modes[j->home_mode]));
  if (j->home_mode == AGT_HOME_PERSISTENT) {
    json_object_set_new(o, "home_user", json_string(j->home_user));
    json_object_set_new(o, "home_path", json_string(j->home_path));
  }
  json_object_set_new(o, "lockdown", json_boolean(j->lockdown));
  for (size_t i = 0; i < j->nmounts; i++)
    json_array_append_new(
        arr, json_pack("{s:s, s:b}", "path", j->mounts[i].path, "writable", j->mounts[i].writable));
  json_object_set_new(o, "mounts", arr);
  if (j->nhome_files) {
    json_t *files = json_array();
    for (size_t i = 0; i < j->nhome_files; i++)
      json_array_append_new(files,
                            json_pack("{s:s, s:s%}", "path", j->home_files[i].path, "content",
                                      j->home_files[i].content, j->home_files[i].len));
    json_object_set_new(o, "home_files", files);
  }
}

void agt_binds_release(struct agt_jail_binds *j)
{
  for (size_t i = 0; i < j->nmounts; i++)
    free(j->mounts[i].path);
  free(j->mounts);
  free(j->home_user);
  free(j->home_path);
  for (size_t i = 0; i < j->nhome_files; i++) {
    free(j->home_files[i].path);
    free(j->home_files[i].content);
  }
  free(j->home_files);
  j->home_files = NULL;
  j->nhome_files = 0;
  j->mounts = NULL;
  j->nmounts = 0;
}
