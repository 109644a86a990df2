/* dnnl_conv.c — `make bench-dnnl`: Debian's oneDNN (libdnnl-dev) on the
 * 15 convolutions of examples/fashion_resnet.net's training step (batch
 * 128), forward, backward data and backward weights, timed here; the same
 * convolutions through netrun are timed by tests/bench/dnnl_conv.sh
 * (`netrun time --backward`), alternating with this program.
 *
 * Three ways: plain NCHW / OIHW (netrun's tensors, so what netrun would
 * hand oneDNN); the layouts oneDNN picks itself (format "any", its
 * blocked nChw8c/16c), reorders not counted: the best oneDNN could do if
 * a whole network stayed in its layout; and those layouts with the
 * reorders from and to NCHW counted (what a convolution op taking and
 * giving netrun's tensors would cost).
 *
 *   build/dnnl_conv [ITERATIONS]       prints one line per layout: forward,
 *                                      backward data, backward weights (ms,
 *                                      the median of ITERATIONS, summed
 *                                      over the 15 convolutions), then a
 *                                      hash of the bits of every output and
 *                                      gradient per way: the same on any
 *                                      thread count, or not */
#include <dnnl.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resnet_convs.h"

#define CHECK(x)                                                                  \
  do {                                                                            \
    dnnl_status_t st_ = (x);                                                      \
    if (st_ != dnnl_success) {                                                    \
      fprintf(stderr, "dnnl_conv: %s failed (%d) at line %d\n", #x, st_, __LINE__); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A memory of descriptor md with its own buffer filled with small values. */
static dnnl_memory_t mem_of(dnnl_engine_t eng, const dnnl_memory_desc_t *md) {
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  void *p;
  CHECK(dnnl_memory_get_data_handle(m, &p));
  size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
  for (size_t i = 0; i < n; i++) ((float *)p)[i] = (float)((i * 7919) % 17) * 0.01f - 0.08f;
  return m;
}

/* The reorders between NCHW / OIHW and oneDNN's layouts, in the order
 * run_all runs them. */
enum { R_SRC, R_W, R_DST, R_DDST, R_DSRC, R_DW, NREORDER };

typedef struct Prims {
  dnnl_primitive_t fwd, bwd_data, bwd_w;
  dnnl_memory_t src, w, dst, dsrc, dw, ddst;
  bool reorder;                       /* time the reorders too */
  dnnl_primitive_t r[NREORDER];
  dnnl_memory_t plain[NREORDER];      /* the NCHW / OIHW side of each */
} Prims;

static const dnnl_memory_desc_t *pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
  return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* p->r[k] between plain (NCHW or OIHW md) and oneDNN's memory m:
 * plain -> m when in, else m -> plain. */
static void make_reorder(dnnl_engine_t eng, Prims *p, int k, const dnnl_memory_desc_t *plain, dnnl_memory_t m,
                         bool in) {
  const dnnl_memory_desc_t *md;
  CHECK(dnnl_memory_get_memory_desc(m, &md));
  p->plain[k] = mem_of(eng, plain);
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_reorder_primitive_desc_create(&pd, in ? plain : md, eng, in ? md : plain, eng, NULL));
  CHECK(dnnl_primitive_create(&p->r[k], pd));
  CHECK(dnnl_primitive_desc_destroy(pd));
}

static void reorder(dnnl_stream_t s, Prims *p, int k, dnnl_memory_t m, bool in) {
  if (!p->reorder) return;
  dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, in ? p->plain[k] : m}, {DNNL_ARG_TO, in ? m : p->plain[k]}};
  CHECK(dnnl_primitive_execute(p->r[k], s, 2, a));
}

static void make_prims(dnnl_engine_t eng, const Conv *cv, bool any, bool reorders, Prims *p) {
  int oh = (cv->hw + 2 * cv->pad - cv->k) / cv->stride + 1;
  dnnl_dims_t sd = {BATCH, cv->c, cv->hw, cv->hw}, wd = {cv->o, cv->c, cv->k, cv->k}, dd = {BATCH, cv->o, oh, oh};
  dnnl_dims_t strides = {cv->stride, cv->stride}, pad = {cv->pad, cv->pad};
  dnnl_memory_desc_t smd, wmd, dmd;
  CHECK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
  CHECK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_oihw));
  CHECK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
  dnnl_convolution_desc_t fd, bdd, bwd;
  CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &smd, &wmd, NULL,
                                           &dmd, strides, pad, pad));
  dnnl_primitive_desc_t fpd, bdpd, bwpd;
  CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
  CHECK(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &smd, &wmd, &dmd, strides, pad, pad));
  CHECK(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, eng, fpd));
  CHECK(dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &smd, &wmd, NULL, &dmd, strides,
                                                    pad, pad));
  CHECK(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, eng, fpd));
  CHECK(dnnl_primitive_create(&p->fwd, fpd));
  CHECK(dnnl_primitive_create(&p->bwd_data, bdpd));
  CHECK(dnnl_primitive_create(&p->bwd_w, bwpd));
  p->src = mem_of(eng, pd_md(fpd, dnnl_query_src_md));
  p->w = mem_of(eng, pd_md(fpd, dnnl_query_weights_md));
  p->dst = mem_of(eng, pd_md(fpd, dnnl_query_dst_md));
  p->dsrc = mem_of(eng, pd_md(bdpd, dnnl_query_diff_src_md));
  p->ddst = mem_of(eng, pd_md(bdpd, dnnl_query_diff_dst_md));
  p->dw = mem_of(eng, pd_md(bwpd, dnnl_query_diff_weights_md));
  p->reorder = reorders;
  if (reorders) {
    dnnl_memory_desc_t ps, pw, pdst;
    CHECK(dnnl_memory_desc_init_by_tag(&ps, 4, sd, dnnl_f32, dnnl_nchw));
    CHECK(dnnl_memory_desc_init_by_tag(&pw, 4, wd, dnnl_f32, dnnl_oihw));
    CHECK(dnnl_memory_desc_init_by_tag(&pdst, 4, dd, dnnl_f32, dnnl_nchw));
    make_reorder(eng, p, R_SRC, &ps, p->src, true);
    make_reorder(eng, p, R_W, &pw, p->w, true);
    make_reorder(eng, p, R_DST, &pdst, p->dst, false);
    make_reorder(eng, p, R_DDST, &pdst, p->ddst, true);
    make_reorder(eng, p, R_DSRC, &ps, p->dsrc, false);
    make_reorder(eng, p, R_DW, &pw, p->dw, false);
  }
  CHECK(dnnl_primitive_desc_destroy(fpd));
  CHECK(dnnl_primitive_desc_destroy(bdpd));
  CHECK(dnnl_primitive_desc_destroy(bwpd));
}

/* Runs the three primitives of every convolution once; adds each kind's
 * seconds to t[3]. */
static void run_all(dnnl_stream_t s, Prims *ps, double t[3]) {
  for (int i = 0; i < NCONV; i++) {
    Prims *p = &ps[i];
    dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DST, p->dst}};
    dnnl_exec_arg_t da[] = {{DNNL_ARG_DIFF_DST, p->ddst}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DIFF_SRC, p->dsrc}};
    dnnl_exec_arg_t wa[] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_DIFF_DST, p->ddst}, {DNNL_ARG_DIFF_WEIGHTS, p->dw}};
    double a = now();
    reorder(s, p, R_SRC, p->src, true);
    reorder(s, p, R_W, p->w, true);
    CHECK(dnnl_primitive_execute(p->fwd, s, 3, fa));
    reorder(s, p, R_DST, p->dst, false);
    CHECK(dnnl_stream_wait(s));
    double b = now();
    reorder(s, p, R_DDST, p->ddst, true);
    if (i > 0) {   /* the stem's input needs no gradient */
      CHECK(dnnl_primitive_execute(p->bwd_data, s, 3, da));
      reorder(s, p, R_DSRC, p->dsrc, false);
    }
    CHECK(dnnl_stream_wait(s));
    double c = now();
    CHECK(dnnl_primitive_execute(p->bwd_w, s, 3, wa));
    reorder(s, p, R_DW, p->dw, false);
    CHECK(dnnl_stream_wait(s));
    double d = now();
    t[0] += b - a, t[1] += c - b, t[2] += d - c;
  }
}

/* FNV-1a over the bytes of memory m. */
static uint64_t hash_mem(dnnl_memory_t m, uint64_t h) {
  const dnnl_memory_desc_t *md;
  void *p;
  CHECK(dnnl_memory_get_memory_desc(m, &md));
  CHECK(dnnl_memory_get_data_handle(m, &p));
  size_t n = dnnl_memory_desc_get_size(md);
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211u;
  return h;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10;
  if (iters < 1 || iters > 10000) {
    fprintf(stderr, "usage: dnnl_conv [ITERATIONS (1..10000)]\n");
    return 2;
  }
  dnnl_engine_t eng;
  dnnl_stream_t s;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&s, eng, dnnl_stream_default_flags));
  const dnnl_version_t *v = dnnl_version();
  printf("oneDNN %d.%d.%d, batch %d, %d convolutions, median of %d\n", v->major, v->minor, v->patch, BATCH, NCONV,
         iters);
  uint64_t hashes[3];
  static const char *const names[] = {"oneDNN, NCHW:", "oneDNN, its layouts:", "oneDNN, with reorders:"};
  for (int way = 0; way < 3; way++) {
    Prims ps[NCONV];
    for (int i = 0; i < NCONV; i++) make_prims(eng, &convs[i], way > 0, way == 2, &ps[i]);
    double warm[3] = {0, 0, 0};
    run_all(s, ps, warm);
    double *k[3];
    for (int j = 0; j < 3; j++) k[j] = calloc((size_t)iters, sizeof(double));
    for (int it = 0; it < iters; it++) {
      double t[3] = {0, 0, 0};
      run_all(s, ps, t);
      for (int j = 0; j < 3; j++) k[j][it] = t[j];
    }
    for (int j = 0; j < 3; j++) qsort(k[j], (size_t)iters, sizeof(double), cmp_double);
    printf("%-22s forward %7.2f ms  backward data %7.2f ms  backward weights %7.2f ms  total %7.2f ms\n",
           names[way], k[0][iters / 2] * 1e3, k[1][iters / 2] * 1e3,
           k[2][iters / 2] * 1e3, (k[0][iters / 2] + k[1][iters / 2] + k[2][iters / 2]) * 1e3);
    for (int j = 0; j < 3; j++) free(k[j]);
    uint64_t h = 14695981039346656037u;
    for (int i = 0; i < NCONV; i++) {   /* the NCHW / OIHW values (blocked layouts pad with junk) */
      Prims *p = &ps[i];
      h = hash_mem(p->reorder ? p->plain[R_DST] : p->dst, h);
      if (i > 0) h = hash_mem(p->reorder ? p->plain[R_DSRC] : p->dsrc, h);
      h = hash_mem(p->reorder ? p->plain[R_DW] : p->dw, h);
    }
    hashes[way] = h;
    for (int i = 0; i < NCONV; i++) {
      dnnl_primitive_destroy(ps[i].fwd);
      dnnl_primitive_destroy(ps[i].bwd_data);
      dnnl_primitive_destroy(ps[i].bwd_w);
      dnnl_memory_t *ms[] = {&ps[i].src, &ps[i].w, &ps[i].dst, &ps[i].dsrc, &ps[i].dw, &ps[i].ddst};
      for (int j = 0; j < 6; j++) dnnl_memory_destroy(*ms[j]);
      for (int j = 0; ps[i].reorder && j < NREORDER; j++) {
        dnnl_primitive_destroy(ps[i].r[j]);
        dnnl_memory_destroy(ps[i].plain[j]);
      }
    }
  }
  printf("bits of the outputs and gradients, NCHW and with reorders: %016llx %016llx\n",
         (unsigned long long)hashes[0], (unsigned long long)hashes[2]);
  dnnl_stream_destroy(s);
  dnnl_engine_destroy(eng);
  return 0;
}
