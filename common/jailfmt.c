#include "jailfmt.h"

#include <errno.h>
#include <time.h>

#include "base64.h"
#include "cleanup.h"

static const char *text(json_t *o, const char *key)
{
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "-";
}

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

void agt_print_jails(FILE *f, json_t *jails)
{
  size_t i;
  json_t *j;

  fprintf(f, "%-24s %-10s %-9s %-6s %-12s %-6s %-9s %-9s %-8s %s\n", "NAME", "AGENT", "STATE",
          "EXIT", "ROOTFS", "AGE", "CPU", "MEMORY", "ATTACHED", "REFUSED");
  json_array_foreach(jails, i, j)
  {
    char exitbuf[16] = "-", agebuf[32], mem[24] = "-", cpu[24] = "-";
    json_t *code = json_object_get(j, "exit_code");
    json_t *usage = json_object_get(j, "usage");

    if (code)
      snprintf(exitbuf, sizeof exitbuf, "%d", (int)json_integer_value(code));
    if (usage) {
      snprintf(mem, sizeof mem, "%.1fM",
               (double)json_integer_value(json_object_get(usage, "memory")) / 1048576.0);
      snprintf(cpu, sizeof cpu, "%.2fs",
               (double)json_integer_value(json_object_get(usage, "cpu_usec")) / 1e6);
    }
    fprintf(f, "%-24s %-10s %-9s %-6s %-12.12s %-6s %-9s %-9s %-8d %lld\n", text(j, "name"),
            text(j, "agent"), text(j, "state"), exitbuf, text(j, "rootfs"),
            age(json_integer_value(json_object_get(j, "created")), agebuf, sizeof agebuf), cpu, mem,
            (int)json_integer_value(json_object_get(j, "attached")),
            (long long)json_integer_value(json_object_get(j, "refused")));
  }
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
