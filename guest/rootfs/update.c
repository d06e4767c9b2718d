/* agt_rootfs_update: rebuild a rootfs from its manifest when one of its inputs changed.
 *
 * A dry run of the manifest (every source re-resolved, every file read and hashed, nothing
 * written) gives the id a build would have now.  The same id as the newest build of that
 * name: nothing changed, nothing is built.  Another id: the manifest is built (a new,
 * content-addressed build beside the old one, which jails keep using) and the inputs that
 * differ are listed, each with its old and new source and hash. */
#include "rootfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

static json_t *describe(json_t *input)
{
  const char *src = json_string_value(json_object_get(input, "source"));
  const char *sha = json_string_value(json_object_get(input, "sha256"));

  if (input == NULL)
    return json_null();
  return json_sprintf("%s (sha256 %.12s)", src ? src : "?", sha ? sha : "?");
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every input whose hash differs, was added or went away, sorted by name. */
static json_t *changes_of(json_t *old_inputs, json_t *new_inputs)
{
  json_t *out = json_array(), *v;
  const char *key;
  size_t n = 0, cap = json_object_size(old_inputs) + json_object_size(new_inputs) + 1;
  cleanup_free const char **keys = xzalloc(cap * sizeof *keys);

  json_object_foreach(old_inputs, key, v) keys[n++] = key;
  json_object_foreach(new_inputs, key, v) if (json_object_get(old_inputs, key) == NULL) keys[n++] =
      key;
  qsort(keys, n, sizeof *keys, cmp_str);
  for (size_t i = 0; i < n; i++) {
    json_t *o = json_object_get(old_inputs, keys[i]), *w = json_object_get(new_inputs, keys[i]);
    const char *os = json_string_value(json_object_get(o, "sha256"));
    const char *ws = json_string_value(json_object_get(w, "sha256"));
    if (os && ws && strcmp(os, ws) == 0)
      continue;
    json_array_append_new(out, json_pack("{s:s, s:o, s:o}", "input", keys[i], "old", describe(o),
                                         "new", describe(w)));
  }
  return out;
}

int agt_rootfs_update(const char *store_dir, const char *name,
                      const struct agt_rootfs_build_opts *opts, json_t **result, agt_error_t *err)
{
  struct agt_rootfs_build_opts o = {0};
  json_t *old = NULL, *plan = NULL, *built = NULL;
  const char *manifest, *old_id, *new_id, *label;
  int ret = -1;

  *result = NULL;
  if (opts)
    o = *opts;
  if (agt_rootfs_resolve(store_dir, name, &old, err) < 0)
    return -1;
  old_id = json_string_value(json_object_get(old, "id"));
  label = json_string_value(json_object_get(old, "name"));
  label = label ? label : name;
  manifest = json_string_value(json_object_get(old, "manifest"));
  /* Nothing to rebuild from: AGT_E_NOTFOUND, saying what to do (an update of every name
   * skips these, rootfs.h). */
  if (manifest == NULL || manifest[0] != '/') {
    agt_error_kind(err, AGT_E_NOTFOUND,
                   "rootfs '%s' (%.12s) records no manifest path to rebuild from: build it again "
                   "from its manifest (agt rootfs build FILE), or remove it (agt rootfs rm %.12s)",
                   name, old_id, old_id);
    goto out;
  }
  if (access(manifest, R_OK) < 0) {
    if (errno == ENOENT)
      agt_error_kind(err, AGT_E_NOTFOUND,
                     "rootfs '%s' (%.12s) was built from '%s', which is gone: build it again from "
                     "a manifest (agt rootfs build FILE), or remove it (agt rootfs rm %.12s)",
                     name, old_id, manifest, old_id);
    else
      agt_error_make(err, errno, "rootfs '%s' (%.12s) was built from '%s'", name, old_id, manifest);
    goto out;
  }

  o.dry_run = 1;
  if (agt_rootfs_build(store_dir, manifest, &o, &plan, err) < 0) {
    agt_error_wrap(err, "update rootfs '%s': resolve the inputs of '%s'", name, manifest);
    goto out;
  }
  new_id = json_string_value(json_object_get(plan, "id"));
  if (strcmp(new_id, old_id) == 0) {
    *result = json_pack("{s:s, s:b, s:s, s:s}", "name", label, "changed", 0, "id", old_id,
                        "manifest", manifest);
    ret = 0;
    goto out;
  }

  o.dry_run = 0;
  if (agt_rootfs_build(store_dir, manifest, &o, &built, err) < 0) {
    agt_error_wrap(err, "update rootfs '%s': build '%s'", name, manifest);
    goto out;
  }
  new_id = json_string_value(json_object_get(built, "id"));
  *result = json_pack("{s:s, s:b, s:s, s:s, s:s, s:b}", "name", label, "changed",
                      strcmp(new_id, old_id) != 0, "old_id", old_id, "id", new_id, "manifest",
                      manifest, "reused", json_is_true(json_object_get(built, "reused")));
  if (json_object_get(old, "inputs") == NULL)
    json_object_set_new(*result, "changes",
                        json_pack("[{s:s, s:s, s:o}]", "input", "(all)", "old",
                                  "inputs not recorded (built before agt recorded them)", "new",
                                  json_null()));
  else
    json_object_set_new(
        *result, "changes",
        changes_of(json_object_get(old, "inputs"), json_object_get(built, "inputs")));
  json_object_set(*result, "bytes", json_object_get(built, "bytes"));
  json_object_set(*result, "files", json_object_get(built, "files"));
  ret = 0;
out:
  json_decref(old);
  json_decref(plan);
  json_decref(built);
  return ret;
}
