/* Agent profiles (host/profile.c): the tree's profiles load and say what docs/AGENTS.md
 * says; each kind of bad input is refused with file:line:column and the key; the user's
 * directory replaces a profile of the same name; templates expand per architecture. */
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

#include "agt_paths.h"
#include "cleanup.h"
#include "config.h"
#include "layers.h"
#include "profile.h"
#include "xalloc.h"

static const char good[] = "name: demo\n"
                           "description: a demo\n"
                           "runtime: node\n"
                           "package:\n"
                           "  npm: \"@demo/cli\"\n"
                           "  version: \"1.2.3\"\n"
                           "  bin: \"@demo/cli/dist/cli.js\"\n"
                           "command: [demo]\n"
                           "batch: [demo, -p, \"{prompt}\"]\n"
                           "skip_permissions: [--yolo]\n"
                           "env:\n"
                           "  key: DEMO_API_KEY\n"
                           "  base_url: DEMO_BASE_URL\n"
                           "  set: {DEMO_TELEMETRY: \"0\"}\n"
                           "hosts: [api.demo.dev, \"*.demo.dev\"]\n"
                           "home: [.demo, .config/demo.json]\n"
                           "api: openai-chat\n"
                           "files:\n"
                           "  - path: .demo/config.json\n"
                           "    content: '{\"url\": \"{base_url}\"}'\n";

static void test_good(void **state)
{
  struct agt_profile *p = NULL;
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_profile_parse("x/demo.yaml", good, strlen(good), &p, &err), 0);
  assert_null(err);
  assert_string_equal(p->name, "demo");
  assert_int_equal(p->kind, AGT_PROFILE_AGENT);
  assert_int_equal(p->runtime, AGT_RUNTIME_NODE);
  assert_string_equal(p->npm, "@demo/cli");
  assert_string_equal(p->version, "1.2.3");
  assert_string_equal(p->install, "@demo/cli@{version}"); /* the default */
  assert_string_equal(p->command[0], "demo");
  assert_null(p->command[1]);
  assert_string_equal(p->batch[2], "{prompt}");
  assert_string_equal(p->skip_permissions[0], "--yolo");
  assert_string_equal(p->key_env, "DEMO_API_KEY");
  assert_string_equal(p->base_url_env, "DEMO_BASE_URL");
  assert_string_equal(p->set_env[0], "DEMO_TELEMETRY=0");
  assert_string_equal(p->hosts[1], "*.demo.dev");
  assert_string_equal(p->home[1], ".config/demo.json");
  assert_int_equal(p->api, AGT_API_OPENAI_CHAT);
  assert_int_equal(p->nfiles, 1);
  assert_string_equal(p->files[0].path, ".demo/config.json");
  agt_profile_free(p);
}

/* Every bad profile names the file, the line and column, and what is wrong. */
static void test_bad(void **state)
{
  static const struct {
    const char *text;
    const char *want;
  } bad[] = {
      {"", "x/demo.yaml: empty file"},
      {"- a\n", "x/demo.yaml:1:1: a profile must be a mapping"},
      {"name: demo\ncommand: [a]\ncomand: [b]\n", "x/demo.yaml:3:1: unknown key 'comand'"},
      {"name: demo\nname: demo\ncommand: [a]\n", "x/demo.yaml:2:1: key 'name' given twice"},
      {"command: [a]\n", "x/demo.yaml:1:1: 'name' is missing"},
      {"name: other\ncommand: [a]\n",
       "x/demo.yaml:1:7: name 'other' must be the file's name without .yaml ('demo')"},
      {"name: Demo\ncommand: [a]\n", "x/demo.yaml:1:7: name 'Demo' must be 1-32 of [a-z0-9-]"},
      {"name: demo\n", "x/demo.yaml:1:1: 'command' is missing"},
      {"name: demo\ncommand: a\n", "x/demo.yaml:2:10: 'command' must be a list of strings"},
      {"name: demo\ncommand: []\n", "x/demo.yaml:2:10: 'command' must not be empty"},
      {"name: demo\ncommand: [a, [b]]\n", "x/demo.yaml:2:14: 'command'[1] must be a non-empty"},
      {"name: demo\ncommand: [a]\nruntime: java\n",
       "x/demo.yaml:3:10: 'runtime' must be one of none, native, node, not 'java'"},
      {"name: demo\ncommand: [a]\nruntime: node\n",
       "x/demo.yaml:1:1: runtime node needs a 'package' (npm, version, bin)"},
      {"name: demo\ncommand: [a]\nruntime: native\npackage: {npm: a, bin: a}\n",
       "x/demo.yaml:4:10: package: 'version' (the pinned version) is missing"},
      {"name: demo\ncommand: [a]\nruntime: native\npackage: {npm: a, version: \"1\", bin: a, "
       "pin: 2}\n",
       "x/demo.yaml:4:41: package: unknown key 'pin'"},
      {"name: demo\ncommand: [a]\nruntime: native\npackage: {npm: a, version: \"1 2\", bin: a}\n",
       "x/demo.yaml:4:28: package: version '1 2' is not a version"},
      {"name: demo\ncommand: [a]\nruntime: native\npackage: {npm: a, version: \"1\", bin: /a}\n",
       "x/demo.yaml:4:38: package: bin '/a' must be relative to node_modules"},
      {"name: demo\ncommand: [a]\npackage: {npm: a, version: \"1\", bin: a}\n",
       "x/demo.yaml:3:10: 'package' needs runtime native or node"},
      {"name: demo\ncommand: [a]\nbatch: [a, -p]\n",
       "x/demo.yaml:3:8: 'batch' must hold {prompt} in exactly one element"},
      {"name: demo\ncommand: [a]\nenv: {key: 9KEY}\n",
       "x/demo.yaml:3:12: env: key '9KEY' is not a variable name"},
      {"name: demo\ncommand: [a]\nenv: {keys: K}\n", "x/demo.yaml:3:7: env: unknown key 'keys'"},
      {"name: demo\ncommand: [a]\nenv: {set: {A-B: x}}\n",
       "x/demo.yaml:3:13: env: set: 'A-B' is not a variable name"},
      {"name: demo\ncommand: [a]\nenv: {set: {A: [x]}}\n",
       "x/demo.yaml:3:16: env: set: A: the value must be a string"},
      {"name: demo\ncommand: [a]\nhosts: [Api.Demo]\n",
       "x/demo.yaml:3:8: hosts: 'Api.Demo' is not HOST"},
      {"name: demo\ncommand: [a]\nhome: [../etc]\n",
       "x/demo.yaml:3:7: home '../etc' must be a clean path under $HOME"},
      {"name: demo\ncommand: [a]\nhome: [/etc]\n", "x/demo.yaml:3:7: home '/etc' must be relative"},
      {"name: demo\ncommand: [a]\napi: grpc\n", "x/demo.yaml:3:6: 'api' must be one of none,"},
      {"name: demo\ncommand: [a]\nfiles: [{path: a}]\n",
       "x/demo.yaml:3:9: files[0] (a): 'content' is missing"},
      {"name: demo\ncommand: [a]\nfiles: [{path: a/../../b, content: x}]\n",
       "x/demo.yaml:3:16: files[0] 'a/../../b' must be a clean path"},
      {"name: demo\ncommand: [a]\nfiles: {path: a}\n",
       "x/demo.yaml:3:8: 'files' must be a list of {path, content}"},
      {"name: demo\nkind: runtime\ncommand: [a]\nruntime: native\npackage: {npm: a, version: "
       "\"1\", bin: a}\n",
       "x/demo.yaml:1:1: a runtime profile runs nothing"},
      {"name: demo\ncommand: [a\n", "x/demo.yaml:3:1: did not find expected ',' or ']'"},
  };
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct agt_profile *p = (struct agt_profile *)1;
    assert_int_equal(agt_profile_parse("x/demo.yaml", bad[i].text, strlen(bad[i].text), &p, &err),
                     -1);
    assert_null(p);
    assert_non_null(err);
    if (strstr(err->msg, bad[i].want) != err->msg)
      fail_msg("case %zu: got '%s', want it to start with '%s'", i, err->msg, bad[i].want);
    agt_error_release(&err);
  }
  /* not NAME.yaml */
  assert_int_equal(
      agt_profile_parse("x/demo.yml", good, strlen(good), &(struct agt_profile *){0}, &err), -1);
  assert_string_equal(err->msg, "x/demo.yml: a profile's file name must be NAME.yaml");
  agt_error_release(&err);
}

static void test_expand(void **state)
{
  static const char text[] = "name: demo\nruntime: native\ncommand: [demo]\npackage:\n"
                             "  npm: \"@demo/cli\"\n  version: \"1.0.0\"\n"
                             "  install: \"@demo/cli@{version}-linux-{arch}\"\n"
                             "  bin: \"@demo/cli/vendor/{march}-unknown-linux-musl/demo\"\n";
  struct agt_profile *p = NULL;
  agt_error_t err = NULL;
  cleanup_free char *a = NULL, *b = NULL, *c = NULL;

  (void)state;
  assert_int_equal(agt_profile_parse("demo.yaml", text, strlen(text), &p, &err), 0);
  a = agt_profile_expand(p, p->install, NULL, "x86_64", &err);
  assert_string_equal(a, "@demo/cli@1.0.0-linux-x64");
  b = agt_profile_expand(p, p->bin, "2.0.0", "aarch64", &err);
  assert_string_equal(b, "@demo/cli/vendor/aarch64-unknown-linux-musl/demo");
  c = agt_profile_expand(p, p->install, "2.0.0", "arm64", &err);
  assert_string_equal(c, "@demo/cli@2.0.0-linux-arm64");
  assert_null(agt_profile_expand(p, p->install, NULL, "riscv64", &err));
  assert_string_equal(err->msg, "architecture 'riscv64' has no npm packages (x86_64, aarch64)");
  agt_error_release(&err);
  agt_profile_free(p);
}

/* The tree's profiles: all load, each agent of the issue is there with its package. */
static void test_tree(void **state)
{
  const char *dirs[] = {AGT_SOURCE_ROOT "/agents"};
  struct agt_profile_set set;
  agt_error_t err = NULL;
  static const struct {
    const char *name, *npm;
    enum agt_profile_runtime rt;
  } want[] = {
      {"claude", "@anthropic-ai/claude-code", AGT_RUNTIME_NATIVE},
      {"codex", "@openai/codex", AGT_RUNTIME_NATIVE},
      {"gemini", "@google/gemini-cli", AGT_RUNTIME_NODE},
      {"pi", "@mariozechner/pi-coding-agent", AGT_RUNTIME_NODE},
      {"node", "node-linux-{arch}", AGT_RUNTIME_NATIVE},
  };

  (void)state;
  if (agt_profiles_load(dirs, 1, &set, &err) < 0)
    fail_msg("%s", err->msg);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const struct agt_profile *p = agt_profiles_find(&set, want[i].name);
    assert_non_null(p);
    assert_string_equal(p->npm, want[i].npm);
    assert_int_equal(p->runtime, want[i].rt);
  }
  assert_int_equal(agt_profiles_find(&set, "shell")->runtime, AGT_RUNTIME_NONE);
  assert_int_equal(agt_profiles_find(&set, "opencode")->runtime, AGT_RUNTIME_NONE);
  assert_int_equal(agt_profiles_find(&set, "node")->kind, AGT_PROFILE_RUNTIME);
  assert_int_equal(set.n, 7);
  agt_profiles_release(&set);
}

/* A user's profile replaces the tree's of the same name; a bad one is an error naming it. */
static void test_user_dir(void **state)
{
  char dir[] = "/tmp/agt-profile-XXXXXX";
  const char *dirs[2] = {AGT_SOURCE_ROOT "/agents", dir};
  struct agt_profile_set set;
  agt_error_t err = NULL;
  cleanup_free char *path = NULL;
  FILE *f;

  (void)state;
  assert_non_null(mkdtemp(dir));
  path = xasprintf("%s/shell.yaml", dir);
  f = fopen(path, "w");
  fputs("name: shell\ncommand: [/bin/bash]\n", f);
  fclose(f);
  assert_int_equal(agt_profiles_load(dirs, 2, &set, &err), 0);
  assert_string_equal(agt_profiles_find(&set, "shell")->command[0], "/bin/bash");
  agt_profiles_release(&set);
  f = fopen(path, "w");
  fputs("name: shell\ncommand: [/bin/bash]\nruntime: node\n", f);
  fclose(f);
  assert_int_equal(agt_profiles_load(dirs, 2, &set, &err), -1);
  assert_non_null(strstr(err->msg, "/shell.yaml:1:1: runtime node needs a 'package'"));
  agt_error_release(&err);
  unlink(path);
  rmdir(dir);
}

/* agt agents update's pin: written into the user's config, the rest of it kept, and read
 * back by the config loader as agents.NAME.version. */
static void test_pin_write(void **state)
{
  static const struct {
    const char *before, *after;
    unsigned line;
  } cases[] = {
      {"", "agents:\n  claude:\n    version: \"2.0.0\"\n", 3},
      {"target: local", "target: local\nagents:\n  claude:\n    version: \"2.0.0\"\n", 4},
      {"# mine\nagents:\n  pi:\n    net: none\n",
       "# mine\nagents:\n  claude:\n    version: \"2.0.0\"\n  pi:\n    net: none\n", 4},
      {"agents:\n  claude:\n    allow:\n      - a.b\n",
       "agents:\n  claude:\n    version: \"2.0.0\"\n    allow:\n      - a.b\n", 3},
      {"agents:\n  claude:\n    version: 1.0.0 # old\n",
       "agents:\n  claude:\n    version: \"2.0.0\" # old\n", 3},
      {"agents:\n", "agents:\n  claude:\n    version: \"2.0.0\"\n", 3},
  };
  char dir[] = "/tmp/agt-pin-XXXXXX";
  agt_error_t err = NULL;

  (void)state;
  assert_non_null(mkdtemp(dir));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cleanup_free char *path = xasprintf("%s/sub/config.yaml", dir), *where = NULL, *want = NULL;
    char buf[512] = "";
    struct agt_config c;
    FILE *f;
    if (*cases[i].before) {
      cleanup_free char *sub = xasprintf("%s/sub", dir);
      mkdir(sub, 0755);
      f = fopen(path, "w");
      fputs(cases[i].before, f);
      fclose(f);
    }
    if (agt_layer_pin_write(path, "claude", "2.0.0", &where, &err) < 0)
      fail_msg("case %zu: %s", i, err->msg);
    f = fopen(path, "r");
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    if (strcmp(buf, cases[i].after) != 0)
      fail_msg("case %zu: got\n%s\nwant\n%s", i, buf, cases[i].after);
    want = xasprintf("%s:%u", path, cases[i].line);
    assert_string_equal(where, want);
    agt_config_init(&c);
    if (agt_config_load_file(&c, path, NULL, &err) < 0)
      fail_msg("case %zu: %s", i, err->msg);
    assert_string_equal(agt_config_agent(&c, "claude")->version.text, "2.0.0");
    agt_config_release(&c);
    unlink(path);
  }
  {
    cleanup_free char *path = xasprintf("%s/sub/config.yaml", dir), *where = NULL;
    FILE *f = fopen(path, "w");
    fputs("agents: {claude: {net: none}}\n", f);
    fclose(f);
    assert_int_equal(agt_layer_pin_write(path, "claude", "2.0.0", &where, &err), -1);
    assert_non_null(strstr(err->msg, "is not a block mapping: set agents.claude.version"));
    agt_error_release(&err);
    unlink(path);
  }
  {
    cleanup_free char *sub = xasprintf("%s/sub", dir);
    rmdir(sub);
    rmdir(dir);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),     cmocka_unit_test(test_bad),
      cmocka_unit_test(test_expand),   cmocka_unit_test(test_tree),
      cmocka_unit_test(test_user_dir), cmocka_unit_test(test_pin_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
