/* exportonnx.c — `netrun export [WEIGHTS] --model MODEL.net -o FILE.onnx`:
 * a script's forward program, for inference, as an ONNX model at opset 17
 * (netrun(1), export).
 *
 * The ops that compute the asked outputs (--output, default logits or
 * output) are written in program order, one or a few ONNX nodes each;
 * inputs become graph inputs whose symbolic dimensions (a batch) stay
 * dynamic (dim_param), a bool scalar input (a `training` flag) becomes
 * the constant false, and parameters and states become initializers with
 * the values the script starts from (its initializers, weights() or
 * WEIGHTS).  An op ONNX cannot express is an error at its source line. */
#include "cli/cmd.h"
#include "cli/option.h"
#include "exec/exec.h"
#include "base/file.h"
#include "front/session.h"
#include "io/onnx.h"
#include "io/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_OPSET 17

typedef struct Ex {
  Session *s;
  Program *p;
  Executor *ex;
  OnnxBuf nodes, inits, inputs;
  StrMap falsy;                /* bool scalar inputs exported as false */
  int ntemp;
  int nerr;
} Ex;

/* ---- building blocks ---------------------------------------------------------------- */

static const char *temp(Ex *E) { return arena_printf(&E->s->arena, "onnx.%d", E->ntemp++); }

static int elem_of(DType t) {
  return t == DT_F32 ? ONNX_FLOAT : t == DT_F64 ? ONNX_DOUBLE : t == DT_BOOL ? ONNX_BOOL : ONNX_INT64;
}

/* An initializer name of dtype t and the given shape, its n elements' bytes at data. */
static void initializer(Ex *E, const char *name, int type, int rank, const int64_t *dims, const void *data,
                        size_t bytes) {
  OnnxBuf t = {0};
  for (int i = 0; i < rank; i++) onnx_put_varint(&t, 1, (uint64_t)dims[i]);
  onnx_put_varint(&t, 2, (uint64_t)type);
  onnx_put_str(&t, 8, name);
  onnx_put_bytes(&t, 9, data, bytes);
  onnx_put_msg(&E->inits, 5, &t);
}

static const char *const_ints(Ex *E, const int64_t *v, int n) {
  const char *name = temp(E);
  int64_t d = n;
  initializer(E, name, ONNX_INT64, 1, &d, v, (size_t)n * sizeof *v);
  return name;
}

static const char *const_float(Ex *E, double v, DType t) {
  const char *name = temp(E);
  if (t == DT_F64) initializer(E, name, ONNX_DOUBLE, 0, NULL, &v, sizeof v);
  else {
    float f = (float)v;
    initializer(E, name, ONNX_FLOAT, 0, NULL, &f, sizeof f);
  }
  return name;
}

typedef struct Node {
  OnnxBuf b;
} Node;

static void node_begin(Node *n, const char *type, const OpDesc *op) {
  n->b = (OnnxBuf){0};
  onnx_put_str(&n->b, 4, type);
  (void)op;
}
static void node_in(Node *n, const char *name) { onnx_put_str(&n->b, 1, name ? name : ""); }
static void node_out(Node *n, const char *name) { onnx_put_str(&n->b, 2, name); }
static void attr_i(Node *n, const char *name, int64_t v) {
  OnnxBuf a = {0};
  onnx_put_str(&a, 1, name);
  onnx_put_varint(&a, 3, (uint64_t)v);
  onnx_put_varint(&a, 20, ONNX_ATTR_INT);
  onnx_put_msg(&n->b, 5, &a);
}
static void attr_f(Node *n, const char *name, double v) {
  OnnxBuf a = {0};
  onnx_put_str(&a, 1, name);
  onnx_put_float(&a, 2, (float)v);
  onnx_put_varint(&a, 20, ONNX_ATTR_FLOAT);
  onnx_put_msg(&n->b, 5, &a);
}
static void attr_s(Node *n, const char *name, const char *v) {
  OnnxBuf a = {0};
  onnx_put_str(&a, 1, name);
  onnx_put_str(&a, 4, v);
  onnx_put_varint(&a, 20, ONNX_ATTR_STRING);
  onnx_put_msg(&n->b, 5, &a);
}
static void attr_is(Node *n, const char *name, const int64_t *v, int k) {
  OnnxBuf a = {0};
  onnx_put_str(&a, 1, name);
  for (int i = 0; i < k; i++) onnx_put_varint(&a, 8, (uint64_t)v[i]);
  onnx_put_varint(&a, 20, ONNX_ATTR_INTS);
  onnx_put_msg(&n->b, 5, &a);
}
static void node_end(Ex *E, Node *n) { onnx_put_msg(&E->nodes, 1, &n->b); }

/* One node of one or two inputs (b NULL: one) and one output. */
static void node1(Ex *E, const char *type, const char *a, const char *b, const char *out) {
  Node n;
  node_begin(&n, type, NULL);
  node_in(&n, a);
  if (b) node_in(&n, b);
  node_out(&n, out);
  node_end(E, &n);
}

/* ---- the ops -------------------------------------------------------------------------- */

static const char *IN(const OpDesc *op, const char *slot, int i) {
  const Slot *s = op_input(op, slot);
  return s && i < s->n ? s->args[i] : NULL;
}
static const char *OUT(const OpDesc *op, const char *slot) {
  const Slot *s = op_output(op, slot);
  return s && s->n ? s->args[0] : NULL;
}
/* An attribute, with the proto's default; an empty value when neither. */
static const AttrValue *A(const Ex *E, const OpDesc *op, const char *name) {
  static int64_t zeros[SHAPE_MAX_RANK];
  static const AttrValue none = {.type = ATTR_INTS, .n = 0, .u.ints = zeros};
  const Attr *a = op_attr(op, name);
  if (a) return &a->v;
  const OpProto *p = reg_find_op(E->p, op->type);
  int i = p ? reg_attr_index(p, name) : -1;
  return p && i >= 0 && p->has_dflt[i] ? &p->dflt[i] : &none;
}
static int64_t Ai(const Ex *E, const OpDesc *op, const char *name) {
  const AttrValue *v = A(E, op, name);
  return !v ? 0 : v->type == ATTR_FLOAT ? (int64_t)v->u.f : v->u.i;
}
static double Af(const Ex *E, const OpDesc *op, const char *name) {
  const AttrValue *v = A(E, op, name);
  return !v ? 0 : v->type == ATTR_FLOAT ? v->u.f : (double)v->u.i;
}
/* A variable's description; an f32 of unknown shape for none. */
static const VarDesc *V(const Ex *E, const char *var) {
  static const VarDesc unknown = {.name = "", .dtype = DT_F32, .shape = {.rank = -1}};
  const VarDesc *v = var ? prog_var(E->p, var) : NULL;
  return v ? v : &unknown;
}

/* x as dtype t: itself, or a Cast (ONNX's binary ops take one dtype). */
static const char *as(Ex *E, const char *x, DType t) {
  const VarDesc *v = V(E, x);
  if (!v || v->dtype == t) return x;
  const char *o = temp(E);
  Node n;
  node_begin(&n, "Cast", NULL);
  node_in(&n, x);
  node_out(&n, o);
  attr_i(&n, "to", elem_of(t));
  node_end(E, &n);
  return o;
}

static const struct { const char *netrun, *onnx; } simple[] = {
    {"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}, {"div", "Div"}, {"pow", "Pow"}, {"maximum", "Max"},
    {"minimum", "Min"}, {"neg", "Neg"}, {"abs", "Abs"}, {"exp", "Exp"}, {"log", "Log"}, {"sqrt", "Sqrt"},
    {"tanh", "Tanh"}, {"sigmoid", "Sigmoid"}, {"relu", "Relu"}, {"erf", "Erf"}, {"sin", "Sin"}, {"cos", "Cos"},
    {"softplus", "Softplus"}, {"sign", "Sign"}, {"equal", "Equal"}, {"less_than", "Less"},
    {"less_equal", "LessOrEqual"}, {"greater_than", "Greater"}, {"greater_equal", "GreaterOrEqual"},
    {"logical_and", "And"}, {"logical_or", "Or"}, {"logical_not", "Not"}, {"where", "Where"},
    {"assign", "Identity"}, {"share", "Identity"}, {"stop_gradient", "Identity"},
};

static bool is_compare(const char *t) {
  return strstr(t, "equal") || strstr(t, "less") || strstr(t, "greater") || strstr(t, "logical");
}

/* The ops mapped one to one: inputs (X, Y, Cond) cast to the output's
 * dtype where ONNX wants one dtype (comparisons: to the promoted one). */
static bool x_simple(Ex *E, const OpDesc *op, const char *type) {
  const char *out = OUT(op, "Out");
  DType t = V(E, out)->dtype;
  const char *x = IN(op, "X", 0), *y = IN(op, "Y", 0), *cond = IN(op, "Cond", 0);
  if (is_compare(op->type) && y) {
    DType tx = V(E, x)->dtype, ty = V(E, y)->dtype;
    t = tx == DT_F64 || ty == DT_F64 ? DT_F64 : tx == DT_F32 || ty == DT_F32 ? DT_F32 : tx;
  }
  if (strncmp(op->type, "logical_", 8) != 0) {
    if (x) x = as(E, x, t);
    if (y) y = as(E, y, t);
  }
  Node n;
  node_begin(&n, type, op);
  if (cond) node_in(&n, cond);
  node_in(&n, x);
  if (y) node_in(&n, y);
  node_out(&n, out);
  node_end(E, &n);
  return true;
}

static bool x_matmul(Ex *E, const OpDesc *op) {
  const char *xy[2] = {IN(op, "X", 0), IN(op, "Y", 0)};
  const char *flags[2] = {"transpose_x", "transpose_y"};
  for (int k = 0; k < 2; k++) {
    int r = V(E, xy[k])->shape.rank;
    if (!Ai(E, op, flags[k]) || r < 2) continue;
    int64_t perm[SHAPE_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    const char *t = temp(E);
    Node n;
    node_begin(&n, "Transpose", op);
    node_in(&n, xy[k]);
    node_out(&n, t);
    attr_is(&n, "perm", perm, r);
    node_end(E, &n);
    xy[k] = t;
  }
  DType t = V(E, OUT(op, "Out"))->dtype;
  node1(E, "MatMul", as(E, xy[0], t), as(E, xy[1], t), OUT(op, "Out"));
  return true;
}

static void pads4(Node *n, const AttrValue *p) {
  if (p->n < 2) return;
  int64_t v[4] = {p->u.ints[0], p->u.ints[1], p->u.ints[0], p->u.ints[1]};
  attr_is(n, "pads", v, 4);
}

static bool x_conv(Ex *E, const OpDesc *op, bool transpose) {
  Node n;
  node_begin(&n, transpose ? "ConvTranspose" : "Conv", op);
  node_in(&n, IN(op, "Input", 0));
  node_in(&n, IN(op, "Filter", 0));
  node_out(&n, OUT(op, "Output"));
  const AttrValue *s = A(E, op, "strides"), *d = A(E, op, "dilations");
  attr_is(&n, "strides", s->u.ints, s->n);
  attr_is(&n, "dilations", d->u.ints, d->n);
  pads4(&n, A(E, op, "paddings"));
  attr_i(&n, "group", Ai(E, op, "groups"));
  if (transpose) {
    const AttrValue *o = A(E, op, "output_padding");
    attr_is(&n, "output_padding", o->u.ints, o->n);
  }
  node_end(E, &n);
  return true;
}

static bool x_pool(Ex *E, const OpDesc *op, const char *type) {
  Node n;
  node_begin(&n, type, op);
  node_in(&n, IN(op, "X", 0));
  node_out(&n, OUT(op, "Out"));
  const AttrValue *k = A(E, op, "ksize"), *s = A(E, op, "strides");
  attr_is(&n, "kernel_shape", k->u.ints, k->n);
  if (s->n) attr_is(&n, "strides", s->u.ints, s->n);
  else attr_is(&n, "strides", k->u.ints, k->n);
  pads4(&n, A(E, op, "paddings"));
  if (type[0] == 'A') attr_i(&n, "count_include_pad", 1);
  node_end(E, &n);
  return true;
}

static bool x_batch_norm(Ex *E, const OpDesc *op) {
  const char *tr = IN(op, "Training", 0);
  if (!tr || strmap_get(&E->falsy, tr) < 0) {
    diag_error(&E->s->diag, op->span, "export to ONNX: batch_norm's training flag must be a bool scalar input "
               "(exported as false), here it is '%s'", tr ? tr : "missing");
    return false;
  }
  Node n;
  node_begin(&n, "BatchNormalization", op);
  const char *slots[] = {"X", "Scale", "Bias", "Mean", "Variance"};
  for (int i = 0; i < 5; i++) node_in(&n, IN(op, slots[i], 0));
  node_out(&n, OUT(op, "Y"));
  attr_f(&n, "epsilon", Af(E, op, "epsilon"));
  attr_f(&n, "momentum", Af(E, op, "momentum"));
  node_end(E, &n);
  /* at inference the running statistics pass through */
  if (OUT(op, "MeanOut")) node1(E, "Identity", IN(op, "Mean", 0), NULL, OUT(op, "MeanOut"));
  if (OUT(op, "VarianceOut")) node1(E, "Identity", IN(op, "Variance", 0), NULL, OUT(op, "VarianceOut"));
  return true;
}

static bool x_layer_norm(Ex *E, const OpDesc *op) {
  if (!IN(op, "Scale", 0)) {
    diag_error(&E->s->diag, op->span, "export to ONNX: layer_norm without a Scale has no ONNX form here");
    return false;
  }
  Node n;
  node_begin(&n, "LayerNormalization", op);
  node_in(&n, IN(op, "X", 0));
  node_in(&n, IN(op, "Scale", 0));
  if (IN(op, "Bias", 0)) node_in(&n, IN(op, "Bias", 0));
  node_out(&n, OUT(op, "Y"));
  attr_i(&n, "axis", Ai(E, op, "begin_norm_axis"));
  attr_f(&n, "epsilon", Af(E, op, "epsilon"));
  node_end(E, &n);
  return true;
}

static bool x_axis(Ex *E, const OpDesc *op, const char *type) {
  Node n;
  node_begin(&n, type, op);
  node_in(&n, IN(op, "X", 0));
  node_out(&n, OUT(op, "Out"));
  attr_i(&n, "axis", Ai(E, op, "axis"));
  node_end(E, &n);
  return true;
}

/* An op whose second input is a constant int list attribute (Reshape's
 * shape, Unsqueeze's axes, Expand's shape ...). */
static bool x_with_ints(Ex *E, const OpDesc *op, const char *type, const char *attr) {
  const AttrValue *v = A(E, op, attr);
  const char *c = v && v->n ? const_ints(E, v->u.ints, v->n) : NULL;
  node1(E, type, IN(op, "X", 0), c, OUT(op, "Out"));
  return true;
}

static bool x_flatten(Ex *E, const OpDesc *op) {
  int64_t s = Ai(E, op, "start_axis"), shape[SHAPE_MAX_RANK + 1];
  for (int i = 0; i < s && i < SHAPE_MAX_RANK; i++) shape[i] = 0;
  shape[s] = -1;
  node1(E, "Reshape", IN(op, "X", 0), const_ints(E, shape, (int)s + 1), OUT(op, "Out"));
  return true;
}

static bool x_transpose(Ex *E, const OpDesc *op) {
  Node n;
  node_begin(&n, "Transpose", op);
  node_in(&n, IN(op, "X", 0));
  node_out(&n, OUT(op, "Out"));
  const AttrValue *p = A(E, op, "perm");
  attr_is(&n, "perm", p->u.ints, p->n);
  node_end(E, &n);
  return true;
}

static bool x_concat(Ex *E, const OpDesc *op) {
  Node n;
  node_begin(&n, op->type[0] == 'c' ? "Concat" : "Sum", op);
  DType t = V(E, OUT(op, "Out"))->dtype;
  for (int i = 0; IN(op, "X", i); i++) node_in(&n, as(E, IN(op, "X", i), t));
  node_out(&n, OUT(op, "Out"));
  if (op->type[0] == 'c') attr_i(&n, "axis", Ai(E, op, "axis"));
  node_end(E, &n);
  return true;
}

static bool x_slice(Ex *E, const OpDesc *op) {
  const AttrValue *ax = A(E, op, "axes"), *st = A(E, op, "starts"), *en = A(E, op, "ends");
  Node n;
  node_begin(&n, "Slice", op);
  node_in(&n, IN(op, "X", 0));
  node_in(&n, const_ints(E, st->u.ints, st->n));
  node_in(&n, const_ints(E, en->u.ints, en->n));
  node_in(&n, const_ints(E, ax->u.ints, ax->n));
  node_out(&n, OUT(op, "Out"));
  node_end(E, &n);
  return true;
}

static bool x_gather(Ex *E, const OpDesc *op, bool embedding) {
  Node n;
  node_begin(&n, "Gather", op);
  node_in(&n, IN(op, embedding ? "W" : "X", 0));
  node_in(&n, IN(op, embedding ? "Ids" : "Index", 0));
  node_out(&n, OUT(op, "Out"));
  attr_i(&n, "axis", embedding ? 0 : Ai(E, op, "axis"));
  node_end(E, &n);
  return true;
}

static bool x_reduce(Ex *E, const OpDesc *op, const char *type) {
  const AttrValue *ax = A(E, op, "axis");
  Node n;
  node_begin(&n, type, op);
  node_in(&n, IN(op, "X", 0));
  if (strcmp(type, "ReduceSum") == 0 && ax->n) node_in(&n, const_ints(E, ax->u.ints, ax->n));
  else if (ax->n) attr_is(&n, "axes", ax->u.ints, ax->n);
  node_out(&n, OUT(op, "Out"));
  attr_i(&n, "keepdims", Ai(E, op, "keepdim"));
  node_end(E, &n);
  return true;
}

static bool x_cast(Ex *E, const OpDesc *op) {
  Node n;
  node_begin(&n, "Cast", op);
  node_in(&n, IN(op, "X", 0));
  node_out(&n, OUT(op, "Out"));
  attr_i(&n, "to", elem_of(V(E, OUT(op, "Out"))->dtype));
  node_end(E, &n);
  return true;
}

/* scale: X * scale + bias; clip: Clip(X, min, max); leaky_relu, elu: alpha;
 * gelu: X * 0.5 * (1 + erf(X / sqrt 2)); silu: X * sigmoid(X); square: X * X. */
static bool x_composite(Ex *E, const OpDesc *op) {
  const char *x = IN(op, "X", 0), *out = OUT(op, "Out");
  DType t = V(E, out)->dtype;
  if (strcmp(op->type, "scale") == 0) {
    const char *m = temp(E);
    node1(E, "Mul", x, const_float(E, Af(E, op, "scale"), t), m);
    node1(E, "Add", m, const_float(E, Af(E, op, "bias"), t), out);
  } else if (strcmp(op->type, "clip") == 0) {
    Node n;
    node_begin(&n, "Clip", op);
    node_in(&n, x);
    node_in(&n, const_float(E, Af(E, op, "min"), t));
    node_in(&n, const_float(E, Af(E, op, "max"), t));
    node_out(&n, out);
    node_end(E, &n);
  } else if (strcmp(op->type, "leaky_relu") == 0 || strcmp(op->type, "elu") == 0) {
    Node n;
    node_begin(&n, op->type[0] == 'l' ? "LeakyRelu" : "Elu", op);
    node_in(&n, x);
    node_out(&n, out);
    attr_f(&n, "alpha", Af(E, op, "alpha"));
    node_end(E, &n);
  } else if (strcmp(op->type, "gelu") == 0) {
    const char *a = temp(E), *b = temp(E), *c = temp(E), *d = temp(E);
    node1(E, "Div", x, const_float(E, sqrt(2.0), t), a);
    node1(E, "Erf", a, NULL, b);
    node1(E, "Add", b, const_float(E, 1, t), c);
    node1(E, "Mul", x, c, d);
    node1(E, "Mul", d, const_float(E, 0.5, t), out);
  } else if (strcmp(op->type, "silu") == 0) {
    const char *s = temp(E);
    node1(E, "Sigmoid", x, NULL, s);
    node1(E, "Mul", x, s, out);
  } else {
    node1(E, "Mul", x, x, out);
  }
  return true;
}

/* fill_constant, full, zeros, ones, assign_value: an initializer of the
 * op's value. */
static bool x_constant(Ex *E, const OpDesc *op) {
  const VarDesc *v = V(E, OUT(op, "Out"));
  const Attr *va = op_attr(op, "values");
  const AttrValue *vals = va ? &va->v : NULL;
  double fill = strcmp(op->type, "ones") == 0 ? 1 : strcmp(op->type, "zeros") == 0 ? 0 : Af(E, op, "value");
  int64_t dims[SHAPE_MAX_RANK], n = 1;
  for (int i = 0; i < v->shape.rank; i++) dims[i] = v->shape.d[i].n, n *= dims[i];
  char why[TENSOR_WHY_MAX];
  Tensor *t = tensor_try_new(v->dtype, v->shape.rank, dims, why);
  if (!t) {
    diag_error(&E->s->diag, op->span, "export to ONNX: %s", why);
    return false;
  }
  if (vals && vals->n != n) {
    tensor_unref(t);
    diag_error(&E->s->diag, op->span, "export to ONNX: %s holds %d values for %lld elements", op->type, vals->n,
               (long long)n);
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    tensor_set(t, i, vals ? (vals->type == ATTR_I64S ? (double)vals->u.ints[i] : vals->u.floats[i]) : fill);
  initializer(E, v->name, elem_of(v->dtype), v->shape.rank, dims, t->data, (size_t)n * dtype_size(v->dtype));
  tensor_unref(t);
  return true;
}

/* split: Split with the parts' sizes, read from the outputs' shapes. */
static bool x_split(Ex *E, const OpDesc *op) {
  const Slot *outs = op_output(op, "Out");
  int64_t axis = Ai(E, op, "axis"), sizes[64];
  int rank = V(E, IN(op, "X", 0))->shape.rank;
  if (axis < 0) axis += rank;
  if (!outs || outs->n > 64 || axis < 0 || axis >= rank) {
    diag_error(&E->s->diag, op->span, "export to ONNX: this split has no ONNX form");
    return false;
  }
  for (int i = 0; i < outs->n; i++) sizes[i] = V(E, outs->args[i])->shape.d[axis].n;
  Node n;
  node_begin(&n, "Split", op);
  node_in(&n, IN(op, "X", 0));
  node_in(&n, const_ints(E, sizes, outs->n));
  for (int i = 0; i < outs->n; i++) node_out(&n, outs->args[i]);
  attr_i(&n, "axis", axis);
  node_end(E, &n);
  return true;
}

/* tril, triu: Trilu (opset 14) with the diagonal as k. */
static bool x_trilu(Ex *E, const OpDesc *op) {
  int64_t k = Ai(E, op, "diagonal");
  Node n;
  node_begin(&n, "Trilu", op);
  node_in(&n, IN(op, "X", 0));
  const char *kname = temp(E);
  initializer(E, kname, ONNX_INT64, 0, NULL, &k, sizeof k);   /* a scalar */
  node_in(&n, kname);
  node_out(&n, OUT(op, "Out"));
  attr_i(&n, "upper", strcmp(op->type, "triu") == 0);
  node_end(E, &n);
  return true;
}

/* x [..., T, heads * w] of rank r (in dtype t) as [..., heads, T, w]:
 * Reshape (0 keeps a dimension) and Transpose; or back, [..., heads, T,
 * w] to [..., T, heads * w] into `out`. */
static const char *x_heads(Ex *E, const OpDesc *op, const char *x, int r, int64_t heads, bool back,
                           const char *out) {
  int64_t shape[SHAPE_MAX_RANK + 1], perm[SHAPE_MAX_RANK + 1];
  for (int i = 0; i <= r; i++) shape[i] = 0, perm[i] = i;
  perm[r - 2] = r - 1, perm[r - 1] = r - 2;
  const char *tr = temp(E), *y = back ? out : temp(E);
  Node n;
  if (!back) {
    shape[r - 1] = heads, shape[r] = -1;
    node1(E, "Reshape", x, const_ints(E, shape, r + 1), tr);
    x = tr, tr = y;
  }
  node_begin(&n, "Transpose", op);
  node_in(&n, x);
  node_out(&n, tr);
  attr_is(&n, "perm", perm, r + 1);
  node_end(E, &n);
  if (back) {
    shape[r - 1] = -1;
    node1(E, "Reshape", tr, const_ints(E, shape, r), out);
  }
  return y;
}

/* attention: MatMul(Q, K^T) / sqrt(d), with causal the later keys set to
 * -1e9 (Where with a [Tq, Tk] tril constant), Softmax, MatMul by V: the
 * unfused form, which ONNX Runtime runs as such.  With heads > 1, Q, K
 * and V go to [..., heads, T, w] first (x_heads) and Out comes back. */
static bool x_attention(Ex *E, const OpDesc *op) {
  const char *q = IN(op, "Q", 0), *k = IN(op, "K", 0), *v = IN(op, "V", 0), *out = OUT(op, "Out");
  const Shape *qs = &V(E, q)->shape, *ks = &V(E, k)->shape;
  int r = qs->rank;
  bool causal = Ai(E, op, "causal") != 0;
  int64_t heads = Ai(E, op, "heads");
  if (r < 2 || ks->rank != r || !dim_known(qs->d[r - 1]) ||
      (causal && (!dim_known(qs->d[r - 2]) || !dim_known(ks->d[r - 2])))) {
    diag_error(&E->s->diag, op->span, "export to ONNX: attention needs the width of Q%s known",
               causal ? " and the lengths of Q and K" : "");
    return false;
  }
  if (heads > 1 && r == SHAPE_MAX_RANK) {
    diag_error(&E->s->diag, op->span, "export to ONNX: attention with heads needs Q of rank below %d",
               SHAPE_MAX_RANK);
    return false;
  }
  DType t = V(E, out)->dtype;
  q = as(E, q, t), k = as(E, k, t), v = as(E, v, t);
  const char *o = out;
  if (heads > 1) {
    q = x_heads(E, op, q, r, heads, false, NULL);
    k = x_heads(E, op, k, r, heads, false, NULL);
    v = x_heads(E, op, v, r, heads, false, NULL);
    o = temp(E);
    r++;
  }
  int64_t perm[SHAPE_MAX_RANK + 1];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[r - 2] = r - 1, perm[r - 1] = r - 2;
  const char *kt = temp(E), *s = temp(E), *sd = temp(E), *p = temp(E);
  Node n;
  node_begin(&n, "Transpose", op);
  node_in(&n, k);
  node_out(&n, kt);
  attr_is(&n, "perm", perm, r);
  node_end(E, &n);
  node1(E, "MatMul", q, kt, s);
  node1(E, "Div", s, const_float(E, sqrt((double)(qs->d[qs->rank - 1].n / heads)), t), sd);
  if (causal) {
    int64_t dims[2] = {qs->d[qs->rank - 2].n, ks->d[qs->rank - 2].n};
    size_t cells = (size_t)(dims[0] * dims[1]);
    unsigned char *mask = mem_alloc(NULL, cells ? cells : 1);
    for (int64_t i = 0; i < dims[0]; i++)
      for (int64_t j = 0; j < dims[1]; j++) mask[i * dims[1] + j] = j <= i;
    const char *mname = temp(E), *masked = temp(E);
    initializer(E, mname, ONNX_BOOL, 2, dims, mask, cells);
    mem_free(mask);
    node_begin(&n, "Where", op);
    node_in(&n, mname);
    node_in(&n, sd);
    node_in(&n, const_float(E, -1e9, t));
    node_out(&n, masked);
    node_end(E, &n);
    sd = masked;
  }
  node_begin(&n, "Softmax", op);
  node_in(&n, sd);
  node_out(&n, p);
  attr_i(&n, "axis", -1);
  node_end(E, &n);
  node1(E, "MatMul", p, v, o);
  if (heads > 1) x_heads(E, op, o, r - 1, heads, true, out);
  return true;
}

/* cumsum: CumSum along a scalar axis; pad: Pad with ONNX's [begins...,
 * ends...]; upsample_nearest2d: Resize by integer scales, nearest, floor. */
static bool x_more(Ex *E, const OpDesc *op) {
  const char *x = IN(op, "X", 0), *out = OUT(op, "Out");
  Node n;
  if (strcmp(op->type, "cumsum") == 0) {
    int64_t axis = Ai(E, op, "axis");
    const char *a = temp(E);
    initializer(E, a, ONNX_INT64, 0, NULL, &axis, sizeof axis);
    node1(E, "CumSum", x, a, out);
  } else if (strcmp(op->type, "pad") == 0) {
    const AttrValue *p = A(E, op, "paddings");
    int64_t v[2 * SHAPE_MAX_RANK];
    int r = p->n / 2;
    for (int i = 0; i < r && i < SHAPE_MAX_RANK; i++) v[i] = p->u.ints[2 * i], v[r + i] = p->u.ints[2 * i + 1];
    node_begin(&n, "Pad", op);
    node_in(&n, x);
    node_in(&n, const_ints(E, v, 2 * r));
    node_in(&n, const_float(E, Af(E, op, "value"), V(E, x)->dtype));
    node_out(&n, out);
    node_end(E, &n);
  } else {
    const AttrValue *sc = A(E, op, "scale");
    float f[4] = {1, 1, (float)sc->u.ints[0], (float)sc->u.ints[1]};
    int64_t four = 4;
    const char *scales = temp(E);
    initializer(E, scales, ONNX_FLOAT, 1, &four, f, sizeof f);
    node_begin(&n, "Resize", op);
    node_in(&n, x);
    node_in(&n, "");
    node_in(&n, scales);
    node_out(&n, out);
    attr_s(&n, "mode", "nearest");
    attr_s(&n, "coordinate_transformation_mode", "asymmetric");
    attr_s(&n, "nearest_mode", "floor");
    node_end(E, &n);
  }
  return true;
}

static bool x_op(Ex *E, const OpDesc *op) {
  const char *t = op->type;
  for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
    if (strcmp(t, simple[i].netrun) == 0) return x_simple(E, op, simple[i].onnx);
  if (strcmp(t, "not_equal") == 0) {
    const char *q = temp(E);
    node1(E, "Equal", IN(op, "X", 0), as(E, IN(op, "Y", 0), V(E, IN(op, "X", 0))->dtype), q);
    node1(E, "Not", q, NULL, OUT(op, "Out"));
    return true;
  }
  if (strcmp(t, "matmul") == 0) return x_matmul(E, op);
  if (strcmp(t, "conv2d") == 0 || strcmp(t, "conv2d_transpose") == 0) return x_conv(E, op, t[6] == '_');
  if (strcmp(t, "max_pool2d") == 0) return x_pool(E, op, "MaxPool");
  if (strcmp(t, "avg_pool2d") == 0) return x_pool(E, op, "AveragePool");
  if (strcmp(t, "batch_norm") == 0) return x_batch_norm(E, op);
  if (strcmp(t, "layer_norm") == 0) return x_layer_norm(E, op);
  if (strcmp(t, "attention") == 0) return x_attention(E, op);
  if (strcmp(t, "softmax") == 0) return x_axis(E, op, "Softmax");
  if (strcmp(t, "log_softmax") == 0) return x_axis(E, op, "LogSoftmax");
  if (strcmp(t, "reshape") == 0) return x_with_ints(E, op, "Reshape", "shape");
  if (strcmp(t, "unsqueeze") == 0) return x_with_ints(E, op, "Unsqueeze", "axes");
  if (strcmp(t, "squeeze") == 0) return x_with_ints(E, op, "Squeeze", "axes");
  if (strcmp(t, "broadcast_to") == 0) return x_with_ints(E, op, "Expand", "shape");
  if (strcmp(t, "flatten") == 0) return x_flatten(E, op);
  if (strcmp(t, "transpose") == 0) return x_transpose(E, op);
  if (strcmp(t, "concat") == 0 || strcmp(t, "add_n") == 0) return x_concat(E, op);
  if (strcmp(t, "slice") == 0) return x_slice(E, op);
  if (strcmp(t, "gather") == 0 || strcmp(t, "embedding") == 0) return x_gather(E, op, t[0] == 'e');
  if (strcmp(t, "mean") == 0) return x_reduce(E, op, "ReduceMean");
  if (strcmp(t, "sum") == 0) return x_reduce(E, op, "ReduceSum");
  if (strcmp(t, "max") == 0) return x_reduce(E, op, "ReduceMax");
  if (strcmp(t, "min") == 0) return x_reduce(E, op, "ReduceMin");
  if (strcmp(t, "cast") == 0) return x_cast(E, op);
  if (strcmp(t, "cumsum") == 0 || strcmp(t, "pad") == 0 || strcmp(t, "upsample_nearest2d") == 0)
    return x_more(E, op);
  if (strcmp(t, "split") == 0) return x_split(E, op);
  if (strcmp(t, "tril") == 0 || strcmp(t, "triu") == 0) return x_trilu(E, op);
  if (strcmp(t, "dropout") == 0) {
    node1(E, "Identity", IN(op, "X", 0), NULL, OUT(op, "Out"));
    return true;
  }
  if (!strcmp(t, "scale") || !strcmp(t, "clip") || !strcmp(t, "leaky_relu") || !strcmp(t, "elu") ||
      !strcmp(t, "gelu") || !strcmp(t, "silu") || !strcmp(t, "square"))
    return x_composite(E, op);
  if (!strcmp(t, "fill_constant") || !strcmp(t, "full") || !strcmp(t, "zeros") || !strcmp(t, "ones") ||
      !strcmp(t, "assign_value"))
    return x_constant(E, op);
  diag_error(&E->s->diag, op->span, "export to ONNX: op '%s' has no ONNX form (netrun-ops(7), ONNX)", t);
  return false;
}

/* ---- the graph ---------------------------------------------------------------------------- */

/* A graph input or output: name, elem type, shape with symbols as dim_param. */
static void value_info(OnnxBuf *to, int field, const VarDesc *v) {
  OnnxBuf vi = {0}, ty = {0}, tt = {0}, sh = {0};
  for (int i = 0; i < v->shape.rank; i++) {
    OnnxBuf d = {0};
    if (v->shape.d[i].n >= 0) onnx_put_varint(&d, 1, (uint64_t)v->shape.d[i].n);
    else onnx_put_str(&d, 2, v->shape.d[i].sym ? v->shape.d[i].sym : "?");
    onnx_put_msg(&sh, 1, &d);
  }
  onnx_put_varint(&tt, 1, (uint64_t)elem_of(v->dtype));
  if (v->shape.rank >= 0) onnx_put_msg(&tt, 2, &sh);
  else onnx_buf_free(&sh);
  onnx_put_msg(&ty, 1, &tt);
  onnx_put_str(&vi, 1, v->name);
  onnx_put_msg(&vi, 2, &ty);
  onnx_put_msg(to, field, &vi);
}

/* The ops of block 0 the outputs need, marked in need[] (by op index). */
static bool needed_ops(Ex *E, const char *const *outs, int nout, bool *need) {
  const Block *b = E->p->blocks[0];
  StrMap want = {0};
  for (int i = 0; i < nout; i++) strmap_put(&E->s->arena, &want, outs[i], 1);
  for (int i = b->nops - 1; i >= 0; i--) {
    const OpDesc *op = b->ops[i];
    for (int s = 0; s < op->nout && !need[i]; s++)
      for (int k = 0; k < op->out[s].n; k++) need[i] |= strmap_get(&want, op->out[s].args[k]) >= 0;
    if (!need[i]) continue;
    if (reg_find_op(E->p, op->type)->flags & OP_CONTROL) {
      diag_error(&E->s->diag, op->span, "export to ONNX: loops and branches (%s) have no ONNX form here", op->type);
      return false;
    }
    for (int s = 0; s < op->nin; s++)
      for (int k = 0; k < op->in[s].n; k++) strmap_put(&E->s->arena, &want, op->in[s].args[k], 1);
  }
  /* inputs and persistable values the needed ops read */
  for (int i = 0; i < b->nvars; i++) {
    const VarDesc *v = b->vars[i];
    if (strmap_get(&want, v->name) < 0) continue;
    if (v->flags & VAR_INPUT) {
      if (v->dtype == DT_BOOL && v->shape.rank == 0) {
        uint8_t f = 0;
        initializer(E, v->name, ONNX_BOOL, 0, NULL, &f, 1);
        strmap_put(&E->s->arena, &E->falsy, v->name, 1);
      } else {
        value_info(&E->inputs, 11, v);
      }
    } else if (v->flags & (VAR_PARAM | VAR_KEPT)) {
      Tensor *t = exec_var_value(E->ex, v->name);
      if (!t) {
        diag_error(&E->s->diag, v->span, "export to ONNX: '%s' has no value", v->name);
        return false;
      }
      initializer(E, v->name, elem_of(t->dtype), t->rank, t->shape, t->data,
                  (size_t)t->numel * dtype_size(t->dtype));
    }
  }
  return true;
}

static bool write_model(Ex *E, const char *path, const char *const *outs, int nout) {
  OnnxBuf g = {0}, m = {0}, opset = {0};
  onnx_put_str(&g, 2, "netrun");
  /* nodes, initializers, inputs, outputs: order within a repeated field is what counts */
  VEC_RESERVE(g.b, g.cap, g.n + E->nodes.n + E->inits.n + E->inputs.n + 1);
  memcpy(g.b + g.n, E->nodes.b, E->nodes.n), g.n += E->nodes.n;
  memcpy(g.b + g.n, E->inits.b, E->inits.n), g.n += E->inits.n;
  memcpy(g.b + g.n, E->inputs.b, E->inputs.n), g.n += E->inputs.n;
  for (int i = 0; i < nout; i++) value_info(&g, 12, V(E, outs[i]));
  onnx_put_varint(&m, 1, 8);
  onnx_put_str(&m, 2, "netrun");
  onnx_put_msg(&m, 7, &g);
  onnx_put_str(&opset, 1, "");
  onnx_put_varint(&opset, 2, ONNX_OPSET);
  onnx_put_msg(&m, 8, &opset);
  AtomicFile f;
  char err[1400];
  bool ok = file_begin(&f, path, err, sizeof err) && file_commit(&f, file_write_all(f.fd, m.b, m.n), err, sizeof err);
  if (!ok) diag_error(NULL, SPAN_NONE, "%s", err);
  onnx_buf_free(&m);
  return ok;
}

int cmd_export_onnx(const char *weights, const char *model, const char *path, const char *const *names, int nnames) {
  Session s;
  Ex E = {.s = &s};
  int rc = EXIT_SCRIPT;
  if (!session_load(&s, model)) goto done;
  E.p = s.prog;
  const char *dflt[] = {"logits"};
  if (!nnames) {
    names = prog_export(s.prog, "logits") ? dflt : (const char *[]){"output"};
    nnames = 1;
  }
  const char **outs = arena_alloc(&s.arena, (size_t)nnames * sizeof *outs);
  for (int i = 0; i < nnames; i++) {
    outs[i] = prog_export(s.prog, names[i]);
    if (!outs[i]) {
      diag_error(&s.diag, SPAN_NONE, "export to ONNX: %s has no value '%s' to output (give --value NAME)", model,
                 names[i]);
      goto done;
    }
  }
  ExecOptions o;
  exec_default_options(&o);
  E.ex = exec_new(s.prog, &o);
  if (weights ? !weights_load(&s.diag, s.prog, E.ex, weights, false) : exec_startup(E.ex) != 0) goto done;
  bool *need = arena_alloc(&s.arena, (size_t)(s.prog->blocks[0]->nops + 1) * sizeof *need);
  if (!needed_ops(&E, outs, nnames, need)) goto done;
  for (int i = 0; i < s.prog->blocks[0]->nops; i++)
    if (need[i] && !x_op(&E, s.prog->blocks[0]->ops[i])) E.nerr++;
  if (!E.nerr && s.diag.nerrors == 0 && write_model(&E, path, outs, nnames)) rc = 0;
done:
  if (E.ex) exec_free(E.ex);
  onnx_buf_free(&E.nodes);
  onnx_buf_free(&E.inits);
  onnx_buf_free(&E.inputs);
  diag_finish(&s.diag);
  session_free(&s);
  return rc;
}
