/* fuzz_exec.c — a script's bytes lowered and executed, like netrun run
 * (the tape recorded for half the inputs; the others run without it, conv
 * layers fused, as netrun train runs them); when the script has a train
 * block, its training program runs (one step, like netrun train), else
 * when it defines `loss`, its backward is appended and runs too, like
 * netrun grad.
 *
 * Small limits keep every input quick and bounded: the program's ops,
 * turns per loop (--max-steps), the memory all tensors may take
 * (--max-memory), and a second of CPU time, after which a timer
 * interrupts the run as Ctrl-C would. */
#include "fuzz.h"

#include "exec/exec.h"
#include "train/train.h"

#include <signal.h>
#include <sys/time.h>

#define FUZZ_MAX_STEPS 64
#define FUZZ_MAX_MEMORY ((int64_t)64 << 20)

static void on_timer(int sig) {
  (void)sig;
  exec_interrupt();
}

static void cpu_timer(long usec) {
  struct itimerval t = {{0, 0}, {usec / 1000000, usec % 1000000}};
  setitimer(ITIMER_VIRTUAL, &t, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  tensor_set_memory_limit(FUZZ_MAX_MEMORY);
  signal(SIGVTALRM, on_timer);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  FuzzScript s;
  if (fuzz_script(&s, data, size)) {
    bool backward = fuzz_backward(&s);
    if (s.diag.nerrors == 0) {
      ExecOptions o;
      exec_default_options(&o);
      o.max_steps = FUZZ_MAX_STEPS;
      o.out = fuzz_null();
      o.check_nan = size % 2;
      /* without the tape (and --check-nan) the executor fuses conv layers */
      o.tape = size / 2 % 2;
      Executor *ex = exec_new(s.prog, &o);
      Tensor *lr = tensor_scalar_f32(0.01f);
      if (backward) exec_preload(ex, TRAIN_LR_VAR, lr);
      tensor_unref(lr);
      cpu_timer(1000000);
      exec_run(ex);
      cpu_timer(0);
      exec_free(ex);
    }
  }
  fuzz_script_free(&s);
  return 0;
}
