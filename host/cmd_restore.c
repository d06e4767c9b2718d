/* agt restore GOLD: back to a gold image.  The working VM is replaced by a copy of the VM
 * GOLD (made earlier with `agt clone GOLD`), which is then started.  The copy is made
 * first, under a temporary name; only when it exists is the working VM stopped, renamed
 * aside, the copy renamed into its place, and the old one deleted.  Any failure before
 * the swap leaves the working VM as it was.  The copy gets a copy of the gold VM's jails'
 * disk; the replaced VM's jails' disk goes with it (jails_disk.h). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "jails_disk.h"
#include "cleanup.h"
#include "xalloc.h"

struct restore_opts {
  int force, no_start;
};

static const struct agt_opt opts[] = {
    AGT_OPT_BOOL('f', "force", struct restore_opts, force, "do not ask first"),
    AGT_OPT_BOOL(0, "no-start", struct restore_opts, no_start, "leave the restored VM stopped"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt restore [--force] [--no-start] GOLD",
    "Replace the VM by a copy of the stopped VM GOLD (see agt clone), then start it.", opts};

/* The state of vm `name`: *status AGT_LIMA_UNKNOWN and *found 0 when absent. */
static int vm_status(struct agt_ctx *c, const char *name, int *found, enum agt_lima_status *status,
                     agt_error_t *err)
{
  struct agt_lima_instance in;

  if (agt_lima_list(&c->lima, name, &in, found, err) < 0)
    return agt_error_wrap(err, "vm '%s'", name);
  *status = *found ? in.status : AGT_LIMA_UNKNOWN;
  if (*found)
    agt_lima_instance_release(&in);
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Remove the temporary copy after a failure, and say so if it stays.  A clone that
 * failed half-way leaves a directory without lima.yaml, which Lima will not delete (in
 * case a clone into it is under way); this one is agt's own, made by the clone that just
 * failed, so agt removes the directory itself then. */
static void drop_copy(struct agt_ctx *c, const char *tmp)
{
  cleanup_free char *dir = xasprintf("%s/%s", c->lima.home, tmp);
  agt_error_t e = NULL;
  struct stat st;

  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
    return;
  if (agt_vm_delete(c, tmp, &e) == 0)
    return;
  if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0) {
    fprintf(stderr, "agt: the copy '%s' is left (%s): %s\n", tmp, dir, e->msg);
  }
  agt_error_release(&e);
}

/* Names agt uses beside `name` during a restore: valid for Lima, or an error. */
static int aside_name(struct agt_ctx *c, const char *name, const char *suffix, char **out,
                      agt_error_t *err)
{
  *out = xasprintf("%s.%s", name, suffix);
  if (agt_lima_name_check(*out, err) < 0 || agt_lima_sock_check(&c->lima, *out, err) < 0) {
    free(*out);
    *out = NULL;
    return agt_error_wrap(err, "vm '%s' cannot be restored under its own name", name);
  }
  return 0;
}

int cmd_restore(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  const char *name = c->target.instance, *gold;
  cleanup_free char *tmp = NULL, *old = NULL;
  struct restore_opts o = {0, 0};
  enum agt_lima_status gst, wst, st;
  int gfound, wfound, found, i;
  agt_error_t e2 = NULL;

  i = agt_cmd_opts(argc, argv, &help, NULL, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", help.usage);
  gold = argv[i];
  if (agt_lima_name_check(gold, err) < 0)
    return -1;
  if (strcmp(gold, name) == 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "vm '%s' is the working VM itself: name the gold VM to restore from",
                          gold);
  if (aside_name(c, name, "restoring", &tmp, err) < 0 ||
      aside_name(c, name, "replaced", &old, err) < 0)
    return -1;

  /* The gold VM: there, and stopped (Lima copies only a VM that is not running). */
  if (vm_status(c, gold, &gfound, &gst, err) < 0)
    return -1;
  if (!gfound)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "gold vm '%s' does not exist ('agt clone %s' makes it from the VM)", gold,
                          gold);
  if (gst == AGT_LIMA_RUNNING)
    return agt_error_kind(err, AGT_E_STATE,
                          "gold vm '%s' is running: a gold image is copied stopped; "
                          "'agt --instance %s stop' first",
                          gold, gold);
  if (gst != AGT_LIMA_STOPPED)
    return agt_error_kind(err, AGT_E_STATE,
                          "gold vm '%s' is %s: 'agt --instance %s stop --force' first", gold,
                          agt_lima_status_name(gst), gold);

  /* What an interrupted restore may have left: the copy can go, the replaced VM cannot. */
  if (vm_status(c, old, &found, &st, err) < 0)
    return -1;
  if (found)
    return agt_error_kind(err, AGT_E_EXISTS,
                          "vm '%s' exists: an earlier restore stopped half-way and it may hold "
                          "the VM it replaced; look at it ('agt --instance %s up'), then delete "
                          "it ('agt --instance %s delete')",
                          old, old, old);
  if (vm_status(c, tmp, &found, &st, err) < 0)
    return -1;
  if (found) {
    agt_note(c, "deleting '%s', the copy an earlier restore left", tmp);
    if (agt_vm_delete(c, tmp, err) < 0)
      return agt_error_wrap(err, "cannot delete vm '%s'", tmp);
  }

  if (vm_status(c, name, &wfound, &wst, err) < 0)
    return -1;
  if (!o.force && wfound) {
    cleanup_free char *q = xasprintf("replace vm '%s' by a copy of '%s'? Its disk (jails, rootfs, "
                                     "workspaces inside it) goes.",
                                     name, gold);
    if (!agt_confirm(q))
      return agt_error_kind(err, AGT_E_INVALID, "vm '%s' not restored%s", name,
                            isatty(0) ? "" : ": no terminal to ask on, use --force");
  }

  agt_note(c, "copying vm '%s' to '%s'", gold, tmp);
  if (agt_vm_clone(c, gold, tmp, err) < 0) {
    drop_copy(c, tmp);
    agt_error_wrap(err, "cannot copy vm '%s'", gold);
    return agt_error_wrap(err, wfound ? "vm '%s' is unchanged" : "vm '%s' not restored", name);
  }

  if (wfound) {
    if (wst != AGT_LIMA_STOPPED) {
      agt_note(c, "stopping vm '%s'", name);
      if (agt_lima_stop(&c->lima, name, wst != AGT_LIMA_RUNNING, err) < 0) {
        drop_copy(c, tmp);
        agt_error_wrap(err, "cannot stop vm '%s'", name);
        return agt_error_wrap(err, "vm '%s' is unchanged", name);
      }
    }
    if (agt_lima_rename(&c->lima, name, old, err) < 0) {
      drop_copy(c, tmp);
      return agt_error_wrap(err, "vm '%s' is unchanged (stopped)", name);
    }
  }
  if (agt_lima_rename(&c->lima, tmp, name, err) < 0) {
    if (wfound && agt_lima_rename(&c->lima, old, name, &e2) < 0) {
      fprintf(stderr, "agt: the replaced vm is left as '%s': %s\n", old, e2->msg);
      agt_error_release(&e2);
    }
    return agt_error_wrap(err, "the copy of '%s' is left as '%s'", gold, tmp);
  }
  if (wfound && agt_vm_delete(c, old, &e2) < 0) {
    fprintf(stderr, "agt: the replaced vm is left as '%s': %s\n", old, e2->msg);
    agt_error_release(&e2);
  }
  if (o.no_start) {
    printf("vm '%s' restored from '%s'; 'agt up' starts it\n", name, gold);
    return 0;
  }
  printf("vm '%s' restored from '%s'; starting it\n", name, gold);
  fflush(stdout);
  {
    char up[] = "up";
    char *up_argv[] = {up, NULL};
    return cmd_up(c, 1, up_argv, err);
  }
}
