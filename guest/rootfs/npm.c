/* `npm` sources (npm.h): the guest's npm, run without a shell, its output kept in a file. */
#include "npm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

extern char **environ;

/* The last `max` bytes of a file, on one line. */
static char *tail_of(const char *path, size_t max)
{
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  char *buf;
  ssize_t n;

  if (fd < 0 || fstat(fd, &st) < 0)
    return xstrdup("");
  if ((size_t)st.st_size > max)
    lseek(fd, st.st_size - (off_t)max, SEEK_SET);
  buf = xzalloc(max + 1);
  n = read(fd, buf, max);
  if (n < 0)
    n = 0;
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    buf[--n] = '\0';
  for (char *p = buf; *p; p++)
    if (*p == '\n')
      *p = ' ';
  return buf;
}

int rootfs_npm_install(const char *spec, const char *prefix, const char *cache, agt_error_t *err)
{
  cleanup_free char *log = xasprintf("%s.log", prefix);
  cleanup_free char *cache_opt = xasprintf("--cache=%s", cache);
  const char *argv[] = {"npm",
                        "install",
                        "--prefix",
                        prefix,
                        cache_opt,
                        "--ignore-scripts",
                        "--no-save",
                        "--no-package-lock",
                        "--no-audit",
                        "--no-fund",
                        "--no-update-notifier",
                        "--omit=dev",
                        "--loglevel=warn",
                        "--",
                        spec,
                        NULL};
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, r, fd;

  fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return agt_error_make(err, errno, "create '%s'", log);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  r = posix_spawnp(&pid, "npm", &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd);
  if (r != 0) {
    unlink(log);
    return agt_error_make(err, r,
                          "run npm for '%s' (the guest needs npm to build agent layers: "
                          "apt-get install npm)",
                          spec);
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return agt_error_make(err, errno, "wait for npm");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    cleanup_free char *tail = tail_of(log, 1500);
    unlink(log);
    if (WIFEXITED(status))
      return agt_error_kind(err, AGT_E_INTERNAL, "npm install %s exited with %d: %s", spec,
                            WEXITSTATUS(status), tail);
    return agt_error_kind(err, AGT_E_INTERNAL, "npm install %s was killed by signal %d: %s", spec,
                          WTERMSIG(status), tail);
  }
  unlink(log);
  return 0;
}

char *rootfs_npm_version(const char *prefix, const char *name)
{
  cleanup_free char *path = xasprintf("%s/node_modules/%s/package.json", prefix, name);
  json_t *j = json_load_file(path, 0, NULL);
  const char *v = json_string_value(json_object_get(j, "version"));
  char *out = v ? xstrdup(v) : NULL;

  json_decref(j);
  return out;
}
