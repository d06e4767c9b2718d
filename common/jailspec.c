#include "jailspec.h"

#include <stddef.h>
#include <string.h>

#include "cleanup.h"
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
