/* plot.h — drawing a training log as SVG (plot.c) for other modules:
 * `netrun plot` itself is a verb (cmd.h). */
#ifndef NETRUN_PLOT_H
#define NETRUN_PLOT_H

#include <stdbool.h>
#include <stdio.h>

/* The step lines of a log read from f (called name in messages and the
 * title) drawn over a logarithmic lr axis into out (NULL: standard
 * output), the subtitle `note`, the loss axis logarithmic if log_y:
 * lr-find's sweep.  0 or the exit status. */
int plot_stream(FILE *f, const char *name, const char *out, const char *note, bool log_y);

#endif
