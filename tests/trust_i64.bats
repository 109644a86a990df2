#!/usr/bin/env bats
# trust_i64.bats — a script's integer literals are exact i64 values past
# 2^53: a scalar (fill_constant's value) and a tensor literal (assign_value's
# values) carry the integer itself, not a double; arithmetic on them stays
# in int64; dump, the JSON dump, the REPL and the tape show every digit.

bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
}

@test "i64 literal past 2^53: printed, added, multiplied and compared exactly" {
  printf 'x = 9007199254740993\nprint(x)\nprint(x + 1, x - 1, x * 2)\nprint(x == 9007199254740992, x > 9007199254740992, x != 9007199254740993)\n' > a.net
  run "$NETRUN" run a.net
  [ "$status" -eq 0 ]
  [ "$output" = "9007199254740993
9007199254740994 9007199254740992 18014398509481986
False True False" ]
}

@test "i64 tensor literal past 2^53 keeps every element; so does a negated one" {
  printf 'x = [9007199254740993, 1]\nprint(x)\nprint(x + 2)\nprint([[-9007199254740993], [4611686018427387905]])\n' > l.net
  run "$NETRUN" run l.net
  [ "$status" -eq 0 ]
  [ "$output" = "[9007199254740993                1]
[9007199254740995                3]
[[  -9007199254740993]
 [4611686018427387905]]" ]
}

@test "INT64_MAX and INT64_MIN literals are exact; 2^63 needs its minus" {
  printf 'a = 9223372036854775807\nb = -9223372036854775808\nprint(a, a - 1, b, b + 1, b / 2)\nprint([9223372036854775807, -9223372036854775808])\nprint(-9223372036854775807 - 1 == b, 1.5 - -9223372036854775808)\n' > m.net
  run "$NETRUN" run m.net
  [ "$status" -eq 0 ]
  [ "$output" = "9223372036854775807 9223372036854775806 -9223372036854775808 -9223372036854775807 -4611686018427387904
[ 9223372036854775807 -9223372036854775808]
True 9.223372e+18" ]
  run "$NETRUN" dump m.net
  [ "$status" -eq 0 ]
  [[ "$output" == *$'\n  {Out=[b]} = fill_constant() {dtype=i64, shape=[], value=-9223372036854775808}\n'* ]]
  printf 'input k : i64\nprint(k)\n' > k.net
  run "$NETRUN" run --set k=-9223372036854775808 k.net
  [ "$status" -eq 0 ]
  [ "$output" = "-9223372036854775808" ]
  printf 'x = 1 - 9223372036854775808\n' > n.net
  run "$NETRUN" run n.net
  [ "$status" -eq 1 ]
  [ "$output" = "n.net:1:9: error: integer literal too large (the largest is 9223372036854775807)
x = 1 - 9223372036854775808
        ^~~~~~~~~~~~~~~~~~~" ]
}

@test "an integer literal beyond i64 is an error with a caret" {
  printf 'x = [1, 99999999999999999999]\n' > o.net
  run "$NETRUN" run o.net
  [ "$status" -eq 1 ]
  [ "$output" = "o.net:1:9: error: integer literal too large (the largest is 9223372036854775807)
x = [1, 99999999999999999999]
        ^~~~~~~~~~~~~~~~~~~~" ]
}

@test "dump shows an i64 constant's exact value; small ones print as before" {
  printf 'x = 9007199254740993\ny = 9007199254740992\nz = [9007199254740993, 1]\nw = 3\n' > d.net
  run "$NETRUN" dump d.net
  [ "$status" -eq 0 ]
  [ "${lines[5]}" = "  {Out=[x]} = fill_constant() {dtype=i64, shape=[], value=9007199254740993}" ]
  [ "${lines[6]}" = "  {Out=[y]} = fill_constant() {dtype=i64, shape=[], value=9007199254740992}" ]
  [ "${lines[7]}" = "  {Out=[z]} = assign_value() {dtype=i64, shape=[2], values=[9007199254740993, 1.0]}" ]
  [ "${lines[8]}" = "  {Out=[w]} = fill_constant() {dtype=i64, shape=[], value=3.0}" ]
  run "$NETRUN" dump --format json d.net
  [ "$status" -eq 0 ]
  [[ "$output" == *'"value": 9007199254740993'* ]]
  [[ "$output" == *'"value": 9007199254740992'* ]]
  [[ "$output" == *'"values": [9007199254740993, 1]'* ]]
}

@test "an i64 declaration's default and full(value=...) past 2^53 are exact" {
  printf 'input n : i64 = 9007199254740993\nprint(n + 0)\nprint(full([2], value=9007199254740993, dtype=i64))\n' > f.net
  run "$NETRUN" run f.net
  [ "$status" -eq 0 ]
  [ "$output" = "9007199254740993
[9007199254740993 9007199254740993]" ]
}

@test "the REPL and a run with --dump-tape keep an i64 literal exact" {
  run --separate-stderr "$NETRUN" repl <<< $'x = 9007199254740993\nx\nx + 1\n[9007199254740993, 3]'
  [ "$status" -eq 0 ]
  [ "$output" = "9007199254740993
9007199254740994
[9007199254740993                3]" ]
  printf 'param w : f32[1] = [1.0]\nn = 9007199254740993\nloss = sum(w * w)\nprint(n + 1)\n' > t.net
  run --separate-stderr "$NETRUN" run --dump-tape t.net
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "9007199254740994" ]
}
