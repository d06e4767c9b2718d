#include "jailspec.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "names.h"
#include "proto.h"
#include "xalloc.h"

#define AGT_SPEC_ROW_(a, b, ID, field, type, none, arg, def, def_text, least, most, unit, help)    \
  [AGT_SPEC_##ID] = {#field,   "jail.limits." #field,                                              \
                     type,     none,                                                               \
                     arg,      def,                                                                \
                     def_text, least,                                                              \
                     most,     unit,                                                               \
                     help,     offsetof(struct agt_jail_spec, field)},
const struct agt_spec_key agt_jail_spec_keys[AGT_SPEC_N] = {AGT_JAIL_LIMITS(AGT_SPEC_ROW_, _, _)};

int agt_jail_spec_find(const char *key)
{
  for (int i = 0; i < AGT_SPEC_N; i++)
    if (strcmp(agt_jail_spec_keys[i].key, key) == 0)
      return i;
  return -1;
}

static uint64_t *field_of(struct agt_jail_spec *s, enum agt_spec_id id)
{
  return (uint64_t *)((char *)s + agt_jail_spec_keys[id].off);
}

uint64_t agt_jail_spec_get(const struct agt_jail_spec *s, enum agt_spec_id id)
{
  return *(const uint64_t *)((const char *)s + agt_jail_spec_keys[id].off);
}

void agt_jail_spec_init(struct agt_jail_spec *s)
{
  memset(s, 0, sizeof *s);
  for (int i = 0; i < AGT_SPEC_N; i++)
    *field_of(s, (enum agt_spec_id)i) = agt_jail_spec_keys[i].def;
}

/* A bound as messages write it: "8 MiB", "4096 bytes", "10 (thousandths of a core)". */
static char *bound_str(const struct agt_spec_key *k, uint64_t v)
{
  if (k->type == AGT_SPEC_SIZE && v % (1ULL << 20) == 0)
    return xasprintf("%llu MiB", (unsigned long long)(v >> 20));
  if (k->type == AGT_SPEC_SIZE)
    return xasprintf("%llu bytes", (unsigned long long)v);
  return xasprintf("%llu%s", (unsigned long long)v, k->unit);
}

int agt_jail_spec_put(struct agt_jail_spec *s, enum agt_spec_id id, uint64_t v, const char *what,
                      agt_error_t *err)
{
  const struct agt_spec_key *k = &agt_jail_spec_keys[id];
  const char *none = k->none == AGT_SPEC_NONE_UNLIMITED ? ", or \"unlimited\""
                     : k->none == AGT_SPEC_NONE_ZERO    ? ", or 0 (none)"
                                                        : "";
  int lifted = (k->none == AGT_SPEC_NONE_UNLIMITED && v == AGT_LIMIT_UNLIMITED) ||
               (k->none == AGT_SPEC_NONE_ZERO && v == 0);

  if (!lifted && v == 0 && k->none == AGT_SPEC_NONE_UNLIMITED)
    return agt_error_kind(err, AGT_E_INVALID, "%s 0 is not a limit: write 'unlimited' for none",
                          what);
  if (!lifted && v < k->least) {
    cleanup_free char *b = bound_str(k, k->least);
    return agt_error_kind(err, AGT_E_INVALID, "%s must be at least %s%s", what, b, none);
  }
  if (!lifted && v > k->most) {
    cleanup_free char *b = bound_str(k, k->most);
    return agt_error_kind(err, AGT_E_INVALID, "%s must be at most %s%s", what, b, none);
  }
  *field_of(s, id) = v;
  s->set |= 1u << id;
  return 0;
}

int agt_jail_spec_set(struct agt_jail_spec *s, enum agt_spec_id id, const char *text,
                      const char *what, agt_error_t *err)
{
  const struct agt_spec_key *k = &agt_jail_spec_keys[id];
  int size = k->type == AGT_SPEC_SIZE;
  uint64_t v;

  if (k->none == AGT_SPEC_NONE_UNLIMITED) {
    if (agt_parse_limit(what, text, size, &v, err) < 0)
      return -1;
  } else if ((size ? agt_parse_size(what, text, &v, err) : agt_parse_u64(what, text, &v, err)) <
             0) {
    return -1;
  }
  return agt_jail_spec_put(s, id, v, what, err);
}

int agt_jail_spec_set_cores(struct agt_jail_spec *s, const char *text, const char *what,
                            agt_error_t *err)
{
  uint64_t whole = 0, frac = 0;
  int digits = 0;
  const char *p = text;

  if (strcmp(text, "unlimited") == 0)
    return agt_jail_spec_put(s, AGT_SPEC_CPU, AGT_LIMIT_UNLIMITED, what, err);
  if (*p < '0' || *p > '9')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a number of cores (1.5)", what, text);
  for (; *p >= '0' && *p <= '9'; p++) {
    whole = whole * 10 + (uint64_t)(*p - '0');
    if (whole > 1000000)
      return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is too many cores", what, text);
  }
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
      if (digits == 3)
        return agt_error_kind(err, AGT_E_INVALID,
                              "%s '%s': at most three decimals (a thousandth of a core)", what,
                              text);
      frac = frac * 10 + (uint64_t)(*p - '0');
    }
  if (*p != '\0')
    return agt_error_kind(err, AGT_E_INVALID, "%s '%s' is not a number of cores (1.5)", what, text);
  for (; digits < 3; digits++)
    frac *= 10;
  return agt_jail_spec_put(s, AGT_SPEC_CPU, whole * 1000 + frac, what, err);
}

json_t *agt_jail_spec_to_json(const struct agt_jail_spec *s, int all)
{
  json_t *o;

  if (!all && s->set == 0)
    return NULL;
  o = json_object();
  for (int i = 0; i < AGT_SPEC_N; i++) {
    const struct agt_spec_key *k = &agt_jail_spec_keys[i];
    uint64_t v = agt_jail_spec_get(s, (enum agt_spec_id)i);
    if (!all && !(s->set & (1u << i)))
      continue;
    json_object_set_new(o, k->key,
                        k->none == AGT_SPEC_NONE_UNLIMITED ? agt_limit_json(v)
                                                           : json_integer((json_int_t)v));
  }
  return o;
}

int agt_jail_spec_from_json(struct agt_jail_spec *s, json_t *limits, int record, agt_error_t *err)
{
  const char *known[AGT_SPEC_N + 1];

  agt_jail_spec_init(s);
  if (limits == NULL || json_is_null(limits))
    return 0;
  if (!json_is_object(limits))
    return agt_error_kind(err, AGT_E_INVALID, "'limits' must be an object");
  for (int i = 0; i < AGT_SPEC_N; i++)
    known[i] = agt_jail_spec_keys[i].key;
  known[AGT_SPEC_N] = NULL;
  if (agt_param_only(limits, known, "limits.", err) < 0)
    return -1;
  for (int i = 0; i < AGT_SPEC_N; i++) {
    const struct agt_spec_key *k = &agt_jail_spec_keys[i];
    json_t *v = json_object_get(limits, k->key);
    uint64_t n = 0;
    int r = 0;
    if (v == NULL || json_is_null(v))
      continue;
    if (record && k->none == AGT_SPEC_NONE_UNLIMITED && json_is_integer(v) &&
        json_integer_value(v) == 0)
      n = AGT_LIMIT_UNLIMITED; /* recorded by an agtd that took 0 for none */
    else if (k->none == AGT_SPEC_NONE_UNLIMITED)
      r = agt_param_limit(limits, k->key, &n, err);
    else
      r = agt_param_u64(limits, k->key, 0, &n, err);
    if (r < 0)
      return agt_error_wrap(err, "limits");
    {
      cleanup_free char *what = xasprintf("limits.%s", k->key);
      if (agt_jail_spec_put(s, (enum agt_spec_id)i, n, what, err) < 0)
        return -1;
    }
  }
  return 0;
}

int agt_jail_spec_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  cleanup_free char *what = xasprintf("--%s", o->name);

  return agt_jail_spec_set(field, (enum agt_spec_id)o->val, arg, what, err);
}

int agt_jail_spec_opt_cores(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  cleanup_free char *what = xasprintf("--%s", o->name);

  return agt_jail_spec_set_cores(field, arg, what, err);
}

/* The run options */

#define AGT_RUN_KEY_(a, b, c, ID, field, s, flag, arg, type, wire, what, config, def, choices,     \
                     help)                                                                         \
  [AGT_RUN_##ID] = {flag,   arg, type,    wire, what,                                              \
                    config, def, choices, help, offsetof(struct agt_run_opts, field)},
const struct agt_run_key agt_jail_run_keys[AGT_RUN_N] = {AGT_JAIL_RUN_OPTS(AGT_RUN_KEY_, _, _, _)};

void agt_jail_run_init(struct agt_run_opts *r)
{
  memset(r, 0, sizeof *r);
  r->tty = -1;
  r->layers = json_array();
  r->allow = json_array();
  r->mounts = json_array();
  r->env.obj = json_object();
  agt_jail_spec_init(&r->limits);
}

void agt_jail_run_release(struct agt_run_opts *r)
{
  json_decref(r->layers);
  json_decref(r->allow);
  json_decref(r->mounts);
  json_decref(r->env.obj);
  r->layers = r->allow = r->mounts = r->env.obj = NULL;
}

int agt_jail_run_choice(enum agt_run_id id, const char *text)
{
  const char *p = agt_jail_run_keys[id].choices;
  size_t n = strlen(text);

  for (int i = 0; p; i++) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, text, n) == 0)
      return i;
    p = bar ? bar + 1 : NULL;
  }
  return -1;
}

char *agt_jail_run_choices_text(enum agt_run_id id)
{
  const char *c = agt_jail_run_keys[id].choices, *last = strrchr(c, '|');
  char *t;

  if (last == NULL)
    return xstrdup(c);
  t = xasprintf("%.*s or %s", (int)(last - c), c, last + 1);
  for (char *p = t; *p; p++)
    if (*p == '|') { /* "a|b" -> "a, b": one byte becomes two */
      char *more = xasprintf("%.*s, %s", (int)(p - t), t, p + 1);
      p = more + (p - t) + 1;
      free(t);
      t = more;
    }
  return t;
}

int agt_jail_allow_ok(const char *v)
{
  if (*v == '\0' || strstr(v, "://") || strchr(v, '/'))
    return 0;
  for (const char *p = v; *p; p++)
    if (*p == ' ' || *p == '\t')
      return 0;
  return 1;
}

int agt_jail_run_env_put(struct agt_run_env *e, const char *what, const char *spec,
                         agt_error_t *err)
{
  const char *eq = strchr(spec, '=');
  cleanup_free char *name = xstrndup(spec, eq ? (size_t)(eq - spec) : strlen(spec));
  const char *value;
  json_t *v;

  if (agt_env_name_check(what, name, err) < 0)
    return -1;
  value = eq ? eq + 1 : getenv(name);
  if (value == NULL)
    return agt_error_kind(err, AGT_E_INVALID, "%s: %s is not set in %s", what, name,
                          e->from ? e->from : "this program's environment");
  v = json_string(value);
  if (v == NULL) /* jansson takes UTF-8 only */
    return agt_error_kind(err, AGT_E_INVALID, "%s: the value of %s is not UTF-8 text", what, name);
  json_object_set_new(e->obj, name, v);
  return 0;
}

int agt_jail_run_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  const struct agt_run_key *k = &agt_jail_run_keys[o->val];
  cleanup_free char *what = xasprintf("--%s", o->name);

  switch (k->type) {
  case AGT_RUN_T_NAME:
    if (agt_name_check(what, arg, err) < 0)
      return -1;
    *(const char **)field = arg;
    return 0;
  case AGT_RUN_T_TEXT:
    *(const char **)field = arg;
    return 0;
  case AGT_RUN_T_CHOICE:
    if (agt_jail_run_choice((enum agt_run_id)o->val, arg) < 0) {
      cleanup_free char *choices = agt_jail_run_choices_text((enum agt_run_id)o->val);
      return agt_error_kind(err, AGT_E_INVALID, "%s takes %s, not '%s'", what, choices, arg);
    }
    *(const char **)field = arg;
    return 0;
  case AGT_RUN_T_FLAG:
    *(int *)field = 1;
    return 0;
  case AGT_RUN_T_HOSTS:
    if (!agt_jail_allow_ok(arg))
      return agt_error_kind(err, AGT_E_INVALID,
                            "%s takes HOST[:PORT] (a name, *.suffix or an address), not '%s'", what,
                            arg);
    /* fallthrough */
  case AGT_RUN_T_LIST:
    if (*arg == '\0')
      return agt_error_kind(err, AGT_E_INVALID, "%s takes a %s", what, k->arg);
    json_array_append_new(*(json_t **)field, json_string(arg));
    return 0;
  case AGT_RUN_T_ENV: {
    struct agt_run_env *e = field;
    if (e->flag == NULL)
      e->flag = o->name;
    return agt_jail_run_env_put(e, what, arg, err);
  }
  case AGT_RUN_T_MOUNT: {
    size_t n = strlen(arg);
    int rw = n > 3 && strcmp(arg + n - 3, ":rw") == 0;
    cleanup_free char *path = xstrndup(arg, rw ? n - 3 : n);
    if (*path == '\0')
      return agt_error_kind(err, AGT_E_INVALID, "%s takes a PATH", what);
    json_array_append_new(*(json_t **)field, json_pack("{s:s, s:b}", "path", path, "writable", rw));
    return 0;
  }
  case AGT_RUN_T_KEYS: {
    struct agt_detach_keys keys;
    if (agt_detach_keys_parse(arg, &keys, err) < 0)
      return agt_error_wrap(err, "%s", what);
    *(const char **)field = arg;
    return 0;
  }
  }
  return 0;
}

/* The object holding a line's wire field (params, or its member before the dot), made
 * when `make`; *key: the field's name in it. */
static json_t *wire_holder(json_t *params, const char *wire, int make, const char **key)
{
  const char *dot = strchr(wire, '.');
  cleanup_free char *top = NULL;
  json_t *h;

  *key = dot ? dot + 1 : wire;
  if (dot == NULL)
    return params;
  top = xstrndup(wire, (size_t)(dot - wire));
  h = json_object_get(params, top);
  if (h == NULL && make) {
    h = json_object();
    json_object_set_new(params, top, h);
  }
  return h;
}

void agt_jail_run_to_json(const struct agt_run_opts *r, json_t *params)
{
  json_t *limits = agt_jail_spec_to_json(&r->limits, 0);

  for (int i = 0; i < AGT_RUN_N; i++) {
    const struct agt_run_key *k = &agt_jail_run_keys[i];
    const void *f = (const char *)r + k->off;
    json_t *v = NULL;
    const char *key;
    switch (k->type) {
    case AGT_RUN_T_TEXT:
    case AGT_RUN_T_NAME:
    case AGT_RUN_T_CHOICE:
      if (*(const char *const *)f)
        v = json_string(*(const char *const *)f);
      break;
    case AGT_RUN_T_FLAG:
      if (*(const int *)f > 0)
        v = json_true();
      break;
    case AGT_RUN_T_LIST:
    case AGT_RUN_T_HOSTS:
    case AGT_RUN_T_MOUNT:
      if (json_array_size(*(json_t *const *)f))
        v = json_incref(*(json_t *const *)f);
      break;
    case AGT_RUN_T_ENV:
      if (json_object_size(((const struct agt_run_env *)f)->obj))
        v = json_incref(((const struct agt_run_env *)f)->obj);
      break;
    case AGT_RUN_T_KEYS:
      break;
    }
    if (v && k->wire) {
      json_t *holder = wire_holder(params, k->wire, 1, &key); /* before key is read */
      json_object_set_new(holder, key, v);
    } else {
      json_decref(v);
    }
  }
  if (limits)
    json_object_set_new(params, "limits", limits);
}

int agt_jail_run_from_json(struct agt_run_opts *r, json_t *params, const char *const *extra,
                           agt_error_t *err)
{
  const char *known[AGT_RUN_N + 32];
  cleanup_free char *tops = NULL;
  size_t n = 0;

  memset(r, 0, sizeof *r);
  agt_jail_spec_init(&r->limits);
  if (!json_is_object(params))
    return agt_error_kind(err, AGT_E_INVALID, "params must be an object");
  /* the fields at the top: each line's (network, for network.mode), then limits, extra */
  tops = xzalloc(AGT_RUN_N * 32);
  for (int i = 0; i < AGT_RUN_N; i++) {
    const char *w = agt_jail_run_keys[i].wire;
    char *t = tops + i * 32;
    size_t j;
    if (w == NULL)
      continue;
    snprintf(t, 32, "%.*s", (int)strcspn(w, "."), w);
    for (j = 0; j < n && strcmp(known[j], t) != 0; j++)
      ;
    if (j == n)
      known[n++] = t;
  }
  known[n++] = "limits";
  for (; extra && *extra && n < sizeof known / sizeof known[0] - 1; extra++)
    known[n++] = *extra;
  known[n] = NULL;
  if (agt_param_only(params, known, "", err) < 0)
    return -1;
  for (int i = 0; i < AGT_RUN_N; i++) {
    const struct agt_run_key *k = &agt_jail_run_keys[i];
    void *f = (char *)r + k->off;
    const char *key, *s = NULL;
    json_t *h, *v;
    size_t j;
    if (k->wire == NULL)
      continue;
    h = wire_holder(params, k->wire, 0, &key);
    if (h != NULL && !json_is_object(h)) {
      cleanup_free char *top = xstrndup(k->wire, (size_t)(key - 1 - k->wire));
      return agt_error_kind(err, AGT_E_INVALID, "'%s' must be an object", top);
    }
    v = h ? json_object_get(h, key) : NULL;
    if (v && json_is_null(v))
      v = NULL;
    switch (k->type) {
    case AGT_RUN_T_TEXT:
    case AGT_RUN_T_NAME:
      if (agt_param_str(params, k->wire, i == AGT_RUN_NAME, &s, err) < 0 ||
          (s && k->type == AGT_RUN_T_NAME && agt_name_check(k->what, s, err) < 0))
        return -1;
      *(const char **)f = s;
      break;
    case AGT_RUN_T_CHOICE:
      if ((v && !json_is_string(v)) ||
          (v && agt_jail_run_choice((enum agt_run_id)i, json_string_value(v)) < 0)) {
        cleanup_free char *choices = agt_jail_run_choices_text((enum agt_run_id)i);
        if (!json_is_string(v))
          return agt_error_kind(err, AGT_E_INVALID, "'%s' must be %s", k->what, choices);
        return agt_error_kind(err, AGT_E_INVALID, "'%s' must be %s, not '%.64s'", k->what, choices,
                              json_string_value(v));
      }
      *(const char **)f = json_string_value(v);
      break;
    case AGT_RUN_T_FLAG:
      *(int *)f = 0;
      if (agt_param_bool(h, key, f, err) < 0)
        return -1;
      break;
    case AGT_RUN_T_LIST:
    case AGT_RUN_T_HOSTS:
    case AGT_RUN_T_MOUNT:
      if (v && !json_is_array(v))
        return agt_error_kind(err, AGT_E_INVALID, "'%s' must be an array%s", k->what,
                              k->type == AGT_RUN_T_MOUNT ? " of {path, writable}" : "");
      for (j = 0; k->type != AGT_RUN_T_MOUNT && j < json_array_size(v); j++)
        if (!json_is_string(json_array_get(v, j)))
          return agt_error_kind(err, AGT_E_INVALID, "'%s[%zu]' must be a string", k->what, j);
      *(json_t **)f = v;
      break;
    case AGT_RUN_T_ENV:
      if (v && !json_is_object(v))
        return agt_error_kind(err, AGT_E_INVALID, "'%s' must be an object of strings", k->what);
      ((struct agt_run_env *)f)->obj = v;
      break;
    case AGT_RUN_T_KEYS:
      break;
    }
  }
  return 0;
}
