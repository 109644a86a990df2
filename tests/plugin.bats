#!/usr/bin/env bats
# plugin.bats — native plugins: the public header, loading with --plugin and
# `load`, every loading error's exact text, the example plugin's gradients
# (static and tape), and a plugin built against the installed header.
#
# The example plugin is built by `make`; the others are small C files built
# here, against include/ only, as a user would build them.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  SO=$ROOT/examples/plugins/fused_dense_relu.so
  cd "$BATS_TEST_TMPDIR"
}

# build NAME [INCLUDE-DIR]: NAME.c (from standard input) into NAME.so.
build() {
  cat > "$1.c"
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"${2:-$ROOT/include}" -o "$1.so" "$1.c"
}

# build_op NAME: a plugin whose C text (standard input) follows these lines:
# the header, the version, `nr` (set by an init function that registers
# `def`), and `same_shape`, an inference giving Out the dtype and shape of X.
build_op() {
  { cat <<'EOF'
#include <netrun/plugin.h>
const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
static const NetrunApi *nr;
static int same_shape(NetrunCtx *c) {
  NetrunVar x;
  nr->var_in(c, "X", 0, &x);
  nr->var_out(c, "Out", 0, x.dtype, &x.shape);
  return 0;
}
static const NetrunOpDef def;
int netrun_plugin_init(const NetrunApi *api) { nr = api; return api->register_op(&def); }
EOF
    cat; } | build "$1"
}

# A plugin registering `def` (C initializer text) and nothing else.
plugin_with() {
  build_op "$1" <<EOF
static int ok(NetrunCtx *c) { (void)c; (void)same_shape; return 0; }
static const NetrunOpDef def = $2;
EOF
}

# rejected NAME DEF MESSAGE: a plugin registering DEF fails to load with
# "plugin 'NAME.so': MESSAGE".
rejected() {
  plugin_with "$1" "$2"
  run "$NETRUN" --plugin "$1.so" ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin '$1.so': $3" ]
}

@test "the header compiles alone, as strict C11" {
  printf '#include <netrun/plugin.h>\nint main(void) { return NETRUN_PLUGIN_API_VERSION - 1; }\n' > alone.c
  ${CC:-cc} -std=c11 -Wall -Wextra -pedantic -Werror -I"$ROOT/include" -o alone alone.c
  ./alone
}

@test "--plugin adds the plugin's ops to the registry: ops lists and describes them" {
  run "$NETRUN" ops
  [[ "$output" != *fused_dense_relu* ]]
  run "$NETRUN" --plugin "$SO" ops
  [ "$status" -eq 0 ]
  [[ "$output" == *"fused_dense_relu           dedicated  yes      X, W, B -> Out"* ]]
  [[ "$output" == *"fused_dense_relu_grad      none       yes      X, W, Out, Out@GRAD -> X@GRAD, W@GRAD, B@GRAD"* ]]
  # anywhere on the command line, as --plugin=PATH too
  run "$NETRUN" ops fused_dense_relu "--plugin=$SO"
  [ "$status" -eq 0 ]
  [ "$output" = "fused_dense_relu: Out = act(X @ W + B), act(z) = z if z > 0 else alpha * z; one sgemm and one pass
inputs:
  X            [..., K]
  W            [K, N]
  B            [N]
outputs:
  Out          [..., N]
attributes:
  alpha        float       = 0.0  the slope for negative inputs
gradient: dedicated
kernel: yes" ]
}

@test "the example plugin's gradients match finite differences, statically and on the tape" {
  run "$NETRUN" --allow-load gradcheck "$ROOT/examples/plugins/xor_fused.net"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "all gradients match finite differences within f32 noise (rtol 0.005, eps 0.01); 1 of 33 elements could not be checked: noise exceeds tolerance" ]
  run "$NETRUN" --allow-load gradcheck --tape "$ROOT/examples/plugins/xor_fused.net"
  [ "$status" -eq 0 ]
  "$NETRUN" --allow-load grad --format json "$ROOT/examples/plugins/xor_fused.net" > static.json
  "$NETRUN" --allow-load grad --tape --format json "$ROOT/examples/plugins/xor_fused.net" > tape.json
  cmp static.json tape.json
  [ "$(jq -r '.grads | keys | join(",")' static.json)" = "W1,W2,b1,b2" ]
}

@test "fused_dense_relu: relu and leaky, a batch of matrices, only some gradients wanted" {
  cat > deep.net <<EOF
load "$SO"  # loaded already by --plugin: allowed without --allow-load
input x : f32[B, 3, 4] = [[[0.5, -1.0, 2.0, 0.3], [1.5, 0.25, -0.5, -2.0], [0.1, 0.7, -1.2, 0.9]],
                          [[-0.4, 0.8, 1.1, -0.6], [0.2, -1.5, 0.6, 1.3], [1.0, 1.0, -1.0, 0.5]]]
param W : [4, 5] = normal(0, 1)
param b : [5] = constant(0.05)
param V : [5, 2] = normal(0, 1)
param c : [2] = zeros()
h = fused_dense_relu(x, W, b)
o = fused_dense_relu(h, V, c, alpha=0.25)
loss = mean(o * o)
EOF
  run "$NETRUN" --plugin "$SO" gradcheck deep.net
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  run "$NETRUN" --plugin "$SO" gradcheck --wrt W deep.net
  [ "$status" -eq 0 ]
  run "$NETRUN" --plugin "$SO" dump --backward --wrt W deep.net
  [[ "$output" == *"{X@GRAD=[h@GRAD]} = fused_dense_relu_grad(X=[h], W=[V], Out=[o], Out@GRAD=[o@GRAD]) {alpha=0.25}"* ]]
  [[ "$output" == *"{W@GRAD=[W@GRAD]} = fused_dense_relu_grad(X=[x], W=[W], Out=[h], Out@GRAD=[h@GRAD]) {alpha=0.0}"* ]]
}

@test "a plugin's wrong gradient is caught by gradcheck" {
  # triple(X) = 3X with a composite grad maker that scales by 2.
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$ROOT/include" -DGRAD_SCALE=2.0 -o wrong.so \
    "$ROOT/tests/plugins/triple.c"
  printf 'load "wrong.so"\nparam w : [2] = [1.0, 2.0]\nloss = sum(triple(w))\n' > wrong.net
  run "$NETRUN" --allow-load run wrong.net
  [ "$status" -eq 0 ]
  run "$NETRUN" --allow-load dump --backward wrong.net
  [ "${lines[-1]}" = "  {Out=[w@GRAD]} = scale(X=[t.1@GRAD]) {bias=0.0, scale=2.0}  # grad of triple at wrong.net:3" ]
  run "$NETRUN" --allow-load gradcheck --dtype f32 wrong.net
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = "w                         2    1.000e+00    3.333e-01  FAIL (element 1: analytic 2, numeric 3, noise 6.9e-05)" ]
}

@test "a plugin loaded by --plugin and by load, twice, is loaded once" {
  cp "$ROOT/examples/plugins/xor_fused.net" .
  cp "$SO" .
  printf 'load "fused_dense_relu.so"\n' >> xor_fused.net
  run "$NETRUN" --plugin ./fused_dense_relu.so --plugin fused_dense_relu.so dump xor_fused.net
  [ "$status" -eq 0 ]
}

@test "loading errors: no file, not a library, not a plugin, another API version" {
  run "$NETRUN" --plugin
  [ "$status" -eq 2 ]
  [ "${lines[0]}" = "netrun: --plugin needs the path of a plugin (a .so file)" ]
  run "$NETRUN" --plugin nope.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: cannot load plugin 'nope.so': No such file or directory" ]
  echo 'not ELF' > text.so
  run "$NETRUN" --plugin text.so ops
  [ "$output" = "netrun: error: cannot load plugin 'text.so': not a shared library" ]
  build plain <<<'int plain(void); int plain(void) { return 1; }'
  run "$NETRUN" --plugin plain.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: 'plain.so' is not a netrun plugin: it defines no netrun_plugin_init" ]
  build noversion <<'EOF'
#include <netrun/plugin.h>
int netrun_plugin_init(const NetrunApi *api) { (void)api; return 0; }
EOF
  run "$NETRUN" --plugin noversion.so ops
  [ "$output" = "netrun: error: 'noversion.so' is not a netrun plugin: it defines no netrun_plugin_api_version" ]
  build v99 <<'EOF'
#include <netrun/plugin.h>
const int netrun_plugin_api_version = 99;
int netrun_plugin_init(const NetrunApi *api) { (void)api; return 0; }
EOF
  run "$NETRUN" --plugin v99.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin 'v99.so' was built against API version 99, netrun has 1" ]
  # in a script: at the statement
  printf 'x = 1\nload "v99.so"\n' > v.net
  run "$NETRUN" --allow-load dump v.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "v.net:2:1: error: plugin 'v99.so' was built against API version 99, netrun has 1" ]
  [ "${lines[1]}" = 'load "v99.so"' ]
  [ "${lines[2]}" = "^~~~~~~~~~~~~" ]
}

@test "loading errors: an op already registered, by netrun, another plugin or the script" {
  rejected dup '{.type = "relu", .infer = ok, .kernel = ok}' "op 'relu' is already registered"
  cp "$SO" copy.so
  run "$NETRUN" --plugin "$SO" --plugin copy.so ops
  [ "$output" = "netrun: error: plugin 'copy.so': op 'fused_dense_relu' is already registered" ]
  plugin_with twice '{.type = "twice", .infer = ok, .kernel = ok}'
  printf 'op twice(x) -> (y) {\n  y = x + x\n}\nload "twice.so"\n' > s.net
  run "$NETRUN" --allow-load dump s.net
  [ "${lines[0]}" = "s.net:4:1: error: plugin 'twice.so': op 'twice' is already registered" ]
}

@test "loading errors: the init function fails, with or without a reason" {
  build why <<'EOF'
#include <netrun/plugin.h>
const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
int netrun_plugin_init(const NetrunApi *api) { return api->init_error("no GPU with %d GB", 16); }
EOF
  run "$NETRUN" --plugin why.so ops
  [ "$status" -eq 1 ]
  [ "$output" = "netrun: error: plugin 'why.so' failed to initialize: no GPU with 16 GB" ]
  build silent <<'EOF'
#include <netrun/plugin.h>
const int netrun_plugin_api_version = NETRUN_PLUGIN_API_VERSION;
int netrun_plugin_init(const NetrunApi *api) { (void)api; return 3; }
EOF
  run "$NETRUN" --plugin silent.so ops
  [ "$output" = "netrun: error: plugin 'silent.so' failed to initialize" ]
}

@test "loading errors: definitions netrun cannot register" {
  rejected badname '{.type = "two words", .infer = ok, .kernel = ok}' "op name 'two words' is not a name"
  rejected nokernel '{.type = "nk", .infer = ok}' "op 'nk': it has no kernel"
  rejected nograd '{.type = "ng", .infer = ok, .kernel = ok, .grad_kind = NETRUN_GRAD_COMPOSITE}' \
    "op 'ng': it declares a composite gradient but has no grad maker"
  rejected nogradop '{.type = "ng", .out = {{"Out", 0, ""}}, .infer = ok, .kernel = ok, .grad_kind = NETRUN_GRAD_DEDICATED}' \
    "op 'ng' has no grad maker, and no op 'ng_grad' for the default one"
  rejected baddefault '{.type = "bd", .infer = ok, .kernel = ok, .out = {{"Out", 0, ""}}, .attrs = {{"k", NETRUN_ATTR_INT, "two", 0, ""}}}' \
    "op 'bd': the default 'two' of attribute 'k' is not a int"
  rejected badslot '{.type = "bs", .infer = ok, .kernel = ok, .in = {{"X@SUM", 0, ""}}}' \
    "op 'bs': slot name 'X@SUM' is not NAME or NAME@GRAD"
  rejected slotbits '{.type = "sb", .infer = ok, .kernel = ok, .in = {{"X", 1 << 3, ""}}, .out = {{"Out", 0, ""}}}' \
    "op 'sb': the flags of slot 'X' hold unknown bits"
}

@test "a plugin's callbacks that fail without a reason, or call the api in the wrong phase" {
  build_op sloppy <<'EOF'
static int kernel(NetrunCtx *c) { (void)c; return -1; }
static int grad(NetrunCtx *c) {
  NetrunTensor t;
  return nr->tensor_in(c, "X", 0, &t);
}
static const NetrunOpDef def = {.type = "sloppy", .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}},
  .infer = same_shape, .kernel = kernel, .grad_kind = NETRUN_GRAD_COMPOSITE, .grad = grad};
EOF
  printf 'load "sloppy.so"\nparam w : [2] = [1.0, 2.0]\nloss = sum(sloppy(w))\n' > s.net
  run "$NETRUN" --allow-load run s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "s.net:3:12: error: sloppy: the kernel failed (the plugin gave no reason)" ]
  run "$NETRUN" --allow-load dump --backward s.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "s.net:3:12: error: sloppy: the plugin called tensor_in in a grad maker, not in a kernel" ]
}

@test "a plugin's mistakes in inference and grad makers are reported as its op's errors" {
  plugin_with lazy '{.type = "lazy", .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}}, .infer = ok, .kernel = ok}'
  printf 'load "lazy.so"\nparam w : [2] = [1.0, 2.0]\ny = lazy(w)\n' > lazy.net
  run "$NETRUN" --allow-load dump lazy.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "lazy.net:3:5: error: lazy: its shape inference did not set output Out" ]
  build_op mistake <<'EOF'
static int copy(NetrunCtx *c) {
  NetrunTensor x, out;
  nr->tensor_in(c, "X", 0, &x);
  nr->tensor_out(c, "Out", 0, &out);
  for (int64_t i = 0; i < x.numel; i++) ((float *)out.data)[i] = ((const float *)x.data)[i];
  return 0;
}
/* attribute "how" picks the mistake */
static int grad(NetrunCtx *c) {
  int64_t how = nr->attr_int(c, "how");
  NetrunOp *op = nr->emit(c, how == 0 ? "nope" : "scale");
  if (!op) return -1;
  nr->emit_in(c, op, how == 1 ? "Q" : "X", nr->grad_out(c, "Out", 0));
  nr->emit_out(c, op, "Out", nr->grad_in(c, "X", 0));
  NetrunAttrValue two = {.type = NETRUN_ATTR_INT, .u.i = 2};
  nr->emit_attr(c, op, "scale", &two);
  return 0;
}
static const NetrunOpDef def = {.type = "mistake", .in = {{"X", 0, ""}}, .out = {{"Out", 0, ""}},
  .attrs = {{"how", NETRUN_ATTR_INT, "0", 0, ""}},
  .infer = same_shape, .kernel = copy, .grad_kind = NETRUN_GRAD_COMPOSITE, .grad = grad};
EOF
  for how in 0 1 2; do
    printf 'load "mistake.so"\nparam w : [2] = [1.0, 2.0]\nloss = sum(mistake(w, how=%d))\n' $how > m$how.net
  done
  run "$NETRUN" --allow-load dump --backward m0.net
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "m0.net:3:12: error: mistake: its grad maker emits unknown op 'nope'" ]
  run "$NETRUN" --allow-load dump --backward m1.net
  [ "${lines[0]}" = "m1.net:3:12: error: mistake: its grad maker gives op 'scale' input 'Q', which it does not have" ]
  run "$NETRUN" --allow-load dump --backward m2.net
  [ "${lines[0]}" = "m2.net:3:12: error: mistake: its grad maker gives attribute 'scale' of op 'scale' a value that is not a float" ]
}

@test "a plugin built against the installed header works" {
  make -s -C "$ROOT" install DESTDIR="$BATS_TEST_TMPDIR/inst" PREFIX=/usr > /dev/null
  inst=$BATS_TEST_TMPDIR/inst/usr
  [ -f "$inst/include/netrun/plugin.h" ]
  [ -f "$inst/share/man/man7/netrun-ops.7" ]
  ${CC:-cc} -std=c11 -O2 -fPIC -shared -I"$inst/include" -o mine.so "$ROOT/examples/plugins/fused_dense_relu.c" -lopenblas
  grep -v '^load ' "$ROOT/examples/plugins/xor_fused.net" > xor.net
  run "$NETRUN" --plugin ./mine.so gradcheck xor.net
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "all gradients match finite differences within f32 noise (rtol 0.005, eps 0.01); 1 of 33 elements could not be checked: noise exceeds tolerance" ]
}
