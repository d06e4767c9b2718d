/* What both clients print of a jail: the table of agt jail ls / agtd ctl jail ls, and a chunk
 * of its log (agt jail logs / agtd ctl jail logs). */
#ifndef AGT_JAILFMT_H
#define AGT_JAILFMT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

/* jails: the array of jail.ls.  Columns: name, agent, state, exit code, rootfs, age, CPU
 * time, memory, attached clients, connections its network proxy refused. */
void agt_print_jails(FILE *f, json_t *jails);
/* The same table from a jail.ls answer asked for agt_jail_table_columns (NULL-terminated):
 * {"columns": [...], "rows": [[...], ...]}, what a listing of many jails asks for (each
 * jail's ten values, no more).  -1, nothing printed, when the answer has no such table (an
 * agtd from before the columns). */
extern const char *const agt_jail_table_columns[];
int agt_print_jail_rows(FILE *f, json_t *table);

/* res: a jail.logs answer.  Writes its bytes to f; *len says how many, *next and *end are
 * the answer's offsets. */
int agt_print_log_chunk(FILE *f, json_t *res, size_t *len, uint64_t *next, uint64_t *end,
                        agt_error_t *err);

#endif
