#!/usr/bin/env bats
# trust_plugin_race.bats — a plugin is checked and loaded through one
# descriptor (issue 31): a symbolic link inside the allowed folder flipped
# between the real plugin, a truncated copy and a library outside the
# folder, as fast as a loop can, while netrun loads it again and again.
# netrun must never run the outside library's constructor nor map the
# truncated file (SIGBUS): each run loads the plugin or refuses it.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
  SO=$ROOT/examples/plugins/fused_dense_relu.so
  cd "$BATS_TEST_TMPDIR"
}

@test "a symbolic link flipped during loads: never the outside library, never the truncated one" {
  [ -f "$SO" ] || skip "make plugins builds $SO"
  mkdir -p allowed outside
  cp "$SO" allowed/good.so
  head -c $(($(stat -c %s "$SO") / 2)) "$SO" > allowed/cut.so
  printf '#include <stdio.h>\n__attribute__((constructor)) static void run(void) {\n  FILE *f = fopen("%s/pwned", "w");\n  if (f) fclose(f);\n}\n' \
    "$BATS_TEST_TMPDIR" > outside/evil.c
  ${CC:-cc} -fPIC -shared -o outside/evil.so outside/evil.c
  ln -s good.so allowed/p.so
  printf 'load "p.so"\nx = 1.0\nprint(x)\n' > allowed/s.net
  # the flipper: os.replace of a fresh link over p.so, round the three
  # targets, until told to stop (at most 30 s); it writes how many flips
  python3 - "$BATS_TEST_TMPDIR" > flips.txt <<'PY' &
import os, sys, time
d = sys.argv[1]
targets = ['good.so', 'cut.so', os.path.join(d, 'outside', 'evil.so')]
n, end = 0, time.time() + 30
while time.time() < end and not os.path.exists(os.path.join(d, 'stop')):
    tmp = os.path.join(d, 'allowed', '.p.tmp')
    os.symlink(targets[n % 3], tmp)
    os.replace(tmp, os.path.join(d, 'allowed', 'p.so'))
    n += 1
print(n)
PY
  flipper=$!
  loaded=0 refused=0 other=0 runs=0
  end=$((SECONDS + 20))
  while [ $SECONDS -lt $end ] && [ $runs -lt 400 ]; do
    status=0
    (cd allowed && "$NETRUN" --allow-load run s.net) > out.txt 2>&1 || status=$?
    runs=$((runs + 1))
    if [ $status -eq 0 ]; then loaded=$((loaded + 1))
    elif [ $status -eq 1 ]; then refused=$((refused + 1))
    else other=$((other + 1)); cp out.txt other.txt; echo "status $status"; fi
    [ -e pwned ] && break
  done
  touch stop
  wait $flipper
  flips=$(cat flips.txt)
  echo "runs $runs: loaded $loaded, refused $refused, other $other; flips $flips"
  [ ! -e pwned ]
  [ $other -eq 0 ]
  [ $loaded -gt 0 ]
  [ $refused -gt 0 ]
  [ "$flips" -ge 1000 ]
}
