/* agtd's log: one line per event on stderr (journald keeps it under systemd), with its time
 * and its level, as crun's.  Depends on nothing, so every part of agtd may log. */
#ifndef AGT_LOG_H
#define AGT_LOG_H

enum agt_log_level {
  AGT_LOG_ERROR,   /* agtd cannot do what it must (a jail's record lost, a start broken) */
  AGT_LOG_WARNING, /* something failed, agtd goes on */
  AGT_LOG_INFO,    /* what agtd did: listening, a jail's exit, a build */
  AGT_LOG_DEBUG,
};

/* Lines above max are dropped (AGT_LOG_INFO unless set). */
void agt_log_set_level(enum agt_log_level max);

/* "agtd: 2026-12-02T03:55:00.123Z warning: jail 'a': ..." */
void agt_log(enum agt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define agt_log_error(...) agt_log(AGT_LOG_ERROR, __VA_ARGS__)
#define agt_log_warning(...) agt_log(AGT_LOG_WARNING, __VA_ARGS__)
#define agt_log_info(...) agt_log(AGT_LOG_INFO, __VA_ARGS__)
#define agt_log_debug(...) agt_log(AGT_LOG_DEBUG, __VA_ARGS__)

#endif
