/* mem.c — the single allocation function, its fault injection, and arenas. */
#include "base/mem.h"


#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long fail_at = -1;   /* NETRUN_FAIL_ALLOC: fail the Nth allocation */
static long n_allocs;
static bool fail_init;
static size_t requested;

/* NETRUN_COUNT_ALLOC: print how many allocations the process made, at
 * exit, so a test knows how far to walk NETRUN_FAIL_ALLOC. */
static void print_count(void) { fprintf(stderr, "netrun: %ld allocations\n", n_allocs); }

/* glibc hands a block of 128 KB or more to mmap, and gives the top of the
 * heap back to the kernel once 128 KB of it is free, with thresholds that
 * grow only as far as the largest block freed so far: a training step
 * allocates and frees the same tensors of megabytes every step, and each
 * came back as fresh pages to fault in and zero (a quarter of a
 * fashion_resnet step's time went to page faults and clearing pages).
 * Blocks up to glibc's largest mmap threshold (32 MB on 64-bit) now come
 * from the heap, and up to 1 GB of free heap is kept for the next step.
 * Peak memory is not raised: the pages kept are those the step's peak
 * already touched.  (Under a sanitizer's allocator this is a no-op.) */
static void tune_malloc(void) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

static void fault_init(void) {
  tune_malloc();
  const char *e = getenv("NETRUN_FAIL_ALLOC");
  fail_at = e ? atol(e) : -1;
  if (getenv("NETRUN_COUNT_ALLOC")) atexit(print_count);
  fail_init = true;
}

size_t mem_requested(void) { return requested; }

/* ---- the memory limit ---------------------------------------------------------- */

static int64_t used_bytes;      /* charged so far */
static int64_t limit_bytes;     /* 0 until set or first needed */
static bool limit_hit;

int64_t mem_limit(void) {
  if (!limit_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    limit_bytes = pages > 0 && page > 0 && pages < INT64_MAX / page ? (int64_t)pages * page : (int64_t)16 << 30;
  }
  return limit_bytes;
}

void mem_set_limit(int64_t bytes) { limit_bytes = bytes > 0 ? bytes : 0; }
int64_t mem_used(void) { return used_bytes; }
bool mem_limit_hit(void) { return limit_hit; }
void mem_limit_reached(void) { limit_hit = true; }

bool mem_charge(int64_t bytes) {
  if (bytes > mem_limit() - used_bytes) {
    limit_hit = true;
    return false;
  }
  used_bytes += bytes;
  return true;
}

void mem_uncharge(int64_t bytes) { used_bytes -= bytes; }

const char *mem_limit_why(double bytes, char *buf, size_t n) {
  char a[32], b[32], c[32];
  int64_t free_bytes = mem_limit() - used_bytes;
  snprintf(buf, n, "it would take %s, but only %s of the memory limit of %s is free (--max-memory)",
           mem_size_str(bytes, a, sizeof a), mem_size_str((double)(free_bytes > 0 ? free_bytes : 0), b, sizeof b),
           mem_size_str((double)limit_bytes, c, sizeof c));
  return buf;
}

static void (*reporter)(const char *line);

void mem_set_reporter(void (*report)(const char *line)) { reporter = report; }

/* Reports line (in a buffer on the stack: nothing is allocated). */
static void report(const char *line) {
  if (reporter) reporter(line);
  else fprintf(stderr, "%s\n", line);
}

void mem_charge_or_exit(const char *what, int64_t bytes) {
  if (mem_charge(bytes)) return;
  char why[256], line[600];
  snprintf(line, sizeof line, "out of memory: %s: %s", what, mem_limit_why((double)bytes, why, sizeof why));
  report(line);
  mem_exit_oom();
}

_Noreturn void mem_oom(size_t size) {
  char line[80];
  snprintf(line, sizeof line, "out of memory (allocating %zu bytes)", size);
  report(line);
  mem_exit_oom();
}

_Noreturn void mem_exit_oom(void) {
  fflush(stdout);
  exit(MEM_EXIT_OOM);
}

const char *mem_size_str(double bytes, char *buf, size_t n) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, u++;
  snprintf(buf, n, u ? "%.3g %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

bool mem_parse_size(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || errno || !(x > 0)) return false;
  static const char units[] = "KMGTP";
  const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  if (u) {
    for (const char *k = units; k <= u; k++) x *= 1024;
    end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
  }
  if (*end || x >= 0x1p62 || x < 1) return false;
  *out = (int64_t)x;
  return true;
}

void *mem_alloc(void *ptr, size_t size) {
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (!fail_init) fault_init();
  if (++n_allocs == fail_at) mem_oom(size);
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

/* The block from mem_alloc sits just before: its address in the 8 bytes
 * before the line (at least 8 bytes in, as malloc's blocks start on 16, or
 * on 8 under a sanitizer). */
void *mem_line_alloc(size_t size) {
  if (size > SIZE_MAX - 64) mem_oom(SIZE_MAX);
  char *block = mem_alloc(NULL, size + 64);
  char *line = (char *)(((uintptr_t)block + 64) & ~(uintptr_t)63);
  memcpy(line - sizeof block, &block, sizeof block);
  return line;
}

void *mem_line_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) mem_oom(SIZE_MAX);
  void *p = mem_line_alloc(n * size);
  memset(p, 0, n * size);
  return p;
}

void mem_line_free(void *ptr) {
  if (!ptr) return;
  void *block;
  memcpy(&block, (char *)ptr - sizeof block, sizeof block);
  free(block);
}

char *mem_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(mem_alloc(NULL, n), s, n);
}

char *mem_realpath(const char *path) {
  char *r = realpath(path, NULL);
  if (!r) return NULL;
  char *s = mem_strdup(r);
  free(r);
  return s;
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
    mem_uncharge((int64_t)(sizeof *c + c->size));
    mem_free(c);
    c = next;
  }
  const char *what = a->what;   /* an arena freed to be reused keeps its name */
  arena_init(a);
  a->what = what;
}

void *arena_alloc(Arena *a, size_t size) {
  if (size > SIZE_MAX / 2) mem_oom(size);
  size = (size + 15) & ~(size_t)15;
  if (!a->head || a->used + size > a->size) {
    size_t csize = size > 32768 ? size : 32768;
    mem_charge_or_exit(a->what ? a->what : "the program", (int64_t)(sizeof(ArenaChunk) + csize));
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

/* ---- hashes and maps ------------------------------------------------------------ */

uint64_t mem_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = mem_fnv_step(h, b[i]);
  return h;
}

uint64_t mem_fnv_str(uint64_t h, const char *s) {
  while (*s) h = mem_fnv_step(h, (unsigned char)*s++);
  return h;
}

/* (Its basis is not FNV's: tables were laid out by it, so it stays.) */
uint64_t mem_hash_str(const char *s) { return mem_fnv_str(1469598103934665603ull, s); }

/* The slot of key in m (by string or by address), or the empty one where
 * it would go. */
static size_t map_slot(const HashMap *m, const void *key, bool by_string) {
  size_t i = (by_string ? mem_hash_str(key) : mem_hash_ptr(key)) & (m->cap - 1);
  while (m->keys[i] && (by_string ? strcmp(m->keys[i], key) != 0 : m->keys[i] != key)) i = (i + 1) & (m->cap - 1);
  return i;
}

static int map_get(const HashMap *m, const void *key, bool by_string) {
  if (!m->cap) return -1;
  size_t i = map_slot(m, key, by_string);
  return m->keys[i] ? m->vals[i] : -1;
}

static void map_free(HashMap *m) {
  mem_free(m->keys);
  mem_free(m->vals);
  *m = (HashMap){0};
}

static void map_put(Arena *a, HashMap *m, const void *key, int val, bool by_string) {
  if ((m->n + 1) * 2 > m->cap) {
    HashMap old = *m;
    m->cap = m->cap ? m->cap * 2 : 16;
    m->keys = a ? arena_alloc(a, m->cap * sizeof *m->keys) : mem_calloc(m->cap, sizeof *m->keys);
    m->vals = a ? arena_alloc(a, m->cap * sizeof *m->vals) : mem_calloc(m->cap, sizeof *m->vals);
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++)
      if (old.keys[i]) map_put(a, m, old.keys[i], old.vals[i], by_string);
    if (!a) map_free(&old);
  }
  size_t i = map_slot(m, key, by_string);
  if (!m->keys[i]) m->keys[i] = key, m->n++;
  m->vals[i] = val;
}

int strmap_get(const StrMap *m, const char *key) { return map_get(m, key, true); }
int ptrmap_get(const PtrMap *m, const void *key) { return map_get(m, key, false); }
void strmap_put(Arena *a, StrMap *m, const char *key, int val) { map_put(a, m, key, val, true); }
void ptrmap_put(Arena *a, PtrMap *m, const void *key, int val) { map_put(a, m, key, val, false); }
void strmap_free(StrMap *m) { map_free(m); }
void ptrmap_free(PtrMap *m) { map_free(m); }
