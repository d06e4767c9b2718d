/* agt rootfs build|ls|rm|update: the jails' root filesystems, built by agtd from manifests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agt.h"
#include "agt_paths.h"
#include "cleanup.h"
#include "xalloc.h"

static const char *str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

struct build_opts {
  int download, json;
};

static const struct agt_opt build_opts[] = {
    AGT_OPT_SETINT(0, "no-download", struct build_opts, download, 0,
                   "use only files already on the VM, download nothing"),
    AGT_OPT_JSON_FIELD(struct build_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help build_help = {
    "agt rootfs build [--no-download] [--json] MANIFEST",
    "Build a root filesystem from MANIFEST, a path the VM can read (a file under a mounted "
    "directory, or a path inside the VM).",
    build_opts};

/* The manifest's path as agtd sees it: a host file under a mount maps to its guest path; a
 * path that is not on this machine is taken as the guest's own. */
static char *manifest_path(struct agt_ctx *c, const char *arg, agt_error_t *err)
{
  cleanup_free char *real = realpath(arg, NULL);

  if (real == NULL) {
    if (arg[0] != '/') {
      agt_error_make(err, errno, "manifest '%s'", arg);
      return NULL;
    }
    return xstrdup(arg);
  }
  if (c->target.kind == AGT_TARGET_LIMA) {
    for (size_t i = c->cfg.nmounts; i-- > 0;) {
      const struct agt_cfg_mount *m = &c->cfg.mounts[i];
      size_t n = strlen(m->location);
      if (strncmp(real, m->location, n) == 0 && (real[n] == '/' || real[n] == '\0'))
        return m->mount_point ? xasprintf("%s%s", m->mount_point, real + n) : xstrdup(real);
    }
    agt_note(c,
             "note: '%s' is not under a directory the VM mounts; agtd reads that path "
             "inside the VM",
             real);
  }
  return steal_pointer(&real);
}

/* What builds a missing rootfs: the default one from the manifest agt knows (the source
 * tree's when agt runs from it, else the installed copy), as agtd can read it. */
char *agt_rootfs_advice(struct agt_ctx *c, const char *ref)
{
  cleanup_free char *src = xasprintf("%s/rootfs/default.yaml", AGT_SOURCE_ROOT);
  const char *manifest = src;

  if (strcmp(ref, "default") != 0)
    return xasprintf("build it from its manifest ('agt rootfs build MANIFEST'), or pick one "
                     "that exists ('agt rootfs ls', --rootfs REF, jail.rootfs)");
  if (c->target.kind == AGT_TARGET_LIMA)
    return xstrdup("build it: 'agt rootfs build /opt/agt/src/rootfs/default.yaml' (the VM's "
                   "copy of agt's source), or 'agt verify', which builds it");
  if (access(src, R_OK) != 0)
    manifest = AGT_DATADIR "/rootfs/default.yaml";
  return xasprintf("build it: 'agt rootfs build %s'%s", manifest,
                   c->target.kind == AGT_TARGET_SSH ? " (on the target host: its copy of that file)"
                                                    : "");
}

static int rootfs_build(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct build_opts o = {1, 0};
  cleanup_free char *path = NULL;
  json_t *res, *params;
  int i, r;

  i = agt_cmd_opts(argc, argv, &build_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1) {
    cleanup_free char *how = agt_rootfs_advice(c, "default");
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s (the default rootfs: %s)",
                          build_help.usage, how);
  }
  path = manifest_path(c, argv[i], err);
  if (path == NULL)
    return -1;
  params = json_pack("{s:s, s:b}", "manifest", path, "allow_download", o.download);
  r = agt_target_call(&c->target, "rootfs.build", params, &res, err);
  json_decref(params);
  if (r < 0)
    return -1;
  if (o.json)
    agt_print_json(res);
  else
    printf("%s %s (%lld files, %.1f MB)\n", str(res, "id"), str(res, "name"),
           (long long)json_integer_value(json_object_get(res, "files")),
           (double)json_integer_value(json_object_get(res, "bytes")) / 1e6);
  json_decref(res);
  return 0;
}

static const struct agt_opt ls_opts[] = {
    AGT_OPT_BOOL('q', "quiet", struct agt_flags, quiet, "only the ids, one a line"),
    AGT_OPT_FORMAT_FIELD(struct agt_flags, json),
    AGT_OPT_JSON_FIELD(struct agt_flags, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help ls_help = {"agt rootfs ls [-q] [--json | --format TEMPLATE]",
                                            "List the root filesystems and the jails using each.",
                                            ls_opts};

static int rootfs_ls(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res, *r;
  struct agt_flags o = {0, 0, 0};
  int i;
  size_t k;

  i = agt_cmd_opts(argc, argv, &ls_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", ls_help.usage);
  if (agt_target_call(&c->target, "rootfs.ls", NULL, &res, err) < 0)
    return -1;
  if (o.quiet) {
    json_array_foreach(json_object_get(res, "rootfs"), k, r) printf("%s\n", str(r, "id"));
  } else if (o.json) {
    if (agt_print_out(json_object_get(res, "rootfs"), NULL, err) < 0) {
      json_decref(res);
      return -1;
    }
  } else {
    printf("%-16s %-12s %-10s %s\n", "ID", "NAME", "SIZE", "JAILS");
    json_array_foreach(json_object_get(res, "rootfs"), k, r)
    {
      char size[32];
      snprintf(size, sizeof size, "%.1f MB",
               (double)json_integer_value(json_object_get(r, "bytes")) / 1e6);
      printf("%-16.16s %-12s %-10s %zu\n", str(r, "id"), str(r, "name"), size,
             json_array_size(json_object_get(r, "jails")));
    }
  }
  json_decref(res);
  return 0;
}

static const struct agt_cmd_help rm_help = {
    "agt rootfs rm [--json] REF", "Remove a root filesystem no jail uses.", agt_json_opts};

static int rootfs_rm(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res, *params;
  struct agt_flags o = {0, 0, 0};
  int i, r;

  i = agt_cmd_opts(argc, argv, &rm_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", rm_help.usage);
  params = json_pack("{s:s}", "ref", argv[i]);
  r = agt_target_call(&c->target, "rootfs.rm", params, &res, err);
  json_decref(params);
  if (r < 0)
    return -1;
  if (o.json)
    agt_print_json(res);
  else
    printf("%s removed\n", str(res, "id"));
  json_decref(res);
  return 0;
}

static const struct agt_cmd_help update_help = {
    "agt rootfs update [--no-download] [--json] [NAME]",
    "Rebuild the root filesystem NAME (each name in the store when none is given) from the "
    "manifest it was built from, when any of its inputs changed (a new toybox build, a library "
    "of the closure, an edited manifest): every source is resolved again and read, and a new "
    "build is made only when the tree would differ. Prints each input that changed, old -> "
    "new. Running jails keep the build they started on. Without NAME, a name whose manifest "
    "is gone is skipped with a note; named, it is an error saying what to do.",
    build_opts};

/* One name's outcome: a line, then one line per input that changed. */
static void print_update(json_t *u)
{
  json_t *ch;
  size_t k;

  if (json_object_get(u, "error")) {
    printf("%s: error: %s\n", str(u, "name"), str(u, "error"));
    return;
  }
  if (json_object_get(u, "skipped")) {
    printf("%s: skipped: %s\n", str(u, "name"), str(u, "skipped"));
    return;
  }
  if (!json_is_true(json_object_get(u, "changed"))) {
    printf("%s: up to date (%.12s), nothing rebuilt\n", str(u, "name"), str(u, "id"));
    return;
  }
  printf("%s: %.12s -> %.12s (%lld files, %.1f MB%s); running jails stay on %.12s\n",
         str(u, "name"), str(u, "old_id"), str(u, "id"),
         (long long)json_integer_value(json_object_get(u, "files")),
         (double)json_integer_value(json_object_get(u, "bytes")) / 1e6,
         json_is_true(json_object_get(u, "reused")) ? ", an earlier build reused" : "",
         str(u, "old_id"));
  json_array_foreach(json_object_get(u, "changes"), k, ch)
  {
    const char *o = json_string_value(json_object_get(ch, "old"));
    const char *n = json_string_value(json_object_get(ch, "new"));
    printf("  %s: %s -> %s\n", str(ch, "input"), o ? o : "(none)", n ? n : "(none)");
  }
}

static int rootfs_update(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct build_opts o = {1, 0};
  json_t *res, *params, *u;
  size_t k;
  int i, r, failed = 0;

  i = agt_cmd_opts(argc, argv, &update_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i > 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", update_help.usage);
  params = json_pack("{s:b}", "allow_download", o.download);
  if (argc - i == 1)
    json_object_set_new(params, "name", json_string(argv[i]));
  r = agt_target_call(&c->target, "rootfs.update", params, &res, err);
  json_decref(params);
  if (r < 0)
    return -1;
  if (o.json)
    agt_print_json(res);
  json_array_foreach(json_object_get(res, "updates"), k, u)
  {
    if (!o.json)
      print_update(u);
    failed |= json_object_get(u, "error") != NULL;
  }
  if (!o.json && json_array_size(json_object_get(res, "updates")) == 0)
    printf("no root filesystems in the store: nothing to update\n");
  json_decref(res);
  if (failed)
    return agt_error_kind(err, AGT_E_STATE, "a root filesystem could not be updated (see above)");
  return 0;
}

static const struct agt_subcmd subs[] = {
    {"build", rootfs_build, "build a root filesystem from a manifest"},
    {"ls", rootfs_ls, "list the root filesystems"},
    {"rm", rootfs_rm, "remove one"},
    {"update", rootfs_update, "rebuild from the manifest when an input changed"},
};

int cmd_rootfs(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return agt_subcmd_run(c, "rootfs", "The jails' root filesystems.", subs,
                        sizeof subs / sizeof subs[0], argc, argv, err);
}
