#include "agtd_local.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"

const char *agt_local_state_dir(void)
{
  const char *v = getenv("AGT_AGTD_STATE");
  return v && *v ? v : "/var/lib/agt";
}

const char *agt_local_log_file(void)
{
  const char *v = getenv("AGT_AGTD_LOG");
  return v && *v ? v : "/var/log/agt/agtd.log";
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int agt_local_agtd_stop(struct agt_ctx *c, unsigned timeout_s, long *pid, long *running,
                        agt_error_t *err)
{
  agt_error_t e = NULL;
  json_t *res = NULL;
  json_t *p;

  *pid = 0;
  *running = 0;
  if (agt_target_connect(&c->target, &e) < 0) {
    if (e->status == ENOENT || e->status == ECONNREFUSED) { /* nothing listens: stopped */
      agt_error_release(&e);
      return 0;
    }
    *err = e;
    return -1;
  }
  if (agt_target_call(&c->target, "daemon.status", NULL, &res, err) < 0)
    return -1;
  p = json_object_get(res, "pid");
  if (!json_is_integer(p) || json_integer_value(p) <= 1) {
    json_decref(res);
    return agt_error_kind(err, AGT_E_PROTO,
                          "this agtd does not say its pid (an older one): stop it yourself "
                          "(kill PID, the pid 'agt up' printed)");
  }
  *pid = (long)json_integer_value(p);
  *running = (long)json_integer_value(json_object_get(res, "running"));
  json_decref(res);
  agt_target_disconnect(&c->target);
  if (kill((pid_t)*pid, SIGTERM) < 0) {
    if (errno == EPERM)
      return agt_error_kind(err, AGT_E_STATE,
                            "agtd (pid %ld) is root's and agt is not: run 'sudo agt down'", *pid);
    return agt_error_make(err, errno, "stop agtd (pid %ld)", *pid);
  }
  for (unsigned i = 0; i < timeout_s * 10; i++) {
    if (kill((pid_t)*pid, 0) < 0 && errno == ESRCH)
      return 0;
    sleep_ms(100);
  }
  return agt_error_kind(err, AGT_E_STATE,
                        "agtd (pid %ld) did not exit within %u s of SIGTERM: see its log "
                        "($AGT_AGTD_LOG, /var/log/agt/agtd.log), or 'kill -9 %ld'",
                        *pid, timeout_s, *pid);
}

/* nftw() takes no context: one removal at a time. */
static uint64_t rm_bytes;
static int rm_errno;
static char rm_failed[4096];

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  (void)ftw;
  if (type != FTW_DP && type != FTW_D)
    rm_bytes += (uint64_t)st->st_blocks * 512;
  if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT) {
    rm_errno = errno;
    snprintf(rm_failed, sizeof rm_failed, "%s", path);
    return 1;
  }
  return 0;
}

int agt_local_rm_tree(const char *dir, uint64_t *bytes, agt_error_t *err)
{
  rm_bytes = 0;
  rm_errno = 0;
  rm_failed[0] = '\0';
  /* FTW_MOUNT: what another filesystem mounted inside is left alone (rmdir of its mount
   * point then fails, and says so) */
  if (nftw(dir, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0) {
    if (rm_errno)
      return agt_error_make(err, rm_errno, "remove '%s'", rm_failed);
    return agt_error_make(err, errno, "remove '%s'", dir);
  }
  *bytes = rm_bytes;
  return 0;
}
