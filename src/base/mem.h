/* mem.h — every allocation netrun makes, and the arena.
 *
 * Ownership, written once for the whole program:
 *   - All heap memory comes from mem_alloc(); any build can make its Nth
 *     call fail (NETRUN_FAIL_ALLOC=N), so out-of-memory paths are exercised
 *     (tests/reliability.bats walks N over whole runs; NETRUN_COUNT_ALLOC=1
 *     prints the number of calls at exit).
 *     When an allocation fails, mem_alloc prints "out of memory" and exits
 *     with status 3 through mem_oom(); callers never see NULL.
 *   - An Arena owns many small objects that die together: one script's
 *     sources, its AST and the program lowered from it live in one Arena and
 *     are freed by arena_free().  Nothing allocated in an arena is freed alone.
 *   - Tensors are refcounted; their rule sits in tensor.h.
 *   - libc allocates behind two calls netrun makes.  realpath's result is
 *     copied at once (mem_realpath).  open_memstream's buffer grows with
 *     libc's realloc as its stream is written, so mem_alloc cannot own it:
 *     its users (a program's hash, lr-find's log, a safetensors header)
 *     write, read and free() it in one function, treat a NULL stream as
 *     out of memory (mem_oom), and keep nothing of it.
 */
#ifndef NETRUN_MEM_H
#define NETRUN_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* The one allocation function: like realloc; size 0 frees.  Never NULL for
 * size > 0. */
void *mem_alloc(void *ptr, size_t size);
void *mem_calloc(size_t n, size_t size);   /* zeroed, overflow-checked */
void  mem_free(void *ptr);

/* Blocks whose first byte starts a cache line (64 bytes), for kernels'
 * buffers: malloc's start on 16 bytes, and a 64-byte load or store of a
 * row then straddles two lines.  From mem_alloc (64 bytes more); freed by
 * mem_line_free alone. */
void *mem_line_alloc(size_t size);
void *mem_line_calloc(size_t n, size_t size);   /* zeroed, overflow-checked */
void  mem_line_free(void *ptr);
char *mem_strdup(const char *s);
/* realpath(path): the canonical path in memory from mem_alloc (mem_free
 * it), or NULL with errno set.  libc's own buffer lives only inside. */
char *mem_realpath(const char *path);
/* Bytes requested from mem_alloc so far (reallocations count their new
 * size): how make bench measures memory. */
size_t mem_requested(void);

/* The memory limit (--max-memory; by default the machine's physical
 * memory) bounds what netrun keeps for values and their records together:
 * the elements and headers of tensors (tensor.c), datasets (data.c), the
 * tape and loop frames (tape.c, exec.c), and every arena's chunks (a
 * script's sources, AST and program, a session's entries).  mem_charge
 * counts bytes against it; refused, it counts nothing, remembers that the
 * limit was hit (main exits 3 for an error that followed: see
 * mem_limit_hit), and the caller reports where.  Charging is a counter
 * add: the executor's hot path can afford it. */
int64_t mem_limit(void);
void    mem_set_limit(int64_t bytes);
int64_t mem_used(void);
bool    mem_charge(int64_t bytes);
void    mem_uncharge(int64_t bytes);
bool    mem_limit_hit(void);
/* Another limit that guards memory (a program's ops) was reached: the run
 * ends as out of memory too. */
void    mem_limit_reached(void);
/* "it would take 3.81 MiB, but only 1.19 MiB of the memory limit of 5 MiB
 * is free (--max-memory)", for bytes that mem_charge refused. */
const char *mem_limit_why(double bytes, char *buf, size_t n);
/* Charges bytes for what (e.g. "the tape"), or prints "netrun: error: out
 * of memory: WHAT: it would take ..." and exits with MEM_EXIT_OOM. */
void mem_charge_or_exit(const char *what, int64_t bytes);

/* Called on exhaustion: prints the diagnostic and exits(MEM_EXIT_OOM). */
_Noreturn void mem_oom(size_t size);
/* Where mem_oom's and mem_charge_or_exit's one-line report goes.  diag.c
 * installs its positionless error ("netrun: error: ...") before main runs;
 * mem cannot call diag itself, since diag keeps its sources in an Arena
 * of this module (the layers go diag -> mem, never back).  The report must
 * not allocate.  Without one installed the line goes to stderr as it is. */
void mem_set_reporter(void (*report)(const char *line));
/* Exits with MEM_EXIT_OOM after the caller printed why.  exit() runs the
 * atexit handlers, which remove the temporary files of unfinished atomic
 * writes (file.c), so an old file is never replaced by a half-written one. */
_Noreturn void mem_exit_oom(void);
#define MEM_EXIT_OOM 3
/* "16 GiB", "512 bytes": a size for messages (binary units). */
const char *mem_size_str(double bytes, char *buf, size_t n);
/* Parses a size: a number with an optional unit K, M, G, T or P (powers of
 * 1024; "G", "GB" and "GiB" are the same), e.g. "512M", "1.5G". */
bool mem_parse_size(const char *s, int64_t *out);

/* *out = a * b (or a + b) for sizes taken from a file (shapes, counts,
 * lengths, option values): false, *out untouched, when a term is negative
 * or the result passes INT64_MAX.  Every size computed from a header goes
 * through these, so none can wrap before it is charged. */
static inline bool mem_mul_size(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool mem_add_size(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/* Grow a dynamic array *items of *cap elements so that it holds at least
 * need elements. */
#define VEC_RESERVE(items, cap, need)                                           \
  do {                                                                          \
    if ((size_t)(need) > (size_t)(cap)) {                                       \
      size_t nc_ = (cap) ? (size_t)(cap) * 2 : 8;                               \
      while (nc_ < (size_t)(need)) nc_ *= 2;                                    \
      (items) = mem_alloc((items), nc_ * sizeof *(items));                      \
      (cap) = nc_;                                                              \
    }                                                                           \
  } while (0)

/* FNV-1a, 64 bits, the one hash of strings and bytes: h (MEM_FNV_BASIS to
 * start) carried on over one value, the n bytes at p, or string s. */
#define MEM_FNV_BASIS 0xcbf29ce484222325ull
static inline uint64_t mem_fnv_step(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }
uint64_t mem_fnv(uint64_t h, const void *p, size_t n);
uint64_t mem_fnv_str(uint64_t h, const char *s);
/* A hash of a string for tables (FNV-1a from its own basis). */
uint64_t mem_hash_str(const char *s);

/* A hash of a pointer, for tables keyed by address. */
static inline size_t mem_hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
  ArenaChunk *head;
  size_t used, size;      /* of the head chunk */
  const char *what;       /* what it holds, for the error at the memory limit
                           * (NULL: "the program") */
} Arena;

void  arena_init(Arena *a);
void  arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t size);                   /* zeroed, 16-aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Arena-backed growable array: *items (n used, cap allocated) grows to hold
 * one more element; returns a pointer to the new (zeroed) slot. */
void *arena_push(Arena *a, void **items, int *n, int *cap, size_t elem);
#define ARENA_PUSH(a, items, n, cap) \
  ((__typeof__(items))arena_push((a), (void **)&(items), &(n), &(cap), sizeof *(items)))

/* A hash map to ints (open addressing), keyed by strings (StrMap) or by
 * addresses (PtrMap): the one hash table, so lookups stay O(1) however
 * many names a script binds.  By string: the lowerer's scopes, exports,
 * the backward builder's name sets, the program's variables and version
 * counters; by
 * address (mem_hash_ptr; keys are never dereferenced): the backward
 * builder's variable index, the tape's value names.  Its arrays live in an
 * arena, or with a NULL arena on the heap (then strmap_free/ptrmap_free
 * release them).  Keys are not copied: they must live as long as the map.
 * A zeroed map is empty.  (The executor's op-class index, keyed by a
 * 64-bit structure hash with its own probe, stays in exec.c: its lookups
 * compare whole op structures.) */
typedef struct HashMap {
  const void **keys;
  int *vals;
  size_t cap, n;
} HashMap;
typedef HashMap StrMap;
typedef HashMap PtrMap;
/* The value stored under key, or -1. */
int  strmap_get(const StrMap *m, const char *key);
int  ptrmap_get(const PtrMap *m, const void *key);
/* Stores val under key (replacing an earlier value). */
void strmap_put(Arena *a, StrMap *m, const char *key, int val);
void ptrmap_put(Arena *a, PtrMap *m, const void *key, int val);
/* Frees the arrays of a map filled with a NULL arena; it is then empty. */
void strmap_free(StrMap *m);
void ptrmap_free(PtrMap *m);

#endif
