/* driver.c — main() for a fuzz harness without libFuzzer: every file
 * named, and every file in every folder named, goes once through
 * LLVMFuzzerTestOneInput.  make test replays the corpora with it under the
 * sanitizers: a crash, a leak (at exit) or a sanitizer report fails it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The harness's entry points (fuzz.h, which this file cannot include: its
 * DT_UNKNOWN clashes with dirent.h's). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, n = 0, k;
  uint8_t *buf = malloc(cap);
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += k) == cap) buf = realloc(buf, cap *= 2);
  fclose(f);
  if (!buf) return -1;
  /* A copy of exactly n bytes, so reading past the input is caught. */
  uint8_t *input = malloc(n ? n : 1);
  memcpy(input, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(input, n);
  free(input);
  return 1;
}

static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;   /* an absent folder: nothing to replay */
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  DIR *d = opendir(path);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  int count = 0;
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    int r = run_path(full);
    if (r < 0) count = -1;
    else if (count >= 0) count += r;
    free(names[i]);
  }
  free(names);
  return count;
}

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int r = run_path(argv[i]);
    if (r < 0) return 1;
    total += r;
  }
  printf("%s: %d inputs replayed\n", argv[0], total);
  return 0;
}
