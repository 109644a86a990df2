/* triple.c — a test plugin whose gradient is wrong on purpose: the op
 * triple(X) = 3 X, with a composite grad maker that scales the output's
 * gradient by GRAD_SCALE (define it: -DGRAD_SCALE=2.0 is plainly wrong,
 * 3.03 is 1% off).  gradcheck must catch both (tests/plugin.bats,
 * tests/trust_gradcheck.bats). */
#include <netrun/plugin.h>

#ifndef GRAD_SCALE
#error "build with -DGRAD_SCALE=..."
#endif

const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
static const NetrunApi *nr;

static int same_shape(NetrunCtx *c) {
  NetrunVar x;
  nr->var_in(c, "X", 0, &x);
  nr->var_out(c, "Out", 0, x.dtype, &x.shape);
  return 0;
}

static int kernel(NetrunCtx *c) {
  NetrunTensor x, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_out(c, "Out", 0, &out);
  for (int64_t i = 0; i < x.numel; i++) ((float *)out.data)[i] = 3 * ((const float *)x.data)[i];
  return 0;
}

static int grad(NetrunCtx *c) {
  const char *dx = nr->grad_in(c, "X", 0);
  if (!dx) return 0;
  NetrunOp *op = nr->emit(c, "scale");
  nr->emit_in(c, op, "X", nr->grad_out(c, "Out", 0));
  nr->emit_out(c, op, "Out", dx);
  NetrunAttrValue k = {.type = NETRUN_ATTR_FLOAT, .u.f = GRAD_SCALE};
  nr->emit_attr(c, op, "scale", &k);
  return 0;
}

static const NetrunOpDef def = {.type = "triple", .doc = "Out = 3 X", .in = {{"X", 0, ""}},
  .out = {{"Out", 0, ""}}, .infer = same_shape, .kernel = kernel,
  .grad_kind = NETRUN_GRAD_COMPOSITE, .grad = grad};

int netrun_plugin_init(const NetrunApi *api) {
  nr = api;
  return api->register_op(&def);
}
