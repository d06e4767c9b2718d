/* agt agents home: an agent's persistent home on the target (agtd's home.inspect and
 * home.reset), the user's own: where it is, its size and files; --reset empties it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agt.h"
#include "cleanup.h"
#include "names.h"
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

static const struct agt_subcmd subs[] = {
    {"home", agents_home, "an agent's home: where, its size and files; --reset empties it"},
};

int cmd_agents(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  return agt_subcmd_run(c, "agents", "The agents and what agt keeps for them.", subs,
                        sizeof subs / sizeof subs[0], argc, argv, err);
}
