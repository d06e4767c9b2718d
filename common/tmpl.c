/* Go-template-like --format (see tmpl.h): a parser into a small tree, and its evaluation over
 * jansson values.  Every value is a new reference; errors name the column. */
#include "tmpl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "xalloc.h"

enum arg_kind { ARG_FIELD, ARG_STRING, ARG_NUMBER, ARG_BOOL };

struct arg {
  enum arg_kind kind;
  size_t col;
  int root;     /* ARG_FIELD: from $, not . */
  char **path;  /* ARG_FIELD: the names after the dot; NULL-terminated, empty for `.` */
  char *text;   /* ARG_STRING */
  json_int_t n; /* ARG_NUMBER, ARG_BOOL */
  size_t hits;  /* ARG_FIELD: items that had it, and that did not */
  size_t misses;
};

struct cmd {
  size_t col;
  const char *fn; /* NULL: the command is its one argument */
  struct arg *args;
  size_t nargs;
};

struct pipe {
  struct cmd *cmds;
  size_t ncmds;
};

enum node_kind { NODE_TEXT, NODE_ACTION, NODE_IF, NODE_RANGE, NODE_WITH };

struct node {
  enum node_kind kind;
  size_t col;
  char *text;       /* NODE_TEXT, escapes done */
  struct pipe pipe; /* the others */
  struct node *body, *alt;
  struct node *next;
};

struct agt_tmpl {
  char *src; /* for the caret in errors */
  size_t col0;
  struct node *root;
};

/* Errors: "column N: what", then the template with a caret under column N. */
static int tmpl_error(const struct agt_tmpl *t, size_t col, agt_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int tmpl_error(const struct agt_tmpl *t, size_t col, agt_error_t *err, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *what = NULL;
  size_t i, pad = 0;
  cleanup_free char *caret = NULL;

  va_start(ap, fmt);
  what = xvasprintf(fmt, ap);
  va_end(ap);
  /* the caret counts characters, not bytes; a tab shows as one */
  for (i = 0; i < col && t->src[i]; i++)
    if (((unsigned char)t->src[i] & 0xc0) != 0x80)
      pad++;
  caret = xmalloc(pad + 1);
  memset(caret, ' ', pad);
  caret[pad] = '\0';
  return agt_error_kind(err, AGT_E_INVALID, "column %zu: %s\n    %s\n    %s^", col + 1 + t->col0,
                        what, t->src, caret);
}

/* Parsing */

struct parser {
  struct agt_tmpl *t;
  const char *s; /* the whole template */
  size_t pos;    /* next byte to read */
  agt_error_t *err;
};

enum term { TERM_EOF, TERM_END, TERM_ELSE, TERM_ELSE_IF };

static void arg_release(struct arg *a)
{
  agt_strv_free(a->path);
  free(a->text);
}

static void pipe_release(struct pipe *p)
{
  for (size_t i = 0; i < p->ncmds; i++) {
    for (size_t k = 0; k < p->cmds[i].nargs; k++)
      arg_release(&p->cmds[i].args[k]);
    free(p->cmds[i].args);
  }
  free(p->cmds);
}

static void nodes_free(struct node *n)
{
  while (n) {
    struct node *next = n->next;
    free(n->text);
    pipe_release(&n->pipe);
    nodes_free(n->body);
    nodes_free(n->alt);
    free(n);
    n = next;
  }
}

static const char *const funcs[] = {"and", "eq",  "index", "join",   "json",  "len",      "lower",
                                    "ne",  "not", "or",    "printf", "title", "truncate", "upper"};

static const char *func_name(const char *word, size_t len)
{
  for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
    if (strlen(funcs[i]) == len && strncmp(funcs[i], word, len) == 0)
      return funcs[i];
  return NULL;
}

static int unknown_func(struct parser *p, size_t col, const char *word, size_t len)
{
  cleanup_free char *w = xstrndup(word, len);
  const char *near = agt_closest(w, funcs, sizeof funcs / sizeof funcs[0]);
  cleanup_free char *hint = near ? xasprintf(": did you mean '%s'?", near) : xstrdup("");

  return tmpl_error(p->t, col, p->err,
                    "unknown function '%s'%s (functions: and, eq, index, join, json, len, lower, "
                    "ne, not, or, printf, title, truncate, upper; a field starts with a dot: "
                    ".%s)",
                    w, hint, w);
}

/* Inside an action: spaces, then where the next token starts. */
static void skip_space(struct parser *p)
{
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
         p->s[p->pos] == '\r')
    p->pos++;
}

/* At the action's end ("}}" or " -}}")? */
static int at_close(struct parser *p)
{
  const char *c = p->s + p->pos;
  return strncmp(c, "}}", 2) == 0 || strncmp(c, "-}}", 3) == 0;
}

static int is_ident(int ch)
{
  return isalnum(ch) || ch == '_';
}

/* A quoted string: "..." with Go's common escapes, or `raw`. */
static int parse_string(struct parser *p, struct arg *a)
{
  char q = p->s[p->pos];
  size_t start = p->pos, cap = 16, len = 0;
  char *buf = xmalloc(cap);

  for (p->pos++;; p->pos++) {
    char ch = p->s[p->pos];
    if (ch == '\0' || (q == '"' && ch == '\n')) {
      free(buf);
      return tmpl_error(p->t, start, p->err, "unterminated string: its closing %c is missing", q);
    }
    if (ch == q)
      break;
    if (q == '"' && ch == '\\') {
      char e = p->s[++p->pos];
      ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == '\\' ? '\\' : e == '"' ? '"' : '\0';
      if (ch == '\0') {
        free(buf);
        return tmpl_error(p->t, p->pos - 1, p->err,
                          "unknown escape '\\%c' in a string (\\n, \\t, \\\\, \\\")", e ? e : ' ');
      }
    }
    if (len + 2 > cap)
      buf = xrealloc(buf, cap *= 2);
    buf[len++] = ch;
  }
  p->pos++;
  buf[len] = '\0';
  a->kind = ARG_STRING;
  a->text = buf;
  return 0;
}

/* .a.b, ., $, $.a */
static int parse_field(struct parser *p, struct arg *a)
{
  size_t n = 0;

  a->kind = ARG_FIELD;
  if (p->s[p->pos] == '$') {
    a->root = 1;
    p->pos++;
    if (is_ident((unsigned char)p->s[p->pos]))
      return tmpl_error(p->t, a->col, p->err,
                        "variables are not supported: only $ (the whole item) and $.Field");
  }
  a->path = xzalloc(sizeof *a->path);
  if (p->s[p->pos] != '.')
    return 0; /* $ alone */
  if (!is_ident((unsigned char)p->s[p->pos + 1])) {
    p->pos++; /* `.` alone */
    return 0;
  }
  while (p->s[p->pos] == '.' && is_ident((unsigned char)p->s[p->pos + 1])) {
    size_t start = ++p->pos;
    while (is_ident((unsigned char)p->s[p->pos]))
      p->pos++;
    a->path = xrealloc(a->path, (n + 2) * sizeof *a->path);
    a->path[n++] = xstrndup(p->s + start, p->pos - start);
    a->path[n] = NULL;
  }
  if (p->s[p->pos] == '.')
    return tmpl_error(p->t, p->pos, p->err, "a field name must follow the dot");
  return 0;
}

/* One argument; *fn set instead when it is a function's name (first word of a command). */
static int parse_arg(struct parser *p, struct arg *a, const char **fn, int first)
{
  const char *c = p->s + p->pos;

  memset(a, 0, sizeof *a);
  a->col = p->pos;
  if (*c == '.' || *c == '$')
    return parse_field(p, a);
  if (*c == '"' || *c == '`')
    return parse_string(p, a);
  if (isdigit((unsigned char)*c) || (*c == '-' && isdigit((unsigned char)c[1]))) {
    char *end;
    errno = 0;
    a->n = strtoll(c, &end, 10);
    if (errno || is_ident((unsigned char)*end) || *end == '.')
      return tmpl_error(p->t, p->pos, p->err, "a number here must be a whole number");
    a->kind = ARG_NUMBER;
    p->pos += (size_t)(end - c);
    return 0;
  }
  if (isalpha((unsigned char)*c)) {
    size_t len = 0;
    while (is_ident((unsigned char)c[len]))
      len++;
    if ((len == 4 && strncmp(c, "true", 4) == 0) || (len == 5 && strncmp(c, "false", 5) == 0)) {
      a->kind = ARG_BOOL;
      a->n = len == 4;
      p->pos += len;
      return 0;
    }
    if (!first)
      return tmpl_error(p->t, p->pos, p->err,
                        "'%.*s' is not an argument here (a function is called first in its "
                        "command, or after '|'; a field starts with a dot)",
                        (int)len, c);
    *fn = func_name(c, len);
    if (*fn == NULL)
      return unknown_func(p, p->pos, c, len);
    p->pos += len;
    return 0;
  }
  if (*c == '(' || *c == ')')
    return tmpl_error(p->t, p->pos, p->err, "parentheses are not supported: use '|'");
  if (*c == ':' || *c == '=')
    return tmpl_error(p->t, p->pos, p->err, "variables are not supported");
  return tmpl_error(p->t, p->pos, p->err, "unexpected '%c' in an action", *c);
}

/* cmd ('|' cmd)* up to the action's end. */
static int parse_pipe(struct parser *p, struct pipe *pp, size_t col)
{
  skip_space(p);
  if (at_close(p))
    return tmpl_error(p->t, col, p->err, "empty action: put a field (.Name) or a function in it");
  for (;;) {
    struct cmd *cm;
    pp->cmds = xrealloc(pp->cmds, (pp->ncmds + 1) * sizeof *pp->cmds);
    cm = &pp->cmds[pp->ncmds++];
    memset(cm, 0, sizeof *cm);
    cm->col = p->pos;
    for (;;) {
      struct arg a;
      const char *fn = NULL;
      skip_space(p);
      if (at_close(p) || p->s[p->pos] == '|' || p->s[p->pos] == '\0')
        break;
      if (parse_arg(p, &a, &fn, cm->fn == NULL && cm->nargs == 0) < 0) {
        arg_release(&a);
        return -1;
      }
      if (fn) {
        cm->fn = fn;
        continue;
      }
      if (cm->fn == NULL && cm->nargs == 1) {
        arg_release(&a);
        return tmpl_error(p->t, a.col, p->err,
                          "two values in a row: a function goes first ('index .a 0'), or "
                          "separate the actions");
      }
      cm->args = xrealloc(cm->args, (cm->nargs + 1) * sizeof *cm->args);
      cm->args[cm->nargs++] = a;
      if (!at_close(p) && p->s[p->pos] != '|' && p->s[p->pos] != ' ' && p->s[p->pos] != '\t' &&
          p->s[p->pos] != '\0')
        return tmpl_error(p->t, p->pos, p->err, "unexpected '%c' after an argument", p->s[p->pos]);
    }
    if (cm->fn == NULL && cm->nargs == 0)
      return tmpl_error(p->t, cm->col, p->err, "empty command in the pipeline");
    if (cm->fn == NULL && pp->ncmds > 1)
      return tmpl_error(p->t, cm->col, p->err,
                        "after '|' comes a function, which is given the value as its last "
                        "argument");
    if (p->s[p->pos] != '|')
      break;
    p->pos++;
  }
  return 0;
}

/* The action from {{ to }}: what it is, its node (NULL for a comment or a keyword that
 * ends a list).  *trim_after: it ended in -}}. */
static int parse_action(struct parser *p, struct node **out, enum term *term, int *trim_after);

static int parse_list(struct parser *p, struct node **head, enum term *term, size_t *term_col)
{
  struct node **tail = head;
  int trim_next = 0;

  *head = NULL;
  for (;;) {
    const char *open = strstr(p->s + p->pos, "{{");
    size_t end = open ? (size_t)(open - p->s) : strlen(p->s);
    size_t start = p->pos, stop = end;
    struct node *n = NULL;
    enum term t = TERM_EOF;
    int trim_after = 0;

    if (trim_next)
      while (start < stop && strchr(" \t\r\n", p->s[start]))
        start++;
    if (open && open[2] == '-' && strchr(" \t\r\n", open[3]))
      while (stop > start && strchr(" \t\r\n", p->s[stop - 1]))
        stop--;
    if (stop > start) {
      char *txt = xmalloc(stop - start + 1), *w = txt;
      for (size_t i = start; i < stop; i++) {
        if (p->s[i] == '\\' && (p->s[i + 1] == 't' || p->s[i + 1] == 'n')) {
          *w++ = p->s[i + 1] == 't' ? '\t' : '\n';
          i++;
        } else {
          *w++ = p->s[i];
        }
      }
      *w = '\0';
      n = xzalloc(sizeof *n);
      n->kind = NODE_TEXT;
      n->col = start;
      n->text = txt;
      *tail = n;
      tail = &n->next;
    }
    if (open == NULL) {
      p->pos = end;
      *term = TERM_EOF;
      return 0;
    }
    p->pos = end;
    *term_col = end;
    n = NULL;
    if (parse_action(p, &n, &t, &trim_after) < 0)
      return -1;
    trim_next = trim_after;
    if (t != TERM_EOF) {
      *term = t;
      return 0;
    }
    if (n) {
      *tail = n;
      tail = &n->next;
    }
  }
}

static int expect_close(struct parser *p, int *trim_after)
{
  skip_space(p);
  if (strncmp(p->s + p->pos, "-}}", 3) == 0) {
    *trim_after = 1;
    p->pos += 3;
    return 0;
  }
  if (strncmp(p->s + p->pos, "}}", 2) == 0) {
    p->pos += 2;
    return 0;
  }
  if (p->s[p->pos] == '\0')
    return -2;
  return tmpl_error(p->t, p->pos, p->err, "unexpected '%c': '}}' ends the action", p->s[p->pos]);
}

static int keyword(struct parser *p, const char *kw)
{
  size_t len = strlen(kw);

  if (strncmp(p->s + p->pos, kw, len) == 0 && !is_ident((unsigned char)p->s[p->pos + len])) {
    p->pos += len;
    return 1;
  }
  return 0;
}

/* The body of if/range/with, up to its {{end}}, with an {{else}} (or else if) branch. */
static int parse_block(struct parser *p, struct node *n, size_t open_col)
{
  enum term t;
  size_t tcol = open_col;

  if (parse_list(p, &n->body, &t, &tcol) < 0)
    return -1;
  if (t == TERM_ELSE_IF) {
    if (n->kind != NODE_IF)
      return tmpl_error(p->t, tcol, p->err, "'else if' belongs to an if, not a range or with");
    /* the rest is an if of its own, ending at the same {{end}} */
    struct node *e = xzalloc(sizeof *e);
    int trim = 0, r;
    e->kind = NODE_IF;
    e->col = tcol;
    n->alt = e;
    if (parse_pipe(p, &e->pipe, tcol) < 0)
      return -1;
    if ((r = expect_close(p, &trim)) < 0)
      return r == -2 ? tmpl_error(p->t, tcol, p->err, "unclosed action: '}}' is missing") : -1;
    return parse_block(p, e, open_col);
  }
  if (t == TERM_ELSE) {
    if (parse_list(p, &n->alt, &t, &tcol) < 0)
      return -1;
    if (t == TERM_ELSE || t == TERM_ELSE_IF)
      return tmpl_error(p->t, tcol, p->err, "a second else in the same block");
  }
  if (t == TERM_EOF)
    return tmpl_error(p->t, open_col, p->err, "this block has no {{end}}");
  return 0;
}

static int parse_action(struct parser *p, struct node **out, enum term *term, int *trim_after)
{
  size_t col = p->pos;
  struct node *n;
  int r;

  *out = NULL;
  *term = TERM_EOF;
  p->pos += 2;
  if (p->s[p->pos] == '-' && strchr(" \t\r\n", p->s[p->pos + 1]))
    p->pos++;
  skip_space(p);
  if (strncmp(p->s + p->pos, "/*", 2) == 0) {
    const char *e = strstr(p->s + p->pos + 2, "*/");
    if (e == NULL)
      return tmpl_error(p->t, col, p->err, "unclosed comment: '*/' is missing");
    p->pos = (size_t)(e - p->s) + 2;
    if ((r = expect_close(p, trim_after)) < 0)
      return r == -2 ? tmpl_error(p->t, col, p->err, "unclosed action: '}}' is missing") : -1;
    return 0;
  }
  if (keyword(p, "end") || keyword(p, "else")) {
    int is_end = p->s[p->pos - 1] == 'd';
    skip_space(p);
    if (!is_end && keyword(p, "if")) {
      *term = TERM_ELSE_IF;
      return 0; /* the condition follows: parse_block reads it */
    }
    *term = is_end ? TERM_END : TERM_ELSE;
    if ((r = expect_close(p, trim_after)) < 0)
      return r == -2 ? tmpl_error(p->t, col, p->err, "unclosed action: '}}' is missing") : -1;
    return 0;
  }
  n = xzalloc(sizeof *n);
  n->col = col;
  n->kind = keyword(p, "if")      ? NODE_IF
            : keyword(p, "range") ? NODE_RANGE
            : keyword(p, "with")  ? NODE_WITH
                                  : NODE_ACTION;
  if (keyword(p, "define") || keyword(p, "template") || keyword(p, "block")) {
    nodes_free(n);
    return tmpl_error(p->t, col, p->err, "define, template and block are not supported");
  }
  if (parse_pipe(p, &n->pipe, col) < 0 || (r = expect_close(p, trim_after)) == -1) {
    nodes_free(n);
    return -1;
  }
  if (r == -2) {
    nodes_free(n);
    return tmpl_error(p->t, col, p->err, "unclosed action: '}}' is missing");
  }
  if (n->kind != NODE_ACTION && parse_block(p, n, col) < 0) {
    nodes_free(n);
    return -1;
  }
  *out = n;
  return 0;
}

int agt_tmpl_parse(const char *text, size_t col0, struct agt_tmpl **out, agt_error_t *err)
{
  struct agt_tmpl *t = xzalloc(sizeof *t);
  struct parser p = {t, text, 0, err};
  enum term term;
  size_t tcol = 0;

  t->src = xstrdup(text);
  t->col0 = col0;
  p.s = t->src;
  if (parse_list(&p, &t->root, &term, &tcol) < 0) {
    agt_tmpl_free(t);
    return -1;
  }
  if (term != TERM_EOF) {
    tmpl_error(t, tcol, err, "{{%s}} without an if, range or with to end",
               term == TERM_END ? "end" : "else");
    agt_tmpl_free(t);
    return -1;
  }
  *out = t;
  return 0;
}

void agt_tmpl_free(struct agt_tmpl *t)
{
  if (t == NULL)
    return;
  nodes_free(t->root);
  free(t->src);
  free(t);
}

/* Evaluation */

struct exec {
  struct agt_tmpl *t;
  json_t *root;
  FILE *f;
  agt_error_t *err;
};

/* A JSON key for a template's field name: the same, else the same ignoring case and '_'
 * (Name: name, ExitCode: exit_code). */
static json_t *lookup(json_t *obj, const char *name)
{
  const char *key;
  json_t *v = json_object_get(obj, name);

  if (v)
    return v;
  json_object_foreach(obj, key, v)
  {
    const char *a = key, *b = name;
    for (;;) {
      while (*a == '_')
        a++;
      while (*b == '_')
        b++;
      if (*a == '\0' || *b == '\0' || tolower((unsigned char)*a) != tolower((unsigned char)*b))
        break;
      a++;
      b++;
    }
    if (*a == '\0' && *b == '\0')
      return v;
  }
  return NULL;
}

static const char *type_name(json_t *v)
{
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "a list";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
  case JSON_REAL:
    return "a number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  case JSON_NULL:
    return "null";
  }
  return "a value";
}

static json_t *eval_field(struct exec *x, struct arg *a, json_t *dot)
{
  json_t *v = a->root ? x->root : dot;

  for (size_t i = 0; a->path[i]; i++) {
    if (json_is_null(v)) {
      a->misses++;
      return json_null();
    }
    if (!json_is_object(v)) {
      tmpl_error(x->t, a->col, x->err, "'%s' is not a field of %s", a->path[i], type_name(v));
      return NULL;
    }
    v = lookup(v, a->path[i]);
    if (v == NULL) {
      a->misses++;
      return json_null();
    }
  }
  if (a->path[0])
    a->hits++;
  return json_incref(v);
}

static json_t *eval_arg(struct exec *x, struct arg *a, json_t *dot)
{
  switch (a->kind) {
  case ARG_FIELD:
    return eval_field(x, a, dot);
  case ARG_STRING:
    return json_string(a->text);
  case ARG_NUMBER:
    return json_integer(a->n);
  case ARG_BOOL:
    return json_boolean(a->n);
  }
  return json_null();
}

static int truthy(json_t *v)
{
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return json_object_size(v) > 0;
  case JSON_ARRAY:
    return json_array_size(v) > 0;
  case JSON_STRING:
    return json_string_length(v) > 0;
  case JSON_INTEGER:
    return json_integer_value(v) != 0;
  case JSON_REAL:
    return json_real_value(v) != 0;
  case JSON_TRUE:
    return 1;
  case JSON_FALSE:
  case JSON_NULL:
    return 0;
  }
  return 0;
}

/* A value as text: a string as it is, a number or boolean as JSON writes it, null as
 * nothing, a list or object as compact JSON. */
static char *to_text(json_t *v)
{
  if (json_is_string(v))
    return xstrdup(json_string_value(v));
  if (json_is_null(v))
    return xstrdup("");
  return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
}

static json_t *str_map(json_t *v, int how)
{
  cleanup_free char *s = to_text(v);
  int word = 1;

  for (char *c = s; *c; c++) {
    if (how == 'u')
      *c = (char)toupper((unsigned char)*c);
    else if (how == 'l')
      *c = (char)tolower((unsigned char)*c);
    else {
      if (word)
        *c = (char)toupper((unsigned char)*c);
      word = !isalnum((unsigned char)*c);
    }
  }
  return json_string(s);
}

static size_t text_width(const char *s, size_t len)
{
  size_t w = 0;

  for (size_t i = 0; i < len; i++)
    if (((unsigned char)s[i] & 0xc0) != 0x80)
      w++;
  return w;
}

/* Go's printf, for what templates use: %s %v %d %q %%, with - and a width. */
static json_t *fn_printf(struct exec *x, struct cmd *cm, json_t **av, size_t n)
{
  const char *f = json_string_value(av[0]);
  size_t used = 1, len = 0, cap = 64;
  char *out = xmalloc(cap);
  json_t *r;

  if (f == NULL) {
    free(out);
    tmpl_error(x->t, cm->col, x->err, "printf: the format must be a string");
    return NULL;
  }
  for (; *f; f++) {
    char piece[2];
    cleanup_free char *arg = NULL, *s = NULL;
    size_t sl = 0;
    if (*f != '%' || f[1] == '%') {
      piece[0] = *f;
      piece[1] = '\0';
      f += *f == '%';
      s = xstrdup(piece);
    } else {
      int left = 0;
      size_t width = 0, w;
      for (f++; *f == '-'; f++)
        left = 1;
      for (; isdigit((unsigned char)*f); f++)
        width = width < 1000 ? width * 10 + (size_t)(*f - '0') : width;
      if (*f != 's' && *f != 'v' && *f != 'd' && *f != 'q') {
        free(out);
        tmpl_error(x->t, cm->col, x->err, "printf: '%%%c' is not supported (%%s, %%v, %%d, %%q)",
                   *f ? *f : ' ');
        return NULL;
      }
      if (used >= n) {
        free(out);
        tmpl_error(x->t, cm->col, x->err, "printf: more verbs than arguments");
        return NULL;
      }
      arg = *f == 'q' ? json_dumps(av[used], JSON_ENCODE_ANY | JSON_COMPACT) : to_text(av[used]);
      used++;
      w = text_width(arg, strlen(arg));
      w = w < width ? width - w : 0;
      s = xmalloc(strlen(arg) + w + 1);
      if (left)
        sprintf(s, "%s%*s", arg, (int)w, "");
      else
        sprintf(s, "%*s%s", (int)w, "", arg);
    }
    sl = strlen(s);
    while (len + sl + 1 > cap)
      out = xrealloc(out, cap *= 2);
    memcpy(out + len, s, sl);
    len += sl;
  }
  out[len] = '\0';
  r = json_string(out);
  free(out);
  return r;
}

static int arity(struct exec *x, struct cmd *cm, size_t n, size_t min, size_t max)
{
  if (n < min || n > max) {
    if (min == max)
      tmpl_error(x->t, cm->col, x->err, "%s takes %zu argument%s, not %zu", cm->fn, min,
                 min == 1 ? "" : "s", n);
    else
      tmpl_error(x->t, cm->col, x->err, "%s takes %zu or more arguments, not %zu", cm->fn, min, n);
    return -1;
  }
  return 0;
}

static json_t *call_fn(struct exec *x, struct cmd *cm, json_t **av, size_t n)
{
  const char *fn = cm->fn;

  if (strcmp(fn, "json") == 0) {
    char *s;
    json_t *r;
    if (arity(x, cm, n, 1, 1) < 0)
      return NULL;
    s = json_dumps(av[0], JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    r = json_string(s ? s : "null");
    free(s);
    return r;
  }
  if (strcmp(fn, "upper") == 0 || strcmp(fn, "lower") == 0 || strcmp(fn, "title") == 0)
    return arity(x, cm, n, 1, 1) < 0 ? NULL : str_map(av[0], fn[0]);
  if (strcmp(fn, "len") == 0) {
    if (arity(x, cm, n, 1, 1) < 0)
      return NULL;
    if (json_is_array(av[0]))
      return json_integer((json_int_t)json_array_size(av[0]));
    if (json_is_object(av[0]))
      return json_integer((json_int_t)json_object_size(av[0]));
    if (json_is_string(av[0]))
      return json_integer((json_int_t)json_string_length(av[0]));
    if (json_is_null(av[0]))
      return json_integer(0);
    tmpl_error(x->t, cm->col, x->err, "len of %s", type_name(av[0]));
    return NULL;
  }
  if (strcmp(fn, "index") == 0) {
    json_t *v = av[0];
    if (arity(x, cm, n, 2, 99) < 0)
      return NULL;
    for (size_t i = 1; i < n; i++) {
      if (json_is_array(v) && json_is_integer(av[i]))
        v = json_array_get(v, (size_t)json_integer_value(av[i]));
      else if (json_is_object(v) && json_is_string(av[i]))
        v = lookup(v, json_string_value(av[i]));
      else if (json_is_null(v))
        v = NULL;
      else {
        tmpl_error(x->t, cm->col, x->err, "index: %s cannot be indexed by %s", type_name(v),
                   type_name(av[i]));
        return NULL;
      }
      if (v == NULL)
        return json_null();
    }
    return json_incref(v);
  }
  if (strcmp(fn, "join") == 0) {
    const char *sep = json_string_value(av[1]);
    cleanup_free char *out = xstrdup("");
    json_t *e;
    size_t i;
    if (arity(x, cm, n, 2, 2) < 0)
      return NULL;
    if (!json_is_array(av[0]) || sep == NULL) {
      tmpl_error(x->t, cm->col, x->err, "join takes a list and a string, not %s and %s",
                 type_name(av[0]), type_name(av[1]));
      return NULL;
    }
    json_array_foreach(av[0], i, e)
    {
      cleanup_free char *s = to_text(e);
      char *more = xasprintf("%s%s%s", out, i ? sep : "", s);
      free(out);
      out = more;
    }
    return json_string(out);
  }
  if (strcmp(fn, "truncate") == 0) {
    cleanup_free char *s = NULL;
    size_t chars = 0, i;
    if (arity(x, cm, n, 2, 2) < 0)
      return NULL;
    if (!json_is_integer(av[1]) || json_integer_value(av[1]) < 0) {
      tmpl_error(x->t, cm->col, x->err, "truncate takes a value and a length");
      return NULL;
    }
    s = to_text(av[0]);
    for (i = 0; s[i]; i++)
      if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == (size_t)json_integer_value(av[1]))
        break;
    s[i] = '\0';
    return json_string(s);
  }
  if (strcmp(fn, "printf") == 0)
    return arity(x, cm, n, 1, 99) < 0 ? NULL : fn_printf(x, cm, av, n);
  if (strcmp(fn, "eq") == 0 || strcmp(fn, "ne") == 0) {
    int eq = 0;
    if (arity(x, cm, n, 2, strcmp(fn, "eq") == 0 ? 99 : 2) < 0)
      return NULL;
    for (size_t i = 1; i < n && !eq; i++)
      eq = json_equal(av[0], av[i]) || (json_is_number(av[0]) && json_is_number(av[i]) &&
                                        json_number_value(av[0]) == json_number_value(av[i]));
    return json_boolean(fn[0] == 'e' ? eq : !eq);
  }
  if (strcmp(fn, "not") == 0)
    return arity(x, cm, n, 1, 1) < 0 ? NULL : json_boolean(!truthy(av[0]));
  if (strcmp(fn, "and") == 0 || strcmp(fn, "or") == 0) {
    size_t i;
    if (arity(x, cm, n, 2, 99) < 0)
      return NULL;
    /* Go's: the first false (and) or true (or) argument, else the last */
    for (i = 0; i + 1 < n; i++)
      if (truthy(av[i]) == (fn[0] == 'o'))
        break;
    return json_incref(av[i]);
  }
  tmpl_error(x->t, cm->col, x->err, "unknown function '%s'", fn);
  return NULL;
}

static json_t *eval_pipe(struct exec *x, struct pipe *pp, json_t *dot)
{
  json_t *prev = NULL;

  for (size_t i = 0; i < pp->ncmds; i++) {
    struct cmd *cm = &pp->cmds[i];
    json_t *av[100];
    size_t n = 0, k;
    json_t *v = NULL;

    if (cm->nargs + 1 > sizeof av / sizeof av[0]) {
      tmpl_error(x->t, cm->col, x->err, "too many arguments");
      json_decref(prev);
      return NULL;
    }
    for (k = 0; k < cm->nargs; k++) {
      if ((av[n] = eval_arg(x, &cm->args[k], dot)) == NULL)
        break;
      n++;
    }
    if (k == cm->nargs) {
      if (prev)
        av[n++] = json_incref(prev);
      v = cm->fn ? call_fn(x, cm, av, n) : json_incref(av[0]);
    }
    for (k = 0; k < n; k++)
      json_decref(av[k]);
    json_decref(prev);
    if (v == NULL)
      return NULL;
    prev = v;
  }
  return prev;
}

static int exec_nodes(struct exec *x, struct node *n, json_t *dot);

static int cmp_keys(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int exec_node(struct exec *x, struct node *n, json_t *dot)
{
  json_t *v;
  int r = 0;

  if (n->kind == NODE_TEXT) {
    fputs(n->text, x->f);
    return 0;
  }
  if ((v = eval_pipe(x, &n->pipe, dot)) == NULL)
    return -1;
  switch (n->kind) {
  case NODE_ACTION: {
    cleanup_free char *s = to_text(v);
    fputs(s ? s : "", x->f);
    break;
  }
  case NODE_IF:
    r = exec_nodes(x, truthy(v) ? n->body : n->alt, dot);
    break;
  case NODE_WITH:
    r = truthy(v) ? exec_nodes(x, n->body, v) : exec_nodes(x, n->alt, dot);
    break;
  case NODE_RANGE: {
    size_t i;
    const char *key;
    json_t *e;
    if (!truthy(v)) {
      r = exec_nodes(x, n->alt, dot);
    } else if (json_is_array(v)) {
      json_array_foreach(v, i, e) if ((r = exec_nodes(x, n->body, e)) < 0) break;
    } else if (json_is_object(v)) {
      /* in the order of its keys, as Go ranges over a map */
      const char **keys = xmalloc(json_object_size(v) * sizeof *keys);
      size_t nk = 0;
      json_object_foreach(v, key, e) keys[nk++] = key;
      qsort(keys, nk, sizeof *keys, cmp_keys);
      for (i = 0; i < nk && r == 0; i++)
        r = exec_nodes(x, n->body, json_object_get(v, keys[i]));
      free(keys);
    } else {
      r = tmpl_error(x->t, n->col, x->err, "range over %s (a list or an object)", type_name(v));
    }
    break;
  }
  case NODE_TEXT:
    break;
  }
  json_decref(v);
  return r;
}

static int exec_nodes(struct exec *x, struct node *n, json_t *dot)
{
  for (; n; n = n->next)
    if (exec_node(x, n, dot) < 0)
      return -1;
  return 0;
}

int agt_tmpl_exec(struct agt_tmpl *t, json_t *data, FILE *f, agt_error_t *err)
{
  struct exec x = {t, data, f, err};

  return exec_nodes(&x, t->root, data);
}

static int check_nodes(struct agt_tmpl *t, struct node *n, agt_error_t *err)
{
  for (; n; n = n->next) {
    for (size_t i = 0; i < n->pipe.ncmds; i++)
      for (size_t k = 0; k < n->pipe.cmds[i].nargs; k++) {
        struct arg *a = &n->pipe.cmds[i].args[k];
        if (a->kind == ARG_FIELD && a->misses && !a->hits) {
          cleanup_free char *path = xstrdup("");
          for (size_t j = 0; a->path[j]; j++) {
            char *more = xasprintf("%s.%s", path, a->path[j]);
            free(path);
            path = more;
          }
          return tmpl_error(t, a->col, err,
                            "no field %s%s here ('--json' shows the fields and their names)",
                            a->root ? "$" : "", path);
        }
      }
    if (check_nodes(t, n->body, err) < 0 || check_nodes(t, n->alt, err) < 0)
      return -1;
  }
  return 0;
}

int agt_tmpl_check(struct agt_tmpl *t, agt_error_t *err)
{
  return check_nodes(t, t->root, err);
}

/* A table's header: text as it is, each action the last name of its first field. */
void agt_tmpl_header(struct agt_tmpl *t, FILE *f)
{
  for (struct node *n = t->root; n; n = n->next) {
    const char *name = NULL;
    if (n->kind == NODE_TEXT) {
      fputs(n->text, f);
      continue;
    }
    for (size_t i = 0; i < n->pipe.ncmds && name == NULL; i++)
      for (size_t k = 0; k < n->pipe.cmds[i].nargs && name == NULL; k++) {
        struct arg *a = &n->pipe.cmds[i].args[k];
        size_t j = 0;
        if (a->kind != ARG_FIELD || a->path[0] == NULL)
          continue;
        while (a->path[j + 1])
          j++;
        name = a->path[j];
      }
    if (name == NULL)
      name = n->pipe.ncmds && n->pipe.cmds[0].fn ? n->pipe.cmds[0].fn : "";
    for (const char *c = name; *c; c++) {
      /* exit_code and ExitCode: EXIT CODE */
      if (c > name && isupper((unsigned char)*c) && islower((unsigned char)c[-1]))
        fputc(' ', f);
      fputc(*c == '_' ? ' ' : toupper((unsigned char)*c), f);
    }
  }
}

/* --format */

struct agt_format {
  int json, table;
  struct agt_tmpl *t; /* NULL for json, and for table alone until the first item names
                         the fields */
};

int agt_format_parse(const char *spec, struct agt_format **out, agt_error_t *err)
{
  struct agt_format *fm = xzalloc(sizeof *fm);
  size_t skip = 0;

  if (strcmp(spec, "json") == 0) {
    fm->json = 1;
    *out = fm;
    return 0;
  }
  if (strncmp(spec, "table", 5) == 0 && (spec[5] == '\0' || spec[5] == ' ')) {
    fm->table = 1;
    skip = 5;
    while (spec[skip] == ' ')
      skip++;
  }
  if (spec[skip] != '\0' && agt_tmpl_parse(spec + skip, skip, &fm->t, err) < 0) {
    free(fm);
    return -1;
  }
  if (!fm->table && fm->t == NULL) {
    free(fm);
    return agt_error_kind(err, AGT_E_INVALID,
                          "an empty template: give fields ('{{.Name}}'), 'table {{.Name}}', "
                          "or json");
  }
  *out = fm;
  return 0;
}

void agt_format_free(struct agt_format *fm)
{
  if (fm == NULL)
    return;
  agt_tmpl_free(fm->t);
  free(fm);
}

/* `table` alone: a column for each field of the first item that is not a list or an
 * object. */
static int default_table(struct agt_format *fm, json_t *first, agt_error_t *err)
{
  cleanup_free char *text = xstrdup("");
  const char *key;
  json_t *v;

  json_object_foreach(first, key, v)
  {
    char *more;
    if (json_is_object(v) || json_is_array(v))
      continue;
    more = xasprintf("%s%s{{.%s}}", text, *text ? "\t" : "", key);
    free(text);
    text = more;
  }
  if (*text == '\0')
    return agt_error_kind(err, AGT_E_INVALID,
                          "'table' alone needs items with fields: give a template ('table "
                          "{{.Name}}')");
  return agt_tmpl_parse(text, 0, &fm->t, err);
}

/* Columns as docker's tabwriter makes them: each cell but a line's last padded to its
 * column's widest plus 3. */
static void align(FILE *f, const char *text)
{
  size_t widths[64] = {0};
  const char *line, *end;

  for (line = text; *line; line = *end ? end + 1 : end) {
    size_t col = 0;
    const char *cell = line;
    end = strchr(line, '\n');
    if (end == NULL)
      end = line + strlen(line);
    for (const char *tab; (tab = memchr(cell, '\t', (size_t)(end - cell))) && col < 64;
         cell = tab + 1, col++) {
      size_t w = text_width(cell, (size_t)(tab - cell));
      if (w > widths[col])
        widths[col] = w;
    }
  }
  for (line = text; *line; line = *end ? end + 1 : end) {
    size_t col = 0;
    const char *cell = line;
    end = strchr(line, '\n');
    if (end == NULL)
      end = line + strlen(line);
    for (const char *tab; (tab = memchr(cell, '\t', (size_t)(end - cell))) && col < 64;
         cell = tab + 1, col++) {
      size_t w = text_width(cell, (size_t)(tab - cell));
      fwrite(cell, 1, (size_t)(tab - cell), f);
      for (; w < widths[col] + 3; w++)
        fputc(' ', f);
    }
    fwrite(cell, 1, (size_t)(end - cell), f);
    if (*end)
      fputc('\n', f);
  }
}

static int print_item(struct agt_format *fm, FILE *f, json_t *item, agt_error_t *err)
{
  if (fm->json) {
    char *s = json_dumps(item, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(f, "%s\n", s ? s : "null");
    free(s);
    return 0;
  }
  if (agt_tmpl_exec(fm->t, item, f, err) < 0)
    return -1;
  fputc('\n', f);
  return 0;
}

int agt_format_print(struct agt_format *fm, FILE *f, json_t *v, agt_error_t *err)
{
  char *buf = NULL;
  size_t len = 0, i;
  FILE *mem = open_memstream(&buf, &len);
  json_t *e;
  int r = 0;

  if (mem == NULL)
    return agt_error_make(err, errno, "--format");
  if (fm->table && fm->t == NULL) {
    json_t *first = json_is_array(v) ? json_array_get(v, 0) : v;
    if (first == NULL) { /* nothing to list, and no fields to name */
      fclose(mem);
      free(buf);
      return 0;
    }
    if (!json_is_object(first) || default_table(fm, first, err) < 0) {
      fclose(mem);
      free(buf);
      return json_is_object(first)
                 ? -1
                 : agt_error_kind(err, AGT_E_INVALID, "'table' alone needs items with fields");
    }
  }
  if (fm->table) {
    agt_tmpl_header(fm->t, mem);
    fputc('\n', mem);
  }
  if (json_is_array(v)) {
    json_array_foreach(v, i, e) if ((r = print_item(fm, mem, e, err)) < 0) break;
  } else {
    r = print_item(fm, mem, v, err);
  }
  if (r == 0 && fm->t)
    r = agt_tmpl_check(fm->t, err);
  fclose(mem);
  if (r == 0) {
    if (fm->table)
      align(f, buf);
    else
      fwrite(buf, 1, len, f);
  }
  free(buf);
  return r;
}
