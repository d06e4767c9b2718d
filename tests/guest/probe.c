/* probe: a static multi-call program that runs inside a jail as the agent would, for the
 * guest tests.  Each verb prints what it saw; attack verbs print "blocked: ..." and exit 0
 * when the jail held, or "ESCAPED: ..." and exit 1 when it did not. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int probe_xfer(int argc, char **argv); /* xfer.c */

static int escaped(const char *what)
{
  printf("ESCAPED: %s\n", what);
  return 1;
}

static int v_write(int argc, char **argv)
{
  FILE *f;

  if (argc < 4)
    return 2;
  f = fopen(argv[2], "w");
  if (f == NULL) {
    printf("open %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  fputs(argv[3], f);
  return fclose(f) == 0 ? 0 : 1;
}

static int v_read(int argc, char **argv)
{
  char buf[4096];
  size_t n;
  FILE *f;

  if (argc < 3)
    return 2;
  f = fopen(argv[2], "r");
  if (f == NULL) {
    printf("open %s: %s\n", argv[2], strerror(errno));
    return 1;
  }
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    fwrite(buf, 1, n, stdout);
  fclose(f);
  return 0;
}

static int v_ls(int argc, char **argv)
{
  DIR *d = opendir(argc > 2 ? argv[2] : ".");
  struct dirent *de;

  if (d == NULL) {
    printf("opendir: %s\n", strerror(errno));
    return 1;
  }
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.')
      printf("%s\n", de->d_name);
  closedir(d);
  return 0;
}

/* The pids this process can see in /proc. */
static int v_ps(void)
{
  DIR *d = opendir("/proc");
  struct dirent *de;
  int n = 0;

  if (d == NULL)
    return 1;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] >= '0' && de->d_name[0] <= '9') {
      char path[300], cmd[256] = "";
      FILE *f;
      snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
      f = fopen(path, "r");
      if (f) {
        size_t k = fread(cmd, 1, sizeof cmd - 1, f);
        cmd[k] = '\0';
        fclose(f);
      }
      printf("%s %s\n", de->d_name, cmd);
      n++;
    }
  closedir(d);
  printf("count %d\n", n);
  return 0;
}

/* The classic double chroot: chroot into a subdirectory without chdir, climb out with "..",
 * then chroot("."). */
static int v_escape_chroot(int argc, char **argv)
{
  const char *marker = argc > 2 ? argv[2] : "/etc/agt-guest-marker";

  mkdir("/tmp/x", 0755);
  if (chroot("/tmp/x") < 0) {
    printf("blocked: chroot: %s\n", strerror(errno));
  } else {
    for (int i = 0; i < 64; i++)
      if (chdir("..") < 0)
        break;
    if (chroot(".") < 0)
      printf("blocked: second chroot: %s\n", strerror(errno));
  }
  if (access(marker, F_OK) == 0)
    return escaped("the guest's marker file is visible after the double chroot");
  printf("blocked: %s not reachable\n", marker);
  return 0;
}

/* /proc/<pid>/root of every visible process. */
static int v_proc_root(int argc, char **argv)
{
  const char *marker = argc > 2 ? argv[2] : "etc/agt-guest-marker";
  DIR *d = opendir("/proc");
  struct dirent *de;
  int bad = 0;

  if (d == NULL) {
    printf("blocked: no /proc: %s\n", strerror(errno));
    return 0;
  }
  while ((de = readdir(d)) != NULL) {
    char path[512];
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%s/root/%s", de->d_name, marker);
    if (access(path, F_OK) == 0) {
      printf("reachable: %s\n", path);
      bad = 1;
    }
  }
  closedir(d);
  if (bad)
    return escaped("the guest's marker file is reachable through /proc/PID/root");
  printf("blocked: no /proc/PID/root reaches %s\n", marker);
  return 0;
}

/* Inherited fds: anything besides 0-2 is a leak; from each, try to climb out with "..". */
static int v_fds(int argc, char **argv)
{
  const char *marker = argc > 2 ? argv[2] : "etc/agt-guest-marker";
  int bad = 0;

  for (int fd = 3; fd < 1024; fd++) {
    int cur;
    if (fcntl(fd, F_GETFD) < 0)
      continue;
    printf("open fd %d\n", fd);
    bad = 1;
    cur = fd;
    for (int i = 0; i < 64; i++) {
      int up = openat(cur, "..", O_RDONLY | O_DIRECTORY);
      if (up < 0)
        break;
      cur = up;
    }
    if (faccessat(cur, marker, F_OK, 0) == 0)
      return escaped("an inherited fd reaches the guest's files");
  }
  {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == NULL || cwd[0] != '/')
      return escaped("the working directory is outside the root");
  }
  if (bad)
    return escaped("fds beyond stdin, stdout and stderr were inherited");
  printf("blocked: only fds 0-2 are open\n");
  return 0;
}

static int v_forkbomb(int argc, char **argv)
{
  int n = 0, secs = argc > 2 ? atoi(argv[2]) : 5;

  for (;;) {
    pid_t p = fork();
    if (p < 0)
      break;
    if (p == 0) {
      sleep((unsigned)secs + 2);
      _exit(0);
    }
    n++;
    if (n > 100000)
      break;
  }
  printf("forked %d before: %s\n", n, strerror(errno));
  fflush(stdout);
  sleep((unsigned)secs);
  return 0;
}

static int v_memhog(int argc, char **argv)
{
  size_t mb = argc > 2 ? strtoul(argv[2], NULL, 10) : 4096, i;

  for (i = 0; i < mb; i++) {
    char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      printf("mmap failed after %zu MB\n", i);
      return 0;
    }
    memset(p, 1, 1 << 20);
    if (i % 64 == 0) {
      printf("%zu MB\n", i);
      fflush(stdout);
    }
  }
  printf("allocated %zu MB\n", i);
  return 0;
}

static int v_status(void)
{
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");

  if (f == NULL)
    return 1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "Uid:", 4) || !strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
        !strncmp(line, "Seccomp:", 8) || !strncmp(line, "SigBlk:", 7))
      fputs(line, stdout);
  fclose(f);
  return 0;
}

static int v_sleep(int argc, char **argv)
{
  unsigned s = argc > 2 ? (unsigned)atoi(argv[2]) : 3600;
  sleep(s);
  return 0;
}

static int v_spam(int argc, char **argv)
{
  /* Write N lines "line <i>" as fast as possible (log capture tests). */
  long n = argc > 2 ? atol(argv[2]) : 1000;
  for (long i = 0; i < n; i++)
    printf("line %ld\n", i);
  return 0;
}

/* Direct network attempts, bypassing any proxy: "net tcp|udp|icmp ADDR PORT".  Prints
 * "reached" or "failed: <errno>"; exits 0 only when the packet could not leave. */
static int v_net(int argc, char **argv)
{
  struct sockaddr_storage ss;
  socklen_t len;
  int fd, r, v6;
  const char *kind = argc > 2 ? argv[2] : "tcp";
  const char *addr = argc > 3 ? argv[3] : "127.0.0.1";
  int port = argc > 4 ? atoi(argv[4]) : 80;

  memset(&ss, 0, sizeof ss);
  v6 = strchr(addr, ':') != NULL;
  if (v6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((unsigned short)port);
    if (inet_pton(AF_INET6, addr, &s6->sin6_addr) != 1)
      return 2;
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
      return 2;
    len = sizeof *s4;
  }
  if (!strcmp(kind, "tcp"))
    fd = socket(ss.ss_family, SOCK_STREAM, 0);
  else if (!strcmp(kind, "udp"))
    fd = socket(ss.ss_family, SOCK_DGRAM, 0);
  else if (!strcmp(kind, "icmp"))
    fd = socket(ss.ss_family, SOCK_DGRAM, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
  else if (!strcmp(kind, "raw"))
    fd = socket(ss.ss_family, SOCK_RAW, IPPROTO_RAW);
  else
    return 2;
  if (fd < 0) {
    printf("failed: socket: %s\n", strerror(errno));
    return 0;
  }
  if (!strcmp(kind, "tcp")) {
    r = connect(fd, (struct sockaddr *)&ss, len);
  } else {
    /* an ICMP echo request (type 8 / 128), or a DNS-sized datagram */
    unsigned char pkt[32] = {v6 ? 128 : 8, 0};
    r = (int)sendto(fd, pkt, sizeof pkt, 0, (struct sockaddr *)&ss, len);
  }
  if (r < 0) {
    printf("failed: %s %s: %s\n", kind, addr, strerror(errno));
    return 0;
  }
  printf("reached: %s %s port %d\n", kind, addr, port);
  return 1;
}

int main(int argc, char **argv)
{
  const char *v = argc > 1 ? argv[1] : "";

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(v, "write"))
    return v_write(argc, argv);
  if (!strcmp(v, "read"))
    return v_read(argc, argv);
  if (!strcmp(v, "ls"))
    return v_ls(argc, argv);
  if (!strcmp(v, "ps"))
    return v_ps();
  if (!strcmp(v, "escape-chroot"))
    return v_escape_chroot(argc, argv);
  if (!strcmp(v, "proc-root"))
    return v_proc_root(argc, argv);
  if (!strcmp(v, "fds"))
    return v_fds(argc, argv);
  if (!strcmp(v, "forkbomb"))
    return v_forkbomb(argc, argv);
  if (!strcmp(v, "memhog"))
    return v_memhog(argc, argv);
  if (!strcmp(v, "status"))
    return v_status();
  if (!strcmp(v, "sleep"))
    return v_sleep(argc, argv);
  if (!strcmp(v, "spam"))
    return v_spam(argc, argv);
  if (!strcmp(v, "net"))
    return v_net(argc, argv);
  if (!strcmp(v, "xfer"))
    return probe_xfer(argc, argv);
  if (!strcmp(v, "exit"))
    return argc > 2 ? atoi(argv[2]) : 0;
  fprintf(stderr, "usage: probe write|read|ls|ps|escape-chroot|proc-root|fds|forkbomb|memhog|"
                  "status|sleep|spam|net|xfer|exit ...\n");
  return 2;
}
