/* run.h — starting an executor over a loaded script (session.h) with the
 * values a run feeds its inputs: what the verbs and the trainer share
 * below the command line. */
#ifndef NETRUN_RUN_H
#define NETRUN_RUN_H

#include "exec/exec.h"
#include "front/session.h"

/* The values a run feeds its script's inputs, in order: sets[i] is
 * "NAME=VALUE" (--set: a literal parsed as the input's dtype), feeds[i]
 * "NAME=FILE" (--feed: the value read from FILE). */
typedef struct RunFeeds {
  const char *const *sets, *const *feeds;
  int nsets, nfeeds;
} RunFeeds;

/* Feeds f's values to ex, an executor over s's program; false on error
 * (reported). */
bool run_feed(Session *s, Executor *ex, const RunFeeds *f);
/* An executor over s's program with options o and f's values fed, Ctrl-C
 * interrupting it (exec_interrupt); NULL on error (reported and counted).
 * The program is rewritten first when o wants it (exec_rewrite_wanted), the
 * rewrite moving the block-0 indices marks[0..nmarks) the caller runs
 * ranges up to (rewrite.h). */
Executor *run_start(Session *s, const ExecOptions *o, const RunFeeds *f, int *marks, int nmarks);

#endif
