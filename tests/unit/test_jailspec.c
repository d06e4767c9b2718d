/* The jail spec (common/jailspec.c): each key parses as people write it, from a flag, from
 * code and from the wire; a value out of its bounds is refused with an error naming the key
 * as it came (the flag, the config key, the wire field); and the option entries the table
 * makes fill the spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jailspec.h"

static void err_is(agt_error_t *err, const char *want)
{
  assert_non_null(*err);
  assert_string_equal((*err)->msg, want);
  assert_int_equal((*err)->kind, AGT_E_INVALID);
  agt_error_release(err);
}

static void test_table(void **state)
{
  struct agt_jail_spec s;

  (void)state;
  agt_jail_spec_init(&s);
  assert_int_equal(s.set, 0);
  assert_true(s.memory == 2ULL << 30 && s.pids == 512 && s.cpu == 1000 && s.nofile == 4096 &&
              s.tmp == 512ULL << 20 && s.log == 8ULL << 20 && s.disk == 10ULL << 30);
  for (int i = 0; i < AGT_SPEC_N; i++) {
    const struct agt_spec_key *k = &agt_jail_spec_keys[i];
    assert_int_equal(agt_jail_spec_find(k->key), i);
    assert_true(k->least <= k->def && k->def <= k->most); /* the default is a good value */
    assert_non_null(strstr(k->config, k->key));
    assert_true(strncmp(k->config, "jail.limits.", 12) == 0);
  }
  assert_int_equal(agt_jail_spec_find("memroy"), -1);
}

/* Each key, as people write it. */
static void test_parse(void **state)
{
  static const struct {
    const char *key, *text;
    uint64_t want;
  } good[] = {
      {"memory", "512M", 512ULL << 20},
      {"memory", "unlimited", AGT_LIMIT_UNLIMITED},
      {"memory", "8M", 8ULL << 20},
      {"pids", "100", 100},
      {"pids", "unlimited", AGT_LIMIT_UNLIMITED},
      {"cpu", "1500", 1500},
      {"cpu", "10", 10},
      {"nofile", "16", 16},
      {"nofile", "1048576", 1048576},
      {"tmp", "1M", 1ULL << 20},
      {"log", "4096", 4096},
      {"disk", "0", 0},
      {"disk", "16M", 16ULL << 20},
      {"disk", "20G", 20ULL << 30},
  };
  struct agt_jail_spec s;
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int id = agt_jail_spec_find(good[i].key);
    agt_jail_spec_init(&s);
    assert_int_equal(agt_jail_spec_set(&s, (enum agt_spec_id)id, good[i].text, "--x", &err), 0);
    assert_true(agt_jail_spec_get(&s, (enum agt_spec_id)id) == good[i].want);
    assert_int_equal(s.set, 1u << id);
  }
  /* cores as people write them */
  agt_jail_spec_init(&s);
  assert_int_equal(agt_jail_spec_set_cores(&s, "1.5", "--cpus", &err), 0);
  assert_true(s.cpu == 1500);
  assert_int_equal(agt_jail_spec_set_cores(&s, "0.01", "--cpus", &err), 0);
  assert_true(s.cpu == 10);
  assert_int_equal(agt_jail_spec_set_cores(&s, "unlimited", "--cpus", &err), 0);
  assert_true(s.cpu == AGT_LIMIT_UNLIMITED);
  assert_int_equal(agt_jail_spec_set_cores(&s, "1.2345", "--cpus", &err), -1);
  err_is(&err, "--cpus '1.2345': at most three decimals (a thousandth of a core)");
  assert_int_equal(agt_jail_spec_set_cores(&s, "0.005", "--cpus", &err), -1);
  err_is(&err, "--cpus must be at least 10 (thousandths of a core), or \"unlimited\"");
}

/* Out of bounds: refused, named as it came. */
static void test_bounds(void **state)
{
  static const struct {
    const char *key, *text, *what, *want;
  } bad[] = {
      {"memory", "4M", "--memory", "--memory must be at least 8 MiB, or \"unlimited\""},
      {"memory", "0", "jail.limits.memory",
       "jail.limits.memory 0 is not a limit: write 'unlimited' for none"},
      {"pids", "0", "--pids", "--pids 0 is not a limit: write 'unlimited' for none"},
      {"cpu", "5", "--cpu", "--cpu must be at least 10 (thousandths of a core), or \"unlimited\""},
      {"cpu", "1000001", "--cpu",
       "--cpu must be at most 1000000 (thousandths of a core), or \"unlimited\""},
      {"nofile", "15", "jail.limits.nofile", "jail.limits.nofile must be at least 16"},
      {"nofile", "1048577", "--nofile", "--nofile must be at most 1048576"},
      {"nofile", "unlimited", "--nofile", "--nofile 'unlimited' is not a number"},
      {"tmp", "1023K", "--tmp", "--tmp must be at least 1 MiB"},
      {"log", "4095", "--log", "--log must be at least 4096 bytes"},
      {"disk", "15M", "--disk", "--disk must be at least 16 MiB, or 0 (none)"},
      {"disk", "2X", "--disk", "--disk '2X': unknown unit 'X'"},
  };
  struct agt_jail_spec s;
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int id = agt_jail_spec_find(bad[i].key);
    agt_jail_spec_init(&s);
    assert_int_equal(agt_jail_spec_set(&s, (enum agt_spec_id)id, bad[i].text, bad[i].what, &err),
                     -1);
    err_is(&err, bad[i].want);
    assert_int_equal(s.set, 0); /* nothing taken */
  }
  /* from code: the same bounds */
  agt_jail_spec_init(&s);
  assert_int_equal(agt_jail_spec_put(&s, AGT_SPEC_MEMORY, 1 << 20, "profile opencode", &err), -1);
  err_is(&err, "profile opencode must be at least 8 MiB, or \"unlimited\"");
}

/* The wire: only the keys set go out; a request's fields are checked as flags are, named
 * limits.KEY. */
static void test_wire(void **state)
{
  struct agt_jail_spec s, back;
  agt_error_t err = NULL;
  json_t *o;

  (void)state;
  agt_jail_spec_init(&s);
  assert_null(agt_jail_spec_to_json(&s, 0));
  assert_int_equal(agt_jail_spec_set(&s, AGT_SPEC_MEMORY, "unlimited", "--memory", &err), 0);
  assert_int_equal(agt_jail_spec_set(&s, AGT_SPEC_TMP, "64M", "--tmp", &err), 0);
  o = agt_jail_spec_to_json(&s, 0);
  assert_int_equal(json_object_size(o), 2);
  assert_string_equal(json_string_value(json_object_get(o, "memory")), "unlimited");
  assert_true(json_integer_value(json_object_get(o, "tmp")) == 64 << 20);
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), 0);
  assert_true(back.memory == AGT_LIMIT_UNLIMITED && back.tmp == 64ULL << 20 && back.pids == 512);
  json_decref(o);
  o = agt_jail_spec_to_json(&back, 1); /* all, as jail.inspect shows them */
  assert_int_equal(json_object_size(o), AGT_SPEC_N);
  json_decref(o);

  o = json_pack("{s:i}", "cpu", 5);
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), -1);
  err_is(&err, "limits.cpu must be at least 10 (thousandths of a core), or \"unlimited\"");
  json_decref(o);
  o = json_pack("{s:i}", "memory", 0);
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), -1);
  err_is(&err, "limits: field 'memory' is 0, which is not a limit: write \"unlimited\" for none");
  /* a record of an agtd that took 0 for none keeps that meaning */
  assert_int_equal(agt_jail_spec_from_json(&back, o, 1, &err), 0);
  assert_true(back.memory == AGT_LIMIT_UNLIMITED);
  json_decref(o);
  o = json_pack("{s:s}", "nofile", "many");
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), -1);
  assert_non_null(strstr(err->msg, "nofile"));
  agt_error_release(&err);
  json_decref(o);
  o = json_pack("{s:i}", "memroy", 1);
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), -1);
  assert_non_null(strstr(err->msg, "limits.memroy"));
  agt_error_release(&err);
  json_decref(o);
  o = json_pack("[]");
  assert_int_equal(agt_jail_spec_from_json(&back, o, 0, &err), -1);
  err_is(&err, "'limits' must be an object");
  json_decref(o);
}

/* The option entries the table makes: each fills the spec; the flag named in errors. */
struct cmd_opts {
  int other;
  struct agt_jail_spec spec;
};

static const struct agt_opt opts[] = {
    AGT_JAIL_LIMIT_OPTS_CONFIG(struct cmd_opts, spec),
    AGT_OPT_END,
};

static int parse(struct cmd_opts *o, agt_error_t *err, int n, ...)
{
  char *argv[20];
  va_list ap;
  int r;

  argv[0] = strdup("run");
  va_start(ap, n);
  for (int i = 1; i <= n; i++)
    argv[i] = strdup(va_arg(ap, const char *));
  va_end(ap);
  r = agt_opts_parse(n + 1, argv, opts, NULL, o, err);
  for (int i = 0; i <= n; i++)
    free(argv[i]);
  return r;
}

static void test_opts(void **state)
{
  struct cmd_opts o = {7, {0}};
  agt_error_t err = NULL;
  size_t n = 0;

  (void)state;
  while (opts[n].name)
    n++;
  assert_int_equal(n, AGT_SPEC_N + 1); /* each key, and --cpus */
  assert_string_equal(opts[AGT_SPEC_MEMORY].help,
                      "memory limit, e.g. 2G, or unlimited (jail.limits.memory)");
  agt_jail_spec_init(&o.spec);
  assert_int_equal(parse(&o, &err, 16, "--memory", "1G", "--pids", "64", "--cpu", "250", "--nofile",
                         "1024", "--tmp", "16M", "--log", "1M", "--disk", "0", "--cpus", "2"),
                   17);
  assert_true(o.spec.memory == 1ULL << 30 && o.spec.pids == 64 && o.spec.nofile == 1024 &&
              o.spec.tmp == 16ULL << 20 && o.spec.log == 1ULL << 20 && o.spec.disk == 0);
  assert_true(o.spec.cpu == 2000); /* the later of --cpu and --cpus */
  assert_int_equal(o.spec.set, (1u << AGT_SPEC_N) - 1);
  assert_int_equal(o.other, 7);
  assert_int_equal(parse(&o, &err, 2, "--memory", "1M"), -1);
  err_is(&err, "--memory must be at least 8 MiB, or \"unlimited\"");
  assert_int_equal(parse(&o, &err, 1, "--cpus=0.001"), -1);
  err_is(&err, "--cpus must be at least 10 (thousandths of a core), or \"unlimited\"");
}

/* The run options: both sides' entries come from one line each. */
struct run_cmd {
  struct agt_run_opts run;
  json_t *add_dirs;
};

static const struct agt_opt run_opts[] = {
    AGT_JAIL_RUN_OPT(NAME, struct run_cmd, run, " (required)"),
    AGT_JAIL_RUN_OPT(ROOTFS, struct run_cmd, run, " (" AGT_RUN_DEFAULT(ROOTFS) ")"),
    AGT_JAIL_RUN_OPT(ENV, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(NET, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(ALLOW, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(TTY, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(HOME, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(LOCKDOWN, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(MOUNTS, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(LAYERS, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT(DETACH_KEYS, struct run_cmd, run, ""),
    AGT_JAIL_RUN_OPT_AS(MOUNTS, 0, "add-dir", struct run_cmd, add_dirs, ""),
    AGT_JAIL_LIMIT_OPTS_DEFAULT(struct run_cmd, run.limits),
    AGT_OPT_END,
};

static char *run_argv[32];

static int run_parse(struct run_cmd *o, agt_error_t *err, int n, ...)
{
  va_list ap;

  /* the entries keep pointers into argv, as parse-options does: each call's stays (the
   * test leaves them) */
  run_argv[0] = strdup("run");
  va_start(ap, n);
  for (int i = 1; i <= n; i++)
    run_argv[i] = strdup(va_arg(ap, const char *));
  va_end(ap);
  return agt_opts_parse(n + 1, run_argv, run_opts, NULL, o, err);
}

static void test_run_opts(void **state)
{
  struct run_cmd o;
  agt_error_t err = NULL;
  json_t *p = json_object();
  char *dump;

  (void)state;
  agt_jail_run_init(&o.run);
  o.add_dirs = json_array();
  assert_string_equal(run_opts[1].help, "rootfs id, id prefix or manifest name (default)");
  assert_string_equal(agt_jail_run_keys[AGT_RUN_ROOTFS].config, "jail.rootfs");
  assert_string_equal(agt_jail_run_keys[AGT_RUN_NET].wire, "network.mode");
  setenv("AGT_TEST_FROM_HERE", "here", 1);
  assert_int_equal(run_parse(&o, &err, 20, "-n", "j1", "--rootfs", "r1", "-e", "A=1", "-e",
                             "AGT_TEST_FROM_HERE", "--net", "none", "--allow", "example.com:443",
                             "-t", "--home", "ephemeral", "--lockdown", "--mount", "/srv/x:rw",
                             "--layer", "node"),
                   21);
  assert_int_equal(run_parse(&o, &err, 4, "--add-dir", "/a", "--memory", "1G"), 5);
  assert_string_equal(o.run.env.flag, "env");
  agt_jail_run_to_json(&o.run, p);
  dump = json_dumps(p, JSON_SORT_KEYS | JSON_COMPACT);
  assert_string_equal(
      dump, "{\"env\":{\"A\":\"1\",\"AGT_TEST_FROM_HERE\":\"here\"},\"home\":\"ephemeral\","
            "\"layers\":[\"node\"],\"limits\":{\"memory\":1073741824},\"lockdown\":true,"
            "\"mounts\":[{\"path\":\"/srv/x\",\"writable\":true}],\"name\":\"j1\","
            "\"network\":{\"allow\":[\"example.com:443\"],\"mode\":\"none\"},\"rootfs\":\"r1\","
            "\"tty\":true}");
  free(dump);
  /* --add-dir fills its own member, as --mount does */
  assert_string_equal(json_string_value(json_object_get(json_array_get(o.add_dirs, 0), "path")),
                      "/a");
  /* each refused naming the flag */
  assert_int_equal(run_parse(&o, &err, 2, "--net", "wide"), -1);
  err_is(&err, "--net takes none, allow or open, not 'wide'");
  assert_int_equal(run_parse(&o, &err, 2, "--home", "shared"), -1);
  err_is(&err, "--home takes none, persistent or ephemeral, not 'shared'");
  assert_int_equal(run_parse(&o, &err, 2, "--allow", "https://example.com"), -1);
  err_is(&err, "--allow takes HOST[:PORT] (a name, *.suffix or an address), not "
               "'https://example.com'");
  assert_int_equal(run_parse(&o, &err, 2, "--name", "Bad"), -1);
  err_is(&err, "--name 'Bad' must start with a lowercase letter or a digit");
  assert_int_equal(run_parse(&o, &err, 2, "--mount", ""), -1);
  err_is(&err, "--mount takes a PATH");
  assert_int_equal(run_parse(&o, &err, 2, "-e", "AGT_TEST_NOT_SET_ANYWHERE"), -1);
  err_is(&err, "--env: AGT_TEST_NOT_SET_ANYWHERE is not set in this program's environment");
  assert_int_equal(run_parse(&o, &err, 2, "--detach-keys", "ctrl-"), -1);
  assert_non_null(strstr(err->msg, "--detach-keys: "));
  agt_error_release(&err);
  json_decref(p);
  json_decref(o.add_dirs);
  agt_jail_run_release(&o.run);
}

/* agtd's check of a run request comes from the same lines. */
static void test_run_wire(void **state)
{
  static const char *const extra[] = {"argv", "size", NULL};
  struct agt_run_opts r;
  agt_error_t err = NULL;
  json_t *p;

  (void)state;
  p = json_pack("{s:s, s:s, s:{s:s, s:[s]}, s:b, s:[i,i], s:s}", "name", "j1", "agent", "pi",
                "network", "mode", "open", "allow", "a.example", "tty", 1, "size", 24, 80, "home",
                "persistent");
  assert_int_equal(agt_jail_run_from_json(&r, p, extra, &err), 0);
  assert_string_equal(r.name, "j1");
  assert_string_equal(r.net, "open");
  assert_int_equal(agt_jail_run_choice(AGT_RUN_NET, r.net), 2);
  assert_int_equal(agt_jail_run_choice(AGT_RUN_HOME, r.home), 1);
  assert_int_equal(r.tty, 1);
  assert_int_equal(json_array_size(r.allow), 1);
  json_decref(p);
#define REFUSED(want, ...)                                                                         \
  do {                                                                                             \
    p = json_pack(__VA_ARGS__);                                                                    \
    assert_int_equal(agt_jail_run_from_json(&r, p, extra, &err), -1);                              \
    err_is(&err, want);                                                                            \
    json_decref(p);                                                                                \
  } while (0)
  REFUSED("missing field 'name'", "{s:s}", "agent", "pi");
  REFUSED("unknown field 'detach_keys'", "{s:s, s:s}", "name", "j", "detach_keys", "x");
  REFUSED("unknown field 'secrets'", "{s:s, s:[]}", "name", "j", "secrets");
  REFUSED("jail name 'A' must start with a lowercase letter or a digit", "{s:s}", "name", "A");
  REFUSED("'network.mode' must be none, allow or open, not 'wide'", "{s:s, s:{s:s}}", "name", "j",
          "network", "mode", "wide");
  REFUSED("'network.mode' must be none, allow or open", "{s:s, s:{s:i}}", "name", "j", "network",
          "mode", 1);
  REFUSED("'network' must be an object", "{s:s, s:s}", "name", "j", "network", "open");
  REFUSED("'home' must be none, persistent or ephemeral, not 'x'", "{s:s, s:s}", "name", "j",
          "home", "x");
  REFUSED("'layers[0]' must be a string", "{s:s, s:[i]}", "name", "j", "layers", 1);
  REFUSED("'env' must be an object of strings", "{s:s, s:[]}", "name", "j", "env");
  REFUSED("field 'tty' must be true or false", "{s:s, s:s}", "name", "j", "tty", "yes");
#undef REFUSED
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),    cmocka_unit_test(test_parse),
      cmocka_unit_test(test_bounds),   cmocka_unit_test(test_wire),
      cmocka_unit_test(test_opts),     cmocka_unit_test(test_run_opts),
      cmocka_unit_test(test_run_wire),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
