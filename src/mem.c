/* mem.c — the single allocation function, its fault injection, and arenas. */
#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fail_at = -1;   /* NETRUN_FAIL_ALLOC: fail the Nth allocation */
static long n_allocs;
static bool fail_init;
static size_t requested;

size_t mem_requested(void) { return requested; }

_Noreturn void mem_oom(size_t size) {
  fprintf(stderr, "netrun: error: out of memory (allocating %zu bytes)\n", size);
  fflush(stdout);
  exit(3);
}

void *mem_alloc(void *ptr, size_t size) {
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (!fail_init) {
    const char *e = getenv("NETRUN_FAIL_ALLOC");
    fail_at = e ? atol(e) : -1;
    fail_init = true;
  }
  if (fail_at >= 0 && ++n_allocs == fail_at) mem_oom(size);
  requested += size;
  void *p = ptr ? realloc(ptr, size) : malloc(size);
  if (!p) mem_oom(size);
  return p;
}

void *mem_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) mem_oom(SIZE_MAX);
  size_t bytes = n * size;
  if (bytes == 0) bytes = 1;
  void *p = mem_alloc(NULL, bytes);
  memset(p, 0, bytes);
  return p;
}

void mem_free(void *ptr) { free(ptr); }

char *mem_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(mem_alloc(NULL, n), s, n);
}

struct ArenaChunk {
  ArenaChunk *next;
  size_t size;
  _Alignas(16) unsigned char data[];
};

void arena_init(Arena *a) { memset(a, 0, sizeof *a); }

void arena_free(Arena *a) {
  ArenaChunk *c = a->head;
  while (c) {
    ArenaChunk *next = c->next;
    mem_free(c);
    c = next;
  }
  arena_init(a);
}

void *arena_alloc(Arena *a, size_t size) {
  if (size > SIZE_MAX / 2) mem_oom(size);
  size = (size + 15) & ~(size_t)15;
  if (!a->head || a->used + size > a->size) {
    size_t csize = size > 32768 ? size : 32768;
    ArenaChunk *c = mem_alloc(NULL, sizeof *c + csize);
    c->next = a->head;
    c->size = csize;
    a->head = c;
    a->used = 0;
    a->size = csize;
  }
  void *p = a->head->data + a->used;
  a->used += size;
  memset(p, 0, size);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void *arena_push(Arena *a, void **items, int *n, int *cap, size_t elem) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 4;
    void *p = arena_alloc(a, (size_t)nc * elem);
    if (*n) memcpy(p, *items, (size_t)*n * elem);
    *items = p;
    *cap = nc;
  }
  void *slot = (char *)*items + (size_t)(*n)++ * elem;
  memset(slot, 0, elem);
  return slot;
}
