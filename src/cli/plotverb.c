/* plotverb.c — `netrun plot [-o OUT.svg] [--log-y] [--x-axis AXIS] LOG`:
 * the verb's options over the log reader and SVG writer of io/plot.c. */
#include "cli/cmd.h"
#include "cli/option.h"
#include "io/plot.h"
#include "base/diag.h"

#include <errno.h>
#include <string.h>

enum { P_OUT = 1, P_LOG_Y, P_X_AXIS };

static const Option plot_options[] = {
    {"-o", OPTION_VALUE, "OUT", "a file name", P_OUT, 0},
    {"--log-y", OPTION_FLAG, NULL, NULL, P_LOG_Y, 0},
    {"--x-axis", OPTION_VALUE, "AXIS", "step, samples, epoch or lr", P_X_AXIS, 0},
    {NULL, 0, NULL, NULL, 0, 0},
};

static int parse_args(int argc, char **argv, const char **file, PlotOpts *op) {
  memset(op, 0, sizeof *op);
  *file = NULL;
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){plot_options, NULL}, "");
  int id, k;
  while ((id = option_next(&p)) != OPTION_END) {
    switch (id) {
    case OPTION_ERROR: return EXIT_USAGE;
    case OPTION_ARG:
      if (*file) return diag_usage("%s takes one file, got a second: '%s'", argv[0], p.value);
      *file = p.value;
      break;
    case P_OUT: op->out = p.value; break;
    case P_LOG_Y: op->log_y = true; break;
    case P_X_AXIS:
      for (k = 0; k < PLOT_NAXES && strcmp(p.value, plot_axis_names[k]) != 0; k++) {}
      if (k == PLOT_NAXES) return diag_usage("unknown x axis '%s' (expected step, samples, epoch or lr)", p.value);
      op->x = (PlotAxis)k;
      break;
    }
  }
  if (!*file) return diag_usage("%s needs a FILE", argv[0]);
  return 0;
}

int cmd_plot(int argc, char **argv) {
  const char *file;
  PlotOpts op;
  int rc = parse_args(argc, argv, &file, &op);
  if (rc) return rc;
  bool from_stdin = strcmp(file, "-") == 0;
  FILE *f = from_stdin ? stdin : fopen(file, "r");
  if (!f) {
    diag_error(NULL, SPAN_NONE, "cannot read %s: %s", file, strerror(errno));
    return EXIT_SCRIPT;
  }
  bool ok = plot_log(f, from_stdin ? "<stdin>" : file, &op);
  if (!from_stdin) fclose(f);
  return ok ? 0 : EXIT_SCRIPT;
}
