/* gemm_signals — products through par_sgemm1 (src/exec/par.c) while
 * another process sends this one SIGUSR1 every 200 us, a handler counting
 * them on the interrupted thread's own stack, as netrun train's Ctrl-C
 * handler runs.  oneDNN 2.6's JIT sgemm points the stack pointer into its
 * heap buffer while it runs, so without par_sgemm1's blocking a handler
 * run then corrupts the heap: glibc aborts at a later free.  Prints the
 * signals handled and the products' largest error against a product in
 * double; exits 1 when an error exceeds 1e-4 or no signal came
 * (tests/trust_limits.bats). */
#include "exec/par.h"

#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static void on_usr1(int sig) {
  (void)sig;
  handled = handled + 1;
}

int main(void) {
  enum { N = 384, SIGNALS = 2000 };
  par_init();
  struct sigaction sa = {.sa_handler = on_usr1};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  float *a = malloc(sizeof *a * N * N), *b = malloc(sizeof *b * N * N), *c = malloc(sizeof *c * N * N);
  double *ref = malloc(sizeof *ref * N * N);
  if (!a || !b || !c || !ref) return 2;
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)((int64_t)i * 7919 % 1000) / 1000 - 0.5f;
    b[i] = (float)((int64_t)i * 104729 % 1000) / 1000 - 0.5f;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < N; k++) s += (double)a[i * N + k] * (double)b[k * N + j];
      ref[i * N + j] = s;
    }
  pid_t parent = getpid(), child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    for (int i = 0; i < SIGNALS; i++) {
      if (kill(parent, SIGUSR1) != 0) _exit(0);
      usleep(200);
    }
    _exit(0);
  }
  double worst = 0;
  int products = 0, st;
  while (waitpid(child, &st, WNOHANG) == 0) {
    par_sgemm1(false, false, N, N, N, 1, a, N, b, N, 0, c, N);
    char *p = malloc(1000 + (size_t)(products % 5000));   /* the heap in use, as netrun's is */
    if (!p) return 2;
    memset(p, 1, 1000);
    free(p);
    for (int i = 0; i < N * N; i++) worst = fmax(worst, fabs((double)c[i] - ref[i]));
    products++;
  }
  printf("%d products of %dx%dx%d, %d signals handled, largest error %.3g\n", products, N, N, N, (int)handled,
         worst);
  free(a);
  free(b);
  free(c);
  free(ref);
  return worst <= 1e-4 && handled > 0 ? 0 : 1;
}
