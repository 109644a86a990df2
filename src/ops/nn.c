/* nn.c — neural-network ops: softmax, losses, dropout, layer norm,
 * embedding lookup and accuracy.
 *
 * They compute in f32: an i64 input is promoted (as NumPy would), a bool one
 * is an error.  Labels and indices are i64 and never differentiated. */
#include "../registry.h"

#include <string.h>

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* ---- helpers ----------------------------------------------------------------- */

static const VarDesc *input(InferCtx *c, const char *slot) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) infer_fail(c, "input %s is missing", slot);
  return v;
}

/* A value the op computes with in f32: f32, or i64 promoted. */
static bool need_float(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_F32 && v->dtype != DT_I64)
    return infer_fail(c, "%s must be f32 (or i64), got %s", slot, dtype_name(v->dtype));
  return true;
}

static bool need_i64(InferCtx *c, const char *slot, const VarDesc *v) {
  if (v->dtype != DT_I64) return infer_fail(c, "%s must be i64, got %s", slot, dtype_name(v->dtype));
  return true;
}

static bool norm_axis(InferCtx *c, const char *attr, int64_t a, const char *slot, const Shape *s,
                      int *out) {
  int64_t k = a < 0 ? a + s->rank : a;
  *out = 0;
  if (k < 0 || k >= s->rank) {
    char buf[128];
    return infer_fail(c, "%s %lld is out of range for %s of shape %s", attr, (long long)a, slot,
                      shape_str(s, buf, sizeof buf));
  }
  *out = (int)k;
  return true;
}

/* Two dimensions that must be equal provably differ: two sizes, or two
 * symbols of different names.  Anything else is checked at run time. */
static bool dims_clash(Dim a, Dim b) {
  if (dim_known(a) && dim_known(b)) return a.n != b.n;
  return a.sym && b.sym && strcmp(a.sym, b.sym) != 0;
}

static Dim dim_merge(Dim a, Dim b) {
  if (dim_known(a)) return a;
  if (dim_known(b) || !a.sym) return b;
  return a;
}

/* Whether the first n dims of a and b can be equal; merges them into out. */
static bool dims_agree(const Dim *a, const Dim *b, int n, Dim *out) {
  for (int i = 0; i < n; i++) {
    if (dims_clash(a[i], b[i])) return false;
    out[i] = dim_merge(a[i], b[i]);
  }
  return true;
}

/* A label for rows of `lead` (a batch shape): of shape lead or lead + [1].
 * Sets *out to the merged batch shape. */
static bool label_fits(const Shape *label, const Shape *lead, Shape *out) {
  *out = *lead;
  if (label->rank < 0 || lead->rank < 0) return true;
  if (label->rank == lead->rank + 1) {
    Dim last = label->d[lead->rank];
    if (dim_known(last) && last.n != 1) return false;
  } else if (label->rank != lead->rank) {
    return false;
  }
  return dims_agree(label->d, lead->d, lead->rank, out->d);
}

/* The expected label shapes, "[B] or [B, 1]", for an error message. */
static const char *label_want(const Shape *lead, char *buf, size_t n) {
  char a[128], b[128];
  Shape one = *lead;
  one.d[one.rank++] = dim_n(1);
  snprintf(buf, n, "%s or %s", shape_str(lead, a, sizeof a), shape_str(&one, b, sizeof b));
  return buf;
}

/* ---- softmax and losses -------------------------------------------------------- */

/* softmax, log_softmax: f32, X's shape, axis in range. */
static bool infer_softmax(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x || !need_float(c, "X", x)) return false;
  int k;
  if (x->shape.rank >= 0 && !norm_axis(c, "axis", infer_attr_i(c, "axis"), "X", &x->shape, &k))
    return false;
  infer_set(c, "Out", 0, DT_F32, &x->shape);
  return true;
}

static bool infer_softmax_ce(InferCtx *c) {
  const VarDesc *lg = input(c, "Logits"), *lb = input(c, "Label");
  if (!lg || !lb || !need_float(c, "Logits", lg) || !need_i64(c, "Label", lb)) return false;
  if (lg->shape.rank == 0)
    return infer_fail(c, "Logits must have a class axis, got a scalar");
  Shape lead = lg->shape, loss;
  if (lead.rank > 0) lead.rank--;
  if (!label_fits(&lb->shape, &lead, &loss)) {
    char a[128], b[128], w[300];
    return infer_fail(c, "Label has shape %s but Logits has shape %s: expected %s",
                      shape_str(&lb->shape, a, sizeof a), shape_str(&lg->shape, b, sizeof b),
                      label_want(&lead, w, sizeof w));
  }
  infer_set(c, "Loss", 0, DT_F32, &loss);
  return true;
}

static bool infer_sigmoid_ce(InferCtx *c) {
  const VarDesc *x = input(c, "X"), *lb = input(c, "Label");
  if (!x || !lb || !need_float(c, "X", x) || !need_float(c, "Label", lb)) return false;
  Shape s = x->shape;
  if (x->shape.rank >= 0 && lb->shape.rank >= 0 &&
      (x->shape.rank != lb->shape.rank || !dims_agree(x->shape.d, lb->shape.d, s.rank, s.d))) {
    char a[128], b[128];
    return infer_fail(c, "Label has shape %s but X has shape %s: they must be equal",
                      shape_str(&lb->shape, a, sizeof a), shape_str(&x->shape, b, sizeof b));
  }
  if (s.rank < 0) s = lb->shape;
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

static bool infer_mse(InferCtx *c) {
  const VarDesc *x = input(c, "X"), *y = input(c, "Y");
  if (!x || !y || !need_float(c, "X", x) || !need_float(c, "Y", y)) return false;
  Shape s;
  if (!infer_broadcast(c, &x->shape, &y->shape, &s)) return false;
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- dropout, layer_norm ---------------------------------------------------- */

static bool infer_dropout(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x || !need_float(c, "X", x)) return false;
  double p = infer_attr_f(c, "p");
  if (!(p >= 0 && p < 1)) return infer_fail(c, "p must be in [0, 1), got %g", p);
  infer_set(c, "Out", 0, DT_F32, &x->shape);
  infer_set(c, "Mask", 0, DT_F32, &x->shape);
  return true;
}

/* Scale and Bias of layer_norm: shape X.shape[k:] or [prod(X.shape[k:])]. */
static bool norm_param_fits(InferCtx *c, const char *slot, const Shape *xs, int k) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) return true;   /* optional */
  if (!need_float(c, slot, v)) return false;
  const Shape *ps = &v->shape;
  if (ps->rank < 0) return true;
  Shape tail = shape_scalar(), flat = shape_scalar();
  tail.rank = xs->rank - k;
  memcpy(tail.d, xs->d + k, sizeof(Dim) * (size_t)tail.rank);
  /* the flattened form: a size when all are known, a lone symbol, else "?" */
  int64_t p = 1;
  int nsym = 0, other = 0;
  Dim sym = dim_unknown();
  for (int i = 0; i < tail.rank; i++) {
    Dim d = tail.d[i];
    if (dim_known(d) && (d.n == 0 || p <= INT64_MAX / d.n)) p *= d.n;
    else if (!d.sym) other++;
    else if (nsym++ == 0) sym = d;
  }
  flat.rank = 1;
  flat.d[0] = other || nsym > 1 || (nsym == 1 && p != 1) ? dim_unknown() : nsym ? sym : dim_n(p);
  Dim scratch[SHAPE_MAX_RANK];
  if (ps->rank == tail.rank && dims_agree(ps->d, tail.d, tail.rank, scratch)) return true;
  if (ps->rank == 1 && dims_agree(ps->d, flat.d, 1, scratch)) return true;
  char a[128], b[128], t[128], f[128];
  return infer_fail(c, "%s has shape %s but X has shape %s normalized from axis %d: expected %s or %s",
                    slot, shape_str(ps, a, sizeof a), shape_str(xs, b, sizeof b), k,
                    shape_str(&tail, t, sizeof t), shape_str(&flat, f, sizeof f));
}

static bool infer_layer_norm(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x || !need_float(c, "X", x)) return false;
  if (!(infer_attr_f(c, "epsilon") >= 0))
    return infer_fail(c, "epsilon must not be negative, got %g", infer_attr_f(c, "epsilon"));
  const Shape *xs = &x->shape;
  if (xs->rank == 0) return infer_fail(c, "X must have rank 1 or more, got a scalar");
  if (xs->rank > 0) {
    int k;
    if (!norm_axis(c, "begin_norm_axis", infer_attr_i(c, "begin_norm_axis"), "X", xs, &k) ||
        !norm_param_fits(c, "Scale", xs, k) || !norm_param_fits(c, "Bias", xs, k))
      return false;
  }
  infer_set(c, "Y", 0, DT_F32, xs);
  return true;
}

/* ---- embedding, accuracy ------------------------------------------------------- */

static bool infer_embedding(InferCtx *c) {
  const VarDesc *ids = input(c, "Ids"), *w = input(c, "W");
  if (!ids || !w || !need_i64(c, "Ids", ids) || !need_float(c, "W", w)) return false;
  char a[128];
  if (w->shape.rank >= 0 && w->shape.rank != 2)
    return infer_fail(c, "W must have shape [V, D], got %s", shape_str(&w->shape, a, sizeof a));
  Shape s = ids->shape;
  if (s.rank >= SHAPE_MAX_RANK)
    return infer_fail(c, "Ids of shape %s would give a result of rank %d, more than 8",
                      shape_str(&s, a, sizeof a), s.rank + 1);
  if (s.rank >= 0) s.d[s.rank++] = w->shape.rank == 2 ? w->shape.d[1] : dim_unknown();
  infer_set(c, "Out", 0, w->dtype, &s);
  return true;
}

static bool infer_accuracy(InferCtx *c) {
  const VarDesc *lg = input(c, "Logits"), *lb = input(c, "Label");
  if (!lg || !lb || !need_float(c, "Logits", lg) || !need_i64(c, "Label", lb)) return false;
  char a[128], b[128], w[300];
  const Shape *ls = &lg->shape;
  if (ls->rank >= 0 && ls->rank != 2)
    return infer_fail(c, "Logits must have shape [N, C], got %s", shape_str(ls, a, sizeof a));
  int64_t k = infer_attr_i(c, "k");
  if (k <= 0) return infer_fail(c, "k must be positive, got %lld", (long long)k);
  if (ls->rank == 2) {
    if (dim_known(ls->d[1]) && k > ls->d[1].n)
      return infer_fail(c, "k=%lld is more than the %lld classes of Logits (shape %s)", (long long)k,
                        (long long)ls->d[1].n, shape_str(ls, a, sizeof a));
    Shape lead = *ls, merged;
    lead.rank = 1;
    if (!label_fits(&lb->shape, &lead, &merged))
      return infer_fail(c, "Label has shape %s but Logits has shape %s: expected %s",
                        shape_str(&lb->shape, a, sizeof a), shape_str(ls, b, sizeof b),
                        label_want(&lead, w, sizeof w));
  }
  Shape s = shape_scalar();
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- the table --------------------------------------------------------------- */

OpProto op_table_nn[] = {
    {.type = "softmax", .doc = "Out = exp(X) / sum(exp(X)) along axis, computed stably",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "f32, shape of X"}},
     .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis normalized"}},
     .infer = infer_softmax, .grad_kind = GRAD_DEDICATED},
    {.type = "log_softmax", .doc = "Out = log(softmax(X)) along axis, computed stably",
     .in = {{"X", 0, "input"}}, .out = {{"Out", 0, "f32, shape of X"}},
     .attrs = {{"axis", ATTR_INT, "-1", NULL, "the axis normalized"}},
     .infer = infer_softmax, .grad_kind = GRAD_DEDICATED},
    {.type = "softmax_cross_entropy",
     .doc = "Loss = -log softmax(Logits)[Label] per example, computed stably",
     .in = {{"Logits", 0, "scores [..., C]"},
            {"Label", SLOT_NO_GRAD, "i64 class indices [...] (or [..., 1])"}},
     .out = {{"Loss", 0, "f32 loss per example, Logits' shape without the class axis"}},
     .infer = infer_softmax_ce, .grad_kind = GRAD_DEDICATED},
    {.type = "sigmoid_cross_entropy",
     .doc = "Out = -(Label log sigmoid(X) + (1 - Label) log(1 - sigmoid(X))), computed stably",
     .in = {{"X", 0, "logits"}, {"Label", SLOT_NO_GRAD, "targets in [0, 1], shape of X"}},
     .out = {{"Out", 0, "f32 loss per element, shape of X"}},
     .infer = infer_sigmoid_ce, .grad_kind = GRAD_DEDICATED},
    {.type = "mse", .doc = "Out = (X - Y)^2 per element, broadcasting",
     .in = {{"X", 0, "prediction"}, {"Y", 0, "target"}},
     .out = {{"Out", 0, "f32, broadcast shape of X and Y"}},
     .infer = infer_mse, .grad_kind = GRAD_DEDICATED},
    {.type = "dropout",
     .doc = "Out = X * Mask: zeroes each element with probability p, scales the rest by 1/(1-p)",
     .in = {{"X", 0, "input"}},
     .out = {{"Out", 0, "f32, shape of X"},
             {"Mask", 0, "f32, shape of X: 0 or 1/(1-p) per element (1 when is_test)"}},
     .attrs = {{"p", ATTR_FLOAT, "0.5", check_probability, "the probability of dropping"},
               {"is_test", ATTR_BOOL, "false", NULL, "pass X through unchanged"},
               {"seed", ATTR_INT, "0", check_nonnegative,
                "0: draw from the run's generator (--seed); else this op's own seed"}},
     .infer = infer_dropout, .grad_kind = GRAD_COMPOSITE, .flags = OP_RANDOM},
    {.type = "layer_norm",
     .doc = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias over axes begin_norm_axis..",
     .in = {{"X", 0, "input"},
            {"Scale", SLOT_OPTIONAL, "X.shape[begin_norm_axis:] or its product (default 1)"},
            {"Bias", SLOT_OPTIONAL, "X.shape[begin_norm_axis:] or its product (default 0)"}},
     .out = {{"Y", 0, "f32, shape of X"}},
     .attrs = {{"begin_norm_axis", ATTR_INT, "-1", NULL, "the first axis normalized"},
               {"epsilon", ATTR_FLOAT, "1e-5", check_nonnegative, "added to the variance"}},
     .infer = infer_layer_norm, .grad_kind = GRAD_DEDICATED},
    {.type = "embedding", .doc = "Out = the rows of W at Ids",
     .in = {{"Ids", SLOT_NO_GRAD, "i64 row indices in [0, V)"}, {"W", 0, "the table [V, D]"}},
     .out = {{"Out", 0, "Ids.shape + [D], dtype of W"}},
     .infer = infer_embedding, .grad_kind = GRAD_DEDICATED},
    {.type = "accuracy",
     .doc = "Out = the fraction of rows whose Label is among the k highest Logits",
     .in = {{"Logits", SLOT_NO_GRAD, "scores [N, C]"},
            {"Label", SLOT_NO_GRAD, "i64 class indices [N] (or [N, 1])"}},
     .out = {{"Out", 0, "an f32 scalar in [0, 1]"}},
     .attrs = {{"k", ATTR_INT, "1", check_positive, "how many top classes count as a hit"}},
     .infer = infer_accuracy, .grad_kind = GRAD_NONE},
    {0},
};
