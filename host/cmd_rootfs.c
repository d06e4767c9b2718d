/* agt rootfs build|ls|rm: the jails' root filesystems, built by agtd from manifests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agt.h"
#include "cleanup.h"
#include "xalloc.h"

static const char *str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

enum {
  OPT_NO_DOWNLOAD = 256,
};

static const struct agt_opt build_opts[] = {
    {OPT_NO_DOWNLOAD, "no-download", NULL, "use only files already on the VM, download nothing"},
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help build_help = {
    "agt rootfs build [--no-download] [--json] MANIFEST",
    "Build a root filesystem from MANIFEST, a path the VM can read (a file under a mounted "
    "directory, or a path inside the VM).",
    build_opts};

struct build_opts {
  int download, json;
};

static int build_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  struct build_opts *o = ctx;

  (void)arg;
  if (key == OPT_NO_DOWNLOAD)
    o->download = 0;
  else if (key == AGT_OPT_JSON)
    o->json = 1;
  else
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  return 0;
}

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

static int rootfs_build(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct build_opts o = {1, 0};
  cleanup_free char *path = NULL;
  json_t *res, *params;
  int i, r;

  i = agt_cmd_opts(argc, argv, &build_help, build_opt, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", build_help.usage);
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

static const struct agt_opt json_opts[] = {
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_opt ls_opts[] = {
    {'q', "quiet", NULL, "only the ids, one a line"},
    AGT_OPT_FORMAT_ENTRY,
    AGT_OPT_JSON_ENTRY,
    {0, NULL, NULL, NULL},
};

static const struct agt_cmd_help ls_help = {"agt rootfs ls [-q] [--json | --format TEMPLATE]",
                                            "List the root filesystems and the jails using each.",
                                            ls_opts};

static int ls_opt(void *ctx, int key, const char *arg, agt_error_t *err)
{
  int *o = ctx; /* [0]: --json, [1]: -q */

  (void)arg;
  if (key == AGT_OPT_JSON)
    o[0] = 1;
  else if (key == 'q')
    o[1] = 1;
  else
    return agt_error_kind(err, AGT_E_INVALID, "unexpected option");
  return 0;
}

static int rootfs_ls(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res, *r;
  int o[2] = {0, 0}, i;
  size_t k;

  i = agt_cmd_opts(argc, argv, &ls_help, ls_opt, o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", ls_help.usage);
  if (agt_target_call(&c->target, "rootfs.ls", NULL, &res, err) < 0)
    return -1;
  if (o[1]) {
    json_array_foreach(json_object_get(res, "rootfs"), k, r) printf("%s\n", str(r, "id"));
  } else if (o[0]) {
    if (agt_print_out(json_object_get(res, "rootfs"), NULL, err) < 0) {
      json_decref(res);
      return -1;
    }
  } else {
    printf("%-16s %-12s %-10s %s\n", "ID", "NAME", "SIZE", "JAILS");
    json_array_foreach(json_object_get(res, "rootfs"), k, r)
    {
      printf("%-16.16s %-12s %-10.1f %zu\n", str(r, "id"), str(r, "name"),
             (double)json_integer_value(json_object_get(r, "bytes")) / 1e6,
             json_array_size(json_object_get(r, "jails")));
    }
  }
  json_decref(res);
  return 0;
}

static const struct agt_cmd_help rm_help = {"agt rootfs rm [--json] REF",
                                            "Remove a root filesystem no jail uses.", json_opts};

static int rootfs_rm(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  json_t *res, *params;
  int json = 0, i, r;

  i = agt_cmd_opts(argc, argv, &rm_help, agt_opt_json_only, &json, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", rm_help.usage);
  params = json_pack("{s:s}", "ref", argv[i]);
  r = agt_target_call(&c->target, "rootfs.rm", params, &res, err);
  json_decref(params);
  if (r < 0)
    return -1;
  if (json)
    agt_print_json(res);
  else
    printf("%s removed\n", str(res, "id"));
  json_decref(res);
  return 0;
}

static const struct agt_subcmd subs[] = {
    {"build", rootfs_build, "build a root filesystem from a manifest"},
    {"ls", rootfs_ls, "list the root filesystems"},
    {"rm", rootfs_rm, "remove one"},
};

int cmd_rootfs(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return agt_subcmd_run(c, "rootfs", "The jails' root filesystems.", subs,
                        sizeof subs / sizeof subs[0], argc, argv, err);
}
