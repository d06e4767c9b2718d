/* The rootfs manifest loader: rootfs/default.yaml loads; bad manifests are refused with
 * file:line:column and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "manifest.h"

#ifndef AGT_SOURCE_ROOT
#error "AGT_SOURCE_ROOT must be defined by the build"
#endif

static struct rootfs_manifest *load(const char *text, agt_error_t *err)
{
  return rootfs_manifest_load_string("m.yaml", text, strlen(text), err);
}

/* The manifest must be refused with a message that starts with "m.yaml:LINE:COL: " and
 * contains every one of the NULL-terminated fragments. */
static void refused_at(const char *text, int line, int col, ...)
{
  agt_error_t err = NULL;
  struct rootfs_manifest *m = load(text, &err);
  char where[64];
  va_list ap;
  const char *frag;

  if (m != NULL)
    fail_msg("accepted a bad manifest:\n%s", text);
  assert_non_null(err);
  assert_int_equal(err->kind, AGT_E_INVALID);
  snprintf(where, sizeof where, "m.yaml:%d:%d: ", line, col);
  if (strncmp(err->msg, where, strlen(where)) != 0)
    fail_msg("expected the error at %s got: %s", where, err->msg);
  va_start(ap, col);
  while ((frag = va_arg(ap, const char *)) != NULL)
    if (strstr(err->msg, frag) == NULL)
      fail_msg("the error does not mention \"%s\": %s", frag, err->msg);
  va_end(ap);
  agt_error_release(&err);
}

static const struct rootfs_entry *entry(const struct rootfs_manifest *m, const char *path)
{
  for (size_t i = 0; i < m->n_entries; i++)
    if (strcmp(m->entries[i].path, path) == 0)
      return &m->entries[i];
  fail_msg("no entry %s", path);
  return NULL;
}

static void test_default_manifest(void **state)
{
  agt_error_t err = NULL;
  struct rootfs_manifest *m = rootfs_manifest_load(AGT_SOURCE_ROOT "/rootfs/default.yaml", &err);
  const struct rootfs_entry *e;

  (void)state;
  if (m == NULL)
    fail_msg("rootfs/default.yaml: %s", err->msg);
  assert_string_equal(m->name, "default");
  assert_true(m->merged_usr);

  e = entry(m, "/bin/toybox");
  assert_int_equal(e->kind, ROOTFS_ENTRY_FILE);
  assert_int_equal(e->applets, ROOTFS_APPLETS_TOYBOX);
  /* the project's own build (scripts/toybox-build.sh), and nothing else: no silent
   * fallback to another toybox */
  assert_int_equal(e->n_sources, 1);
  assert_int_equal(e->sources[0].kind, ROOTFS_SRC_HOST);
  assert_string_equal(e->sources[0].paths[0], "/var/cache/agt/toybox/current/toybox");
  assert_null(e->sources[0].paths[1]);

  e = entry(m, "/bin/busybox");
  assert_int_equal(e->applets, ROOTFS_APPLETS_BUSYBOX);
  e = entry(m, "/bin/sh");
  assert_int_equal(e->kind, ROOTFS_ENTRY_SYMLINK);
  assert_string_equal(e->target, "busybox");
  e = entry(m, "/bin/bash");
  assert_string_equal(e->sources[0].paths[0], "/bin/bash-static");

  e = entry(m, "/usr/local/bin/opencode");
  assert_int_equal(e->sources[0].kind, ROOTFS_SRC_ENV);
  assert_string_equal(e->sources[0].env, "AGT_OPENCODE_BIN");
  assert_int_equal(e->sources[1].kind, ROOTFS_SRC_HOST);
  assert_string_equal(e->sources[1].paths[0],
                      "/var/cache/agt/npm/node_modules/opencode-linux-x64/bin/opencode");
  assert_non_null(e->hint);

  entry(m, "/usr/bin/rg");
  entry(m, "/usr/bin/git");
  assert_int_equal(entry(m, "/usr/lib/git-core")->kind, ROOTFS_ENTRY_TREE);
  entry(m, "/etc/ssl/certs/ca-certificates.crt");
  e = entry(m, "/etc/passwd");
  assert_int_equal(e->kind, ROOTFS_ENTRY_CONTENT);
  assert_non_null(strstr(e->content, "agent:x:1000:1000:agent:/home/agent:"));
  e = entry(m, "/etc/hosts");
  assert_non_null(strstr(e->content, "127.0.0.1 localhost"));
  assert_non_null(strstr(e->content, "::1 localhost"));

  int tmp = 0, home = 0;
  for (size_t i = 0; i < m->n_dirs; i++) {
    if (strcmp(m->dirs[i].path, "/tmp") == 0)
      tmp = m->dirs[i].mode == 01777;
    home |= strcmp(m->dirs[i].path, "/home/agent") == 0;
  }
  assert_true(tmp);
  assert_true(home);
  int cxx = 0, gcc = 0;
  for (size_t i = 0; i < m->n_libraries; i++) {
    cxx |= strcmp(m->libraries[i].name, "libstdc++.so.6") == 0;
    gcc |= strcmp(m->libraries[i].name, "libgcc_s.so.1") == 0;
  }
  assert_true(cxx && gcc);
  rootfs_manifest_free(m);
}

static void test_minimal_and_shapes(void **state)
{
  agt_error_t err = NULL;
  struct rootfs_manifest *m;

  (void)state;
  m = load("name: mini\n"
           "layout: plain\n"
           "files:\n"
           "  - path: /etc/motd\n"
           "    mode: 644\n"
           "    content: hi\n"
           "  - path: /bin/x\n"
           "    optional: yes\n"
           "    libs: false\n"
           "    sources: [{host: [/a/b, /c]}, {env: X_BIN}]\n"
           "libraries: [/usr/lib/libfoo.so.1, libbar.so.2]\n",
           &err);
  if (m == NULL)
    fail_msg("%s", err->msg);
  assert_false(m->merged_usr);
  assert_int_equal(m->entries[0].mode, 0644);
  assert_int_equal(m->entries[0].content_len, 2);
  assert_true(m->entries[1].optional);
  assert_false(m->entries[1].libs);
  assert_string_equal(m->entries[1].sources[0].paths[1], "/c");
  assert_null(m->entries[1].sources[0].paths[2]);
  assert_string_equal(m->entries[1].sources[1].env, "X_BIN");
  assert_int_equal(m->n_libraries, 2);
  rootfs_manifest_free(m);
}

static void test_unknown_keys(void **state)
{
  (void)state;
  refused_at("name: x\nfiles: []\nlayut: plain\n", 3, 1, "unknown key 'layut'", NULL);
  refused_at("name: x\n"
             "files:\n"
             "  - path: /a\n"
             "    contnet: hi\n",
             4, 5, "files[0] (/a)", "unknown key 'contnet'", NULL);
  refused_at("name: x\n"
             "files:\n"
             "  - path: /a\n"
             "    sources:\n"
             "      - host: /b\n"
             "        pkg: b\n",
             6, 9, "files[0] (/a).sources[0]", "unknown key 'pkg'", NULL);
  refused_at("name: x\n"
             "files:\n"
             "  - path: /a\n"
             "    sources:\n"
             "      - download:\n"
             "          max_bytes: 10\n"
             "          arch:\n"
             "            x86_64: {url: 'https://e/x', sha256: unknown, md5: 1}\n",
             8, 59, "download.arch.x86_64", "unknown key 'md5'", NULL);
  refused_at("name: x\nname: y\nfiles: []\n", 2, 1, "duplicate key 'name'", NULL);
}

static void test_wrong_types(void **state)
{
  (void)state;
  refused_at("name: x\nfiles: {path: /a}\n", 2, 8, "'files' must be a list", NULL);
  refused_at("name: [x]\nfiles: []\n", 1, 7, "'name' must be a string", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    mode: [1]\n    content: x\n", 4, 11,
             "'mode' must be a string", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    mode: rw\n    content: x\n", 4, 11,
             "'mode' must be an octal mode", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    optional: maybe\n    sources: [{host: /b}]\n", 4,
             15, "'optional' must be true or false", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: {host: /b}\n", 4, 14,
             "'sources' must be a list", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: []\n", 4, 14, "'sources' is empty", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    content: {a: b}\n", 4, 14,
             "'content' must be a string", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    applets: bosybox\n    sources: [{host: /b}]\n", 4,
             14, "'applets' must be 'toybox' or 'busybox'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources:\n"
             "      - download: {max_bytes: lots, arch: {x86_64: {url: 'https://e', sha256: "
             "unknown}}}\n",
             5, 31, "files[0] (/a).sources[0].download",
             "'max_bytes' must be a non-negative integer", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources:\n"
             "      - download: {max_bytes: 9, arch: {x86_64: {url: 'https://e', sha256: abc}}}\n",
             5, 76, "'sha256' must be 64 hex digits or 'unknown'", NULL);
  refused_at(
      "name: x\nfiles:\n  - path: /a\n    sources:\n"
      "      - download: {max_bytes: 9, arch: {x86_64: {url: 'ftp://e', sha256: unknown}}}\n",
      5, 55, "'url' must start with https://", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources:\n      - env: 'A-B'\n", 5, 14,
             "'env' must be a variable name", NULL);
}

static void test_paths(void **state)
{
  (void)state;
  refused_at("name: x\nfiles:\n  - path: usr/bin/x\n    content: x\n", 3, 11, "files[0]",
             "not an absolute path", NULL);
  refused_at("name: x\nfiles:\n  - path: /usr/../etc/x\n    content: x\n", 3, 11, "files[0]",
             "'..'", NULL);
  refused_at("name: x\nfiles:\n  - path: /etc/\n    content: x\n", 3, 11, "ends with '/'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: [{host: ../b}]\n", 4, 22,
             "files[0] (/a).sources[0]", "not an absolute path", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: [{host: [/b, /c/../../d]}]\n", 4, 27,
             "'..'", NULL);
  refused_at("name: x\ndirs: [/tmp, tmp2]\nfiles: []\n", 2, 14, "dirs[1]", "not an absolute path",
             NULL);
  refused_at("name: x\ndirs: [{path: /a/./b}]\nfiles: []\n", 2, 15, "dirs[0]", "'.'", NULL);
  refused_at("name: x\nfiles: []\nlibraries: [lib/../x.so]\n", 3, 13, "libraries[0]",
             "not an absolute path", NULL);
  refused_at("name: x\nfiles:\n  - path: /\n    content: x\n", 3, 11, "must not be '/'", NULL);
}

static void test_semantics(void **state)
{
  (void)state;
  refused_at("name: Bad_Name\nfiles: []\n", 1, 7, "'name'", NULL);
  refused_at("name: x\nfiles:\n  - content: x\n", 3, 5, "files[0]", "'path' is required", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n", 3, 5, "files[0] (/a)",
             "exactly one of 'sources', 'symlink' or 'content'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    symlink: b\n    content: c\n", 3, 5,
             "exactly one of", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: [{}]\n", 4, 15,
             "exactly one of 'host', 'env', 'download' or 'npm'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: [{env: A, package: p}]\n", 4, 33,
             "'package' only goes with 'host'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    mode: '4755'\n    content: x\n", 4, 11,
             "setuid and setgid bits are never allowed", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    mode: '1755'\n    content: x\n", 4, 11, "sticky",
             NULL);
  refused_at("name: x\ndirs: [{path: /a, mode: '2755'}]\nfiles: []\n", 2, 25, "dirs[0]",
             "setuid and setgid", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    symlink: b\n    mode: '0755'\n", 5, 11,
             "'mode' does not go with 'symlink'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    content: b\n    applets: toybox\n", 5, 14,
             "'applets' only goes with 'sources'", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    content: b\n  - path: /a\n    content: c\n", 5, 5,
             "'/a' is already files[0]", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    tree: true\n"
             "    sources: [{download: {max_bytes: 1, arch: {x86_64: {url: 'https://e', "
             "sha256: unknown}}}}]\n",
             5, 15, "a 'tree' cannot come from a download", NULL);
  refused_at("name: x\nfiles:\n  - path: /a\n    sources: [{download: {max_bytes: 1}}]\n", 4, 26,
             "'arch' is required", NULL);
  refused_at("name: x\nfiles: [\n", 3, 1, NULL);
}

/* Refused as "m.yaml: not a rootfs manifest: ..." with no position and no word of the text. */
static void not_a_manifest(const char *text, const char *why, const char *secret)
{
  agt_error_t err = NULL;
  struct rootfs_manifest *m = load(text, &err);

  if (m != NULL)
    fail_msg("accepted a file that is not a manifest:\n%s", text);
  assert_non_null(err);
  assert_int_equal(err->kind, AGT_E_INVALID);
  if (strncmp(err->msg, "m.yaml: not a rootfs manifest: ", 31) != 0 ||
      strstr(err->msg, why) == NULL)
    fail_msg("expected \"m.yaml: not a rootfs manifest: ...%s...\", got: %s", why, err->msg);
  if (strstr(err->msg, secret) != NULL)
    fail_msg("the error quotes the file (\"%s\"): %s", secret, err->msg);
  agt_error_release(&err);
}

/* A manifest path that names some other file (/etc/shadow: agtd reads it as root) gets
 * nothing of that file back: not its first line, not a key, not a value. */
static void test_not_a_manifest(void **state)
{
  (void)state;
  not_a_manifest("root:$y$j9T$secrethash:20228:0:99999:7:::\n"
                 "daemon:*:20228:0:99999:7:::\n",
                 "needs 'name' and 'files' (it has neither)", "secrethash");
  not_a_manifest("root:x:0:0:root:/root:/bin/bash\n", "its top level is a scalar", "root:x");
  not_a_manifest("- secret-item\n", "its top level is a list", "secret-item");
  not_a_manifest("password: hunter2\nname: x\n", "(it has no 'files')", "hunter2");
  not_a_manifest("files: []\ntoken: hunter2\n", "(it has no 'name')", "hunter2");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_manifest),
      cmocka_unit_test(test_minimal_and_shapes),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_semantics),
      cmocka_unit_test(test_not_a_manifest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
