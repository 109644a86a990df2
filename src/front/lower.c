/* lower.c — lowering: the AST of a script (and its imports) becomes a
 * program of blocks and op descriptions (program.h).
 *
 * Naming scheme.  Every variable name is unique in the whole program, so a
 * name means one value and rebinding can never corrupt a gradient:
 *   - the first binding of a script name keeps the name (`h`); each later
 *     binding gets the next free version `h.1`, `h.2`, ...;
 *   - names bound inside a function get the function's prefix (`dense.y`);
 *   - values with no name are temporaries `t.0`, `t.1`, ...;
 *   - `a = b` binds `a` to b's variable (no op), like Python.
 * Names written by the user never contain '.', so they never clash with
 * versions or temporaries.
 *
 * Control flow.  A `while` body becomes a block whose args are the carried
 * names (bound before the loop and assigned in it) and whose results are
 * their values after a turn plus the next condition; an `if` becomes a
 * conditional_block with a then block and an else block, whose results are
 * the names either branch assigns (see src/ops/control.c).
 *
 * Parameters' initializers and inputs' defaults lower into the program's
 * startup block, which the executor runs once before block 0.
 *
 * Layers (LANGUAGE.md section 10).  A param or state declared in a function
 * is a variable of block 0 named SCOPE.NAME: each call enters a parameter
 * scope (its scope = "..." keyword, else the function's name numbered per
 * enclosing scope: dense, dense_1 ...), nested under the caller's.  Calls
 * of one explicit scope share the variables (share_ok checks them).
 * Constants known when lowering (literals, dim(), integer + - * //, a
 * function's constant arguments) fold into literal nodes (fold_const),
 * which attributes and shapes read; used as values they become ops where
 * they are used.
 *
 * States (section 11).  A state's name binding remembers the state, so
 * rebinding the name records the variable the state keeps for the next
 * training step (VarDesc.next); train.c writes it back after the updates.
 */
#include "front/lower.h"

#include "autodiff/backward.h"

#include "ir/names.h"
#include "io/weights.h"

#include "ops/plugin.h"
#include "ir/registry.h"
#include "ir/tensor.h"

#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes ---------------------------------------------------------------- */

typedef enum BindKind {
  BIND_VAR,        /* a value: var */
  BIND_FUNC,       /* a def: def */
  BIND_CONST,      /* an attribute of a user op, in its body: value */
  BIND_LOCAL,      /* assigned only inside a body; reading it after is an error */
  BIND_FAILED,     /* assigned from an expression whose error is reported:
                      reading it says nothing more (no "unknown name") */
} BindKind;

typedef struct Binding {
  const char *name;
  BindKind kind;
  const char *var;
  const AstNode *def;
  AttrValue value;
  Span where;
  const char *why;      /* BIND_LOCAL: what to say */
  const AstNode *cval;  /* a constant's value, as a literal: BIND_CONST, a
                           function's constant argument (a value only where it
                           is used as one); BIND_VAR, a name bound to a numeric
                           constant (n = dim(x, 1)), whose var holds the same */
  VarDesc *state;       /* the script state this name stands for: rebinding the
                           name here sets what the state keeps (section 11) */
} Binding;

typedef struct Scope Scope;
struct Scope {
  Scope *parent;
  Binding *b;
  int n, cap;
  StrMap index;                        /* name -> its binding in b */
  bool fn_body;                        /* a function's own scope (not a loop's or branch's in it) */
};

struct Lowerer {
  Arena *arena;
  Diag *diag;
  Program *prog;
  Scope *global;
  Scope *scope;
  Scope *fn_parent;                    /* what function bodies see: the globals, or
                                          only the functions (startup, op bodies) */
  Block *block;
  const char *fn;                      /* innermost function expanded, or NULL */
  const AstNode *calls[64];            /* functions being expanded */
  const CallSite *site;                /* the innermost of their calls, or NULL */
  int ncalls;
  int depth;                           /* lower_expr calls active (function bodies included) */
  int64_t nops, max_ops;               /* ops made so far, and the limit (lower_set_max_ops) */
  bool too_large;                      /* max_ops was passed (reported once) */
  Scope *funcs;                        /* functions_scope(), until a global is bound */
  bool in_grad;                        /* lowering a grad { } body */
  const AstNode *opdef;                /* the op whose grad body that is */
  const char *stdlib_dir;
  const UserOpImpl *user_ops;          /* userop.c's, from lower_new */
  const char *script_dir;              /* the folder of the file lower_file lowers; NULL: "." */
  const char **loaded; int nloaded, caploaded;        /* realpaths */
  const char **importing; int nimporting, capimporting;
  const char **importing_names;
  int capimporting_names;
  const char *pscope;                  /* the scope of the params declared here
                                          ("block1.conv"), NULL at the top level */
  bool pscope_explicit;                /* some call on the way there named its scope */
  StrMap *ncalled;                     /* function -> its automatically named calls so
                                          far, in this scope */
  StrMap shared;                       /* scoped param or state -> its index in sharers */
  struct Sharer { Span call; bool explicit_scope; } *sharers;
  int nsharers, capsharers;
  Span bind_at;                        /* where the binding being made is written */
  LowerBindFn on_bind;                 /* lower_on_bind's watcher, or NULL */
  void *bind_ctx;
  int call_errors;                     /* errors said at the outermost call itself */
  AstKind declaring;                   /* AST_PARAM or AST_STATE: what lower_param declares */
  struct WFile { const char *path; WeightsToc toc; bool ok; } *wfiles;   /* weights("FILE") read */
  int nwfiles, capwfiles;
  Scope *decl_scope, *decl_fn_parent;  /* lowering a startup value: the scope and fn_parent
                                          of its declaration, whose values dim() may size */
};

static Scope *scope_new(Lowerer *L, Scope *parent) {
  Scope *s = arena_alloc(L->arena, sizeof *s);
  s->parent = parent;
  return s;
}

static Binding *scope_find_here(Scope *s, const char *name) {
  int i = strmap_get(&s->index, name);
  return i >= 0 ? &s->b[i] : NULL;
}

static Binding *scope_add(Lowerer *L, Scope *s, const char *name) {
  Binding *b = ARENA_PUSH(L->arena, s->b, s->n, s->cap);
  b->name = arena_strdup(L->arena, name);
  strmap_put(L->arena, &s->index, b->name, s->n - 1);
  return b;
}

static Binding *lookup(Lowerer *L, const char *name) {
  for (Scope *s = L->scope; s; s = s->parent) {
    Binding *b = scope_find_here(s, name);
    if (b) return b;
  }
  return NULL;
}

static Binding *bind(Lowerer *L, Scope *s, const char *name, BindKind kind) {
  if (s == L->global) L->funcs = NULL;
  Binding *b = scope_find_here(s, name);
  if (!b) b = scope_add(L, s, name);
  const char *keep = b->name;
  memset(b, 0, sizeof *b);
  b->name = keep;
  b->kind = kind;
  return b;
}

/* A scope holding only the global functions: what startup values and op
 * bodies may see besides their own names. */
static Scope *functions_scope(Lowerer *L) {
  if (L->funcs) return L->funcs;
  Scope *s = scope_new(L, NULL);
  for (int i = 0; i < L->global->n; i++)
    if (L->global->b[i].kind == BIND_FUNC) *scope_add(L, s, L->global->b[i].name) = L->global->b[i];
  return L->funcs = s;
}

static const char *kept_copy(Lowerer *L, const char *name, const char *var);

/* Binds name to var here.  Rebinding, in the same scope, a name that
 * stands for a script state makes var the value the state keeps for the
 * next training step (the last such binding wins). */
static void bind_var(Lowerer *L, const char *name, const char *var) {
  Binding *old = scope_find_here(L->scope, name);
  VarDesc *state = old && old->kind == BIND_VAR ? old->state : NULL;
  if (state && strcmp(var, state->name) != 0) var = kept_copy(L, name, var);
  Binding *b = bind(L, L->scope, name, BIND_VAR);
  b->var = var;
  b->state = state;
  if (L->on_bind) L->on_bind(L->bind_ctx, name, var, L->bind_at);
  if (state) {
    state->next = strcmp(var, state->name) == 0 ? NULL : var;
    state->next_at = L->bind_at;
  }
}

/* The base name a binding of `name` gets here (function locals are
 * prefixed with the function's name). */
static const char *qualify(Lowerer *L, const char *name) {
  return L->fn ? arena_printf(L->arena, "%s.%s", L->fn, name) : name;
}

/* ---- building ops -------------------------------------------------------- */

static OpDesc *new_op(Lowerer *L, const char *type, Span span) {
  L->nops++;
  OpDesc *op = op_new(L->prog, type, span);
  op->call = L->site;
  return op;
}

/* A program may hold at most max_ops ops, checked before each statement
 * and each function call: calls expand inline, so a program can grow
 * exponentially in the size of its script (f0 calls f1 twice, which calls
 * f2 twice ...), and a long script grows it line by line.  Past the limit,
 * lowering stops with one error instead of eating memory; like the memory
 * limit, it makes netrun exit with status 3. */
static bool program_fits(Lowerer *L, Span at) {
  if (L->nops <= L->max_ops) return true;
  if (!L->too_large) {
    L->too_large = true;
    mem_limit_reached();
    diag_error(L->diag, at, "the program is too large: more than %lld ops%s", (long long)L->max_ops,
               L->ncalls ? " (each call of a function adds its ops again)" : "");
  }
  return false;
}

static void add_in(Lowerer *L, OpDesc *op, const char *slot, const char *var) {
  slot_push(L->prog, op_add_input(L->prog, op, slot), var);
}

/* Declares a new output variable of op: named after hint (a base name) or
 * a temporary. */
static const char *add_out(Lowerer *L, OpDesc *op, const char *slot, const char *hint) {
  const char *name = hint ? prog_fresh(L->prog, hint) : prog_temp(L->prog);
  VarDesc *v = prog_add_var(L->prog, L->block, name);
  v->span = op->span;
  if (hint) {
    const char *dot = strrchr(hint, '.');
    v->user_name = dot ? dot + 1 : hint;
  }
  slot_push(L->prog, op_add_output(L->prog, op, slot), v->name);
  return v->name;
}

/* Appends op to the current block and infers its outputs.  A failed
 * inference leaves the outputs' dtype unknown, which keeps later ops quiet. */
static void finish_op(Lowerer *L, OpDesc *op) {
  op_append(L->block, L->prog, op);
  reg_infer(L->prog, L->block, op);
  if (strcmp(op->type, "stop_gradient") == 0) {
    VarDesc *v = prog_var(L->prog, op_out1(op, "Out"));
    if (v) v->flags |= VAR_STOP_GRADIENT;
  }
}


/* The variable a state's name is rebound to, as the state will keep it:
 * a parameter or a state is updated in place after the forward pass, so
 * the value it has here is copied (ema = W keeps the W the step read). */
static const char *kept_copy(Lowerer *L, const char *name, const char *var) {
  const VarDesc *v = prog_var(L->prog, var);
  if (!v || !(v->flags & (VAR_PARAM | VAR_KEPT))) return var;
  OpDesc *op = new_op(L, "assign", L->bind_at);
  add_in(L, op, "X", var);
  const char *out = add_out(L, op, "Out", qualify(L, name));
  finish_op(L, op);
  return out;
}

/* An op with one input X (may be NULL) and one output Out. */
static const char *emit1(Lowerer *L, const char *type, Span span, const char *x,
                         const char *hint) {
  OpDesc *op = new_op(L, type, span);
  if (x) add_in(L, op, "X", x);
  const char *out = add_out(L, op, "Out", hint);
  reg_fill_defaults(L->prog, op, reg_find_op(L->prog, type));
  finish_op(L, op);
  return out;
}

static const char *emit2(Lowerer *L, const char *type, Span span, const char *x,
                         const char *y, const char *hint) {
  OpDesc *op = new_op(L, type, span);
  add_in(L, op, "X", x);
  add_in(L, op, "Y", y);
  const char *out = add_out(L, op, "Out", hint);
  reg_fill_defaults(L->prog, op, reg_find_op(L->prog, type));
  finish_op(L, op);
  return out;
}

/* A scalar constant: fill_constant(shape=[], value, dtype).  value is a
 * float attribute; an i64 constant's (attr_i64) keeps its integer exact. */
static const char *emit_scalar(Lowerer *L, Span span, AttrValue value, DType dt, const char *hint) {
  OpDesc *op = new_op(L, "fill_constant", span);
  const char *out = add_out(L, op, "Out", hint);
  op_set_attr(L->prog, op, "shape", attr_ints(L->prog, NULL, 0));
  op_set_attr(L->prog, op, "value", value);
  op_set_attr(L->prog, op, "dtype", attr_dtype(dt));
  finish_op(L, op);
  return out;
}

/* A float literal beside an f64 operand is f64, as NumPy's Python floats
 * are: x * 0.1 multiplies by the double nearest 0.1, not the float.  e is
 * the literal's syntax, lit the variable its fill_constant made (the last
 * op of the block writing it), other the operand beside it. */
static void widen_literal(Lowerer *L, const AstNode *e, const char *lit, const char *other) {
  bool neg = e->kind == AST_UNARY && e->op == '-' && e->a;
  if ((neg ? e->a : e)->kind != AST_FLOAT) return;
  VarDesc *v = prog_var(L->prog, lit);
  const VarDesc *o = prog_var(L->prog, other);
  if (!v || !o || o->dtype != DT_F64 || v->dtype != DT_F32) return;
  for (int i = L->block->nops - 1; i >= 0; i--) {
    OpDesc *op = L->block->ops[i];
    const Slot *out = op_output(op, "Out");
    if (!out || out->n != 1 || strcmp(out->args[0], lit) != 0) continue;
    if (strcmp(op->type, "fill_constant") == 0) {
      op_set_attr(L->prog, op, "dtype", attr_dtype(DT_F64));
      v->dtype = DT_F64;
    }
    return;
  }
}

/* ---- constants (attribute values) ------------------------------------------ */

static const AstNode *resolved(Lowerer *L, const AstNode *n);

/* What a constant expression is, for messages. */
static const char *const_kind(const AstNode *n) {
  switch (n->kind) {
  case AST_INT: return "an int";
  case AST_FLOAT: return "a float";
  case AST_BOOL: return "a bool";
  case AST_STRING: return "a string";
  case AST_LIST: return "a list";
  case AST_UNARY:
    if (n->op == '-' && n->a && (n->a->kind == AST_INT || n->a->kind == AST_FLOAT))
      return const_kind(n->a);
    return "an expression";
  case AST_NAME: return "a name";
  default: return "an expression";
  }
}

/* Reads a numeric literal, folding unary minus.  *is_int tells which. */
static bool const_number(Lowerer *L, const AstNode *n, double *f, int64_t *i, bool *is_int) {
  if (n->kind == AST_NAME) {
    const Binding *cb = lookup(L, n->name);
    if (cb && cb->cval) n = cb->cval;   /* a function's constant argument */
  }
  if (n->kind == AST_INT) {
    *i = n->ival, *f = (double)n->ival, *is_int = true;
    return true;
  }
  if (n->kind == AST_FLOAT) {
    *f = n->fval, *is_int = false;
    return true;
  }
  if (n->kind == AST_UNARY && n->op == '-' && const_number(L, n->a, f, i, is_int)) {
    *f = -*f;
    if (*is_int) {
      if (*i == INT64_MIN) return false;
      *i = -*i;
    }
    return true;
  }
  if (n->kind == AST_NAME) {
    Binding *b = lookup(L, n->name);
    if (b && b->kind == BIND_CONST) {
      if (b->value.type == ATTR_INT || b->value.type == ATTR_BOOL) {
        *i = b->value.u.i, *f = (double)b->value.u.i, *is_int = true;
        return true;
      }
      if (b->value.type == ATTR_FLOAT) {
        *f = b->value.u.f, *is_int = false;
        return true;
      }
      if (b->value.type == ATTR_I64) {   /* a float attribute's exact integer */
        *i = b->value.u.i, *f = (double)b->value.u.i, *is_int = false;
        return true;
      }
    }
  }
  return false;
}

/* Evaluates a constant expression as an attribute of type t.  On failure
 * fills *msg with what was wrong ("an int list", "a string") and returns
 * false.  A scalar where a list is wanted becomes a list of one. */
static bool const_eval(Lowerer *L, const AstNode *n, AttrType t, AttrValue *out, const char **got) {
  double f;
  int64_t i;
  bool is_int;
  int before = L->diag->nerrors;
  n = resolved(L, n);
  *got = const_kind(n);
  if (L->diag->nerrors != before) return false;   /* said: dim() of a symbolic dimension */
  memset(out, 0, sizeof *out);
  out->type = t;
  switch (t) {
  case ATTR_INT:
    if (!const_number(L, n, &f, &i, &is_int) || !is_int) return false;
    out->u.i = i;
    return true;
  case ATTR_FLOAT:
    if (!const_number(L, n, &f, &i, &is_int)) return false;
    if (is_int && !i64_fits_double(i)) *out = attr_i64(i);   /* exact past 2^53 */
    else out->u.f = f;
    return true;
  case ATTR_BOOL:
    if (n->kind != AST_BOOL) return false;
    out->u.i = n->ival;
    return true;
  case ATTR_STRING:
    if (n->kind != AST_STRING) return false;
    out->u.s = arena_strdup(L->arena, n->name);
    return true;
  case ATTR_DTYPE: {
    DType dt;
    if ((n->kind == AST_NAME || n->kind == AST_STRING) && dtype_parse(n->name, &dt)) {
      out->u.i = dt;
      return true;
    }
    if (n->kind == AST_NAME || n->kind == AST_STRING) *got = "an unknown dtype (expected f32, i64 or bool)";
    return false;
  }
  case ATTR_INTS:
  case ATTR_FLOATS:
  case ATTR_STRINGS: {
    AttrType et = t == ATTR_INTS ? ATTR_INT : t == ATTR_FLOATS ? ATTR_FLOAT : ATTR_STRING;
    const AstNode *const *items = (const AstNode *const *)&n;
    int count = 1;
    if (n->kind == AST_LIST) items = (const AstNode *const *)n->list.items, count = n->list.n;
    out->n = count;
    if (t == ATTR_INTS) out->u.ints = arena_alloc(L->arena, sizeof(int64_t) * (size_t)(count + 1));
    else if (t == ATTR_FLOATS) out->u.floats = arena_alloc(L->arena, sizeof(double) * (size_t)(count + 1));
    else out->u.strings = arena_alloc(L->arena, sizeof(char *) * (size_t)(count + 1));
    for (int k = 0; k < count; k++) {
      AttrValue e;
      if (!const_eval(L, items[k], et, &e, got)) {
        if (n->kind == AST_LIST) *got = arena_printf(L->arena, "a list holding %s", *got);
        return false;
      }
      if (t == ATTR_INTS) out->u.ints[k] = e.u.i;
      else if (t == ATTR_FLOATS) out->u.floats[k] = e.type == ATTR_I64 ? (double)e.u.i : e.u.f;
      else out->u.strings[k] = e.u.s;
    }
    return true;
  }
  case ATTR_BLOCK:
  case ATTR_I64:    /* forms of a float attribute, never declared */
  case ATTR_I64S:
    return false;
  }
  return false;
}

/* Is n a constant that could only be an attribute (not a value)? */
static bool is_constant(const AstNode *n) {
  switch (n->kind) {
  case AST_INT: case AST_FLOAT: case AST_BOOL: case AST_STRING: return true;
  case AST_UNARY: return n->op == '-' && is_constant(n->a);
  case AST_LIST:
    for (int i = 0; i < n->list.n; i++)
      if (!is_constant(n->list.items[i])) return false;
    return true;
  default: return false;
  }
}

/* ---- expressions --------------------------------------------------------- */

static const char *lower_expr(Lowerer *L, const AstNode *n, const char *hint);

/* ---- constants known when lowering (section 10) ---------------------------- */

/* A literal node for a folded constant, spanning the expression it came from. */
static AstNode *const_node(Lowerer *L, AstKind kind, Span span) {
  AstNode *n = ast_new(L->arena, kind, span);
  n->opspan = span;
  return n;
}

static AstNode *const_int(Lowerer *L, int64_t v, Span span) {
  AstNode *n = const_node(L, AST_INT, span);
  n->ival = v;
  return n;
}

static const AstNode *fold_const(Lowerer *L, const AstNode *n);

/* dim(x, AXIS): the size of dimension AXIS of x (negative: from the end),
 * which must be known when lowering.  Errors are said here; false then. */
static bool eval_dim(Lowerer *L, const AstNode *n, int64_t *out) {
  if (n->list.n != 2 || n->list2.n) {
    diag_error(L->diag, n->opspan, "dim(x, AXIS) takes 2 arguments, got %d", n->list.n + n->list2.n);
    return false;
  }
  int before = L->diag->nerrors;
  const AstNode *axis = fold_const(L, n->list.items[1]);
  if (!axis || axis->kind != AST_INT) {
    if (L->diag->nerrors == before)
      diag_error(L->diag, n->list.items[1]->span, "the axis of dim() must be an integer constant, got %s",
                 const_kind(axis ? axis : n->list.items[1]));
    return false;
  }
  /* In a startup value, dim(x, AXIS) of a value the declaration sees (a
   * function's argument) is a constant too (LANGUAGE.md section 10): only
   * its shape is read, from the declaration's scope. */
  const AstNode *xe = n->list.items[0];
  Scope *scope = L->scope, *fn_parent = L->fn_parent;
  if (L->decl_scope && xe->kind == AST_NAME && !lookup(L, xe->name))
    L->scope = L->decl_scope, L->fn_parent = L->decl_fn_parent;
  const char *x = lower_expr(L, xe, NULL);
  L->scope = scope, L->fn_parent = fn_parent;
  if (!x) return false;
  const VarDesc *v = prog_var(L->prog, x);
  char buf[128];
  if (v->shape.rank < 0) {
    diag_error(L->diag, n->opspan, "dim(): the shape of this value is not known when lowering");
    return false;
  }
  int64_t a = axis->ival, r = v->shape.rank;
  if (a < -r || a >= r) {
    diag_error(L->diag, axis->span, "dim(): axis %lld is out of range for a value of shape %s (rank %lld)",
               (long long)a, shape_str(&v->shape, buf, sizeof buf), (long long)r);
    return false;
  }
  Dim d = v->shape.d[a < 0 ? a + r : a];
  if (d.sym || d.n < 0) {
    /* In a function, the value comes from the call the user wrote (the
     * outermost): the error is there, with a note at this dim(). */
    const CallSite *outer = L->site;
    while (outer && outer->outer) outer = outer->outer;
    Span at = outer ? outer->at : n->opspan;
    L->call_errors += outer != NULL;
    if (d.sym)
      diag_error(L->diag, at, "dim(): dimension %lld of %s is '%s', which is known only when data is fed; "
                 "a size needed when lowering must be a number", (long long)a, shape_str(&v->shape, buf, sizeof buf),
                 d.sym);
    else
      diag_error(L->diag, at, "dim(): dimension %lld of %s is not known when lowering", (long long)a,
                 shape_str(&v->shape, buf, sizeof buf));
    if (outer) diag_note(L->diag, n->opspan, "dim() is called here, in function '%s'", L->site->fn);
    return false;
  }
  *out = d.n;
  return true;
}

/* Integer a OP b, for OP one of + - * // (floor division, as Python's). */
static bool fold_int_op(Lowerer *L, const AstNode *n, int64_t a, int64_t b, int64_t *out) {
  bool over = false;
  switch (n->op) {
  case '+': over = __builtin_add_overflow(a, b, out); break;
  case '-': over = __builtin_sub_overflow(a, b, out); break;
  case '*': over = __builtin_mul_overflow(a, b, out); break;
  default:
    if (b == 0) {
      diag_error(L->diag, n->opspan, "integer division by zero");
      return false;
    }
    if (a == INT64_MIN && b == -1) over = true;
    else *out = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
    break;
  }
  if (over) diag_error(L->diag, n->opspan, "integer overflow: the result is past the range of i64");
  return !over;
}

/* n as a literal when it is a constant known when lowering: a number, a
 * string, a bool, a list of them, a function's constant argument, an
 * op body's attribute, dim(x, AXIS), or integer + - * // of constants.
 * NULL when it is not (or on an error, which is said). */
static const AstNode *fold_const(Lowerer *L, const AstNode *n) {
  switch (n->kind) {
  case AST_INT: case AST_FLOAT: case AST_BOOL: case AST_STRING: return n;
  case AST_NAME: {
    const Binding *b = lookup(L, n->name);
    if (!b) return NULL;
    if (b->cval) return b->cval;
    if (b->kind != BIND_CONST) return NULL;
    const AttrValue *v = &b->value;
    AstNode *c = NULL;
    if (v->type == ATTR_INT) c = const_int(L, v->u.i, n->span);
    else if (v->type == ATTR_BOOL) (c = const_node(L, AST_BOOL, n->span))->ival = v->u.i;
    else if (v->type == ATTR_FLOAT) (c = const_node(L, AST_FLOAT, n->span))->fval = v->u.f;
    else if (v->type == ATTR_STRING) (c = const_node(L, AST_STRING, n->span))->name = v->u.s;
    return c;
  }
  case AST_UNARY: {
    const AstNode *a = n->op == '-' ? fold_const(L, n->a) : NULL;
    if (!a || (a->kind != AST_INT && a->kind != AST_FLOAT)) return NULL;
    if (a->kind == AST_INT && a->ival == INT64_MIN) return NULL;
    AstNode *c = const_node(L, a->kind, n->span);
    c->ival = -a->ival, c->fval = -a->fval;
    return c;
  }
  case AST_BINARY: {
    if (n->op != '+' && n->op != '-' && n->op != '*' && n->op != AST_OP_IDIV) return NULL;
    const AstNode *a = fold_const(L, n->a), *b = a ? fold_const(L, n->b) : NULL;
    int64_t v;
    if (!b || a->kind != AST_INT || b->kind != AST_INT || !fold_int_op(L, n, a->ival, b->ival, &v)) return NULL;
    return const_int(L, v, n->span);
  }
  case AST_LIST: {
    AstNode *c = const_node(L, AST_LIST, n->span);
    for (int i = 0; i < n->list.n; i++) {
      const AstNode *e = fold_const(L, n->list.items[i]);
      if (!e) return NULL;
      ast_push(L->arena, &c->list, (AstNode *)e);
    }
    return c;
  }
  case AST_CALL: {
    const Binding *b = lookup(L, n->name);
    int64_t v;
    if (strcmp(n->name, "dim") != 0 || (b && b->kind == BIND_FUNC) || !eval_dim(L, n, &v)) return NULL;
    return const_int(L, v, n->span);
  }
  default: return NULL;
  }
}

static bool const_has_string(const AstNode *c) {
  bool text = c->kind == AST_STRING;
  for (int k = 0; c->kind == AST_LIST && k < c->list.n && !text; k++) text = const_has_string(c->list.items[k]);
  return text;
}

/* n, or its value when it is a constant known when lowering (a function's
 * constant argument, dim(), integer arithmetic): what attributes read.  An
 * op body's attribute names are read by const_number itself. */
static const AstNode *resolved(Lowerer *L, const AstNode *n) {
  if (n->kind == AST_INT || n->kind == AST_FLOAT || n->kind == AST_STRING || n->kind == AST_BOOL) return n;
  if (n->kind == AST_NAME) {
    const Binding *b = lookup(L, n->name);
    return b && b->cval ? b->cval : n;
  }
  const AstNode *f = fold_const(L, n);
  return f ? f : n;
}

static int lower_call(Lowerer *L, const AstNode *n, const char *const *hints, int nwant,
                      const char **outs);
static bool lower_stmts(Lowerer *L, const AstList *stmts, bool top);

static const char *binary_op_type(int op) {
  switch (op) {
  case '+': return "add";
  case '-': return "sub";
  case '*': return "mul";
  case '/': return "div";
  case '@': return "matmul";
  case AST_OP_POW: return "pow";
  case '<': return "less_than";
  case '>': return "greater_than";
  case AST_OP_LE: return "less_equal";
  case AST_OP_GE: return "greater_equal";
  case AST_OP_EQ: return "equal";
  case AST_OP_NE: return "not_equal";
  case AST_OP_AND: return "logical_and";
  case AST_OP_OR: return "logical_or";
  default: return NULL;
  }
}

/* Names visible from here, for "did you mean" suggestions. */
static const char *suggest_name(Lowerer *L, const char *name, bool funcs) {
  const char **cands = NULL;
  int n = 0, cap = 0;
  for (Scope *s = L->scope; s; s = s->parent)
    for (int i = 0; i < s->n; i++)
      if (funcs == (s->b[i].kind == BIND_FUNC) || (!funcs && s->b[i].kind == BIND_CONST)) {
        VEC_RESERVE(cands, cap, n + 1);
        cands[n++] = s->b[i].name;
      }
  if (funcs) {
    /* Only ops a script may call: an internal op (share, sgd_matmul) is
     * refused when called, so suggesting one would mislead. */
    const Registry *regs[2] = {reg_default(), L->prog->user_ops};
    for (int r = 0; r < 2 && regs[r]; r++) {
      int nops;
      const OpProto *const *ops = reg_all(regs[r], &nops);
      VEC_RESERVE(cands, cap, n + nops);
      n += reg_callable_names(ops, nops, cands + n);
    }
  }
  const char *best = diag_nearest(name, (const char *const *)cands, n);
  mem_free(cands);
  return best;
}

static const char *lower_name(Lowerer *L, const AstNode *n, const char *hint) {
  Binding *b = lookup(L, n->name);
  Binding *g = b ? NULL : scope_find_here(L->global, n->name);
  if (g && g->kind == BIND_VAR && L->fn_parent != L->global) {
    if (L->block == L->prog->startup)
      diag_error(L->diag, n->span, "a default or initializer can use only constants and ops, not the value '%s'",
                 n->name);
    else
      diag_error(L->diag, n->span, "an op body can read only the op's inputs and attributes, not '%s'", n->name);
    return NULL;
  }
  if (!b) {
    const char *near = suggest_name(L, n->name, false);
    if (near) diag_error(L->diag, n->span, "unknown name '%s' (did you mean '%s'?)", n->name, near);
    else diag_error(L->diag, n->span, "unknown name '%s'", n->name);
    return NULL;
  }
  switch (b->kind) {
  case BIND_FAILED: return NULL;
  case BIND_VAR:
    if (!prog_var(L->prog, b->var)) {
      /* A script value seen from an op body, which is lowered on its own. */
      diag_error(L->diag, n->span, "an op body can read only the op's inputs and attributes, not '%s'",
                 n->name);
      return NULL;
    }
    return b->var;
  case BIND_FUNC:
    diag_error(L->diag, n->span, "'%s' is a function; call it with arguments", n->name);
    return NULL;
  case BIND_LOCAL:
    diag_error(L->diag, n->span, "'%s' %s", n->name, b->why);
    diag_note(L->diag, b->where, "'%s' is assigned here", n->name);
    return NULL;
  case BIND_CONST: {
    if (b->cval && !const_has_string(b->cval)) {
      /* the value is made where the body uses it: its op (and a runtime
       * error in it) points there, not at the call's argument */
      AstNode here = *b->cval;
      here.span = n->span;
      return lower_expr(L, &here, hint);
    }
    if (b->cval) {
      diag_error(L->diag, n->span, "'%s' is a string, which can only be an attribute, not a value", n->name);
      return NULL;
    }
    AttrValue v = b->value;
    if (v.type == ATTR_FLOAT || v.type == ATTR_I64) return emit_scalar(L, n->span, v, DT_F32, hint);
    if (v.type == ATTR_INT) return emit_scalar(L, n->span, attr_i64(v.u.i), DT_I64, hint);
    if (v.type == ATTR_BOOL) return emit_scalar(L, n->span, attr_float((double)v.u.i), DT_BOOL, hint);
    diag_error(L->diag, n->span, "attribute '%s' is not a number and cannot be used as a value", n->name);
    return NULL;
  }
  }
  return NULL;
}

/* [1, 2], [[1.0, 2.0], [3.0, 4.0]]: an assign_value op.  Nested lists must
 * be rectangular; any float makes the tensor f32, else i64 (bools: bool). */
typedef struct Literal {
  double *vals;     /* every element as a double */
  int64_t *ints;    /* and as an exact integer (the integers' own values) */
  int n, cap;
  int kinds;        /* 1: ints seen, 2: floats, 4: bools */
} Literal;

static bool flatten_literal(Lowerer *L, const AstNode *n, int depth, int *leaf_depth, Shape *shape,
                            Literal *lit) {
  if (n->kind == AST_LIST) {
    if (depth >= SHAPE_MAX_RANK) {
      diag_error(L->diag, n->span, "tensor literal has more than %d dimensions", SHAPE_MAX_RANK);
      return false;
    }
    if (*leaf_depth >= 0 && depth >= *leaf_depth) {
      diag_error(L->diag, n->span, "tensor literal is not rectangular: expected a number here");
      return false;
    }
    if (shape->rank <= depth) {
      shape->rank = depth + 1;
      shape->d[depth] = dim_n(n->list.n);
    } else if (shape->d[depth].n != n->list.n) {
      diag_error(L->diag, n->span, "tensor literal is not rectangular: %d element%s here, %lld before",
                 n->list.n, n->list.n == 1 ? "" : "s", (long long)shape->d[depth].n);
      return false;
    }
    for (int i = 0; i < n->list.n; i++)
      if (!flatten_literal(L, n->list.items[i], depth + 1, leaf_depth, shape, lit))
        return false;
    return true;
  }
  if ((*leaf_depth >= 0 && depth != *leaf_depth) || shape->rank > depth) {
    diag_error(L->diag, n->span, "tensor literal is not rectangular: expected a list here");
    return false;
  }
  *leaf_depth = depth;
  double f;
  int64_t i = 0;
  bool is_int;
  if (n->kind == AST_BOOL) {
    f = (double)n->ival;
    lit->kinds |= 4;
  } else if (const_number(L, n, &f, &i, &is_int)) {
    lit->kinds |= is_int ? 1 : 2;
  } else {
    diag_error(L->diag, n->span, "tensor literals hold numbers only; use concat for computed values");
    return false;
  }
  int cap = lit->cap;
  VEC_RESERVE(lit->vals, cap, lit->n + 1);
  VEC_RESERVE(lit->ints, lit->cap, lit->n + 1);
  lit->vals[lit->n] = f;
  lit->ints[lit->n++] = i;
  return true;
}

/* want: the dtype the context asks for (a declaration's), or DT_UNKNOWN to
 * take it from the literal. */
static const char *lower_literal(Lowerer *L, const AstNode *n, const char *hint, DType want) {
  Shape shape = shape_scalar();
  Literal lit = {0};
  int leaf_depth = -1, kinds;
  const char *out = NULL;
  if (flatten_literal(L, n, 0, &leaf_depth, &shape, &lit)) {
    kinds = lit.kinds;
    if ((kinds & 4) && (kinds & 3)) {
      diag_error(L->diag, n->span, "tensor literal mixes bools and numbers");
    } else {
      DType dt = kinds & 4 ? DT_BOOL : kinds & 2 ? DT_F32 : kinds & 1 ? DT_I64 : DT_F32;
      if (want != DT_UNKNOWN && !(kinds & 4) == (want != DT_BOOL) && !(dt == DT_F32 && want == DT_I64))
        dt = want;
      OpDesc *op = new_op(L, "assign_value", n->span);
      out = add_out(L, op, "Out", hint);
      int64_t dims[SHAPE_MAX_RANK];
      for (int i = 0; i < shape.rank; i++) dims[i] = shape.d[i].n;
      op_set_attr(L->prog, op, "shape", attr_ints(L->prog, dims, shape.rank));
      op_set_attr(L->prog, op, "dtype", attr_dtype(dt));
      /* An i64 tensor holds only integers: exact past 2^53. */
      op_set_attr(L->prog, op, "values",
                  dt == DT_I64 ? attr_i64s(L->prog, lit.ints, lit.n) : attr_floats(L->prog, lit.vals, lit.n));
      finish_op(L, op);
    }
  }
  mem_free(lit.vals);
  mem_free(lit.ints);
  return out;
}

/* x[i], x[a:b], x[:, 0]: constant subscripts become a slice (then a squeeze
 * of the integer-indexed axes); a tensor index becomes a gather. */
static const char *lower_index(Lowerer *L, const AstNode *n, const char *hint) {
  const char *base = lower_expr(L, n->a, NULL);
  if (!base) return NULL;
  if (n->list.n == 1 && n->list.items[0]->kind != AST_SLICE && !is_constant(n->list.items[0])) {
    const char *idx = lower_expr(L, n->list.items[0], NULL);
    if (!idx) return NULL;
    OpDesc *op = new_op(L, "gather", n->opspan);
    add_in(L, op, "X", base);
    add_in(L, op, "Index", idx);
    const char *out = add_out(L, op, "Out", hint);
    reg_fill_defaults(L->prog, op, reg_find_op(L->prog, "gather"));
    finish_op(L, op);
    return out;
  }
  if (n->list.n > SHAPE_MAX_RANK) {
    diag_error(L->diag, n->opspan, "too many subscripts (%d)", n->list.n);
    return NULL;
  }
  int64_t axes[SHAPE_MAX_RANK], starts[SHAPE_MAX_RANK], ends[SHAPE_MAX_RANK], drop[SHAPE_MAX_RANK];
  int na = 0, nd = 0;
  for (int k = 0; k < n->list.n; k++) {
    const AstNode *s = n->list.items[k];
    AttrValue v;
    const char *got;
    if (s->kind == AST_SLICE) {
      if (s->c) {
        AttrValue step;
        if (!const_eval(L, s->c, ATTR_INT, &step, &got) || step.u.i != 1) {
          diag_error(L->diag, s->c->span, "slice steps other than 1 are not supported");
          return NULL;
        }
      }
      int64_t lo = 0, hi = INT64_MAX;
      if (s->a) {
        if (!const_eval(L, s->a, ATTR_INT, &v, &got)) goto not_const;
        lo = v.u.i;
      }
      if (s->b) {
        if (!const_eval(L, s->b, ATTR_INT, &v, &got)) goto not_const;
        hi = v.u.i;
      }
      if (lo == 0 && hi == INT64_MAX) continue;   /* ':' keeps the axis whole */
      axes[na] = k, starts[na] = lo, ends[na] = hi, na++;
      continue;
    not_const:
      diag_error(L->diag, s->span, "slice bounds must be integer constants");
      return NULL;
    }
    if (!const_eval(L, s, ATTR_INT, &v, &got)) {
      diag_error(L->diag, s->span, "an index with several subscripts must be integer constants or slices");
      return NULL;
    }
    const VarDesc *bv = prog_var(L->prog, base);
    if (bv && k < bv->shape.rank && bv->shape.d[k].n >= 0 &&
        (v.u.i >= bv->shape.d[k].n || v.u.i < -bv->shape.d[k].n)) {
      diag_error(L->diag, s->span, "index %lld is out of range for axis %d of size %lld", (long long)v.u.i, k,
                 (long long)bv->shape.d[k].n);
      return NULL;
    }
    axes[na] = k, starts[na] = v.u.i;
    ends[na] = v.u.i == -1 ? INT64_MAX : v.u.i + 1;
    na++;
    drop[nd++] = k;
  }
  const char *cur = base;
  if (na) {
    OpDesc *op = new_op(L, "slice", n->opspan);
    add_in(L, op, "X", cur);
    cur = add_out(L, op, "Out", nd ? NULL : hint);
    op_set_attr(L->prog, op, "axes", attr_ints(L->prog, axes, na));
    op_set_attr(L->prog, op, "starts", attr_ints(L->prog, starts, na));
    op_set_attr(L->prog, op, "ends", attr_ints(L->prog, ends, na));
    finish_op(L, op);
  }
  if (nd) {
    OpDesc *op = new_op(L, "squeeze", n->opspan);
    add_in(L, op, "X", cur);
    cur = add_out(L, op, "Out", hint);
    op_set_attr(L->prog, op, "axes", attr_ints(L->prog, drop, nd));
    finish_op(L, op);
  }
  return cur;
}

static const char *lower_expr_at(Lowerer *L, const AstNode *n, const char *hint);

/* The parser bounds one tree's depth, but a function's body is lowered
 * inside the expression that calls it, so the recursion is bounded here
 * across calls too. */
static const char *lower_expr(Lowerer *L, const AstNode *n, const char *hint) {
  if (L->depth >= LOWER_MAX_DEPTH) {
    diag_error(L->diag, n->span, "expression nested too deeply (more than %d levels, counting the bodies of "
               "the functions it calls)", LOWER_MAX_DEPTH);
    return NULL;
  }
  L->depth++;
  const char *v = lower_expr_at(L, n, hint);
  L->depth--;
  return v;
}

static const char *lower_expr_at(Lowerer *L, const AstNode *n, const char *hint) {
  switch (n->kind) {
  case AST_NAME:
    return lower_name(L, n, hint);
  case AST_GRADNAME: {
    if (!L->in_grad) {
      diag_error(L->diag, n->span, "'%s@GRAD' is only allowed inside a grad { } block", n->name);
      return NULL;
    }
    Binding *b = lookup(L, name_grad(L->arena, n->name));
    if (!b || b->kind != BIND_VAR) {
      diag_error(L->diag, n->span, "'%s@GRAD' is not known here: a grad body reads the gradients of the op's outputs",
                 n->name);
      return NULL;
    }
    return b->var;
  }
  case AST_INT:
    return emit_scalar(L, n->span, attr_i64(n->ival), DT_I64, hint);
  case AST_FLOAT:
    return emit_scalar(L, n->span, attr_float(n->fval), DT_F32, hint);
  case AST_BOOL:
    return emit_scalar(L, n->span, attr_float((double)n->ival), DT_BOOL, hint);
  case AST_STRING:
    diag_error(L->diag, n->span, "a string is not a value; strings can only be attributes");
    return NULL;
  case AST_LIST:
    return lower_literal(L, n, hint, DT_UNKNOWN);
  case AST_UNARY: {
    double f;
    int64_t i;
    bool is_int;
    if (n->op == '-' && const_number(L, n, &f, &i, &is_int))
      return emit_scalar(L, n->span, is_int ? attr_i64(i) : attr_float(f), is_int ? DT_I64 : DT_F32,
                         hint);
    const char *x = lower_expr(L, n->a, NULL);
    if (!x) return NULL;
    return emit1(L, n->op == '-' ? "neg" : "logical_not", n->opspan, x, hint);
  }
  case AST_BINARY: {
    if (n->op == AST_OP_IDIV) {
      int before = L->diag->nerrors;
      const AstNode *c = fold_const(L, n);
      if (c) return emit_scalar(L, n->span, attr_i64(c->ival), DT_I64, hint);
      if (L->diag->nerrors == before)
        diag_error(L->diag, n->opspan, "'//' divides integer constants (numbers known when lowering, such as dim() "
                   "or a function's constant arguments); tensors divide with '/'");
      return NULL;
    }
    /* Both sides, so that an error in each is said. */
    const char *x = lower_expr(L, n->a, NULL);
    const char *y = lower_expr(L, n->b, NULL);
    if (!x || !y) return NULL;
    widen_literal(L, n->a, x, y);
    widen_literal(L, n->b, y, x);
    return emit2(L, binary_op_type(n->op), n->opspan, x, y, hint);
  }
  case AST_CALL: {
    const char *out = NULL;
    int got = lower_call(L, n, &hint, 1, &out);
    if (got < 0) return NULL;
    if (got == 0) {
      diag_error(L->diag, n->opspan, "'%s' gives no value", n->name);
      return NULL;
    }
    return out;
  }
  case AST_INDEX:
    return lower_index(L, n, hint);
  case AST_SLICE:
    diag_error(L->diag, n->span, "a slice is only allowed inside [ ]");
    return NULL;
  case AST_KWARG:
    diag_error(L->diag, n->span, "a keyword argument is only allowed in a call");
    return NULL;
  default:
    diag_error(L->diag, n->span, "expected an expression");
    return NULL;
  }
}

/* ---- calls ------------------------------------------------------------------- */

static bool set_attr_from(Lowerer *L, OpDesc *op, const OpProto *proto, int ai, const AstNode *val) {
  const AttrProto *ap = &proto->attrs[ai];
  AttrValue v;
  const char *got;
  int before = L->diag->nerrors;
  if (!const_eval(L, val, ap->type, &v, &got)) {
    if (L->diag->nerrors != before) return false;   /* said: dim() of a symbolic dimension */
    diag_error(L->diag, val->span, "attribute '%s' of '%s' expects %s %s, got %s", ap->name,
               proto->type, ap->type == ATTR_INT || ap->type == ATTR_INTS ? "an" : "a",
               attr_type_name(ap->type), got);
    return false;
  }
  reg_coerce_attr(L->arena, proto, ai, &v);
  const char *why = reg_check_attr(proto, ai, &v);
  if (why) {
    diag_error(L->diag, val->span, "attribute '%s' of '%s' %s", ap->name, proto->type, why);
    return false;
  }
  op_set_attr(L->prog, op, ap->name, v);
  return true;
}

static void slot_names(const SlotProto *slots, int n, char *buf, size_t size) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k < size; i++)
    k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "", slots[i].name);
}

/* A call's inputs: its positional arguments in slot order, a [ ] of names
 * filling a list slot (a [ ] of numbers is a tensor).  The arguments used,
 * *ok false if one did not lower; -1 when too few are given (reported). */
static int call_inputs(Lowerer *L, const AstNode *n, const OpProto *proto, OpDesc *op, bool *ok) {
  const AstList *pos = &n->list;
  int p = 0;
  bool greedy = proto->nin == 1 && (proto->in[0].flags & SLOT_LIST) && pos->n > 0 &&
                (pos->items[0]->kind != AST_LIST || is_constant(pos->items[0]));
  int required = 0;
  for (int i = 0; i < proto->nin; i++) required += !(proto->in[i].flags & SLOT_OPTIONAL);
  for (int i = 0; i < proto->nin && p < pos->n; i++) {
    const SlotProto *sp = &proto->in[i];
    Slot *slot = op_add_input(L->prog, op, sp->name);
    if (greedy) {
      for (; p < pos->n; p++) {
        const char *v = lower_expr(L, pos->items[p], NULL);
        if (!v) *ok = false;
        else slot_push(L->prog, slot, v);
      }
      break;
    }
    const AstNode *arg = pos->items[p++];
    if ((sp->flags & SLOT_LIST) && arg->kind == AST_LIST && !is_constant(arg)) {
      for (int k = 0; k < arg->list.n; k++) {
        const char *v = lower_expr(L, arg->list.items[k], NULL);
        if (!v) *ok = false;
        else slot_push(L->prog, slot, v);
      }
    } else {
      const char *v = lower_expr(L, arg, NULL);
      if (!v) *ok = false;
      else slot_push(L->prog, slot, v);
    }
  }
  if (p < required && !greedy) {
    char names[256];
    slot_names(proto->in, proto->nin, names, sizeof names);
    diag_error(L->diag, n->opspan, "'%s' takes %d input%s (%s), got %d", proto->type, required,
               required == 1 ? "" : "s", names, p);
    return -1;
  }
  return p;
}

/* A call's attributes: the positional arguments from `first` on, in
 * order, then the keyword ones; then the required ones are checked and
 * the defaults filled.  ok says whether the inputs lowered; false on any
 * error (reported). */
static bool call_attrs(Lowerer *L, const AstNode *n, const OpProto *proto, OpDesc *op, int first, bool ok) {
  int ai = 0;
  const AstList *pos = &n->list;
  for (int p = first; p < pos->n; p++) {
    while (ai < proto->nattrs && proto->attrs[ai].type == ATTR_BLOCK) ai++;
    if (ai >= proto->nattrs) {
      int nattr = 0;
      for (int k = 0; k < proto->nattrs; k++) nattr += proto->attrs[k].type != ATTR_BLOCK;
      diag_error(L->diag, pos->items[p]->span,
                 "too many arguments to '%s': it takes %d input%s and %d attribute%s", proto->type,
                 proto->nin, proto->nin == 1 ? "" : "s", nattr, nattr == 1 ? "" : "s");
      return false;
    }
    ok &= set_attr_from(L, op, proto, ai++, pos->items[p]);
  }
  for (int k = 0; k < n->list2.n; k++) {
    const AstNode *kw = n->list2.items[k];
    int idx = reg_attr_index(proto, kw->name);
    if (idx < 0 || proto->attrs[idx].type == ATTR_BLOCK) {
      const char *cands[REG_MAX_ATTRS];
      for (int j = 0; j < proto->nattrs; j++) cands[j] = proto->attrs[j].name;
      const char *near = diag_nearest(kw->name, cands, proto->nattrs);
      if (near)
        diag_error(L->diag, kw->opspan, "unknown attribute '%s' for '%s' (did you mean '%s'?)",
                   kw->name, proto->type, near);
      else if (proto->nattrs == 0)
        diag_error(L->diag, kw->opspan, "unknown attribute '%s': '%s' has no attributes", kw->name,
                   proto->type);
      else
        diag_error(L->diag, kw->opspan, "unknown attribute '%s' for '%s'", kw->name, proto->type);
      ok = false;
      continue;
    }
    if (op_attr(op, kw->name)) {
      diag_error(L->diag, kw->opspan, "attribute '%s' of '%s' is given twice", kw->name, proto->type);
      ok = false;
      continue;
    }
    ok &= set_attr_from(L, op, proto, idx, kw->a);
  }
  for (int i = 0; ok && i < proto->nattrs; i++)
    if (!proto->has_dflt[i] && proto->attrs[i].type != ATTR_BLOCK && !op_attr(op, proto->attrs[i].name)) {
      diag_error(L->diag, n->opspan, "'%s' needs attribute '%s' (%s)", proto->type, proto->attrs[i].name,
                 attr_type_name(proto->attrs[i].type));
      ok = false;
    }
  if (!ok) return false;
  reg_fill_defaults(L->prog, op, proto);
  return true;
}

/* A call's outputs: one per single slot; a list slot takes what the
 * targets leave.  The names bound (at most nwant, into outs), or -1. */
static int call_outputs(Lowerer *L, const AstNode *n, const OpProto *proto, OpDesc *op, const char *const *hints,
                        int nwant, const char **outs) {
  int singles = 0, lists = 0;
  for (int i = 0; i < proto->nout; i++) {
    if (proto->out[i].flags & SLOT_LIST) lists++;
    else singles++;
  }
  if (!lists && nwant > singles) {
    diag_error(L->diag, n->opspan, "'%s' has %d output%s, but %d name%s assigned", proto->type,
               singles, singles == 1 ? "" : "s", nwant, nwant == 1 ? " is" : "s are");
    return -1;
  }
  int bound = 0;
  for (int i = 0; i < proto->nout; i++) {
    const SlotProto *sp = &proto->out[i];
    int count = 1;
    if (sp->flags & SLOT_LIST) {
      int later = 0;
      for (int j = i + 1; j < proto->nout; j++) later += !(proto->out[j].flags & SLOT_LIST);
      count = nwant - bound - later;
      if (count < 1) count = 1;
    }
    for (int k = 0; k < count; k++) {
      const char *hint = bound < nwant ? hints[bound] : NULL;
      const char *v = add_out(L, op, sp->name, hint);
      if (bound < nwant) outs[bound] = v;
      bound++;
    }
  }
  finish_op(L, op);
  return bound < nwant ? bound : nwant;
}

/* OPNAME(ARGS..., ATTR = CONST, ...): positional arguments fill the inputs
 * in proto order, then the attributes in order; keywords name attributes.
 * An op whose only input is a list slot takes every positional argument
 * into it, unless the first is a [ ] list of names (a list of numbers is a
 * tensor literal).  Returns the number of outputs
 * bound into outs (at most nwant), or -1 on error. */
static int lower_op_call(Lowerer *L, const AstNode *n, const OpProto *proto,
                         const char *const *hints, int nwant, const char **outs) {
  OpDesc *op = new_op(L, proto->type, n->opspan);
  op->span = n->opspan;
  bool ok = true;
  int used = call_inputs(L, n, proto, op, &ok);
  if (used < 0 || !call_attrs(L, n, proto, op, used, ok)) return -1;
  return call_outputs(L, n, proto, op, hints, nwant, outs);
}

/* The scope = "..." keyword of a call of a function: its constant string
 * in *scope (NULL when not given).  Any other keyword is an error. */
static bool call_scope(Lowerer *L, const AstNode *n, const AstNode *def, const char **scope) {
  *scope = NULL;
  for (int k = 0; k < n->list2.n; k++) {
    const AstNode *kw = n->list2.items[k];
    if (strcmp(kw->name, "scope") != 0) {
      diag_error(L->diag, kw->span, "function '%s' takes no keyword arguments", def->name);
      return false;
    }
    if (*scope) {
      diag_error(L->diag, kw->opspan, "scope is given twice");
      return false;
    }
    int before = L->diag->nerrors;
    const AstNode *c = fold_const(L, kw->a);
    if (L->diag->nerrors != before) return false;
    if (!c || c->kind != AST_STRING) {
      diag_error(L->diag, kw->a->span, "the scope of a call must be a constant string, got %s",
                 const_kind(c ? c : kw->a));
      return false;
    }
    bool ok = c->name[0] && !(c->name[0] >= '0' && c->name[0] <= '9');
    for (const char *p = c->name; *p && ok; p++)
      ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!ok) {
      diag_error(L->diag, kw->a->span, "a scope must be a name (letters, digits and '_'), got \"%s\"", c->name);
      return false;
    }
    *scope = c->name;
  }
  return true;
}

/* Enters the parameter scope of a call of function fn (explicit: its
 * scope keyword, or NULL): fn, fn_1, fn_2 ... counted per enclosing scope,
 * under the enclosing scope's prefix.  The caller restores the fields. */
static void enter_pscope(Lowerer *L, const char *fn, const char *explicit_scope) {
  const char *s = explicit_scope;
  if (!s) {
    int k = strmap_get(L->ncalled, fn);
    k = k < 0 ? 0 : k;
    strmap_put(L->arena, L->ncalled, fn, k + 1);
    s = k ? arena_printf(L->arena, "%s_%d", fn, k) : fn;
  }
  L->pscope = L->pscope ? arena_printf(L->arena, "%s.%s", L->pscope, s) : s;
  L->pscope_explicit |= explicit_scope != NULL;
  L->ncalled = arena_alloc(L->arena, sizeof *L->ncalled);
}

/* Lowers the arguments of a call of a function: values, and for those that
 * are constants at the call site their values too (a string is only that). */
static bool def_args(Lowerer *L, const AstNode *n, const char **args, const AstNode **consts) {
  for (int i = 0; i < n->list.n; i++) {
    const AstNode *a = n->list.items[i];
    int before = L->diag->nerrors;
    consts[i] = fold_const(L, a);
    if (L->diag->nerrors != before) return false;
    /* a constant becomes a value only where the body uses it as one; a
     * name bound to a value holding a constant passes that value too, so
     * what the body computes from it depends on it (grad(f(p), p)) */
    const Binding *b = a->kind == AST_NAME ? lookup(L, a->name) : NULL;
    bool value = !consts[i] || (b && b->kind == BIND_VAR && b->var);
    args[i] = value ? lower_expr(L, a, NULL) : NULL;
    if (!consts[i] && !args[i]) return false;
  }
  return true;
}

static int lower_def_call(Lowerer *L, const AstNode *n, const AstNode *def,
                          const char *const *hints, int nwant, const char **outs) {
  const char *explicit_scope;
  if (!call_scope(L, n, def, &explicit_scope)) return -1;
  if (n->list.n != def->list.n) {
    diag_error(L->diag, n->opspan, "function '%s' takes %d argument%s, got %d", def->name, def->list.n,
               def->list.n == 1 ? "" : "s", n->list.n);
    diag_note(L->diag, def->span, "'%s' is defined here", def->name);
    return -1;
  }
  for (int i = 0; i < L->ncalls; i++)
    if (L->calls[i] == def) {
      diag_error(L->diag, n->opspan, "function '%s' calls itself; recursion is not supported", def->name);
      return -1;
    }
  if (L->ncalls == (int)(sizeof L->calls / sizeof *L->calls)) {
    diag_error(L->diag, n->opspan, "function calls nested too deeply (more than %d levels)", L->ncalls);
    return -1;
  }
  if (!program_fits(L, n->opspan)) return -1;
  const char *args[64];
  const AstNode *consts[64];
  if (n->list.n > 64) {
    diag_error(L->diag, n->opspan, "too many arguments");
    return -1;
  }
  if (!def_args(L, n, args, consts)) return -1;
  Scope *saved_scope = L->scope;
  const char *saved_fn = L->fn, *saved_pscope = L->pscope;
  bool saved_explicit = L->pscope_explicit;
  StrMap *saved_ncalled = L->ncalled;
  enter_pscope(L, def->name, explicit_scope);
  L->scope = scope_new(L, L->fn_parent);
  L->scope->fn_body = true;
  L->fn = def->name;
  L->calls[L->ncalls++] = def;
  CallSite *site = arena_alloc(L->arena, sizeof *site);
  *site = (CallSite){n->opspan, def->name, L->site};
  L->site = site;
  int errors_before = L->diag->nerrors, call_errors_before = L->call_errors;
  for (int i = 0; i < def->list.n; i++) {
    Binding *b = bind(L, L->scope, def->list.items[i]->name, args[i] ? BIND_VAR : BIND_CONST);
    b->var = args[i];
    b->cval = consts[i];
  }
  const AstList *body = &def->a->list;
  int result = 0;
  bool ok = true;
  const AstNode *ret = body->n ? body->items[body->n - 1] : NULL;
  if (ret && ret->kind != AST_RETURN) ret = NULL;
  AstList head = *body;
  if (ret) head.n--;
  ok = lower_stmts(L, &head, false);
  for (int i = 0; ok && ret && i < ret->list.n; i++) {
    const char *v = lower_expr(L, ret->list.items[i], i < nwant ? hints[i] : NULL);
    if (!v) ok = false;
    else if (i < nwant) outs[i] = v, result++;
  }
  bool inner_errors = L->diag->nerrors != errors_before;
  if (ok && ret && nwant > ret->list.n) {
    diag_error(L->diag, n->opspan, "function '%s' returns %d value%s, but %d name%s assigned", def->name,
               ret->list.n, ret->list.n == 1 ? "" : "s", nwant, nwant == 1 ? " is" : "s are");
    ok = false;
  } else if (ok && !ret && nwant > 0) {
    diag_error(L->diag, n->opspan, "function '%s' returns no value", def->name);
    ok = false;
  }
  L->ncalls--;
  L->site = site->outer;
  L->fn = saved_fn;
  L->scope = saved_scope;
  L->pscope = saved_pscope;
  L->pscope_explicit = saved_explicit;
  L->ncalled = saved_ncalled;
  /* Point at the call the user wrote: the outermost one. */
  if (inner_errors && L->ncalls == 0 && L->diag->nerrors - errors_before > L->call_errors - call_errors_before)
    diag_note(L->diag, n->opspan, "in this call to '%s'", def->name);
  return ok ? result : -1;
}

/* ---- grad(Y, X1, X2, ...) ----------------------------------------------------
 * The gradient of the scalar Y with respect to each Xi (LANGUAGE.md section
 * 12): the backward builder's ops for Y, built from the ops the block holds
 * when the call is lowered and placed where it stands (bwd_grad). */

/* The index of the op of block b that writes var, or -1 (a parameter, an
 * input, a value of an enclosing block or a loop's carried value). */
static int written_at(const Block *b, const char *var) {
  for (int i = b->nops - 1; i >= 0; i--)
    for (int s = 0; s < b->ops[i]->nout; s++)
      for (int j = 0; j < b->ops[i]->out[s].n; j++)
        if (strcmp(b->ops[i]->out[s].args[j], var) == 0) return i;
  return -1;
}

/* Y: a float scalar (f32 or f64). */
static const char *grad_of_value(Lowerer *L, const AstNode *e) {
  const char *y = lower_expr(L, e, NULL);
  const VarDesc *v = y ? prog_var(L->prog, y) : NULL;
  if (!v || v->dtype == DT_UNKNOWN) return NULL;
  /* An op body is checked before its inputs' shapes are known: a shape of
   * unknown rank is checked when the body is lowered for a call. */
  if (!dtype_is_float(v->dtype) || (v->shape.rank >= 0 && shape_numel(&v->shape) != 1)) {
    char buf[128];
    diag_error(L->diag, e->span, "grad: the value to differentiate must be a float scalar (f32 or f64), but it is %s%s (reduce "
               "it, e.g. with sum or mean)", dtype_name(v->dtype), shape_str(&v->shape, buf, sizeof buf));
    return NULL;
  }
  return y;
}

/* Xi: a named float value computed before Y. */
static const char *grad_wrt(Lowerer *L, const AstNode *e, const char *y, bool konst) {
  if (e->kind != AST_NAME) {
    diag_error(L->diag, e->span, "grad: differentiate with respect to a named value (a parameter, an input or a "
               "value computed before the one differentiated), not an expression");
    return NULL;
  }
  const char *x = lower_name(L, e, NULL);
  const VarDesc *v = x ? prog_var(L->prog, x) : NULL;
  if (!v || v->dtype == DT_UNKNOWN) return NULL;
  if (!dtype_is_float(v->dtype)) {
    diag_error(L->diag, e->span, "grad: '%s' is %s; only float values (f32, f64) have gradients", e->name, dtype_name(v->dtype));
    return NULL;
  }
  int xi = written_at(L->block, x), yi = written_at(L->block, y);
  if (xi > yi && konst) {
    diag_error(L->diag, e->span, "grad: '%s' is a constant argument of the function, a new value wherever it is "
               "used, so what is differentiated does not depend on this one (pass a value, or differentiate an "
               "expression of '%s' written in the call)", e->name, e->name);
    return NULL;
  }
  if (xi > yi) {
    diag_error(L->diag, e->span, "grad: '%s' is computed after the value differentiated, which cannot depend "
               "on it", e->name);
    return NULL;
  }
  return x;
}

static int lower_grad_call(Lowerer *L, const AstNode *n, int nwant, const char **outs) {
  int nx = n->list.n - 1;
  if (n->list2.n) {
    diag_error(L->diag, n->list2.items[0]->span, "grad takes no keyword arguments");
    return -1;
  }
  if (nx < 1) {
    diag_error(L->diag, n->opspan, "grad needs the value to differentiate and what to differentiate it with "
               "respect to: grad(Y, X1, X2, ...)");
    return -1;
  }
  if (nwant > 0 && nwant != nx) {
    diag_error(L->diag, n->opspan, "'grad' gives %d value%s (one per X), but %d name%s assigned", nx,
               nx == 1 ? "" : "s", nwant, nwant == 1 ? " is" : "s are");
    return -1;
  }
  /* A function's constant argument differentiated (f(2.0)) becomes a
   * value first, which Y then reads; it stays a constant where one is
   * required. */
  bool *konst = NULL;   /* which Xi were made values here */
  for (int i = 1; i <= nx; i++) {
    const AstNode *x = n->list.items[i];
    const Binding *b = x->kind == AST_NAME ? lookup(L, x->name) : NULL;
    if (!b || b->kind != BIND_CONST || !b->cval || const_has_string(b->cval)) continue;
    const AstNode *cval = b->cval;
    const char *v = lower_expr(L, cval, qualify(L, x->name));
    if (!v) return -1;
    bind_var(L, x->name, v);
    Binding *nb = scope_find_here(L->scope, x->name);
    if (nb) nb->cval = cval;
    if (!konst) konst = arena_alloc(L->arena, sizeof *konst * (size_t)(nx + 1));
    konst[i - 1] = true;
  }
  const char *y = grad_of_value(L, n->list.items[0]);
  if (!y) return -1;
  const char **wrt = arena_alloc(L->arena, sizeof *wrt * (size_t)nx);
  for (int i = 0; i < nx; i++)
    if (!(wrt[i] = grad_wrt(L, n->list.items[i + 1], y, konst && konst[i]))) return -1;
  const char **grads = nwant ? outs : arena_alloc(L->arena, sizeof *grads * (size_t)nx);
  int before = L->block->nops;
  bool *depends = arena_alloc(L->arena, sizeof *depends * (size_t)nx);
  if (!bwd_grad(L->prog, L->block, y, wrt, nx, n->opspan, grads, depends)) return -1;
  L->nops += L->block->nops - before;
  /* Zeros, as LANGUAGE.md section 12 says, but said once (PyTorch asks for
   * allow_unused to make the same case explicit). */
  const AstNode *ye = n->list.items[0];
  for (int i = 0; i < nx; i++)
    if (!depends[i])
      diag_note(L->diag, n->list.items[i + 1]->span, "grad: %s%s%s does not depend on '%s': its gradient is zeros",
                ye->kind == AST_NAME ? "'" : "", ye->kind == AST_NAME ? ye->name : "the value differentiated",
                ye->kind == AST_NAME ? "'" : "", n->list.items[i + 1]->name);
  return nwant;
}

static int lower_call(Lowerer *L, const AstNode *n, const char *const *hints, int nwant,
                      const char **outs) {
  if (strcmp(n->name, "grad") == 0) return lower_grad_call(L, n, nwant, outs);
  Binding *b = lookup(L, n->name);
  if (b && b->kind == BIND_FUNC) return lower_def_call(L, n, b->def, hints, nwant, outs);
  const OpProto *proto = reg_find_op(L->prog, n->name);
  if (!proto && strcmp(n->name, "dim") == 0) {
    int64_t v;
    if (!eval_dim(L, n, &v)) return -1;
    if (nwant > 1) {
      diag_error(L->diag, n->opspan, "'dim' gives 1 value, but %d names are assigned", nwant);
      return -1;
    }
    const char *out = emit_scalar(L, n->span, attr_i64(v), DT_I64, nwant ? hints[0] : NULL);
    if (nwant) outs[0] = out;
    return nwant ? 1 : 0;
  }
  if (proto) {
    if (proto->flags & OP_INTERNAL) {
      diag_error(L->diag, n->opspan, "'%s' is used by netrun itself and cannot be called", n->name);
      return -1;
    }
    return lower_op_call(L, n, proto, hints, nwant, outs);
  }
  if (b && b->kind == BIND_VAR) {
    diag_error(L->diag, n->opspan, "'%s' is a value, not a function or op", n->name);
    return -1;
  }
  const char *near = suggest_name(L, n->name, true);
  if (near) diag_error(L->diag, n->opspan, "unknown op or function '%s' (did you mean '%s'?)", n->name, near);
  else diag_error(L->diag, n->opspan, "unknown op or function '%s'", n->name);
  return -1;
}

/* ---- declarations -------------------------------------------------------- */

/* One dimension of a declared shape: an integer constant (a number, a
 * function's constant argument, dim(), integer arithmetic of them) or,
 * for an input, a symbolic name bound when data is fed. */
static bool lower_dim(Lowerer *L, const AstNode *d, bool is_param, Dim *out) {
  const Binding *b = d->kind == AST_NAME ? lookup(L, d->name) : NULL;
  if (d->kind == AST_NAME && (!b || (!b->cval && b->kind != BIND_CONST))) {
    if (is_param) {
      diag_error(L->diag, d->span, "a %s's shape must be known: '%s' is symbolic",
                 L->declaring == AST_STATE ? "state" : "parameter", d->name);
      return false;
    }
    *out = (Dim){-1, arena_strdup(L->arena, d->name)};
    return true;
  }
  int before = L->diag->nerrors;
  const AstNode *c = fold_const(L, d);
  if (L->diag->nerrors != before) return false;
  if (!c || c->kind != AST_INT) {
    diag_error(L->diag, d->span, "a dimension must be an integer constant or a name, got %s",
               const_kind(c ? c : d));
    return false;
  }
  if (c->ival < 0) {
    diag_error(L->diag, d->span, "a dimension must not be negative, got %lld", (long long)c->ival);
    return false;
  }
  *out = dim_n(c->ival);
  return true;
}

static bool lower_type(Lowerer *L, const AstNode *t, DType *dt, Shape *shape, bool is_param) {
  *dt = DT_F32;
  if (t->name && !dtype_parse(t->name, dt)) {
    diag_error(L->diag, t->span, "unknown dtype '%s' (expected f32, i64 or bool)", t->name);
    return false;
  }
  if (t->list.n > SHAPE_MAX_RANK) {
    diag_error(L->diag, t->span, "too many dimensions (%d; at most %d)", t->list.n, SHAPE_MAX_RANK);
    return false;
  }
  *shape = shape_scalar();
  shape->rank = t->list.n;
  for (int i = 0; i < t->list.n; i++)
    if (!lower_dim(L, t->list.items[i], is_param, &shape->d[i])) return false;
  return true;
}

static bool declare_check(Lowerer *L, const AstNode *n) {
  Binding *b = scope_find_here(L->global, n->name);
  if (b && b->kind == BIND_VAR) {
    VarDesc *v = prog_var(L->prog, b->var);
    if (v && (v->flags & (VAR_INPUT | VAR_PARAM | VAR_KEPT))) {
      diag_error(L->diag, n->span, "'%s' is already declared", n->name);
      diag_note(L->diag, v->span, "the first declaration is here");
      return false;
    }
  }
  return true;
}

/* Lowers expression e into the startup block (where only ops, no names,
 * are visible) and assigns its value to var. */
static void lower_startup_value(Lowerer *L, const AstNode *e, VarDesc *var) {
  Scope *saved_scope = L->scope, *saved_fn_parent = L->fn_parent;
  Block *saved_block = L->block;
  L->decl_scope = saved_scope, L->decl_fn_parent = saved_fn_parent;
  L->fn_parent = functions_scope(L);
  L->scope = scope_new(L, L->fn_parent);
  /* A function's constants stay visible: param W : [n] = full([n], 0.5) */
  for (Scope *sc = saved_scope; sc && sc != saved_fn_parent; sc = sc->parent)
    for (int i = 0; i < sc->n; i++)
      if (sc->b[i].cval && !scope_find_here(L->scope, sc->b[i].name))
        bind(L, L->scope, sc->b[i].name, BIND_CONST)->cval = sc->b[i].cval;
  L->block = L->prog->startup;
  double f;
  int64_t i;
  bool is_int;
  const char *v;
  /* A literal takes the declared dtype: `input x : f32[2] = [0, 1]`. */
  if (e->kind == AST_LIST) v = lower_literal(L, e, NULL, var->dtype);
  else if (const_number(L, e, &f, &i, &is_int) && (dtype_is_float(var->dtype) || is_int))
    v = emit_scalar(L, e->span, var->dtype == DT_I64 ? attr_i64(i) : attr_float(f), var->dtype, NULL);
  else v = lower_expr(L, e, NULL);
  if (v) {
    OpDesc *op = new_op(L, "assign", e->span);
    add_in(L, op, "X", v);
    slot_push(L->prog, op_add_output(L->prog, op, "Out"), var->name);
    op_append(L->block, L->prog, op);
    const VarDesc *src = prog_var(L->prog, v);
    char a[128], b[128];
    if (src->dtype != DT_UNKNOWN && src->dtype != var->dtype)
      diag_error(L->diag, e->span, "the value for '%s' is %s, but '%s' is declared %s", var->name,
                 dtype_name(src->dtype), var->name, dtype_name(var->dtype));
    else if (src->shape.rank >= 0 && !shape_eq(&src->shape, &var->shape)) {
      bool sym = false;
      for (int d = 0; d < var->shape.rank; d++) sym |= var->shape.d[d].sym != NULL;
      if (!sym)
        diag_error(L->diag, e->span, "the value for '%s' has shape %s, but '%s' is declared %s",
                   var->name, shape_str(&src->shape, a, sizeof a), var->name,
                   shape_str(&var->shape, b, sizeof b));
    }
  }
  L->scope = saved_scope;
  L->fn_parent = saved_fn_parent;
  L->block = saved_block;
  L->decl_scope = L->decl_fn_parent = NULL;
}

/* The global variable an input or param declaration N names, bound in the
 * global scope. */
static VarDesc *declare_global(Lowerer *L, const AstNode *n, DType dt, const Shape *shape, unsigned flags) {
  VarDesc *v = prog_add_var(L->prog, L->prog->blocks[0], prog_fresh(L->prog, n->name));
  v->dtype = dt;
  v->shape = *shape;
  v->flags = flags;
  v->span = n->span;
  v->user_name = n->name;
  Binding *b = bind(L, L->global, n->name, BIND_VAR);
  b->var = v->name;
  b->state = flags & VAR_KEPT ? v : NULL;
  return v;
}

/* input NAME : TYPE [= DEFAULT] */
static void lower_input(Lowerer *L, const AstNode *n) {
  DType dt;
  Shape shape;
  if (!declare_check(L, n) || !lower_type(L, n->a, &dt, &shape, false)) return;
  VarDesc *v = declare_global(L, n, dt, &shape, VAR_INPUT);
  if (n->b) lower_startup_value(L, n->b, v);
}

/* Fan-in and fan-out of a parameter shape: [in, out] matrices, OIHW
 * filters, vectors. */
static void fans(const Shape *s, double *fan_in, double *fan_out) {
  if (s->rank == 0) {
    *fan_in = *fan_out = 1;
  } else if (s->rank == 1) {
    *fan_in = *fan_out = (double)s->d[0].n;
  } else if (s->rank == 2) {
    *fan_in = (double)s->d[0].n, *fan_out = (double)s->d[1].n;
  } else {
    double field = 1;
    for (int i = 2; i < s->rank; i++) field *= (double)s->d[i].n;
    *fan_in = (double)s->d[1].n * field, *fan_out = (double)s->d[0].n * field;
  }
  if (*fan_in < 1) *fan_in = 1;
  if (*fan_out < 1) *fan_out = 1;
}

static const char *const initializers[] = {"zeros", "ones", "constant", "uniform", "normal", "xavier", "kaiming"};

/* param NAME : [DIMS] = INIT.  The named initializers become random or
 * constant ops of the startup block; anything else is an expression whose
 * value must have the declared shape. */
/* Says why scoped variable v (declared before) cannot be shared with
 * this call's declaration n of dt[shape] and flags, or returns true. */
static bool share_ok(Lowerer *L, const AstNode *n, const VarDesc *v, DType dt, const Shape *shape, unsigned flags) {
  const char *kind = flags & VAR_PARAM ? "parameter" : "state";
  int si = strmap_get(&L->shared, v->name);
  Span at = L->site->at;
  char a[128], b[128];
  if (si < 0 || !(v->flags & (VAR_PARAM | VAR_KEPT))) {
    diag_error(L->diag, n->span, "the %s '%s' would be named '%s', which is already the name of another value",
               kind, n->name, v->name);
    return false;
  }
  const struct Sharer *first = &L->sharers[si];
  int said = L->ncalls == 1;   /* an error said at the call the user wrote needs no "in this call" note */
  if (!L->pscope_explicit || !first->explicit_scope) {
    L->call_errors += said;
    diag_error(L->diag, at, "the %s '%s' of this call is already declared by another call: automatically named "
               "calls never share (give this call its own scope = \"...\", or both the same one to share)",
               kind, v->name);
    diag_note(L->diag, first->call, "the other call is here");
    return false;
  }
  if ((v->flags & (VAR_PARAM | VAR_KEPT)) != (flags & (VAR_PARAM | VAR_KEPT))) {
    L->call_errors += said;
    diag_error(L->diag, at, "'%s' is a %s in this call but a %s in the first call of scope '%s'", v->name,
               flags & VAR_PARAM ? "param" : "state", v->flags & VAR_PARAM ? "param" : "state", L->pscope);
    diag_note(L->diag, first->call, "the first call is here");
    return false;
  }
  if (v->dtype != dt || !shape_eq(&v->shape, shape)) {
    L->call_errors += said;
    diag_error(L->diag, at, "the %s '%s' is %s%s in this call but %s%s in the first call of scope '%s' (calls "
               "sharing a scope share its %ss, so their shapes must agree)", kind, v->name, dtype_name(dt),
               shape_str(shape, a, sizeof a), dtype_name(v->dtype), shape_str(&v->shape, b, sizeof b), L->pscope,
               kind);
    diag_note(L->diag, first->call, "the first call is here");
    return false;
  }
  return true;
}

/* The variable a param or state declaration n inside a function names:
 * SCOPE.NAME, made here (*fresh) or shared with an earlier call of the same
 * explicit scope; bound to NAME in the function's scope.  NULL on error. */
static VarDesc *declare_scoped(Lowerer *L, const AstNode *n, DType dt, const Shape *shape, unsigned flags,
                               bool *fresh) {
  const char *name = arena_printf(L->arena, "%s.%s", L->pscope, n->name);
  const Binding *b = lookup(L, n->name);
  if (b && b->kind == BIND_VAR && b->var && strcmp(b->var, name) == 0) {
    diag_error(L->diag, n->span, "'%s' is already declared", n->name);
    diag_note(L->diag, prog_var(L->prog, name)->span, "the first declaration is here");
    return NULL;
  }
  VarDesc *v = prog_var(L->prog, name);
  *fresh = v == NULL;
  if (v && !share_ok(L, n, v, dt, shape, flags)) return NULL;
  if (!v) {
    v = prog_add_var(L->prog, L->prog->blocks[0], name);
    v->dtype = dt;
    v->shape = *shape;
    v->flags = flags;
    v->span = n->span;
    v->user_name = v->name;   /* what gradcheck, grad and --wrt call it: "dense.W" */
    strmap_put(L->arena, &L->shared, v->name, L->nsharers);
    *ARENA_PUSH(L->arena, L->sharers, L->nsharers, L->capsharers) =
        (struct Sharer){L->site->at, L->pscope_explicit};
  }
  Binding *nb = bind(L, L->scope, n->name, BIND_VAR);
  nb->var = v->name;
  nb->state = flags & VAR_KEPT ? v : NULL;
  return v;
}

/* weights("FILE") and weights("FILE", "KEY") (LANGUAGE.md section 14):
 * the tensor named KEY (default: the variable's scoped name) of FILE,
 * relative to the folder of the script the call stands in.  The file's
 * table of contents is read once per lowering and checked here; the values
 * come from a load_weights op of the startup block (src/ops/weightsfile.c),
 * which merge_load_weights makes one per file. */
static void lower_weights_init(Lowerer *L, const AstNode *init, VarDesc *v) {
  const char *arg[2] = {NULL, NULL};
  bool ok = init->list2.n == 0 && init->list.n >= 1 && init->list.n <= 2;
  for (int i = 0; ok && i < init->list.n; i++) {
    const AstNode *c = fold_const(L, init->list.items[i]);
    ok = c && c->kind == AST_STRING;
    arg[i] = ok ? c->name : NULL;
  }
  if (!ok) {
    diag_error(L->diag, init->span, "weights() takes the file's path and optionally the key, both strings: "
               "weights(\"FILE\") or weights(\"FILE\", \"KEY\")");
    return;
  }
  const char *here = L->diag->files[init->span.file].path, *slash = strrchr(here, '/');
  const char *path = arg[0][0] == '/' || !slash ? arg[0]
                                                 : arena_printf(L->arena, "%.*s/%s", (int)(slash - here), here, arg[0]);
  const char *key = arg[1] ? arg[1] : v->name;
  struct WFile *f = NULL;
  for (int i = 0; i < L->nwfiles && !f; i++)
    if (strcmp(L->wfiles[i].path, path) == 0) f = &L->wfiles[i];
  if (!f) {
    char err[1400];
    f = ARENA_PUSH(L->arena, L->wfiles, L->nwfiles, L->capwfiles);
    f->path = path;
    f->ok = weights_toc(L->arena, path, &f->toc, err, sizeof err);
    if (!f->ok) diag_error(L->diag, init->span, "%s", err);
  }
  if (!f->ok) return;
  const WeightsEntry *e = NULL;
  const char **names = arena_alloc(L->arena, (size_t)(f->toc.n + 1) * sizeof *names);
  for (int i = 0; i < f->toc.n; i++) {
    names[i] = f->toc.e[i].name;
    if (strcmp(names[i], key) == 0) e = &f->toc.e[i];
  }
  if (!e) {
    const char *near = diag_nearest(key, names, f->toc.n);
    diag_error(L->diag, init->span, "%s has no tensor '%s'%s%s%s", arg[0], key, DIAG_MEAN(near));
    return;
  }
  Shape s = shape_of(e->rank, e->shape);
  char a[128], b[128];
  if (e->dtype != v->dtype || !shape_eq(&s, &v->shape)) {
    diag_error(L->diag, init->span, "%s holds '%s' as %s%s, but '%s' is declared %s%s", arg[0], key,
               dtype_name(e->dtype), shape_str(&s, a, sizeof a), v->name, dtype_name(v->dtype),
               shape_str(&v->shape, b, sizeof b));
    return;
  }
  Block *saved = L->block;
  L->block = L->prog->startup;
  OpDesc *op = new_op(L, "load_weights", init->span);
  slot_push(L->prog, op_add_output(L->prog, op, "Out"), v->name);
  op_set_attr(L->prog, op, "file", attr_string(L->prog, path));
  const char **k1 = arena_alloc(L->arena, sizeof *k1);
  k1[0] = arena_strdup(L->arena, key);
  op_set_attr(L->prog, op, "keys", (AttrValue){.type = ATTR_STRINGS, .n = 1, .u.strings = k1});
  op_append(L->block, L->prog, op);
  L->block = saved;
}

/* The load_weights ops of one file become one, where the first stood, so
 * the file is read once however many parameters it initializes (their
 * order does not matter: they read nothing but the file). */
static void merge_load_weights(Lowerer *L) {
  Block *b = L->prog->startup;
  int kept = 0;
  for (int i = 0; i < b->nops; i++) {
    OpDesc *op = b->ops[i];
    OpDesc *into = NULL;
    if (strcmp(op->type, "load_weights") == 0)
      for (int j = 0; j < kept && !into; j++)
        if (strcmp(b->ops[j]->type, "load_weights") == 0 &&
            strcmp(op_attr(b->ops[j], "file")->v.u.s, op_attr(op, "file")->v.u.s) == 0)
          into = b->ops[j];
    if (!into) {
      b->ops[kept++] = op;
      continue;
    }
    const AttrValue *ka = &op_attr(into, "keys")->v, *kb = &op_attr(op, "keys")->v;
    const char **k = arena_alloc(L->arena, (size_t)(ka->n + kb->n) * sizeof *k);
    memcpy(k, ka->u.strings, (size_t)ka->n * sizeof *k);
    memcpy(k + ka->n, kb->u.strings, (size_t)kb->n * sizeof *k);
    op_set_attr(L->prog, into, "keys", (AttrValue){.type = ATTR_STRINGS, .n = ka->n + kb->n, .u.strings = k});
    Slot *out = op_output(into, "Out"), *more = op_output(op, "Out");
    for (int j = 0; j < more->n; j++) slot_push(L->prog, out, more->args[j]);
  }
  b->nops = kept;
}

/* param NAME : [DIMS] = INIT, and state NAME : [DIMS] = INIT (flags
 * VAR_KEPT): at the top level a global, in a function SCOPE.NAME. */
static void lower_param(Lowerer *L, const AstNode *n, unsigned flags) {
  DType dt;
  Shape shape;
  bool fresh = true;
  L->declaring = n->kind;
  if (!L->fn && !declare_check(L, n)) return;
  if (!lower_type(L, n->a, &dt, &shape, true)) return;
  VarDesc *v = L->fn ? declare_scoped(L, n, dt, &shape, flags, &fresh) : declare_global(L, n, dt, &shape, flags);
  if (!v || !fresh) return;
  const AstNode *init = n->b;
  int which = -1;
  if (init->kind == AST_CALL && !lookup(L, init->name) && strcmp(init->name, "weights") == 0) {
    lower_weights_init(L, init, v);
    return;
  }
  if (init->kind == AST_CALL && !lookup(L, init->name))
    for (int i = 0; i < (int)(sizeof initializers / sizeof *initializers); i++)
      if (strcmp(init->name, initializers[i]) == 0) which = i;
  if (which < 0 || (which < 2 && init->list.n > 0)) {
    lower_startup_value(L, init, v);
    return;
  }
  static const int nargs[] = {0, 0, 1, 2, 2, 0, 0};
  if (init->list.n != nargs[which] || init->list2.n) {
    diag_error(L->diag, init->opspan, "initializer %s() takes %d argument%s", init->name, nargs[which],
               nargs[which] == 1 ? "" : "s");
    return;
  }
  double a[2] = {0, 0};
  for (int i = 0; i < nargs[which]; i++) {
    AttrValue val;
    const char *got;
    if (!const_eval(L, init->list.items[i], ATTR_FLOAT, &val, &got)) {
      diag_error(L->diag, init->list.items[i]->span, "initializer %s() expects numbers, got %s",
                 init->name, got);
      return;
    }
    a[i] = val.type == ATTR_I64 ? (double)val.u.i : val.u.f;
  }
  double fan_in, fan_out;
  fans(&shape, &fan_in, &fan_out);
  /* Computed bounds are kept at f32 precision: that is what they are used at. */
#define F32(x) ((double)(float)(x))
  const char *type;
  const char *k1 = NULL, *k2 = NULL;
  double v1 = 0, v2 = 0;
  switch (which) {
  case 0: case 1: case 2:
    type = "fill_constant", k1 = "value", v1 = which == 0 ? 0 : which == 1 ? 1 : a[0];
    break;
  case 3:
    type = "uniform_random", k1 = "min", v1 = a[0], k2 = "max", v2 = a[1];
    if (v1 > v2) {
      diag_error(L->diag, init->span, "uniform(lo, hi) needs lo <= hi");
      return;
    }
    break;
  case 4:
    type = "gaussian_random", k1 = "mean", v1 = a[0], k2 = "std", v2 = a[1];
    if (v2 < 0) {
      diag_error(L->diag, init->span, "normal(mean, std) needs std >= 0");
      return;
    }
    break;
  case 5: /* Glorot & Bengio: U(-l, l), l = sqrt(6 / (fan_in + fan_out)) */
    type = "uniform_random", k1 = "min", k2 = "max";
    v2 = F32(sqrt(6.0 / (fan_in + fan_out))), v1 = -v2;
    break;
  default: /* He et al.: N(0, sqrt(2 / fan_in)) */
    type = "gaussian_random", k1 = "mean", v1 = 0, k2 = "std", v2 = F32(sqrt(2.0 / fan_in));
    break;
  }
#undef F32
  Block *saved = L->block;
  L->block = L->prog->startup;
  OpDesc *op = new_op(L, type, init->span);
  slot_push(L->prog, op_add_output(L->prog, op, "Out"), v->name);
  int64_t dims[SHAPE_MAX_RANK];
  for (int i = 0; i < shape.rank; i++) dims[i] = shape.d[i].n;
  op_set_attr(L->prog, op, "shape", attr_ints(L->prog, dims, shape.rank));
  op_set_attr(L->prog, op, k1, attr_float(v1));
  if (k2) op_set_attr(L->prog, op, k2, attr_float(v2));
  if (which <= 2) op_set_attr(L->prog, op, "dtype", attr_dtype(dt));
  reg_fill_defaults(L->prog, op, reg_find_op(L->prog, type));
  op_append(L->block, L->prog, op);
  L->block = saved;
}

/* ---- user-defined ops (op NAME(...) -> (...) { } grad { }) ------------------- */

/* Binds an op body's attributes to constants: op's values, else the
 * defaults. */
static void bind_user_attrs(Lowerer *L, const OpProto *proto, const OpDesc *op) {
  for (int i = 0; i < proto->nattrs; i++) {
    const Attr *a = op ? op_attr(op, proto->attrs[i].name) : NULL;
    Binding *b = bind(L, L->scope, proto->attrs[i].name, BIND_CONST);
    b->value = a ? a->v : proto->dflt[i];
  }
}

/* The value a body leaves in `name`, or NULL: an error if the body binds
 * it only in a branch or loop (or, for an output, not at all). */
static const char *user_result(Lowerer *L, const char *name, const AstNode *out) {
  Binding *b = lookup(L, name);
  if (b && b->kind == BIND_VAR) return b->var;
  if (b && b->kind == BIND_FAILED) return NULL;
  if (b && b->kind == BIND_LOCAL) {
    diag_error(L->diag, b->where, "'%s' %s", name, b->why);
  } else if (out) {
    diag_error(L->diag, out->span, "op '%s' never assigns its output '%s'", L->opdef->name, out->name);
  }
  return NULL;
}

bool lower_user_body(const OpProto *proto, const OpDesc *op, bool grad, Program *into, const char *const *in,
                     const char *const *out, const char *const *out_grad, const char **res) {
  const UserOp *u = proto->user;
  Lowerer *L = u->L;
  const AstNode *n = u->def;
  /* The lowerer may be busy with a script (shape inference of a call):
   * lower the body on the side and put everything back. */
  Program *saved_prog = L->prog;
  Arena *saved_arena = L->arena;
  Scope *saved_scope = L->scope, *saved_fn_parent = L->fn_parent;
  Block *saved_block = L->block;
  const char *saved_fn = L->fn;
  bool saved_in_grad = L->in_grad;
  const AstNode *saved_opdef = L->opdef;
  int saved_ncalls = L->ncalls;
  StrMap *saved_ncalled = L->ncalled;
  const char *saved_pscope = L->pscope;
  L->prog = into;
  L->arena = into->arena;
  L->ncalled = arena_alloc(L->arena, sizeof *L->ncalled);   /* the calls' counts live as long as the body */
  L->pscope = NULL;
  L->block = into->blocks[0];
  L->fn_parent = u->globals;
  L->scope = scope_new(L, u->globals);
  L->fn = n->name;
  L->in_grad = grad;
  L->opdef = n;
  L->ncalls = 0;
  for (int i = 0; i < proto->nin; i++) bind_var(L, proto->in[i].name, in[i]);
  for (int k = 0; grad && k < proto->nout; k++) {
    bind_var(L, proto->out[k].name, out[k]);
    bind_var(L, name_grad(L->arena, proto->out[k].name), out_grad[k]);
  }
  bind_user_attrs(L, proto, op);
  int before = L->diag->nerrors;
  bool ok = lower_stmts(L, grad ? &n->b->list : &n->a->list, false);
  if (ok && !grad)
    for (int k = 0; k < proto->nout; k++) ok &= (res[k] = user_result(L, proto->out[k].name, n->list2.items[k])) != NULL;
  for (int i = 0; ok && grad && i < proto->nin; i++)
    res[i] = user_result(L, name_grad(L->arena, proto->in[i].name), NULL);
  ok = ok && L->diag->nerrors == before;
  L->prog = saved_prog;
  L->arena = saved_arena;
  L->ncalled = saved_ncalled;
  L->pscope = saved_pscope;
  L->scope = saved_scope;
  L->fn_parent = saved_fn_parent;
  L->block = saved_block;
  L->fn = saved_fn;
  L->in_grad = saved_in_grad;
  L->opdef = saved_opdef;
  L->ncalls = saved_ncalls;
  return ok;
}

/* Declares a variable of type t in block 0 of p, named after `base`. */
static const char *declare_f32(Program *p, const char *base) {
  VarDesc *v = prog_add_var(p, p->blocks[0], prog_fresh(p, base));
  v->dtype = DT_F32;
  return v->name;
}

/* Checks a user op's body and grad body once, for f32 inputs of unknown
 * shape: unknown names, outputs never assigned, gradients of non-inputs.
 * An input whose gradient the grad body never assigns has none: its slot
 * is marked SLOT_NO_GRAD, so the backward treats it like a label's. */
static bool check_user_op(Lowerer *L, const AstNode *n, OpProto *proto) {
  Arena scratch_arena;
  arena_init(&scratch_arena);
  Program *s = prog_new(&scratch_arena, L->diag);
  s->user_ops = L->prog->user_ops;
  const char *in[REG_MAX_SLOTS], *out[REG_MAX_SLOTS], *out_grad[REG_MAX_SLOTS], *res[REG_MAX_SLOTS];
  for (int i = 0; i < proto->nin; i++) in[i] = declare_f32(s, proto->in[i].name);
  bool ok = lower_user_body(proto, NULL, false, s, in, NULL, NULL, res);
  /* An op whose body draws random numbers does too (its body cannot be
   * run again for a gradient). */
  for (int b = 0; ok && b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nops; i++) {
      const OpProto *op = reg_find_op(s, s->blocks[b]->ops[i]->type);
      if (op && (op->flags & OP_RANDOM)) proto->flags |= OP_RANDOM;
    }
  if (ok && n->b) {
    for (int k = 0; k < proto->nout; k++) {
      out[k] = declare_f32(s, proto->out[k].name);
      out_grad[k] = declare_f32(s, name_grad(s->arena, proto->out[k].name));
    }
    ok = lower_user_body(proto, NULL, true, s, in, out, out_grad, res);
    for (int i = 0; ok && i < proto->nin; i++)
      if (!res[i]) proto->in[i].flags |= SLOT_NO_GRAD;
  }
  arena_free(&scratch_arena);
  return ok;
}

static void lower_opdef(Lowerer *L, const AstNode *n) {
  if (reg_find_op(L->prog, n->name)) {
    diag_error(L->diag, n->span, "op '%s' is already defined", n->name);
    return;
  }
  if (n->list.n > REG_MAX_SLOTS || n->list2.n > REG_MAX_SLOTS || n->list3.n > REG_MAX_ATTRS) {
    diag_error(L->diag, n->span, "op '%s' has too many inputs, outputs or attributes", n->name);
    return;
  }
  OpProto *proto = arena_alloc(L->arena, sizeof *proto);
  proto->type = n->name;
  proto->doc = arena_printf(L->arena, "defined in %s", L->diag->files[n->span.file].path);
  /* Inputs, outputs and attributes share one namespace: the body's. */
  for (int i = 0; i < n->list.n + n->list2.n + n->list3.n; i++) {
    const AstNode *a = i < n->list.n ? n->list.items[i]
                       : i < n->list.n + n->list2.n ? n->list2.items[i - n->list.n]
                                                    : n->list3.items[i - n->list.n - n->list2.n];
    for (int j = 0; j < i; j++) {
      const AstNode *b = j < n->list.n ? n->list.items[j]
                         : j < n->list.n + n->list2.n ? n->list2.items[j - n->list.n]
                                                      : n->list3.items[j - n->list.n - n->list2.n];
      const char *ka = i < n->list.n ? "input" : i < n->list.n + n->list2.n ? "output" : "attribute";
      const char *kb = j < n->list.n ? "input" : j < n->list.n + n->list2.n ? "output" : "attribute";
      if (strcmp(a->name, b->name) != 0) continue;
      if (ka == kb) diag_error(L->diag, a->span, "%s '%s' is named twice", ka, a->name);
      else diag_error(L->diag, a->span, "'%s' names both an %s and an %s of op '%s'", a->name, kb, ka, n->name);
      return;
    }
  }
  for (int i = 0; i < n->list.n; i++) proto->in[i] = (SlotProto){n->list.items[i]->name, 0, "input"};
  for (int i = 0; i < n->list2.n; i++) proto->out[i] = (SlotProto){n->list2.items[i]->name, 0, "output"};
  for (int i = 0; i < n->list3.n; i++) {
    const AstNode *kw = n->list3.items[i];
    AttrValue v;
    const char *got;
    static const AttrType types[] = {ATTR_INT, ATTR_FLOAT, ATTR_BOOL, ATTR_STRING, ATTR_INTS, ATTR_FLOATS};
    bool found = false;
    for (size_t t = 0; t < sizeof types / sizeof *types && !found; t++)
      if (const_eval(L, kw->a, types[t], &v, &got)) found = true;
    if (!found) {
      diag_error(L->diag, kw->a->span, "the default of attribute '%s' must be a constant", kw->name);
      return;
    }
    proto->attrs[i] = (AttrProto){.name = kw->name, .type = v.type, .dflt = "", .doc = "attribute"};
    proto->dflt[i] = v;
  }
  UserOp *u = arena_alloc(L->arena, sizeof *u);
  u->L = L;
  u->def = n;
  u->globals = functions_scope(L);
  u->arena = L->arena;
  u->diag = L->diag;
  proto->user = u;
  proto->infer = L->user_ops->infer;
  proto->kernel = L->user_ops->kernel;
  proto->grad = L->user_ops->grad;
  proto->grad_kind = GRAD_COMPOSITE;  /* its grad body, or its body differentiated */
  proto->flags = OP_NO_PREALLOC | OP_ANY_FLOAT;   /* the kernel hands over its body's values,
                                                   * lowered for its inputs' dtypes */
  proto->nin = n->list.n, proto->nout = n->list2.n, proto->nattrs = n->list3.n;
  for (int i = 0; i < n->list3.n; i++) proto->has_dflt[i] = true;
  if (!check_user_op(L, n, proto)) return;
  /* Registration parses string defaults; ours are parsed already. */
  AttrValue dflt[REG_MAX_ATTRS];
  memcpy(dflt, proto->dflt, sizeof dflt);
  for (int i = 0; i < n->list3.n; i++) proto->attrs[i].dflt = NULL;
  if (!L->prog->user_ops) L->prog->user_ops = reg_new();
  reg_add(L->prog->user_ops, proto);
  u->registry = L->prog->user_ops;
  for (int i = 0; i < n->list3.n; i++) {
    proto->dflt[i] = dflt[i];
    proto->has_dflt[i] = true;
  }
}

/* ---- statements ----------------------------------------------------------- */

/* Names assigned anywhere in stmts (nested bodies included), in order. */
static void collect_assigned(Lowerer *L, const AstList *stmts, const char ***names, int *n, int *cap,
                             Span **where) {
  for (int i = 0; i < stmts->n; i++) {
    const AstNode *s = stmts->items[i];
    if (s->kind == AST_ASSIGN) {
      for (int k = 0; k < s->list.n; k++) {
        const AstNode *t = s->list.items[k];
        if (t->kind != AST_GRADNAME && (t->kind != AST_NAME || strcmp(t->name, "_") == 0)) continue;
        /* x@GRAD in a grad body is bound under that name */
        const char *name = t->kind == AST_GRADNAME ? name_grad(L->arena, t->name) : t->name;
        bool seen = false;
        for (int j = 0; j < *n && !seen; j++) seen = strcmp((*names)[j], name) == 0;
        if (seen) continue;
        if (*n == *cap) {
          *cap = *cap ? *cap * 2 : 8;
          const char **nn = arena_alloc(L->arena, sizeof *nn * (size_t)*cap);
          Span *nw = arena_alloc(L->arena, sizeof *nw * (size_t)*cap);
          if (*n) memcpy(nn, *names, sizeof *nn * (size_t)*n), memcpy(nw, *where, sizeof *nw * (size_t)*n);
          *names = nn, *where = nw;
        }
        (*where)[*n] = t->span;
        (*names)[(*n)++] = name;
      }
    } else if (s->kind == AST_WHILE) {
      collect_assigned(L, &s->b->list, names, n, cap, where);
    } else if (s->kind == AST_IF) {
      collect_assigned(L, &s->b->list, names, n, cap, where);
      if (s->c) {
        AstList one = {(AstNode **)&s->c, 1, 1};
        collect_assigned(L, s->c->kind == AST_BLOCK ? &s->c->list : &one, names, n, cap, where);
      }
    }
  }
}

static bool in_subtree(const Program *p, int blk, int root) {
  while (blk >= 0) {
    if (blk == root) return true;
    blk = p->blocks[blk]->parent;
  }
  return false;
}

static void add_capture(Lowerer *L, OpDesc *op, const char *name, int root) {
  const VarDesc *v = prog_var(L->prog, name);
  if (!v || in_subtree(L->prog, v->block, root)) return;
  Slot *s = op_add_input(L->prog, op, "Input");
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->args[i], name) == 0) return;
  slot_push(L->prog, s, name);
}

/* Lists in op's Input slot every variable that block `blk` (and its
 * sub-blocks) reads but does not declare. */
static void add_captures(Lowerer *L, OpDesc *op, int blk, int root) {
  const Block *b = L->prog->blocks[blk];
  for (int i = 0; i < b->nops; i++) {
    const OpDesc *o = b->ops[i];
    for (int s = 0; s < o->nin; s++)
      for (int k = 0; k < o->in[s].n; k++) add_capture(L, op, o->in[s].args[k], root);
    for (int a = 0; a < o->nattrs; a++)
      if (o->attrs[a].v.type == ATTR_BLOCK) add_captures(L, op, (int)o->attrs[a].v.u.i, root);
  }
  for (int i = 0; i < b->nresults; i++) add_capture(L, op, b->results[i], root);
}

static bool check_cond_value(Lowerer *L, const char *c, Span at, const char *what) {
  const VarDesc *v = prog_var(L->prog, c);
  if (v->dtype != DT_BOOL && v->dtype != DT_UNKNOWN) {
    diag_error(L->diag, at, "the condition of %s must be a bool scalar, got %s (compare it, e.g. x > 0)",
               what, dtype_name(v->dtype));
    return false;
  }
  int64_t n = shape_numel(&v->shape);
  char buf[128];
  if (v->shape.rank > 0 && n != 1 && n >= 0) {
    diag_error(L->diag, at, "the condition of %s must be a scalar, got shape %s (reduce it, e.g. with mean)",
               what, shape_str(&v->shape, buf, sizeof buf));
    return false;
  }
  return true;
}

/* Marks names assigned in a body but not bound after it, so reading them
 * later explains why they have no value. */
static void bind_locals(Lowerer *L, const char **names, const Span *where, int n, const char *why) {
  for (int i = 0; i < n; i++) {
    Binding *b = lookup(L, names[i]);
    if (b && b->kind != BIND_LOCAL) continue;
    b = bind(L, L->scope, names[i], BIND_LOCAL);
    b->where = where[i];
    b->why = why;
  }
}

/* Blocks nest in the source only 256 deep (the parser's limit), but a
 * function's body nests inside the block that calls it: the nesting is
 * bounded here, so every walk over nested blocks (dump, backward, the
 * executor) is too. */
static bool nesting_ok(Lowerer *L, Span at) {
  int depth = 0;
  for (const Block *b = L->block; b->idx > 0; b = L->prog->blocks[b->parent]) depth++;
  if (depth < LOWER_MAX_BLOCKS) return true;
  diag_error(L->diag, at, "blocks nested too deeply (more than %d levels of while, if and else if, "
             "counting the functions called)", LOWER_MAX_BLOCKS);
  return false;
}

static Block *push_block(Lowerer *L) {
  Block *b = prog_add_block(L->prog, L->block->idx);
  L->block = b;
  L->scope = scope_new(L, L->scope);
  return b;
}

/* Runs shape inference again over a block whose args were widened, nested
 * blocks first. */
static void reinfer_block(Lowerer *L, Block *b) {
  for (int i = 0; i < b->nops; i++) {
    OpDesc *op = b->ops[i];
    const Attr *sub = op_attr(op, "sub_block"), *els = op_attr(op, "else_block");
    if (sub) {
      /* only a loop's block takes the op's X as its args; a grad op's block
       * (while_grad) has args of its own */
      const OpProto *proto = reg_find_op(L->prog, op->type);
      Block *sb = L->prog->blocks[sub->v.u.i];
      const Slot *x = proto && (proto->flags & OP_LOOP) ? op_input(op, "X") : NULL;
      for (int k = 0; x && k < x->n && k < sb->nargs; k++) {
        VarDesc *arg = prog_var(L->prog, sb->args[k]);
        const VarDesc *init = prog_var(L->prog, x->args[k]);
        if (arg && init) arg->shape = shape_join(&arg->shape, &init->shape);
      }
      reinfer_block(L, sb);
    }
    if (els) reinfer_block(L, L->prog->blocks[els->v.u.i]);
    reg_infer(L->prog, b, op);
  }
}

/* A carried value whose shape changes from turn to turn (a growing concat)
 * gets the shape all turns fit: the args widen until the body's results fit
 * them. */
static void widen_loop(Lowerer *L, Block *body) {
  for (int iter = 0; iter < 4; iter++) {
    bool changed = false;
    for (int k = 0; k < body->nargs; k++) {
      VarDesc *arg = prog_var(L->prog, body->args[k]);
      const VarDesc *res = prog_var(L->prog, body->results[k]);
      Shape j = iter < 3 ? shape_join(&arg->shape, &res->shape) : shape_unknown();
      if (!shape_eq(&j, &arg->shape)) arg->shape = j, changed = true;
    }
    if (!changed) return;
    reinfer_block(L, body);
  }
}

/* A block's results are its own variables, distinct from its args: a
 * value that comes from outside (or is carried unchanged) is copied, so
 * the backward can give every result its own gradient. */
static const char *block_local(Lowerer *L, const char *var, const char *name, Span at) {
  const VarDesc *v = prog_var(L->prog, var);
  if (v->block == L->block->idx && !(v->flags & VAR_ARG)) return var;
  OpDesc *op = new_op(L, "assign", at);
  add_in(L, op, "X", var);
  const char *out = add_out(L, op, "Out", qualify(L, name));
  finish_op(L, op);
  return out;
}

/* A function's constant argument that a while or if body assigns becomes
 * a value first, so the body's op can carry it. */
static void materialize(Lowerer *L, const char **names, int n) {
  for (int i = 0; i < n; i++) {
    const Binding *b = lookup(L, names[i]);
    if (!b || b->kind != BIND_CONST || !b->cval || const_has_string(b->cval)) continue;
    const char *v = lower_expr(L, b->cval, qualify(L, names[i]));
    if (v) bind_var(L, names[i], v);
  }
}

/* while COND { BODY } */
static void lower_while(Lowerer *L, const AstNode *n) {
  const char **names = NULL;
  Span *where = NULL;
  int nn = 0, cap = 0;
  if (!nesting_ok(L, n->span)) return;
  collect_assigned(L, &n->b->list, &names, &nn, &cap, &where);
  materialize(L, names, nn);
  const char *cond0 = lower_expr(L, n->a, NULL);
  if (!cond0 || !check_cond_value(L, cond0, n->a->span, "while")) return;
  const char *carried[256], *inits[256];
  int nc = 0;
  for (int i = 0; i < nn; i++) {
    Binding *b = lookup(L, names[i]);
    if (!b || b->kind != BIND_VAR) continue;
    if (nc == 256) {
      diag_error(L->diag, n->span, "too many loop-carried names");
      return;
    }
    carried[nc] = names[i];
    inits[nc++] = b->var;
  }
  Block *outer = L->block;
  Scope *outer_scope = L->scope;
  Block *body = push_block(L);
  for (int k = 0; k < nc; k++) {
    const VarDesc *init = prog_var(L->prog, inits[k]);
    VarDesc *arg = prog_add_var(L->prog, body, prog_fresh(L->prog, qualify(L, carried[k])));
    arg->dtype = init->dtype;
    arg->shape = init->shape;
    arg->flags = VAR_ARG;
    arg->span = n->span;
    arg->user_name = carried[k];
    *ARENA_PUSH(L->arena, body->args, body->nargs, body->capargs) = arg->name;
    bind_var(L, carried[k], arg->name);
  }
  bool ok = lower_stmts(L, &n->b->list, false);
  const char *cond1 = ok ? lower_expr(L, n->a, NULL) : NULL;
  if (cond1) {
    for (int k = 0; k < nc; k++) {
      const Binding *rb = lookup(L, carried[k]);
      const char *res = rb ? rb->var : body->args[k];
      const VarDesc *a = prog_var(L->prog, body->args[k]), *r = prog_var(L->prog, res);
      if (r->dtype != a->dtype && r->dtype != DT_UNKNOWN) {
        diag_error(L->diag, n->span,
                   "'%s' is %s before the loop but %s after a turn; give it one type (e.g. bind it to %s before the loop)",
                   carried[k], dtype_name(a->dtype), dtype_name(r->dtype),
                   r->dtype == DT_F32 ? "0.0" : r->dtype == DT_BOOL ? "a bool" : "an integer");
        ok = false;
      }
      res = block_local(L, res, carried[k], n->span);
      *ARENA_PUSH(L->arena, body->results, body->nresults, body->capresults) = res;
    }
    *ARENA_PUSH(L->arena, body->results, body->nresults, body->capresults) = cond1;
    if (ok) widen_loop(L, body);
  }
  L->block = outer;
  L->scope = outer_scope;
  if (!cond1 || !ok) return;
  OpDesc *op = new_op(L, "while", span_join(n->span, n->a->span));
  op->span = (Span){n->span.file, n->span.start, n->span.start + 5};
  add_in(L, op, "Cond", cond0);
  op_add_input(L->prog, op, "X");
  for (int k = 0; k < nc; k++) add_in(L, op, "X", inits[k]);
  op_add_input(L->prog, op, "Input");
  add_captures(L, op, body->idx, body->idx);
  op_add_output(L->prog, op, "Out");
  const char *outs[256];
  for (int k = 0; k < nc; k++) outs[k] = add_out(L, op, "Out", qualify(L, carried[k]));
  op_set_attr(L->prog, op, "sub_block", attr_block(body->idx));
  finish_op(L, op);
  L->bind_at = n->span;
  for (int k = 0; k < nc; k++) bind_var(L, carried[k], outs[k]);
  bind_locals(L, names, where, nn,
              "is assigned only inside the while body, so it has no value when the loop runs zero "
              "times; bind it before the loop");
}

/* if COND { THEN } [else { ELSE } | else if ...] */
static void lower_if(Lowerer *L, const AstNode *n) {
  const char **tn = NULL, **en = NULL;
  Span *tw = NULL, *ew = NULL;
  int ntn = 0, nen = 0, tcap = 0, ecap = 0;
  AstList else_one = {(AstNode **)&n->c, 1, 1};
  const AstList *else_stmts = !n->c ? NULL : n->c->kind == AST_BLOCK ? &n->c->list : &else_one;
  if (!nesting_ok(L, n->span)) return;
  collect_assigned(L, &n->b->list, &tn, &ntn, &tcap, &tw);
  if (else_stmts) collect_assigned(L, else_stmts, &en, &nen, &ecap, &ew);
  materialize(L, tn, ntn);
  materialize(L, en, nen);
  const char *cond = lower_expr(L, n->a, NULL);
  if (!cond || !check_cond_value(L, cond, n->a->span, "if")) return;
  /* Candidates: every name either branch assigns. */
  const char *cand[256];
  int nc = 0;
  for (int pass = 0; pass < 2; pass++) {
    const char **names = pass ? en : tn;
    int count = pass ? nen : ntn;
    for (int i = 0; i < count; i++) {
      bool dup = false;
      for (int j = 0; j < nc && !dup; j++) dup = strcmp(cand[j], names[i]) == 0;
      if (dup) continue;
      if (nc == 256) {
        diag_error(L->diag, n->span, "too many names assigned in one if");
        return;
      }
      cand[nc++] = names[i];
    }
  }
  /* Lower both branches, noting each candidate's value at the end of each
   * (NULL where it has none). */
  Block *outer = L->block;
  Scope *outer_scope = L->scope;
  Block *branches[2];
  const char *vals[2][256];
  bool ok = true;
  for (int br = 0; br < 2; br++) {
    branches[br] = push_block(L);
    if (br == 0) ok &= lower_stmts(L, &n->b->list, false);
    else if (else_stmts) ok &= lower_stmts(L, else_stmts, false);
    for (int k = 0; k < nc; k++) {
      Binding *b = lookup(L, cand[k]);
      vals[br][k] = b && b->kind == BIND_VAR ? b->var : NULL;
    }
    L->block = outer;
    L->scope = outer_scope;
  }
  if (!ok) return;
  /* The if's outputs: the names with a value after either branch. */
  const char *outs_names[256];
  int no = 0;
  for (int k = 0; k < nc; k++) {
    if (!vals[0][k] || !vals[1][k]) continue;
    const VarDesc *a = prog_var(L->prog, vals[0][k]);
    const VarDesc *b = prog_var(L->prog, vals[1][k]);
    if (a->dtype != b->dtype && a->dtype != DT_UNKNOWN && b->dtype != DT_UNKNOWN) {
      diag_error(L->diag, n->span, "'%s' is %s in the then branch but %s in the else branch", cand[k],
                 dtype_name(a->dtype), dtype_name(b->dtype));
      return;
    }
    for (int br = 0; br < 2; br++) {
      L->block = branches[br];
      const char *r = block_local(L, vals[br][k], cand[k], n->span);
      *ARENA_PUSH(L->arena, branches[br]->results, branches[br]->nresults, branches[br]->capresults) = r;
    }
    L->block = outer;
    outs_names[no++] = cand[k];
  }
  OpDesc *op = new_op(L, "conditional_block", n->span);
  op->span = (Span){n->span.file, n->span.start, n->span.start + 2};
  add_in(L, op, "Cond", cond);
  op_add_input(L->prog, op, "Input");
  add_captures(L, op, branches[0]->idx, branches[0]->idx);
  add_captures(L, op, branches[1]->idx, branches[1]->idx);
  op_add_output(L->prog, op, "Out");
  const char *outs[256];
  for (int k = 0; k < no; k++) outs[k] = add_out(L, op, "Out", qualify(L, outs_names[k]));
  op_set_attr(L->prog, op, "sub_block", attr_block(branches[0]->idx));
  op_set_attr(L->prog, op, "else_block", attr_block(branches[1]->idx));
  finish_op(L, op);
  L->bind_at = n->span;
  for (int k = 0; k < no; k++) bind_var(L, outs_names[k], outs[k]);
  const char *why = "is assigned in only one branch of the if, so it has no value when the other "
                    "branch runs; bind it before the if";
  bind_locals(L, tn, tw, ntn, why);
  bind_locals(L, en, ew, nen, why);
}

/* The names an assignment whose value failed (its error reported) would
 * have bound: later reads of them are quiet, rather than "unknown name". */
static void bind_failed(Lowerer *L, const AstNode *n) {
  for (int k = 0; k < n->list.n; k++) {
    const AstNode *t = n->list.items[k];
    if (t->kind != AST_NAME || strcmp(t->name, "_") == 0) continue;
    Binding *old = lookup(L, t->name);
    if (old && old->kind == BIND_FUNC) continue;
    L->bind_at = t->span;
    bind(L, L->scope, t->name, BIND_FAILED);
  }
}

/* NAME = EXPR, A, B = EXPR, _ = EXPR, x@GRAD = EXPR */
static void lower_assign(Lowerer *L, const AstNode *n) {
  int nt = n->list.n;
  if (nt > 64) {
    diag_error(L->diag, n->span, "too many names assigned at once");
    return;
  }
  const char *hints[64], *outs[64];
  for (int k = 0; k < nt; k++) {
    const AstNode *t = n->list.items[k];
    outs[k] = NULL;
    if (t->kind == AST_GRADNAME) {
      if (!L->in_grad) {
        diag_error(L->diag, t->span, "'%s@GRAD' can only be assigned inside a grad { } block", t->name);
        return;
      }
      bool is_input = false;
      for (int i = 0; L->opdef && i < L->opdef->list.n && !is_input; i++)
        is_input = strcmp(L->opdef->list.items[i]->name, t->name) == 0;
      if (!is_input) {
        diag_error(L->diag, t->span, "'%s' is not an input of op '%s', so '%s@GRAD' cannot be assigned",
                   t->name, L->opdef ? L->opdef->name : "?", t->name);
        return;
      }
      hints[k] = qualify(L, name_grad(L->arena, t->name));
    } else {
      hints[k] = strcmp(t->name, "_") == 0 ? NULL : qualify(L, t->name);
    }
  }
  /* NAME = a numeric constant (n = dim(x, 1) // 2): the name is a constant
   * too, usable where one is required.  (A string is not a value: only a
   * function's argument may be one.) */
  const AstNode *cval = NULL;
  if (nt == 1 && n->list.items[0]->kind == AST_NAME && hints[0]) {
    int before = L->diag->nerrors;
    cval = fold_const(L, n->a);
    if (L->diag->nerrors != before) {
      bind_failed(L, n);
      return;
    }
    if (cval && const_has_string(cval)) cval = NULL;   /* lower_expr says why */
  }
  /* In a function's body the constant is all the name is: a value is made
   * only where the body uses it as one (as for a constant argument). */
  if (cval && L->scope->fn_body) {
    L->bind_at = n->list.items[0]->span;
    bind(L, L->scope, n->list.items[0]->name, BIND_CONST)->cval = cval;
    return;
  }
  bool ok;
  if (nt == 1) {
    ok = (outs[0] = lower_expr(L, n->a, hints[0])) != NULL;
  } else if (n->a->kind != AST_CALL) {
    diag_error(L->diag, n->a->span, "assigning %d names needs a call that returns %d values", nt, nt);
    ok = false;
  } else {
    int got = lower_call(L, n->a, hints, nt, outs);
    ok = got >= nt;
    if (got >= 0 && got < nt)
      diag_error(L->diag, n->a->opspan, "'%s' gives %d value%s, but %d names are assigned", n->a->name, got,
                 got == 1 ? "" : "s", nt);
  }
  if (!ok) {
    bind_failed(L, n);
    return;
  }
  for (int k = 0; k < nt; k++) {
    const AstNode *t = n->list.items[k];
    if (t->kind == AST_GRADNAME) {
      bind_var(L, name_grad(L->arena, t->name), outs[k]);
      continue;
    }
    if (strcmp(t->name, "_") == 0) continue;
    Binding *old = lookup(L, t->name);
    if (old && old->kind == BIND_FUNC && L->scope == L->global) {
      diag_error(L->diag, t->span, "'%s' is a function; choose another name", t->name);
      continue;
    }
    L->bind_at = t->span;
    bind_var(L, t->name, outs[k]);
    Binding *nb = cval ? scope_find_here(L->scope, t->name) : NULL;
    if (nb) nb->cval = cval;
  }
}

/* NAME { KEY = VALUE ... }: a configuration block (train { epochs = 5 }).
 * Values are constants, names (kept as strings) or lists of them; what the
 * keys mean is checked by their user (train.c). */
static void lower_config(Lowerer *L, const AstNode *n) {
  static const char *const blocks[] = {"train"};
  if (strcmp(n->name, "train") != 0) {
    const char *near = diag_nearest(n->name, blocks, 1);
    diag_error(L->diag, n->opspan, "unknown configuration block '%s'%s%s%s", n->name, DIAG_MEAN(near));
    return;
  }
  for (int i = 0; i < n->a->list.n; i++) {
    const AstNode *s = n->a->list.items[i];
    if (s->kind != AST_ASSIGN || s->list.n != 1 || s->list.items[0]->kind != AST_NAME) {
      diag_error(L->diag, s->span, "a %s block holds settings: KEY = VALUE", n->name);
      continue;
    }
    const AstNode *v = s->a;
    Setting st = {.block = n->name, .key = s->list.items[0]->name, .span = s->span};
    const char *got;
    if (v->kind == AST_NAME || v->kind == AST_STRING) {
      st.value = attr_string(L->prog, v->name);
      st.is_name = v->kind == AST_NAME;
    } else if (v->kind == AST_BOOL) {
      st.value = attr_bool(v->ival);
    } else if (const_eval(L, v, ATTR_INT, &st.value, &got) || const_eval(L, v, ATTR_FLOAT, &st.value, &got)) {
    } else if (v->kind == AST_LIST) {
      bool names = true;
      for (int k = 0; k < v->list.n; k++)
        names &= v->list.items[k]->kind == AST_NAME || v->list.items[k]->kind == AST_STRING;
      if (names) {
        st.value.type = ATTR_STRINGS;
        st.value.n = v->list.n;
        st.value.u.strings = arena_alloc(L->arena, sizeof(char *) * (size_t)(v->list.n + 1));
        for (int k = 0; k < v->list.n; k++) st.value.u.strings[k] = v->list.items[k]->name;
      } else if (!const_eval(L, v, ATTR_FLOATS, &st.value, &got)) {
        diag_error(L->diag, v->span, "a setting's value is a number, a string, a name or a list of them");
        continue;
      }
    } else {
      diag_error(L->diag, v->span, "a setting's value is a number, a string, a name or a list of them");
      continue;
    }
    *ARENA_PUSH(L->arena, L->prog->settings, L->prog->nsettings, L->prog->capsettings) = st;
  }
}

static bool only_top(Lowerer *L, const AstNode *n, bool top, const char *what) {
  if (top) return true;
  diag_error(L->diag, n->span, "%s is only allowed at the top level of a file", what);
  return false;
}

static bool load_import(Lowerer *L, const AstNode *n);
static void load_plugin(Lowerer *L, const AstNode *n);

/* What a statement that may stand only at the top level of a file is
 * called, or NULL. */
static const char *top_level_only(AstKind k) {
  switch (k) {
  case AST_IMPORT: return "import";
  case AST_LOAD: return "load";
  case AST_INPUT: return "an input declaration";
  case AST_PARAM: return "a param declaration";
  case AST_STATE: return "a state declaration";
  case AST_DEF: return "def";
  case AST_OPDEF: return "op";
  case AST_CONFIG: return "a configuration block";
  default: return NULL;
  }
}

static bool lower_stmts(Lowerer *L, const AstList *stmts, bool top) {
  int before = L->diag->nerrors;
  for (int i = 0; i < stmts->n; i++) {
    const AstNode *s = stmts->items[i];
    if (!program_fits(L, s->span)) return false;
    const char *what = top_level_only(s->kind);
    bool layer = (s->kind == AST_PARAM || s->kind == AST_STATE) && L->fn;   /* section 10 */
    if (layer && (L->opdef || L->in_grad)) {
      diag_error(L->diag, s->span, "%s is not allowed in the body of an op (an op has no parameters of its own)", what);
      continue;
    }
    if (what && !layer && !only_top(L, s, top, what)) continue;
    switch (s->kind) {
    case AST_IMPORT: load_import(L, s); break;
    case AST_LOAD: load_plugin(L, s); break;
    case AST_INPUT: lower_input(L, s); break;
    case AST_PARAM: lower_param(L, s, VAR_PARAM); break;
    case AST_STATE: lower_param(L, s, VAR_KEPT | VAR_STOP_GRADIENT); break;
    case AST_DEF:
      if (reg_find_op(L->prog, s->name) && !lookup(L, s->name))
        diag_error(L->diag, s->span, "'%s' is the name of an op; choose another name for the function", s->name);
      else
        bind(L, L->global, s->name, BIND_FUNC)->def = s;
      break;
    case AST_OPDEF: lower_opdef(L, s); break;
    case AST_WHILE: lower_while(L, s); break;
    case AST_IF: lower_if(L, s); break;
    case AST_RETURN:
      diag_error(L->diag, s->span, L->fn ? "return must be the last statement of a function"
                                         : "return outside a function");
      break;
    case AST_ASSIGN: lower_assign(L, s); break;
    case AST_CONFIG: lower_config(L, s); break;
    case AST_EXPR:
      if (s->a->kind == AST_CALL) lower_call(L, s->a, NULL, 0, NULL);
      else lower_expr(L, s->a, NULL);
      break;
    case AST_BLOCK: lower_stmts(L, &s->list, false); break;
    default: diag_error(L->diag, s->span, "expected a statement"); break;
    }
  }
  return L->diag->nerrors == before;
}

/* ---- files and imports ----------------------------------------------------- */

static bool is_loaded(Lowerer *L, const char *real) {
  for (int i = 0; i < L->nloaded; i++)
    if (strcmp(L->loaded[i], real) == 0) return true;
  return false;
}

/* Parses and lowers source `file` at the top level, as part of the import
 * chain. */
static bool lower_source_file(Lowerer *L, int file) {
  const Source *src = &L->diag->files[file];
  const char *real = src->realpath ? src->realpath : src->path;
  *ARENA_PUSH(L->arena, L->loaded, L->nloaded, L->caploaded) = arena_strdup(L->arena, real);
  *ARENA_PUSH(L->arena, L->importing, L->nimporting, L->capimporting) = arena_strdup(L->arena, real);
  AstNode *root = ast_parse(L->arena, L->diag, file);
  bool ok = root && lower_block(L, root, file);
  L->nimporting--;
  return ok;
}

static bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* import "NAME": NAME.net from the importing script's folder, then each
 * folder of NETRUN_PATH, then the installed stdlib. */
static bool load_import(Lowerer *L, const AstNode *n) {
  const char *name = n->name;
  size_t len = strlen(name);
  if (len == 0) {
    diag_error(L->diag, n->span, "import needs a name");
    return false;
  }
  const char *file = len > 4 && strcmp(name + len - 4, ".net") == 0 ? name : arena_printf(L->arena, "%s.net", name);
  const char *dirs[64];
  int nd = 0;
  const char *here = L->diag->files[n->span.file].path;
  const char *slash = strrchr(here, '/');
  dirs[nd++] = slash ? arena_strndup(L->arena, here, (size_t)(slash - here)) : ".";
  const char *np = getenv("NETRUN_PATH");
  if (np && *np) {
    char *copy = arena_strdup(L->arena, np);
    for (char *tok = strtok(copy, ":"); tok && nd < 62; tok = strtok(NULL, ":"))
      if (*tok) dirs[nd++] = tok;
  }
  if (L->stdlib_dir) dirs[nd++] = L->stdlib_dir;
  const char *found = NULL;
  if (file[0] == '/') found = file_exists(file) ? file : NULL;
  for (int i = 0; i < nd && !found && file[0] != '/'; i++) {
    const char *path = strcmp(dirs[i], ".") == 0 ? file : arena_printf(L->arena, "%s/%s", dirs[i], file);
    if (file_exists(path)) found = path;
  }
  if (!found) {
    size_t k = 0;
    char searched[1024] = "";
    for (int i = 0; i < nd && k < sizeof searched; i++)
      k += (size_t)snprintf(searched + k, sizeof searched - k, "%s%s", i ? ", " : "", dirs[i]);
    diag_error(L->diag, n->span, "cannot find '%s' (searched %s)", file, searched);
    return false;
  }
  char *real = mem_realpath(found);
  if (!real) {
    diag_error(L->diag, n->span, "cannot open '%s'", found);
    return false;
  }
  for (int i = 0; i < L->nimporting; i++)
    if (strcmp(L->importing[i], real) == 0) {
      char chain[2048];
      size_t k = 0;
      for (int j = i; j < L->nimporting && k < sizeof chain; j++) {
        const char *b = strrchr(L->importing[j], '/');
        k += (size_t)snprintf(chain + k, sizeof chain - k, "%s -> ", b ? b + 1 : L->importing[j]);
      }
      const char *b = strrchr(real, '/');
      snprintf(chain + (k < sizeof chain ? k : sizeof chain - 1), k < sizeof chain ? sizeof chain - k : 1, "%s",
               b ? b + 1 : real);
      diag_error(L->diag, n->span, "import cycle: %s", chain);
      mem_free(real);
      return false;
    }
  if (is_loaded(L, real)) {
    mem_free(real);
    return true;
  }
  mem_free(real);
  int idx = diag_load_file(L->diag, found);
  if (idx < 0) return false;
  return lower_source_file(L, idx);
}

/* load "PATH.so": a plugin (plugin.h), PATH relative to the loading
 * script's folder, if the command line allows it (plugin.h: the trust
 * model; the folder it allows is the one of the script lower_file lowers,
 * not an imported file's).  Its ops are registered now, so the statements
 * after it can call them. */
static void load_plugin(Lowerer *L, const AstNode *n) {
  if (!n->name[0]) {
    diag_error(L->diag, n->span, "load needs the path of a plugin");
    return;
  }
  const char *here = L->diag->files[n->span.file].path;
  const char *slash = strrchr(here, '/');
  const char *path = n->name[0] == '/' || !slash
                         ? n->name
                         : arena_printf(L->arena, "%.*s/%s", (int)(slash - here), here, n->name);
  plugin_load_for_script(L->diag, n->span, path, L->script_dir ? L->script_dir : ".", L->prog->user_ops);
}

/* ---- entry points ------------------------------------------------------------ */

Lowerer *lower_new(Arena *arena, Diag *diag, const char *stdlib_dir, const UserOpImpl *user_ops) {
  assert(user_ops);
  Lowerer *L = arena_alloc(arena, sizeof *L);
  L->arena = arena;
  L->diag = diag;
  L->prog = prog_new(arena, diag);
  L->global = scope_new(L, NULL);
  L->scope = L->global;
  L->fn_parent = L->global;
  L->block = L->prog->blocks[0];
  L->max_ops = LOWER_MAX_OPS;
  L->ncalled = arena_alloc(arena, sizeof *L->ncalled);
  L->stdlib_dir = stdlib_dir ? arena_strdup(arena, stdlib_dir) : NULL;
  L->user_ops = user_ops;
  return L;
}

void lower_free(Lowerer *L) { (void)L; }

void lower_set_max_ops(Lowerer *L, int64_t max_ops) { L->max_ops = max_ops; }

Program *lower_program(Lowerer *L) { return L->prog; }

bool lower_block(Lowerer *L, const AstNode *root, int file) {
  (void)file;
  return lower_stmts(L, &root->list, true);
}

/* Each script state keeps, at the end of a training step, the value last
 * bound to its name: one of its own shape and dtype, bound in block 0. */
static void check_states(Lowerer *L) {
  const Block *b0 = L->prog->blocks[0];
  char a[128], b[128];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *s = b0->vars[i];
    const VarDesc *v = s->flags & VAR_KEPT && s->next ? prog_var(L->prog, s->next) : NULL;
    if (!v || v->dtype == DT_UNKNOWN) continue;
    if (v->block != 0)
      diag_error(L->diag, s->next_at, "state '%s' is given its new value inside a while or if body, where the value "
                 "cannot be kept for the next step; bind it outside the body", s->name);
    else if (v->dtype != s->dtype || (v->shape.rank >= 0 && !shape_eq(&v->shape, &s->shape)))
      diag_error(L->diag, s->next_at, "state '%s' is %s%s, but the value last bound to '%s' is %s%s; a state keeps "
                 "its dtype and shape from step to step", s->name, dtype_name(s->dtype),
                 shape_str(&s->shape, a, sizeof a), strrchr(s->name, '.') ? strrchr(s->name, '.') + 1 : s->name,
                 dtype_name(v->dtype),
                 shape_str(&v->shape, b, sizeof b));
  }
}

static bool lower_main(Lowerer *L, const char *path, int idx);

void lower_on_bind(Lowerer *L, LowerBindFn fn, void *ctx) {
  L->on_bind = fn;
  L->bind_ctx = ctx;
}

bool lower_file(Lowerer *L, const char *path) {
  int idx = diag_load_file(L->diag, path);
  return idx >= 0 && lower_main(L, path, idx);
}

bool lower_text(Lowerer *L, const char *path, const char *text, size_t len) {
  char *rp = mem_realpath(path);
  int idx = diag_add_source(L->diag, path, rp, text, len);
  mem_free(rp);
  return lower_main(L, path, idx);
}

/* The script at path, source idx of the Diag: its folder is where its
 * imports are looked for first. */
static bool lower_main(Lowerer *L, const char *path, int idx) {
  const char *slash = strrchr(path, '/');
  L->script_dir = !slash ? "." : slash == path ? "/" : arena_strndup(L->arena, path, (size_t)(slash - path));
  bool ok = lower_source_file(L, idx);
  L->script_dir = NULL;
  if (ok) check_states(L);
  merge_load_weights(L);
  lower_export(L);
  return ok && L->diag->nerrors == 0;
}

/* ---- the REPL's session ------------------------------------------------------ */

struct LowerMark {
  ProgMark prog;
  Binding *globals;          /* a copy: bind() rewrites bindings in place */
  int nglobals;
  const char **user_ops;     /* the types the program defined */
  int nuser;
  int nloaded;
  int64_t nops;              /* ops made: an entry undone gives its ops back */
  StrMap ncalled;            /* the top level's counts of calls (a copy, on the heap) */
};

LowerMark *lower_mark(Lowerer *L) {
  LowerMark *m = mem_calloc(1, sizeof *m);
  prog_mark(L->prog, &m->prog);
  m->nglobals = L->global->n;
  m->globals = mem_alloc(NULL, sizeof *m->globals * (size_t)(m->nglobals + 1));
  if (m->nglobals) memcpy(m->globals, L->global->b, sizeof *m->globals * (size_t)m->nglobals);
  int n = 0;
  const OpProto *const *ops = L->prog->user_ops ? reg_all(L->prog->user_ops, &n) : NULL;
  m->user_ops = mem_alloc(NULL, sizeof *m->user_ops * (size_t)(n + 1));
  for (int i = 0; i < n; i++) m->user_ops[i] = ops[i]->type;
  m->nuser = n;
  m->nloaded = L->nloaded;
  m->nops = L->nops;
  for (size_t i = 0; i < L->ncalled->cap; i++)
    if (L->ncalled->keys[i]) strmap_put(NULL, &m->ncalled, L->ncalled->keys[i], L->ncalled->vals[i]);
  return m;
}

void lower_rollback(Lowerer *L, LowerMark *m) {
  prog_rollback(L->prog, &m->prog);
  L->nops = m->nops;
  L->global->n = m->nglobals;
  if (m->nglobals) memcpy(L->global->b, m->globals, sizeof *m->globals * (size_t)m->nglobals);
  /* The name index cannot delete: rebuilt from the bindings that stay. */
  memset(&L->global->index, 0, sizeof L->global->index);
  for (int i = 0; i < L->global->n; i++) strmap_put(L->arena, &L->global->index, L->global->b[i].name, i);
  if (L->prog->user_ops) {
    int n;
    const OpProto *const *ops = reg_all(L->prog->user_ops, &n);
    for (int i = n - 1; i >= 0; i--) {
      bool kept = false;
      for (int k = 0; k < m->nuser && !kept; k++) kept = strcmp(m->user_ops[k], ops[i]->type) == 0;
      if (!kept) reg_remove(L->prog->user_ops, ops[i]->type);
    }
  }
  L->nloaded = m->nloaded;
  /* A failed statement may have left the lowerer anywhere. */
  L->scope = L->global;
  L->fn_parent = L->global;
  L->block = L->prog->blocks[0];
  L->fn = NULL;
  L->ncalls = 0;
  L->in_grad = false;
  L->opdef = NULL;
  L->nimporting = 0;
  /* An undone entry's calls do not count: the next call takes the name. */
  L->pscope = NULL;
  L->pscope_explicit = false;
  L->site = NULL;
  L->ncalled = arena_alloc(L->arena, sizeof *L->ncalled);
  for (size_t i = 0; i < m->ncalled.cap; i++)
    if (m->ncalled.keys[i]) strmap_put(L->arena, L->ncalled, m->ncalled.keys[i], m->ncalled.vals[i]);
  lower_mark_free(m);
}

void lower_mark_free(LowerMark *m) {
  if (!m) return;
  prog_mark_free(&m->prog);
  mem_free(m->globals);
  mem_free(m->user_ops);
  strmap_free(&m->ncalled);
  mem_free(m);
}

/* Does this expression statement give a value to show?  A call to print,
 * or to a function without a return, does not. */
static bool gives_value(Lowerer *L, const AstNode *e) {
  if (e->kind != AST_CALL) return true;
  const Binding *b = lookup(L, e->name);
  if (b && b->kind == BIND_FUNC) {
    const AstList *body = &b->def->a->list;
    const AstNode *last = body->n ? body->items[body->n - 1] : NULL;
    return last && last->kind == AST_RETURN && last->list.n > 0;
  }
  const OpProto *p = b ? NULL : reg_find_op(L->prog, e->name);
  return !p || p->nout > 0;
}

bool lower_chunk(Lowerer *L, const AstNode *root, LowerStmt **stmts, int *n) {
  int before = L->diag->nerrors;
  L->too_large = false;   /* a session's entry past the op limit says so, each */
  LowerStmt *out = arena_alloc(L->arena, sizeof *out * (size_t)(root->list.n + 1));
  for (int i = 0; i < root->list.n; i++) {
    const AstNode *s = root->list.items[i];
    if (s->kind == AST_EXPR && gives_value(L, s->a)) {
      const char *hint = NULL;
      if (s->a->kind != AST_CALL) out[i].shown = lower_expr(L, s->a, NULL);
      else if (lower_call(L, s->a, &hint, 1, &out[i].shown) == 0)
        diag_error(L->diag, s->a->opspan, "'%s' gives no value", s->a->name);
    } else {
      AstList one = {&root->list.items[i], 1, 1};
      lower_stmts(L, &one, true);
    }
    out[i].end_op = L->prog->blocks[0]->nops;
  }
  *stmts = out;
  *n = root->list.n;
  return L->diag->nerrors == before;
}

const char *lower_global(const Lowerer *L, int i, const char **var) {
  if (i < 0 || i >= L->global->n) return NULL;
  const Binding *b = &L->global->b[i];
  *var = b->kind == BIND_VAR ? b->var : NULL;
  return b->kind == BIND_VAR || b->kind == BIND_FUNC ? b->name : "";
}

int lower_nglobals(const Lowerer *L) { return L->global->n; }

void lower_export(Lowerer *L) {
  for (int i = 0; i < L->global->n; i++)
    if (L->global->b[i].kind == BIND_VAR) prog_set_export(L->prog, L->global->b[i].name, L->global->b[i].var);
}

/* ---- --dtype f64 ----------------------------------------------------------- */

void lower_promote_f64(Lowerer *L) {
  Program *p = L->prog;
  prog_promote_f64(p->startup);
  for (int i = 0; i < p->nblocks; i++) prog_promote_f64(p->blocks[i]);
  reinfer_block(L, p->startup);
  reinfer_block(L, p->blocks[0]);
}
