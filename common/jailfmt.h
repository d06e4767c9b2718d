/* The jail table both clients print (agt jail ls, agtd ctl jail ls). */
#ifndef AGT_JAILFMT_H
#define AGT_JAILFMT_H

#include <jansson.h>
#include <stdio.h>

/* jails: the array of jail.ls.  Columns: name, agent, state, exit code, rootfs, age, CPU
 * time, memory, attached clients. */
void agt_print_jails(FILE *f, json_t *jails);

#endif
