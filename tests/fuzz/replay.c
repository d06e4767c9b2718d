/* Replays fuzz inputs without libFuzzer, so the seed corpus and the regression inputs run on
 * every `just test`.  Each argument is a file or a directory whose files (dotfiles skipped)
 * run in name order through the target's LLVMFuzzerTestOneInput; a missing directory is
 * skipped with a note (regressions/<target>/ may be empty and so absent from git).  A bug
 * shows as a crash or a sanitizer report, as under libFuzzer. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replayed;

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  size_t len = 0, cap = 0, n;

  if (f == NULL) {
    fprintf(stderr, "replay: open '%s': %s\n", path, strerror(errno));
    return -1;
  }
  do {
    if (len == cap) {
      cap = cap ? cap * 2 : 4096;
      buf = realloc(buf, cap);
      if (buf == NULL)
        abort();
    }
    n = fread(buf + len, 1, cap - len, f);
    len += n;
  } while (n > 0);
  if (ferror(f)) {
    fprintf(stderr, "replay: read '%s': %s\n", path, strerror(errno));
    fclose(f);
    free(buf);
    return -1;
  }
  fclose(f);
  /* An exact-size copy, so an overread of the input is caught under ASan. */
  unsigned char *exact = malloc(len ? len : 1);
  if (exact == NULL)
    abort();
  if (len)
    memcpy(exact, buf, len);
  free(buf);
  printf("replay: %s (%zu bytes)\n", path, len);
  fflush(stdout);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  replayed++;
  return 0;
}

static int skip_dot(const struct dirent *e)
{
  return e->d_name[0] != '.';
}

static int run_path(const char *path)
{
  struct stat st;
  struct dirent **ents;
  int n, r = 0;

  if (stat(path, &st) < 0) {
    if (errno == ENOENT) {
      printf("replay: %s: no such directory, skipped\n", path);
      return 0;
    }
    fprintf(stderr, "replay: stat '%s': %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return run_file(path);
  n = scandir(path, &ents, skip_dot, alphasort);
  if (n < 0) {
    fprintf(stderr, "replay: scandir '%s': %s\n", path, strerror(errno));
    return -1;
  }
  for (int i = 0; i < n; i++) {
    char *p = NULL;
    if (r == 0) {
      if (asprintf(&p, "%s/%s", path, ents[i]->d_name) < 0)
        abort();
      r = run_path(p);
      free(p);
    }
    free(ents[i]);
  }
  free(ents);
  return r;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++)
    if (run_path(argv[i]) < 0)
      return 1;
  printf("replay: %d inputs, no failure\n", replayed);
  return 0;
}
