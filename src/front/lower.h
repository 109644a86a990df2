/* lower.h — from syntax trees to a program (netrun-lang(5), DECLARATIONS to THE PROGRAM). */
#ifndef NETRUN_LOWER_H
#define NETRUN_LOWER_H

#include "front/ast.h"
#include "ir/program.h"
#include "ir/registry.h"

typedef struct Lowerer Lowerer;
/* Told of every binding of a name to a variable as lowering makes it:
 * the name, the variable and where the binding is written (an
 * assignment's target).  netrun lsp's hover and definition read them. */
typedef void (*LowerBindFn)(void *ctx, const char *name, const char *var, Span at);

/* Limits that keep lowering's memory and recursion bounded whatever the
 * script: ops in a program (function calls expand inline), levels of
 * expression (counting the bodies of the functions called) and of nested
 * blocks (while, if, else if, counting the functions called). */
#define LOWER_MAX_OPS 500000
#define LOWER_MAX_DEPTH 2000
#define LOWER_MAX_BLOCKS 256

/* How the ops scripts define run: the shape inference, kernel and grad
 * maker lower.c installs in their protos.  They lower the op's bodies
 * again (lower_user_body), so they live a layer above, in userop.c
 * (uop_impl), and the lowerer's maker hands them down. */
typedef struct UserOpImpl {
  InferFn infer;
  KernelFn kernel;
  GradMakerFn grad;
} UserOpImpl;

/* A lowerer builds one program in `arena`, reporting through `diag`.
 * stdlib_dir is the installed stdlib folder searched last by import;
 * user_ops runs the ops scripts define (&uop_impl). */
Lowerer *lower_new(Arena *arena, Diag *diag, const char *stdlib_dir, const UserOpImpl *user_ops);
void lower_free(Lowerer *L);
/* Lowers at most max_ops ops (default LOWER_MAX_OPS), then stops with an error. */
void lower_set_max_ops(Lowerer *L, int64_t max_ops);
Program *lower_program(Lowerer *L);
void lower_on_bind(Lowerer *L, LowerBindFn fn, void *ctx);
/* Loads, parses and lowers the script at path.  False on any error. */
bool lower_file(Lowerer *L, const char *path);
/* The same for a script whose text is given (an editor's unsaved buffer,
 * netrun lsp); path names it and its folder, as for lower_file. */
bool lower_text(Lowerer *L, const char *path, const char *text, size_t len);
/* Lowers the statements of an already parsed source at the top level. */
bool lower_block(Lowerer *L, const AstNode *root, int file);
/* --dtype f64: every f32 variable and f32 dtype attribute of the program
 * becomes f64, then shape inference runs again over every block (an op
 * without f64 kernels reports it there). */
void lower_promote_f64(Lowerer *L);
/* Records every top-level name's final variable in the program's exports. */
void lower_export(Lowerer *L);

/* ---- ops defined in scripts ------------------------------------------------
 * `op NAME(INPUTS) -> (OUTPUTS) { BODY } grad { GRADBODY }` is checked and
 * registered by lower.c (proto->user points to its UserOp); userop.c gives
 * it shape inference, a kernel and a grad maker, which lower its bodies
 * again for concrete types with lower_user_body. */
typedef struct UserOp {
  Lowerer *L;
  const AstNode *def;            /* the AST_OPDEF */
  struct Scope *globals;         /* what its bodies see besides their names */
  Arena *arena;                  /* the program's: lives as long as the op */
  Diag *diag;
  Registry *registry;            /* the program's own ops, this one among them */
  struct UopEntry *cache;        /* userop.c: bodies lowered per input signature */
} UserOp;

/* Lowers the body (grad false) or the grad body of user op `proto` into
 * block 0 of `into`, attributes bound to op's values (op NULL: the
 * defaults).  The caller declares the variables the body reads: in[i] for
 * input slot i and, for the grad body, out[k] and out_grad[k] for output
 * slot k.  res receives, per output slot (body) or input slot (grad body:
 * NULL for an input whose gradient it leaves unassigned), the variable
 * holding the value.  Errors are reported; false then. */
bool lower_user_body(const OpProto *proto, const OpDesc *op, bool grad, Program *into, const char *const *in,
                     const char *const *out, const char *const *out_grad, const char **res);

/* ---- the REPL: a session lowered statement by statement ----------------------
 * Each chunk of input is lowered at the top level of the same program, so
 * names, functions and ops stay bound from one chunk to the next.  When a
 * chunk fails (to lower or to run), the REPL rolls the lowerer back to the
 * mark taken before it: the program, the top-level bindings, the ops the
 * chunk defined and the imports it loaded are as they were. */
typedef struct LowerMark LowerMark;
LowerMark *lower_mark(Lowerer *L);
/* Undoes everything since the mark, and frees it. */
void lower_rollback(Lowerer *L, LowerMark *m);
void lower_mark_free(LowerMark *m);

/* One top-level statement of a chunk: the number of ops block 0 has after
 * it (the statement's ops end there), and for an expression statement the
 * variable holding the value to show (NULL for other statements and for
 * calls that give no value, such as print). */
typedef struct LowerStmt {
  int end_op;
  const char *shown;
} LowerStmt;
/* Lowers the statements of root (a parsed chunk) at the top level; *stmts
 * (in the arena) gets one entry per statement.  False on any error. */
bool lower_chunk(Lowerer *L, const AstNode *root, LowerStmt **stmts, int *n);
/* The top-level names, for completion: name i (i < lower_nglobals) and its
 * variable, or NULL for a function; "" for a name with neither (assigned
 * only inside a body). */
int lower_nglobals(const Lowerer *L);
const char *lower_global(const Lowerer *L, int i, const char **var);

#endif
