/* agt up: create the VM from the rendered template if it does not exist, start it if it
 * is not running, and wait until agtd answers through SSH.  Running it again is cheap.
 * With --no-start, only the first step: the VM exists (image copied, disk built), stopped.
 * With target local, start agtd on this machine when none answers. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"
#include "agt_paths.h"
#include "agtd_local.h"
#include "cleanup.h"
#include "jails_disk.h"
#include "subprocess.h"
#include "util.h"
#include "xalloc.h"

struct up_opts {
  const char *timeout;
  int no_start;
};

/* --timeout DURATION: checked here, read where it is used. */
static int duration_opt(const struct agt_opt *o, void *field, const char *arg, agt_error_t *err)
{
  uint64_t s;

  (void)o;
  if (agt_parse_duration("--timeout", arg, &s, err) < 0)
    return -1;
  *(const char **)field = arg;
  return 0;
}

static const struct agt_opt opts[] = {
    AGT_OPT_CALLBACK(0, "timeout", "DURATION", struct up_opts, timeout, duration_opt, 0,
                     "how long agt up may take in all: waiting for another agt up of the same "
                     "VM, Lima's boot and agtd's answer (lima.start_timeout: 10m)"),
    AGT_OPT_BOOL(0, "no-start", struct up_opts, no_start,
                 "create the VM if it is missing (image copied, disk made), but do not start it"),
    AGT_OPT_END,
};

static const struct agt_cmd_help help = {
    "agt up [--timeout DURATION] [--no-start]",
    "Create the VM if it is missing, start it, and wait until agtd answers.",
    opts,
};

/* Lima merges these into every instance at every start: say so, since they can change
 * what agt's template asks for. */
static void warn_global_lima_config(struct agt_ctx *c)
{
  static const char *const files[] = {"override.yaml", "default.yaml"};

  for (size_t i = 0; i < 2; i++) {
    cleanup_free char *p = xasprintf("%s/_config/%s", c->lima.home, files[i]);
    struct stat st;
    if (stat(p, &st) == 0)
      agt_note(c, "note: %s exists; Lima applies it to this VM too", p);
  }
}

/* The jails' disk of a VM that failed to come into being: it goes too. */
static void drop_disk(struct agt_ctx *c, const char *disk)
{
  agt_error_t e2 = NULL;

  if (agt_jails_disk_delete(c, disk, &e2) < 0) {
    fprintf(stderr, "agt: the jails' disk '%s' is left: %s\n", disk, e2->msg);
    agt_error_release(&e2);
  }
}

static int create_vm(struct agt_ctx *c, const char *name, agt_error_t *err)
{
  cleanup_free char *yaml = NULL, *file = NULL, *disk = NULL;
  uint64_t size;

  /* rendered first: a config error makes no disk */
  if (agt_template_render(&c->cfg, &c->host, NULL, &yaml, err) < 0)
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  free(yaml);
  yaml = NULL;
  if (agt_config_size(&c->cfg, AGT_CFG_VM_JAILS_DISK, &size, err) < 0 ||
      agt_jails_disk_make(c, name, size, &disk, err) < 0)
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  if (agt_template_render(&c->cfg, &c->host, disk, &yaml, err) < 0) {
    drop_disk(c, disk);
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  }
  file = xasprintf("%s/%s.yaml", c->lima.workdir, name);
  if (agt_write_file(file, yaml, strlen(yaml), 0600, err) < 0) {
    drop_disk(c, disk);
    return -1;
  }
  agt_note(c, "creating vm '%s' from %s (rendered: %s)", name,
           agt_config_get(&c->cfg, AGT_CFG_VM_TEMPLATE), file);
  if (agt_lima_create(&c->lima, name, file, err) < 0) {
    struct agt_lima_instance in;
    agt_error_t e2 = NULL;
    int found = 0, left = 0;
    /* Lima leaves the instance of a failed create behind (its lima.yaml, no disk): the
     * next `agt up` would start that and never render the config again.  It did not
     * exist before this call, so it goes, and its jails' disk with it. */
    if (agt_lima_list(&c->lima, name, &in, &found, NULL) == 0 && found) {
      agt_lima_instance_release(&in);
      if (agt_lima_delete(&c->lima, name, 1, &e2) < 0) {
        fprintf(stderr, "agt: the half-created vm '%s' is left: %s\n", name, e2->msg);
        agt_error_release(&e2);
        left = 1;
      } else {
        agt_note(c, "removed the half-created vm '%s'", name);
      }
    }
    if (!left)
      drop_disk(c, disk);
    return agt_error_wrap(err, "cannot create vm '%s'", name);
  }
  return 0;
}

/* The VM's jails' disk before a start: a VM from before agt gave the jails one keeps
 * working (agtd's image inside the root disk), saying so; a VM whose disk is gone cannot
 * start (Lima would say "could not attach"): that is said plainly. */
static int check_jails_disk(struct agt_ctx *c, const struct agt_lima_instance *in, agt_error_t *err)
{
  struct agt_lima_disk d;
  int found;

  if (in->jails_disk == NULL) {
    agt_note(c,
             "note: vm '%s' was made before agt gave the jails a Lima disk of their own: "
             "agtd keeps their writable layers in an image inside its root disk ('agt delete' "
             "and 'agt up' make it anew with one)",
             in->name);
    return 0;
  }
  if (agt_lima_disk_list(&c->lima, in->jails_disk, &d, &found, err) < 0)
    return -1;
  if (!found)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "vm '%s' cannot start: its jails' disk, the Lima disk '%s', is gone "
                          "(limactl disk ls); 'agt reset' makes an empty one, 'agt delete' "
                          "deletes the VM",
                          in->name, in->jails_disk);
  agt_lima_disk_release(&d);
  return 0;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep until the next try, at most `step` seconds and never past `deadline`. */
static void pause_until(double deadline, double step)
{
  double left = deadline - now_s();
  struct timespec ts;

  if (left <= 0)
    return;
  if (left > step)
    left = step;
  ts.tv_sec = (time_t)left;
  ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
  nanosleep(&ts, NULL);
}

static int wait_for_agtd(struct agt_ctx *c, double deadline, const char *timeout, agt_error_t *err)
{
  agt_error_t e = NULL;

  for (int i = 0;; i++) {
    if (agt_target_connect(&c->target, &e) == 0)
      return 0;
    if (e->kind == AGT_E_NOTFOUND || (e->kind == AGT_E_STATE && strstr(e->msg, "vm '")))
      break; /* the VM is gone or stopped: waiting will not help */
    if (now_s() >= deadline) {
      agt_error_wrap(&e, "not within --timeout %s", timeout);
      break;
    }
    if (i == 0)
      agt_note(c, "waiting for agtd (%s)", e->msg);
    agt_error_release(&e);
    pause_until(deadline, 1.0);
  }
  *err = e;
  return agt_error_wrap(err, "agtd does not answer");
}

/* One `agt up` of an instance at a time: a record lock on $LIMA_HOME/_agt/up-NAME.lock
 * (Lima skips names that start with "_"), held until agt exits.  A second `agt up` waits
 * for the first, within its deadline, rather than finding the VM half started (Broken)
 * and stopping it by force. */
static int lock_up(struct agt_ctx *c, const char *name, double deadline, const char *timeout,
                   agt_error_t *err)
{
  cleanup_free char *dir = xasprintf("%s/_agt", c->lima.home);
  cleanup_free char *path = xasprintf("%s/up-%s.lock", dir, name);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  int fd, noted = 0;

  if (agt_mkdir_p(dir, 0700, err) < 0)
    return agt_error_wrap(err, "the lock of agt up");
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return agt_error_make(err, errno, "open the lock of agt up '%s'", path);
  while (fcntl(fd, F_SETLK, &fl) < 0) {
    struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (errno != EACCES && errno != EAGAIN) {
      int e = errno;
      close(fd);
      return agt_error_make(err, e, "lock '%s'", path);
    }
    if (now_s() >= deadline) {
      close(fd);
      return agt_error_kind(err, AGT_E_STATE,
                            "another agt up of vm '%s' still runs after --timeout %s (lock %s)",
                            name, timeout, path);
    }
    if (!noted) {
      if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
        agt_note(c, "waiting for another agt up of vm '%s' (pid %ld)", name, (long)who.l_pid);
      else
        agt_note(c, "waiting for another agt up of vm '%s'", name);
      noted = 1;
    }
    pause_until(deadline, 0.2);
  }
  return 0; /* fd stays open: the lock lasts until agt exits */
}

/* Lima calls an instance Broken while its host agent runs and its driver does not yet:
 * that is also what a start in progress (a `limactl start` outside agt) looks like for a
 * moment.  While the host agent lives, wait for it to settle (Running, or Stopped when
 * the start failed) within the deadline; only a Broken instance with no host agent is
 * stopped by force. */
static int settle_broken(struct agt_ctx *c, const char *name, struct agt_lima_instance *in,
                         double deadline, const char *timeout, agt_error_t *err)
{
  int noted = 0, found;

  while (in->status == AGT_LIMA_BROKEN && in->hostagent_pid > 0 &&
         kill((pid_t)in->hostagent_pid, 0) == 0) {
    if (now_s() >= deadline)
      return agt_error_kind(err, AGT_E_STATE,
                            "vm '%s' is still Broken (%s) after --timeout %s, with its host agent "
                            "(pid %ld) running: 'agt stop --force' stops it",
                            name, in->errors ? in->errors[0] : "no reason given", timeout,
                            in->hostagent_pid);
    if (!noted)
      agt_note(c, "vm '%s' is starting (Broken: %s; host agent pid %ld): waiting", name,
               in->errors ? in->errors[0] : "no reason given", in->hostagent_pid);
    noted = 1;
    pause_until(deadline, 0.5);
    agt_lima_instance_release(in);
    if (agt_vm_state(c, in, &found, err) < 0)
      return -1;
    if (!found)
      return agt_error_kind(err, AGT_E_NOTFOUND, "vm '%s' was deleted while it started", name);
  }
  if (in->status == AGT_LIMA_BROKEN) {
    agt_note(c, "vm '%s' is Broken (%s): stopping it by force first", name,
             in->errors ? in->errors[0] : "no reason given");
    if (agt_lima_stop(&c->lima, name, 1, err) < 0)
      return agt_error_wrap(err, "cannot stop vm '%s'", name);
  }
  return 0;
}

/* The agtd that `agt up` starts for target local: $AGT_AGTD, else the one built next to
 * this agt, else agtd in PATH. */
static char *local_agtd(void)
{
  const char *env = getenv("AGT_AGTD");
  char *p;

  if (env && *env)
    return xstrdup(env);
  p = xasprintf("%s/guest/agtd", AGT_BUILD_ROOT);
  if (access(p, X_OK) == 0)
    return p;
  free(p);
  p = agt_find_program("agtd");
  return p ? p : agt_find_program("/usr/local/sbin/agtd");
}

static const char *env_or(const char *name, const char *def)
{
  const char *v = getenv(name);
  return v && *v ? v : def;
}

/* Target local with no agtd answering: start one, as root, detached from agt (its own
 * session, output appended to its log), and wait until it answers. */
static int start_local_agtd(struct agt_ctx *c, agt_error_t *err)
{
  const char *sock = agt_config_get(&c->cfg, AGT_CFG_AGTD_SOCKET);
  const char *state = agt_local_state_dir();
  const char *log = agt_local_log_file();
  const char *cgroup = env_or("AGT_AGTD_CGROUP", "agt");
  cleanup_free char *agtd = local_agtd(), *logdir = xstrdup(log);
  struct agt_strv a = {0};
  cleanup_strv char **argv = NULL;
  char *slash;
  int logfd, devnull, status;
  pid_t pid;

  if (agtd == NULL)
    return agt_error_kind(err, AGT_E_NOTFOUND,
                          "no agtd to start: build it (just build), or set AGT_AGTD");
  if (geteuid() != 0)
    return agt_error_kind(err, AGT_E_STATE,
                          "agtd does not answer at %s, and only root can start it: run 'agt up' "
                          "as root (sudo), or start '%s serve' yourself",
                          sock, agtd);
  if ((slash = strrchr(logdir, '/')) != NULL && slash != logdir) {
    *slash = '\0';
    if (agt_mkdir_p(logdir, 0755, err) < 0)
      return -1;
  }
  logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (logfd < 0)
    return agt_error_make(err, errno, "open agtd's log '%s'", log);
  devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  agt_strv_push(&a, agtd);
  agt_strv_push(&a, "serve");
  agt_strv_pushf(&a, "--socket=%s", sock);
  agt_strv_pushf(&a, "--state-dir=%s", state);
  agt_strv_pushf(&a, "--cgroup=%s", cgroup);
  if (c->cfg.nmounts) { /* the project directories, besides agtd's own defaults */
    agt_strv_push(&a, "--workspace-root=/home");
    agt_strv_push(&a, "--workspace-root=/Users");
    for (size_t i = 0; i < c->cfg.nmounts; i++)
      agt_strv_pushf(&a, "--workspace-root=%s", c->cfg.mounts[i].location);
  }
  argv = agt_strv_steal(&a);
  agt_note(c, "starting agtd: %s serve --socket=%s --state-dir=%s (log: %s)", agtd, sock, state,
           log);
  pid = fork();
  if (pid < 0) {
    close(logfd);
    if (devnull >= 0)
      close(devnull);
    return agt_error_make(err, errno, "fork");
  }
  if (pid == 0) { /* only async-signal-safe calls from here on */
    struct sigaction sa;
    sigset_t none;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid(); /* not in agt's session: a ^C there does not reach agtd */
    if ((devnull >= 0 && dup2(devnull, STDIN_FILENO) < 0) || dup2(logfd, STDOUT_FILENO) < 0 ||
        dup2(logfd, STDERR_FILENO) < 0)
      _exit(127);
    execv(argv[0], argv);
    _exit(127);
  }
  close(logfd);
  if (devnull >= 0)
    close(devnull);
  for (int i = 0; i < 200; i++) { /* 10 s */
    agt_error_t e = NULL;
    struct timespec ts = {0, 50 * 1000 * 1000};
    if (agt_target_connect(&c->target, &e) == 0) {
      /* a result, not progress: --quiet keeps it */
      printf("agtd started (pid %ld); 'agt down' stops it\n", (long)pid);
      return 0;
    }
    agt_error_release(&e);
    if (waitpid(pid, &status, WNOHANG) == pid)
      return agt_error_kind(err, AGT_E_STATE, "agtd exited at once (status %d): see %s",
                            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log);
    nanosleep(&ts, NULL);
  }
  return agt_error_kind(err, AGT_E_STATE, "agtd (pid %ld) does not answer at %s: see %s", (long)pid,
                        sock, log);
}

static int up_other(struct agt_ctx *c, agt_error_t *err)
{
  char desc[256];
  agt_error_t e = NULL;

  if (agt_target_connect(&c->target, &e) < 0) {
    /* target local: nothing listens there (no socket, or a stale one): start agtd.  Any
     * other failure (permissions, an agtd that does not answer) is left to the user. */
    if (c->target.kind != AGT_TARGET_LOCAL || (e->status != ENOENT && e->status != ECONNREFUSED)) {
      *err = e;
      return -1;
    }
    agt_error_release(&e);
    if (start_local_agtd(c, err) < 0)
      return agt_error_wrap(err, "target local");
  }
  printf("agtd %s answers at %s\n",
         json_string_value(json_object_get(c->target.rpc.hello, "agtd_version")),
         agt_target_describe(&c->target, desc, sizeof desc));
  return 0;
}

int cmd_up(struct agt_ctx *c, int argc, char **argv, agt_error_t *err)
{
  struct up_opts o = {agt_config_get(&c->cfg, AGT_CFG_LIMA_START_TIMEOUT), 0};
  const char *name = c->target.instance;
  struct agt_lima_instance in;
  char desc[256];
  uint64_t timeout = 600;
  double deadline, left;
  int found, i;

  i = agt_cmd_opts(argc, argv, &help, NULL, &o, err);
  if (i == -2)
    return 0;
  if (i < 0)
    return -1;
  if (i < argc)
    return agt_error_kind(err, AGT_E_INVALID, "agt up takes no operands");
  if (c->target.kind != AGT_TARGET_LIMA) {
    if (o.no_start)
      return agt_error_kind(err, AGT_E_INVALID, "agt up --no-start needs a Lima target");
    return up_other(c, err);
  }
  if (agt_parse_duration("--timeout", o.timeout, &timeout, err) < 0)
    return -1;
  deadline = now_s() + (double)timeout;
  if (lock_up(c, name, deadline, o.timeout, err) < 0)
    return -1;

  if (agt_vm_state(c, &in, &found, err) < 0)
    return -1;
  if (!found) {
    if (create_vm(c, name, err) < 0)
      return -1;
    if (agt_vm_state(c, &in, &found, err) < 0)
      return -1;
    if (!found)
      return agt_error_kind(err, AGT_E_PROTO, "vm '%s' was created but limactl does not list it",
                            name);
    if (o.no_start) {
      printf("vm '%s' created (%s); 'agt up' starts it\n", name, agt_lima_status_name(in.status));
      agt_lima_instance_release(&in);
      return 0;
    }
  } else if (o.no_start) {
    printf("vm '%s' exists (%s); nothing to do\n", name, agt_lima_status_name(in.status));
    agt_lima_instance_release(&in);
    return 0;
  }
  if (settle_broken(c, name, &in, deadline, o.timeout, err) < 0) {
    agt_lima_instance_release(&in);
    return -1;
  }
  if (in.status != AGT_LIMA_RUNNING) {
    if (check_jails_disk(c, &in, err) < 0) {
      agt_lima_instance_release(&in);
      return -1;
    }
    warn_global_lima_config(c);
    agt_note(c,
             "starting vm '%s' (the first boot downloads an image and provisions agtd: "
             "minutes)",
             name);
    left = deadline - now_s();
    if (agt_lima_start(&c->lima, name, left < 1 ? 1 : (uint64_t)left, err) < 0) {
      struct agt_lima_instance now;
      int f2;
      agt_lima_instance_release(&in);
      agt_error_wrap(err, "cannot start vm '%s'", name);
      if (agt_vm_state(c, &now, &f2, NULL) == 0 && f2 && now.status == AGT_LIMA_RUNNING)
        fprintf(stderr,
                "agt: vm '%s' is running but not ready; 'agt status' shows more, "
                "'agt stop --force' stops it\n",
                name);
      if (f2)
        agt_lima_instance_release(&now);
      return -1;
    }
  }
  agt_lima_instance_release(&in);
  if (wait_for_agtd(c, deadline, o.timeout, err) < 0)
    return -1;
  printf("vm '%s' is up: agtd %s at %s\n", name,
         json_string_value(json_object_get(c->target.rpc.hello, "agtd_version")),
         agt_target_describe(&c->target, desc, sizeof desc));
  return 0;
}
