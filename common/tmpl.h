/* --format: Go-template-like text over the JSON that --json prints, as docker and podman take
 * it.  `{{.Name}}\t{{.State}}` for each item of a listing, `table ...` for aligned columns
 * under a header, `json` for one JSON line per item.
 *
 * What a template may hold (a subset of Go's text/template, the parts people use):
 *   {{.Field}} {{.a.b}} {{.}} {{$.Field}}   a field of the item (JSON key; `Name` finds `name`,
 *                                           `ExitCode` finds `exit_code`), or the item itself
 *   {{func ARG...}}  {{ARG | func ARG...}}   json, upper, lower, title, len, index, join,
 *                                           truncate, printf, eq, ne, not, and, or
 *   "text", `raw`, 12, true, false           literal arguments
 *   {{if P}}..{{else if P}}..{{else}}..{{end}}, {{range P}}..{{else}}..{{end}}, {{with P}}..{{end}}
 *   {{/ * comment * /}}, {{- and -}} trim the spaces beside them, \t and \n in the text
 * A field that no item has is an error (a typo, not an empty column); one that some items
 * lack prints nothing for them. */
#ifndef AGT_TMPL_H
#define AGT_TMPL_H

#include <jansson.h>
#include <stdio.h>

#include "error.h"

struct agt_tmpl;

/* Parse a template.  Errors name the column (1-based in text, plus col0) and show the
 * template with a caret under it. */
int agt_tmpl_parse(const char *text, size_t col0, struct agt_tmpl **out, agt_error_t *err);
/* Render it with data as `.` (and `$`). */
int agt_tmpl_exec(struct agt_tmpl *t, json_t *data, FILE *f, agt_error_t *err);
/* After the executions: a field found in none of them is an error. */
int agt_tmpl_check(struct agt_tmpl *t, agt_error_t *err);
/* The header of a table: each action's field name in capitals (`exit_code`: EXIT CODE). */
void agt_tmpl_header(struct agt_tmpl *t, FILE *f);
void agt_tmpl_free(struct agt_tmpl *t);

/* A --format value: "json", "table TEMPLATE", "table" alone (every field of the first item),
 * or a TEMPLATE. */
struct agt_format;
int agt_format_parse(const char *spec, struct agt_format **out, agt_error_t *err);
/* Print v: each item of an array, else v once; a line each.  Nothing is printed when it
 * fails. */
int agt_format_print(struct agt_format *fm, FILE *f, json_t *v, agt_error_t *err);
void agt_format_free(struct agt_format *fm);

#endif
