/* bench.c — `make bench`: speed measured, not asserted.
 *
 * Every figure is a ratio or a per-op cost measured in this one run, so a
 * busy machine shifts both sides alike:
 *   1. executor overhead per executed op on 1-element tensors, tape on and
 *      off, against a plain C loop doing the same arithmetic;
 *   2. matmul through the executor against cblas_sgemm called directly on
 *      the same shapes;
 *   3. conv2d through the executor against the cblas_sgemm calls of its
 *      im2col GEMMs, called directly.
 *   4. building the backward of a long program and of a long loop's tape,
 *      at two sizes (time and bytes allocated should grow linearly), and
 *      forward + backward through the tape per tiny op;
 *   5. training steps (fashion_mlp, fashion_cnn, fashion_resnet) against
 *      their GEMMs as OpenBLAS threads them;
 *   6. one epoch of fashion_mlp (./netrun, the whole process) on a quiet
 *      host, then beside two busy loops this bench starts and stops;
 *   7. the second-order step of fashion_mlp (a gradient penalty: loss +
 *      0.1 |d loss / dx|^2, its training program differentiating the
 *      backward of the loss again) against the first-order step.
 * Targets: overhead < 300 ns/op with the tape on; matmul within 1.05x of
 * direct sgemm; forward + backward on the tape < 600 ns per op. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "front/lower.h"
#include "exec/tape.h"
#include "autodiff/tapegrad.h"
#include "train/train.h"
#include "front/userop.h"
#include "exec/par.h"
#include "ir/rewrite.h"

#include <cblas.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct Loaded {
  Arena arena;
  Diag diag;
  Program *prog;
} Loaded;

/* Lowers script text (written to a temporary file). */
static bool load(Loaded *ld, const char *text) {
  char path[] = "/tmp/netrun-bench-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) return false;
  close(fd);
  arena_init(&ld->arena);
  diag_init(&ld->diag, &ld->arena);
  Lowerer *L = lower_new(&ld->arena, &ld->diag, NULL, &uop_impl);
  bool ok = lower_file(L, path);
  ld->prog = lower_program(L);
  diag_finish(&ld->diag);
  unlink(path);
  return ok;
}

static void unload(Loaded *ld) {
  reg_release_user_ops(ld->prog);
  arena_free(&ld->arena);
}

static Tensor *random_tensor(int rank, const int64_t *shape, unsigned seed) {
  Tensor *t = tensor_new(DT_F32, rank, shape);
  srand(seed);
  for (int64_t i = 0; i < t->numel; i++) tensor_f32(t)[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  return t;
}

/* 1. Overhead per op: a loop whose body is tiny ops on a 1-element
 * parameter, so every op is recorded on the tape. */
static void bench_overhead(int64_t turns) {
  char text[512];
  snprintf(text, sizeof text,
           "param x : [1] = ones()\n"
           "a = 1.0001\nb = 0.0001\n"
           "i = 0\ny = x\n"
           "while i < %lld {\n  y = y * a + b\n  y = y - b\n  i = i + 1\n}\n",
           (long long)turns);
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  for (int tape = 1; tape >= 0; tape--) {
    ExecOptions o;
    exec_default_options(&o);
    o.tape = tape;
    o.max_steps = turns + 1;
    Executor *ex = exec_new(ld.prog, &o);
    double t0 = now();
    if (exec_run(ex) != 0) exit(1);
    double dt = now() - t0;
    int64_t ops = exec_ops_run(ex);
    printf("  executor, tape %-3s   %8.1f ns/op   (%lld ops, %d on the tape)\n", tape ? "on" : "off",
           dt * 1e9 / (double)ops, (long long)ops, exec_tape(ex)->n);
    exec_free(ex);
  }
  /* The same arithmetic as a plain C loop. */
  volatile float a = 1.0001f, b = 0.0001f;
  float y = 1;
  double t0 = now();
  for (int64_t i = 0; i < turns; i++) {
    y = y * a + b;
    y = y - b;
  }
  double dt = now() - t0;
  printf("  plain C loop          %8.1f ns per turn (y = %g)\n", dt * 1e9 / (double)turns, (double)y);
  unload(&ld);
}

/* 2. matmul [M,K] @ [K,N] through the executor vs direct sgemm. */
static void bench_matmul(int64_t M, int64_t K, int64_t N, int reps) {
  char text[256];
  snprintf(text, sizeof text, "input a : f32[%lld, %lld]\ninput b : f32[%lld, %lld]\nc = a @ b\n",
           (long long)M, (long long)K, (long long)K, (long long)N);
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  int64_t sa[2] = {M, K}, sb[2] = {K, N};
  Tensor *a = random_tensor(2, sa, 1), *b = random_tensor(2, sb, 2);
  ExecOptions o;
  exec_default_options(&o);
  Executor *ex = exec_new(ld.prog, &o);
  exec_feed(ex, "a", a, "bench");
  exec_feed(ex, "b", b, "bench");
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  double best_ex = 1e9, best_blas = 1e9;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      if (exec_run(ex) != 0) exit(1);
    openblas_set_num_threads(par_max_threads());   /* as OpenBLAS threads it */
    double t1 = now();
    for (int r = 0; r < reps; r++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, tensor_f32(a), (int)K,
                  tensor_f32(b), (int)N, 0.0f, c, (int)N);
    double t2 = now();
    openblas_set_num_threads(1);
    if (t1 - t0 < best_ex) best_ex = t1 - t0;
    if (t2 - t1 < best_blas) best_blas = t2 - t1;
  }
  printf("  matmul [%lld,%lld]@[%lld,%lld]   executor %8.3f ms   sgemm %8.3f ms   ratio %.3f\n", (long long)M,
         (long long)K, (long long)K, (long long)N, best_ex * 1e3 / reps, best_blas * 1e3 / reps, best_ex / best_blas);
  free(c);
  tensor_unref(a);
  tensor_unref(b);
  exec_free(ex);
  unload(&ld);
}

/* 3. conv2d through the executor vs its GEMMs called directly: per image,
 * [O, C*kh*kw] @ [C*kh*kw, OH*OW]. */
static void bench_conv(int64_t n, int64_t c, int64_t h, int64_t o, int64_t k, int64_t pad, int reps) {
  char text[512];
  snprintf(text, sizeof text,
           "input x : f32[%lld, %lld, %lld, %lld]\ninput w : f32[%lld, %lld, %lld, %lld]\n"
           "y = conv2d(x, w, paddings=[%lld, %lld])\n",
           (long long)n, (long long)c, (long long)h, (long long)h, (long long)o, (long long)c, (long long)k,
           (long long)k, (long long)pad, (long long)pad);
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  int64_t sx[4] = {n, c, h, h}, sw[4] = {o, c, k, k};
  Tensor *x = random_tensor(4, sx, 3), *w = random_tensor(4, sw, 4);
  ExecOptions opt;
  exec_default_options(&opt);
  Executor *ex = exec_new(ld.prog, &opt);
  exec_feed(ex, "x", x, "bench");
  exec_feed(ex, "w", w, "bench");
  int64_t oh = h + 2 * pad - k + 1, kk = c * k * k, cols = oh * oh;
  float *col = calloc((size_t)(kk * cols), sizeof(float));
  float *out = malloc(sizeof(float) * (size_t)(o * cols));
  double best_ex = 1e9, best_blas = 1e9;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      if (exec_run(ex) != 0) exit(1);
    openblas_set_num_threads(par_max_threads());
    double t1 = now();
    for (int r = 0; r < reps; r++)
      for (int64_t img = 0; img < n; img++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)o, (int)cols, (int)kk, 1.0f, tensor_f32(w),
                    (int)kk, col, (int)cols, 0.0f, out, (int)cols);
    double t2 = now();
    openblas_set_num_threads(1);
    if (t1 - t0 < best_ex) best_ex = t1 - t0;
    if (t2 - t1 < best_blas) best_blas = t2 - t1;
  }
  printf("  conv2d [%lld,%lld,%lld,%lld]*[%lld,%lld,%lld,%lld] pad %lld   executor %8.3f ms   its GEMMs %8.3f ms   "
         "ratio %.3f\n",
         (long long)n, (long long)c, (long long)h, (long long)h, (long long)o, (long long)c, (long long)k,
         (long long)k, (long long)pad, best_ex * 1e3 / reps, best_blas * 1e3 / reps, best_ex / best_blas);
  free(col);
  free(out);
  tensor_unref(x);
  tensor_unref(w);
  exec_free(ex);
  unload(&ld);
}

/* A straight-line program of about n ops on a 1-element parameter. */
static char *chain_script(int64_t n) {
  size_t cap = (size_t)n * 24 + 128, k = 0;
  char *text = malloc(cap);
  k += (size_t)snprintf(text + k, cap - k, "param w : [1] = ones()\na = 1.0001\nx = w\n");
  for (int64_t i = 0; i < n; i++) k += (size_t)snprintf(text + k, cap - k, "x = x * a\n");
  snprintf(text + k, cap - k, "loss = sum(x)\n");
  return text;
}

/* The backward of a generated program built once: a chain of n steps
 * (chain_script), or with order2 a chain of n tanh steps whose loss holds
 * grad(...) (LANGUAGE.md section 12), the second backward built over the
 * first. */
static void bench_build_program(int64_t n, bool order2) {
  char *text = chain_script(n);
  if (order2) {
    size_t cap = (size_t)n * 24 + 160, k = 0;
    text = realloc(text, cap);
    k += (size_t)snprintf(text, cap, "param w : [1] = ones()\na = 1.0001\nx = w\n");
    for (int64_t i = 0; i < n; i++) k += (size_t)snprintf(text + k, cap - k, "x = tanh(x * a)\n");
    snprintf(text + k, cap - k, "loss = sum(x)\ng = grad(loss, w)\nl2 = sum(g * g)\n");
  }
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  free(text);
  size_t m0 = mem_requested();
  double t0 = now();
  BackwardResult r;
  if (!bwd_append(ld.prog, order2 ? "l2" : "loss", NULL, 0, NULL, 0, &r)) exit(1);
  double dt = now() - t0;
  printf("  backward of a %7lld-op program%s   %8.1f ms   %8.1f MB allocated   %6.0f ns/op\n",
         (long long)r.first_grad_op, order2 ? " holding a backward" : "", dt * 1e3,
         (double)(mem_requested() - m0) / 1e6, dt * 1e9 / (double)r.first_grad_op);
  unload(&ld);
}

/* Forward with the tape, then the tape's backward run directly
 * (tapegrad.c), on a script whose ops all read 1-element tensors. */
static void bench_tape_direct(const char *what, const char *text, int64_t max_steps) {
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  ExecOptions o;
  exec_default_options(&o);
  o.max_steps = max_steps;
  double tp = now();
  Executor *ex = exec_new(ld.prog, &o);
  double t0 = now();
  if (exec_run(ex) != 0) exit(1);
  double t1 = now();
  Tensor *w = exec_value(ex, "w"), *g = NULL;
  ExecOptions bo = o;
  bo.tape = false;
  if (tgrad_run(exec_tape(ex), ld.prog, exec_value(ex, "loss"), &w, 1, NULL, 0, &bo, &g) != 0 || !g) exit(1);
  double t2 = now();
  int64_t taped = exec_tape(ex)->n;
  printf("  %-28s %8.1f ns per taped op   (forward %.1f, backward %.1f; %lld ops on the tape;"
         " preparing the executor before: %.1f ns per program op)\n", what,
         (t2 - t0) * 1e9 / (double)taped, (t1 - t0) * 1e9 / (double)taped, (t2 - t1) * 1e9 / (double)taped,
         (long long)taped, (t0 - tp) * 1e9 / (double)ld.prog->blocks[0]->nops);
  tensor_unref(g);
  exec_free(ex);
  unload(&ld);
}

/* A loop of `turns` turns of tiny ops on a parameter: record its tape,
 * build the tape's backward as a program, run it. */
static void bench_tape_loop(int64_t turns, bool report_build) {
  char text[512];
  snprintf(text, sizeof text,
           "param w : [1] = ones()\na = 1.0001\nb = 0.0001\ni = 0\ny = w\n"
           "while i < %lld {\n  y = y * a + b\n  i = i + 1\n}\nloss = sum(y)\n",
           (long long)turns);
  Loaded ld;
  if (!load(&ld, text)) exit(1);
  ExecOptions o;
  exec_default_options(&o);
  o.max_steps = turns + 1;
  Executor *ex = exec_new(ld.prog, &o);
  double t0 = now();
  if (exec_run(ex) != 0) exit(1);
  double t1 = now();
  Arena arena;
  arena_init(&arena);
  Tensor **vals;
  size_t m0 = mem_requested();
  Program *tp = tape_program(exec_tape(ex), ld.prog, &arena, &vals);
  int nvals = tp->blocks[0]->nvars;
  BackwardResult r;
  if (!bwd_append(tp, "loss", NULL, 0, NULL, 0, &r)) exit(1);
  double t2 = now();
  size_t m1 = mem_requested();
  ExecOptions bo = o;
  bo.tape = false;
  Executor *bx = exec_new(tp, &bo);
  for (int i = 0; i < nvals; i++) exec_preload(bx, tp->blocks[0]->vars[i]->name, vals[i]);
  if (exec_run_from(bx, r.first_grad_op) != 0) exit(1);
  double t3 = now();
  int64_t taped = exec_tape(ex)->n;
  if (report_build)
    printf("  tape backward of a %6lld-turn loop  %8.1f ms   %8.1f MB allocated   (%lld ops on the tape)\n",
           (long long)turns, (t2 - t1) * 1e3, (double)(m1 - m0) / 1e6, (long long)taped);
  else
    printf("  forward + backward on the tape  %8.1f ns per taped op   (forward %.1f, build %.1f, backward %.1f)\n",
           (t3 - t0) * 1e9 / (double)taped, (t1 - t0) * 1e9 / (double)taped, (t2 - t1) * 1e9 / (double)taped,
           (t3 - t2) * 1e9 / (double)taped);
  mem_free(vals);
  exec_free(bx);
  exec_free(ex);
  reg_release_user_ops(tp);
  arena_free(&arena);
  unload(&ld);
}

/* One GEMM C[m,n] = op(A) op(B) with k inner, repeated reps times. */
typedef struct Gemm {
  int m, n, k;
  bool ta, tb;
} Gemm;

/* GEMMs g[i], each count[i] times (once when count is NULL), as one
 * round; the best of two rounds of reps. */
static double time_gemms(const Gemm *g, const int *count, int ng, int reps) {
  float **a = calloc((size_t)ng, sizeof *a), **b = calloc((size_t)ng, sizeof *b), **c = calloc((size_t)ng, sizeof *c);
  for (int i = 0; i < ng; i++) {
    a[i] = calloc((size_t)g[i].m * (size_t)g[i].k, sizeof(float));
    b[i] = calloc((size_t)g[i].k * (size_t)g[i].n, sizeof(float));
    c[i] = calloc((size_t)g[i].m * (size_t)g[i].n, sizeof(float));
    /* Real values: zero pages from calloc would all share one physical page. */
    for (size_t j = 0; j < (size_t)g[i].m * (size_t)g[i].k; j++) a[i][j] = (float)(j % 7) * 0.1f;
    for (size_t j = 0; j < (size_t)g[i].k * (size_t)g[i].n; j++) b[i][j] = (float)(j % 5) * 0.1f;
  }
  /* as OpenBLAS threads them (netrun keeps it on one thread: par.c) */
  openblas_set_num_threads(par_max_threads());
  double best = 1e9;
  for (int round = 0; round < 2; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      for (int i = 0; i < ng; i++)
        for (int j = 0; j < (count ? count[i] : 1); j++)
          cblas_sgemm(CblasRowMajor, g[i].ta ? CblasTrans : CblasNoTrans, g[i].tb ? CblasTrans : CblasNoTrans,
                      g[i].m, g[i].n, g[i].k, 1.0f, a[i], g[i].ta ? g[i].m : g[i].k, b[i],
                      g[i].tb ? g[i].k : g[i].n, 0.0f, c[i], g[i].n);
    double dt = (now() - t0) / reps;
    if (dt < best) best = dt;
  }
  openblas_set_num_threads(1);
  for (int i = 0; i < ng; i++) free(a[i]), free(b[i]), free(c[i]);
  free(a), free(b), free(c);
  return best;
}

/* The same GEMMs in the shapes netrun's conv kernels call them: count[i]
 * GEMMs of shape g[i] (one per batch of images), handed to the threads one
 * whole GEMM at a time, each thread with operands of its own, as conv.c
 * hands batches of images to threads; a shape called once runs alone, its
 * GEMM spread over the threads.  A stricter reference than the whole-batch
 * GEMMs: these run in cache. */
static double time_gemms_batched(const Gemm *g, const int *count, int ng, int reps) {
  int nt = par_threads();
  float **buf = calloc((size_t)(3 * ng * nt), sizeof *buf);
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < ng; i++) {
      size_t sz[3] = {(size_t)g[i].m * (size_t)g[i].k, (size_t)g[i].k * (size_t)g[i].n,
                      (size_t)g[i].m * (size_t)g[i].n};
      for (int k = 0; k < 3; k++) {
        float *b = buf[(t * ng + i) * 3 + k] = malloc(sz[k] * sizeof(float));
        for (size_t j = 0; j < sz[k]; j++) b[j] = (float)(j % (size_t)(5 + k)) * 0.1f;
      }
    }
  double best = 1e9;
  for (int round = 0; round < 2; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      for (int i = 0; i < ng; i++) {
        PAR_EACH(count[i] > 1 && nt > 1, nt)
        for (int j = 0; j < count[i]; j++) {
          float **op = buf + (par_thread() * ng + i) * 3;
          cblas_sgemm(CblasRowMajor, g[i].ta ? CblasTrans : CblasNoTrans, g[i].tb ? CblasTrans : CblasNoTrans,
                      g[i].m, g[i].n, g[i].k, 1.0f, op[0], g[i].ta ? g[i].m : g[i].k, op[1],
                      g[i].tb ? g[i].k : g[i].n, 0.0f, op[2], g[i].n);
        }
      }
    double dt = (now() - t0) / reps;
    if (dt < best) best = dt;
  }
  for (int j = 0; j < 3 * ng * nt; j++) free(buf[j]);
  free(buf);
  return best;
}

/* The GEMMs a step is measured against: the whole-batch ones (g, each
 * gcount[i] times, or once when gcount is NULL), and if bg is not NULL the
 * same in netrun's batches (see time_gemms_batched). */
typedef struct StepGemms {
  const Gemm *g;
  int ng;
  const Gemm *bg;
  const int *bcount;
  int nbg;
  const int *gcount;
} StepGemms;

/* A training step of an example script (forward, backward, SGD) on one
 * fixed random batch, against the GEMMs that step needs, best of `rounds`
 * rounds of `reps` steps. */

static void bench_train_step(const char *path, const char *what, int64_t batch, const StepGemms *sg, int rounds,
                             int reps, bool fuse) {
  Loaded ld;
  arena_init(&ld.arena);
  diag_init(&ld.diag, &ld.arena);
  Lowerer *L = lower_new(&ld.arena, &ld.diag, "stdlib", &uop_impl);
  if (!lower_file(L, path)) {
    printf("  (%s: cannot load)\n", path);
    return;
  }
  ld.prog = lower_program(L);
  TrainConfig c;
  BackwardResult bw;
  if (!train_config(ld.prog, NULL, &c, true) || !train_program(ld.prog, &c, &bw)) exit(1);
  ExecOptions o;
  exec_default_options(&o);
  o.tape = false;
  o.fuse = fuse;
  if (exec_rewrite_wanted(&o)) rewrite_program(ld.prog, &(RewriteOpts){.sets = RW_FUSE});
  Executor *ex = exec_new(ld.prog, &o);
  const VarDesc *x = prog_var(ld.prog, "x"), *y = prog_var(ld.prog, "y");
  int64_t xs[SHAPE_MAX_RANK];
  xs[0] = batch;
  for (int i = 1; i < x->shape.rank; i++) xs[i] = x->shape.d[i].n;
  Tensor *xt = random_tensor(x->shape.rank, xs, 5);
  Tensor *yt = tensor_new(DT_I64, 1, &batch);
  for (int64_t i = 0; i < batch; i++) tensor_i64(yt)[i] = i % 10;
  exec_feed(ex, "x", xt, "bench");
  exec_feed(ex, "y", yt, "bench");
  (void)y;
  Tensor *lr = tensor_scalar_f32(0.01f);
  exec_startup(ex);
  exec_preload(ex, TRAIN_LR_VAR, lr);
  if (exec_run(ex) != 0) exit(1);
  /* Step and GEMMs alternate, best of several rounds each, so load from
   * other processes on a shared machine hits both alike. */
  double best = 1e9, gemm = 1e9, batched = 1e9;
  for (int round = 0; round < rounds; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      if (exec_run(ex) != 0) exit(1);
    double dt = (now() - t0) / reps;
    if (dt < best) best = dt;
    double g1 = time_gemms(sg->g, sg->gcount, sg->ng, reps);
    if (g1 < gemm) gemm = g1;
    if (sg->bg) {
      g1 = time_gemms_batched(sg->bg, sg->bcount, sg->nbg, reps);
      if (g1 < batched) batched = g1;
    }
  }
  int ngemms = 0;
  for (int i = 0; i < sg->ng; i++) ngemms += sg->gcount ? sg->gcount[i] : 1;
  printf("  %s step (batch %lld)   %7.3f ms (%6.0f samples/s)   its %d GEMMs %7.3f ms   ratio %.2f\n", what,
         (long long)batch, best * 1e3, (double)batch / best, ngemms, gemm * 1e3, best / gemm);
  if (sg->bg)
    printf("    the same GEMMs as netrun batches them   %7.3f ms   ratio %.2f\n", batched * 1e3, best / batched);
  tensor_unref(xt);
  tensor_unref(yt);
  tensor_unref(lr);
  exec_free(ex);
  unload(&ld);
}

/* Seconds a command takes, its output to /dev/null; < 0 if it failed. */
static double time_command(char *const *argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  double t0 = now();
  pid_t pid;
  int st = -1;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0 || waitpid(pid, &st, 0) < 0) st = -1;
  posix_spawn_file_actions_destroy(&fa);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? now() - t0 : -1;
}

/* A child that spins for at most `seconds` (it is killed sooner); -1 if
 * it could not be started. */
static pid_t busy_loop(unsigned seconds) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(seconds);
    for (volatile unsigned long i = 0;; i++) {}
  }
  return pid;
}

/* 6. One epoch of fashion_mlp, the whole process, quiet and then beside
 * two busy loops (bounded to 10 minutes, stopped when the epoch ends). */
static void bench_loaded_epoch(void) {
  char *argv[] = {"./netrun", "train", "examples/fashion_mlp.net", "--epochs", "1", "--save",
                  "/tmp/netrun-bench-epoch.ckpt", NULL};
  if (access(argv[0], X_OK) != 0) {
    printf("  (./netrun not built)\n");
    return;
  }
  double quiet = time_command(argv);
  pid_t busy[2] = {busy_loop(600), busy_loop(600)};
  double loaded = time_command(argv);
  for (int i = 0; i < 2; i++)
    if (busy[i] > 0) {   /* never kill(-1): that is every process */
      kill(busy[i], SIGKILL);
      waitpid(busy[i], NULL, 0);
    }
  unlink(argv[6]);
  if (quiet < 0 || loaded < 0) {
    printf("  (the epoch failed)\n");
    return;
  }
  printf("  fashion_mlp epoch   quiet %6.2f s   beside two busy loops %6.2f s   ratio %.2f   "
         "PyTorch's 35 s there: %.2fx\n", quiet, loaded, loaded / quiet, loaded / 35.0);
}

/* Sections 1 to 4. */
static void bench_front(void) {
  printf("executor overhead on 1-element tensors (target: < 300 ns/op with the tape on)\n");
  bench_overhead(200000);
  printf("matmul through the executor vs cblas_sgemm (target: ratio <= 1.05)\n");
  bench_matmul(128, 784, 512, 50);
  bench_matmul(256, 512, 256, 50);
  bench_matmul(1024, 1024, 1024, 5);
  printf("conv2d (direct kernels; im2col + sgemm on machines without AVX2 and FMA) vs the GEMMs im2col would run\n");
  bench_conv(128, 32, 14, 64, 5, 2, 3);
  bench_conv(64, 1, 28, 32, 5, 2, 5);
  printf("building the backward (time and memory should grow linearly)\n");
  bench_build_program(50000, false);
  bench_build_program(100000, false);
  bench_build_program(12500, true);
  bench_build_program(25000, true);
  bench_tape_loop(5000, true);
  bench_tape_loop(10000, true);
  printf("forward + backward through the tape (target: < 600 ns per op)\n");
  {
    char *chain = chain_script(100000);
    bench_tape_direct("a chain of 100000 tiny ops", chain, 10);
    free(chain);
    char loop[512];
    snprintf(loop, sizeof loop,
             "param w : [1] = ones()\na = 1.0001\nb = 0.0001\ni = 0\ny = w\n"
             "while i < 50000 {\n  y = y * a + b\n  i = i + 1\n}\nloss = sum(y)\n");
    bench_tape_direct("a loop of 50000 turns", loop, 50001);
  }
  printf("  the same loop, its backward built as a program and run (netrun grad --tape-program):\n");
  bench_tape_loop(100000, false);
}

/* A convolution of a step: o filters of kk = C*kh*kw taps, p output
 * pixels an image, n convolutions of that shape; first: no dInput. */
typedef struct ConvShape {
  int o, kk, p, n;
  bool first;
} ConvShape;

/* Images per GEMM as conv.c's conv_plan batches them (CONV_MIN_COLS 256
 * columns, CONV_COL_FLOATS 2^18 floats of column buffer). */
static int conv_batch_images(const ConvShape *c, int batch) {
  int nb = (256 + c->p - 1) / c->p;
  if (nb > 1 && (int64_t)nb * c->kk * c->p > ((int64_t)1 << 18)) nb = (int)(((int64_t)1 << 18) / (c->kk * c->p));
  if (nb > batch) nb = batch;
  return nb < 1 ? 1 : nb;
}

/* Appends to g (count each) a convolution's GEMMs over `images` images
 * at once, `times` times: forward, dFilter and, but for the first layer,
 * dInput. */
static int add_conv_gemms(Gemm *g, int *count, int k, const ConvShape *c, int images, int times) {
  int cols = images * c->p;
  g[k] = (Gemm){c->o, cols, c->kk, 0, 0}, count[k++] = times * c->n;
  g[k] = (Gemm){c->o, c->kk, cols, 0, 1}, count[k++] = times * c->n;
  if (!c->first) g[k] = (Gemm){c->kk, cols, c->o, 1, 0}, count[k++] = times * c->n;
  return k;
}

/* fashion_resnet: its 15 convolutions (8 shapes) and the dense layer,
 * as whole-batch GEMMs and as conv.c batches them. */
static void bench_resnet_step(void) {
  const int b = 128;
  const ConvShape convs[] = {
      {16, 9, 784, 1, true},   {16, 144, 784, 4, false}, {32, 144, 196, 1, false}, {32, 288, 196, 3, false},
      {32, 16, 196, 1, false}, {64, 288, 49, 1, false},  {64, 576, 49, 3, false},  {64, 32, 49, 1, false}};
  const int nc = (int)(sizeof convs / sizeof convs[0]);
  const Gemm dense[] = {{b, 10, 64, 0, 0}, {64, 10, b, 1, 0}, {b, 64, 10, 0, 1}};
  Gemm g[64], bg[64];
  int gcount[64], bcount[64], ng = 0, nbg = 0;
  for (int i = 0; i < nc; i++) {
    ng = add_conv_gemms(g, gcount, ng, &convs[i], b, 1);
    int nb = conv_batch_images(&convs[i], b);
    nbg = add_conv_gemms(bg, bcount, nbg, &convs[i], nb, b / nb);
    if (b % nb) nbg = add_conv_gemms(bg, bcount, nbg, &convs[i], b % nb, 1);
  }
  for (int i = 0; i < 3; i++) {
    g[ng] = bg[nbg] = dense[i];
    gcount[ng++] = bcount[nbg++] = 1;
  }
  StepGemms sg = {g, ng, bg, bcount, nbg, gcount};
  bench_train_step("examples/fashion_resnet.net", "fashion_resnet", b, &sg, 5, 2, true);
}

/* 7. A gradient penalty on fashion_mlp's model: the step of the training
 * program of `fit + 0.1 sum(gx * gx)`, gx = grad(fit, x), against the step
 * of `fit` alone, on one batch; best of alternating rounds. */
static const char *const mlp_text =
    "import \"nn\"\n"
    "input x : f32[B, 784]\ninput y : i64[B]\n"
    "h1 = relu(dense(x, 512))\nh2 = relu(dense(h1, 256))\n"
    "logits = dense(h2, 10, scope=\"out\")\nfit = cross_entropy(logits, y)\n%s"
    "train {\n  data = \"fashion-mnist\"\n  optimizer = sgd\n  lr = 0.1\n  batch = 128\n}\n";

typedef struct Step {
  Loaded ld;
  Executor *ex;
  int nops;
} Step;

/* The training program of mlp_text with `tail` (which binds loss), fed
 * x and y, run once. */
static bool step_start(Step *s, const char *tail, Tensor *xt, Tensor *yt, Tensor *lr) {
  char text[1024], path[] = "/tmp/netrun-bench-XXXXXX";
  snprintf(text, sizeof text, mlp_text, tail);
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) return false;
  close(fd);
  arena_init(&s->ld.arena);
  diag_init(&s->ld.diag, &s->ld.arena);
  Lowerer *L = lower_new(&s->ld.arena, &s->ld.diag, "stdlib", &uop_impl);
  bool ok = lower_file(L, path);
  unlink(path);
  s->ld.prog = lower_program(L);
  TrainConfig c;
  BackwardResult bw;
  if (!ok || !train_config(s->ld.prog, NULL, &c, true) || !train_program(s->ld.prog, &c, &bw)) return false;
  s->nops = s->ld.prog->blocks[0]->nops;
  ExecOptions o;
  exec_default_options(&o);
  o.tape = false;
  if (exec_rewrite_wanted(&o)) rewrite_program(s->ld.prog, &(RewriteOpts){.sets = RW_FUSE});
  s->ex = exec_new(s->ld.prog, &o);
  exec_feed(s->ex, "x", xt, "bench");
  exec_feed(s->ex, "y", yt, "bench");
  exec_startup(s->ex);
  exec_preload(s->ex, TRAIN_LR_VAR, lr);
  return exec_run(s->ex) == 0;
}

static double step_time(Step *s, int reps) {
  double t0 = now();
  for (int r = 0; r < reps; r++)
    if (exec_run(s->ex) != 0) exit(1);
  return (now() - t0) / reps;
}

static void bench_penalty_step(void) {
  const int64_t batch = 128, xs[2] = {batch, 784};
  Tensor *xt = random_tensor(2, xs, 5), *yt = tensor_new(DT_I64, 1, &batch), *lr = tensor_scalar_f32(0.01f);
  for (int64_t i = 0; i < batch; i++) tensor_i64(yt)[i] = i % 10;
  Step one, two;
  if (!step_start(&one, "loss = fit\n", xt, yt, lr) ||
      !step_start(&two, "gx = grad(fit, x)\nloss = fit + 0.1 * sum(gx * gx)\n", xt, yt, lr)) {
    printf("  (the gradient-penalty programs did not build)\n");
    exit(1);
  }
  double t1 = 1e9, t2 = 1e9;
  for (int round = 0; round < 8; round++) {
    double a = step_time(&one, 10), b = step_time(&two, 10);
    if (a < t1) t1 = a;
    if (b < t2) t2 = b;
  }
  printf("  fashion_mlp step (batch 128)   first order %7.3f ms (%d ops)   with the gradient penalty %7.3f ms "
         "(%d ops)   ratio %.2f\n", t1 * 1e3, one.nops, t2 * 1e3, two.nops, t2 / t1);
  exec_free(one.ex);
  exec_free(two.ex);
  unload(&one.ld);
  unload(&two.ld);
  tensor_unref(xt);
  tensor_unref(yt);
  tensor_unref(lr);
}

/* 5. Training steps against their GEMMs. */
static void bench_steps(void) {
  printf("training steps against the GEMMs they need (target: ratio <= 1.05; PyTorch 1.20, Darknet 8.3)\n");
  {
    /* fashion_mlp: 784-512-256-10; 3 forward GEMMs, 5 backward (no dX for the input). */
    const Gemm g[] = {{128, 512, 784, 0, 0}, {128, 256, 512, 0, 0}, {128, 10, 256, 0, 0},
                      {256, 10, 128, 1, 0},  {128, 256, 10, 0, 1},  {512, 256, 128, 1, 0},
                      {128, 512, 256, 0, 1}, {784, 512, 128, 1, 0}};
    StepGemms sg = {g, 8, NULL, NULL, 0, NULL};
    bench_train_step("examples/fashion_mlp.net", "fashion_mlp", 128, &sg, 5, 20, true);
  }
  {
    /* fashion_cnn: each conv as one GEMM over the batch (forward, dFilter,
     * dInput but for the first), then the dense layers' six. */
    const int64_t b = 128;
    const Gemm g[] = {{32, (int)(b * 784), 25, 0, 0},   {32, 25, (int)(b * 784), 0, 1},
                      {64, (int)(b * 196), 800, 0, 0},  {64, 800, (int)(b * 196), 0, 1},
                      {800, (int)(b * 196), 64, 1, 0}, {(int)b, 256, 3136, 0, 0},
                      {(int)b, 10, 256, 0, 0},         {256, 10, (int)b, 1, 0},
                      {(int)b, 256, 10, 0, 1},         {3136, 256, (int)b, 1, 0},
                      {(int)b, 3136, 256, 0, 1}};
    /* the same per batch of images, as conv.c calls them: one image per
     * GEMM (CONV_MIN_COLS, CONV_COL_FLOATS) */
    const Gemm bg[] = {{32, 784, 25, 0, 0}, {32, 25, 784, 0, 1}, {64, 196, 800, 0, 0},
                       {64, 800, 196, 0, 1}, {800, 196, 64, 1, 0}};
    const int bcount[] = {128, 128, 128, 128, 128};
    Gemm all[11];
    int count[11];
    for (int i = 0; i < 11; i++) {
      all[i] = i < 5 ? bg[i] : g[i];
      count[i] = i < 5 ? bcount[i] : 1;
    }
    StepGemms sg = {g, 11, all, count, 11, NULL};
    /* ten rounds of two steps: a step is long enough for a busy host to
     * spoil a few rounds */
    bench_train_step("examples/fashion_cnn.net", "fashion_cnn", b, &sg, 10, 2, true);
    /* the same with every op by itself (--no-fuse): what fusing gains */
    bench_train_step("examples/fashion_cnn.net", "fashion_cnn --no-fuse", b, &sg, 10, 2, false);
  }
  bench_resnet_step();
  printf("second order: a gradient penalty on fashion_mlp against its first-order step (target: ratio <= 4)\n");
  bench_penalty_step();
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  par_init();
  /* build/bench --steps: the training steps and the epoch alone; --epoch:
   * the epoch alone; --resnet: fashion_resnet's step alone; --penalty: the
   * gradient penalty's step alone */
  const char *only = argc > 1 ? argv[1] : "";
  if (strcmp(only, "--epoch") == 0) {
    bench_loaded_epoch();
    return 0;
  }
  if (strcmp(only, "--build") == 0) {   /* the backward builder alone */
    bench_build_program(50000, false);
    bench_build_program(100000, false);
    bench_build_program(12500, true);
    bench_build_program(25000, true);
    return 0;
  }
  if (strcmp(only, "--resnet") == 0) {
    bench_resnet_step();
    return 0;
  }
  if (strcmp(only, "--penalty") == 0) {
    bench_penalty_step();
    return 0;
  }
  if (strcmp(only, "--steps") != 0) bench_front();
  bench_steps();
  printf("one epoch of fashion_mlp, quiet and beside two busy loops (targets: ratio <= 2, <= 0.5x PyTorch's "
         "35-47 s there)\n");
  bench_loaded_epoch();
  reg_free_default();
  return 0;
}
