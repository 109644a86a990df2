/* lsp_bench.c — `make bench` (bench-lsp): how long netrun lsp takes from
 * a change of a 500-line script to its diagnostics (goal: 50 ms on the
 * project's machine).  The script is a stack of 480 dense layers on the
 * stdlib; each change alternates it with a copy holding a shape error at
 * line 250, as typing would.  A bare parse of the same text (fmt's
 * tokens and tree) alternates with each change, so the line also gives
 * the analysis's cost as a ratio to parsing measured in the same run.
 * On a shared host the wall time waits for the CPU: the process's CPU
 * time is printed beside it. */
#include "cli/lsp.h"
#include "front/ast.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINES 500
#define ROUNDS 21

static double clock_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static char *script(bool broken) {
  size_t cap = 64 * LINES, n = 0;
  char *s = malloc(cap);
  n += (size_t)snprintf(s + n, cap - n, "import \"nn\"\ninput x : f32[B, 64]\ninput y : i64[B]\nh0 = x\n");
  for (int i = 1; i <= LINES - 6; i++) {
    if (broken && i == 245)
      n += (size_t)snprintf(s + n, cap - n, "h%d = dense(h%d, 64) + dense(h%d, 32)\n", i, i - 1, i - 1);
    else n += (size_t)snprintf(s + n, cap - n, "h%d = relu(dense(h%d, 64))  # layer %d\n", i, i - 1, i);
  }
  snprintf(s + n, cap - n, "loss = cross_entropy(dense(h%d, 10), y)\n", LINES - 6);
  return s;
}

static void handle(LspServer *s, json_t *msg) {
  char *body = json_dumps(msg, JSON_COMPACT);
  json_decref(msg);
  lsp_handle(s, body, strlen(body));
  free(body);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double parse_once(const char *text) {
  double t0 = now();
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d, &a);
  d.max_errors = 0;
  int f = diag_add_source(&d, "bench.net", NULL, text, strlen(text));
  AstTokens toks;
  ast_parse_tokens(&a, &d, f, &toks);
  arena_free(&a);
  return now() - t0;
}

int main(void) {
  FILE *null = fopen("/dev/null", "w");
  LspServer *s = lsp_new(null);
  char *text[2] = {script(false), script(true)};
  handle(s, json_pack("{s:s,s:i,s:s,s:{}}", "jsonrpc", "2.0", "id", 1, "method", "initialize", "params"));
  handle(s, json_pack("{s:s,s:s,s:{s:{s:s,s:s}}}", "jsonrpc", "2.0", "method", "textDocument/didOpen", "params",
                      "textDocument", "uri", "file:///bench/model.net", "text", text[0]));
  double change[ROUNDS], change_cpu[ROUNDS], parse[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    const char *t = text[(r + 1) % 2];
    double t0 = now(), c0 = cpu();
    handle(s, json_pack("{s:s,s:s,s:{s:{s:s,s:i},s:[{s:s}]}}", "jsonrpc", "2.0", "method", "textDocument/didChange",
                        "params", "textDocument", "uri", "file:///bench/model.net", "version", r + 2,
                        "contentChanges", "text", t));
    change[r] = now() - t0;
    change_cpu[r] = cpu() - c0;
    parse[r] = parse_once(t);
  }
  qsort(change, ROUNDS, sizeof *change, cmp);
  qsort(change_cpu, ROUNDS, sizeof *change_cpu, cmp);
  qsort(parse, ROUNDS, sizeof *parse, cmp);
  printf("lsp: diagnostics of a %d-line script after a change: median %.1f ms (%.1f ms of CPU), slowest %.1f ms "
         "(goal 50 ms: %.2fx of it); %.0fx a bare parse (median %.2f ms), alternated in one run\n",
         LINES, 1e3 * change[ROUNDS / 2], 1e3 * change_cpu[ROUNDS / 2], 1e3 * change[ROUNDS - 1],
         1e3 * change[ROUNDS / 2] / 50, change[ROUNDS / 2] / parse[ROUNDS / 2], 1e3 * parse[ROUNDS / 2]);
  lsp_free(s);
  free(text[0]);
  free(text[1]);
  fclose(null);
  return 0;
}
