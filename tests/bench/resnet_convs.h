/* resnet_convs.h — examples/fashion_resnet.net's 15 convolutions, for the
 * benchmarks that time them outside netrun (dnnl_conv.c, xsmm_gemm.c);
 * tests/bench/resnet_convs.net is the same list as a script. */
#ifndef NETRUN_BENCH_RESNET_CONVS_H
#define NETRUN_BENCH_RESNET_CONVS_H

typedef struct Conv {
  int c, o, hw, k, stride, pad;   /* channels in and out, square input, kernel, stride, padding */
} Conv;

/* In order: the stem, stage 1 (4), stage 2 (down: 3x3 stride 2 and its
 * 1x1 shortcut, then 3), stage 3; batch 128. */
static const Conv convs[] = {
    {1, 16, 28, 3, 1, 1},  {16, 16, 28, 3, 1, 1}, {16, 16, 28, 3, 1, 1}, {16, 16, 28, 3, 1, 1},
    {16, 16, 28, 3, 1, 1}, {16, 32, 28, 3, 2, 1}, {32, 32, 14, 3, 1, 1}, {16, 32, 28, 1, 2, 0},
    {32, 32, 14, 3, 1, 1}, {32, 32, 14, 3, 1, 1}, {32, 64, 14, 3, 2, 1}, {64, 64, 7, 3, 1, 1},
    {32, 64, 14, 1, 2, 0}, {64, 64, 7, 3, 1, 1},  {64, 64, 7, 3, 1, 1},
};
#define NCONV (int)(sizeof convs / sizeof *convs)
#define BATCH 128

#endif
