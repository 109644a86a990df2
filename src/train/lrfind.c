/* lrfind.c — the learning-rate finder's sweep, suggestion and output
 * (lrfind.h); its steps run in loop.c. */
#include "train/lrfind.h"

#include "io/plot.h"
#include "base/diag.h"
#include "base/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double lrf_rate(const LrSweep *s, int64_t i) {
  return s->start * pow(s->end / s->start, (double)i / (double)(s->steps - 1));
}

LrSuggestion lrf_suggest(const LrSweep *s) {
  LrSuggestion g = {-1, -1};
  for (int64_t i = 0; i < s->n; i++)
    if (isfinite(s->pts[i].smooth) && (g.minimum < 0 || s->pts[i].smooth < s->pts[g.minimum].smooth)) g.minimum = i;
  int64_t skip = s->n / 10 > 1 ? s->n / 10 : 1;
  double best = 0;
  for (int64_t i = skip; i + 1 < s->n; i++) {
    double d = s->pts[i + 1].smooth - s->pts[i - 1].smooth;
    if (isfinite(d) && d < best) best = d, g.steepest = i;
  }
  return g;
}

/* x in the fewest digits that read back as x (0.001, not 0.0010000000000000002). */
typedef struct Txt {
  char s[40];
} Txt;
static Txt num(double x) {
  Txt t;
  if (!isfinite(x)) return snprintf(t.s, sizeof t.s, "%s", isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"), t;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(t.s, sizeof t.s, "%.*g", prec, x);
    if (strtod(t.s, NULL) == x) break;
  }
  return t;
}
/* The same for JSON, where a non-finite number is null. */
static Txt jnum(double x) {
  Txt t = num(x);
  if (!isfinite(x)) snprintf(t.s, sizeof t.s, "null");
  return t;
}

static void say(FILE *f, const LrSweep *s, const char *prefix) {
  LrSuggestion g = lrf_suggest(s);
  if (g.steepest >= 0)
    fprintf(f, "%ssuggested lr %.3g: the steepest descent of the smoothed loss (step %lld)", prefix,
            s->pts[g.steepest].lr, (long long)g.steepest + 1);
  else if (s->n < 3)
    fprintf(f, "%sno suggested lr: a slope needs 3 steps, the sweep made %lld", prefix, (long long)s->n);
  else
    fprintf(f, "%sno suggested lr: the smoothed loss never falls over %lld steps", prefix, (long long)s->n);
  if (g.minimum >= 0)
    fprintf(f, "; the lr of its minimum / 10: %.3g (smoothed loss %.4f at step %lld)\n", s->pts[g.minimum].lr / 10,
            s->pts[g.minimum].smooth, (long long)g.minimum + 1);
  else
    fputc('\n', f);
}

void lrf_say_suggestion(FILE *f, const LrSweep *s) { say(f, s, "netrun: lr-find: "); }

static void print_json(FILE *f, const LrSweep *s) {
  LrSuggestion g = lrf_suggest(s);
  fprintf(f, "{\"model\": ");
  diag_quote(f, s->model, QUOTE_JSON);
  fprintf(f, ", \"start\": %s, \"end\": %s, \"steps\": %lld, \"points\": [", num(s->start).s, num(s->end).s,
          (long long)s->steps);
  for (int64_t i = 0; i < s->n; i++)
    fprintf(f, "%s\n  {\"step\": %lld, \"lr\": %s, \"loss\": %s, \"smoothed_loss\": %s}", i ? "," : "",
            (long long)i + 1, num(s->pts[i].lr).s, jnum(s->pts[i].loss).s, jnum(s->pts[i].smooth).s);
  fprintf(f, "],\n \"stopped\": ");
  if (*s->stop) diag_quote(f, s->stop, QUOTE_JSON);
  else fputs("null", f);
  fprintf(f, ", \"suggestion\": \"steepest\", \"suggested_lr\": %s, \"steepest_step\": ",
          g.steepest >= 0 ? num(s->pts[g.steepest].lr).s : "null");
  if (g.steepest >= 0) fprintf(f, "%lld", (long long)g.steepest + 1);
  else fputs("null", f);
  fprintf(f, ", \"min_lr\": %s, \"min_lr_div10\": %s}\n", g.minimum >= 0 ? num(s->pts[g.minimum].lr).s : "null",
          g.minimum >= 0 ? num(s->pts[g.minimum].lr / 10).s : "null");
}

/* x with 6 decimals, or %g when huge; nan, inf or -inf when not finite
 * (never "-nan"). */
static void fixed(char *b, size_t n, double x) {
  if (!isfinite(x)) snprintf(b, n, "%s", num(x).s);
  else snprintf(b, n, fabs(x) < 1e6 ? "%.6f" : "%.6g", x);
}

void lrf_print(FILE *f, const LrSweep *s, LrFormat fmt) {
  if (fmt == LRF_JSON) {
    print_json(f, s);
    return;
  }
  if (fmt == LRF_CSV) {
    fputs("step,lr,loss,smoothed_loss\n", f);
    for (int64_t i = 0; i < s->n; i++)
      fprintf(f, "%lld,%s,%s,%s\n", (long long)i + 1, num(s->pts[i].lr).s, num(s->pts[i].loss).s,
              num(s->pts[i].smooth).s);
    return;
  }
  fprintf(f, "%6s  %-12s  %-12s  %s\n", "step", "lr", "loss", "smoothed");
  for (int64_t i = 0; i < s->n; i++) {
    char loss[40], smooth[40];
    fixed(loss, sizeof loss, s->pts[i].loss);
    fixed(smooth, sizeof smooth, s->pts[i].smooth);
    fprintf(f, "%6lld  %-12.6g  %-12s  %s\n", (long long)i + 1, s->pts[i].lr, loss, smooth);
  }
  if (*s->stop) fprintf(f, "stopped early: %s\n", s->stop);
  say(f, s, "");
}

/* The curve as the step lines of a log (plot.c reads them), drawn over the
 * lr on a logarithmic loss axis (a diverging loss is thousands of times the
 * rest); the step that stopped the sweep early is left out, as fastai
 * leaves out the last steps. */
bool lrf_plot(const LrSweep *s, const char *path) {
  if (!s->n) return false;   /* the first step failed, and said why */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) mem_oom(0);
  for (int64_t i = 0; i < s->n - (*s->stop && s->n > 1); i++)
    fprintf(m, "{\"event\": \"step\", \"step\": %lld, \"lr\": %s, \"loss\": %s, \"loss_smooth\": %s}\n",
            (long long)i + 1, num(s->pts[i].lr).s, jnum(s->pts[i].loss).s, jnum(s->pts[i].smooth).s);
  fclose(m);
  char note[200];
  LrSuggestion g = lrf_suggest(s);
  if (g.steepest >= 0)
    snprintf(note, sizeof note, "lr-find: %lld steps, lr %g to %g \xc2\xb7 suggested lr %.3g (steepest descent)",
             (long long)s->n, s->start, s->end, s->pts[g.steepest].lr);
  else
    snprintf(note, sizeof note, "lr-find: %lld steps, lr %g to %g \xc2\xb7 no suggested lr", (long long)s->n, s->start,
             s->end);
  FILE *in = fmemopen(buf, len ? len : 1, "r");
  if (!in) mem_oom(0);
  bool ok = plot_stream(in, s->model, path, note, true);
  fclose(in);
  free(buf);
  return ok;
}
