/* agt's config: defaults, the user file, the repository overlay (scalars override, lists
 * append), variables and flags, and errors that name file:line:column and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cleanup.h"
#include "config.h"
#include "util.h"
#include "xalloc.h"

static char tmpdir[] = "/tmp/agt-test-config.XXXXXX";

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *path_in(const char *rel)
{
  return xasprintf("%s/%s", tmpdir, rel);
}

static int setup(void **state)
{
  (void)state;
  unsetenv("AGT_CONFIG");
  unsetenv("AGT_TARGET");
  unsetenv("AGT_INSTANCE");
  unsetenv("LIMA_HOME");
  setenv("HOME", "/home/tester", 1);
  return 0;
}

static void test_defaults(void **state)
{
  struct agt_config c;
  cleanup_free char *where = NULL;

  (void)state;
  agt_config_init(&c);
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_NAME), "agt_agent_sandbox");
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_TYPE), "auto");
  assert_string_equal(agt_config_get(&c, AGT_CFG_LIMA_HOME), "/home/tester/.lima");
  assert_string_equal(agt_config_get(&c, AGT_CFG_AGTD_SOCKET), "/run/agt/agtd.sock");
  assert_null(agt_config_get(&c, AGT_CFG_TARGET));
  assert_null(agt_config_get(&c, AGT_CFG_VM_IMAGE));
  where = agt_cfg_origin_str(&c.v[AGT_CFG_VM_NAME].origin);
  assert_string_equal(where, "default");
  agt_config_release(&c);
}

static void test_lima_home_from_env(void **state)
{
  struct agt_config c;
  cleanup_free char *where = NULL;

  (void)state;
  setenv("LIMA_HOME", "/srv/lima", 1);
  agt_config_init(&c);
  unsetenv("LIMA_HOME");
  assert_string_equal(agt_config_get(&c, AGT_CFG_LIMA_HOME), "/srv/lima");
  where = agt_cfg_origin_str(&c.v[AGT_CFG_LIMA_HOME].origin);
  assert_string_equal(where, "env LIMA_HOME");
  agt_config_release(&c);
}

/* user file, then the overlay: scalars override, lists append, each value knows its line */
static void test_overlay(void **state)
{
  cleanup_free char *user = path_in("user.yaml");
  cleanup_free char *repo = path_in("repo");
  cleanup_free char *sub = path_in("repo/src/deep");
  cleanup_free char *dotagt = path_in("repo/.agt");
  cleanup_free char *overlay = path_in("repo/.agt/config.yaml");
  cleanup_free char *git = path_in("repo/.git");
  cleanup_free char *where = NULL, *expect = NULL;
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  write_file(user, "vm:\n"
                   "  cpus: 2\n"
                   "  memory: 8GiB\n"
                   "  mounts:\n"
                   "    - ~/src\n"
                   "jail:\n"
                   "  env: [A=1]\n"
                   "  limits:\n"
                   "    pids: 100\n");
  assert_int_equal(agt_mkdir_p(git, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(dotagt, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(sub, 0755, NULL), 0);
  write_file(overlay, "# the project's own settings\n"
                      "vm:\n"
                      "  cpus: 6\n"
                      "  mounts:\n"
                      "    - location: .\n"
                      "      writable: true\n"
                      "    - {location: /data, mount_point: /mnt/data}\n"
                      "jail:\n"
                      "  env:\n"
                      "    - B=2\n");
  p.user_file = user;
  p.cwd = sub;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_null(err);

  /* scalars: the overlay wins, the user file's other values stay */
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_CPUS), "6");
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_MEMORY), "8GiB");
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_PIDS), "100");
  where = agt_cfg_origin_str(&c.v[AGT_CFG_VM_CPUS].origin);
  expect = xasprintf("%s:3:9", overlay);
  assert_string_equal(where, expect);
  free(where);
  free(expect);
  where = agt_cfg_origin_str(&c.v[AGT_CFG_VM_MEMORY].origin);
  expect = xasprintf("%s:3:11", user);
  assert_string_equal(where, expect);

  /* lists: the user's first, then the overlay's; paths resolved */
  assert_int_equal(c.nmounts, 3);
  assert_string_equal(c.mounts[0].location, "/home/tester/src");
  assert_false(c.mounts[0].writable);
  assert_string_equal(c.mounts[1].location, repo); /* "." in the overlay is the project root */
  assert_true(c.mounts[1].writable);
  assert_string_equal(c.mounts[2].location, "/data");
  assert_string_equal(c.mounts[2].mount_point, "/mnt/data");
  assert_int_equal(c.mounts[1].origin.line, 5);
  assert_int_equal(c.nenv, 2);
  assert_string_equal(c.env[0].text, "A=1");
  assert_string_equal(c.env[1].text, "B=2");
  assert_int_equal(c.nfiles, 2);
  agt_config_release(&c);
}

/* The overlay search stops at the repository's root (.git). */
static void test_overlay_stops_at_git(void **state)
{
  cleanup_free char *outer = path_in("outer/.agt");
  cleanup_free char *outer_file = path_in("outer/.agt/config.yaml");
  cleanup_free char *inner = path_in("outer/inner/.git");
  cleanup_free char *cwd = path_in("outer/inner");
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_mkdir_p(outer, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(inner, 0755, NULL), 0);
  write_file(outer_file, "vm:\n  cpus: 9\n");
  p.user_file = NULL;
  p.cwd = cwd;
  setenv("XDG_CONFIG_HOME", tmpdir, 1); /* no agt/config.yaml there */
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_CPUS), "4");
  assert_int_equal(c.nfiles, 0);
  agt_config_release(&c);
  unsetenv("XDG_CONFIG_HOME");
}

static void test_env_and_flags(void **state)
{
  cleanup_free char *user = path_in("env.yaml");
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;
  cleanup_free char *where = NULL;

  (void)state;
  write_file(user, "target: ssh://me@box\nvm:\n  name: fromfile\n");
  setenv("AGT_CONFIG", user, 1);
  setenv("AGT_INSTANCE", "fromenv", 1);
  p.no_repo = 1;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_VM_NAME), "fromenv");
  assert_string_equal(agt_config_get(&c, AGT_CFG_TARGET), "ssh://me@box");
  where = agt_cfg_origin_str(&c.v[AGT_CFG_VM_NAME].origin);
  assert_string_equal(where, "env AGT_INSTANCE");
  assert_int_equal(agt_config_set(&c, AGT_CFG_TARGET, "local", AGT_CFG_FLAG, "--target", &err), 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_TARGET), "local");
  assert_int_equal(
      agt_config_set(&c, AGT_CFG_VM_NAME, "bad name", AGT_CFG_FLAG, "--instance", &err), -1);
  assert_non_null(strstr(err->msg, "option --instance"));
  agt_error_release(&err);
  agt_config_release(&c);
  unsetenv("AGT_CONFIG");
  unsetenv("AGT_INSTANCE");
}

/* An explicit config file that does not exist is an error; the default one may be absent. */
static void test_missing_explicit_file(void **state)
{
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  p.user_file = "/nonexistent/agt.yaml";
  p.no_repo = 1;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  assert_non_null(strstr(err->msg, "/nonexistent/agt.yaml"));
  /* it says which setting named the file, and that it is agt's config */
  assert_string_equal(err->msg,
                      "--config: open '/nonexistent/agt.yaml': No such file or directory");
  assert_int_equal(err->kind, AGT_E_INVALID); /* a config error: agt exits 2 */
  agt_error_release(&err);
  agt_config_release(&c);

  p.user_file = NULL;
  setenv("AGT_CONFIG", "/nonexistent/env.yaml", 1);
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  unsetenv("AGT_CONFIG");
  assert_string_equal(err->msg,
                      "$AGT_CONFIG: open '/nonexistent/env.yaml': No such file or directory");
  agt_error_release(&err);
  agt_config_release(&c);
}

struct bad {
  const char *yaml;
  const char *want; /* after "file:" */
};

static void test_errors(void **state)
{
  static const struct bad cases[] = {
      {"vm:\n  cpu: 2\n", ":2:3: unknown key 'vm.cpu'"},
      {"vms:\n  cpus: 2\n", ":1:1: unknown key 'vms'"},
      {"vm:\n  cpus: two\n", ":2:9: vm.cpus 'two' is not a number"},
      {"vm:\n  cpus: [1, 2]\n", ":2:9: 'vm.cpus' must be a single value, not a list"},
      {"vm:\n  memory: 4X\n", ":2:11: vm.memory '4X': unknown unit"},
      {"vm:\n  memory: 4096\n", ":2:11: 'vm.memory' 4096 is less than 1MiB"},
      {"vm:\n  vm_type: kvm\n", ":2:12: 'vm.vm_type' must be one of auto|vz|qemu, not 'kvm'"},
      {"vm:\n  name: -x\n", ":2:9: vm name '-x'"},
      {"jail:\n  agent: My_Agent\n",
       ":2:10: 'jail.agent' must name an agent profile (1-32 of [a-z0-9-], not starting with "
       "'-'), not 'My_Agent'"},
      {"jail:\n  agent: [shell]\n", ":2:10: 'jail.agent' must be a single value, not a list"},
      {"vm: 3\n", ":1:5: 'vm' must be a mapping"},
      {"vm:\n  mounts: /x\n", ":2:11: 'vm.mounts' must be a list"},
      {"vm:\n  mounts:\n    - {writable: true}\n", ":3:7: 'vm.mounts' entry needs a location"},
      {"vm:\n  mounts:\n    - {location: /a, rw: true}\n", ":3:22: unknown key 'vm.mounts[].rw'"},
      {"vm:\n  mounts:\n    - {location: /a, mount_point: rel}\n",
       ":3:35: 'vm.mounts' mount_point 'rel' must be an absolute path"},
      {"jail:\n  env: [\"A B=1\"]\n",
       ":2:9: 'jail.env' entry: the name before '=' is not a variable name: it has a character"},
      {"jail:\n  env: [\"=s3cr3t\"]\n",
       ":2:9: 'jail.env' entry: the name before '=' is not a variable name: it is empty"},
      {"jail:\n  env: [s3cr3t-token]\n", ":2:9: 'jail.env' entry: the name is not a variable"},
      {"jail:\n  env: [{A: 1}]\n", ":2:9: each of 'jail.env' is NAME=VALUE or NAME"},
      {"jail:\n  limits:\n    pids: x\n", ":3:11: jail.limits.pids 'x' is not a number"},
      /* 0 once meant no limit; that is written "unlimited" */
      {"jail:\n  limits:\n    memory: 0\n",
       ":3:13: jail.limits.memory 0 is not a limit: write 'unlimited' for none"},
      {"jail:\n  limits:\n    pids: 0\n", ":3:11: jail.limits.pids 0 is not a limit"},
      {"jail:\n  limits:\n    cpu: 0\n", ":3:10: jail.limits.cpu 0 is not a limit"},
      {"jail:\n  limits:\n    cpu: none\n", ":3:10: jail.limits.cpu 'none' is not a number"},
      /* the jail spec's bounds, named with the file's line */
      {"jail:\n  limits:\n    memory: 4M\n",
       ":3:13: jail.limits.memory must be at least 8 MiB, or \"unlimited\""},
      {"jail:\n  limits:\n    cpu: 5\n", ":3:10: jail.limits.cpu must be at least 10"},
      {"jail:\n  limits:\n    nofile: 2000000\n",
       ":3:13: jail.limits.nofile must be at most 1048576"},
      {"jail:\n  limits:\n    disk: 1M\n", ":3:11: jail.limits.disk must be at least 16 MiB"},
      {"jail:\n  limits:\n    log: 1K\n", ":3:10: jail.limits.log must be at least 4096 bytes"},
      {"target: vm1\n", ":1:9: 'target' must be lima[:NAME]"},
      {"lima:\n  start_timeout: 5 min\n", ":2:18: lima.start_timeout '5 min'"},
      {"vm:\n  cpus: 2\n  bad: [\n", ":4:1: did not find expected node content"},
      {"jail:\n  detach_keys: ctrl-pp\n",
       ":2:16: 'jail.detach_keys': detach keys 'ctrl-pp': 'ctrl-pp'"},
      {"jail:\n  detach_keys: a,\n",
       ":2:16: 'jail.detach_keys': detach keys 'a,': a key is missing"},
      {"agents: [opencode]\n", ":1:9: 'agents' must be a mapping of agent names"},
      {"agents:\n  Open Code: {}\n", ":2:3: 'agents': agent name 'Open Code'"},
      {"agents:\n  opencode: [a]\n",
       ":2:13: 'agents.opencode' must be a mapping (net, allow, version)"},
      {"agents:\n  opencode:\n    nett: open\n",
       ":3:5: unknown key 'agents.opencode.nett' (net, allow, version)"},
      {"agents:\n  opencode:\n    net: closed\n",
       ":3:10: 'agents.opencode.net' must be one of none|allow|open, not 'closed'"},
      {"agents:\n  opencode:\n    allow: api.openai.com\n",
       ":3:12: 'agents.opencode.allow' must be a list"},
      {"agents:\n  opencode:\n    allow: [https://api.openai.com]\n",
       ":3:13: 'agents.opencode.allow' entry 'https://api.openai.com' is not HOST[:PORT]"},
      {"agents:\n  opencode:\n    allow: [\"!api.openai.com:443\"]\n",
       ":3:13: 'agents.opencode.allow' entry '!api.openai.com:443' removes nothing"},
      /* a NUL would cut the value short where it is used as a C string */
      {"vm:\n  name: \"good\\0evil\"\n", ":2:9: a value contains a NUL character"},
      {"rootfs: \"\\0abc\"\n", ":1:9: a value contains a NUL character"},
  };
  cleanup_free char *file = path_in("bad.yaml");

  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct agt_config c;
    agt_error_t err = NULL;
    cleanup_free char *want = xasprintf("%s%s", file, cases[i].want);

    write_file(file, cases[i].yaml);
    agt_config_init(&c);
    assert_int_equal(agt_config_load_file(&c, file, NULL, &err), -1);
    assert_non_null(err);
    if (strncmp(err->msg, want, strlen(want)) != 0)
      fail_msg("case %zu: got '%s', want prefix '%s'", i, err->msg, want);
    if (strstr(err->msg, "s3cr3t"))
      fail_msg("case %zu: the error shows what may be a secret: '%s'", i, err->msg);
    agt_error_release(&err);
    agt_config_release(&c);
  }
}

/* A lifted limit is written "unlimited" (memory, pids, cpu). */
static void test_unlimited(void **state)
{
  struct agt_config c;
  agt_error_t err = NULL;
  cleanup_free char *file = path_in("unlimited.yaml");

  (void)state;
  write_file(file, "jail:\n  limits:\n    memory: unlimited\n    pids: unlimited\n"
                   "    cpu: unlimited\n");
  agt_config_init(&c);
  if (agt_config_load_file(&c, file, NULL, &err) < 0)
    fail_msg("%s", err->msg);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_MEMORY), "unlimited");
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_PIDS), "unlimited");
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_CPU), "unlimited");
  agt_config_release(&c);
}

/* jail.env: NAME alone (its value from agt's environment, read by agt jail run) in the
 * user's file; a repository's overlay may set values but not read the user's environment. */
static void test_env_names(void **state)
{
  cleanup_free char *user = path_in("envnames.yaml");
  cleanup_free char *repo = path_in("envrepo");
  cleanup_free char *git = path_in("envrepo/.git");
  cleanup_free char *dotagt = path_in("envrepo/.agt");
  cleanup_free char *overlay = path_in("envrepo/.agt/config.yaml");
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;
  cleanup_free char *want = NULL;

  (void)state;
  write_file(user, "jail:\n  env: [A=1, GITHUB_TOKEN]\n");
  assert_int_equal(agt_mkdir_p(git, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(dotagt, 0755, NULL), 0);
  write_file(overlay, "jail:\n  env: [B=2]\n");
  p.user_file = user;
  p.cwd = repo;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_int_equal(c.nenv, 3);
  assert_string_equal(c.env[1].text, "GITHUB_TOKEN");
  assert_string_equal(c.env[2].text, "B=2");
  agt_config_release(&c);

  write_file(overlay, "jail:\n  env:\n    - B=2\n    - AWS_SECRET_ACCESS_KEY\n");
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  want = xasprintf("%s:4:7: 'jail.env' entry 'AWS_SECRET_ACCESS_KEY' takes its value from agt's "
                   "environment, which only the user's config may do",
                   overlay);
  if (strncmp(err->msg, want, strlen(want)) != 0)
    fail_msg("got '%s', want prefix '%s'", err->msg, want);
  agt_error_release(&err);
  agt_config_release(&c);
}

/* jail.mounts: paths or {path, writable}, the user's first, then the overlay's, which may
 * name only the repository's own files; jail.home: persistent (default) or none. */
static void test_jail_mounts(void **state)
{
  cleanup_free char *user = path_in("jmounts.yaml");
  cleanup_free char *repo = path_in("jmrepo");
  cleanup_free char *git = path_in("jmrepo/.git");
  cleanup_free char *dotagt = path_in("jmrepo/.agt");
  cleanup_free char *overlay = path_in("jmrepo/.agt/config.yaml");
  cleanup_free char *want = NULL;
  cleanup_free char *where = NULL;
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  write_file(user, "jail:\n  mounts:\n    - /srv/data\n    - {path: ~/notes, writable: true}\n");
  assert_int_equal(agt_mkdir_p(git, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(dotagt, 0755, NULL), 0);
  write_file(overlay, "jail:\n  home: none\n  mounts:\n    - docs\n");
  p.user_file = user;
  p.cwd = repo;
  agt_config_init(&c);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_HOME), "persistent");
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_HOME), "none");
  assert_int_equal(c.njmounts, 3);
  assert_string_equal(c.jmounts[0].path, "/srv/data");
  assert_false(c.jmounts[0].writable);
  want = xasprintf("%s/notes", getenv("HOME"));
  assert_string_equal(c.jmounts[1].path, want);
  assert_true(c.jmounts[1].writable);
  free(want);
  want = xasprintf("%s/docs", repo);
  assert_string_equal(c.jmounts[2].path, want);
  where = agt_cfg_origin_str(&c.jmounts[2].origin);
  free(want);
  want = xasprintf("%s:4:7", overlay);
  assert_string_equal(where, want);
  agt_config_release(&c);

  const char *const outside[] = {"/etc", "~/.ssh", "../sibling", "docs/../../x"};
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
    cleanup_free char *text = xasprintf("jail:\n  mounts:\n    - %s\n", outside[i]);
    write_file(overlay, text);
    agt_config_init(&c);
    assert_int_equal(agt_config_load(&c, &p, &err), -1);
    free(want);
    want = xasprintf("%s:3:7: 'jail.mounts' entry '%s' is outside the repository", overlay,
                     outside[i]);
    if (strncmp(err->msg, want, strlen(want)) != 0)
      fail_msg("got '%s', want prefix '%s'", err->msg, want);
    agt_error_release(&err);
    agt_config_release(&c);
  }
  write_file(overlay, "jail:\n  mounts:\n    - {path: docs, mode: rw}\n");
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  assert_non_null(strstr(err->msg, "unknown key 'jail.mounts[].mode' (path, writable)"));
  agt_error_release(&err);
  agt_config_release(&c);
  write_file(overlay, "jail:\n  home: always\n");
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  assert_non_null(strstr(err->msg, ":2:9:"));
  agt_error_release(&err);
  agt_config_release(&c);
}

/* jail.agent names any profile: which ones exist is agt jail run's to say (profiles may be
 * the user's own), so a name the tree does not know is taken here. */
static void test_jail_agent_any_profile(void **state)
{
  cleanup_free char *user = path_in("agent.yaml");
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  write_file(user, "jail:\n  agent: my-agent-2\n");
  p.user_file = user;
  p.no_repo = 1;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_AGENT), "my-agent-2");
  agt_config_release(&c);
}

static void test_jail_tools(void **state)
{
  cleanup_free char *user = path_in("tools.yaml");
  cleanup_free char *repo = path_in("toolrepo");
  cleanup_free char *git = path_in("toolrepo/.git");
  cleanup_free char *dotagt = path_in("toolrepo/.agt");
  cleanup_free char *overlay = path_in("toolrepo/.agt/config.yaml");
  cleanup_free char *where = NULL, *want = NULL;
  struct agt_config_paths p = {0};
  struct agt_config c;
  agt_error_t err = NULL;

  (void)state;
  write_file(user, "jail:\n  tools:\n    - jq\n    - /opt/x/bin/rg\n    - jq\n");
  assert_int_equal(agt_mkdir_p(git, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(dotagt, 0755, NULL), 0);
  write_file(overlay, "jail:\n  tools: [git, jq]\n");
  p.user_file = user;
  p.cwd = repo;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_int_equal(c.ntools, 3); /* lists append; one named twice keeps its first place */
  assert_string_equal(c.tools[0].text, "jq");
  assert_string_equal(c.tools[1].text, "/opt/x/bin/rg");
  assert_string_equal(c.tools[2].text, "git");
  where = agt_cfg_origin_str(&c.tools[2].origin);
  want = xasprintf("%s:2:11", overlay);
  assert_string_equal(where, want);
  agt_config_release(&c);

  /* a repository names tools, never paths */
  write_file(overlay, "jail:\n  tools:\n    - /etc/shadow\n");
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), -1);
  assert_non_null(strstr(err->msg, ":3:7: 'jail.tools' entry '/etc/shadow': a repository's"));
  agt_error_release(&err);
  agt_config_release(&c);
  write_file(overlay, "jail: {}\n");

  const char *const bad[] = {"a/b",       "-x",           ".hidden",
                             "/usr/bin/", "/usr//bin/jq", "/usr/../bin/jq",
                             "\"a b\"",   "[jq]",         "''"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cleanup_free char *text = xasprintf("jail:\n  tools:\n    - %s\n", bad[i]);
    write_file(user, text);
    agt_config_init(&c);
    assert_int_equal(agt_config_load(&c, &p, &err), -1);
    if (strstr(err->msg, ":3:7: ") == NULL || strstr(err->msg, "jail.tools") == NULL)
      fail_msg("'%s': got '%s'", bad[i], err->msg);
    agt_error_release(&err);
    agt_config_release(&c);
  }
  assert_null(agt_config_tool_problem("python3.11", 0));
  assert_null(agt_config_tool_problem("g++", 0));
  assert_null(agt_config_tool_problem("/usr/lib/git-core/git", 0));
  assert_non_null(agt_config_tool_problem("/usr/lib/git-core/git", 1));
  assert_non_null(agt_config_tool_problem("", 0));
  assert_non_null(agt_config_tool_problem("/", 0));
  assert_non_null(agt_config_tool_problem("/usr/bin/.", 0));
}

static void test_show(void **state)
{
  cleanup_free char *user = path_in("show.yaml");
  cleanup_free char *out = NULL, *want = NULL;
  size_t len = 0;
  struct agt_config c;
  agt_error_t err = NULL;
  FILE *f;

  (void)state;
  write_file(user, "vm:\n  disk: 80GiB\n  mounts: [/w]\n");
  agt_config_init(&c);
  assert_int_equal(agt_config_load_file(&c, user, NULL, &err), 0);
  f = open_memstream(&out, &len);
  agt_config_show(&c, f);
  fclose(f);
  want = xasprintf("# %s:2:9", user);
  assert_non_null(strstr(out, "  disk: 80GiB"));
  assert_non_null(strstr(out, want));
  assert_non_null(strstr(out, "  name: agt_agent_sandbox"));
  assert_non_null(strstr(out, "# default"));
  assert_non_null(strstr(out, "    - location: /w"));
  /* a boolean, as CONFIG.md's sample writes it, not the string "false" */
  assert_non_null(strstr(out, "      writable: false\n"));
  assert_non_null(strstr(out, "  limits:\n    memory:"));
  free(out);
  out = NULL;
  f = open_memstream(&out, &len);
  agt_config_show_json(&c, f);
  fclose(f);
  assert_non_null(strstr(out, "\"vm.disk\": {"));
  assert_non_null(strstr(out, "\"value\": \"80GiB\""));
  agt_config_release(&c);
}

/* agents.NAME: net replaces, allow appends (the user's file first, then the overlay);
 * jail.detach_keys: a default, overridden by a file. */
static void test_agents(void **state)
{
  cleanup_free char *user = path_in("agents-user.yaml");
  cleanup_free char *repo = path_in("agents-repo");
  cleanup_free char *dotagt = path_in("agents-repo/.agt");
  cleanup_free char *overlay = path_in("agents-repo/.agt/config.yaml");
  cleanup_free char *git = path_in("agents-repo/.git");
  cleanup_free char *out = NULL, *where = NULL, *expect = NULL;
  struct agt_config_paths p = {0};
  const struct agt_cfg_agent *a;
  struct agt_config c;
  agt_error_t err = NULL;
  size_t len = 0;
  FILE *f;

  (void)state;
  agt_config_init(&c);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_DETACH_KEYS), "ctrl-],ctrl-]");
  a = agt_config_agent(&c, "opencode"); /* what opencode needs to work at all */
  assert_non_null(a);
  assert_int_equal(a->nallow, 3);
  assert_string_equal(a->allow[0].text, "opencode.ai:443");
  assert_string_equal(a->allow[1].text, "models.opencode.ai:443");
  assert_string_equal(a->allow[2].text, "registry.npmjs.org:443");
  assert_int_equal(a->allow[0].origin.src, AGT_CFG_DEFAULT);
  assert_null(agt_config_agent(&c, "shell"));
  agt_config_release(&c);

  write_file(user, "agents:\n"
                   "  opencode:\n"
                   "    net: allow\n"
                   "    allow:\n"
                   "      - models.dev:443\n"
                   "      - \"!registry.npmjs.org:443\"\n"
                   "      - \"*.opencode.ai:443\"\n"
                   "      - opencode.ai:443\n" /* a default already: not twice */
                   "  shell:\n"
                   "    net: none\n"
                   "jail:\n"
                   "  detach_keys: ctrl-x,x\n");
  assert_int_equal(agt_mkdir_p(git, 0755, NULL), 0);
  assert_int_equal(agt_mkdir_p(dotagt, 0755, NULL), 0);
  write_file(overlay, "agents:\n"
                      "  opencode:\n"
                      "    net: open\n"
                      "    allow: [10.0.0.5:8080]\n");
  p.user_file = user;
  p.cwd = repo;
  agt_config_init(&c);
  assert_int_equal(agt_config_load(&c, &p, &err), 0);
  assert_null(err);
  assert_string_equal(agt_config_get(&c, AGT_CFG_JAIL_DETACH_KEYS), "ctrl-x,x");
  a = agt_config_agent(&c, "opencode");
  assert_non_null(a);
  assert_string_equal(a->net.text, "open");
  where = agt_cfg_origin_str(&a->net.origin);
  expect = xasprintf("%s:3:10", overlay);
  assert_string_equal(where, expect);
  /* the defaults, less the one removed, then the user's, then the repository's */
  assert_int_equal(a->nallow, 5);
  assert_string_equal(a->allow[0].text, "opencode.ai:443");
  assert_string_equal(a->allow[1].text, "models.opencode.ai:443");
  assert_string_equal(a->allow[2].text, "models.dev:443");
  assert_string_equal(a->allow[3].text, "*.opencode.ai:443");
  assert_string_equal(a->allow[4].text, "10.0.0.5:8080");
  a = agt_config_agent(&c, "shell");
  assert_non_null(a);
  assert_string_equal(a->net.text, "none");
  assert_int_equal(a->nallow, 0);
  assert_null(agt_config_agent(&c, "claude"));

  f = open_memstream(&out, &len);
  agt_config_show(&c, f);
  fclose(f);
  assert_non_null(strstr(out, "agents:\n  opencode:\n    net: open"));
  assert_non_null(strstr(out, "      - models.dev:443"));
  assert_non_null(strstr(out, "      - \"*.opencode.ai:443\""));
  assert_non_null(strstr(out, "  detach_keys: ctrl-x,x"));
  free(out);
  out = NULL;
  f = open_memstream(&out, &len);
  agt_config_show_json(&c, f);
  fclose(f);
  assert_non_null(strstr(out, "\"agents\": {"));
  assert_non_null(strstr(out, "\"value\": \"10.0.0.5:8080\""));
  agt_config_release(&c);
}

static void test_duration(void **state)
{
  uint64_t s = 0;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_parse_duration("t", "90", &s, &err), 0);
  assert_int_equal(s, 90);
  assert_int_equal(agt_parse_duration("t", "10m", &s, &err), 0);
  assert_int_equal(s, 600);
  assert_int_equal(agt_parse_duration("t", "2h", &s, &err), 0);
  assert_int_equal(s, 7200);
  assert_int_equal(agt_parse_duration("t", "1d", &s, &err), -1);
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_defaults, setup),
      cmocka_unit_test_setup(test_lima_home_from_env, setup),
      cmocka_unit_test_setup(test_overlay, setup),
      cmocka_unit_test_setup(test_overlay_stops_at_git, setup),
      cmocka_unit_test_setup(test_env_and_flags, setup),
      cmocka_unit_test_setup(test_missing_explicit_file, setup),
      cmocka_unit_test_setup(test_errors, setup),
      cmocka_unit_test_setup(test_unlimited, setup),
      cmocka_unit_test_setup(test_env_names, setup),
      cmocka_unit_test_setup(test_jail_mounts, setup),
      cmocka_unit_test_setup(test_jail_tools, setup),
      cmocka_unit_test_setup(test_jail_agent_any_profile, setup),
      cmocka_unit_test_setup(test_show, setup),
      cmocka_unit_test_setup(test_duration, setup),
      cmocka_unit_test_setup(test_agents, setup),
  };
  int r;

  if (mkdtemp(tmpdir) == NULL)
    return 1;
  r = cmocka_run_group_tests(tests, NULL, NULL);
  {
    cleanup_free char *rm = xasprintf("rm -rf '%s'", tmpdir);
    if (system(rm) != 0)
      r = r ? r : 1;
  }
  return r;
}
