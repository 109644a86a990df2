#!/usr/bin/env bats
# gradmaker.bats — the default grad maker (bwd_default_grad): a plugin's
# dedicated gradient without a maker of its own gets NAME_grad wired by the
# slot-naming convention, and a plugin that cannot use it is refused at load.
# (The built-in ops' default makers are covered by the backward dumps of
# tests/cases and by grad.bats's registry walk.)

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  cd "$BATS_TEST_TMPDIR"
}

# scaled_plugin NAME EXTRA-DEFS REGISTER: a plugin with op `scaled` (Out =
# k * X * X, dedicated gradient, no grad maker), its C text followed by
# EXTRA-DEFS, its init registering `scaled` and then REGISTER.
scaled_plugin() {
  cat > "$1.c" <<EOF
#include <netrun/plugin.h>
const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
static const NetrunApi *nr;
/* Out (or X@GRAD) has X's shape. */
static int infer(NetrunCtx *c) {
  NetrunVar x;
  nr->var_in(c, "X", 0, &x);
  nr->var_out(c, nr->out_count(c, "Out") ? "Out" : "X@GRAD", 0, NETRUN_F32, &x.shape);
  return 0;
}
static int k_scaled(NetrunCtx *c) {
  NetrunTensor x, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_out(c, "Out", 0, &out);
  float k = (float)nr->attr_float(c, "k");
  const float *xv = x.data;
  for (int64_t i = 0; i < x.numel; i++) ((float *)out.data)[i] = k * xv[i] * xv[i];
  return 0;
}
/* X@GRAD = 2 * k * X * Out@GRAD */
static int k_scaled_grad(NetrunCtx *c) {
  NetrunTensor x, d, dx;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_in(c, "Out@GRAD", 0, &d);
  nr->tensor_out(c, "X@GRAD", 0, &dx);
  float k = (float)nr->attr_float(c, "k");
  const float *xv = x.data, *dv = d.data;
  for (int64_t i = 0; i < x.numel; i++) ((float *)dx.data)[i] = 2 * k * xv[i] * dv[i];
  return 0;
}
static const NetrunOpDef scaled = {
  .type = "scaled", .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}},
  .attrs = {{"k", NETRUN_ATTR_FLOAT, "1", 0, ""}},
  .infer = infer, .kernel = k_scaled, .grad_kind = NETRUN_GRAD_DEDICATED};
$2
int netrun_plugin_init(const NetrunApi *api) {
  nr = api;
  (void)k_scaled_grad;
  return api->register_op(&scaled) $3 ? -1 : 0;
}
EOF
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$ROOT/include" -o "$1.so" "$1.c"
}

GRAD_DEF='static const NetrunOpDef scaled_grad = {
  .type = "scaled_grad", .in = {{"X", 0, ""}, {"Out@GRAD", 0, ""}}, .out = {{"X@GRAD", 0, ""}},
  .attrs = {{"k", NETRUN_ATTR_FLOAT, "1", 0, ""}}, .infer = infer, .kernel = k_scaled_grad};'

model() {
  cat > m.net <<'EOF'
param x : [2, 2] = [[0.5, -1.0], [2.0, 0.25]]
loss = sum(scaled(x, k=3.0))
EOF
}

@test "a plugin's dedicated gradient without a grad maker: the default one emits NAME_grad" {
  scaled_plugin scaled "$GRAD_DEF" '|| api->register_op(&scaled_grad)'
  model
  run "$NETRUN" --plugin ./scaled.so dump --backward m.net
  [ "$status" -eq 0 ]
  [ "${lines[${#lines[@]}-1]}" = '  {X@GRAD=[x@GRAD]} = scaled_grad(X=[x], Out@GRAD=[t.1@GRAD]) {k=3.0}  # grad of scaled at m.net:2' ]
  run "$NETRUN" --plugin ./scaled.so grad m.net
  [ "$status" -eq 0 ]
  [ "$output" = 'loss = 15.9375
x@GRAD : f32[2, 2] =
[[ 3.  -6. ]
 [12.   1.5]]' ]
  "$NETRUN" --plugin ./scaled.so grad --tape m.net > tape.txt
  [ "$(cat tape.txt)" = "$output" ]
  run "$NETRUN" --plugin ./scaled.so gradcheck --dtype f32 m.net
  [ "$status" -eq 0 ]
  [ "${lines[2]}" = "all gradients match finite differences (rtol 0.005, eps 0.01)" ]
}

@test "a plugin whose dedicated gradient has neither a grad maker nor a usable NAME_grad is refused" {
  scaled_plugin alone "" ""
  run "$NETRUN" --plugin ./alone.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin './alone.so': op 'scaled' has no grad maker, and no op 'scaled_grad' for the default one" ]
  scaled_plugin listed 'static const NetrunOpDef scaled_grad = {
  .type = "scaled_grad", .in = {{"X", 0, ""}, {"Out@GRAD", 0, ""}}, .out = {{"X@GRAD", NETRUN_SLOT_LIST, ""}},
  .infer = infer, .kernel = k_scaled_grad};' '|| api->register_op(&scaled_grad)'
  run "$NETRUN" --plugin ./listed.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin './listed.so': op 'scaled' has no grad maker, and the default one cannot fill the list X@GRAD of 'scaled_grad'" ]
}
