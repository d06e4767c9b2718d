/* The limactl driver: argument vectors, `list --json` parsing against output shaped as
 * Lima documents it (one object per line; extra, missing and odd fields), limactl's
 * messages, and the calls themselves against a scripted limactl. */
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
#include "lima.h"
#include "subprocess.h"
#include "util.h"
#include "xalloc.h"

static void assert_argv(char **got, const char *const *want)
{
  size_t i;

  for (i = 0; want[i]; i++) {
    if (got[i] == NULL)
      fail_msg("argv ends at %zu, want '%s'", i, want[i]);
    if (strcmp(got[i], want[i]) != 0)
      fail_msg("argv[%zu] is '%s', want '%s'", i, got[i], want[i]);
  }
  if (got[i])
    fail_msg("argv has more: '%s'", got[i]);
  agt_strv_free(got);
}

static void test_argv(void **state)
{
  struct agt_lima l;
  char uname_s[] = "uname", a_s[] = "-a";
  char *const cmd[] = {uname_s, a_s, NULL};

  (void)state;
  agt_lima_init(&l, "/opt/lima/bin/limactl", "/Users/me/.lima", "/tmp");
  assert_argv(agt_lima_argv_create(&l, "agt_agent_sandbox", "/c/agt_agent_sandbox.yaml"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "create", "--name=agt_agent_sandbox",
                                    "/c/agt_agent_sandbox.yaml", NULL});
  assert_argv(agt_lima_argv_start(&l, "vm1", 600),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "start", "--timeout=600s", "vm1", NULL});
  assert_argv(agt_lima_argv_start(&l, "vm1", 0),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "start", "vm1", NULL});
  assert_argv(agt_lima_argv_stop(&l, "vm1", 0),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "stop", "vm1", NULL});
  assert_argv(agt_lima_argv_stop(&l, "vm1", 1),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "stop", "--force", "vm1", NULL});
  assert_argv(agt_lima_argv_delete(&l, "vm1", 1),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "delete", "--force", "vm1", NULL});
  assert_argv(agt_lima_argv_clone(&l, "vm1", "gold", NULL),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "clone", "vm1", "gold", NULL});
  {
    char *set[] = {(char *)".param.AgtJailsDisk = \"gold-jails\"", NULL};
    assert_argv(agt_lima_argv_clone(&l, "vm1", "gold", set),
                (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                      "clone", "--set=.param.AgtJailsDisk = \"gold-jails\"", "vm1",
                                      "gold", NULL});
  }
  /* the jails' disk (jails_disk.h): raw, as lima.md's `disk create DISK --size --format` */
  assert_argv(agt_lima_argv_disk_create(&l, "vm1-jails", "50GiB"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "disk", "create", "--size=50GiB", "--format=raw", "vm1-jails",
                                    NULL});
  assert_argv(agt_lima_argv_disk_import(&l, "gold-jails", "/h/_disks/vm1-jails/datadisk"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "disk", "import", "gold-jails", "/h/_disks/vm1-jails/datadisk",
                                    NULL});
  assert_argv(agt_lima_argv_disk_delete(&l, "vm1-jails", 0),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "disk", "delete", "vm1-jails", NULL});
  assert_argv(agt_lima_argv_disk_delete(&l, "vm1-jails", 1),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "disk", "delete", "--force", "vm1-jails", NULL});
  assert_argv(agt_lima_argv_disk_list(&l, "vm1-jails"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "disk", "list", "--json", "vm1-jails", NULL});
  assert_argv(agt_lima_argv_rename(&l, "vm1.restoring", "vm1"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "rename", "vm1.restoring", "vm1", NULL});
  assert_argv(agt_lima_argv_factory_reset(&l, "vm1"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "factory-reset", "vm1", NULL});
  assert_argv(agt_lima_argv_list(&l, "vm1"),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "list", "--json", "vm1", NULL});
  assert_argv(agt_lima_argv_shell(&l, "vm1", "/work", cmd),
              (const char *const[]){"/opt/lima/bin/limactl", "--tty=false", "--log-format=json",
                                    "shell", "--workdir=/work", "vm1", "uname", "-a", NULL});
  assert_argv(agt_lima_env(&l), (const char *const[]){"LIMA_HOME=/Users/me/.lima", NULL});
  agt_lima_release(&l);
}

static void test_names(void **state)
{
  static const char *const good[] = {"agt_agent_sandbox", "gold", "a", "vm-1.2_x", "A9", NULL};
  static const char *const bad[] = {"",       "-a",    "a-", "a..b", "a b",  "a/b",
                                    "x.yaml", "x.yml", "_a", "é",    "a__b", NULL};
  agt_error_t err = NULL;

  (void)state;
  for (size_t i = 0; good[i]; i++)
    if (agt_lima_name_check(good[i], &err) < 0)
      fail_msg("'%s' refused: %s", good[i], err->msg);
  for (size_t i = 0; bad[i]; i++) {
    if (agt_lima_name_check(bad[i], &err) == 0)
      fail_msg("'%s' accepted", bad[i]);
    agt_error_release(&err);
  }
  {
    char longname[AGT_LIMA_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(agt_lima_name_check(longname, &err), -1);
    agt_error_release(&err);
    longname[AGT_LIMA_NAME_MAX] = '\0';
    assert_int_equal(agt_lima_name_check(longname, &err), 0);
  }
}

/* As `limactl list --json` prints it without a terminal (Lima v2.x): one object per line,
 * fields in Lima's order, plus fields agt does not know. */
static const char list_running[] =
    "{\"name\":\"agt_agent_sandbox\",\"hostname\":\"lima-agt-agent-sandbox\",\"status\":"
    "\"Running\","
    "\"dir\":\"/Users/me/.lima/agt_agent_sandbox\",\"vmType\":\"vz\",\"arch\":\"aarch64\","
    "\"cpus\":4,\"memory\":4294967296,\"disk\":53687091200,\"network\":[{\"vzNAT\":true}],"
    "\"sshLocalPort\":60022,\"sshConfigFile\":\"/Users/me/.lima/agt_agent_sandbox/ssh.config\","
    "\"hostAgentPID\":4242,\"driverPID\":4242,"
    "\"config\":{\"vmType\":\"vz\",\"user\":{\"name\":\"me\",\"uid\":501,"
    "\"home\":\"/home/me.guest\"},\"ssh\":{\"localPort\":0},"
    "\"additionalDisks\":[{\"name\":\"agt_agent_sandbox-jails\",\"format\":false,"
    "\"fsType\":\"btrfs\"}],\"param\":{\"AgtJailsDisk\":\"agt_agent_sandbox-jails\"}},"
    "\"sshAddress\":\"127.0.0.1\",\"limaVersion\":\"2.2.0\",\"param\":{\"AgtdSocket\":\"/run/agt/"
    "agtd.sock\"},\"HostOS\":\"darwin\",\"HostArch\":\"aarch64\",\"LimaHome\":\"/Users/me/.lima\","
    "\"IdentityFile\":\"/Users/me/.lima/_config/user\",\"someFutureField\":{\"x\":[1,2]}}\n"
    "{\"name\":\"gold\",\"status\":\"Stopped\",\"dir\":\"/Users/me/.lima/gold\",\"vmType\":\"vz\","
    "\"arch\":\"aarch64\",\"cpus\":4,\"memory\":4294967296,\"disk\":53687091200,"
    "\"sshLocalPort\":51234,\"config\":{\"user\":{\"name\":\"me\"}}}\n";

static void test_parse_list(void **state)
{
  struct agt_lima_instance in;
  agt_error_t err = NULL;
  int found;

  (void)state;
  assert_int_equal(agt_lima_parse_list(list_running, strlen(list_running), "agt_agent_sandbox", &in,
                                       &found, &err),
                   0);
  assert_true(found);
  assert_string_equal(in.name, "agt_agent_sandbox");
  assert_int_equal(in.status, AGT_LIMA_RUNNING);
  assert_string_equal(in.vm_type, "vz");
  assert_string_equal(in.arch, "aarch64");
  assert_int_equal(in.cpus, 4);
  assert_int_equal(in.memory, 4294967296ull);
  assert_int_equal(in.disk, 53687091200ull);
  assert_int_equal(in.ssh_port, 60022);
  assert_string_equal(in.ssh_address, "127.0.0.1");
  assert_string_equal(in.user, "me");
  assert_string_equal(in.identity_file, "/Users/me/.lima/_config/user");
  assert_int_equal(in.hostagent_pid, 4242);
  assert_int_equal(in.driver_pid, 4242);
  assert_string_equal(in.lima_version, "2.2.0");
  assert_null(in.errors);
  assert_string_equal(in.jails_disk, "agt_agent_sandbox-jails");
  agt_lima_instance_release(&in);

  /* the second line; the previous run's port is still reported while stopped */
  assert_int_equal(
      agt_lima_parse_list(list_running, strlen(list_running), "gold", &in, &found, &err), 0);
  assert_true(found);
  assert_int_equal(in.status, AGT_LIMA_STOPPED);
  assert_int_equal(in.ssh_port, 51234);
  assert_int_equal(in.hostagent_pid, 0);
  assert_null(in.identity_file);
  assert_null(in.jails_disk); /* made before the jails had a disk of their own */
  agt_lima_instance_release(&in);

  /* not there */
  assert_int_equal(
      agt_lima_parse_list(list_running, strlen(list_running), "other", &in, &found, &err), 0);
  assert_false(found);
  /* empty output (no instances) */
  assert_int_equal(agt_lima_parse_list("", 0, "x", &in, &found, &err), 0);
  assert_false(found);
}

/* As `limactl disk ls --json` prints it (Lima v2.2, run on this machine): a line a disk. */
static const char disk_list[] =
    "{\"name\":\"d1-jails\",\"size\":2147483648,\"format\":\"qcow2\",\"dir\":\"/h/_disks/"
    "d1-jails\",\"instance\":\"\",\"instanceDir\":\"\",\"mountPoint\":\"/mnt/lima-d1-jails\"}\n"
    "{\"name\":\"vm1-jails\",\"size\":53687091200,\"format\":\"raw\",\"dir\":\"/h/_disks/"
    "vm1-jails\",\"instance\":\"vm1\",\"instanceDir\":\"/h/vm1\",\"mountPoint\":\"/mnt/"
    "lima-vm1-jails\"}\n";

static void test_parse_disk_list(void **state)
{
  struct agt_lima_disk d;
  agt_error_t err = NULL;
  int found;

  (void)state;
  assert_int_equal(
      agt_lima_parse_disk_list(disk_list, strlen(disk_list), "vm1-jails", &d, &found, &err), 0);
  assert_true(found);
  assert_string_equal(d.name, "vm1-jails");
  assert_int_equal(d.size, 53687091200ull);
  assert_string_equal(d.dir, "/h/_disks/vm1-jails");
  assert_string_equal(d.instance, "vm1");
  agt_lima_disk_release(&d);
  assert_int_equal(
      agt_lima_parse_disk_list(disk_list, strlen(disk_list), "d1-jails", &d, &found, &err), 0);
  assert_true(found);
  assert_null(d.instance); /* "": attached to none */
  agt_lima_disk_release(&d);
  assert_int_equal(agt_lima_parse_disk_list(disk_list, strlen(disk_list), "x", &d, &found, &err),
                   0);
  assert_false(found);
  assert_int_equal(agt_lima_parse_disk_list("{\"name\":", 9, "x", &d, &found, &err), -1);
  assert_non_null(strstr(err->msg, "limactl disk list --json: line 1"));
  agt_error_release(&err);
  /* a terminal's form (several lines an object), then a torn one: its line is counted */
  static const char torn[] = "{\n  \"name\": \"a\"\n}\n{\"name\":";
  assert_int_equal(agt_lima_parse_disk_list(torn, strlen(torn), "x", &d, &found, &err), -1);
  assert_non_null(strstr(err->msg, "limactl disk list --json: line 4"));
  agt_error_release(&err);
}

static void test_parse_list_odd(void **state)
{
  /* fields missing (v1.x without hostname, no config, no sshAddress), fields of other
   * types, Broken with errors (strings, or objects as the marshalling may leave them) */
  static const char out[] =
      "{\"name\":\"old\",\"status\":\"Broken\",\"dir\":\"/l/old\","
      "\"errors\":[\"host agent is running but driver is not\",{\"x\":1},{},"
      "{\"Op\":\"open\",\"Path\":\"/l/old/lima.yaml\",\"Err\":2}],"
      "\"cpus\":\"four\",\"memory\":-1,\"sshLocalPort\":99999,\"cpuType\":\"host\"}\n";
  /* a terminal's form: indented, several lines per object */
  static const char pretty[] = "{\n    \"name\": \"a\",\n    \"status\": \"Installing\"\n}\n"
                               "{\n    \"name\": \"b\",\n    \"status\": \"Weird\",\n"
                               "    \"sshLocalPort\": 2222\n}\n";
  struct agt_lima_instance in;
  agt_error_t err = NULL;
  int found;

  (void)state;
  assert_int_equal(agt_lima_parse_list(out, strlen(out), "old", &in, &found, &err), 0);
  assert_true(found);
  assert_int_equal(in.status, AGT_LIMA_BROKEN);
  assert_string_equal(agt_lima_status_name(in.status), "Broken");
  assert_non_null(in.errors);
  assert_string_equal(in.errors[0], "host agent is running but driver is not");
  assert_string_equal(in.errors[1], "{\"x\":1}");
  /* a Go *PathError as Lima v2.2 marshals it, for a directory without lima.yaml */
  assert_string_equal(in.errors[2], "open /l/old/lima.yaml: No such file or directory");
  assert_null(in.errors[3]);
  assert_int_equal(in.cpus, 0);
  assert_int_equal(in.memory, 0);
  assert_int_equal(in.ssh_port, 0);
  assert_null(in.user);
  assert_null(in.vm_type);
  assert_string_equal(in.ssh_address, "127.0.0.1");
  agt_lima_instance_release(&in);

  assert_int_equal(agt_lima_parse_list(pretty, strlen(pretty), "b", &in, &found, &err), 0);
  assert_true(found);
  assert_int_equal(in.status, AGT_LIMA_UNKNOWN);
  assert_string_equal(in.status_text, "Weird");
  assert_int_equal(in.ssh_port, 2222);
  agt_lima_instance_release(&in);
  assert_int_equal(agt_lima_parse_list(pretty, strlen(pretty), "a", &in, &found, &err), 0);
  assert_int_equal(in.status, AGT_LIMA_INSTALLING);
  agt_lima_instance_release(&in);

  /* a whole-array answer is not what Lima prints, and garbage is an error */
  assert_int_equal(agt_lima_parse_list("[{\"name\":\"a\"}]", 15, "a", &in, &found, &err), -1);
  assert_non_null(strstr(err->msg, "not an object"));
  agt_error_release(&err);
  assert_int_equal(agt_lima_parse_list("{\"name\":\"a\"}\nWARN oops\n", 23, "a", &in, &found, &err),
                   -1);
  assert_non_null(strstr(err->msg, "line 2"));
  agt_error_release(&err);
  agt_lima_instance_release(&in);
}

static void test_messages(void **state)
{
  static const struct {
    const char *err;
    const char *want;
  } cases[] = {
      {"{\"level\":\"info\",\"msg\":\"Terminal is not available\",\"time\":\"t\"}\n"
       "{\"level\":\"fatal\",\"msg\":\"instance \\\"x\\\" already exists\",\"time\":\"t\"}\n",
       "instance \"x\" already exists"},
      {"time=\"t\" level=info msg=\"Sending SIGINT\"\n"
       "time=\"t\" level=fatal msg=\"expected status `Running`, got `Stopped` (maybe use "
       "`limactl stop -f`?)\"\n",
       "expected status `Running`, got `Stopped` (maybe use `limactl stop -f`?)"},
      {"{\"level\":\"error\",\"msg\":\"a\"}\n{\"level\":\"error\",\"msg\":\"b\"}\n"
       "{\"level\":\"info\",\"msg\":\"c\"}\n",
       "a; b"},
      {"limactl: must not run as the root user\n", "limactl: must not run as the root user"},
      {"", "(no message on stderr)"},
      {"{\"level\":\"warning\",\"msg\":\"No instance matching x found.\"}\n",
       "No instance matching x found."},
  };

  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cleanup_free char *m = agt_lima_message(cases[i].err);
    if (strcmp(m, cases[i].want) != 0)
      fail_msg("case %zu: got '%s', want '%s'", i, m, cases[i].want);
  }
}

/* The calls, against a scripted limactl that records its arguments. */
static char dir[] = "/tmp/agt-test-lima.XXXXXX";

static void script(const char *body)
{
  cleanup_free char *p = xasprintf("%s/limactl", dir);
  cleanup_free char *text =
      xasprintf("#!/bin/sh\necho \"$LIMA_HOME|$*\" >> %s/calls\n%s\n", dir, body);
  agt_error_t err = NULL;

  assert_int_equal(agt_write_file(p, text, strlen(text), 0755, &err), 0);
}

static char *calls(void)
{
  cleanup_free char *p = xasprintf("%s/calls", dir);
  char *t = agt_read_file(p, 1 << 20, NULL, NULL);
  unlink(p);
  return t ? t : xstrdup("");
}

static void test_calls(void **state)
{
  cleanup_free char *prog = xasprintf("%s/limactl", dir);
  struct agt_lima l;
  struct agt_lima_instance in;
  agt_error_t err = NULL;
  int found;

  (void)state;
  agt_lima_init(&l, prog, "/lh", dir);

  /* a named instance that does not exist: warning, exit 1, empty stdout */
  script("echo '{\"level\":\"warning\",\"msg\":\"No instance matching vm1 found.\"}' >&2\n"
         "echo '{\"level\":\"fatal\",\"msg\":\"unmatched instances\"}' >&2\nexit 1");
  assert_int_equal(agt_lima_list(&l, "vm1", &in, &found, &err), 0);
  assert_false(found);
  {
    cleanup_free char *c = calls();
    assert_string_equal(c, "/lh|--tty=false --log-format=json list --json vm1\n");
  }

  script("echo '{\"name\":\"vm1\",\"status\":\"Stopped\"}'");
  assert_int_equal(agt_lima_list(&l, "vm1", &in, &found, &err), 0);
  assert_true(found);
  assert_int_equal(in.status, AGT_LIMA_STOPPED);
  agt_lima_instance_release(&in);
  free(calls());

  /* a failure quotes limactl's own message */
  script("echo '{\"level\":\"fatal\",\"msg\":\"cannot clone a running instance\"}' >&2; exit 1");
  assert_int_equal(agt_lima_clone(&l, "vm1", "gold", NULL, &err), -1);
  assert_string_equal(err->msg, "limactl clone exited with status 1: cannot clone a running "
                                "instance");
  agt_error_release(&err);
  free(calls());

  /* list failing for another reason is an error, not "missing" */
  script("echo 'limactl: must not run as the root user' >&2; exit 1");
  assert_int_equal(agt_lima_list(&l, "vm1", &in, &found, &err), -1);
  assert_non_null(strstr(err->msg, "must not run as the root user"));
  agt_error_release(&err);
  free(calls());

  /* progress: each log line as it comes */
  script("echo '{\"level\":\"info\",\"msg\":\"READY.\"}' >&2; exit 0");
  assert_int_equal(agt_lima_start(&l, "vm1", 60, &err), 0);
  {
    cleanup_free char *c = calls();
    assert_string_equal(c, "/lh|--tty=false --log-format=json start --timeout=60s vm1\n");
  }

  /* the program missing */
  agt_lima_release(&l);
  agt_lima_init(&l, "/nonexistent/limactl", "/lh", dir);
  assert_int_equal(agt_lima_stop(&l, "vm1", 0, &err), -1);
  assert_non_null(strstr(err->msg, "cannot run '/nonexistent/limactl': not found"));
  agt_error_release(&err);
  agt_lima_release(&l);
}

static void test_subprocess(void **state)
{
  char sh[] = "sh", c[] = "-c", s1[] = "echo out; echo err >&2; exit 3";
  char s2[] = "echo \"$AGT_X\"; pwd", x[] = "AGT_X=yes", none[] = "agt-no-such-program";
  char *const argv[] = {sh, c, s1, NULL};
  char *const env_argv[] = {sh, c, s2, NULL};
  char *const set[] = {x, NULL};
  char *const missing[] = {none, NULL};
  struct agt_subprocess p = {.argv = argv, .capture = 1};
  agt_error_t err = NULL;

  (void)state;
  assert_int_equal(agt_subprocess_run(&p, &err), 0);
  assert_int_equal(p.exit_code, 3);
  assert_string_equal(p.out_buf, "out\n");
  assert_string_equal(p.err_buf, "err\n");
  agt_subprocess_release(&p);

  memset(&p, 0, sizeof p);
  p.argv = env_argv;
  p.env_set = set;
  p.cwd = "/";
  p.capture = 1;
  assert_int_equal(agt_subprocess_run(&p, &err), 0);
  assert_string_equal(p.out_buf, "yes\n/\n");
  agt_subprocess_release(&p);

  memset(&p, 0, sizeof p);
  p.argv = missing;
  p.capture = 1;
  assert_int_equal(agt_subprocess_run(&p, &err), -1);
  assert_non_null(strstr(err->msg, "not found in PATH"));
  agt_error_release(&err);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_argv),       cmocka_unit_test(test_names),
      cmocka_unit_test(test_parse_list), cmocka_unit_test(test_parse_list_odd),
      cmocka_unit_test(test_messages),   cmocka_unit_test(test_calls),
      cmocka_unit_test(test_subprocess), cmocka_unit_test(test_parse_disk_list),
  };
  int r;

  if (mkdtemp(dir) == NULL)
    return 1;
  r = cmocka_run_group_tests(tests, NULL, NULL);
  {
    cleanup_free char *a = xasprintf("%s/limactl", dir), *b = xasprintf("%s/calls", dir);
    unlink(a);
    unlink(b);
    rmdir(dir);
  }
  return r;
}
