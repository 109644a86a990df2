/* fuzz_parse.c — a script's bytes through the scanner, the parser, the
 * syntax tree printer, lowering and the three dump formats; when the
 * script defines `loss`, append_backward too, and the dump of the whole.
 * (What netrun dump [--ast] [--backward] does with a file.) */
#include "fuzz.h"

#include "backward.h"
#include "dump.h"

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
    BackwardResult bw;
    if (prog_export(s.prog, "loss") && append_backward(s.prog, "loss", NULL, 0, NULL, 0, &bw)) dump_all(s.prog);
  }
  fuzz_script_free(&s);
  return 0;
}
