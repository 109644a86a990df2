/* trainer.c — placeholder until the data module lands. */
#include "cli.h"

static int later(const char *verb) {
  fprintf(stderr, "netrun: %s: not implemented yet\n", verb);
  return EXIT_SCRIPT;
}
int cmd_train(int argc, char **argv) { (void)argc; return later(argv[0]); }
int cmd_eval(int argc, char **argv) { (void)argc; return later(argv[0]); }
int cmd_predict(int argc, char **argv) { (void)argc; return later(argv[0]); }
int dump_train(const Args *a) { (void)a; return later("dump --train"); }
