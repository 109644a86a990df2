/* fuzz_parse.c — a script's bytes through the scanner, the parser, the
 * syntax tree printer, lowering and the three dump formats; then, when the
 * script has a train block, the training program (train_config,
 * train_program), else when it defines `loss`, bwd_append, and the
 * dump of the whole.  (What netrun dump [--ast] [--backward] [--train]
 * does with a file.) */
#include "fuzz.h"

#include "ir/dump.h"
#include "train/train.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

static void dump_all(const Program *p) {
  static const DumpOptions opts[] = {
      {DUMP_TEXT, true, true}, {DUMP_JSON, true, false}, {DUMP_DOT, false, false}};
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) dump_program(fuzz_null(), p, &opts[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  FuzzScript s;
  if (fuzz_script(&s, data, size)) {
    dump_all(s.prog);
    if (fuzz_backward(&s)) dump_all(s.prog);
  }
  fuzz_script_free(&s);
  return 0;
}
