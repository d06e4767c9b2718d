/* agt agents ls|update|home: the agent profiles (docs/AGENTS.md), their pinned packages and
 * the rootfs layers agtd holds for them; an agent's persistent home on the target (agtd's
 * home.inspect and home.reset), the user's own: where it is, its size and files; --reset
 * empties it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agt.h"
#include "cleanup.h"
#include "guest.h"
#include "layers.h"
#include "names.h"
#include "profile.h"
#include "util.h"
#include "xalloc.h"

static const char *str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

struct home_opts {
  int json, reset, yes;
};

static const struct agt_opt home_opts[] = {
    AGT_OPT_BOOL(0, "reset", struct home_opts, reset,
                 "empty the home (its login, settings, sessions), after asking"),
    AGT_OPT_BOOL('y', "yes", struct home_opts, yes, "with --reset: do not ask first"),
    AGT_OPT_JSON_FIELD(struct home_opts, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help home_help = {
    "agt agents home [--reset [-y]] [--json] AGENT",
    "Show AGENT's home on the target: the directory agtd keeps for you and that agent, "
    "mounted as $HOME in its jails (jail.home), with its size and files.",
    home_opts};

static void print_home(json_t *res)
{
  char size[32];
  json_t *e, *jails = json_object_get(res, "jails");
  size_t i, files = (size_t)json_integer_value(json_object_get(res, "files"));

  printf("home of %s's %s: %s\n", str(res, "user"), str(res, "agent"), str(res, "path"));
  if (!json_is_true(json_object_get(res, "exists"))) {
    printf("not made yet: the first jail of this agent makes it\n");
    return;
  }
  agt_human_bytes((unsigned long long)json_integer_value(json_object_get(res, "bytes")), size,
                  sizeof size);
  printf("size: %s in %zu file%s\n", size, files, files == 1 ? "" : "s");
  if (json_array_size(jails)) {
    printf("jails:");
    json_array_foreach(jails, i, e) printf(" %s (%s)", str(e, "name"), str(e, "state"));
    printf("\n");
  }
  json_array_foreach(json_object_get(res, "entries"), i, e) printf("  %s\n", json_string_value(e));
  if (json_array_size(json_object_get(res, "entries")) < files)
    printf("  ... (the first %zu entries)\n", json_array_size(json_object_get(res, "entries")));
}

/* 1 when NAME is an agent's profile; 0 when not, or when the profiles did not load (*err). */
static int is_agent(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  struct agt_profile_set set;
  const struct agt_profile *p;
  int r;

  if (agt_profiles_load_for(c->cfg.user_file, &set, err) < 0)
    return 0;
  p = agt_profiles_find(&set, name);
  r = p && p->kind == AGT_PROFILE_AGENT;
  agt_profiles_release(&set);
  return r;
}

static int agents_home(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct home_opts o = {0, 0, 0};
  cleanup_free char *user = agt_home_user();
  json_t *params, *res;
  int i, r;

  i = agt_cmd_opts(argc, argv, &home_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (argc - i != 1)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", home_help.usage);
  if (o.yes && !o.reset)
    return agt_error_kind(err, AGT_E_INVALID, "-y goes with --reset");
  if (agt_name_check("agent", argv[i], err) < 0)
    return -1;
  params = json_pack("{s:s, s:s}", "user", user, "agent", argv[i]);
  if (!is_agent(c, argv[i], err)) {
    /* no such profile: only a home one left behind (its profile since removed) is shown */
    int exists = 0;
    if (*err == NULL && agt_target_call(&c->target, "home.inspect", params, &res, err) == 0) {
      exists = json_is_true(json_object_get(res, "exists"));
      json_decref(res);
      if (!exists)
        agt_error_kind(err, AGT_E_NOTFOUND,
                       "no agent profile '%s', nor a home of it ('agt agents ls -q' lists them)",
                       argv[i]);
    }
    if (!exists) {
      json_decref(params);
      return -1;
    }
  }
  if (o.reset) {
    if (!o.yes) {
      cleanup_free char *q =
          xasprintf("empty the home of your %s on the target (its login, settings, sessions and "
                    "tokens are lost)?",
                    argv[i]);
      if (!agt_confirm(q)) {
        json_decref(params);
        return agt_error_kind(err, AGT_E_INVALID, "home of %s not emptied%s", argv[i],
                              isatty(0) ? "" : ": no terminal to ask on, use -y");
      }
    }
    r = agt_target_call(&c->target, "home.reset", params, &res, err);
  } else {
    r = agt_target_call(&c->target, "home.inspect", params, &res, err);
  }
  json_decref(params);
  if (r < 0)
    return agt_error_wrap(err, "home of %s", argv[i]);
  if (o.json) {
    agt_print_json(res);
  } else if (o.reset) {
    char size[32];
    agt_human_bytes((unsigned long long)json_integer_value(json_object_get(res, "removed_bytes")),
                    size, sizeof size);
    printf("home of %s's %s emptied: %lld files, %s (%s)\n", str(res, "user"), str(res, "agent"),
           (long long)json_integer_value(json_object_get(res, "removed_files")), size,
           str(res, "path"));
  } else {
    print_home(res);
  }
  json_decref(res);
  return 0;
}

/* ls, update */

/* The guest's architecture (agtd's daemon.status), this machine's when agtd does not say. */
static char *guest_arch(struct agt_ctx *c, agt_error_t *err)
{
  json_t *st;
  char *a = NULL;
  struct utsname un;

  if (agt_target_call(&c->target, "daemon.status", NULL, &st, err) < 0)
    return NULL;
  if (json_string_value(json_object_get(st, "arch")))
    a = xstrdup(json_string_value(json_object_get(st, "arch")));
  json_decref(st);
  if (a == NULL && uname(&un) == 0)
    a = xstrdup(un.machine);
  return a;
}

/* ls */

static const struct agt_opt ls_opts[] = {
    AGT_OPT_BOOL('q', "quiet", struct agt_flags, quiet, "only the names, one a line"),
    AGT_OPT_FORMAT_FIELD(struct agt_flags, json),
    AGT_OPT_JSON_FIELD(struct agt_flags, json),
    AGT_OPT_END,
};

static const struct agt_cmd_help ls_help = {
    "agt agents ls [-q] [--json | --format TEMPLATE]",
    "List the agent profiles: each agent's pinned version, its runtime, whether its layer is "
    "built and the size each layer adds (node's is shared by every node agent).",
    ls_opts};

static double mb(json_t *b)
{
  return (double)json_integer_value(json_object_get(b, "bytes")) / 1e6;
}

static int agents_ls(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct agt_profile_set set;
  json_t *res = NULL, *store, *all, *e;
  cleanup_free char *arch = NULL;
  struct agt_flags o = {0, 0, 0};
  int i, r = -1;
  size_t k;

  i = agt_cmd_opts(argc, argv, &ls_help, NULL, &o, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "usage: %s", ls_help.usage);
  if (agt_profiles_load_for(c->cfg.user_file, &set, err) < 0)
    return -1;
  all = json_array();
  if (o.quiet) {
    for (k = 0; k < set.n; k++)
      if (set.p[k]->kind == AGT_PROFILE_AGENT)
        printf("%s\n", set.p[k]->name);
    r = 0;
    goto out;
  }
  if ((arch = guest_arch(c, err)) == NULL ||
      agt_target_call(&c->target, "rootfs.ls", NULL, &res, err) < 0)
    goto out;
  store = json_object_get(res, "rootfs");
  for (k = 0; k < set.n; k++) {
    const struct agt_profile *p = set.p[k];
    struct agt_layer l[2];
    size_t n = 0;
    json_t *layers = json_array();
    e = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", p->name, "kind",
                  p->kind == AGT_PROFILE_AGENT ? "agent" : "runtime", "runtime",
                  agt_profile_runtime_name(p->runtime), "description",
                  p->description ? p->description : "", "profile", p->file);
    if (p->kind == AGT_PROFILE_RUNTIME) {
      if (agt_layer_make(p, agt_layer_pin(&c->cfg, p), arch, &l[0], err) < 0)
        goto out_e;
      n = 1;
    } else if (agt_agent_layers(&c->cfg, &set, p, arch, l, &n, err) < 0) {
      goto out_e;
    }
    if (p->npm) {
      json_object_set_new(e, "package", json_string(p->npm));
      json_object_set_new(e, "version", json_string(agt_layer_pin(&c->cfg, p)));
    }
    for (size_t m = 0; m < n; m++) {
      json_t *b = agt_layer_find(store, l[m].name);
      json_t *lj =
          json_pack("{s:s, s:s, s:b}", "name", l[m].name, "npm", l[m].spec, "built", b != NULL);
      if (b) {
        json_object_set(lj, "id", json_object_get(b, "id"));
        json_object_set(lj, "bytes", json_object_get(b, "bytes"));
      }
      json_array_append_new(layers, lj);
      agt_layer_release(&l[m]);
    }
    json_object_set_new(e, "layers", layers);
    json_array_append_new(all, e);
    continue;
  out_e:
    json_decref(e);
    json_decref(layers);
    goto out;
  }
  if (o.json) {
    if (agt_print_out(all, NULL, err) < 0)
      goto out;
  } else {
    printf("%-10s %-10s %-8s %-10s %s\n", "NAME", "VERSION", "RUNTIME", "LAYER", "SIZE");
    json_array_foreach(all, k, e)
    {
      json_t *own = json_array_get(json_object_get(e, "layers"), 0);
      json_t *node = json_array_get(json_object_get(e, "layers"), 1);
      const char *ver = json_string_value(json_object_get(e, "version"));
      char size[64] = "-";
      if (own && json_is_true(json_object_get(own, "built")))
        snprintf(size, sizeof size, "%.1f MB", mb(own));
      if (node)
        snprintf(size + strlen(size), sizeof size - strlen(size), " (+ node %s)",
                 json_is_true(json_object_get(node, "built")) ? "built" : "not built");
      printf("%-10s %-10s %-8s %-10s %s\n", json_string_value(json_object_get(e, "name")),
             ver ? ver : "-",
             strcmp(json_string_value(json_object_get(e, "kind")), "runtime") == 0
                 ? "runtime"
                 : json_string_value(json_object_get(e, "runtime")),
             own == NULL                                   ? "base"
             : json_is_true(json_object_get(own, "built")) ? "built"
                                                           : "not built",
             size);
    }
  }
  r = 0;
out:
  json_decref(all);
  json_decref(res);
  agt_profiles_release(&set);
  return r;
}

/* update */

static const struct agt_opt update_opts[] = {
    AGT_OPT_END,
};

static const struct agt_cmd_help update_help = {
    "agt agents update [NAME...]",
    "Look up the newest version of each agent's package (or NAME's; node for the Node.js "
    "runtime) on the registry the guest reaches, build its layer, pin it in the user's config "
    "(agents.NAME.version) and say what changed.  Running jails keep the layers they started "
    "on.",
    update_opts};

static void say_building(void *ctx, const struct agt_layer *l)
{
  struct agt_ctx *c = ctx;
  agt_note(c, "building layer %s (npm %s)", l->name, l->spec);
}

/* `npm view PKG version` on the guest: its registry, its npm configuration. */
static char *newest(struct agt_ctx *c, const char *pkg, agt_error_t *err)
{
  cleanup_free char *q = agt_sh_quote(pkg);
  cleanup_free char *script = xasprintf("npm view --no-update-notifier -- %s version", q);
  char *out = NULL, *errout = NULL;
  int code;

  if (agt_guest_sh(c, script, &out, &errout, &code, err) < 0)
    return NULL;
  if (code != 0) {
    agt_error_kind(err, AGT_E_NOTFOUND, "npm view %s version on the guest failed (exit %d): %s",
                   pkg, code, errout ? errout : "");
    free(out);
    free(errout);
    return NULL;
  }
  free(errout);
  out[strcspn(out, "\r\n")] = '\0';
  if (*out == '\0' ||
      strspn(out, "0123456789.-+abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
          strlen(out)) {
    agt_error_kind(err, AGT_E_PROTO, "npm view %s version said '%.64s', not a version", pkg, out);
    free(out);
    return NULL;
  }
  return out;
}

static int agents_update(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct agt_profile_set set;
  cleanup_free char *arch = NULL;
  int i, r = -1, changed = 0;

  i = agt_cmd_opts(argc, argv, &update_help, NULL, &(struct agt_flags){0, 0, 0}, err);
  if (i < 0)
    return i == -2 ? 0 : -1;
  if (agt_profiles_load_for(c->cfg.user_file, &set, err) < 0)
    return -1;
  for (int a = i; a < argc; a++)
    if (agt_profiles_find(&set, argv[a]) == NULL) {
      agt_error_kind(err, AGT_E_NOTFOUND, "no agent profile '%s' ('agt agents ls -q' lists them)",
                     argv[a]);
      goto out;
    }
  if ((arch = guest_arch(c, err)) == NULL)
    goto out;
  for (size_t k = 0; k < set.n; k++) {
    const struct agt_profile *p = set.p[k];
    const char *pin = agt_layer_pin(&c->cfg, p);
    cleanup_free char *latest = NULL, *where = NULL, *pkg = NULL;
    struct agt_layer l;
    int named = i == argc, built;

    for (int a = i; a < argc; a++)
      named |= strcmp(argv[a], p->name) == 0;
    if (!named)
      continue;
    if (p->npm == NULL) {
      if (i < argc)
        printf("%s: no package of its own (runtime none): nothing to update\n", p->name);
      continue;
    }
    pkg = agt_profile_expand(p, p->npm, pin, arch, err);
    if (pkg == NULL || (latest = newest(c, pkg, err)) == NULL) {
      agt_error_wrap(err, "update %s", p->name);
      goto out;
    }
    if (agt_layer_make(p, latest, arch, &l, err) < 0)
      goto out;
    if (agt_layers_build(&c->target, &l, 1, NULL, say_building, c, &built, err) < 0) {
      agt_layer_release(&l);
      goto out;
    }
    if (strcmp(latest, pin) == 0) {
      printf("%s: %s is the newest%s\n", p->name, pin, built ? " (its layer built now)" : "");
      agt_layer_release(&l);
      continue;
    }
    if (agt_layer_pin_write(c->cfg.user_file, p->name, latest, &where, err) < 0) {
      agt_layer_release(&l);
      goto out;
    }
    printf("%s: %s -> %s (layer %s%s; pinned at %s)\n", p->name, pin, latest, l.name,
           built ? " built" : " was built", where);
    agt_layer_release(&l);
    changed++;
  }
  if (changed)
    printf("running jails keep the layers they started on; new jails get the new ones\n");
  r = 0;
out:
  agt_profiles_release(&set);
  return r;
}

static const struct agt_subcmd subs[] = {
    {"ls", agents_ls, "list the agents, their versions and layers"},
    {"update", agents_update, "update agents to their newest versions"},
    {"home", agents_home, "an agent's home: where, its size and files; --reset empties it"},
};

int cmd_agents(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return agt_subcmd_run(c, "agents", "The agents, their layers and what agt keeps for them.", subs,
                        sizeof subs / sizeof subs[0], argc, argv, err);
}
