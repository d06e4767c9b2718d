#include "jailfmt.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "cleanup.h"

static const char *age(json_int_t t, char *buf, size_t n)
{
  long s = (long)(time(NULL) - t);

  if (t == 0)
    snprintf(buf, n, "-");
  else if (s < 120)
    snprintf(buf, n, "%lds", s);
  else if (s < 7200)
    snprintf(buf, n, "%ldm", s / 60);
  else
    snprintf(buf, n, "%ldh", s / 3600);
  return buf;
}

const char *const agt_jail_table_columns[] = {"name",     "agent",   "state",    "exit_code",
                                              "rootfs",   "created", "cpu_usec", "memory",
                                              "attached", "refused", NULL};

static void print_header(FILE *f)
{
  fprintf(f, "%-24s %-10s %-9s %-6s %-12s %-6s %-9s %-9s %-8s %s\n", "NAME", "AGENT", "STATE",
          "EXIT", "ROOTFS", "AGE", "CPU", "MEMORY", "ATTACHED", "REFUSED");
}

static const char *str_or_dash(json_t *v)
{
  const char *s = json_string_value(v);
  return s ? s : "-";
}

/* One line of the table from the values of agt_jail_table_columns (NULL or null: the jail
 * has none). */
static void print_row(FILE *f, json_t *const v[10])
{
  char exitbuf[16] = "-", agebuf[32], mem[24] = "-", cpu[24] = "-";

  if (json_is_integer(v[3]))
    snprintf(exitbuf, sizeof exitbuf, "%d", (int)json_integer_value(v[3]));
  if (json_is_integer(v[7]))
    snprintf(mem, sizeof mem, "%.1fM", (double)json_integer_value(v[7]) / 1048576.0);
  if (json_is_integer(v[6]))
    snprintf(cpu, sizeof cpu, "%.2fs", (double)json_integer_value(v[6]) / 1e6);
  fprintf(f, "%-24s %-10s %-9s %-6s %-12.12s %-6s %-9s %-9s %-8d %lld\n", str_or_dash(v[0]),
          str_or_dash(v[1]), str_or_dash(v[2]), exitbuf, str_or_dash(v[4]),
          age(json_integer_value(v[5]), agebuf, sizeof agebuf), cpu, mem,
          (int)json_integer_value(v[8]), (long long)json_integer_value(v[9]));
}

void agt_print_jails(FILE *f, json_t *jails)
{
  size_t i;
  json_t *j;

  print_header(f);
  json_array_foreach(jails, i, j)
  {
    json_t *usage = json_object_get(j, "usage");
    json_t *v[10];
    for (int k = 0; k < 10; k++)
      v[k] = json_object_get(k == 6 || k == 7 ? usage : j, agt_jail_table_columns[k]);
    print_row(f, v);
  }
}

int agt_print_jail_rows(FILE *f, json_t *table)
{
  json_t *cols = json_object_get(table, "columns"), *rows = json_object_get(table, "rows"), *row;
  size_t i, at[10];

  if (!json_is_array(rows))
    return -1;
  for (int k = 0; k < 10; k++) {
    json_t *c;
    at[k] = (size_t)-1;
    json_array_foreach(cols, i, c) if (json_is_string(c) &&
                                       strcmp(json_string_value(c), agt_jail_table_columns[k]) == 0)
    {
      at[k] = i;
      break;
    }
    if (at[k] == (size_t)-1)
      return -1;
  }
  print_header(f);
  json_array_foreach(rows, i, row)
  {
    json_t *v[10];
    for (int k = 0; k < 10; k++)
      v[k] = json_array_get(row, at[k]);
    print_row(f, v);
  }
  return 0;
}

int agt_print_log_chunk(FILE *f, json_t *res, size_t *len, uint64_t *next, uint64_t *end,
                        agt_error_t *err)
{
  const char *b64 = json_string_value(json_object_get(res, "data_b64"));
  cleanup_free char *data = NULL;

  *len = 0;
  data = b64 ? agt_base64_decode(b64, len) : NULL;
  if (data && *len && fwrite(data, 1, *len, f) != *len)
    return agt_error_make(err, errno, "write logs");
  *next = (uint64_t)json_integer_value(json_object_get(res, "next"));
  *end = (uint64_t)json_integer_value(json_object_get(res, "end"));
  return 0;
}
