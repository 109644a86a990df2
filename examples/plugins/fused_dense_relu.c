/* fused_dense_relu.c — a netrun plugin: a dense layer and its activation in
 * one op, with a dedicated gradient op.
 *
 *   fused_dense_relu(X, W, B, alpha = 0) = act(X @ W + B)
 *   act(z) = z if z > 0 else alpha * z       (alpha 0: relu; else leaky relu)
 *
 * X is [..., K], W [K, N], B [N]; the result is [..., N].  One call does
 * what matmul, add and relu do in three, without their two temporaries:
 * cblas_sgemm writes X @ W into the output, and one pass over it adds B and
 * applies the activation.  netrun keeps OpenBLAS on one thread (its own
 * threading gives other bits on another number of threads), so this
 * sgemm gives the same bits on any number of threads, but runs on one.
 *
 * Its grad maker emits one fused_dense_relu_grad op, which from X, W, the
 * forward's Out and Out@GRAD computes, with dZ = Out@GRAD * act'(Out):
 *   X@GRAD = dZ @ W^T,   W@GRAD = X^T @ dZ,   B@GRAD = dZ summed over rows.
 * act' is read off Out (Out > 0 exactly where X @ W + B > 0, as alpha >= 0),
 * so the forward saves nothing.
 *
 * Build: cc -std=c11 -O2 -fPIC -shared -I include -o fused_dense_relu.so \
 *          fused_dense_relu.c -lopenblas
 * (`make` builds it); a script loads it with `load "fused_dense_relu.so"`. */
#include <netrun/plugin.h>

#include <cblas.h>
#include <string.h>

const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;

static const NetrunApi *nr;

/* ---- shape inference ----------------------------------------------------------------- */

/* Two dimensions that must be equal provably differ: two sizes, or two
 * symbols of different names.  Anything else is checked at run time. */
static int clash(NetrunDim a, NetrunDim b) {
  if (a.n >= 0 && b.n >= 0) return a.n != b.n;
  return a.sym && b.sym && strcmp(a.sym, b.sym) != 0;
}

static const char *shape_text(const NetrunShape *s, char *buf, size_t n) {
  if (s->rank < 0) return "[...]";
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < s->rank && k < n; i++) {
    const NetrunDim *d = &s->d[i];
    if (d->n >= 0) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d->n);
    else k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", d->sym ? d->sym : "?");
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* Reads input slot as an f32 of rank `rank` (0: any rank of at least 1). */
static int f32_input(NetrunCtx *c, const char *slot, int rank, NetrunVar *v) {
  static const char *const want[] = {"at least one dimension", "one dimension", "two dimensions"};
  if (nr->var_in(c, slot, 0, v) != 0) return nr->fail(c, "input %s is missing", slot);
  if (v->dtype != NETRUN_F32) return nr->fail(c, "%s must be f32", slot);
  if (v->shape.rank >= 0 && (rank ? v->shape.rank != rank : v->shape.rank == 0)) {
    char buf[128];
    return nr->fail(c, "%s must have %s, got shape %s", slot, want[rank], shape_text(&v->shape, buf, sizeof buf));
  }
  return 0;
}

/* X [..., K] @ W [K, N] + B [N] -> Out [..., N]. */
static int infer_fused(NetrunCtx *c) {
  NetrunVar x, w, b;
  if (f32_input(c, "X", 0, &x) || f32_input(c, "W", 2, &w) || f32_input(c, "B", 1, &b)) return -1;
  char s1[128], s2[128];
  if (x.shape.rank > 0 && w.shape.rank == 2 && clash(x.shape.d[x.shape.rank - 1], w.shape.d[0]))
    return nr->fail(c, "X has shape %s and W has shape %s: inner dimensions differ",
                    shape_text(&x.shape, s1, sizeof s1), shape_text(&w.shape, s2, sizeof s2));
  if (w.shape.rank == 2 && b.shape.rank == 1 && clash(w.shape.d[1], b.shape.d[0]))
    return nr->fail(c, "B has shape %s but W has shape %s: B must have W's columns",
                    shape_text(&b.shape, s1, sizeof s1), shape_text(&w.shape, s2, sizeof s2));
  NetrunShape out = x.shape;
  if (out.rank > 0) {
    NetrunDim n = w.shape.rank == 2 ? w.shape.d[1] : (NetrunDim){-1, NULL};
    if (n.n < 0 && b.shape.rank == 1) n = b.shape.d[0];
    out.d[out.rank - 1] = n;
  }
  nr->var_out(c, "Out", 0, NETRUN_F32, &out);
  return 0;
}

/* Each gradient has the shape of what it is the gradient of; B's is W's
 * columns. */
static int infer_fused_grad(NetrunCtx *c) {
  NetrunVar x, w;
  if (f32_input(c, "X", 0, &x) || f32_input(c, "W", 2, &w)) return -1;
  NetrunShape b = {.rank = 1, .d = {w.shape.rank == 2 ? w.shape.d[1] : (NetrunDim){-1, NULL}}};
  if (nr->out_count(c, "X@GRAD")) nr->var_out(c, "X@GRAD", 0, NETRUN_F32, &x.shape);
  if (nr->out_count(c, "W@GRAD")) nr->var_out(c, "W@GRAD", 0, NETRUN_F32, &w.shape);
  if (nr->out_count(c, "B@GRAD")) nr->var_out(c, "B@GRAD", 0, NETRUN_F32, &b);
  return 0;
}

/* ---- kernels ---------------------------------------------------------------------------- */

static int k_fused(NetrunCtx *c) {
  NetrunTensor x, w, b, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_in(c, "W", 0, &w);
  nr->tensor_in(c, "B", 0, &b);
  nr->tensor_out(c, "Out", 0, &out);
  int64_t k = w.shape[0], n = w.shape[1], m = k ? x.numel / k : out.numel / (n ? n : 1);
  if (x.shape[x.rank - 1] != k || b.numel != n)
    return nr->fail(c, "X, W and B do not fit: X's last dimension is %lld, W is [%lld, %lld], B has %lld",
                    (long long)x.shape[x.rank - 1], (long long)k, (long long)n, (long long)b.numel);
  float *o = out.data;
  const float *bias = b.data;
  float alpha = (float)nr->attr_float(c, "alpha");
  if (m > 0 && n > 0 && k > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, x.data, (int)k,
                w.data, (int)n, 0.0f, o, (int)n);
  else
    memset(o, 0, sizeof(float) * (size_t)out.numel);
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = 0; j < n; j++) {
      float z = o[r * n + j] + bias[j];
      o[r * n + j] = z > 0 ? z : alpha * z + 0.0f;   /* + 0: relu gives 0, not -0 */
    }
  return 0;
}

static int k_fused_grad(NetrunCtx *c) {
  NetrunTensor x, w, out, dout, dx, dw, db;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_in(c, "W", 0, &w);
  nr->tensor_in(c, "Out", 0, &out);
  nr->tensor_in(c, "Out@GRAD", 0, &dout);
  int want_x = nr->tensor_out(c, "X@GRAD", 0, &dx) == 0;
  int want_w = nr->tensor_out(c, "W@GRAD", 0, &dw) == 0;
  int want_b = nr->tensor_out(c, "B@GRAD", 0, &db) == 0;
  int64_t k = w.shape[0], n = w.shape[1], m = n ? out.numel / n : 0;
  if (dout.numel != out.numel || x.numel != m * k)
    return nr->fail(c, "Out@GRAD, Out and X do not fit together");
  float alpha = (float)nr->attr_float(c, "alpha");
  float *dz = nr->alloc(sizeof(float) * (size_t)(m * n));
  const float *o = out.data, *g = dout.data;
  for (int64_t i = 0; i < m * n; i++) dz[i] = o[i] > 0 ? g[i] : alpha * g[i];
  int full = m > 0 && n > 0 && k > 0;
  if (want_x) {
    memset(dx.data, 0, sizeof(float) * (size_t)dx.numel);
    if (full)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)k, (int)n, 1.0f, dz, (int)n, w.data,
                  (int)n, 0.0f, dx.data, (int)k);
  }
  if (want_w) {
    memset(dw.data, 0, sizeof(float) * (size_t)dw.numel);
    if (full)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)n, (int)m, 1.0f, x.data, (int)k, dz,
                  (int)n, 0.0f, dw.data, (int)n);
  }
  if (want_b) {
    float *d = db.data;
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t r = 0; r < m; r++) s += (double)dz[r * n + j];
      d[j] = (float)s;
    }
  }
  nr->free(dz);
  return 0;
}

/* ---- the grad maker ----------------------------------------------------------------------- */

static int g_fused(NetrunCtx *c) {
  static const char *const slots[3] = {"X", "W", "B"};
  static const char *const gslots[3] = {"X@GRAD", "W@GRAD", "B@GRAD"};
  NetrunOp *op = nr->emit(c, "fused_dense_relu_grad");
  if (!op) return -1;
  nr->emit_in(c, op, "X", nr->fwd_in(c, "X", 0));
  nr->emit_in(c, op, "W", nr->fwd_in(c, "W", 0));
  nr->emit_in(c, op, "Out", nr->fwd_out(c, "Out", 0));
  nr->emit_in(c, op, "Out@GRAD", nr->grad_out(c, "Out", 0));
  for (int s = 0; s < 3; s++) {
    const char *g = nr->grad_in(c, slots[s], 0);   /* NULL: not needed */
    if (g) nr->emit_out(c, op, gslots[s], g);
  }
  NetrunAttrValue alpha;
  nr->attr(c, "alpha", &alpha);
  nr->emit_attr(c, op, "alpha", &alpha);
  return 0;
}

/* ---- registration -------------------------------------------------------------------------- */

static const char *check_slope(const NetrunAttrValue *v) {
  return v->u.f >= 0 && v->u.f < 1 ? NULL : "must be in [0, 1)";
}

#define ALPHA {"alpha", NETRUN_ATTR_FLOAT, "0", check_slope, "the slope for negative inputs"}

static const NetrunOpDef ops[] = {
    {.type = "fused_dense_relu",
     .doc = "Out = act(X @ W + B), act(z) = z if z > 0 else alpha * z; one sgemm and one pass",
     .in = {{"X", 0, "[..., K]"}, {"W", 0, "[K, N]"}, {"B", 0, "[N]"}},
     .out = {{"Out", 0, "[..., N]"}},
     .attrs = {ALPHA},
     .infer = infer_fused, .kernel = k_fused,
     .grad_kind = NETRUN_GRAD_DEDICATED, .grad = g_fused},
    {.type = "fused_dense_relu_grad",
     .doc = "the gradients of fused_dense_relu's X, W and B from Out and Out@GRAD",
     .in = {{"X", 0, "the forward's X"}, {"W", 0, "the forward's W"}, {"Out", 0, "the forward's Out"},
            {"Out@GRAD", 0, "the gradient of Out"}},
     .out = {{"X@GRAD", 0, "dZ @ W^T"}, {"W@GRAD", 0, "X^T @ dZ"}, {"B@GRAD", 0, "dZ summed over rows"}},
     .attrs = {ALPHA},
     .infer = infer_fused_grad, .kernel = k_fused_grad,
     .grad_kind = NETRUN_GRAD_NONE},
};

int netrun_plugin_init(const NetrunApi *api) {
  nr = api;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (api->register_op(&ops[i]) != 0) return -1;
  return 0;
}
