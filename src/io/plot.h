/* plot.h — drawing a training log as SVG (plot.c): what the plot verb
 * (cli/plotverb.c) and lr-find's --plot draw with. */
#ifndef NETRUN_PLOT_H
#define NETRUN_PLOT_H

#include <stdbool.h>
#include <stdio.h>

/* What a log's curves are drawn over (plot --x-axis). */
typedef enum { PLOT_X_STEP, PLOT_X_SAMPLES, PLOT_X_EPOCH, PLOT_X_LR, PLOT_NAXES } PlotAxis;
/* Their names, as --x-axis takes them. */
extern const char *const plot_axis_names[PLOT_NAXES];

typedef struct PlotOpts {
  const char *out;    /* the SVG file; NULL: standard output */
  const char *note;   /* the subtitle, when given */
  bool log_y;         /* the loss axis logarithmic */
  PlotAxis x;
} PlotOpts;

/* The log read from f (called name in messages and the title) drawn as op
 * says.  False once the error is reported. */
bool plot_log(FILE *f, const char *name, const PlotOpts *op);
/* The step lines of a log drawn over a logarithmic lr axis into out (NULL:
 * standard output), the subtitle `note`, the loss axis logarithmic if
 * log_y: lr-find's sweep.  False once the error is reported. */
bool plot_stream(FILE *f, const char *name, const char *out, const char *note, bool log_y);

#endif
