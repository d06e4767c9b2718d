/* home.* requests: a user's agent home (home.h), shown or emptied. */
#include "req_home.h"

#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "daemon.h"
#include "home.h"
#include "jail.h"
#include "log.h"
#include "server.h"
#include "xalloc.h"

#define HOME_ENTRIES_MAX 200

static int home_of(agt_req_t *req, char **path, const char **user, const char **agent,
                   agt_error_t *err)
{
  static const char *const known[] = {"user", "agent", NULL};

  if (agt_param_only(req->params, known, "", err) < 0 ||
      agt_param_str(req->params, "user", 1, user, err) < 0 ||
      agt_param_str(req->params, "agent", 1, agent, err) < 0)
    return -1;
  return agt_home_path(req->d, *user, *agent, path, err);
}

static json_t *jails_using(agtd_t *d, const char *path)
{
  json_t *arr = json_array();

  for (agt_jail_t *j = d->jails; j; j = j->next)
    if (j->rec.binds.home_mode == AGT_HOME_PERSISTENT && strcmp(j->rec.binds.home_path, path) == 0)
      json_array_append_new(arr, json_pack("{s:s, s:s}", "name", j->rec.name, "state",
                                           agt_jail_state_name(j->rec.state)));
  return arr;
}

int agt_req_home_inspect(agt_req_t *req, json_t **result, agt_error_t *err)
{
  cleanup_free char *path = NULL;
  const char *user, *agent;

  if (home_of(req, &path, &user, &agent, err) < 0)
    return -1;
  *result = agt_home_describe(path, HOME_ENTRIES_MAX);
  json_object_set_new(*result, "user", json_string(user));
  json_object_set_new(*result, "agent", json_string(agent));
  json_object_set_new(*result, "jails", jails_using(req->d, path));
  return 0;
}

int agt_req_home_reset(agt_req_t *req, json_t **result, agt_error_t *err)
{
  cleanup_free char *path = NULL;
  const char *user, *agent;
  agt_jail_t *j;
  json_t *before;

  if (home_of(req, &path, &user, &agent, err) < 0)
    return -1;
  if ((j = agt_jail_home_user(req->d, path)) != NULL)
    return agt_error_kind(err, AGT_E_BUSY,
                          "the home of %s's %s is in use by jail '%s' (%s): stop it first", user,
                          agent, j->rec.name, agt_jail_state_name(j->rec.state));
  before = agt_home_describe(path, 0);
  if (agt_home_empty(path, err) < 0) {
    json_decref(before);
    return -1;
  }
  agt_log_info("home %s emptied (%lld files, %lld bytes)", path,
               (long long)json_integer_value(json_object_get(before, "files")),
               (long long)json_integer_value(json_object_get(before, "bytes")));
  *result = json_pack("{s:s, s:s, s:s, s:O, s:O}", "path", path, "user", user, "agent", agent,
                      "removed_files", json_object_get(before, "files"), "removed_bytes",
                      json_object_get(before, "bytes"));
  json_decref(before);
  return 0;
}
