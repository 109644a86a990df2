/* cube.c — a test plugin with a dedicated gradient: cube(X) = X^3, its
 * grad op cube_grad(X, Out@GRAD) = 3 X^2 Out@GRAD.  Built as is, cube_grad
 * has no gradient, so a second backward through it is an error; built
 * with -DCUBE_GRAD2 it declares one (composite: cube_grad on the incoming
 * gradient G for Out@GRAD, 6 X Out@GRAD G for X), the way netrun-ops(7)
 * describes (tests/grad2.bats). */
#include <netrun/plugin.h>

const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
static const NetrunApi *nr;

static int same_shape(NetrunCtx *c) {
  NetrunVar x;
  nr->var_in(c, "X", 0, &x);
  nr->var_out(c, "Out", 0, x.dtype, &x.shape);
  return 0;
}

static int grad_shape(NetrunCtx *c) {
  NetrunVar x;
  nr->var_in(c, "X", 0, &x);
  nr->var_out(c, "X@GRAD", 0, x.dtype, &x.shape);
  return 0;
}

static int kernel(NetrunCtx *c) {
  NetrunTensor x, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_out(c, "Out", 0, &out);
  for (int64_t i = 0; i < x.numel; i++) {
    float v = ((const float *)x.data)[i];
    ((float *)out.data)[i] = v * v * v;
  }
  return 0;
}

static int grad_kernel(NetrunCtx *c) {
  NetrunTensor x, d, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_in(c, "Out@GRAD", 0, &d);
  nr->tensor_out(c, "X@GRAD", 0, &out);
  for (int64_t i = 0; i < x.numel; i++) {
    float v = ((const float *)x.data)[i];
    ((float *)out.data)[i] = 3 * v * v * ((const float *)d.data)[i];
  }
  return 0;
}

#ifdef CUBE_GRAD2
/* out = type(X=x, Y=y) */
static void emit2(NetrunCtx *c, const char *type, const char *x, const char *y, const char *out) {
  NetrunOp *op = nr->emit(c, type);
  nr->emit_in(c, op, "X", x);
  nr->emit_in(c, op, "Y", y);
  nr->emit_out(c, op, "Out", out);
}

/* cube_grad's own gradient: linear in Out@GRAD, 6 X Out@GRAD G in X. */
static int grad2(NetrunCtx *c) {
  const char *x = nr->fwd_in(c, "X", 0), *d = nr->fwd_in(c, "Out@GRAD", 0);
  const char *g = nr->grad_out(c, "X@GRAD", 0);
  const char *dd = nr->grad_in(c, "Out@GRAD", 0), *dx = nr->grad_in(c, "X", 0);
  if (dd) {
    NetrunOp *op = nr->emit(c, "cube_grad");
    nr->emit_in(c, op, "X", x);
    nr->emit_in(c, op, "Out@GRAD", g);
    nr->emit_out(c, op, "X@GRAD", dd);
  }
  if (dx) {
    const char *t = nr->temp(c), *u = nr->temp(c);
    emit2(c, "mul", g, d, t);
    emit2(c, "mul", t, x, u);
    NetrunOp *op = nr->emit(c, "scale");
    nr->emit_in(c, op, "X", u);
    nr->emit_out(c, op, "Out", dx);
    NetrunAttrValue k = {.type = NETRUN_ATTR_FLOAT, .u.f = 6.0};
    nr->emit_attr(c, op, "scale", &k);
  }
  return 0;
}
#define GRAD2_KIND NETRUN_GRAD_COMPOSITE
#define GRAD2 grad2
#else
#define GRAD2_KIND NETRUN_GRAD_NONE
#define GRAD2 NULL
#endif

static const NetrunOpDef cube = {.type = "cube", .doc = "Out = X^3", .in = {{"X", 0, ""}},
  .out = {{"Out", 0, ""}}, .infer = same_shape, .kernel = kernel, .grad_kind = NETRUN_GRAD_DEDICATED};
static const NetrunOpDef cube_grad = {.type = "cube_grad", .doc = "X@GRAD = 3 X^2 Out@GRAD",
  .in = {{"X", 0, ""}, {"Out@GRAD", 0, ""}}, .out = {{"X@GRAD", 0, ""}}, .infer = grad_shape,
  .kernel = grad_kernel, .grad_kind = GRAD2_KIND, .grad = GRAD2};

int netrun_plugin_init(const NetrunApi *api) {
  nr = api;
  return api->register_op(&cube) || api->register_op(&cube_grad);
}
