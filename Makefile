# netrun — build, test, install.  See README.md.
#
#   make            build ./netrun and the example plugin
#   make deps       install missing Debian packages (apt-get)
#   make test       deps, build, and every test
#   make asan       the whole suite under AddressSanitizer + UBSan
#   make valgrind   the whole suite under valgrind's memcheck
#   make fuzz       each libFuzzer harness for FUZZ_TIME seconds
#   make install    PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
BUILD   ?= build

WARN    = -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes \
          -Wmissing-prototypes -Wformat=2 -Wundef -Wvla -Wcast-align \
          -Wnull-dereference -Wdouble-promotion
ifdef CI
WARN   += -Werror
endif
OPT     ?= -O3 -g -fno-math-errno

# OpenBLAS's OpenMP build (Debian's libopenblas0-openmp), linked by its path
# and found there at run time: its GEMMs and netrun's own loops (src/exec/par.h)
# then share one team of threads, so neither's threads spin while the
# other's work waits.  Without it (or with OMP=0) netrun's loops run on one
# thread and the default OpenBLAS is linked.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
OMP_BLAS ?= /usr/lib/$(MULTIARCH)/openblas-openmp/libopenblas.so.0
OMP ?= $(if $(wildcard $(OMP_BLAS)),1,0)
ifeq ($(OMP),1)
PAR_CFLAGS = -fopenmp
BLAS_LIBS  = $(OMP_BLAS) -Wl,-rpath,$(dir $(OMP_BLAS))
else
PAR_CFLAGS =
BLAS_LIBS  = -lopenblas
endif

CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) $(PAR_CFLAGS) $(WARN) -Isrc -Iinclude -I$(BUILD) $(CFLAGS)
LDLIBS  = $(BLAS_LIBS) -ldnnl -lz -lpng -ljpeg -ledit -ljansson -lm -ldl

# Debian packages: build, run, and test dependencies.  python3-numpy is for
# the tests only (tests/formats.bats reads exported weights with NumPy);
# netrun itself reads and writes .npy/.npz without it.  libpng-dev and
# libjpeg62-turbo-dev decode image folders (src/io/image.c).  libjansson-dev
# reads and writes the JSON of netrun lsp's JSON-RPC (src/cli/lsp.c), a
# maintained parser rather than one more by hand.  neovim is for the tests
# only: its built-in LSP client drives netrun lsp (tests/lsp.bats); so is
# emacs-nox, which loads editors/emacs's major mode in batch mode there; and
# strace, which counts how often a data file is opened (tests/trust_input.bats).
# libdnnl-dev is oneDNN, whose sgemm computes the larger f32 products
# (src/exec/par.c): its JIT kernels use the CPU's widest vectors.
DEB_PKGS = flex bison libopenblas-dev libopenblas0-openmp libdnnl-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libedit-dev bats \
           dataset-fashion-mnist graphviz man-db groff-base jq tmux python3-numpy \
           libopenmpi-dev openmpi-bin wamerican libjansson-dev neovim emacs-nox strace

SRC     = $(wildcard src/*/*.c)
OBJ     = $(SRC:%.c=$(BUILD)/%.o) $(BUILD)/parser.o $(BUILD)/lexer.o
DEP     = $(OBJ:.o=.d)

all: netrun plugins tools

netrun: $(OBJ)
	$(CC) $(CFLAGS_ALL) -o $@ $(OBJ) $(LDFLAGS) $(LDLIBS)

# Plugins (include/netrun/plugin.h): shared libraries netrun loads with
# --plugin or `load "NAME.so"`.  Built as a user builds one, against the
# public header only.
PLUGINS = $(patsubst %.c,%.so,$(wildcard examples/plugins/*.c))
PLUGIN_FIXTURES = tests/cases/plugins/fused_dense_relu.so tests/cases/plugins/not_a_library.so
plugins: $(PLUGINS) $(PLUGIN_FIXTURES)
examples/plugins/%.so: examples/plugins/%.c include/netrun/plugin.h
	$(CC) -std=c11 -O2 -g -fPIC -shared $(WARN) -Iinclude $(CFLAGS) -o $@ $< $(LDFLAGS) -lopenblas -lm

# Fixtures the plugin cases (tests/cases/plugins) load from their folder:
# a copy of the example plugin (not a link: --allow-load refuses a plugin
# whose real path leaves the script's folder), and a file that is no
# library.  Made here, not tracked: .so files are build outputs.
tests/cases/plugins/fused_dense_relu.so: examples/plugins/fused_dense_relu.so Makefile
	rm -f $@ && cp $< $@
tests/cases/plugins/not_a_library.so:
	printf 'this is a text file, not a shared library\n' > $@

$(BUILD)/%.o: %.c | $(BUILD)/parser.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

# The generated parser and lexer are build outputs.  Their code is not ours,
# so it is compiled without the strictest warnings.
GEN_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Isrc -I$(BUILD) $(CFLAGS) \
             -Wno-unused-function -Wno-unused-but-set-variable -Wno-sign-compare

$(BUILD)/parser.c $(BUILD)/parser.h &: grammar/netrun.y
	@mkdir -p $(BUILD)
	bison -Wall -Werror --defines=$(BUILD)/parser.h -o $(BUILD)/parser.c $<

$(BUILD)/lexer.c $(BUILD)/lexer.h &: grammar/netrun.l $(BUILD)/parser.h
	@mkdir -p $(BUILD)
	flex --header-file=$(BUILD)/lexer.h -o $(BUILD)/lexer.c $<

$(BUILD)/parser.o: $(BUILD)/parser.c $(BUILD)/lexer.h
	$(CC) $(GEN_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/lexer.o: $(BUILD)/lexer.c
	$(CC) $(GEN_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/src/front/ast.o: $(BUILD)/lexer.h

-include $(DEP)

# Test tools: mkimages writes IDX images as an image folder of PNG or JPEG
# files (tests/images.bats, examples/fashion_folder.net).
tools: $(BUILD)/mkimages $(BUILD)/vmath_check $(BUILD)/gemm_signals
$(BUILD)/mkimages: tests/tools/mkimages.c
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) $(CFLAGS) -o $@ $< $(LDFLAGS) -lpng -ljpeg -lz

# vmath_check sweeps src/ops/vmath.c's exp against exp in double
# (tests/vmath.bats), built with netrun's own flags, so it checks the code
# netrun runs.
$(BUILD)/vmath_check: tests/tools/vmath_check.c src/ops/vmath.c src/ops/vmath.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_ALL) -o $@ tests/tools/vmath_check.c src/ops/vmath.c -lm

# examples/fashion_folder.net's data: Fashion-MNIST as folders of PNGs.
FASHION = /usr/share/datasets/fashion-mnist
fashion-folder: $(BUILD)/mkimages
	rm -rf examples/data/fashion-folder && mkdir -p examples/data/fashion-folder
	$(BUILD)/mkimages --first 10000 $(FASHION)/train-images-idx3-ubyte.gz $(FASHION)/train-labels-idx1-ubyte.gz \
	  examples/data/fashion-folder/train
	$(BUILD)/mkimages --first 2000 $(FASHION)/t10k-images-idx3-ubyte.gz $(FASHION)/t10k-labels-idx1-ubyte.gz \
	  examples/data/fashion-folder/test

# ---- set-up -------------------------------------------------------------
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# ---- tests ------------------------------------------------------------------
NETRUN ?= $(CURDIR)/netrun

test: deps test-deps
	$(MAKE) all
	$(MAKE) check

# make test-hosts: netrun over TCP between three "hosts" made of network
# namespaces of this machine (root; tests/hosts/hosts.bats, about 40 s).
test-hosts: all
	NETRUN=$(NETRUN) bats tests/hosts/hosts.bats

check: fuzz-replay
	tests/tools/check_bats.sh
	NETRUN=$(NETRUN) tests/run-cases.sh
	NETRUN=$(NETRUN) bats tests/*.bats

# The ONNX tests' references (tests/onnx.bats): onnx builds models with
# onnx.helper, onnxruntime runs them.  PyPI packages, for the tests only
# (netrun reads and writes ONNX itself), in a virtual environment under
# build/; not part of make deps.  When they cannot be installed this fails,
# so the ONNX tests are never skipped silently.
ONNX_VENV = $(CURDIR)/build/venv
ONNX_PY_PKGS = onnx onnxruntime
test-deps:
	@test -x $(ONNX_VENV)/bin/python || python3 -m venv $(ONNX_VENV) || \
	  { echo "make test-deps: cannot create the virtual environment $(ONNX_VENV)"; exit 1; }
	@$(ONNX_VENV)/bin/python -c 'import onnx, onnxruntime' 2>/dev/null || \
	  $(ONNX_VENV)/bin/python -m pip install -q $(ONNX_PY_PKGS) || \
	  { echo "make test-deps: cannot install $(ONNX_PY_PKGS) from PyPI into $(ONNX_VENV); the ONNX tests need them"; exit 1; }

# Regenerate the expected output of every data case after a deliberate change.
regen: netrun
	NETRUN=$(NETRUN) tests/run-cases.sh --regen

SAN_OPT = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1

asan: deps
	$(MAKE) BUILD=build/asan OPT="$(SAN_OPT)" LDFLAGS="-fsanitize=address,undefined" build/asan/netrun
	$(MAKE) plugins
	$(ASAN_ENV) $(MAKE) check NETRUN=$(CURDIR)/build/asan/netrun

build/asan/netrun: $(OBJ)
	$(CC) $(CFLAGS_ALL) -o $@ $(OBJ) $(LDFLAGS) $(LDLIBS)

# Valgrind's memcheck over the cases and bats suites: netrun runs through
# tests/valgrind.sh, which fails a test on any memcheck report or leak and
# logs it in build/valgrind; any log that is not empty fails the target.
# (The allocation walks of reliability.bats take every 20th allocation, and
# Ctrl-C comes after the slower start.)
VALGRIND_ENV = VALGRIND_LOGS=$(CURDIR)/build/valgrind NETRUN_BIN=$(CURDIR)/netrun \
  NETRUN=$(CURDIR)/tests/valgrind.sh NETRUN_WALK_STRIDE=20 NETRUN_START_SECONDS=10
valgrind: deps
	$(MAKE) deps DEB_PKGS=valgrind
	$(MAKE) all
	rm -rf build/valgrind && mkdir -p build/valgrind && chmod 1777 build/valgrind
	$(VALGRIND_ENV) tests/run-cases.sh
	$(VALGRIND_ENV) bats tests/*.bats
	@if [ -n "$$(find build/valgrind -name '*.log' -size +0)" ]; then \
	  find build/valgrind -name '*.log' -size +0 -exec cat {} +; echo "valgrind: reports above"; exit 1; \
	fi; echo "valgrind: no report from $$(ls build/valgrind | wc -l) runs"

# ---- fuzzing (tests/fuzz) -----------------------------------------------------
# make fuzz: every harness built with clang's libFuzzer, ASan and UBSan, run
# for FUZZ_TIME seconds each; new inputs go to build/fuzz/corpus/NAME, crashes
# to build/fuzz/crash-NAME-*.  The corpora in tests/fuzz are seeds, read only.
# make fuzz-replay (part of make check): every seed and crash regression run
# once through each harness under gcc's sanitizers.
FUZZ = parse exec idx csv checkpoint plot npy safetensors image text feed onnx import lsp
FUZZ_TIME ?= 60
# FUZZ_RUNS=N stops each harness after N executions instead (FUZZ_TIME still
# bounds it); `make fuzz FUZZ="csv idx"` runs only those harnesses.
FUZZ_RUNS ?=
FUZZ_FLAGS ?=
FUZZ_CC ?= clang
FUZZ_DEFS = -DNETRUN_STDLIB_DIR='"$(CURDIR)/stdlib"' -Itests/fuzz
# A harness's seeds (the script harnesses share theirs; plot's are the plot
# tests' logs) and crash regressions.
fuzz_seeds = $$(case $(1) in parse|exec) echo tests/fuzz/corpus/script;; plot) echo tests/plot;; \
  import) echo tests/fuzz/corpus/onnx;; \
  feed) echo tests/fuzz/corpus/npy tests/fuzz/corpus/feed;; \
  *) echo tests/fuzz/corpus/$(1);; esac) $$(ls -d tests/fuzz/regress/$(1) 2>/dev/null)

# The generated scanner and parser are table-driven: tracing their
# comparisons made scripts 4x slower to fuzz and guides nothing a dictionary
# of the language's tokens (tests/fuzz/script.dict, which lsp's documents
# use too) does not.  The binary
# readers' dictionaries hold their formats' words and the extreme sizes that
# reach their overflow checks (2^62, 2^63 - 1, 19-digit shapes, -2^63).
fuzz_dict = $$(case $(1) in parse|exec|lsp) echo -dict=tests/fuzz/script.dict;; feed) echo -dict=tests/fuzz/npy.dict;; \
  *) test -f tests/fuzz/$(1).dict && echo -dict=tests/fuzz/$(1).dict;; esac)

fuzz:
	$(MAKE) deps DEB_PKGS="clang libclang-rt-14-dev"
	$(MAKE) BUILD=build/fuzz CC=$(FUZZ_CC) OMP=0 OPT="$(SAN_OPT) -fsanitize=fuzzer-no-link" FUZZ_TABLES=1 \
	  FUZZ_MAIN=-fsanitize=fuzzer $(FUZZ:%=build/fuzz/fuzz_%)
	@for h in $(FUZZ); do \
	  mkdir -p build/fuzz/corpus/$$h; \
	  echo "fuzz_$$h: $(FUZZ_TIME) s$(if $(FUZZ_RUNS), or $(FUZZ_RUNS) runs)"; \
	  OPENBLAS_NUM_THREADS=1 build/fuzz/fuzz_$$h -max_total_time=$(FUZZ_TIME) -timeout=20 -rss_limit_mb=4096 \
	    -max_len=4096 -close_fd_mask=2 -artifact_prefix=build/fuzz/crash-$$h- -print_final_stats=1 $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS)) $(call fuzz_dict,$$h) $(FUZZ_FLAGS) \
	    build/fuzz/corpus/$$h $(call fuzz_seeds,$$h) || exit 1; \
	done

fuzz-replay: deps
	$(MAKE) BUILD=build/asan OPT="$(SAN_OPT)" LDFLAGS="-fsanitize=address,undefined" \
	  FUZZ_MAIN=tests/fuzz/driver.c $(FUZZ:%=build/asan/fuzz_%)
	@for h in $(FUZZ); do \
	  out=$$($(ASAN_ENV) OPENBLAS_NUM_THREADS=1 build/asan/fuzz_$$h $(call fuzz_seeds,$$h) 2>&1) || \
	    { echo "$$out"; echo "fuzz_$$h: replay failed"; exit 1; }; \
	  echo "$$out" | tail -1; \
	done

FUZZ_LIB = $(filter-out $(BUILD)/src/cli/main.o,$(OBJ))
ifdef FUZZ_TABLES
$(BUILD)/parser.o $(BUILD)/lexer.o: CFLAGS += -fno-sanitize-coverage=trace-cmp
endif
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/driver.c $(FUZZ_LIB)
	$(CC) $(CFLAGS_ALL) $(FUZZ_DEFS) -o $@ $< $(FUZZ_MAIN) $(FUZZ_LIB) $(LDFLAGS) $(LDLIBS)

# The op lists outside the registry, generated from `netrun ops`: the OP LIST
# of man/netrun-ops.7 and the op tokens of tests/fuzz/script.dict (run after
# adding or removing an op; tests/registry.bats fails until then).
oplists: netrun
	tests/oplists.sh ./netrun

LIB_OBJ = $(filter-out $(BUILD)/src/cli/main.o,$(OBJ))

# gemm_signals: products through src/exec/par.c while signals arrive
# (tests/trust_limits.bats).
$(BUILD)/gemm_signals: tests/tools/gemm_signals.c $(LIB_OBJ)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)

# ---- speed: measured, never asserted in tests -------------------------------------
$(BUILD)/bench: tests/bench/bench.c $(LIB_OBJ)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)

bench: $(BUILD)/bench netrun
	OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-2} $(BUILD)/bench
	$(MAKE) bench-lsp
	$(MAKE) bench-charlm

# netrun lsp: a change of a 500-line script to its diagnostics (goal 50 ms).
$(BUILD)/lsp_bench: tests/bench/lsp_bench.c $(LIB_OBJ)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)
bench-lsp: $(BUILD)/lsp_bench
	NETRUN_PATH=$(CURDIR)/stdlib $(BUILD)/lsp_bench

# A training step of examples/char_lm.net against the same model in PyTorch,
# side by side (tests/bench/char_lm.py); Debian's python3-torch, which no
# test needs: without it the script says so and is skipped.
BENCH_PYTHON ?= /usr/bin/python3
bench-charlm: netrun
	$(BENCH_PYTHON) tests/bench/char_lm.py --netrun $(CURDIR)/netrun

# Data parallel over Open MPI against threads (doc/speed.md, "Data-parallel training").
bench-mpi: netrun
	tests/bench/mpi.sh

# What the ranks' heartbeat thread costs: 2-rank training with it and
# without (NETRUN_TEST_NO_THREAD_MULTIPLE), alternating, quiet and beside
# two busy loops, and the thread's own CPU time (doc/speed.md).
bench-mpi-beat: netrun
	tests/bench/mpi_beat.sh

# Every training step of issue 28's table against the same model in
# PyTorch, alternating in one run, on 1 and 2 threads (tests/bench/compare.py;
# doc/speed.md keeps its tables).  BENCH_ARGS passes options: --busy,
# --rounds N, --only fashion_resnet,char_lm, --threads 2.
bench-compare: netrun $(BUILD)/sgemm_peak
	python3 tests/bench/compare.py --netrun $(CURDIR)/netrun $(BENCH_ARGS)

$(BUILD)/sgemm_peak: tests/bench/sgemm_peak.c
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(PAR_CFLAGS) $(WARN) -o $@ $< $(LDFLAGS) $(BLAS_LIBS) -ldnnl

# fashion_resnet's 15 convolutions through netrun's kernels and through
# Debian's oneDNN's (measured only: netrun links oneDNN for its sgemm, not
# its convolutions; doc/speed.md says why), alternating (tests/bench/dnnl_conv.sh).
# BENCH_THREADS (default 1) and BENCH_ROUNDS (default 3).
bench-dnnl: netrun $(BUILD)/dnnl_conv
	tests/bench/dnnl_conv.sh $(CURDIR)/netrun $(BUILD)/dnnl_conv $${BENCH_THREADS:-1} $${BENCH_ROUNDS:-3}

$(BUILD)/dnnl_conv: tests/bench/dnnl_conv.c tests/bench/resnet_convs.h
	@test -f /usr/include/dnnl.h || { echo "bench-dnnl: needs Debian's libdnnl-dev (apt-get install libdnnl-dev)"; exit 1; }
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -o $@ $< -ldnnl

# The GEMMs of fashion_resnet's 15 convolutions as netrun makes them,
# through OpenBLAS and through Debian's libxsmm (libxsmm-dev, measured
# only: netrun does not link it; doc/speed.md says what it showed), one
# thread (tests/bench/xsmm_gemm.c).  BENCH_ROUNDS: passes (default 5).
bench-xsmm: $(BUILD)/xsmm_gemm
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(BUILD)/xsmm_gemm $${BENCH_ROUNDS:-5}

$(BUILD)/xsmm_gemm: tests/bench/xsmm_gemm.c tests/bench/resnet_convs.h
	@test -f /usr/include/libxsmm.h || { echo "bench-xsmm: needs Debian's libxsmm-dev (apt-get install libxsmm-dev)"; exit 1; }
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -o $@ $< $(LDFLAGS) $(BLAS_LIBS) -L/usr/lib -lxsmm -lpthread -lrt -ldl -lm

# bench-compare's PyTorch: the current release from PyPI in a virtual
# environment under build/ (benchmarks only: no test imports it).  PyPI's
# Linux wheel is the CUDA build: torch itself and the nvidia-* libraries
# it requires take about 5 GB, unused on a CPU.  Debian's python3-torch
# (1.13) is the fallback bench-compare takes when this is absent.
BENCH_VENV = build/bench-venv
bench-deps:
	@df -Pm build 2>/dev/null | awk 'NR == 2 && $$4 < 8000 { print "bench-deps: less than 8 GB free under build/"; exit 1 }'
	test -x $(BENCH_VENV)/bin/pip || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet torch numpy
	$(BENCH_VENV)/bin/python -c 'import torch; print("bench-deps: PyTorch", torch.__version__)'

# ---- install ----------------------------------------------------------------
install: netrun
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/netrun/stdlib \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/include/netrun
	install -m 755 netrun $(DESTDIR)$(PREFIX)/bin/netrun
	install -m 644 stdlib/*.net $(DESTDIR)$(PREFIX)/share/netrun/stdlib/
	install -m 644 include/netrun/plugin.h $(DESTDIR)$(PREFIX)/include/netrun/
	install -m 644 man/netrun.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/netrun-lang.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 man/netrun-ops.7 $(DESTDIR)$(PREFIX)/share/man/man7/

clean:
	rm -rf $(BUILD) build netrun $(PLUGINS) $(PLUGIN_FIXTURES)

.PHONY: all plugins tools fashion-folder deps test-deps test test-hosts check regen asan valgrind fuzz fuzz-replay bench bench-lsp bench-charlm bench-mpi bench-mpi-beat bench-compare bench-dnnl bench-xsmm bench-deps install clean oplists

# ---- training ------------------------------------------------------------------
# The README's first command: set up, build, and train the example model.
train: deps
	$(MAKE) netrun
	./netrun train examples/fashion_mlp.net
.PHONY: train
