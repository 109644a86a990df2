/* names.c — building and parsing the names that carry meaning (names.h). */
#include "ir/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_RENAME "@RENAME@"
#define NAME_BLOCK "@B"
#define NAME_LEVEL "@L"

const char *name_grad(Arena *a, const char *v) { return arena_printf(a, "%s" NAME_GRAD, v); }

const char *name_grad_at(Arena *a, const char *v, const char *level, int block) {
  if (block < 0) return arena_printf(a, "%s" NAME_GRAD "%s", v, level);
  return arena_printf(a, "%s" NAME_GRAD "%s" NAME_BLOCK "%d", v, level, block);
}

const char *name_level(Arena *a, int n) { return n ? arena_printf(a, NAME_LEVEL "%d", n) : ""; }

bool name_is_grad(const char *n) { return strstr(n, NAME_GRAD) != NULL; }

/* The last "@GRAD" of n: the gradient of x@GRAD@L1 is x@GRAD@L1@GRAD. */
static const char *last_grad(const char *n) {
  const char *last = NULL;
  for (const char *at = strstr(n, NAME_GRAD); at; at = strstr(at + 1, NAME_GRAD)) last = at;
  return last;
}

const char *name_grad_of(Arena *a, const char *n) {
  const char *at = last_grad(n);
  return at ? arena_strndup(a, n, (size_t)(at - n)) : n;
}

bool name_is_plain_grad(const char *n, size_t base_len) {
  return strlen(n) >= base_len && strcmp(n + base_len, NAME_GRAD) == 0;
}

const char *name_stem(Arena *a, const char *n) {
  const char *at = strchr(n, '@');
  return at ? arena_strndup(a, n, (size_t)(at - n)) : n;
}

const char *name_block_suffix(const char *rest, long *block, const char **end) {
  const char *b = strstr(rest, NAME_BLOCK);
  if (!b || b[2] < '0' || b[2] > '9') return NULL;
  char *e;
  *block = strtol(b + 2, &e, 10);
  *end = e;
  return b;
}

const char *name_with_block(Arena *a, const char *rest, const char *at, int block, const char *end) {
  return arena_printf(a, "%.*s" NAME_BLOCK "%d%s", (int)(at - rest), rest, block, end);
}

const char *name_stats(Arena *a, const char *v) { return arena_printf(a, "%s@STATS", v); }

const char *name_moments(Arena *a, const char *v) { return arena_printf(a, "%s@MOMENTS", v); }

const char *name_mask(Arena *a, const char *v) { return arena_printf(a, "%s@MASK", v); }

const char *name_rename(Arena *a, const char *v, int k) { return arena_printf(a, "%s" NAME_RENAME "%d", v, k); }

bool name_is_write_of(const char *n, const char *v) {
  size_t len = strlen(v);
  return strncmp(n, v, len) == 0 && (n[len] == 0 || strncmp(n + len, NAME_RENAME, strlen(NAME_RENAME)) == 0);
}

bool name_is_rename(const char *n) { return strstr(n, NAME_RENAME) != NULL; }

bool name_is_empty(const char *n) { return strcmp(n, NAME_EMPTY) == 0; }

bool name_grad_op(char *buf, size_t n, const char *type) {
  return (size_t)snprintf(buf, n, "%s_grad", type) < n;
}
