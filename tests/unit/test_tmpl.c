/* --format's template engine (common/tmpl.c) over JSON as the listings print it: fields,
 * functions, blocks, tables, and errors that name the column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmpl.h"

static const char *jails =
    "[{\"name\": \"a\", \"state\": \"running\", \"exit_code\": null, \"refused\": 2,"
    "  \"usage\": {\"memory\": 1048576}, \"allow\": [\"x.org\", \"y.org:443\"]},"
    " {\"name\": \"bbbbbbbb\", \"state\": \"exited\", \"exit_code\": 3, \"refused\": 0,"
    "  \"allow\": []}]";

/* What --format prints for the jails above, or the error's message. */
static char *render(const char *spec, const char *data)
{
  struct agt_format *fm = NULL;
  agt_error_t err = NULL;
  json_t *v = json_loads(data, 0, NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  char *out;

  assert_non_null(v);
  if (agt_format_parse(spec, &fm, &err) < 0 || agt_format_print(fm, f, v, &err) < 0) {
    fclose(f);
    free(buf);
    out = strdup(err->msg);
    agt_error_release(&err);
  } else {
    fclose(f);
    out = buf;
  }
  agt_format_free(fm);
  json_decref(v);
  return out;
}

static void expect(const char *spec, const char *want)
{
  char *got = render(spec, jails);
  assert_string_equal(got, want);
  free(got);
}

/* The error message starts with want. */
static void expect_error(const char *spec, const char *want)
{
  char *got = render(spec, jails);
  if (strncmp(got, want, strlen(want)) != 0)
    fail_msg("--format '%s': got '%s', want '%s...'", spec, got, want);
  free(got);
}

static void test_fields(void **state)
{
  (void)state;
  expect("{{.name}} {{.state}}", "a running\nbbbbbbbb exited\n");
  /* docker's spelling finds the JSON keys */
  expect("{{.Name}}\\t{{.ExitCode}}", "a\t\nbbbbbbbb\t3\n");
  expect("{{.usage.memory}}", "1048576\n\n");
  expect("{{.Usage.Memory}}|{{$.name}}", "1048576|a\n|bbbbbbbb\n");
  expect("{{.allow}}", "[\"x.org\",\"y.org:443\"]\n[]\n");
  expect("{{json .}}", "{\"allow\":[\"x.org\",\"y.org:443\"],\"exit_code\":null,\"name\":\"a\","
                       "\"refused\":2,\"state\":\"running\",\"usage\":{\"memory\":1048576}}\n"
                       "{\"allow\":[],\"exit_code\":3,\"name\":\"bbbbbbbb\",\"refused\":0,"
                       "\"state\":\"exited\"}\n");
  expect("json", "{\"allow\":[\"x.org\",\"y.org:443\"],\"exit_code\":null,\"name\":\"a\","
                 "\"refused\":2,\"state\":\"running\",\"usage\":{\"memory\":1048576}}\n"
                 "{\"allow\":[],\"exit_code\":3,\"name\":\"bbbbbbbb\",\"refused\":0,"
                 "\"state\":\"exited\"}\n");
  /* an object is formatted once */
  {
    char *got = render("{{.agtd.version}} {{len .jails}}",
                       "{\"agtd\": {\"version\": \"0.1\"}, \"jails\": [1, 2]}");
    assert_string_equal(got, "0.1 2\n");
    free(got);
  }
}

static void test_functions(void **state)
{
  (void)state;
  expect("{{upper .name}} {{.state | upper}} {{title \"ab cd\"}} {{lower \"XY\"}}",
         "A RUNNING Ab Cd xy\nBBBBBBBB EXITED Ab Cd xy\n");
  expect("{{join .allow \", \"}}|{{len .allow}}|{{index .allow 1}}",
         "x.org, y.org:443|2|y.org:443\n|0|\n");
  expect("{{truncate .name 3}}", "a\nbbb\n");
  expect("{{printf \"%-5s|%3d|%q\" .name .refused .state}}",
         "a    |  2|\"running\"\nbbbbbbbb|  0|\"exited\"\n");
  expect("{{eq .state \"running\"}} {{ne .refused 0}} {{not .refused}} {{or .exit_code \"-\"}} "
         "{{and .refused .name}}",
         "true true false - a\nfalse false true 3 0\n");
}

static void test_blocks(void **state)
{
  (void)state;
  expect("{{if eq .state \"running\"}}up{{else if .exit_code}}exit {{.exit_code}}{{else}}?{{end}}",
         "up\nexit 3\n");
  expect("{{range .allow}}<{{.}}>{{else}}none{{end}}", "<x.org><y.org:443>\nnone\n");
  expect("{{with .usage}}{{.memory}}{{else}}-{{end}}", "1048576\n-\n");
  expect("{{.name}} {{- /* a comment */ -}} !", "a!\nbbbbbbbb!\n");
  expect("{{range $.allow}}{{.}} {{$.name}};{{end}}", "x.org a;y.org:443 a;\n\n");
}

static void test_table(void **state)
{
  (void)state;
  expect("table {{.Name}}\\t{{.State}}\\t{{.exit_code}}", "NAME       STATE     EXIT CODE\n"
                                                          "a          running   \n"
                                                          "bbbbbbbb   exited    3\n");
  /* table alone: the fields of the first item that are neither lists nor objects */
  expect("table", "NAME       STATE     EXIT CODE   REFUSED\n"
                  "a          running               2\n"
                  "bbbbbbbb   exited    3           0\n");
  {
    char *got = render("table {{.name}}", "[]");
    assert_string_equal(got, "NAME\n");
    free(got);
  }
}

static void test_errors(void **state)
{
  (void)state;
  expect_error("{{.name}} {{.nmae}}", "column 13: no field .nmae here");
  expect_error("{{.name", "column 1: unclosed action: '}}' is missing");
  expect_error("x {{uper .name}}", "column 5: unknown function 'uper': did you mean 'upper'?");
  expect_error("{{if .name}}x", "column 1: this block has no {{end}}");
  expect_error("a{{end}}", "column 2: {{end}} without an if, range or with to end");
  expect_error("{{.name .state}}", "column 9: two values in a row");
  expect_error("{{\"abc}}", "column 3: unterminated string");
  expect_error("{{.name | .state}}", "column 10: after '|' comes a function");
  expect_error("{{}}", "column 1: empty action");
  expect_error("{{(.name)}}", "column 3: parentheses are not supported");
  expect_error("{{$x := .name}}", "column 3: variables are not supported");
  expect_error("{{.name.first}}", "column 3: 'first' is not a field of a string");
  expect_error("{{join .name 1}}", "column 3: join takes a list and a string");
  expect_error("{{printf \"%x\" .name}}", "column 3: printf: '%x' is not supported");
  expect_error("table {{.Nme}}", "column 9: no field .Nme here");
  expect_error("", "an empty template");
  /* the caret under the column */
  {
    char *got = render("{{.name}} {{.nmae}}", jails);
    assert_non_null(strstr(got, "\n    {{.name}} {{.nmae}}\n                ^"));
    free(got);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fields), cmocka_unit_test(test_functions),
      cmocka_unit_test(test_blocks), cmocka_unit_test(test_table),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
