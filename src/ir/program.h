/* program.h — the program IR: blocks of variable and op descriptions.
 *
 * A Program is what a script lowers to (netrun-lang(5), THE PROGRAM): a list of
 * blocks, block 0 the top level, each sub-block (a while or if body) knowing
 * its parent.  A block holds variable descriptions and an ordered list of op
 * descriptions.  Names are unique across the whole program (see lower.c for
 * the naming scheme), so a name means one variable wherever it appears.
 *
 * Everything here lives in the program's arena and is freed with it.
 */
#ifndef NETRUN_PROGRAM_H
#define NETRUN_PROGRAM_H

#include "base/diag.h"

/* DT_F64 comes after DT_BOOL so that tables indexed by the first three
 * (the elementwise loops) keep their layout. */
typedef enum DType { DT_F32, DT_I64, DT_BOOL, DT_F64, DT_UNKNOWN } DType;
const char *dtype_name(DType t);                 /* "f32", "i64", "bool", "f64", "?" */
/* f32 or f64. */
static inline bool dtype_is_float(DType t) { return t == DT_F32 || t == DT_F64; }
bool dtype_parse(const char *s, DType *out);

/* One dimension: a known size (n >= 0), a symbolic name bound at feed time
 * (sym != NULL, n == -1), or unknown (n == -1, sym == NULL, printed "?"). */
typedef struct Dim {
  int64_t n;
  const char *sym;
} Dim;

#define SHAPE_MAX_RANK 8
/* rank == -1: the rank itself is unknown (printed "[...]"). */
typedef struct Shape {
  int rank;
  Dim d[SHAPE_MAX_RANK];
} Shape;

static inline Dim dim_n(int64_t n) { return (Dim){n, NULL}; }
static inline Dim dim_unknown(void) { return (Dim){-1, NULL}; }
static inline bool dim_known(Dim d) { return d.n >= 0; }
/* Two dimensions that must be equal provably differ: two sizes, or two
 * symbols of different names.  Anything else is checked at run time. */
bool dims_clash(Dim a, Dim b);
/* Of two dimensions that must be equal, the more precise. */
Dim dim_merge(Dim a, Dim b);
bool dim_eq(Dim a, Dim b);               /* same size or same symbol */
Shape shape_unknown(void);               /* rank -1 */
Shape shape_scalar(void);                /* rank 0 */
Shape shape_of(int rank, const int64_t *dims);
int64_t shape_numel(const Shape *s);     /* -1 if any dim is not known */
bool shape_eq(const Shape *a, const Shape *b);
/* The shape both a and b fit: equal dims stay, others become unknown. */
Shape shape_join(const Shape *a, const Shape *b);
/* Writes "[2, B, ?]" into buf. */
const char *shape_str(const Shape *s, char *buf, size_t n);

enum {
  VAR_INPUT = 1 << 0,          /* fed from outside */
  VAR_PARAM = 1 << 1,          /* trainable, persistable */
  VAR_STOP_GRADIENT = 1 << 2,  /* no gradient flows into it */
  VAR_ARG = 1 << 3,            /* a block argument (loop-carried value) */
  VAR_STATE = 1 << 4,          /* training state: optimizer moments, the learning rate */
  VAR_KEPT = 1 << 5,           /* a script's `state`: persistable, not trained, no gradient */
};

typedef struct VarDesc {
  const char *name;
  DType dtype;
  Shape shape;
  unsigned flags;
  Span span;                   /* where it was bound */
  int block;                   /* the block declaring it (-1: the startup block) */
  int slot;                    /* its index in that block's vars */
  const char *user_name;       /* the script's name for it, or NULL for temps */
  const char *next;            /* a script state's (VAR_KEPT): the variable whose value
                                  it keeps at the end of a training step, or NULL */
  Span next_at;                /* where the script binds that value */
} VarDesc;

/* ATTR_I64 and ATTR_I64S are forms of a float attribute (ATTR_FLOAT,
 * ATTR_FLOATS), never declared by a proto: they hold integers exactly, so
 * an i64 constant (fill_constant's value, assign_value's values) and an
 * integer attribute past 2^53 are not rounded through a double.  Read as a
 * double they give the nearest one; they print as the float would (1.0)
 * wherever that text reads back as the integer, else every digit. */
typedef enum AttrType {
  ATTR_INT, ATTR_FLOAT, ATTR_BOOL, ATTR_STRING, ATTR_DTYPE,
  ATTR_INTS, ATTR_FLOATS, ATTR_STRINGS, ATTR_BLOCK,
  ATTR_I64, ATTR_I64S,
} AttrType;
const char *attr_type_name(AttrType t);          /* "int", "float list", ... */

typedef struct AttrValue {
  AttrType type;
  int n;                       /* element count for list types */
  union {
    int64_t i;                 /* INT, BOOL (0/1), DTYPE (a DType), BLOCK, I64 */
    double f;
    const char *s;
    int64_t *ints;             /* INTS, I64S */
    double *floats;
    const char **strings;
  } u;
} AttrValue;

typedef struct Attr {
  const char *name;
  AttrValue v;
} Attr;

/* A named slot holding a list of variable names. */
typedef struct Slot {
  const char *name;
  const char **args;
  int n, cap;
} Slot;

/* A call of a function, which lowering expands in place: the ops of the
 * function's body keep the call (and through outer the calls around it),
 * so that an error when they run points at the call the user wrote, as
 * lowering's own errors do ("in this call to 'f'"). */
typedef struct CallSite {
  Span at;                     /* the call */
  const char *fn;              /* the function called */
  const struct CallSite *outer;
} CallSite;

/* A slot's variable count and its i-th variable (NULL past the end), for a
 * slot that may be absent (NULL). */
static inline int slot_count(const Slot *s) { return s ? s->n : 0; }
static inline const char *slot_arg(const Slot *s, int i) { return s && i < s->n ? s->args[i] : NULL; }

typedef struct OpDesc {
  const char *type;
  Slot *in;  int nin, capin;
  Slot *out; int nout, capout;
  Attr *attrs; int nattrs, capattrs;   /* kept sorted by name */
  Span span;                   /* the source the op came from */
  const CallSite *call;        /* the function call it was expanded from, or NULL */
  int fwd_block, fwd_op;       /* for grad ops: the forward op (or -1) */
  /* An op that a rewrite put in place of others (rewrite.c): those ops,
   * in order, which the executor runs instead under --check-nan. */
  struct OpDesc **orig;
  int norig;
} OpDesc;

typedef struct Block {
  int idx, parent;
  VarDesc **vars; int nvars, capvars;  /* in declaration order */
  StrMap map;                          /* name -> its slot in vars, this block only */
  OpDesc **ops; int nops, capops;
  /* Sub-blocks only: a while body's arguments (the values carried into a
   * turn) and the results a turn or branch yields (see lower.c). */
  const char **args; int nargs, capargs;
  const char **results; int nresults, capresults;
  int fwd_block;                       /* for grad blocks: the forward block, else -1 */
} Block;

/* A user-visible name and the variable it is bound to at the end of the
 * top level (after rebinding): how --loss and --wrt find variables. */
typedef struct Export {
  const char *name;
  const char *var;
} Export;

/* A setting of a configuration block: `train { epochs = 5 }` gives
 * {block "train", key "epochs", value 5}.  A bare name is kept as a string
 * (is_name set): `loss = loss`, `optimizer = sgd`. */
typedef struct Setting {
  const char *block;
  const char *key;
  AttrValue value;
  bool is_name;
  Span span;
} Setting;

/* The phases of a training program (train_program): ranges of block 0's
 * ops the trainer runs apart.  Phase k starts at Program.phase[k] and ends
 * where phase k + 1 starts (the last, update, at the block's end); an
 * empty phase starts where the next does.  A rewrite may move an op across
 * a boundary only where its pattern says so (rewrite.c). */
typedef enum Phase { PHASE_FORWARD, PHASE_BACKWARD, PHASE_ALLREDUCE, PHASE_UPDATE, PHASE_COUNT } Phase;

typedef struct Program {
  Arena *arena;
  Diag *diag;
  Block **blocks; int nblocks, capblocks;
  Block *startup;            /* initializers of params and input defaults */
  Export *exports; int nexports, capexports;
  StrMap export_index;       /* name -> its index in exports */
  StrMap all;                /* every name in the program -> its index in allvars */
  VarDesc **allvars; int nallvars, capallvars;   /* every block's, in the order added */
  StrMap *versions;          /* base name -> the next version prog_fresh tries */
  struct Registry *user_ops; /* ops its scripts define (op ... grad); may be NULL */
  Setting *settings; int nsettings, capsettings;
  int nforward;              /* block 0's forward ops, once a backward is appended */
  int nbackward;             /* backwards appended so far */
  int nlevels;               /* gradient name levels (@L1, ...) handed out: to the
                                script's grad(...) calls, then to backwards after
                                the first */
  int next_temp;
  bool phased;               /* a training program: phase[] holds its phases */
  int phase[PHASE_COUNT];    /* each phase's first op in block 0 */
} Program;

Program *prog_new(Arena *arena, Diag *diag);
/* A phase's name: "forward", "backward", "allreduce", "update". */
const char *prog_phase_name(Phase k);
Block *prog_add_block(Program *p, int parent);
Block *prog_block(const Program *p, int idx);
/* Declares `name` in block b (which must not yet hold it anywhere in the
 * program); returns the new VarDesc with dtype/shape unknown. */
VarDesc *prog_add_var(Program *p, Block *b, const char *name);
/* Finds a variable visible from block b (b, then its ancestors). */
VarDesc *prog_find_var(const Program *p, const Block *b, const char *name);
/* Finds a variable anywhere in the program. */
VarDesc *prog_var(const Program *p, const char *name);
/* Every f32 variable and f32 dtype attribute of block b made f64 (--dtype
 * f64, and gradcheck's f64 copy of a tape); shapes are not inferred again. */
void prog_promote_f64(Block *b);
bool prog_name_used(const Program *p, const char *name);
/* A fresh name: `base` if unused, else "base.K" for the least unused K >= 1
 * (for a gradient name "x@GRAD", "x.K@GRAD"). */
const char *prog_fresh(Program *p, const char *base);
/* A fresh temporary "t.N". */
const char *prog_temp(Program *p);
const char *prog_export(const Program *p, const char *name);  /* var or NULL */
/* The variable of block 0 a name from outside the script (--wrt, --set,
 * feed =, :grad) stands for: the parameter or input the name declares,
 * even when the script rebinds the name later (after `w = w * 2`, `w` is
 * still the parameter that is trained, saved and differentiated); else the
 * value last bound to the name, or the variable of that name.  NULL if
 * none. */
const VarDesc *prog_named_var(const Program *p, const char *name);
/* The script's name nearest to `name` (a misspelling of it), for "did you
 * mean"; NULL if none is near. */
const char *prog_nearest_name(const Program *p, const char *name);
/* The name a user knows a variable by (h for h.2), or the variable's. */
const char *prog_user_name(const Program *p, const char *var);
void prog_set_export(Program *p, const char *name, const char *var);

/* A mark of how far a program was built, and the rollback to it: the REPL
 * undoes a statement that failed, and a backward appended only to be
 * printed.  Blocks, variables, ops, block args and results, exports and
 * settings added after the mark are dropped, and exports changed since are
 * restored (the memory stays in the arena).  Only growth is undone: a
 * description changed in place is not. */
typedef struct ProgMark {
  int nblocks;
  int *nvars, *nops, *nargs, *nresults;   /* per block at the mark; [nblocks]: startup */
  const char **export_vars;
  int nexports, nsettings, next_temp, nforward, nbackward, nlevels;
} ProgMark;
void prog_mark(const Program *p, ProgMark *m);
void prog_rollback(Program *p, const ProgMark *m);
void prog_mark_free(ProgMark *m);

OpDesc *op_new(Program *p, const char *type, Span span);
void op_append(Block *b, Program *p, OpDesc *op);
Slot *op_add_input(Program *p, OpDesc *op, const char *slot);
Slot *op_add_output(Program *p, OpDesc *op, const char *slot);
void slot_push(Program *p, Slot *s, const char *name);
Slot *op_input(const OpDesc *op, const char *slot);    /* NULL if absent */
Slot *op_output(const OpDesc *op, const char *slot);
/* First name of a slot, or NULL. */
const char *op_in1(const OpDesc *op, const char *slot);
const char *op_out1(const OpDesc *op, const char *slot);
/* Sets (or replaces) an attribute, keeping attrs sorted by name. */
void op_set_attr(Program *p, OpDesc *op, const char *name, AttrValue v);
const Attr *op_attr(const OpDesc *op, const char *name);
/* Two attribute values alike: the same type and contents. */
bool attr_value_equal(const AttrValue *a, const AttrValue *b);
/* An op's structure: its type, its slots (names, and how many values each
 * holds) and its attributes; everything but the variables it reads and
 * writes.  Ops of one structure compute the same function of their inputs
 * (the tape's backward prepares their gradient once). */
uint64_t op_struct_hash(const OpDesc *op);
bool op_struct_equal(const OpDesc *a, const OpDesc *b);
int64_t op_attr_i(const OpDesc *op, const char *name, int64_t dflt);
double op_attr_f(const OpDesc *op, const char *name, double dflt);
AttrValue attr_int(int64_t i);
AttrValue attr_float(double f);
AttrValue attr_bool(bool b);
AttrValue attr_dtype(DType t);
AttrValue attr_block(int idx);
/* The last setting of `key` in configuration block `block`, or NULL. */
const Setting *prog_setting(const Program *p, const char *block, const char *key);
AttrValue attr_string(Program *p, const char *s);
AttrValue attr_ints(Program *p, const int64_t *v, int n);
AttrValue attr_floats(Program *p, const double *v, int n);
/* A float attribute holding integer i (integers v[0..n)) exactly: an
 * ATTR_I64 (ATTR_I64S). */
AttrValue attr_i64(int64_t i);
AttrValue attr_i64s(Program *p, const int64_t *v, int n);
/* Whether double holds integer i exactly. */
bool i64_fits_double(int64_t i);
/* Formats an attribute value as the dump prints it. */
void attr_print(FILE *f, const AttrValue *v);

#endif
