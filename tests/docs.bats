#!/usr/bin/env bats
# docs.bats — the documentation cannot rot: every example script in the
# language man page lowers cleanly, the examples of netrun-ops(7) build and
# check, every session of commands in the man pages prints what the page
# shows, every session transcript in netrun(1) is what a session prints,
# every command of README.md and doc/*.md runs and prints what it shows,
# and no command in a man page or a Markdown file escapes these tests
# unless it is marked as shown, not run (with the shorter variant that
# runs instead).

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  ROOT=$BATS_TEST_DIRNAME/..
  cd "$BATS_TEST_TMPDIR"
  # The documents' figures were printed with the project machine's
  # OpenBLAS setting; OpenBLAS's other kernels sum in other orders and
  # change the last digits of a few (a gradcheck's errors, wgan_gp's
  # penalty): the pages are checked under the setting they show, whether
  # or not the host sets it (a CPU without AVX2 cannot run those kernels).
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512
  fi
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

# Man pages: an .EX block whose lines include a command (`$ COMMAND`, or a
# line starting with netrun, mpirun, make or cc) is a session, an example
# or a transcript (above), or it follows one of these comment lines:
#   .\" run, output not shown      its commands run, and each must succeed
#   .\" not run: REASON            shown, not run; any number of
#   .\" instead: COMMAND           lines give the shorter variants, run
# man_commands PAGE...: prints each unmarked command as PAGE:LINE: TEXT
# (and fails) and writes the commands to run to ./quiet (one a line).
man_commands() {
  awk '
    function plain(s) { gsub(/\\-/, "-", s); gsub(/\\\(aq/, "\047", s); gsub(/\\e/, "\\", s); gsub(/\\\(dq/, "\"", s); return s }
    FNR == 1 { inside = 0; mark = "" }
    /^\.\\" (session|example|transcript): / { inside = 1; next }
    /^\.\\" end (session|example|transcript)/ { inside = 0; next }
    /^\.\\" run, output not shown/ { mark = "run"; next }
    /^\.\\" not run: / { mark = "not run"; next }
    /^\.\\" instead: / { c = $0; sub(/^\.\\" instead: /, "", c); print plain(c) > "quiet"; next }
    /^\.EX/ { ex = 1; blockmark = mark; mark = ""; next }
    /^\.EE/ { ex = 0; next }
    !ex || inside { next }
    {
      line = plain($0)
      if (line !~ /^[ \t]*(\$ |netrun |mpirun |make |cc )/) next
      if (blockmark == "run") { sub(/^[ \t]*\$ /, "", line); print line > "quiet" }
      else if (blockmark != "not run") { printf "%s:%d: %s\n", FILENAME, FNR, line; bad = 1 }
    }
    END { exit bad }
  ' "$@"
}

@test "every command in the man pages is run by a test, or marked as shown, not run" {
  run man_commands "$ROOT"/man/netrun.1 "$ROOT"/man/netrun-lang.5 "$ROOT"/man/netrun-ops.7
  [ "$status" -eq 0 ] || { echo "commands in man pages that no test runs (make them a session, or mark them):"; echo "$output"; return 1; }
  [ -s quiet ]
  mkdir q && cd q && mkdir bin && ln -s "$NETRUN" bin/netrun && ln -s "$ROOT/examples" examples
  PATH=$PWD/bin:$PATH
  failed=0
  while IFS= read -r cmd; do
    out=$(bash -c "$cmd" 2>&1 </dev/null) || { printf 'FAILED (status %s): %s\n%s\n' "$?" "$cmd" "$out"; failed=1; }
  done < ../quiet
  [ "$failed" -eq 0 ]
}

# Markdown (README.md, doc/*.md).  A fenced block is
#   ```console  a session: `$ COMMAND` lines run in order, with bash, in one
#                fresh folder per document that holds `examples` (the source
#                tree's) and has `netrun` and Debian's python3 on the PATH;
#                the other lines are what the command prints, standard output
#                and error together.  `…` stands for any text within a line,
#                a line `...` for any number of lines.  `$ cat NAME` (a name
#                without a folder) first writes NAME: the lines after it are
#                its text (so a later `$ cat NAME` may change it).
#   ```sh        commands whose output is not shown: each must succeed.
#   ```repl      a REPL transcript: the lines after `netrun> ` or `   ...> `
#                are entered, the others are what `netrun repl` prints.
# Any other block is text and must hold no `$ COMMAND` line.  A block whose
# commands take minutes, root or several hosts follows the comment lines
#   <!-- not run: REASON -->
#   <!-- instead: COMMAND -->     (none or several: the shorter variants, run)
# and is shown, not run.  DOCS_SLOW=1 runs such console blocks as well
# (minutes; `DOCS_SLOW=1 bats -f Markdown tests/docs.bats`).
#
# md_sessions DOC DIR: writes DIR/commands (a line per command: S (shown:
# its output is compared), Q (quiet: it must succeed), C (`catN.txt NAME`:
# copy the text to NAME, then cat it) or R (a REPL input file), a tab, the
# command), DIR/expected and DIR/patterns (one extended
# regular expression per expected line, or SKIP for `...`).
md_sessions() {
  mkdir -p "$2"
  awk -v dir="$2" -v slow="${DOCS_SLOW:-0}" '
    function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1 }
    function re(s,   out, i, c) {
      out = ""
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (substr(s, i, 3) == "\342\200\246") { out = out ".*"; i += 2; continue }
        out = out (c == "\\" ? "\\\\" : c == "^" ? "\\^" : c ~ /[].$*+?(){}|[]/ ? "[" c "]" : c)
      }
      return out
    }
    function expect(line) {
      print line > (dir "/expected")
      print (line == "..." ? "SKIP" : "^" re(line) "$") > (dir "/patterns")
    }
    BEGIN { n = 0 }
    /^<!-- not run: .* -->$/ && !fence { notrun = 1; next }
    /^<!-- instead: .* -->$/ && !fence { c = $0; sub(/^<!-- instead: /, "", c); sub(/ -->$/, "", c); print "Q\t" c > (dir "/commands"); next }
    /^```/ && !fence {
      fence = 1; kind = substr($0, 4); skip = notrun && !(slow && kind == "console"); notrun = 0; file = ""
      if (kind == "repl" && !skip) { rin = dir "/repl" (++n) ".in"; printf "" > rin; print "R\t" rin > (dir "/commands") }
      next
    }
    /^```$/ && fence { fence = 0; if (file) close(file); file = ""; if (rin) close(rin); rin = ""; next }
    notrun && !/^(<!--.*-->)?$/ { fail("a not-run mark must come right before a fenced block"); notrun = 0 }
    !fence { next }
    kind != "console" && kind != "sh" && kind != "repl" { if (/^\$ /) fail("a command outside a console or sh block"); next }
    skip { next }
    kind == "sh" { if ($0 !~ /^[ \t]*(#.*)?$/) print "Q\t" $0 > (dir "/commands"); next }
    kind == "repl" {
      line = $0
      if (sub(/^netrun> /, "", line) || sub(/^   \.\.\.> /, "", line)) print line > rin
      else expect($0)
      next
    }
    /^\$ / {
      if (file) close(file)
      file = ""
      cmd = substr($0, 3)
      print "$ " cmd > (dir "/expected"); print "^" re("$ " cmd) "$" > (dir "/patterns")
      if (split(cmd, w, " ") == 2 && w[1] == "cat" && w[2] !~ /\//) {
        file = dir "/cat" (++n) ".txt"; printf "" > file
        print "C\tcat" n ".txt " w[2] > (dir "/commands")
      } else print "S\t" cmd > (dir "/commands")
      next
    }
    { expect($0); if (file) print > file }
    END { exit bad }
  ' "$1"
}

# run_md DIR: runs DIR/commands in DIR and compares what they print with
# DIR/patterns (SKIP: any lines up to the next pattern's); on a difference,
# shows it against DIR/expected.
run_md() {
  mkdir -p "$1/bin"
  ln -s "$NETRUN" "$1/bin/netrun"
  [ ! -x /usr/bin/python3 ] || ln -s /usr/bin/python3 "$1/bin/python3"
  ln -s "$ROOT/examples" "$1/examples"
  touch "$1/patterns" "$1/expected" "$1/commands"
  (
    cd "$1" && PATH=$PWD/bin:$PATH
    while IFS=$'\t' read -r mode cmd; do
      case $mode in
      S) printf '$ %s\n' "$cmd"; bash -c "$cmd" 2>&1 </dev/null || true ;;
      C) set -- $cmd; cp "$1" "$2"; printf '$ cat %s\n' "$2"; cat "$2" ;;
      Q) out=$(bash -c "$cmd" 2>&1 </dev/null) || printf 'FAILED (status %s): %s\n%s\n' "$?" "$cmd" "$out" ;;
      R) "$NETRUN" repl < "$cmd" 2>&1 || true ;;
      esac
    done < commands > actual
  )
  awk 'function fits(i, j,   k) {      # patterns i.. against lines j..
         if (i > n) return j > m
         if (re[i] == "SKIP") { for (k = j; k <= m + 1; k++) if (fits(i + 1, k)) return 1; return 0 }
         if (j > m || a[j] !~ re[i]) { if (i > far) { far = i; at = j }; return 0 }
         return fits(i + 1, j + 1)
       }
       NR == FNR { re[++n] = $0; next }
       { a[++m] = $0 }
       END { if (!fits(1, 1)) { printf "shown line %d does not match what ran (line %d): %s\n", far, at, a[at]; exit 1 } }' \
    "$1/patterns" "$1/actual" > "$1/verdict" ||
    { echo "${1##*/}:"; cat "$1/verdict"; diff -u "$1/expected" "$1/actual" | head -n 60; return 1; }
}

@test "Markdown: every command of README.md and doc/*.md runs and prints what the document shows" {
  n=0
  for doc in "$ROOT"/README.md "$ROOT"/doc/*.md; do
    name=$(basename "$doc" .md)
    md_sessions "$doc" "$PWD/$name"
    [ ! -s "$name/commands" ] || n=$((n + 1))
    run_md "$PWD/$name"
  done
  [ "$n" -ge 3 ]
}

# The README's table of examples gives their figures in bold; each is
# also in doc/speed.md, whose sessions run the short examples: a figure
# the README keeps after a run changed it fails here or there.
@test "every bold figure of the README's examples table is doc/speed.md's" {
  awk '/^## Examples/ { on = 1 } /^## / && !/^## Examples/ { on = 0 } on && /^\| `/' "$ROOT/README.md" |
    grep -o '\*\*[^*]*\*\*' | tr -d '*' > figures
  [ "$(wc -l < figures)" -ge 5 ]
  missing=""
  while IFS= read -r f; do grep -qF -- "$f" "$ROOT/doc/speed.md" || missing="$missing [$f]"; done < figures
  [ -z "$missing" ] || { echo "README figures not in doc/speed.md:$missing"; return 1; }
}

# A summary line of `make train` quoted in a man page or the README is the
# one doc/speed.md shows (DOCS_SLOW=1 runs it there).
@test "the peak memory of make train quoted anywhere is doc/speed.md's" {
  grep -ho 'peak memory [0-9.]* MB (data 55 MB, model 2.1 MB)' "$ROOT"/README.md "$ROOT"/man/* | sort -u > quoted
  [ -s quoted ]
  while IFS= read -r q; do
    grep -qF -- "$q" "$ROOT/doc/speed.md" || { echo "not what doc/speed.md shows: $q"; return 1; }
  done < quoted
}
