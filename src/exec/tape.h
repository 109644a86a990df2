/* tape.h — the record of what the executor ran, DyNet/PyTorch style.
 *
 * Every executed op that reads a value requiring a gradient (a parameter,
 * or anything computed from one) and through which a gradient can flow is
 * appended: its op description, the exact tensors it read and wrote (the
 * tape holds a reference to each), and where it came from.  Loops appear
 * unrolled and only the taken branch of an if appears.
 *
 * Names.  In the flat tape every value has one name: a value made inside a
 * loop turn gets its variable's name with the turn appended, `h.2#0`,
 * `h.2#1` (nested loops: `v#1#0`), so the tape reads as one flat block of
 * the program format and the backward builder can treat it as one.
 */
#ifndef NETRUN_TAPE_H
#define NETRUN_TAPE_H

#include "ir/tensor.h"

typedef struct TapeEntry {
  const OpDesc *op;       /* the program's op description */
  int klass;              /* its class: entries of one class have ops of one
                           * structure (op_struct_equal) whose values share
                           * variables alike; numbered by the executor */
  int nin, nout;          /* values: inputs then outputs, in slot order */
  Tensor **vals;
  const char **vars;      /* the variables they were read from / written to */
  const char **turns;     /* and the turn suffix of the frame holding them */
} TapeEntry;

/* Recording only copies pointers; names are made when the tape is turned
 * into a program.  Turn suffixes live in the tape's arena. */
struct Tape {
  Arena arena;
  TapeEntry *entries;
  int n, cap;
  int nclasses;           /* entries' classes are below this */
};
typedef struct Tape Tape;

void tape_init(Tape *t);
void tape_free(Tape *t);
/* Records an op run: ins/outs are the tensors per proto slot order
 * (flattened), in_vars/out_vars the variables they were read from or
 * written to, in_turns and turn the turn suffixes of their frames (strings
 * that must outlive the tape: made with tape_turn); klass the op's class. */
void tape_record(Tape *t, const OpDesc *op, int klass, Tensor *const *ins, const char *const *in_vars,
                 const char *const *in_turns, int nin, Tensor *const *outs,
                 const char *const *out_vars, int nout, const char *turn);
/* Drops the entries from the n-th on (the REPL undoing a statement). */
void tape_truncate(Tape *t, int n);
/* The suffix of turn k inside a frame whose suffix is parent: "#k" appended. */
const char *tape_turn(Tape *t, const char *parent, int64_t k);
/* A copy of entry e's op description in p, its values (inputs then
 * outputs, in slot order) named names[k]; not appended to any block. */
OpDesc *tape_entry_op(Program *p, const TapeEntry *e, const char *const *names);
/* The tape as a program of one flat block: every value declared with its
 * dtype and concrete shape (parameters flagged), one op per entry.  The
 * program lives in `arena`; its ops keep their source spans.  If values is
 * not NULL it receives an array (mem_free it) of the tensors of block 0's
 * variables, in declaration order (borrowed from the tape). */
Program *tape_program(const Tape *t, const Program *fwd, Arena *arena, Tensor ***values);

#endif
