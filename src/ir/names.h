/* names.h — the variable names that carry meaning, built and parsed here.
 *
 * The backward and the executor name values by suffixes on a forward
 * variable's name (its stem, the part before the first '@'):
 *
 *   v@GRAD            the gradient of v
 *   v@GRAD@L2         ... made at level 2: levels @L1, @L2, ... go to the
 *                     script's grad(...) calls in order, then to each
 *                     backward appended after the first (which has none)
 *   v@GRAD@L1@GRAD    the gradient of v@GRAD@L1 (a gradient of a gradient)
 *   v@GRAD@B4         ... per turn, inside grad block 4 (a loop or branch
 *                     body's; the grad op of the loop sums them into v@GRAD)
 *   v@GRAD@RENAME@1   the second of several writes of a gradient (add_n
 *                     sums them into v@GRAD)
 *   @EMPTY@           a slot entry with no variable: a gradient nobody
 *                     needs or nobody gives (control flow's grad ops)
 *   learning_rate@LR  the training program's learning rate (NAME_LR)
 *   v@STATS           the batch statistics of v that a fused batch norm
 *                     keeps for its gradient (rewrite.c)
 *
 * No other file spells these suffixes in a variable's name (a grad op's
 * slot names, X@GRAD, follow the same spelling: registry.h).
 */
#ifndef NETRUN_NAMES_H
#define NETRUN_NAMES_H

#include "base/mem.h"

#include <stdbool.h>
#include <string.h>

#define NAME_GRAD "@GRAD"
#define NAME_EMPTY "@EMPTY@"
/* The variable a training program's optimizer ops read the learning rate
 * from, which the trainer writes each step: not a parameter to save or
 * load, though the startup block makes it. */
#define NAME_LR "learning_rate@LR"

/* v@STATS */
const char *name_stats(Arena *a, const char *v);
/* v@MOMENTS */
const char *name_moments(Arena *a, const char *v);
/* v@MASK */
const char *name_mask(Arena *a, const char *v);
/* v@GRAD */
const char *name_grad(Arena *a, const char *v);
/* v@GRAD, then the level suffix (name_level: "" or "@L<n>"), then "@B<block>"
 * when block >= 0. */
const char *name_grad_at(Arena *a, const char *v, const char *level, int block);
/* The level suffix of the program's n-th backward: "" for the first (n 0). */
const char *name_level(Arena *a, int n);
/* Whether n names a gradient; the variable it is the gradient of (n itself
 * if it names none): the part before its last @GRAD, as a gradient of a
 * gradient (x@GRAD@L1@GRAD, of a script's grad(...)) has two. */
bool name_is_grad(const char *n);
const char *name_grad_of(Arena *a, const char *n);
/* Whether n is "NAME@GRAD" with NAME made of exactly base_len characters. */
bool name_is_plain_grad(const char *n, size_t base_len);
/* The stem of a name: the part before its first '@'; its length (inline:
 * program.c's prog_fresh uses it, and tools built from program.c alone). */
const char *name_stem(Arena *a, const char *n);
static inline size_t name_stem_len(const char *n) {
  const char *at = strchr(n, '@');
  return at ? (size_t)(at - n) : strlen(n);
}
/* A name's grad block suffix ("@B<k>", in rest: what follows the stem):
 * where it starts, or NULL; *block gets k and *end what follows it. */
const char *name_block_suffix(const char *rest, long *block, const char **end);
/* rest with its grad block renumbered to block. */
const char *name_with_block(Arena *a, const char *rest, const char *at, int block, const char *end);
/* v@RENAME@k: the k-th write of a repeated gradient v. */
const char *name_rename(Arena *a, const char *v, int k);
/* Whether n is v or one of v's renames. */
bool name_is_write_of(const char *n, const char *v);
/* Whether n has been renamed (holds one of several writes). */
bool name_is_rename(const char *n);
bool name_is_empty(const char *n);
/* The op that computes a dedicated gradient of op `type`: "TYPE_grad", in
 * buf; false if it does not fit. */
bool name_grad_op(char *buf, size_t n, const char *type);

#endif
