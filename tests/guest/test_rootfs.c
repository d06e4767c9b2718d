/* The rootfs store for real: builds from this machine's binaries into a temporary store,
 * checks the trees (inside a chroot too), rebuilds, resolves, removes, downloads from a
 * local HTTP server, and builds the real rootfs/default.yaml with opencode.
 *
 * Root and Linux only (suite 'guest').  A missing prerequisite fails the test with what to
 * install: nothing is skipped. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "rootfs.h"
#include "xalloc.h"

#ifndef AGT_SOURCE_ROOT
#error "AGT_SOURCE_ROOT must be defined by the build"
#endif

static char *tmp;   /* scratch directory for the whole run */
static char *store; /* tmp/store */
static char triplet[64], ldso[64];

/* ---- helpers ---- */

static void write_text(const char *path, const char *fmt, ...)
{
  va_list ap;
  FILE *f = fopen(path, "w");

  if (f == NULL) {
    fail_msg("create %s: %s", path, strerror(errno));
    return;
  }
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  assert_int_equal(fclose(f), 0);
}

static char *read_all(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t n = 0, cap = 0, r;

  if (f == NULL) {
    fail_msg("open %s: %s", path, strerror(errno));
    return NULL;
  }
  do {
    if (n + 65536 > cap) {
      cap = cap ? cap * 2 : 65536;
      buf = xrealloc(buf, cap + 1);
    }
    r = fread(buf + n, 1, cap - n, f);
    n += r;
  } while (r > 0);
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
  unsigned char d[32];
  unsigned dl;
  EVP_MD_CTX *md = EVP_MD_CTX_new();

  assert_true(EVP_DigestInit_ex(md, EVP_sha256(), NULL));
  assert_true(EVP_DigestUpdate(md, data, len));
  assert_true(EVP_DigestFinal_ex(md, d, &dl));
  EVP_MD_CTX_free(md);
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void need(const char *path, const char *what_to_install)
{
  if (access(path, R_OK) != 0)
    fail_msg("prerequisite missing: %s (%s); install it: %s", path, strerror(errno),
             what_to_install);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)ftw;
  if (flag == FTW_DP)
    return rmdir(path);
  return unlink(path);
}

static void rm_rf(const char *path)
{
  nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

/* Stat a path as a process chrooted at root would see it (symlinks resolved inside root). */
static int stat_in(const char *root, const char *path, struct stat *st)
{
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
  int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd, r;

  if (rfd < 0)
    return -1;
  fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof how);
  close(rfd);
  if (fd < 0)
    return -1;
  r = fstat(fd, st);
  close(fd);
  return r;
}

static void assert_file_in(const char *root, const char *path)
{
  struct stat st;
  if (stat_in(root, path, &st) < 0) {
    fail_msg("%s is missing from the tree %s: %s", path, root, strerror(errno));
    return;
  }
  if (!S_ISREG(st.st_mode))
    fail_msg("%s in the tree is not a regular file", path);
}

static void assert_link(const char *root, const char *path, const char *target)
{
  char p[4096], t[4096];
  ssize_t n;

  snprintf(p, sizeof p, "%s%s", root, path);
  n = readlink(p, t, sizeof t - 1);
  if (n < 0) {
    fail_msg("%s is not a symlink in the tree: %s", path, strerror(errno));
    return;
  }
  t[n] = '\0';
  if (strcmp(t, target) != 0)
    fail_msg("%s -> %s, expected -> %s", path, t, target);
}

static const char *jstr(json_t *o, const char *key)
{
  json_t *v = json_object_get(o, key);
  if (!json_is_string(v))
    fail_msg("no string '%s' in %s", key, json_dumps(o, JSON_COMPACT));
  return json_string_value(v);
}

/* Every node: root-owned, no setuid/setgid, files 0755/0644, directories 0755 or as listed. */
static int bad_nodes;
static int check_node(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)flag;
  (void)ftw;
  if (st->st_uid != 0 || st->st_gid != 0) {
    print_error("not root-owned: %s\n", path);
    bad_nodes++;
  }
  if (st->st_mode & (S_ISUID | S_ISGID)) {
    print_error("setuid/setgid: %s\n", path);
    bad_nodes++;
  }
  if (S_ISREG(st->st_mode) && (st->st_mode & 07777) != 0755 && (st->st_mode & 07777) != 0644) {
    print_error("mode %o: %s\n", st->st_mode & 07777, path);
    bad_nodes++;
  }
  if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode)) {
    print_error("special file: %s\n", path);
    bad_nodes++;
  }
  return 0;
}

static void assert_tree_clean(const char *root)
{
  bad_nodes = 0;
  assert_int_equal(nftw(root, check_node, 32, FTW_PHYS), 0);
  assert_int_equal(bad_nodes, 0);
}

/* Run argv inside the tree: a private mount namespace with /proc, /dev and a tmpfs /tmp,
 * chroot, a clean environment.  Returns the exit status; stdout+stderr go to out. */
static int run_in(const char *root, const char *const argv[], char *out, size_t outlen)
{
  int p[2], status;
  pid_t pid;
  size_t n = 0;
  ssize_t r;

  assert_int_equal(pipe(p), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char d[4096];
    const char *const env[] = {"HOME=/tmp", "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp",
                               NULL};
    dup2(p[1], 1);
    dup2(p[1], 2);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
      _exit(120);
    snprintf(d, sizeof d, "%s/proc", root);
    if (mount("proc", d, "proc", 0, NULL) < 0)
      _exit(121);
    snprintf(d, sizeof d, "%s/dev", root);
    if (mount("/dev", d, NULL, MS_BIND | MS_REC, NULL) < 0)
      _exit(122);
    snprintf(d, sizeof d, "%s/tmp", root);
    if (mount("tmpfs", d, "tmpfs", 0, "mode=1777") < 0)
      _exit(123);
    if (chroot(root) < 0 || chdir("/") < 0)
      _exit(124);
    execve(argv[0], (char *const *)argv, (char *const *)env);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(p[1]);
  while ((r = read(p[0], out + n, outlen - 1 - n)) > 0 && n + 1 < outlen)
    n += (size_t)r;
  out[n] = '\0';
  close(p[0]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void expect_run(const char *root, const char *const argv[], const char *want)
{
  char out[8192];
  int rc = run_in(root, argv, out, sizeof out);

  if (rc != 0 || strstr(out, want) == NULL)
    fail_msg("in the tree, %s exited %d with output \"%s\" (expected \"%s\")", argv[0], rc, out,
             want);
}

static json_t *build_ok(const char *manifest, int allow_download)
{
  struct agt_rootfs_build_opts o = {.allow_download = allow_download};
  agt_error_t err = NULL;
  json_t *info = NULL;

  if (agt_rootfs_build(store, manifest, &o, &info, &err) < 0)
    fail_msg("build %s: %s", manifest, err->msg);
  assert_non_null(info);
  return info;
}

/* ---- a tiny HTTP server on 127.0.0.1 ---- */

struct resource {
  const char *path;
  const char *body;
  size_t len;
};

static struct {
  int fd, port;
  pthread_t thread;
  struct resource res[8];
  size_t nres;
  int stop;
} http;

static void *http_main(void *arg)
{
  (void)arg;
  for (;;) {
    char req[4096], line[256];
    size_t n = 0;
    ssize_t r;
    int c = accept(http.fd, NULL, NULL);
    if (c < 0) {
      if (http.stop)
        return NULL;
      continue;
    }
    while (n < sizeof req - 1 && (r = read(c, req + n, sizeof req - 1 - n)) > 0) {
      n += (size_t)r;
      req[n] = '\0';
      if (strstr(req, "\r\n\r\n"))
        break;
    }
    req[n] = '\0';
    const struct resource *hit = NULL;
    char path[256] = "";
    sscanf(req, "GET %255s ", path);
    for (size_t i = 0; i < http.nres; i++)
      if (strcmp(http.res[i].path, path) == 0)
        hit = &http.res[i];
    if (hit) {
      int hl =
          snprintf(line, sizeof line,
                   "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", hit->len);
      if (write(c, line, (size_t)hl) == hl) {
        size_t off = 0;
        while (off < hit->len && (r = write(c, hit->body + off, hit->len - off)) > 0)
          off += (size_t)r;
      }
    } else {
      static const char nf[] =
          "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (write(c, nf, sizeof nf - 1) < 0)
        perror("write");
    }
    close(c);
  }
}

static void http_start(void)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;

  http.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(http.fd >= 0);
  assert_int_equal(bind(http.fd, (struct sockaddr *)&a, sizeof a), 0); /* port 0: a free one */
  assert_int_equal(getsockname(http.fd, (struct sockaddr *)&a, &al), 0);
  assert_int_equal(listen(http.fd, 16), 0);
  http.port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&http.thread, NULL, http_main, NULL), 0);
}

static void http_stop(void)
{
  http.stop = 1;
  shutdown(http.fd, SHUT_RDWR);
  pthread_join(http.thread, NULL);
  close(http.fd);
}

/* ---- setup ---- */

static int setup(void **state)
{
  struct utsname u;
  char t[] = "/var/tmp/agt-test-rootfs-XXXXXX";

  (void)state;
  if (geteuid() != 0) {
    fprintf(stderr, "test_rootfs must run as root (it chroots and mounts)\n");
    return -1;
  }
  uname(&u);
  if (strcmp(u.machine, "x86_64") == 0) {
    snprintf(triplet, sizeof triplet, "x86_64-linux-gnu");
    snprintf(ldso, sizeof ldso, "/lib64/ld-linux-x86-64.so.2");
  } else if (strcmp(u.machine, "aarch64") == 0) {
    snprintf(triplet, sizeof triplet, "aarch64-linux-gnu");
    snprintf(ldso, sizeof ldso, "/lib/ld-linux-aarch64.so.1");
  } else {
    fprintf(stderr, "test_rootfs knows x86_64 and aarch64, not %s\n", u.machine);
    return -1;
  }
  if (mkdtemp(t) == NULL)
    return -1;
  tmp = xstrdup(t);
  store = xasprintf("%s/store", tmp);
  /* the download tests talk to 127.0.0.1 directly, whatever proxy the environment names */
  setenv("no_proxy", "*", 1);
  setenv("NO_PROXY", "*", 1);
  http_start();
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  http_stop();
  if (getenv("AGT_TEST_KEEP") == NULL)
    rm_rf(tmp);
  free(store);
  free(tmp);
  return 0;
}

/* The small manifest: distro toybox, busybox, a file, a setuid source, a tree, and a
 * symlink that tries to lead a later entry out of the tree. */
static char *small_manifest(const char *motd)
{
  char *path = xasprintf("%s/small.yaml", tmp);
  char *p;

  p = xasprintf("%s/suid.sh", tmp);
  write_text(p, "#!/bin/sh\necho hi\n");
  assert_int_equal(chmod(p, 06755), 0);
  free(p);
  p = xasprintf("%s/data", tmp);
  mkdir(p, 0755);
  free(p);
  p = xasprintf("%s/data/sub", tmp);
  mkdir(p, 0700);
  free(p);
  p = xasprintf("%s/data/sub/setgid-file", tmp);
  write_text(p, "data\n");
  assert_int_equal(chmod(p, 02640), 0);
  free(p);
  p = xasprintf("%s/data/link", tmp);
  unlink(p);
  assert_int_equal(symlink("sub/setgid-file", p), 0);
  free(p);
  p = xasprintf("%s/outside", tmp);
  mkdir(p, 0755);
  free(p);

  write_text(path,
             "name: small\n"
             "dirs: [/dev, /proc, {path: /tmp, mode: '1777'}, {path: /root, mode: '0700'}]\n"
             "files:\n"
             "  - path: /bin/toybox\n"
             "    applets: toybox\n"
             "    hint: apt-get install toybox\n"
             "    sources: [{host: /usr/bin/toybox, package: toybox}]\n"
             "  - path: /bin/busybox\n"
             "    applets: busybox\n"
             "    sources: [{host: /bin/busybox, package: busybox-static}]\n"
             "  - path: /bin/sh\n"
             "    symlink: busybox\n"
             "  - path: /etc/motd\n"
             "    content: \"%s\"\n"
             "  - path: /usr/local/bin/suid\n"
             "    sources: [{host: %s/suid.sh}]\n"
             "  - path: /opt/data\n"
             "    tree: true\n"
             "    sources: [{host: %s/data}]\n"
             "  - path: /etc/evil\n"
             "    symlink: %s/outside\n"
             "  - path: /etc/evil/escaped\n"
             "    content: confined\n"
             "  - path: /etc/dotdot\n"
             "    symlink: ../../../../../../../../..%s/outside\n"
             "  - path: /etc/dotdot/escaped2\n"
             "    content: confined\n",
             motd, tmp, tmp, tmp, tmp);
  return path;
}

/* ---- tests ---- */

static void test_prerequisites(void **state)
{
  (void)state;
  need("/usr/bin/toybox", "apt-get install toybox");
  need("/bin/busybox", "apt-get install busybox-static");
  need("/bin/bash-static", "apt-get install bash-static");
  need("/usr/bin/rg", "apt-get install ripgrep");
  need("/usr/bin/git", "apt-get install git");
  need("/etc/ssl/certs/ca-certificates.crt", "apt-get install ca-certificates");
}

static json_t *small_v1;

static void test_small_build(void **state)
{
  char *m = small_manifest("hello v1\\n");
  json_t *info = build_ok(m, 0), *src;
  const char *root = jstr(info, "path");
  char p[4096];
  size_t len;
  char *txt;

  (void)state;
  assert_int_equal(strlen(jstr(info, "id")), 64);
  assert_string_equal(jstr(info, "name"), "small");
  snprintf(p, sizeof p, "%s/%s/root", store, jstr(info, "id"));
  assert_string_equal(root, p);
  snprintf(p, sizeof p, "%s/%s/info.json", store, jstr(info, "id"));
  assert_int_equal(access(p, R_OK), 0);
  assert_true(json_integer_value(json_object_get(info, "files")) > 5);
  assert_true(json_integer_value(json_object_get(info, "bytes")) > 1000000);

  /* toybox from the distro, with its applets beside it */
  src = json_object_get(json_object_get(info, "sources"), "/bin/toybox");
  assert_string_equal(jstr(src, "kind"), "host");
  assert_string_equal(jstr(src, "package"), "toybox");
  assert_true(json_integer_value(json_object_get(src, "applets")) > 150);
  assert_link(root, "/bin", "usr/bin");
  assert_file_in(root, "/bin/toybox");
  assert_link(root, "/usr/bin/ls", "toybox");
  assert_link(root, "/usr/bin/cat", "toybox");
  assert_link(root, "/usr/bin/sed", "toybox");
  snprintf(p, sizeof p, "%s/usr/bin/toybox/toybox", root);
  assert_int_equal(access(p, F_OK), -1); /* no applet named after the binary */
  /* busybox fills in what Debian's toybox lacks, and is /bin/sh */
  assert_link(root, "/usr/bin/sh", "busybox");
  assert_link(root, "/usr/bin/awk", "busybox");
  assert_link(root, "/usr/bin/diff", "busybox");
  /* toybox's shared libraries, at their paths */
  assert_file_in(root, ldso);
  snprintf(p, sizeof p, "/lib/%s/libc.so.6", triplet);
  assert_file_in(root, p);
  snprintf(p, sizeof p, "/lib/%s/libm.so.6", triplet);
  assert_file_in(root, p);
  snprintf(p, sizeof p, "/lib/%s/libcrypt.so.1", triplet);
  assert_file_in(root, p);

  /* the inline file, modes, no setuid/setgid anywhere */
  snprintf(p, sizeof p, "%s/etc/motd", root);
  txt = read_all(p, &len);
  assert_string_equal(txt, "hello v1\n");
  free(txt);
  struct stat st;
  snprintf(p, sizeof p, "%s/usr/local/bin/suid", root);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
  snprintf(p, sizeof p, "%s/opt/data/sub/setgid-file", root);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0644);
  snprintf(p, sizeof p, "%s/opt/data/sub", root);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
  assert_link(root, "/opt/data/link", "sub/setgid-file");
  snprintf(p, sizeof p, "%s/tmp", root);
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 01777);
  assert_tree_clean(root);

  /* writes never left the tree through a symlink: they landed inside it */
  snprintf(p, sizeof p, "%s/outside/escaped", tmp);
  assert_int_equal(access(p, F_OK), -1);
  snprintf(p, sizeof p, "%s/outside/escaped2", tmp);
  assert_int_equal(access(p, F_OK), -1);
  snprintf(p, sizeof p, "%s/outside/escaped", tmp);
  assert_file_in(root, p);
  snprintf(p, sizeof p, "%s/outside/escaped2", tmp);
  assert_file_in(root, p);

  /* it runs: static busybox directly, dynamic toybox in a chroot (its closure is complete) */
  {
    char out[4096];
    int pp[2], status;
    pid_t pid;
    ssize_t r;
    size_t n = 0;
    snprintf(p, sizeof p, "%s/usr/bin/busybox", root);
    assert_int_equal(pipe(pp), 0);
    pid = fork();
    if (pid == 0) {
      dup2(pp[1], 1);
      execl(p, "sh", "-c", "echo $((6*7))", (char *)NULL);
      _exit(127);
    }
    close(pp[1]);
    while ((r = read(pp[0], out + n, sizeof out - 1 - n)) > 0)
      n += (size_t)r;
    out[n] = '\0';
    close(pp[0]);
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal(out, "42\n");
  }
  expect_run(root, (const char *const[]){"/bin/ls", "/etc", NULL}, "motd");
  expect_run(root, (const char *const[]){"/bin/sh", "-c", "[[ abc == a* ]] && echo dbl-ok", NULL},
             "dbl-ok");
  expect_run(root, (const char *const[]){"/bin/sh", "-c", "echo hi | /bin/sed s/hi/ho/", NULL},
             "ho");

  small_v1 = info;
  free(m);
}

static void test_rebuild_same_id(void **state)
{
  char *m = small_manifest("hello v1\\n");
  json_t *again = build_ok(m, 0), *list = NULL;
  agt_error_t err = NULL;

  (void)state;
  assert_non_null(small_v1);
  assert_string_equal(jstr(again, "id"), jstr(small_v1, "id"));
  assert_true(json_is_true(json_object_get(again, "reused")));
  assert_int_equal(json_integer_value(json_object_get(again, "created")),
                   json_integer_value(json_object_get(small_v1, "created")));
  assert_int_equal(agt_rootfs_list(store, &list, &err), 0);
  assert_int_equal(json_array_size(list), 1);
  json_decref(list);
  json_decref(again);
  free(m);
}

static void *build_thread(void *arg)
{
  struct agt_rootfs_build_opts o = {0};
  agt_error_t err = NULL;
  json_t *info = NULL;

  if (agt_rootfs_build(store, arg, &o, &info, &err) < 0) {
    fprintf(stderr, "concurrent build: %s\n", err->msg);
    agt_error_release(&err);
    return NULL;
  }
  return info;
}

static void test_concurrent_builds(void **state)
{
  char *m = small_manifest("hello concurrent\\n");
  pthread_t t[3];
  json_t *r[3];
  json_t *list = NULL;
  agt_error_t err = NULL;
  int reused = 0;

  (void)state;
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&t[i], NULL, build_thread, m), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pthread_join(t[i], (void **)&r[i]), 0);
    assert_non_null(r[i]);
    reused += json_is_true(json_object_get(r[i], "reused"));
  }
  assert_string_equal(jstr(r[0], "id"), jstr(r[1], "id"));
  assert_string_equal(jstr(r[0], "id"), jstr(r[2], "id"));
  assert_string_not_equal(jstr(r[0], "id"), jstr(small_v1, "id"));
  assert_int_equal(reused, 2); /* one of them renamed its tree into place */
  assert_int_equal(agt_rootfs_list(store, &list, &err), 0);
  assert_int_equal(json_array_size(list), 2);
  /* no build directory is left behind */
  {
    char cmd[4200];
    snprintf(cmd, sizeof cmd,
             "test -z \"$(ls -A %s | grep -v -e '^.lock$' -e '^[0-9a-f]\\{64\\}$')\"", store);
    assert_int_equal(system(cmd), 0);
  }
  assert_int_equal(agt_rootfs_remove(store, jstr(r[0], "id"), &err), 0);
  for (int i = 0; i < 3; i++)
    json_decref(r[i]);
  json_decref(list);
  free(m);
}

static json_t *small_v2;

static void test_changed_input_new_id(void **state)
{
  char *m = small_manifest("hello v2\\n");
  json_t *v2 = build_ok(m, 0), *list = NULL, *got = NULL;
  agt_error_t err = NULL;
  char prefix[9], p[4096];

  (void)state;
  assert_string_not_equal(jstr(v2, "id"), jstr(small_v1, "id"));
  assert_null(json_object_get(v2, "reused"));
  /* the old build is kept */
  snprintf(p, sizeof p, "%s/etc/motd", jstr(small_v1, "path"));
  assert_int_equal(access(p, R_OK), 0);
  assert_int_equal(agt_rootfs_list(store, &list, &err), 0);
  assert_int_equal(json_array_size(list), 2);
  assert_string_equal(jstr(json_array_get(list, 0), "id"), jstr(v2, "id")); /* newest first */
  assert_string_equal(jstr(json_array_get(list, 1), "id"), jstr(small_v1, "id"));
  json_decref(list);

  /* resolve: name -> newest, unique prefix, full id */
  assert_int_equal(agt_rootfs_resolve(store, "small", &got, &err), 0);
  assert_string_equal(jstr(got, "id"), jstr(v2, "id"));
  json_decref(got);
  snprintf(prefix, sizeof prefix, "%.8s", jstr(small_v1, "id"));
  assert_int_equal(agt_rootfs_resolve(store, prefix, &got, &err), 0);
  assert_string_equal(jstr(got, "id"), jstr(small_v1, "id"));
  assert_string_equal(jstr(got, "path"), jstr(small_v1, "path"));
  json_decref(got);
  assert_int_equal(agt_rootfs_resolve(store, jstr(v2, "id"), &got, &err), 0);
  assert_string_equal(jstr(got, "id"), jstr(v2, "id"));
  json_decref(got);
  assert_int_equal(agt_rootfs_resolve(store, "no-such-rootfs", &got, &err), -1);
  assert_int_equal(err->kind, AGT_E_NOTFOUND);
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_resolve(store, "../etc", &got, &err), -1);
  assert_int_equal(err->kind, AGT_E_INVALID);
  agt_error_release(&err);
  small_v2 = v2;
  free(m);
}

static void test_resolve_ambiguous_prefix(void **state)
{
  const char *ids[] = {"abcdef0000000000000000000000000000000000000000000000000000000001",
                       "abcdef0000000000000000000000000000000000000000000000000000000002"};
  json_t *got = NULL;
  agt_error_t err = NULL;

  (void)state;
  for (int i = 0; i < 2; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", store, ids[i]);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/root", store, ids[i]);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/info.json", store, ids[i]);
    write_text(p, "{\"id\": \"%s\", \"name\": \"fake\", \"created\": %d, \"updated\": %d}\n",
               ids[i], 1 + i, 1 + i);
  }
  assert_int_equal(agt_rootfs_resolve(store, "abcdef", &got, &err), -1);
  assert_int_equal(err->kind, AGT_E_INVALID);
  assert_non_null(strstr(err->msg, "ambiguous"));
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_resolve(store, "abcdef00000000000000000000000000000001", &got, &err),
                   -1); /* no such prefix */
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_resolve(store, "fake", &got, &err), 0);
  assert_string_equal(jstr(got, "id"), ids[1]); /* the newer one */
  json_decref(got);
  for (int i = 0; i < 2; i++)
    assert_int_equal(agt_rootfs_remove(store, ids[i], &err), 0);
}

static void test_remove(void **state)
{
  agt_error_t err = NULL;
  json_t *list = NULL, *got = NULL;
  char p[4096];

  (void)state;
  snprintf(p, sizeof p, "%s/%s", store, jstr(small_v1, "id"));
  assert_int_equal(agt_rootfs_remove(store, jstr(small_v1, "id"), &err), 0);
  assert_int_equal(access(p, F_OK), -1);
  assert_int_equal(agt_rootfs_list(store, &list, &err), 0);
  assert_int_equal(json_array_size(list), 1);
  assert_string_equal(jstr(json_array_get(list, 0), "id"), jstr(small_v2, "id"));
  json_decref(list);
  assert_int_equal(agt_rootfs_remove(store, jstr(small_v1, "id"), &err), -1);
  assert_int_equal(err->kind, AGT_E_NOTFOUND);
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_remove(store, "abc", &err), -1); /* only full ids */
  assert_int_equal(err->kind, AGT_E_INVALID);
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_remove(store, "../../etc", &err), -1);
  assert_int_equal(err->kind, AGT_E_INVALID);
  agt_error_release(&err);
  assert_int_equal(agt_rootfs_resolve(store, "small", &got, &err), 0);
  assert_string_equal(jstr(got, "id"), jstr(small_v2, "id"));
  json_decref(got);
  assert_int_equal(agt_rootfs_remove(store, jstr(small_v2, "id"), &err), 0);
  json_decref(small_v1);
  json_decref(small_v2);
}

static void test_missing_source(void **state)
{
  char *m = xasprintf("%s/missing.yaml", tmp);
  struct agt_rootfs_build_opts o = {0};
  agt_error_t err = NULL;
  json_t *info = NULL;

  (void)state;
  write_text(m, "name: missing\n"
                "files:\n"
                "  - path: /usr/bin/nothing\n"
                "    hint: apt-get install nothing\n"
                "    sources:\n"
                "      - env: AGT_TEST_NOTHING_BIN\n"
                "      - host: [/nonexistent/a, /nonexistent/b]\n");
  unsetenv("AGT_TEST_NOTHING_BIN");
  assert_int_equal(agt_rootfs_build(store, m, &o, &info, &err), -1);
  assert_int_equal(err->kind, AGT_E_NOTFOUND);
  char where[4200];
  snprintf(where, sizeof where, "%s:3:5: no source found for '/usr/bin/nothing'", m);
  if (strstr(err->msg, where) == NULL || strstr(err->msg, "/nonexistent/b") == NULL ||
      strstr(err->msg, "AGT_TEST_NOTHING_BIN") == NULL ||
      strstr(err->msg, "apt-get install nothing") == NULL)
    fail_msg("unclear error: %s", err->msg);
  agt_error_release(&err);

  /* an env override that is set but wrong is an error, not a silent fallback */
  setenv("AGT_TEST_NOTHING_BIN", "/nonexistent/c", 1);
  assert_int_equal(agt_rootfs_build(store, m, &o, &info, &err), -1);
  assert_non_null(strstr(err->msg, "AGT_TEST_NOTHING_BIN=/nonexistent/c"));
  agt_error_release(&err);
  /* and when it is right, it is used */
  setenv("AGT_TEST_NOTHING_BIN", "/bin/busybox", 1);
  info = build_ok(m, 0);
  assert_string_equal(
      jstr(json_object_get(json_object_get(info, "sources"), "/usr/bin/nothing"), "kind"), "env");
  assert_file_in(jstr(info, "path"), "/usr/bin/nothing");
  unsetenv("AGT_TEST_NOTHING_BIN");
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);

  /* a bad manifest names file:line:col */
  write_text(m, "name: missing\nfiles:\n  - path: /a\n    bogus: 1\n    content: x\n");
  assert_int_equal(agt_rootfs_build(store, m, &o, &info, &err), -1);
  snprintf(where, sizeof where, "%s:4:5: files[0] (/a): unknown key 'bogus'", m);
  if (strstr(err->msg, where) == NULL)
    fail_msg("unclear error: %s", err->msg);
  agt_error_release(&err);
  free(m);
}

/* A toybox served over HTTP: the distro binary with a marker appended (still a valid ELF with
 * the same applet table, but other content). */
static char *served;
static size_t served_len;
static char served_sha[65];

static char *download_manifest(const char *sha, const char *urlpath, unsigned long max_bytes)
{
  char *m = xasprintf("%s/dl.yaml", tmp);

  write_text(m,
             "name: dl\n"
             "dirs: [/dev, /proc, /tmp]\n"
             "files:\n"
             "  - path: /bin/toybox\n"
             "    applets: toybox\n"
             "    sources:\n"
             "      - download:\n"
             "          version: test\n"
             "          max_bytes: %lu\n"
             "          arch:\n"
             "            x86_64: {url: 'http://127.0.0.1:%d%s', sha256: %s}\n"
             "            aarch64: {url: 'http://127.0.0.1:%d%s', sha256: %s}\n"
             "      - host: /usr/bin/toybox\n"
             "        package: toybox\n",
             max_bytes, http.port, urlpath, sha, http.port, urlpath, sha);
  return m;
}

static json_t *toybox_source(json_t *info)
{
  json_t *s = json_object_get(json_object_get(info, "sources"), "/bin/toybox");
  assert_non_null(s);
  return s;
}

static void test_download_verified(void **state)
{
  size_t len;
  char *distro = read_all("/usr/bin/toybox", &len), p[4096], *got, hex[65];
  agt_error_t err = NULL;

  (void)state;
  served_len = len + 32;
  served = xmalloc(served_len);
  memcpy(served, distro, len);
  memcpy(served + len, "agt-test-rootfs download marker\n", 32);
  free(distro);
  sha256_hex(served, served_len, served_sha);
  http.res[http.nres++] = (struct resource){"/toybox", served, served_len};
  http.res[http.nres++] = (struct resource){"/other", "not toybox\n", 11};

  char *m = download_manifest(served_sha, "/toybox", 8 << 20);
  json_t *info = build_ok(m, 1), *s = toybox_source(info);
  assert_string_equal(jstr(s, "kind"), "download");
  assert_string_equal(jstr(s, "sha256"), served_sha);
  assert_string_equal(jstr(s, "version"), "test");
  assert_true(json_integer_value(json_object_get(s, "applets")) > 150);
  snprintf(p, sizeof p, "%s/usr/bin/toybox", jstr(info, "path"));
  got = read_all(p, &len);
  sha256_hex(got, len, hex);
  assert_string_equal(hex, served_sha); /* the verified download is what the tree holds */
  free(got);
  assert_link(jstr(info, "path"), "/usr/bin/ls", "toybox");
  expect_run(jstr(info, "path"),
             (const char *const[]){"/bin/toybox", "echo", "from-download", NULL}, "from-download");
  /* no leftovers of the download in the store */
  snprintf(p, sizeof p, "%s/%s", store, jstr(info, "id"));
  {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s)\" = \"$(printf 'info.json\\nroot')\"", p);
    assert_int_equal(system(cmd), 0);
  }
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);

  /* downloads not allowed: the distro toybox, and sources says why */
  info = build_ok(m, 0);
  s = toybox_source(info);
  assert_string_equal(jstr(s, "kind"), "host");
  assert_non_null(strstr(jstr(json_array_get(json_object_get(s, "tried"), 0), "result"),
                         "downloads are not allowed"));
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);
  free(m);
}

static void test_download_mismatch(void **state)
{
  char wrong[65];
  agt_error_t err = NULL;

  (void)state;
  sha256_hex("something else", 14, wrong);
  char *m = download_manifest(wrong, "/toybox", 8 << 20);
  json_t *info = build_ok(m, 1), *s = toybox_source(info), *t;
  const char *result;

  /* refused, and the fallback used */
  assert_string_equal(jstr(s, "kind"), "host");
  assert_string_equal(jstr(s, "path"), "/usr/bin/toybox");
  t = json_array_get(json_object_get(s, "tried"), 0);
  assert_non_null(t);
  result = jstr(t, "result");
  if (strstr(result, "sha256 mismatch") == NULL || strstr(result, wrong) == NULL ||
      strstr(result, served_sha) == NULL)
    fail_msg("the mismatch report does not name both hashes: %s", result);
  assert_string_equal(jstr(t, "expected_sha256"), wrong);
  assert_string_equal(jstr(t, "actual_sha256"), served_sha);
  assert_true(json_array_size(json_object_get(info, "warnings")) >= 1);
  assert_non_null(strstr(jstr(info, "path"), store));
  {
    /* the tree holds the distro toybox, not the refused bytes */
    size_t a, b;
    char p[4096], *x, *y;
    snprintf(p, sizeof p, "%s/usr/bin/toybox", jstr(info, "path"));
    x = read_all(p, &a);
    y = read_all("/usr/bin/toybox", &b);
    assert_int_equal(a, b);
    assert_memory_equal(x, y, a);
    free(x);
    free(y);
  }
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);
  free(m);

  /* unreachable (404), and too large: both fall back with the reason */
  m = download_manifest(served_sha, "/missing", 8 << 20);
  info = build_ok(m, 1);
  s = toybox_source(info);
  assert_string_equal(jstr(s, "kind"), "host");
  assert_non_null(strstr(jstr(json_array_get(json_object_get(s, "tried"), 0), "result"), "404"));
  json_decref(info);
  free(m);
  m = download_manifest(served_sha, "/toybox", 1000);
  info = build_ok(m, 1);
  s = toybox_source(info);
  assert_string_equal(jstr(s, "kind"), "host");
  assert_non_null(
      strstr(jstr(json_array_get(json_object_get(s, "tried"), 0), "result"), "larger than 1000"));
  json_decref(info);
  free(m);
  /* the pin placeholder */
  m = download_manifest("unknown", "/toybox", 8 << 20);
  info = build_ok(m, 1);
  s = toybox_source(info);
  assert_string_equal(jstr(s, "kind"), "host");
  assert_non_null(
      strstr(jstr(json_array_get(json_object_get(s, "tried"), 0), "result"), "pin unknown"));
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);
  free(m);
}

static void test_default_rootfs(void **state)
{
  const char *oc = getenv("AGT_OPENCODE_BIN");
  char p[4096];
  struct timespec t0, t1;
  json_t *info, *s;
  const char *root;
  struct stat a, b;
  agt_error_t err = NULL;

  (void)state;
  if (oc == NULL || *oc == '\0')
    oc = "/var/cache/agt/npm/node_modules/opencode-linux-x64/bin/opencode";
  need(oc, "npm install --prefix /var/cache/agt/npm opencode-linux-x64 (or set AGT_OPENCODE_BIN "
           "to its bin/opencode)");
  test_prerequisites(state);
  snprintf(p, sizeof p, "/usr/lib/%s/libstdc++.so.6", triplet);
  need(p, "apt-get install libstdc++6");

  clock_gettime(CLOCK_MONOTONIC, &t0);
  info = build_ok(AGT_SOURCE_ROOT "/rootfs/default.yaml", 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  root = jstr(info, "path");
  print_message("# default rootfs %.12s: %lld bytes in %lld files, built in %.2f s\n",
                jstr(info, "id"), (long long)json_integer_value(json_object_get(info, "bytes")),
                (long long)json_integer_value(json_object_get(info, "files")),
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  assert_string_equal(jstr(info, "name"), "default");

  /* what opencode needs, with their libraries */
  assert_file_in(root, "/usr/local/bin/opencode");
  assert_int_equal(stat(oc, &a), 0);
  assert_int_equal(stat_in(root, "/usr/local/bin/opencode", &b), 0);
  assert_int_equal(a.st_size, b.st_size);
  assert_int_equal(b.st_mode & 07777, 0755);
  assert_file_in(root, "/usr/bin/rg");
  assert_file_in(root, "/usr/bin/git");
  assert_file_in(root, "/usr/lib/git-core/git");
  assert_file_in(root, "/bin/bash");
  assert_file_in(root, "/bin/busybox");
  assert_file_in(root, "/bin/toybox");
  assert_link(root, "/usr/bin/sh", "busybox");
  assert_file_in(root, "/etc/ssl/certs/ca-certificates.crt");
  assert_file_in(root, "/etc/passwd");
  assert_file_in(root, "/etc/group");
  assert_file_in(root, "/etc/hosts");
  for (const char *const *d = (const char *const[]){"/tmp", "/proc", "/dev", "/sys", "/home/agent",
                                                    "/work", "/root", "/etc/opencode", NULL};
       *d; d++) {
    if (stat_in(root, *d, &a) < 0 || !S_ISDIR(a.st_mode))
      fail_msg("directory %s is missing from the default rootfs", *d);
  }
  assert_file_in(root, ldso);
  for (const char *const *l =
           (const char *const[]){"libc.so.6", "libm.so.6", "libpcre2-8.so.0", "libz.so.1",
                                 "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", NULL};
       *l; l++) {
    snprintf(p, sizeof p, "/lib/%s/%s", triplet, *l);
    assert_file_in(root, p);
  }
  {
    size_t len;
    snprintf(p, sizeof p, "%s/etc/passwd", root);
    char *pw = read_all(p, &len);
    assert_non_null(strstr(pw, "agent:x:1000:1000:agent:/home/agent:"));
    free(pw);
  }
  assert_tree_clean(root);

  /* toybox: the project's build (scripts/toybox-build.sh), named by its versioned directory,
   * and its hash an input of the rootfs */
  s = json_object_get(json_object_get(info, "sources"), "/bin/toybox");
  assert_string_equal(jstr(s, "kind"), "host");
  assert_string_equal(jstr(s, "path"), "/var/cache/agt/toybox/current/toybox");
  assert_non_null(strstr(jstr(s, "real_path"), "/var/cache/agt/toybox/"));
  assert_null(json_object_get(s, "tried")); /* the first and only source */
  {
    size_t len;
    char *bi = read_all("/var/cache/agt/toybox/current/BUILDINFO", &len);
    json_t *in = json_object_get(json_object_get(info, "inputs"), "/bin/toybox");
    char want[80];
    snprintf(want, sizeof want, "sha256=%s\n", jstr(in, "sha256"));
    if (strstr(bi, want) == NULL)
      fail_msg("inputs./bin/toybox.sha256 is not BUILDINFO's: %s", want);
    free(bi);
  }

  /* and it all runs in the tree */
  expect_run(root, (const char *const[]){"/usr/local/bin/opencode", "--version", NULL}, ".");
  expect_run(root, (const char *const[]){"/usr/bin/rg", "--version", NULL}, "ripgrep");
  expect_run(root, (const char *const[]){"/usr/bin/git", "--version", NULL}, "git version");
  expect_run(root, (const char *const[]){"/bin/bash", "-c", "a=(x y); echo ${a[1]}", NULL}, "y");
  expect_run(
      root,
      (const char *const[]){"/bin/sh", "-c", "set -o pipefail; [[ -n x ]] && echo ash-ok", NULL},
      "ash-ok");
  expect_run(root, (const char *const[]){"/usr/bin/id", "agent", NULL}, "uid=1000(agent)");
  /* toybox's applets (static, musl: user names from /etc/passwd, no NSS), toysh as
   * `toybox sh` */
  expect_run(root, (const char *const[]){"/usr/bin/ls", "-ld", "/home/agent", NULL}, "root");
  expect_run(root,
             (const char *const[]){"/bin/sh", "-c",
                                   "printf 'a\\nb\\n' > /tmp/x; printf 'a\\nc\\n' > /tmp/y; "
                                   "diff /tmp/x /tmp/y | tr -d '\\n' | sed 's/[^bc]//g'",
                                   NULL},
             "bc");
  expect_run(root, (const char *const[]){"/bin/toybox", "sh", "-c", "echo $((6 * 7))", NULL}, "42");
  expect_run(
      root,
      (const char *const[]){"/bin/sh", "-c",
                            "cd /tmp && git init -q r && cd r && echo hi > f && git add f && "
                            "git -c user.name=a -c user.email=a@b commit -qm x && git log "
                            "--format=%s",
                            NULL},
      "x");

  /* building it again gives the same id */
  json_t *again = build_ok(AGT_SOURCE_ROOT "/rootfs/default.yaml", 0);
  assert_string_equal(jstr(again, "id"), jstr(info, "id"));
  json_decref(again);
  assert_int_equal(agt_rootfs_remove(store, jstr(info, "id"), &err), 0);
  json_decref(info);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prerequisites),
      cmocka_unit_test(test_small_build),
      cmocka_unit_test(test_rebuild_same_id),
      cmocka_unit_test(test_concurrent_builds),
      cmocka_unit_test(test_changed_input_new_id),
      cmocka_unit_test(test_resolve_ambiguous_prefix),
      cmocka_unit_test(test_remove),
      cmocka_unit_test(test_missing_source),
      cmocka_unit_test(test_download_verified),
      cmocka_unit_test(test_download_mismatch),
      cmocka_unit_test(test_default_rootfs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
