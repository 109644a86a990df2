/* registry.h — the operator registry: one entry per op type.
 *
 * An entry (OpProto) is the op's whole contract:
 * its proto (named input slots, each single or a list; named output slots;
 * typed attributes with defaults and checkers; a doc line), its shape and
 * dtype inference, its kernel, and its grad maker.  Each op family lives in
 * one file under src/ops/ that ends in a table of OpProtos; the one line
 * OPS(family) in src/ops/ops.list makes the family known.  Adding an op is
 * one table entry; adding a family is one file plus one list line.
 *
 * Protos are registered once at start (reg_default()); ops defined by
 * scripts (`op NAME ... grad`) are registered at load time with
 * reg_add(), and so are plugins' ops (plugin.c), into the default registry.
 */
#ifndef NETRUN_REGISTRY_H
#define NETRUN_REGISTRY_H

#include "ir/program.h"

#define REG_MAX_SLOTS 8
#define REG_MAX_ATTRS 12

enum {
  SLOT_LIST = 1 << 0,      /* holds any number of variables (concat's X) */
  SLOT_OPTIONAL = 1 << 1,  /* may be left out */
  SLOT_NO_GRAD = 1 << 2,   /* never differentiated (labels, indices) */
  SLOT_AS_IS = 1 << 3,     /* read in its own dtype: an f64 value here does not
                              make the op compute in f64, nor is it converted */
};

typedef struct SlotProto {
  const char *name;
  unsigned flags;
  const char *doc;
} SlotProto;

/* An attribute checker: NULL if the value is acceptable, else a message
 * completing "attribute 'NAME' of 'OP' ..." e.g. "must be positive". */
typedef const char *(*AttrCheckFn)(const AttrValue *v);

typedef struct AttrProto {
  const char *name;
  AttrType type;
  const char *dflt;        /* default in script syntax ("0.01", "[1, 1]"); NULL = required */
  AttrCheckFn check;
  const char *doc;
  int repeat;              /* > 0: an int list of this many values, where one
                              value stands for itself repeated (PyTorch's int
                              for a square window: ksize 2 is [2, 2]) */
} AttrProto;

typedef enum GradKind {
  GRAD_NONE,               /* registered as having no gradient */
  GRAD_COMPOSITE,          /* the maker returns ops of existing types */
  GRAD_DEDICATED,          /* the maker returns a <type>_grad op; with grad
                              NULL, the default maker (bwd_default_grad)
                              wires it from that op's proto */
} GradKind;

enum {
  OP_SIDE_EFFECT = 1 << 0, /* must run even if nothing reads its outputs (print) */
  OP_RANDOM = 1 << 1,      /* draws from the seeded generator */
  OP_CONTROL = 1 << 2,     /* owns sub-blocks (while, conditional_block) */
  OP_INTERNAL = 1 << 3,    /* emitted by netrun itself, not meant to be called */
  OP_NO_PREALLOC = 1 << 4, /* the kernel makes its outputs (views, lists) */
  OP_ZERO_GRAD = 1 << 5,   /* GRAD_NONE because its gradient is zero (sign,
                              stop_gradient): not an error to differentiate */
  OP_CONSTANT = 1 << 6,    /* no inputs; its output follows from its attributes
                              alone (fill_constant): made once per loop body */
  OP_LOOP = 1 << 7,        /* a control op that runs its sub_block turn after
                              turn, carrying X (while); others run one of
                              their blocks once */
  OP_KEPT_TURNS = 1 << 8,  /* a control op's grad op: runs over the turns its
                              forward op kept, so the executor keeps them */
  OP_ANY_FLOAT = 1 << 9,   /* computes in its inputs' float dtype, f32 or f64
                              (an op a script defines: its body is lowered
                              for them); see reg_has_f64 */
  OP_AFTER_BACKWARD = 1 << 10, /* made by the executor's rewrite (rewrite.c)
                              after every backward is built: no backward
                              meets it, so it needs no gradient */
  OP_F64 = 1 << 11,        /* its kernel computes in f64 too, given f64 values
                              (netrun-ops(7), DATA TYPES); without it an
                              f64 input is an error at inference, never
                              computed in f32 behind the user's back */
  OP_STEP = 1 << 12,       /* one value per element, the same formula as a
                              step of fused_elementwise (elementwise.c):
                              rewrite.c may fuse a chain of such ops */
};

typedef struct InferCtx InferCtx;
struct ExecCtx;
struct GradCtx;
/* The op contract fails as its layer does (diag.h, "Failing"): inference
 * and the grad maker build the program, so they return bool, false once
 * they have reported why (reg_infer_fail, bwd_fail); the kernel runs it,
 * so it returns 0 or -1, -1 once reported (exec_ctx_fail), as the
 * plugin interface's functions do. */
typedef bool (*InferFn)(InferCtx *ctx);
typedef int (*KernelFn)(struct ExecCtx *ctx);
typedef bool (*GradMakerFn)(struct GradCtx *ctx);

typedef struct OpProto {
  const char *type;
  const char *doc;
  SlotProto in[REG_MAX_SLOTS];
  SlotProto out[REG_MAX_SLOTS];
  AttrProto attrs[REG_MAX_ATTRS];
  InferFn infer;
  KernelFn kernel;
  GradKind grad_kind;
  GradMakerFn grad;
  unsigned flags;
  /* Filled in at registration: */
  int nin, nout, nattrs;
  AttrValue dflt[REG_MAX_ATTRS];  /* parsed defaults (type ATTR_* or unset if required) */
  bool has_dflt[REG_MAX_ATTRS];
  void *user;                     /* for ops defined by scripts and plugins */
  /* Plugins: checks attribute attrs[attr] (whose own check is NULL). */
  const char *(*check_attr)(const struct OpProto *p, int attr, const AttrValue *v);
} OpProto;

typedef struct Registry Registry;

/* The built-in op families, one table per file of src/ops (ops.list), each
 * ending in an entry without a type; NULL ends the list.  src/ops defines
 * it (ops/builtin.c): the registry sits below the ops and names none. */
extern OpProto *const reg_builtin_tables[];

/* The registry holding every built-in op (reg_builtin_tables). */
Registry *reg_default(void);
void reg_free_default(void);
/* A registry of its own (ops defined by one program's scripts). */
Registry *reg_new(void);
void reg_free(Registry *r);
/* Looks a type up among the program's own ops, then the built-ins. */
const OpProto *reg_find_op(const Program *p, const char *type);
/* Frees what a program holds outside its arena (its own registry). */
void reg_release_user_ops(Program *p);
/* Registers a proto (not copied: it must outlive the registry).  Returns
 * false if the type is already taken. */
bool reg_add(Registry *r, OpProto *proto);
/* Unregisters a type (the REPL undoing an `op` definition); false if it
 * was not registered. */
bool reg_remove(Registry *r, const char *type);
const OpProto *reg_find(const Registry *r, const char *type);
/* All registered types, sorted by name; *n gets the count. */
const OpProto *const *reg_all(const Registry *r, int *n);
/* netrun ops: one line per op (type, inputs -> outputs, gradient, kernel)
 * under a heading; and one op in full. */
void reg_print_table(FILE *f, const OpProto *const *ops, int n);
/* Writes the names of the ops of ops[0..n) a script may call (not
 * OP_INTERNAL) to names; returns their count.  What "did you mean"
 * suggests from. */
int reg_callable_names(const OpProto *const *ops, int n, const char **names);
void reg_describe(FILE *f, const OpProto *p);
/* How a script calls the op (netrun-lang(5), calls): its inputs in order
 * (a list input as X[]), then its attributes, each with its default when
 * it has one: "reshape(X, shape)", "softmax(X, axis=-1)". */
void reg_call_signature(FILE *f, const OpProto *p);
int reg_slot_index(const SlotProto *slots, int n, const char *name);
int reg_attr_index(const OpProto *p, const char *name);
/* Op's attribute `name`, or else p's default for it (p may be NULL): NULL
 * if it has neither.  The one lookup inference, kernels and grad makers use. */
const AttrValue *reg_op_attr(const OpProto *p, const OpDesc *op, const char *name);
/* Sets every attribute p has a default for that op does not set. */
void reg_fill_defaults(Program *prog, OpDesc *op, const OpProto *p);
/* A numeric attribute as an integer (a float saturating, as tensor_to_i64)
 * or a double; 0 for NULL. */
int64_t reg_attr_i64(const AttrValue *v);
double reg_attr_f64(const AttrValue *v);
/* Coerces a value given for attribute attrs[attr] to its declared form:
 * one value of an attribute with `repeat` N becomes N copies. */
void reg_coerce_attr(Arena *a, const OpProto *p, int attr, AttrValue *v);
/* Runs the checkers of attribute attrs[attr] on v: NULL, or the message. */
const char *reg_check_attr(const OpProto *p, int attr, const AttrValue *v);
/* Parses an attribute default/constant in script syntax into type t. */
bool reg_parse_attr(Arena *a, AttrType t, const char *text, AttrValue *out);

/* ---- shape and dtype inference ---------------------------------------- */

/* At run time the executor runs inference on concrete values: then `rt`
 * holds, per proto slot index, the inputs' descriptions (made from the
 * tensors) and receives the outputs'. */
typedef struct InferRuntime {
  const VarDesc *const *in[REG_MAX_SLOTS];
  int nin[REG_MAX_SLOTS];
  VarDesc *out[REG_MAX_SLOTS];
  int nout[REG_MAX_SLOTS];
} InferRuntime;

struct InferCtx {
  Program *prog;
  Block *block;
  OpDesc *op;
  const OpProto *proto;
  InferRuntime *rt;        /* NULL while lowering */
  bool quiet;              /* probe only: report nothing */
  bool failed;
  const char *error;       /* with quiet: the message of the failure */
};

/* Runs the proto's inference on op (declaring its outputs' dtype/shape).
 * Reports errors at the op's span; returns false on failure. */
bool reg_infer(Program *p, Block *b, OpDesc *op);

/* Runs c's proto's inference, f64-aware: an op without f64 kernels given
 * an f64 input fails; one with them gets f64 outputs (promotion). */
bool reg_infer_run(InferCtx *c);
/* Does the op have f64 kernels (control ops move values of any dtype)? */
bool reg_has_f64(const OpProto *p);

int reg_infer_count(InferCtx *c, const char *in_slot);         /* vars in an input slot */
const VarDesc *reg_infer_in(InferCtx *c, const char *slot, int i); /* NULL if absent */
int reg_infer_out_count(InferCtx *c, const char *out_slot);
/* Sets the dtype and shape of output slot[i]. */
void reg_infer_set(InferCtx *c, const char *slot, int i, DType t, const Shape *s);
/* For each of the n pairs {output slot, input slot} whose output the op
 * has: the output gets the input's dtype and shape (a grad op's X@GRAD). */
bool reg_infer_like(InferCtx *c, const char *const (*pairs)[2], int n);
/* Reports an error about this op ("OPTYPE: MESSAGE") and returns false. */
bool reg_infer_fail(InferCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t reg_infer_attr_i(InferCtx *c, const char *name);
double reg_infer_attr_f(InferCtx *c, const char *name);
bool reg_infer_attr_b(InferCtx *c, const char *name);
const AttrValue *reg_infer_attr(InferCtx *c, const char *name);

/* NumPy broadcasting of two shapes; false (with an error naming both shapes)
 * if they do not broadcast. */
bool reg_infer_broadcast(InferCtx *c, const Shape *a, const Shape *b, Shape *out);
/* Normalizes a possibly negative axis against rank; false with an error if it
 * is out of range. */
bool reg_infer_axis(InferCtx *c, int64_t axis, int rank, int *out);
/* The first variable of input slot `slot`, or NULL after an error if the
 * op has none. */
const VarDesc *reg_infer_input(InferCtx *c, const char *slot);
/* Output `out` takes the dtype and shape of input `in`; false after an
 * error if the op has no `in`. */
bool reg_infer_same_as(InferCtx *c, const char *out, const char *in);
/* A value the op computes with in f32: f32, or i64 promoted; false with an
 * error otherwise. */
bool reg_infer_need_float(InferCtx *c, const char *slot, const VarDesc *v);
/* Normalizes axis `a`, the value of attribute `attr`, against the known
 * shape s of input `slot`; false with an error naming them if it is out of
 * range. */
bool reg_infer_norm_axis(InferCtx *c, const char *attr, int64_t a, const char *slot, const Shape *s, int *out);
/* Arithmetic promotion: f64 with anything gives f64, i64 with f32 gives
 * f32, bool counts as i64. */
DType reg_infer_promote(DType a, DType b);
/* The inputs of a list slot (concat's and stack's X), read by reg_infer_list. */
typedef struct InferList {
  int n;                 /* how many */
  DType t;               /* their promoted dtype */
  int iref;              /* the index of the first of known rank (-1: none) */
  const VarDesc *ref;    /* that input, or NULL */
  bool all_ranked;       /* whether every rank is known */
} InferList;
/* Reads the inputs of list slot `slot` into *l: at least one, each present.
 * When none has a known rank, output `out` gets their dtype and an unknown
 * shape (and l->ref is NULL: nothing more to infer).  False (reported) if
 * the slot is empty or an input is missing. */
bool reg_infer_list(InferCtx *c, const char *slot, const char *out, InferList *l);

/* Attribute checkers shared by many ops. */
const char *reg_check_positive(const AttrValue *v);       /* int/float > 0, or every list element */
const char *reg_check_nonnegative(const AttrValue *v);
const char *reg_check_probability(const AttrValue *v);    /* 0 <= p < 1 */
const char *reg_check_float_dtype(const AttrValue *v);

#endif
