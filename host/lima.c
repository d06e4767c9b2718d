#include "lima.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cleanup.h"
#include "util.h"
#include "xalloc.h"

static const char *const status_names[] = {
    [AGT_LIMA_UNKNOWN] = "",
    [AGT_LIMA_UNINITIALIZED] = "Uninitialized",
    [AGT_LIMA_INSTALLING] = "Installing",
    [AGT_LIMA_BROKEN] = "Broken",
    [AGT_LIMA_STOPPED] = "Stopped",
    [AGT_LIMA_RUNNING] = "Running",
};

enum agt_lima_status agt_lima_status_parse(const char *s)
{
  for (size_t i = 1; i < sizeof status_names / sizeof status_names[0]; i++)
    if (s && strcmp(s, status_names[i]) == 0)
      return (enum agt_lima_status)i;
  return AGT_LIMA_UNKNOWN;
}

const char *agt_lima_status_name(enum agt_lima_status s)
{
  if ((unsigned)s >= sizeof status_names / sizeof status_names[0] || s == AGT_LIMA_UNKNOWN)
    return "Unknown";
  return status_names[s];
}

/* Lima's rule (pkg/identifiers): ^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$, at most 76
 * characters, not ending in .yml or .yaml. */
int agt_lima_name_check(const char *name, agt_error_t *err)
{
  size_t n = name ? strlen(name) : 0;
  int prev_sep = 1;

  if (n == 0)
    return agt_error_kind(err, AGT_E_INVALID, "vm name must not be empty");
  if (n > AGT_LIMA_NAME_MAX)
    return agt_error_kind(err, AGT_E_INVALID, "vm name '%s' is longer than %d characters", name,
                          AGT_LIMA_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (isalnum(c) && c < 128) {
      prev_sep = 0;
    } else if ((c == '.' || c == '_' || c == '-') && !prev_sep) {
      prev_sep = 1;
    } else {
      return agt_error_kind(err, AGT_E_INVALID,
                            "vm name '%s': letters and digits, joined by single '.', '_' or '-'",
                            name);
    }
  }
  if (prev_sep)
    return agt_error_kind(err, AGT_E_INVALID, "vm name '%s' must end with a letter or digit", name);
  if ((n > 4 && strcmp(name + n - 4, ".yml") == 0) || (n > 5 && strcmp(name + n - 5, ".yaml") == 0))
    return agt_error_kind(err, AGT_E_INVALID, "vm name '%s' must not end in .yml or .yaml", name);
  return 0;
}

void agt_lima_init(struct agt_lima *l, const char *limactl, const char *home, const char *workdir)
{
  memset(l, 0, sizeof *l);
  l->limactl = xstrdup(limactl);
  l->home = xstrdup(home);
  l->workdir = workdir ? xstrdup(workdir) : NULL;
}

void agt_lima_release(struct agt_lima *l)
{
  free(l->limactl);
  free(l->home);
  free(l->workdir);
  memset(l, 0, sizeof *l);
}

char *agt_lima_identity(const struct agt_lima *l)
{
  return xasprintf("%s/_config/user", l->home);
}

/* Argument vectors. */

static void base_args(const struct agt_lima *l, struct agt_strv *s, const char *cmd)
{
  agt_strv_push(s, l->limactl);
  agt_strv_push(s, "--tty=false");
  agt_strv_push(s, "--log-format=json");
  agt_strv_push(s, cmd);
}

char **agt_lima_argv_create(const struct agt_lima *l, const char *name, const char *yaml_file)
{
  struct agt_strv s = {0};

  base_args(l, &s, "create");
  agt_strv_pushf(&s, "--name=%s", name);
  agt_strv_push(&s, yaml_file);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_start(const struct agt_lima *l, const char *name, uint64_t timeout_s)
{
  struct agt_strv s = {0};

  base_args(l, &s, "start");
  if (timeout_s)
    agt_strv_pushf(&s, "--timeout=%llus", (unsigned long long)timeout_s);
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_stop(const struct agt_lima *l, const char *name, int force)
{
  struct agt_strv s = {0};

  base_args(l, &s, "stop");
  if (force)
    agt_strv_push(&s, "--force");
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_delete(const struct agt_lima *l, const char *name, int force)
{
  struct agt_strv s = {0};

  base_args(l, &s, "delete");
  if (force)
    agt_strv_push(&s, "--force");
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_clone(const struct agt_lima *l, const char *src, const char *dst,
                           char *const *set)
{
  struct agt_strv s = {0};

  base_args(l, &s, "clone");
  for (size_t i = 0; set && set[i]; i++)
    agt_strv_pushf(&s, "--set=%s", set[i]);
  agt_strv_push(&s, src);
  agt_strv_push(&s, dst);
  return agt_strv_steal(&s);
}

/* `limactl disk SUB`: the base arguments, then the subcommand. */
static void disk_args(const struct agt_lima *l, struct agt_strv *s, const char *sub)
{
  base_args(l, s, "disk");
  agt_strv_push(s, sub);
}

char **agt_lima_argv_disk_create(const struct agt_lima *l, const char *name, const char *size)
{
  struct agt_strv s = {0};

  disk_args(l, &s, "create");
  agt_strv_pushf(&s, "--size=%s", size);
  agt_strv_push(&s, "--format=raw");
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_disk_import(const struct agt_lima *l, const char *name, const char *file)
{
  struct agt_strv s = {0};

  disk_args(l, &s, "import");
  agt_strv_push(&s, name);
  agt_strv_push(&s, file);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_disk_delete(const struct agt_lima *l, const char *name, int force)
{
  struct agt_strv s = {0};

  disk_args(l, &s, "delete");
  if (force)
    agt_strv_push(&s, "--force");
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_disk_list(const struct agt_lima *l, const char *name)
{
  struct agt_strv s = {0};

  disk_args(l, &s, "list");
  agt_strv_push(&s, "--json");
  if (name)
    agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_rename(const struct agt_lima *l, const char *src, const char *dst)
{
  struct agt_strv s = {0};

  base_args(l, &s, "rename");
  agt_strv_push(&s, src);
  agt_strv_push(&s, dst);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_factory_reset(const struct agt_lima *l, const char *name)
{
  struct agt_strv s = {0};

  base_args(l, &s, "factory-reset");
  agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_list(const struct agt_lima *l, const char *name)
{
  struct agt_strv s = {0};

  base_args(l, &s, "list");
  agt_strv_push(&s, "--json");
  if (name)
    agt_strv_push(&s, name);
  return agt_strv_steal(&s);
}

char **agt_lima_argv_shell(const struct agt_lima *l, const char *name, const char *workdir,
                           char *const *cmd)
{
  struct agt_strv s = {0};

  base_args(l, &s, "shell");
  if (workdir)
    agt_strv_pushf(&s, "--workdir=%s", workdir);
  agt_strv_push(&s, name);
  for (size_t i = 0; cmd && cmd[i]; i++)
    agt_strv_push(&s, cmd[i]);
  return agt_strv_steal(&s);
}

char **agt_lima_env(const struct agt_lima *l)
{
  struct agt_strv s = {0};

  agt_strv_pushf(&s, "LIMA_HOME=%s", l->home);
  return agt_strv_steal(&s);
}

/* list --json */

static char *dup_str(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? xstrdup(s) : NULL;
}

static uint64_t get_u64(json_t *o, const char *key)
{
  json_t *v = json_object_get(o, key);
  if (json_is_integer(v) && json_integer_value(v) > 0)
    return (uint64_t)json_integer_value(v);
  if (json_is_real(v) && json_real_value(v) > 0)
    return (uint64_t)json_real_value(v);
  return 0;
}

static void fill_instance(json_t *o, struct agt_lima_instance *in)
{
  json_t *errs = json_object_get(o, "errors"), *user;
  struct agt_strv ev = {0};
  size_t i;
  json_t *e;

  in->name = dup_str(o, "name");
  in->status_text = dup_str(o, "status");
  in->status = agt_lima_status_parse(in->status_text);
  in->dir = dup_str(o, "dir");
  in->vm_type = dup_str(o, "vmType");
  in->arch = dup_str(o, "arch");
  in->cpus = get_u64(o, "cpus");
  in->memory = get_u64(o, "memory");
  in->disk = get_u64(o, "disk");
  in->ssh_port = (unsigned)get_u64(o, "sshLocalPort");
  if (in->ssh_port > 65535)
    in->ssh_port = 0;
  in->ssh_address = dup_str(o, "sshAddress");
  if (in->ssh_address == NULL || *in->ssh_address == '\0') {
    free(in->ssh_address);
    in->ssh_address = xstrdup("127.0.0.1");
  }
  user = json_object_get(json_object_get(json_object_get(o, "config"), "user"), "name");
  in->user = json_string_value(user) ? xstrdup(json_string_value(user)) : NULL;
  in->identity_file = dup_str(o, "IdentityFile");
  in->hostagent_pid = (long)get_u64(o, "hostAgentPID");
  in->driver_pid = (long)get_u64(o, "driverPID");
  in->message = dup_str(o, "message");
  in->lima_version = dup_str(o, "limaVersion");
  in->is_protected = json_is_true(json_object_get(o, "protected"));
  {
    json_t *param = json_object_get(json_object_get(o, "config"), "param");
    const char *jd = json_string_value(json_object_get(param, "AgtJailsDisk"));
    in->jails_disk = jd && *jd ? xstrdup(jd) : NULL;
  }
  json_array_foreach(errs, i, e)
  {
    if (json_is_string(e))
      agt_strv_push(&ev, json_string_value(e));
    else if (json_is_string(json_object_get(e, "Op")) &&
             json_is_string(json_object_get(e, "Path")) &&
             json_is_integer(json_object_get(e, "Err"))) {
      /* a Go *fs.PathError, as Lima v2.2 marshals it (a directory without lima.yaml);
       * limactl runs on this host, so its errno is this host's */
      agt_strv_pushf(&ev, "%s %s: %s", json_string_value(json_object_get(e, "Op")),
                     json_string_value(json_object_get(e, "Path")),
                     strerror((int)json_integer_value(json_object_get(e, "Err"))));
    } else if (json_is_object(e) && json_object_size(e) > 0) {
      cleanup_free char *s = json_dumps(e, JSON_COMPACT);
      agt_strv_push(&ev, s ? s : "?");
    }
  }
  if (ev.n)
    in->errors = agt_strv_steal(&ev);
}

/* The next object of limactl's JSON-lines output (`list --json`, `disk list --json`) from
 * *off, or NULL with *o NULL at its end; *line follows the lines for messages. */
static int next_json_line(const char *out, size_t len, size_t *off, unsigned *line,
                          const char *what, json_t **o, agt_error_t *err)
{
  json_error_t je;

  *o = NULL;
  while (*off < len && isspace((unsigned char)out[*off])) {
    if (out[*off] == '\n')
      (*line)++;
    (*off)++;
  }
  if (*off >= len)
    return 0;
  *o = json_loadb(out + *off, len - *off, JSON_DISABLE_EOF_CHECK, &je);
  if (*o == NULL)
    return agt_error_kind(err, AGT_E_PROTO, "%s: line %u: %s", what, *line, je.text);
  for (size_t i = 0; i < (size_t)je.position && *off + i < len; i++)
    if (out[*off + i] == '\n')
      (*line)++;
  *off += (size_t)je.position;
  if (!json_is_object(*o)) {
    json_decref(*o);
    *o = NULL;
    return agt_error_kind(err, AGT_E_PROTO, "%s: line %u: not an object", what, *line);
  }
  return 0;
}

/* Whether o is the entry named name. */
static int named(json_t *o, const char *name)
{
  json_t *n = json_object_get(o, "name");

  return name && json_is_string(n) && strcmp(json_string_value(n), name) == 0;
}

int agt_lima_parse_list(const char *out, size_t len, const char *name,
                        struct agt_lima_instance *inst, int *found, agt_error_t *err)
{
  size_t off = 0;
  unsigned line = 1;
  json_t *o;

  memset(inst, 0, sizeof *inst);
  *found = 0;
  for (;;) {
    if (next_json_line(out, len, &off, &line, "limactl list --json", &o, err) < 0)
      return -1;
    if (o == NULL)
      return 0;
    if (!*found && named(o, name)) {
      fill_instance(o, inst);
      *found = 1;
    }
    json_decref(o);
  }
}

void agt_lima_instance_release(struct agt_lima_instance *in)
{
  free(in->name);
  free(in->status_text);
  free(in->dir);
  free(in->vm_type);
  free(in->arch);
  free(in->ssh_address);
  free(in->user);
  free(in->identity_file);
  agt_strv_free(in->errors);
  free(in->message);
  free(in->lima_version);
  free(in->jails_disk);
  memset(in, 0, sizeof *in);
}

int agt_lima_parse_disk_list(const char *out, size_t len, const char *name, struct agt_lima_disk *d,
                             int *found, agt_error_t *err)
{
  size_t off = 0;
  unsigned line = 1;
  json_t *o;

  memset(d, 0, sizeof *d);
  *found = 0;
  for (;;) {
    if (next_json_line(out, len, &off, &line, "limactl disk list --json", &o, err) < 0)
      return -1;
    if (o == NULL)
      return 0;
    if (!*found && named(o, name)) {
      d->name = dup_str(o, "name");
      d->size = get_u64(o, "size");
      d->format = dup_str(o, "format");
      d->dir = dup_str(o, "dir");
      d->instance = dup_str(o, "instance");
      if (d->instance && *d->instance == '\0') {
        free(d->instance);
        d->instance = NULL;
      }
      *found = 1;
    }
    json_decref(o);
  }
}

void agt_lima_disk_release(struct agt_lima_disk *d)
{
  free(d->name);
  free(d->format);
  free(d->dir);
  free(d->instance);
  memset(d, 0, sizeof *d);
}

/* limactl's messages. */

/* level and msg of one log line, JSON or logrus text (level=fatal msg="..."). */
static int parse_log_line(const char *line, char **level, char **msg)
{
  *level = *msg = NULL;
  if (line[0] == '{') {
    json_t *o = json_loads(line, 0, NULL);
    if (o && json_is_string(json_object_get(o, "msg"))) {
      *msg = xstrdup(json_string_value(json_object_get(o, "msg")));
      *level = dup_str(o, "level");
      json_decref(o);
      return 0;
    }
    json_decref(o);
    return -1;
  }
  const char *lv = strstr(line, "level=");
  const char *m = strstr(line, "msg=");
  if (lv == NULL || m == NULL)
    return -1;
  lv += 6;
  *level = xstrndup(lv, strcspn(lv, " "));
  m += 4;
  if (*m == '"') {
    char *buf = xmalloc(strlen(m) + 1), *q = buf;
    for (m++; *m && *m != '"'; m++) {
      if (*m == '\\' && m[1])
        m++;
      *q++ = *m;
    }
    *q = '\0';
    *msg = buf;
  } else {
    *msg = xstrndup(m, strcspn(m, " "));
  }
  return 0;
}

char *agt_lima_message(const char *err_buf)
{
  cleanup_free char *fatal = NULL, *errors = NULL, *last = NULL;
  const char *p = err_buf;

  while (p && *p) {
    size_t n = strcspn(p, "\n");
    cleanup_free char *line = xstrndup(p, n);
    char *level, *msg;

    p += n + (p[n] == '\n');
    if (line[0] == '\0')
      continue;
    if (parse_log_line(line, &level, &msg) < 0) {
      free(last);
      last = steal_pointer(&line);
      continue;
    }
    if (strcmp(level, "fatal") == 0 || strcmp(level, "panic") == 0) {
      free(fatal);
      fatal = xstrdup(msg);
    } else if (strcmp(level, "error") == 0) {
      char *e = errors ? xasprintf("%s; %s", errors, msg) : xstrdup(msg);
      free(errors);
      errors = e;
    }
    free(last);
    last = xstrdup(msg);
    free(level);
    free(msg);
  }
  if (fatal)
    return steal_pointer(&fatal);
  if (errors)
    return steal_pointer(&errors);
  if (last)
    return steal_pointer(&last);
  return xstrdup("(no message on stderr)");
}

/* Running limactl. */

static void on_err_line(void *ctx, const char *line)
{
  struct agt_lima *l = ctx;
  char *level, *msg;

  if (l->progress == NULL || line[0] == '\0')
    return;
  if (parse_log_line(line, &level, &msg) < 0) {
    l->progress(l->progress_ctx, "info", line);
    return;
  }
  if (strcmp(level, "debug") != 0 && strcmp(level, "trace") != 0)
    l->progress(l->progress_ctx, level, msg);
  free(level);
  free(msg);
}

/* The error of a limactl call that exited non-zero: limactl's own message, and what to do
 * when the message is the one limactl gives root (it never runs as root). */
static int lima_failed(const char *cmd, int code, const char *err_buf, agt_error_t *err)
{
  cleanup_free char *msg = agt_lima_message(err_buf);

  if (strstr(err_buf, "must not run as the root user"))
    return agt_error_kind(err, AGT_E_STATE,
                          "limactl %s exited with status %d: %s (Lima's VMs belong to a user: "
                          "run agt as your own user, or use --target local)",
                          cmd, code, msg);
  return agt_error_kind(err, AGT_E_INTERNAL, "limactl %s exited with status %d: %s", cmd, code,
                        msg);
}

/* Run; fail with limactl's message when it exits non-zero.  On success *p holds the
 * output (the caller releases it). */
static int run(struct agt_lima *l, char **argv, int progress, struct agt_subprocess *p,
               agt_error_t *err)
{
  cleanup_strv char **env = agt_lima_env(l);

  memset(p, 0, sizeof *p);
  p->argv = argv;
  p->env_set = env;
  p->cwd = l->workdir;
  p->capture = 1;
  if (progress) {
    p->on_err_line = on_err_line;
    p->cb_ctx = l;
  }
  if (agt_subprocess_run(p, err) < 0)
    return -1;
  if (p->exit_code != 0) {
    lima_failed(argv[3], p->exit_code, p->err_buf, err);
    agt_subprocess_release(p);
    return -1;
  }
  return 0;
}

static int run_simple(struct agt_lima *l, char **argv, int progress, agt_error_t *err)
{
  struct agt_subprocess p;
  int r = run(l, argv, progress, &p, err);

  if (r == 0)
    agt_subprocess_release(&p);
  agt_strv_free(argv);
  return r;
}

int agt_lima_list(struct agt_lima *l, const char *name, struct agt_lima_instance *inst, int *found,
                  agt_error_t *err)
{
  cleanup_strv char **argv = agt_lima_argv_list(l, name);
  cleanup_strv char **env = agt_lima_env(l);
  struct agt_subprocess p = {.argv = argv, .env_set = env, .cwd = l->workdir, .capture = 1};
  int r;

  memset(inst, 0, sizeof *inst);
  *found = 0;
  if (agt_subprocess_run(&p, err) < 0)
    return -1;
  r = agt_lima_parse_list(p.out_buf, p.out_len, name, inst, found, err);
  if (r == 0 && p.exit_code != 0 && !(*found == 0 && strstr(p.err_buf, "No instance matching"))) {
    agt_lima_instance_release(inst);
    *found = 0;
    r = lima_failed("list", p.exit_code, p.err_buf, err);
  }
  agt_subprocess_release(&p);
  return r;
}

int agt_lima_sock_check(const struct agt_lima *l, const char *name, agt_error_t *err)
{
  size_t sock = strlen(l->home) + 1 + strlen(name) + strlen("/ssh.sock.1234567890123456");

  if (sock >= AGT_LIMA_SOCKET_MAX)
    return agt_error_kind(err, AGT_E_INVALID,
                          "vm name '%s' is too long for LIMA_HOME '%s': Lima's socket paths "
                          "must stay under %d bytes",
                          name, l->home, AGT_LIMA_SOCKET_MAX);
  return 0;
}

int agt_lima_create(struct agt_lima *l, const char *name, const char *yaml_file, agt_error_t *err)
{
  if (agt_lima_sock_check(l, name, err) < 0)
    return -1;
  return run_simple(l, agt_lima_argv_create(l, name, yaml_file), 1, err);
}

int agt_lima_start(struct agt_lima *l, const char *name, uint64_t timeout_s, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_start(l, name, timeout_s), 1, err);
}

int agt_lima_stop(struct agt_lima *l, const char *name, int force, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_stop(l, name, force), 1, err);
}

int agt_lima_delete(struct agt_lima *l, const char *name, int force, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_delete(l, name, force), 1, err);
}

int agt_lima_clone(struct agt_lima *l, const char *src, const char *dst, char *const *set,
                   agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_clone(l, src, dst, set), 1, err);
}

int agt_lima_disk_create(struct agt_lima *l, const char *name, const char *size, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_disk_create(l, name, size), 1, err);
}

int agt_lima_disk_import(struct agt_lima *l, const char *name, const char *file, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_disk_import(l, name, file), 1, err);
}

int agt_lima_disk_delete(struct agt_lima *l, const char *name, int force, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_disk_delete(l, name, force), 1, err);
}

int agt_lima_disk_list(struct agt_lima *l, const char *name, struct agt_lima_disk *d, int *found,
                       agt_error_t *err)
{
  cleanup_strv char **argv = agt_lima_argv_disk_list(l, name);
  cleanup_strv char **env = agt_lima_env(l);
  struct agt_subprocess p = {.argv = argv, .env_set = env, .cwd = l->workdir, .capture = 1};
  int r;

  memset(d, 0, sizeof *d);
  *found = 0;
  if (agt_subprocess_run(&p, err) < 0)
    return -1;
  /* a missing disk: a warning ("No disk matching NAME found."), exit 0 */
  r = agt_lima_parse_disk_list(p.out_buf, p.out_len, name, d, found, err);
  if (r == 0 && p.exit_code != 0) {
    agt_lima_disk_release(d);
    *found = 0;
    r = lima_failed("disk list", p.exit_code, p.err_buf, err);
  }
  agt_subprocess_release(&p);
  return r;
}

int agt_lima_rename(struct agt_lima *l, const char *src, const char *dst, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_rename(l, src, dst), 1, err);
}

int agt_lima_factory_reset(struct agt_lima *l, const char *name, agt_error_t *err)
{
  return run_simple(l, agt_lima_argv_factory_reset(l, name), 1, err);
}

int agt_lima_shell(struct agt_lima *l, const char *name, const char *workdir, char *const *cmd,
                   int *exit_code, agt_error_t *err)
{
  cleanup_strv char **argv = agt_lima_argv_shell(l, name, workdir, cmd);
  cleanup_strv char **env = agt_lima_env(l);
  /* the caller's directory: limactl shell changes to the same path in the guest */
  struct agt_subprocess p = {.argv = argv, .env_set = env, .cwd = NULL, .capture = 0};

  if (agt_subprocess_run(&p, err) < 0)
    return -1;
  *exit_code = p.exit_code;
  agt_subprocess_release(&p);
  return 0;
}
