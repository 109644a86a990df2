/* plot.c — a training log drawn as an SVG of its loss and accuracy
 * curves: what `netrun plot` (cli/plotverb.c) and lr-find's --plot show.
 *
 * The log is what `netrun train --log` writes: one flat JSON object per line,
 *   {"event": "step",  "epoch", "step", "samples", "loss", "loss_smooth", "lr", "samples_per_s"}
 *   {"event": "eval",  "epoch", "step", "split", "loss", "accuracy"}
 *   {"event": "epoch", "epoch", "step", "train_loss", "train_accuracy", "seconds"}
 *   {"event": "summary", ...}
 * Unknown keys and events are ignored, so newer logs still plot; a missing or
 * null value is just a missing point (JSON has no NaN: a trainer writes a
 * non-finite loss as null).
 *
 * This file owns two things, in the order the data flows:
 *   - a strict reader (each line parsed by jansson): objects whose values are
 *     strings, numbers, true, false or null.  Anything else (nesting, bad
 *     UTF-8, NUL bytes, numbers out of double range, duplicate keys,
 *     overlong lines) is the error `LOG:LINE: ...`, exit 1; the
 *     first error stops the run, since later lines of a broken log say
 *     nothing more.  Only an incomplete last line (the log of a run still
 *     writing it) is forgiven, with a warning.  jansson bounds nesting (2048
 *     levels), so hostile input can cost time but not the stack.
 *   - a hand-written SVG renderer: a loss panel and an accuracy panel stacked
 *     over the same x axis, ticks at 1, 2, 5 x 10^k, grid, legend, title.
 *     Output depends only on the log's bytes and its file name: the same log
 *     gives a byte-identical SVG.
 *
 * A resumed run may append to the log it was writing: when a series' step
 * goes back, the points at and after that step are dropped and the newer
 * ones kept, so the picture shows the run as it finally went.
 *
 * `netrun lr-find --plot` draws its sweep through plot_stream: its curve as
 * step lines, on a logarithmic lr axis. */
#include "io/plot.h"
#include "base/diag.h"
#include "base/file.h"

#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum {
  MAX_LINE = 65536,     /* bytes in one log line */
  MAX_SPLITS = 8,       /* eval splits drawn; more are warned about */
  MAX_TICKS = 64,
  MAX_MARKERS = 200,    /* a series with more points is drawn without markers */
  MAX_EPOCH_LINES = 100,
  LABEL_CHARS = 12,     /* code points of a split name in the legend */
};
/* Values are drawn at most this far from 0, so that no axis arithmetic can
 * overflow (a diverging loss reaches 1e38 well before it becomes null). */
#define VALUE_LIMIT 1e300

/* ---- values and series ----------------------------------------------------------- */

typedef struct Pt {
  double step, y;
} Pt;

/* Points in increasing step (see the note on resumed runs above). */
typedef struct Series {
  Pt *p;
  size_t n, cap;
} Series;

static void series_add(Series *s, double step, double y) {
  while (s->n && s->p[s->n - 1].step >= step) s->n--;
  VEC_RESERVE(s->p, s->cap, s->n + 1);
  s->p[s->n++] = (Pt){step, y};
}

typedef struct Split {
  char *name;            /* UTF-8, may hold NULs: len counts */
  size_t len;
  Series loss, acc;
} Split;

typedef struct Log {
  const char *name;      /* for messages */
  Series loss, smooth, train_loss, train_acc;
  Series samples, epochs, lrs;   /* knots: samples seen, epoch finished, lr at a step */
  Split split[MAX_SPLITS];
  int nsplits;
  bool splits_dropped;   /* warned about */
  bool any_step;
  double max_step, last_epoch;
  bool has_epoch;
} Log;

static void log_free(Log *g) {
  Series *all[] = {&g->loss, &g->smooth, &g->train_loss, &g->train_acc, &g->samples, &g->epochs, &g->lrs};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) mem_free(all[i]->p);
  for (int i = 0; i < g->nsplits; i++) {
    mem_free(g->split[i].name);
    mem_free(g->split[i].loss.p);
    mem_free(g->split[i].acc.p);
  }
}

/* ---- UTF-8 ----------------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s (no overlong forms, no
 * surrogates, nothing past U+10FFFF) and its code point; 0 if ill-formed. */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  unsigned c = s[0];
  int len;
  uint32_t min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    len = 2, min = 0x80, *cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, min = 0x800, *cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, min = 0x10000, *cp = c & 0x07;
  } else {
    return 0;
  }
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    *cp = *cp << 6 | (s[i] & 0x3f);
  }
  if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)) return 0;
  return len;
}

/* ---- the JSON-lines reader ----------------------------------------------------- */

/* Each line is one JSON object read by jansson (strict: no duplicate keys,
 * no NUL in strings, nothing after the object; every number a double);
 * its values must be flat: strings, numbers, true, false or null. */
typedef enum { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING } JvKind;

typedef struct Field {
  const char *key, *str;   /* the parsed line's: valid until the next line */
  size_t klen, slen;
  JvKind kind;
  double num;
} Field;

/* One line being parsed. */
typedef struct Line {
  char *s;
  size_t n;
  json_t *obj;             /* the parsed line */
  Field *f;
  size_t nf, cap;
  char err[256];
} Line;

static bool fail(Line *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(Line *L, const char *fmt, ...) {
  DIAG_FORMAT(L->err, sizeof L->err, fmt);
  return false;
}

/* `"key"` for a message: printable ASCII kept, other bytes as \xNN, long
 * keys cut. */
static const char *quoted(char *buf, size_t cap, const char *k, size_t n) {
  size_t j = 0;
  buf[j++] = '"';
  for (size_t i = 0; i < n && j + 8 < cap; i++) {
    unsigned char c = (unsigned char)k[i];
    if (i == 32) {
      j += (size_t)snprintf(buf + j, cap - j, "...");
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') buf[j++] = (char)c;
    else j += (size_t)snprintf(buf + j, cap - j, "\\x%02x", c);
  }
  buf[j++] = '"';
  buf[j] = 0;
  return buf;
}

static bool parse_line(Line *L) {
  json_decref(L->obj);
  L->obj = NULL;
  L->nf = 0;
  if (L->n >= 3 && memcmp(L->s, "\xef\xbb\xbf", 3) == 0)
    return fail(L, "a byte-order mark at column 1 (a log is UTF-8 without one)");
  const char *nul = memchr(L->s, 0, L->n);
  if (nul) return fail(L, "a NUL byte at column %td", nul - L->s + 1);
  json_error_t err;
  L->obj = json_loadb(L->s, L->n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &err);
  if (!L->obj) {
    /* C's %g spelling of a non-finite number is the likely mistake */
    bool nonfinite = false;
    for (size_t i = 0; i < L->n && !nonfinite; i++) {
      if (L->s[i] != ':') continue;
      size_t j = i + 1;
      while (j < L->n && (L->s[j] == ' ' || L->s[j] == '\t')) j++;
      if (j < L->n && L->s[j] == '-') j++;
      nonfinite = L->n - j >= 3 && (strncasecmp(L->s + j, "nan", 3) == 0 || strncasecmp(L->s + j, "inf", 3) == 0);
    }
    /* jansson reads the line as a whole text: its end is the line's */
    char text[2 * JSON_ERROR_TEXT_LENGTH];
    size_t k = 0;
    for (const char *t = err.text; *t && k + 16 < sizeof text;) {
      if (strncmp(t, "end of file", 11) == 0) {
        k += (size_t)snprintf(text + k, sizeof text - k, "the end of the line");
        t += 11;
      } else {
        text[k++] = *t++;
      }
    }
    text[k] = 0;
    return fail(L, "%s at column %d%s", text, err.column, nonfinite ? " (a non-finite number is written null)" : "");
  }
  if (!json_is_object(L->obj)) return fail(L, "not a JSON object");
  const char *key;
  json_t *v;
  json_object_foreach(L->obj, key, v) {
    char kb[160];
    VEC_RESERVE(L->f, L->cap, L->nf + 1);
    Field *f = &L->f[L->nf++];
    memset(f, 0, sizeof *f);
    f->key = key;
    f->klen = strlen(key);
    switch (json_typeof(v)) {
    case JSON_STRING: f->kind = JV_STRING, f->str = json_string_value(v), f->slen = json_string_length(v); break;
    case JSON_REAL: case JSON_INTEGER: f->kind = JV_NUMBER, f->num = json_number_value(v); break;
    case JSON_TRUE: f->kind = JV_BOOL, f->num = 1; break;
    case JSON_FALSE: f->kind = JV_BOOL, f->num = 0; break;
    case JSON_NULL: f->kind = JV_NULL; break;
    default:
      return fail(L, "nested %s are not supported (the value of %s)", json_is_object(v) ? "objects" : "arrays",
                  quoted(kb, sizeof kb, key, f->klen));
    }
  }
  return true;
}

/* ---- what the lines mean ---------------------------------------------------------- */

enum { K_EPOCH, K_STEP, K_SAMPLES, K_LOSS, K_LOSS_SMOOTH, K_LR, K_SAMPLES_PER_S, K_SPLIT, K_ACCURACY,
       K_TRAIN_LOSS, K_TRAIN_ACCURACY, K_SECONDS, NKEYS };
static const char *const key_names[NKEYS] = {"epoch", "step", "samples", "loss", "loss_smooth", "lr",
                                             "samples_per_s", "split", "accuracy", "train_loss",
                                             "train_accuracy", "seconds"};
#define B(k) (1u << (k))
typedef struct Event {
  const char *name;
  unsigned keys;   /* the keys this event defines; their types are checked */
} Event;
enum { EV_STEP, EV_EVAL, EV_EPOCH };
static const Event events[] = {
    [EV_STEP] = {"step", B(K_EPOCH) | B(K_STEP) | B(K_SAMPLES) | B(K_LOSS) | B(K_LOSS_SMOOTH) | B(K_LR) |
                             B(K_SAMPLES_PER_S)},
    [EV_EVAL] = {"eval", B(K_EPOCH) | B(K_STEP) | B(K_SPLIT) | B(K_LOSS) | B(K_ACCURACY)},
    [EV_EPOCH] = {"epoch", B(K_EPOCH) | B(K_STEP) | B(K_TRAIN_LOSS) | B(K_TRAIN_ACCURACY) | B(K_SECONDS)},
};

static bool key_is(const Field *f, const char *name) {
  return f->klen == strlen(name) && memcmp(f->key, name, f->klen) == 0;
}

static const char *kind_name(JvKind k) {
  switch (k) {
  case JV_NULL: return "null";
  case JV_BOOL: return "a boolean";
  case JV_NUMBER: return "a number";
  case JV_STRING: return "a string";
  }
  return "?";
}

static double clamp(double v) { return v > VALUE_LIMIT ? VALUE_LIMIT : v < -VALUE_LIMIT ? -VALUE_LIMIT : v; }

static Split *find_split(Log *g, const char *name, size_t len, long long lineno) {
  for (int i = 0; i < g->nsplits; i++)
    if (g->split[i].len == len && memcmp(g->split[i].name, name, len) == 0) return &g->split[i];
  if (g->nsplits == MAX_SPLITS) {
    if (!g->splits_dropped)
      diag_warn(NULL, SPAN_NONE, "%s:%lld: more than %d eval splits; the others are not drawn", g->name,
                lineno, MAX_SPLITS);
    g->splits_dropped = true;
    return NULL;
  }
  Split *s = &g->split[g->nsplits++];
  s->name = mem_alloc(NULL, len + 1);
  memcpy(s->name, name, len);
  s->name[len] = 0;
  s->len = len;
  return s;
}

static bool interpret(Log *g, Line *L, long long lineno) {
  char kb[160];
  const Field *ev = NULL;
  for (size_t i = 0; i < L->nf; i++)
    if (key_is(&L->f[i], "event")) {
      if (ev) return fail(L, "duplicate key \"event\"");
      ev = &L->f[i];
    }
  if (!ev) return fail(L, "the object has no \"event\"");
  if (ev->kind != JV_STRING) return fail(L, "\"event\" must be a string, not %s", kind_name(ev->kind));
  int e = -1;
  for (int i = 0; i < (int)(sizeof events / sizeof *events); i++)
    if (ev->slen == strlen(events[i].name) && memcmp(ev->str, events[i].name, ev->slen) == 0) e = i;
  if (e < 0) return true;   /* an event of a newer trainer, or a summary */
  double v[NKEYS] = {0};
  unsigned seen = 0, has = 0;
  const Field *split = NULL;
  for (size_t i = 0; i < L->nf; i++) {
    const Field *f = &L->f[i];
    int k = -1;
    for (int j = 0; j < NKEYS && k < 0; j++)
      if (events[e].keys & B(j) && key_is(f, key_names[j])) k = j;
    if (k < 0) continue;   /* unknown keys are ignored, whatever they hold */
    if (seen & B(k)) return fail(L, "duplicate key %s", quoted(kb, sizeof kb, f->key, f->klen));
    seen |= B(k);
    if (k == K_SPLIT) {
      if (f->kind != JV_STRING) return fail(L, "\"split\" must be a string, not %s", kind_name(f->kind));
      split = f;
    } else if (f->kind == JV_NUMBER) {
      v[k] = clamp(f->num);
      has |= B(k);
    } else if (f->kind != JV_NULL) {
      return fail(L, "%s must be a number or null, not %s", quoted(kb, sizeof kb, f->key, f->klen),
                  kind_name(f->kind));
    }
  }
  if (has & B(K_EPOCH)) g->last_epoch = v[K_EPOCH], g->has_epoch = true;
  if (!(has & B(K_STEP))) return true;   /* nowhere to put the point */
  double step = v[K_STEP];
  if (!g->any_step || step > g->max_step) g->max_step = step;
  g->any_step = true;
  switch (e) {
  case EV_STEP:
    if (has & B(K_LOSS)) series_add(&g->loss, step, v[K_LOSS]);
    if (has & B(K_LOSS_SMOOTH)) series_add(&g->smooth, step, v[K_LOSS_SMOOTH]);
    if (has & B(K_SAMPLES)) series_add(&g->samples, step, v[K_SAMPLES]);
    if (has & B(K_LR)) series_add(&g->lrs, step, v[K_LR]);
    break;
  case EV_EVAL:
    if (has & (B(K_LOSS) | B(K_ACCURACY))) {
      Split *s = split ? find_split(g, split->str, split->slen, lineno) : find_split(g, "eval", 4, lineno);
      if (s && has & B(K_LOSS)) series_add(&s->loss, step, v[K_LOSS]);
      if (s && has & B(K_ACCURACY)) series_add(&s->acc, step, v[K_ACCURACY]);
    }
    break;
  case EV_EPOCH:
    if (has & B(K_TRAIN_LOSS)) series_add(&g->train_loss, step, v[K_TRAIN_LOSS]);
    if (has & B(K_TRAIN_ACCURACY)) series_add(&g->train_acc, step, v[K_TRAIN_ACCURACY]);
    if (has & B(K_EPOCH)) series_add(&g->epochs, step, v[K_EPOCH]);
    break;
  }
  return true;
}

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
  return true;
}

/* Reads every line of f into g; false after reporting an error.  Blank lines
 * are skipped. */
static bool read_log(Log *g, FILE *f) {
  Line L = {0};
  L.s = mem_alloc(NULL, MAX_LINE + 1);
  long long lineno = 0;
  bool ok = true;
  for (;;) {
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
      if (n == MAX_LINE) break;
      L.s[n++] = (char)c;
    }
    if (c == EOF && ferror(f)) {
      diag_error(NULL, SPAN_NONE, "cannot read %s: %s", g->name, strerror(errno));
      ok = false;
      break;
    }
    if (c == EOF && n == 0) break;
    lineno++;
    if (c != EOF && c != '\n') {
      diag_error(NULL, SPAN_NONE, "%s:%lld: line longer than %d bytes", g->name, lineno, MAX_LINE);
      ok = false;
      break;
    }
    L.s[n] = 0;
    L.n = n;
    if (blank(L.s, n)) {
      if (c == EOF) break;
      continue;
    }
    if (c == EOF) {
      diag_warn(NULL, SPAN_NONE, "%s:%lld: the last line is incomplete (no newline: a log still being written?); it is ignored",
                g->name, lineno);
      break;
    }
    if (!parse_line(&L) || !interpret(g, &L, lineno)) {
      diag_error(NULL, SPAN_NONE, "%s:%lld: %s", g->name, lineno, L.err);
      ok = false;
      break;
    }
  }
  mem_free(L.s);
  json_decref(L.obj);
  mem_free(L.f);
  return ok;
}

/* ---- axes ---------------------------------------------------------------------------- */

typedef struct Axis {
  double lo, hi, step;   /* step: between linear ticks; 0 on a log axis */
  bool log, percent;
  int n;
  double tick[MAX_TICKS];
} Axis;

/* The nice number nearest x (Heckbert, Graphics Gems): 1, 2, 5 or 10 times
 * a power of ten. */
static double nice(double x) {
  double e = floor(log10(x)), p = pow(10, e), f = x / p;
  if (f >= 10) f /= 10, p *= 10;
  if (f < 1) f *= 10, p /= 10;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

/* Widens an empty range [v, v] to something an axis can show. */
static void widen(double *lo, double *hi) {
  double mag = fmax(fabs(*lo), fabs(*hi));
  if (*hi - *lo > mag * 1e-9 && *hi - *lo > 1e-200) return;
  double c = (*lo + *hi) / 2, half = mag > 1e-200 ? mag * 0.1 : 1;
  *lo = c - half, *hi = c + half;
}

/* Ticks k*step covering [lo, hi]; about `target` of them.  `integral`: steps
 * of at least 1 (the axis counts steps, samples or epochs). */
static void axis_linear(Axis *a, double lo, double hi, int target, bool integral) {
  if (integral && hi - lo < 1) hi = lo + 1;
  widen(&lo, &hi);
  /* Heckbert rounds the range first, then the step; rounding only the step
   * wastes less of the plot (0..2500, not 0..3000, for 2345 steps). */
  double step = nice((hi - lo) / (target - 1));
  if (integral && step < 1) step = 1;
  double k0 = floor(lo / step), k1 = ceil(hi / step);
  a->lo = k0 * step, a->hi = k1 * step, a->step = step, a->log = false, a->n = 0;
  for (double k = k0; k <= k1 && a->n < MAX_TICKS; k++) a->tick[a->n++] = k == 0 ? 0 : k * step;
}

/* The largest 1, 2 or 5 x 10^k at most v (up), or the smallest at least v. */
static double nice125(double v, bool up) {
  double e = floor(log10(v)), p = pow(10, e), m = v / p;
  if (m >= 10) m /= 10, p *= 10;
  if (m < 1) m *= 10, p /= 10;
  if (up) return (m <= 1 + 1e-9 ? 1 : m <= 2 + 1e-9 ? 2 : m <= 5 + 1e-9 ? 5 : 10) * p;
  return (m >= 5 - 1e-9 ? 5 : m >= 2 - 1e-9 ? 2 : 1) * p;
}

/* A log axis from a 1-2-5 value at most lo to one at least hi; ticks at
 * 1, 2, 5 x 10^k, or only at powers of ten when the range is wide. */
static void axis_log(Axis *a, double lo, double hi) {
  lo = fmax(lo, 1e-300);
  if (hi <= lo * (1 + 1e-9)) lo /= 2, hi *= 2;
  a->lo = nice125(lo, false), a->hi = nice125(hi, true), a->step = 0, a->log = true, a->n = 0;
  double e0 = floor(log10(a->lo)), e1 = ceil(log10(a->hi));
  double decades = e1 - e0, stride = decades > 12 ? ceil(decades / 8) : 1;
  static const double mant[] = {1, 2, 5};
  int nm = decades > 5 ? 1 : 3;
  for (double e = e0; e <= e1 && a->n < MAX_TICKS; e += stride)
    for (int j = 0; j < nm && a->n < MAX_TICKS; j++) {
      double t = mant[j] * pow(10, e);
      if (t >= a->lo * (1 - 1e-9) && t <= a->hi * (1 + 1e-9)) a->tick[a->n++] = t;
    }
}

/* "2.5e+07" -> "2.5e7", "1e-05" -> "1e-5". */
static void tidy_exponent(char *b) {
  char *e = strchr(b, 'e');
  if (!e) return;
  char *d = e + 1, *s = e + 1;
  if (*s == '+') s++;
  else if (*s == '-') *d++ = *s++;
  while (*s == '0' && s[1]) s++;
  memmove(d, s, strlen(s) + 1);
}

static int decimals(double step) {
  int d = (int)-floor(log10(step) + 1e-9);
  return d < 0 ? 0 : d;
}

static void tick_label(char *b, size_t cap, const Axis *a, double v) {
  double scale = a->percent ? 100 : 1, step = a->step * scale;
  double maxabs = fmax(fabs(a->lo), fabs(a->hi)) * scale;
  v = v * scale + 0.0;   /* + 0.0: no "-0" */
  const char *suffix = a->percent ? "%" : "";
  if (a->log) {
    if (v >= 1e-4 && v < 1e6) snprintf(b, cap, "%.*f%s", decimals(v), v, suffix);
    else snprintf(b, cap, "%.0e%s", v, suffix);
  } else if (maxabs >= 1e-3 && maxabs < 1e4 && decimals(step) <= 12) {
    snprintf(b, cap, "%.*f%s", decimals(step), v, suffix);
  } else if (maxabs >= 1e4 && maxabs < 1e15 && step >= 1) {
    double u = maxabs >= 1e12 ? 1e12 : maxabs >= 1e9 ? 1e9 : maxabs >= 1e6 ? 1e6 : 1e3;
    const char *unit = u == 1e12 ? "T" : u == 1e9 ? "G" : u == 1e6 ? "M" : "k";
    snprintf(b, cap, "%.*f%s%s", v == 0 ? 0 : decimals(step / u), v / u, v == 0 ? "" : unit, suffix);
  } else if (v == 0) {
    snprintf(b, cap, "0%s", suffix);
  } else {
    int d = (int)(floor(log10(maxabs)) - floor(log10(step)));
    snprintf(b, cap, "%.*e%s", d < 0 ? 0 : d > 16 ? 16 : d, v, suffix);
  }
  tidy_exponent(b);
}

/* ---- the picture ---------------------------------------------------------------------- */

/* Layout, in SVG user units. */
#define WIDTH 860.0
#define PLOT_L 76.0
#define PLOT_W 540.0
#define PLOT_H 240.0
#define FIRST_TOP 70.0
#define PANEL_PITCH 310.0   /* plot, tick labels, axis title, gap */
#define LEGEND_X (PLOT_L + PLOT_W + 20)

#define TRAIN_COLOR "#1f77b4"
#define TRAIN_LIGHT "#aec7e8"
static const char *const split_colors[MAX_SPLITS] = {"#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                     "#8c564b", "#e377c2", "#bcbd22", "#17becf"};

typedef struct Curve {
  const char *cls, *color, *dash;
  char label[96];
  double width;
  bool markers;
  const Series *s;
} Curve;

typedef struct Panel {
  const char *id, *ylabel;
  bool is_loss;
  double top;
  Axis y;
  Curve c[3 + MAX_SPLITS];
  int nc;
} Panel;

const char *const plot_axis_names[PLOT_NAXES] = {"step", "samples", "epoch", "lr"};

typedef struct Plot {
  const Log *g;
  PlotAxis xkind;
  bool log_y;
  Series knots;          /* step -> x, when x is not the step */
  double *xy;            /* screen points of one curve; allocated before the
                            output is opened, so running out of memory cannot
                            leave a temporary file behind */
  Axis x;
  Panel p[2];
  int np;
} Plot;

/* x of a point at `step`: the step itself, or interpolated along the knots
 * (linearly, extended past the ends by the nearest segment). */
static double xof(const Plot *P, double step) {
  const Series *k = &P->knots;
  if (P->xkind == PLOT_X_STEP) return step;
  if (k->n == 1) return k->p[0].y;
  size_t lo = 0, hi = k->n - 1;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->p[mid].step <= step) lo = mid;
    else hi = mid;
  }
  const Pt *a = &k->p[lo], *b = &k->p[hi];
  double x = a->y + (step - a->step) / (b->step - a->step) * (b->y - a->y);
  return isnan(x) ? a->y : clamp(x);
}

static double px(const Plot *P, double x) {
  const Axis *a = &P->x;
  double t = a->log ? (log10(fmax(x, 1e-300)) - log10(a->lo)) / (log10(a->hi) - log10(a->lo)) : (x - a->lo) / (a->hi - a->lo);
  return PLOT_L + t * PLOT_W;
}

static double py(const Panel *p, double y) {
  const Axis *a = &p->y;
  double t = a->log ? (log10(y) - log10(a->lo)) / (log10(a->hi) - log10(a->lo)) : (y - a->lo) / (a->hi - a->lo);
  return p->top + PLOT_H - t * PLOT_H;
}

static bool drawable(const Panel *p, double y) { return !p->y.log || y >= 1e-300; }

/* Text as XML character data: markup escaped; bytes that are not UTF-8 and
 * code points XML cannot hold become U+FFFD. */
static void xml_text(FILE *o, const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int len = utf8_next((const unsigned char *)s + i, n - i, &cp);
    if (!len || cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff) fputs("\xef\xbf\xbd", o);
    else if (cp == '&') fputs("&amp;", o);
    else if (cp == '<') fputs("&lt;", o);
    else if (cp == '>') fputs("&gt;", o);
    else if (cp == '"') fputs("&quot;", o);
    else fwrite(s + i, 1, (size_t)len, o);
    i += len ? (size_t)len : 1;
  }
}

static void xml_str(FILE *o, const char *s) { xml_text(o, s, strlen(s)); }

/* label = the first LABEL_CHARS code points of the split's name ("…" if
 * cut; a NUL, which JSON allows as \u0000, as U+FFFD), then suffix. */
static void split_label(char *b, size_t cap, const Split *s, const char *suffix) {
  size_t i = 0, k = 0;
  for (int chars = 0; i < s->len && chars < LABEL_CHARS; chars++) {
    uint32_t cp;
    int len = utf8_next((const unsigned char *)s->name + i, s->len - i, &cp);
    if (!len || cp == 0) memcpy(b + k, "\xef\xbf\xbd", 3), k += 3;
    else memcpy(b + k, s->name + i, (size_t)len), k += (size_t)len;
    i += len ? (size_t)len : 1;
  }
  snprintf(b + k, cap - k, "%s%s", i < s->len ? "\xe2\x80\xa6" : "", suffix);
}

static void add_curve(Panel *p, const Series *s, const char *cls, const char *color, double width,
                      const char *dash, bool markers, const char *label) {
  if (!s->n) return;
  Curve *c = &p->c[p->nc++];
  c->s = s, c->cls = cls, c->color = color, c->width = width, c->dash = dash, c->markers = markers;
  snprintf(c->label, sizeof c->label, "%s", label);
}

static bool series_range(const Panel *p, double *lo, double *hi) {
  bool any = false;
  for (int i = 0; i < p->nc; i++)
    for (size_t j = 0; j < p->c[i].s->n; j++) {
      double y = p->c[i].s->p[j].y;
      if (!drawable(p, y)) continue;
      if (!any || y < *lo) *lo = y;
      if (!any || y > *hi) *hi = y;
      any = true;
    }
  return any;
}

static void polyline(FILE *o, const Plot *P, const Panel *p, const Curve *c) {
  /* Screen points first; then, per half-pixel column, only the first, lowest,
   * highest and last points are kept: a long run's per-step loss draws the
   * same and stays small. */
  const Series *s = c->s;
  double *xy = P->xy;
  size_t m = 0;
  for (size_t i = 0; i < s->n; i++)
    if (drawable(p, s->p[i].y)) {
      xy[2 * m] = px(P, xof(P, s->p[i].step));
      xy[2 * m + 1] = py(p, s->p[i].y);
      m++;
    }
  fprintf(o, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%g\"%s%s%s stroke-linejoin=\"round\" points=\"",
          c->cls, c->color, c->width, c->dash ? " stroke-dasharray=\"" : "", c->dash ? c->dash : "", c->dash ? "\"" : "");
  bool first = true;
  for (size_t i = 0; i < m;) {
    double col = floor(xy[2 * i] * 2);
    size_t j = i, lo = i, hi = i;
    while (j < m && floor(xy[2 * j] * 2) == col) {
      if (xy[2 * j + 1] < xy[2 * lo + 1]) lo = j;
      if (xy[2 * j + 1] > xy[2 * hi + 1]) hi = j;
      j++;
    }
    size_t keep[4] = {i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1};
    for (int k = 0; k < 4; k++) {
      if (k > 0 && keep[k] == keep[k - 1]) continue;
      fprintf(o, "%s%.2f,%.2f", first ? "" : " ", xy[2 * keep[k]], xy[2 * keep[k] + 1]);
      first = false;
    }
    i = j;
  }
  fputs("\"/>\n", o);
  if (c->markers && m <= MAX_MARKERS)
    for (size_t i = 0; i < m; i++)
      fprintf(o, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", xy[2 * i], xy[2 * i + 1], c->color);
}

static void draw_panel(FILE *o, const Plot *P, const Panel *p, bool first_panel) {
  const Log *g = P->g;
  double top = p->top, bottom = top + PLOT_H, right = PLOT_L + PLOT_W;
  char b[64];
  fprintf(o, "<g class=\"panel\" id=\"%s\">\n", p->id);
  /* Grid. */
  fputs("<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n", o);
  for (int i = 0; i < P->x.n; i++)
    fprintf(o, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", px(P, P->x.tick[i]), top,
            px(P, P->x.tick[i]), bottom);
  for (int i = 0; i < p->y.n; i++)
    fprintf(o, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", PLOT_L, py(p, p->y.tick[i]), right,
            py(p, p->y.tick[i]));
  fputs("</g>\n", o);
  /* Epoch ends, dashed; labelled in the first panel where there is room. */
  if ((P->xkind == PLOT_X_STEP || P->xkind == PLOT_X_SAMPLES) && g->epochs.n && g->epochs.n <= MAX_EPOCH_LINES) {
    fputs("<g class=\"epochs\" stroke=\"#b0b0b0\" stroke-width=\"1\" stroke-dasharray=\"4 3\">\n", o);
    for (size_t i = 0; i < g->epochs.n; i++) {
      double x = px(P, xof(P, g->epochs.p[i].step));
      fprintf(o, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, top, x, bottom);
    }
    fputs("</g>\n", o);
    if (first_panel) {
      fputs("<g class=\"epoch-labels\" fill=\"#808080\" font-size=\"10\">\n", o);
      /* A label is about 44 units wide; it sits right of its line, or left
       * of it at the right edge, and is left out where it would overlap. */
      double free_from = -1e9;
      for (size_t i = 0; i < g->epochs.n; i++) {
        double x = px(P, xof(P, g->epochs.p[i].step));
        bool end = x + 48 > right;
        double left = end ? x - 47 : x + 3;
        if (left < free_from) continue;
        free_from = left + 50;
        fprintf(o, "<text x=\"%.2f\" y=\"%.2f\"%s>epoch %.9g</text>\n", end ? x - 3 : x + 3, top + 12,
                end ? " text-anchor=\"end\"" : "", g->epochs.p[i].y);
      }
      fputs("</g>\n", o);
    }
  }
  fprintf(o, "<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"#444444\"/>\n",
          PLOT_L, top, PLOT_W, PLOT_H);
  /* Tick labels and axis titles. */
  fputs("<g class=\"y-ticks\" text-anchor=\"end\" fill=\"#333333\">\n", o);
  for (int i = 0; i < p->y.n; i++) {
    tick_label(b, sizeof b, &p->y, p->y.tick[i]);
    fprintf(o, "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n", PLOT_L - 6, py(p, p->y.tick[i]) + 4, b);
  }
  fputs("</g>\n<g class=\"x-ticks\" text-anchor=\"middle\" fill=\"#333333\">\n", o);
  for (int i = 0; i < P->x.n; i++) {
    tick_label(b, sizeof b, &P->x, P->x.tick[i]);
    fprintf(o, "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n", px(P, P->x.tick[i]), bottom + 16, b);
  }
  fputs("</g>\n", o);
  fprintf(o, "<text class=\"x-label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n",
          PLOT_L + PLOT_W / 2, bottom + 36, plot_axis_names[P->xkind]);
  fprintf(o, "<text class=\"y-label\" transform=\"translate(20 %.2f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">%s%s</text>\n",
          top + PLOT_H / 2, p->ylabel, p->y.log ? " (log scale)" : "");
  /* Curves, first drawn lowest. */
  for (int i = 0; i < p->nc; i++) {
    const Curve *c = &p->c[i];
    fputs("<g class=\"curve\"><title>", o);
    xml_str(o, c->label);
    fputs("</title>\n", o);
    polyline(o, P, p, c);
    fputs("</g>\n", o);
  }
  /* Legend, beside the plot. */
  fputs("<g class=\"legend\">\n", o);
  for (int i = 0; i < p->nc; i++) {
    const Curve *c = &p->c[i];
    double y = top + 10 + 20 * i;
    fprintf(o, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%g\"%s%s%s/>\n",
            LEGEND_X, y, LEGEND_X + 30, y, c->color, c->width, c->dash ? " stroke-dasharray=\"" : "",
            c->dash ? c->dash : "", c->dash ? "\"" : "");
    if (c->markers)
      fprintf(o, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", LEGEND_X + 15, y, c->color);
    fprintf(o, "<text x=\"%.2f\" y=\"%.2f\">", LEGEND_X + 38, y + 4);
    xml_str(o, c->label);
    fputs("</text>\n", o);
  }
  fputs("</g>\n</g>\n", o);
}

static void append(char *b, size_t cap, size_t *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *b, size_t cap, size_t *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b + *k, cap - *k, fmt, ap);
  va_end(ap);
  *k = n < 0 ? *k : *k + (size_t)n < cap ? *k + (size_t)n : cap - 1;
}

/* "epoch 3, step 1407 · test: loss 0.412, accuracy 85.30%": where the run
 * got to, from the last points; splits while the line stays short. */
static void subtitle(char *b, size_t cap, const Log *g, bool no_accuracy) {
  size_t k = 0;
  b[0] = 0;
  if (g->has_epoch) append(b, cap, &k, "epoch %.9g, ", g->last_epoch);
  append(b, cap, &k, "step %.9g", g->max_step);
  for (int i = 0; i < g->nsplits; i++) {
    const Split *s = &g->split[i];
    char name[96], part[200];
    size_t pk = 0;
    split_label(name, sizeof name, s, "");
    append(part, sizeof part, &pk, " \xc2\xb7 %s:", name);
    if (s->loss.n) append(part, sizeof part, &pk, " loss %.4g", s->loss.p[s->loss.n - 1].y);
    if (s->acc.n) {
      double a = s->acc.p[s->acc.n - 1].y;
      if (a >= 0 && a <= 1) append(part, sizeof part, &pk, "%s accuracy %.2f%%", s->loss.n ? "," : "", a * 100);
      else append(part, sizeof part, &pk, "%s accuracy %.4g", s->loss.n ? "," : "", a);
    }
    if (k + pk > 110) break;
    append(b, cap, &k, "%s", part);
  }
  if (no_accuracy) append(b, cap, &k, " \xc2\xb7 no accuracy in this log");
}

/* The knots of x axis k: samples seen, epochs finished or lr, by step;
 * an error naming what the log lacks when there are none. */
static const Series *knots_of(const Log *g, PlotAxis k) {
  static const char *const lacks[] = {"", "no step line has \"samples\"", "no epoch line has \"epoch\" and \"step\"",
                                      "no step line has \"lr\""};
  const Series *s = k == PLOT_X_SAMPLES ? &g->samples : k == PLOT_X_EPOCH ? &g->epochs : &g->lrs;
  if (!s->n) diag_error(NULL, SPAN_NONE, "%s: --x-axis %s: %s", g->name, plot_axis_names[k], lacks[k]);
  return s->n ? s : NULL;
}

static bool render(const Log *g, const PlotOpts *op) {
  Plot P = {.g = g, .xkind = op->x, .log_y = op->log_y};
  bool ok = false;
  /* The x axis. */
  if (op->x != PLOT_X_STEP) {
    const Series *k = knots_of(g, op->x);
    if (!k) return false;
    /* At step 0 nothing is seen and no epoch is done. */
    if (k->p[0].step > 0 && op->x != PLOT_X_LR) series_add(&P.knots, 0, 0);
    for (size_t i = 0; i < k->n; i++) series_add(&P.knots, k->p[i].step, k->p[i].y);
  }
  /* The panels and their curves; a panel without curves is left out. */
  Panel *lp = &P.p[0], *ap = &P.p[1];
  lp->id = "loss", lp->ylabel = "loss", lp->is_loss = true;
  add_curve(lp, &g->loss, "train-loss-step", TRAIN_LIGHT, 1, NULL, false, "train loss (per step)");
  add_curve(lp, &g->smooth, "train-loss-smooth", TRAIN_COLOR, 2.5, NULL, false, "train loss (smoothed)");
  add_curve(lp, &g->train_loss, "train-loss-epoch", TRAIN_COLOR, 1.5, "5 3", true, "train loss (epoch)");
  for (int i = 0; i < g->nsplits; i++) {
    char label[96];
    split_label(label, sizeof label, &g->split[i], " loss");
    add_curve(lp, &g->split[i].loss, "eval-loss", split_colors[i], 2, NULL, true, label);
  }
  ap->id = "accuracy", ap->ylabel = "accuracy";
  add_curve(ap, &g->train_acc, "train-accuracy", TRAIN_COLOR, 2, NULL, true, "train accuracy");
  for (int i = 0; i < g->nsplits; i++) {
    char label[96];
    split_label(label, sizeof label, &g->split[i], " accuracy");
    add_curve(ap, &g->split[i].acc, "eval-accuracy", split_colors[i], 2, NULL, true, label);
  }
  bool no_accuracy = ap->nc == 0;
  P.np = (lp->nc > 0) + (ap->nc > 0);
  if (!lp->nc) P.p[0] = P.p[1];
  if (!P.np) {
    diag_error(NULL, SPAN_NONE, "%s: no loss or accuracy to plot", g->name);
    goto done;
  }
  /* Axes: x shared by the panels and starting at 0 (lr: logarithmic, over
   * the positive lrs); y per panel. */
  double xlo = op->x == PLOT_X_LR ? INFINITY : 0, xhi = op->x == PLOT_X_LR ? 0 : 0;
  for (int i = 0; i < P.np; i++)
    for (int j = 0; j < P.p[i].nc; j++)
      for (size_t k = 0; k < P.p[i].c[j].s->n; k++) {
        double x = xof(&P, P.p[i].c[j].s->p[k].step);
        if (op->x != PLOT_X_LR || x > 0) xlo = fmin(xlo, x), xhi = fmax(xhi, x);
      }
  if (op->x == PLOT_X_LR) axis_log(&P.x, isfinite(xlo) ? xlo : 1, isfinite(xlo) ? xhi : 1);
  else {
    for (size_t k = 0; k < g->epochs.n; k++) xhi = fmax(xhi, xof(&P, g->epochs.p[k].step));
    axis_linear(&P.x, xlo, xhi, 8, true);
  }
  for (int i = 0; i < P.np; i++) {
    Panel *p = &P.p[i];
    p->top = FIRST_TOP + PANEL_PITCH * i;
    p->y.log = op->log_y && p->is_loss;
    double lo = 0, hi = 0;
    if (p->y.log) {
      size_t skipped = 0;
      for (int j = 0; j < p->nc; j++)
        for (size_t k = 0; k < p->c[j].s->n; k++) skipped += p->c[j].s->p[k].y <= 0;
      if (!series_range(p, &lo, &hi)) {
        diag_warn(NULL, SPAN_NONE, "%s: --log-y: no loss is positive; the loss axis stays linear", g->name);
        p->y.log = false;
      } else if (skipped) {
        diag_warn(NULL, SPAN_NONE, "%s: --log-y: %zu loss value%s <= 0 not drawn", g->name, skipped,
                  skipped == 1 ? "" : "s");
      }
    }
    series_range(p, &lo, &hi);
    if (p->y.log) {
      axis_log(&p->y, lo, hi);
    } else {
      axis_linear(&p->y, lo, hi, 6, false);
      p->y.percent = !p->is_loss && lo >= 0 && hi <= 1;
    }
  }
  size_t most = 0;
  for (int i = 0; i < P.np; i++)
    for (int j = 0; j < P.p[i].nc; j++) most = P.p[i].c[j].s->n > most ? P.p[i].c[j].s->n : most;
  P.xy = mem_calloc(2 * most, sizeof *P.xy);
  /* Everything checked and allocated: write. */
  OutFile out;
  if (!file_out_open(&out, op->out)) goto done;
  FILE *o = out.f;
  double height = FIRST_TOP + PANEL_PITCH * P.np - 10;
  fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n",
          WIDTH, height, WIDTH, height);
  fprintf(o, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", WIDTH, height);
  const char *slash = strrchr(g->name, '/');
  const char *title = slash && slash[1] ? slash + 1 : g->name;
  fprintf(o, "<text class=\"title\" x=\"%.2f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">",
          PLOT_L + PLOT_W / 2);
  xml_str(o, title);
  char sub[512];
  if (op->note) snprintf(sub, sizeof sub, "%s", op->note);
  else subtitle(sub, sizeof sub, g, no_accuracy);
  fprintf(o, "</text>\n<text class=\"subtitle\" x=\"%.2f\" y=\"48\" text-anchor=\"middle\" fill=\"#555555\">",
          PLOT_L + PLOT_W / 2);
  xml_str(o, sub);
  fputs("</text>\n", o);
  for (int i = 0; i < P.np; i++) draw_panel(o, &P, &P.p[i], i == 0);
  fputs("</svg>\n", o);
  ok = file_out_close(&out);
done:
  mem_free(P.xy);
  mem_free(P.knots.p);
  return ok;
}

bool plot_log(FILE *f, const char *name, const PlotOpts *op) {
  Log g = {.name = name};
  bool ok = read_log(&g, f) && render(&g, op);
  log_free(&g);
  return ok;
}

bool plot_stream(FILE *f, const char *name, const char *out, const char *note, bool log_y) {
  return plot_log(f, name, &(PlotOpts){.out = out, .note = note, .log_y = log_y, .x = PLOT_X_LR});
}
