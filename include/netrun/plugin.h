/* netrun/plugin.h — the C interface of netrun plugins.
 *
 * A plugin is a shared library that adds ops to netrun without rebuilding
 * it.  Its ops join the one registry the built-in ops live in, so a script
 * calls them like any other op, `netrun dump` prints them, `netrun ops`
 * lists them, the backward builder differentiates them and the tape records
 * them.  netrun loads a plugin for `netrun --plugin PATH.so ...` or for a
 * statement `load "PATH.so"` in a script; see netrun-ops(7) for a complete
 * plugin walked through.
 *
 * A plugin defines two symbols:
 *
 *     const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
 *     int netrun_plugin_init(const NetrunApi *api);
 *
 * netrun reads the version first and refuses a plugin built against another
 * API version; then it calls netrun_plugin_init once, which registers the
 * plugin's ops with api->register_op and returns 0 (or calls
 * api->init_error and returns its -1 when it cannot work).  netrun never
 * exports symbols to plugins: everything a plugin calls is in the table
 * `api`, which stays valid until the plugin is unloaded at exit, so the
 * plugin keeps the pointer in a static variable.
 *
 * An op is what a built-in op is (see netrun's src/ir/registry.h): a proto
 * (named input and output slots, typed attributes with defaults and
 * checkers, a doc line), a shape-inference function, a kernel, and a grad
 * maker that emits the op descriptions computing the inputs' gradients —
 * usually one dedicated NAME_grad op that the plugin registers too.  The
 * three callbacks receive a NetrunCtx, an opaque handle on one op at one
 * phase; the api functions that take it say in which phases they work.
 *
 * Build a plugin with
 *
 *     cc -std=c11 -O2 -fPIC -shared -I PREFIX/include -o NAME.so NAME.c
 *
 * This header needs only the C11 standard library.
 */
#ifndef NETRUN_PLUGIN_H
#define NETRUN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

/* The version of this interface.  It changes whenever a type or the
 * NetrunApi table below changes in a way an existing plugin would notice. */
#define NETRUN_PLUGIN_API_VERSION 1

#define NETRUN_MAX_SLOTS 8       /* input (and output) slots of one op */
#define NETRUN_MAX_ATTRS 12      /* attributes of one op */
#define NETRUN_MAX_RANK 8        /* dimensions of one tensor */

#if defined(__GNUC__)
#define NETRUN_PLUGIN_EXPORT __attribute__((visibility("default")))
#define NETRUN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NETRUN_PLUGIN_EXPORT
#define NETRUN_PRINTF(f, a)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- values ------------------------------------------------------------------ */

/* Element types.  bool is one byte per element (0 or 1). */
typedef enum NetrunDType { NETRUN_F32, NETRUN_I64, NETRUN_BOOL } NetrunDType;

/* One dimension as shape inference sees it: a size (n >= 0), a symbolic
 * size bound when data is fed (n == -1, sym names it, e.g. "B"), or unknown
 * (n == -1, sym NULL).  At run time every dimension is a size. */
typedef struct NetrunDim {
  int64_t n;
  const char *sym;
} NetrunDim;

/* rank -1: not even the rank is known. */
typedef struct NetrunShape {
  int rank;
  NetrunDim d[NETRUN_MAX_RANK];
} NetrunShape;

/* A variable as shape inference sees it. */
typedef struct NetrunVar {
  NetrunDType dtype;
  NetrunShape shape;
} NetrunVar;

/* A tensor as a kernel sees it: contiguous, row-major elements at data.
 * Inputs are read-only; outputs are written whole by the kernel.  The view
 * is valid until the kernel returns. */
typedef struct NetrunTensor {
  NetrunDType dtype;
  int rank;
  int64_t shape[NETRUN_MAX_RANK];
  int64_t numel;
  void *data;
} NetrunTensor;

/* ---- attributes ---------------------------------------------------------------- */

typedef enum NetrunAttrType {
  NETRUN_ATTR_INT, NETRUN_ATTR_FLOAT, NETRUN_ATTR_BOOL, NETRUN_ATTR_STRING,
  NETRUN_ATTR_DTYPE, NETRUN_ATTR_INTS, NETRUN_ATTR_FLOATS, NETRUN_ATTR_STRINGS,
} NetrunAttrType;

/* An attribute's value.  A script may give an integer where a float is
 * declared; netrun converts it first, so a value has its declared type. */
typedef struct NetrunAttrValue {
  NetrunAttrType type;
  int n;                           /* element count of the list types */
  union {
    int64_t i;                     /* INT, BOOL (0 or 1), DTYPE (a NetrunDType) */
    double f;                      /* FLOAT */
    const char *s;                 /* STRING */
    const int64_t *ints;           /* INTS */
    const double *floats;          /* FLOATS */
    const char *const *strings;    /* STRINGS */
  } u;
} NetrunAttrValue;

/* An attribute checker: NULL if v is acceptable, else a message that
 * completes "attribute 'NAME' of 'OP' ...", e.g. "must be positive".  It
 * runs on every value a script gives, and the error points at the value. */
typedef const char *(*NetrunAttrCheck)(const NetrunAttrValue *v);

/* ---- an op's definition ------------------------------------------------------------ */

enum {
  NETRUN_SLOT_LIST = 1 << 0,      /* holds any number of variables */
  NETRUN_SLOT_OPTIONAL = 1 << 1,  /* may be left out */
  NETRUN_SLOT_NO_GRAD = 1 << 2,   /* never differentiated (labels, indices) */
};

typedef struct NetrunSlot {
  const char *name;               /* "X"; a grad op's output is "X@GRAD" */
  unsigned flags;
  const char *doc;
} NetrunSlot;

typedef struct NetrunAttr {
  const char *name;
  NetrunAttrType type;
  const char *dflt;               /* in script syntax ("0.01", "[1, 1]", "true");
                                     NULL: the attribute is required */
  NetrunAttrCheck check;          /* may be NULL */
  const char *doc;
} NetrunAttr;

typedef enum NetrunGradKind {
  NETRUN_GRAD_NONE,               /* no gradient: differentiating through it is an error */
  NETRUN_GRAD_COMPOSITE,          /* the grad maker emits ops of existing types */
  NETRUN_GRAD_DEDICATED,          /* the grad maker emits a NAME_grad op of the plugin's */
} NetrunGradKind;

enum {
  NETRUN_OP_SIDE_EFFECT = 1 << 0, /* runs even if nothing reads its outputs */
  NETRUN_OP_RANDOM = 1 << 1,      /* draws from netrun's seeded generator (api->uniform) */
  NETRUN_OP_ZERO_GRAD = 1 << 2,   /* NETRUN_GRAD_NONE because its gradient is zero:
                                     differentiating through it is not an error */
  NETRUN_OP_NO_PREALLOC = 1 << 3, /* the kernel makes its outputs (api->tensor_new_out) */
};

typedef struct NetrunCtx NetrunCtx;   /* one op at one phase (infer, kernel, grad) */
typedef struct NetrunOp NetrunOp;     /* an op a grad maker is emitting */

/* The callbacks return 0, or -1 after api->fail has said why. */
typedef int (*NetrunFn)(NetrunCtx *c);

/* Everything netrun knows about one op type.  Slots and attributes end at
 * the first entry whose name is NULL (so a designated initializer leaves
 * the rest zero).  register_op copies the definition and its strings. */
typedef struct NetrunOpDef {
  const char *type;               /* the name scripts call it by: [A-Za-z_][A-Za-z0-9_]* */
  const char *doc;                /* one line for `netrun ops` */
  NetrunSlot in[NETRUN_MAX_SLOTS];
  NetrunSlot out[NETRUN_MAX_SLOTS];
  NetrunAttr attrs[NETRUN_MAX_ATTRS];
  /* Shape inference: from the inputs' dtypes and shapes (api->var_in) and
   * the attributes, set every output's (api->var_out), or fail.  It runs
   * when a script is lowered, where dimensions may be symbolic or unknown,
   * and again before each kernel call on the concrete shapes: what it sets
   * then is the shape of the outputs the kernel receives. */
  NetrunFn infer;
  /* The kernel: reads the inputs (api->tensor_in), writes the outputs
   * (api->tensor_out), already allocated with the inferred dtype and shape. */
  NetrunFn kernel;
  NetrunGradKind grad_kind;
  /* The grad maker (unless NETRUN_GRAD_NONE): emits the ops computing the
   * gradient of each forward input that needs one (api->grad_in is not
   * NULL) from the forward's inputs, outputs and outputs' gradients.
   * NULL with NETRUN_GRAD_DEDICATED: netrun's default maker emits one
   * NAME_grad op (which must be registered) wired by its slots' names:
   * each input slot of NAME_grad gets the forward's input or output of
   * that name, or for OUT@GRAD the gradient of output OUT; each output
   * slot IN@GRAD gets the gradient of input IN when one is needed; the
   * attributes NAME_grad declares are copied from the forward op. */
  NetrunFn grad;
  unsigned flags;                 /* NETRUN_OP_* */
} NetrunOpDef;

/* ---- the table netrun gives a plugin ---------------------------------------------------
 * Slots are named as in the op's definition.  Functions taking an index i
 * address the i-th variable of a slot (0 for slots that are not lists). */
typedef struct NetrunApi {
  int version;                    /* netrun's NETRUN_PLUGIN_API_VERSION */

  /* ---- in netrun_plugin_init only ---- */
  /* Registers an op.  -1 (after reporting why) if its type is taken, by a
   * built-in op or another plugin's, or the definition is invalid. */
  int (*register_op)(const NetrunOpDef *def);
  /* Says why the plugin cannot initialize; returns -1. */
  int (*init_error)(const char *fmt, ...) NETRUN_PRINTF(1, 2);

  /* ---- every phase ---- */
  const char *(*op_type)(NetrunCtx *c);
  /* The number of variables in input / output slot `slot` of this op (0 for
   * an optional slot left out, or an output nobody needs in a grad op). */
  int (*in_count)(NetrunCtx *c, const char *slot);
  int (*out_count)(NetrunCtx *c, const char *slot);
  /* Attribute `name`, the definition's default when the script gave none:
   * 0, or -1 if the op has no such attribute or it has no value. */
  int (*attr)(NetrunCtx *c, const char *name, NetrunAttrValue *out);
  /* Shorthands: a numeric attribute as an integer or a double (0 if absent). */
  int64_t (*attr_int)(NetrunCtx *c, const char *name);
  double (*attr_float)(NetrunCtx *c, const char *name);
  /* Reports an error about this op, at the script position of its call:
   * "FILE:LINE:COL: error: OPTYPE: MESSAGE".  Returns -1. */
  int (*fail)(NetrunCtx *c, const char *fmt, ...) NETRUN_PRINTF(2, 3);

  /* ---- shape inference ---- */
  /* Input slot[i]'s dtype and shape: 0, or -1 if the op has no such input. */
  int (*var_in)(NetrunCtx *c, const char *slot, int i, NetrunVar *out);
  /* Sets output slot[i]'s dtype and shape. */
  void (*var_out)(NetrunCtx *c, const char *slot, int i, NetrunDType t, const NetrunShape *s);
  /* NumPy broadcasting of a and b into out: 0, or -1 after reporting that
   * they do not broadcast. */
  int (*broadcast)(NetrunCtx *c, const NetrunShape *a, const NetrunShape *b, NetrunShape *out);

  /* ---- kernels ---- */
  /* Input slot[i]: 0, or -1 if the op has no such input. */
  int (*tensor_in)(NetrunCtx *c, const char *slot, int i, NetrunTensor *out);
  /* Output slot[i], allocated with the inferred dtype and shape: 0, or -1
   * if the op has no such output (a grad op's unneeded gradient). */
  int (*tensor_out)(NetrunCtx *c, const char *slot, int i, NetrunTensor *out);
  /* Makes output slot[i] a new tensor of this dtype and shape (replacing
   * the allocated one; every output of a NETRUN_OP_NO_PREALLOC op): 0, or
   * -1 after reporting that the shape is invalid or too large. */
  int (*tensor_new_out)(NetrunCtx *c, const char *slot, int i, NetrunDType t, int rank,
                        const int64_t *shape, NetrunTensor *out);
  /* Scratch memory: never NULL (netrun exits with status 3 when memory
   * runs out).  free(NULL) does nothing. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);
  /* A draw from netrun's seeded generator, in [0, 1) (NETRUN_OP_RANDOM ops). */
  double (*uniform)(NetrunCtx *c);

  /* ---- grad makers ---- */
  /* The forward op's input / output slot[i]: a variable name, or NULL. */
  const char *(*fwd_in)(NetrunCtx *c, const char *slot, int i);
  const char *(*fwd_out)(NetrunCtx *c, const char *slot, int i);
  /* The name to write the gradient of forward input slot[i] to, or NULL
   * when no gradient of it is needed (emit nothing for it then). */
  const char *(*grad_in)(NetrunCtx *c, const char *slot, int i);
  /* The gradient of forward output slot[i] (netrun makes it zeros when
   * nothing downstream writes it): always a name. */
  const char *(*grad_out)(NetrunCtx *c, const char *slot, int i);
  /* Emits a new op of a registered type (NULL after reporting an unknown
   * type); then its inputs, outputs and attributes.  Attributes left out
   * take their defaults.  Values are copied. */
  NetrunOp *(*emit)(NetrunCtx *c, const char *type);
  void (*emit_in)(NetrunCtx *c, NetrunOp *op, const char *slot, const char *var);
  void (*emit_out)(NetrunCtx *c, NetrunOp *op, const char *slot, const char *var);
  void (*emit_attr)(NetrunCtx *c, NetrunOp *op, const char *name, const NetrunAttrValue *v);
  /* A fresh name for an intermediate value of the gradient. */
  const char *(*temp)(NetrunCtx *c);
} NetrunApi;

/* ---- what a plugin defines --------------------------------------------------------- */

/* = NETRUN_PLUGIN_API_VERSION: the version the plugin was built against. */
NETRUN_PLUGIN_EXPORT extern const int netrun_plugin_api_version;
/* Registers the plugin's ops: 0, or nonzero when it cannot work. */
NETRUN_PLUGIN_EXPORT int netrun_plugin_init(const NetrunApi *api);

#ifdef __cplusplus
}
#endif

#endif
