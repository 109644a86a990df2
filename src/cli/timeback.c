/* timeback.c — `netrun time --backward FILE` (caffe time's forward and
 * backward tables): appends to FILE's program the backward netrun grad
 * runs (the gradients of loss with respect to every parameter), runs the
 * forward ops and then the backward ops --iterations times, and prints the
 * per-op-type calls and times of each apart, then both totals.
 *
 * The startup block (initializers) runs once before and is not timed,
 * nor are the --warmup passes (1 by default) before the timed ones.
 * The executor keeps one table of times per op type; the time of a phase
 * is what that table gained while the phase ran, so an op type that runs
 * in both (an add in the forward and in the backward) is split right. */
#include "autodiff/backward.h"
#include "cli/cli.h"
#include "cli/cmd.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct Phases {
  OpTiming *prev, *fwd, *bwd;   /* the executor's table after the last phase; the sums */
  int n;
} Phases;

/* Adds what the executor's table gained since the last call to ph->fwd
 * (phase 1) or ph->bwd (2), or drops it (0: the startup block). */
static void tb_collect(Phases *ph, Executor *ex, int phase) {
  int n;
  const OpTiming *cur = exec_timings(ex, &n);
  if (n > ph->n) {
    size_t sz = sizeof(OpTiming) * (size_t)n;
    ph->prev = mem_alloc(ph->prev, sz);
    ph->fwd = mem_alloc(ph->fwd, sz);
    ph->bwd = mem_alloc(ph->bwd, sz);
    for (int i = ph->n; i < n; i++) {
      ph->prev[i] = ph->fwd[i] = ph->bwd[i] = (OpTiming){cur[i].type, 0, 0};
    }
    ph->n = n;
  }
  OpTiming *acc = phase == 1 ? ph->fwd : phase == 2 ? ph->bwd : NULL;
  for (int i = 0; i < n && acc; i++) {
    acc[i].calls += cur[i].calls - ph->prev[i].calls;
    acc[i].seconds += cur[i].seconds - ph->prev[i].seconds;
  }
  for (int i = 0; i < n; i++) {
    ph->prev[i] = cur[i];
  }
}

/* Runs forward and backward a->iterations times; false on error. */
static bool tb_run(Executor *ex, int first, const Args *a, Phases *ph) {
  if (exec_startup(ex) != 0) return false;
  tb_collect(ph, ex, 0);
  for (int64_t it = 0; it < a->warmup + a->iterations; it++) {
    bool timed = it >= a->warmup;
    if (exec_run_range(ex, 0, first) != 0) return false;
    tb_collect(ph, ex, timed ? 1 : 0);
    if (exec_run_from(ex, first) != 0) return false;
    tb_collect(ph, ex, timed ? 2 : 0);
  }
  return true;
}

static void tb_print(const Phases *ph, int64_t iterations) {
  printf("forward\n");
  double f = cli_print_timings(stdout, ph->fwd, ph->n);
  printf("\nbackward\n");
  double b = cli_print_timings(stdout, ph->bwd, ph->n);
  double it = (double)iterations;
  printf("\n%" PRId64 " forward and backward passes: forward %.3f ms, backward %.3f ms, both %.3f ms each\n",
         iterations, f * 1e3 / it, b * 1e3 / it, (f + b) * 1e3 / it);
}

int cmd_time_backward(const Args *args) {
  Args a = *args;
  FILE *devnull = cli_time_options(&a);
  Session ld;
  int status = EXIT_SCRIPT;
  BackwardResult bw;
  if (session_load(&ld, a.file) && bwd_append(ld.prog, a.loss, NULL, 0, NULL, 0, &bw)) {
    int first = bw.first_grad_op;
    Executor *ex = cli_start_marks(&ld, &a, &first, 1);
    if (ex) {
      Phases ph = {0};
      if (tb_run(ex, first, &a, &ph)) {
        status = 0;
        tb_print(&ph, a.iterations);
      }
      mem_free(ph.prev);
      mem_free(ph.fwd);
      mem_free(ph.bwd);
      exec_free(ex);
    }
  }
  diag_finish(&ld.diag);
  session_free(&ld);
  if (devnull) fclose(devnull);
  return status;
}
