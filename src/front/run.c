/* run.c — an executor started over a loaded script with its values fed
 * (run.h). */
#include "front/run.h"

#include "front/feed.h"
#include "ir/rewrite.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static void on_interrupt(int sig) {
  (void)sig;
  exec_interrupt();
}

bool run_feed(Session *s, Executor *ex, const RunFeeds *f) {
  bool ok = true;
  for (int i = 0; i < f->nsets + f->nfeeds; i++) {
    bool set = i < f->nsets;
    const char *arg = set ? f->sets[i] : f->feeds[i - f->nsets];
    const char *eq = strchr(arg, '=');
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    const VarDesc *v = prog_named_var(s->prog, name);
    if (!v || !(v->flags & VAR_INPUT)) {
      diag_error(&s->diag, SPAN_NONE, "%s %s: the script has no input named '%s'", set ? "--set" : "--feed", arg,
                 name);
      ok = false;
      continue;
    }
    Tensor *t = set ? feed_parse_value(&s->diag, name, eq + 1, v->dtype) : feed_read_file(&s->diag, eq + 1, v);
    char what[300];
    snprintf(what, sizeof what, "%s %s", set ? "--set" : "--feed", name);
    if (!t || !exec_feed(ex, name, t, what)) ok = false;
    tensor_unref(t);
  }
  return ok;
}

Executor *run_start(Session *s, const ExecOptions *o, const RunFeeds *f, int *marks, int nmarks) {
  if (exec_rewrite_wanted(o)) rewrite_program(s->prog, &(RewriteOpts){RW_FUSE | RW_KEEP, marks, nmarks, 0, NULL, 0});
  Executor *ex = exec_new(s->prog, o);
  if (!run_feed(s, ex, f)) {
    diag_finish(&s->diag);
    exec_free(ex);
    return NULL;
  }
  signal(SIGINT, on_interrupt);
  return ex;
}
