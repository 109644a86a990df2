#!/usr/bin/env bats
# docs.bats — the documentation cannot rot: every example script in the
# language man page lowers cleanly, the examples of netrun-ops(7) build and
# check, every session of commands in the man pages prints what the page
# shows, every session transcript in netrun(1) is what a session prints,
# and the README's sample output is what netrun prints.

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
}

# Writes each `.\" example: NAME` ... `.\" end example` block of a man page
# to the file NAME, without the .EX/.EE lines and with man escapes undone.
extract() {
  awk '
    /^\.\\" example: / { name = $3; out = 1; printf "" > name; next }
    /^\.\\" end example/ { out = 0; close(name); next }
    out && /^\.(EX|EE)/ { next }
    out { gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047"); gsub(/\\e/, "\\"); gsub(/^\\&/, ""); print >> name }
  ' "$1"
}

# each VERB: runs `netrun VERB F` on every *.net file F here, which must
# succeed; n gets their count.
each() {
  n=0
  for f in *.net; do
    run "$NETRUN" "$@" "$f"
    [ "$status" -eq 0 ] || { echo "$f:"; echo "$output"; return 1; }
    n=$((n + 1))
  done
}

# Sessions: a `.\" session: NAME` ... `.\" end session` block of a man page
# is a transcript (in .EX/.EE) whose `$ COMMAND` lines run in order, with
# bash, in a fresh folder NAME/ that holds `examples` (the source tree's)
# and has `netrun` on the PATH; the other lines are what the commands print,
# standard output and error together.  `$ cat FILE` also writes FILE: the
# lines after it are its text.  Text in italics (\fI...\fP) stands for what
# varies from run to run (times, speeds, memory) and matches anything.
#
# sessions PAGE: writes, per session, NAME/commands (one a line),
# NAME/expected (the transcript as the page renders it) and NAME/patterns
# (one extended regular expression per line of the transcript).
sessions() {
  awk '
    function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1 }
    function lit(c, re) { return !re ? c : c == "\\" ? "\\\\" : c == "^" ? "\\^" : c ~ /[].$*+?(){}|[]/ ? "[" c "]" : c }
    # The line as man shows it (re = 0) or as a regular expression (re = 1).
    function unescape(s, re,   out, i, c, n, name, italic) {
      out = ""; italic = 0
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\") {
          n = substr(s, i + 1, 1); i++
          if (n == "-") c = "-"
          else if (n == "e") c = "\\"
          else if (n == "&") continue
          else if (n == "(") {
            name = substr(s, i + 1, 2); i += 2
            if (name == "aq") c = "\047"; else if (name == "dq") c = "\""
            else if (name == "ha") c = "^"; else if (name == "ti") c = "~"
            else { fail("unknown escape \\(" name); continue }
          } else if (n == "f") {
            n = substr(s, i + 1, 1); i++
            if (n == "I" && re && !italic) out = out ".*"
            italic = n == "I"
            continue
          } else { fail("unknown escape \\" n); continue }
        }
        if (!(italic && re)) out = out lit(c, re)
      }
      return out
    }
    /^\.\\" session: / { dir = $3; on = 1; file = ""; system("mkdir -p " dir); next }
    /^\.\\" end session/ { on = 0; close(dir "/commands"); close(dir "/expected"); close(dir "/patterns"); if (file) close(file); next }
    !on || /^\./ { next }
    {
      text = unescape($0, 0)
      print text > (dir "/expected")
      print "^" unescape($0, 1) "$" > (dir "/patterns")
      if (substr(text, 1, 2) == "$ ") {
        if (file) close(file)
        file = ""
        print substr(text, 3) > (dir "/commands")
        if (split(substr(text, 3), w, " ") == 2 && w[1] == "cat") { file = dir "/" w[2]; printf "" > file }
      } else if (file) {
        print text > file
      }
    }
    END { exit bad }
  ' "$1"
}

# run_session NAME: runs NAME/commands and compares what they print with
# NAME/patterns; on a difference, shows it against NAME/expected.
run_session() {
  mkdir -p "$1/bin"
  ln -s "$NETRUN" "$1/bin/netrun"
  ln -s "$ROOT/examples" "$1/examples"
  (
    cd "$1" && PATH=$PWD/bin:$PATH
    while IFS= read -r cmd; do
      printf '$ %s\n' "$cmd"
      bash -c "$cmd" 2>&1 </dev/null || true   # a status shows only if the page echoes it
    done < commands > actual
  )
  awk 'NR == FNR { re[++n] = $0; next }
       { m = FNR; if (m > n || $0 !~ re[m]) bad = 1 }
       END { exit bad || m != n }' "$1/patterns" "$1/actual" ||
    { echo "session $1:"; diff -u "$1/expected" "$1/actual"; return 1; }
}

@test "every session of commands in netrun(1) and netrun-lang(5) prints what the page shows" {
  n=0
  for page in netrun.1 netrun-lang.5; do
    mkdir "$page" && (cd "$page" && sessions "$ROOT/man/$page")
    for dir in "$page"/*/; do
      [ -d "$dir" ] || continue
      run_session "${dir%/}"
      n=$((n + 1))
    done
  done
  [ "$n" -ge 2 ]
}

@test "every example in netrun-lang(5) lowers without errors" {
  extract "$ROOT/man/netrun-lang.5"
  each dump
  [ "$n" -ge 10 ]
}

# netrun-ops(7): each NAME.c example is a plugin, built as the page says;
# each NAME.net example passes gradcheck; each NAME.backward is the output
# of `netrun dump --backward NAME.net`.
@test "every example in netrun-ops(7) builds, checks its gradients and shows current output" {
  extract "$ROOT/man/netrun-ops.7"
  for c in *.c; do
    ${CC:-cc} -std=c11 -Wall -Wextra -pedantic -Werror -O2 -fPIC -shared -I"$ROOT/include" \
      -o "${c%.c}.so" "$c" -lm
  done
  each --allow-load gradcheck
  for b in *.backward; do
    "$NETRUN" --allow-load dump --backward "${b%.backward}.net" > actual.txt
    diff -u "$b" actual.txt
  done
  [ "$n" -ge 1 ] && [ -f swish.so ] && [ -f swish_plugin.backward ]
}

# Writes each `.\" transcript: NAME` ... `.\" end transcript` block of a
# man page as NAME.in, the lines entered (after a prompt, without it), and
# NAME.out, the other lines: what a session fed NAME.in prints.
transcripts() {
  awk '
    /^\.\\" transcript: / { name = $3; out = 1; printf "" > (name ".in"); printf "" > (name ".out"); next }
    /^\.\\" end transcript/ { out = 0; close(name ".in"); close(name ".out"); next }
    out && /^\.(EX|EE)/ { next }
    out {
      gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047"); gsub(/\\\(dq/, "\""); gsub(/\\\(ha/, "^")
      gsub(/\\\(ti/, "~"); gsub(/\\e/, "\\"); gsub(/^\\&/, "")
      if (sub(/^netrun> /, "") || sub(/^   \.\.\.> /, "")) print >> (name ".in")
      else print >> (name ".out")
    }
  ' "$1"
}

@test "every session transcript in netrun(1) is what a session prints" {
  transcripts "$ROOT/man/netrun.1"
  n=0
  for f in *.in; do
    "$NETRUN" repl < "$f" > "${f%.in}.actual" 2>&1 || true
    diff -u "${f%.in}.out" "${f%.in}.actual"
    n=$((n + 1))
  done
  [ "$n" -ge 1 ]
}

@test "the README's dump of examples/xor.net is current" {
  awk '/^`netrun dump examples\/xor.net` prints:/ { on = 1; next }
       on && /^```$/ { if (inside) exit; inside = 1; next }
       on && inside { print }' "$ROOT/README.md" > readme.txt
  [ -s readme.txt ]
  (cd "$ROOT" && "$NETRUN" dump examples/xor.net) > actual.txt
  diff -u readme.txt actual.txt
}
