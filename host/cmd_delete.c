/* agt delete: delete the VM with its disk and its jails' disk (jails_disk.h), after asking
 * (or with --force).  Target local: stop agtd and remove its state. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "agtd_local.h"
#include "jails_disk.h"
#include "cleanup.h"
#include "xalloc.h"

static const struct agt_opt opts[] = {
    AGT_OPT_BOOL('f', "force", struct agt_flags, force, "do not ask first"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt delete [--force]",
    "Delete the VM, its disk and its jails' disk: its jails, rootfs and workspaces go too "
    "(target local: stop "
    "agtd and remove its state: jails, root filesystems, the jails' disk image).",
    opts};

/* Every jail of the agtd that answers, removed (killed first): jails outlive agtd under
 * their keepers, so they go before agtd and its state.  *n: how many. */
static int remove_jails(struct agt_ctx *c, long *n, agt_error_t *err)
{
  agt_error_t e = NULL;
  json_t *res, *j;
  size_t k;

  *n = 0;
  if (agt_target_connect(&c->target, &e) < 0) { /* no agtd: no jail it could remove */
    agt_error_release(&e);
    return 0;
  }
  if (agt_target_call(&c->target, "jail.ls", NULL, &res, err) < 0)
    return -1;
  json_array_foreach(json_object_get(res, "jails"), k, j)
  {
    json_t *gone, *p = json_pack("{s:s, s:b}", "name",
                                 json_string_value(json_object_get(j, "name")), "force", 1);
    int r = agt_target_call(&c->target, "jail.rm", p, &gone, err);
    json_decref(p);
    if (r < 0) {
      json_decref(res);
      return agt_error_wrap(err, "remove jail '%s'", json_string_value(json_object_get(j, "name")));
    }
    json_decref(gone);
    (*n)++;
  }
  json_decref(res);
  return 0;
}

/* A state whose agtd does not answer, holding jails: they may still run under their keepers,
 * which agt cannot stop without agtd. */
static int has_jails(const char *state)
{
  cleanup_free char *dir = xasprintf("%s/jails", state);
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;

  if (d == NULL)
    return 0;
  while (!found && (e = readdir(d)) != NULL)
    found = e->d_name[0] != '.';
  closedir(d);
  return found;
}

/* Target local: agtd's state directory ($AGT_AGTD_STATE, /var/lib/agt) with its jails, the
 * workspaces it made, the rootfs store and the sparse image of the jails' disk.  The jails
 * are removed first (they outlive agtd), then agtd is stopped (it holds the image mounted);
 * a project workspace is the user's and is not in it. */
static int delete_local(struct agt_ctx *c, int force, agt_error_t *err)
{
  const char *state = agt_local_state_dir();
  struct stat st;
  uint64_t bytes = 0;
  long pid, running, jails;

  if (stat(state, &st) < 0) {
    printf("agtd's state '%s' does not exist: nothing to delete\n", state);
    return 0;
  }
  if (!force) {
    cleanup_free char *q =
        xasprintf("stop agtd and delete its state '%s' (its jails, the workspaces it made, the "
                  "root filesystems, the jails' disk image)?",
                  state);
    if (!agt_confirm(q))
      return agt_error_kind(err, AGT_E_INVALID, "agtd's state '%s' not deleted%s", state,
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
  }
  if (remove_jails(c, &jails, err) < 0)
    return agt_error_wrap(err, "target local");
  if (jails)
    agt_note(c, "%ld jail%s removed", jails, jails == 1 ? "" : "s");
  if (agt_local_agtd_stop(c, 30, &pid, &running, err) < 0)
    return agt_error_wrap(err, "target local");
  if (pid)
    agt_note(c, "agtd (pid %ld) stopped", pid);
  else if (has_jails(state))
    return agt_error_kind(err, AGT_E_STATE,
                          "agtd is not running and its state '%s' holds jails, which may still "
                          "run under their keepers: 'agt up', then 'agt delete' again (it removes "
                          "them first)",
                          state);
  if (agt_local_rm_tree(state, &bytes, err) < 0)
    return agt_error_wrap(err, "delete agtd's state");
  printf("agtd's state '%s' deleted (%.1f MiB on disk)", state, (double)bytes / 1048576.0);
  if (stat(agt_local_log_file(), &st) == 0) /* not state: what agtd did stays readable */
    printf("; its log '%s' is kept", agt_local_log_file());
  printf("; 'agt up' starts afresh\n");
  return 0;
}

int cmd_delete(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  struct agt_flags f = {0, 0, 0};
  int found, i;

  i = agt_cmd_opts(argc, argv, &help, NULL, &f, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt delete takes no operands");
  if (c->target.kind == AGT_TARGET_LOCAL)
    return delete_local(c, f.force, err);
  if (agt_need_lima(c, "delete", err) < 0)
    return -1;
  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found) {
    printf("vm '%s' does not exist\n", name);
    return 0;
  }
  agt_lima_instance_release(&in);
  if (!f.force) {
    cleanup_free char *q = xasprintf("delete vm '%s', its disk and its jails' disk?", name);
    if (!agt_confirm(q))
      return agt_error_kind(err, AGT_E_INVALID, "vm '%s' not deleted%s", name,
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
  }
  if (agt_vm_delete(c, name, err) < 0)
    return agt_error_wrap(err, "cannot delete vm '%s'", name);
  printf("vm '%s' deleted\n", name);
  return 0;
}
