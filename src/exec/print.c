/* print.c — tensor values as text (print.h): a port of the parts of
 * NumPy's arrayprint.py that str() uses with the default options
 * (FloatingFormat with floatmode='maxprec', IntegerFormat, BoolFormat and
 * _formatArray's wrapping and summarizing).
 *
 * Float digits: a float32's shortest round-trip digits come from printf's
 * %.*e at increasing precision, read back with strtof; when they need more
 * than `precision` digits after the point, printf rounds the exact value at
 * the cutoff (half to even, as NumPy's Dragon4 does).  An f64's digits are
 * found the same way, read back with strtod, and show up to 17
 * significant digits by default (print_precision). */
#include "exec/print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRINT_MAX_PRECISION 40

PrintOptions print_options(int precision) {
  if (precision < 0) precision = PRINT_DEFAULT_PRECISION;
  if (precision > PRINT_MAX_PRECISION) precision = PRINT_MAX_PRECISION;
  return (PrintOptions){.precision = precision, .threshold = 1000, .edgeitems = 3, .linewidth = 75};
}

/* ---- a growing string --------------------------------------------------------- */

typedef struct Buf {
  char *p;
  size_t n, cap;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + n + 1) cap *= 2;
    b->p = mem_alloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_repeat(Buf *b, char ch, int n) {
  char chunk[64];
  memset(chunk, ch, sizeof chunk);
  for (; n > 0; n -= (int)sizeof chunk)
    buf_put(b, chunk, n < (int)sizeof chunk ? (size_t)n : sizeof chunk);
}

/* ---- float digits ------------------------------------------------------------------ */

/* A finite |v| as decimal digits: |v| = d[0].d[1]..d[nd-1] x 10^e. */
typedef struct Dec {
  char d[PRINT_MAX_PRECISION + 16];
  int nd, e;
} Dec;

/* Reads printf's "%.*e" text of a non-negative number. */
static void dec_parse(const char *s, Dec *x) {
  x->nd = 0;
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9' && x->nd < (int)sizeof x->d - 1) x->d[x->nd++] = *s;
  x->e = *s == 'e' ? atoi(s + 1) : 0;
  while (x->nd > 1 && x->d[x->nd - 1] == '0') x->nd--;   /* trailing zeros say nothing */
  x->d[x->nd] = '\0';
}

/* The fewest significant digits that read back as v (a float32, or a
 * float64 if dbl). */
static void dec_shortest(double v, bool dbl, Dec *x) {
  char s[64];
  double a = fabs(v);
  for (int p = 0; p < (dbl ? 17 : 9); p++) {
    snprintf(s, sizeof s, "%.*e", p, a);
    if (dbl ? strtod(s, NULL) == a : strtof(s, NULL) == (float)a) break;
  }
  dec_parse(s, x);
}

/* v's mantissa and exponent, with at most `prec` digits after the point. */
static void dec_scientific(double v, bool dbl, int prec, Dec *x) {
  dec_shortest(v, dbl, x);
  if (x->nd - 1 > prec) {
    char s[PRINT_MAX_PRECISION + 16];
    snprintf(s, sizeof s, "%.*e", prec, fabs((double)v));
    dec_parse(s, x);
  }
}

/* v's integer part (with its sign) and fraction digits (no trailing zeros),
 * with at most `prec` digits after the point.  A whole number whose shortest
 * digits stop before the point (35340512 is "3534051e1") shows its exact
 * digits with `exact`, as NumPy's arrays do, else zeros ("35340510.0", as
 * its scalars do). */
static void positional(double v, bool dbl, int prec, bool exact, char *ip, char *fp) {
  Dec x;
  dec_shortest(v, dbl, &x);
  char *o = ip;
  if (signbit(v)) *o++ = '-';
  int frac = x.nd - 1 - x.e;
  if (frac > prec) {
    char s[PRINT_MAX_PRECISION + 64];
    snprintf(s, sizeof s, "%.*f", prec, fabs((double)v));
    char *dot = strchr(s, '.');
    if (dot) *dot = '\0';
    strcpy(o, s);
    strcpy(fp, dot ? dot + 1 : "");
  } else if (exact && x.nd <= x.e) {
    snprintf(o, 48, "%.0f", fabs((double)v));
    fp[0] = '\0';
  } else if (x.e >= 0) {
    for (int i = 0; i <= x.e; i++) *o++ = i < x.nd ? x.d[i] : '0';
    *o = '\0';
    strcpy(fp, x.nd > x.e + 1 ? x.d + x.e + 1 : "");
  } else {
    strcpy(o, "0");
    int z = -x.e - 1;
    memset(fp, '0', (size_t)z);
    strcpy(fp + z, x.d);
  }
  size_t n = strlen(fp);
  while (n > 0 && fp[n - 1] == '0') fp[--n] = '\0';
}

static int exp_digits(int e) {
  int n = 0;
  for (e = abs(e); e > 0; e /= 10) n++;
  return n < 2 ? 2 : n;
}

/* ---- the element formats ------------------------------------------------------ */

typedef struct Fmt {
  const Tensor *t;
  const PrintOptions *o;
  bool summarize;
  int64_t stride[SHAPE_MAX_RANK];
  int width;                       /* ints */
  bool exp;                        /* floats: exponent form */
  int prec;                        /* floats: digits after the point, at most */
  int pad_left, pad_right, exp_size;
  bool dbl;                        /* f64 elements */
} Fmt;

/* Calls fn on every element that will show (all of them unless
 * summarized), by element offset. */
static void each_shown(Fmt *f, void (*fn)(Fmt *, int64_t, void *), void *arg) {
  const Tensor *t = f->t;
  int e = f->o->edgeitems;
  int64_t idx[SHAPE_MAX_RANK] = {0};
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) off += idx[d] * f->stride[d];
    fn(f, off, arg);
    int d = t->rank - 1;
    for (; d >= 0; d--) {
      int64_t n = t->shape[d];
      idx[d]++;
      if (f->summarize && n > 2 * e && idx[d] == e) idx[d] = n - e;
      if (idx[d] < n) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

typedef struct FloatStats {
  int64_t finite, nonfinite;
  bool neginf, nonzero;
  double max_val, min_val;
  int pad_left, pad_right, prec_e, exp_size;
} FloatStats;

static void float_range(Fmt *f, int64_t off, void *arg) {
  FloatStats *s = arg;
  double v = tensor_get(f->t, off);
  if (!isfinite(v)) {
    s->nonfinite++;
    if (isinf(v) && v < 0) s->neginf = true;
    return;
  }
  s->finite++;
  double a = fabs((double)v);
  if (a == 0) return;
  if (!s->nonzero || a > s->max_val) s->max_val = a;
  if (!s->nonzero || a < s->min_val) s->min_val = a;
  s->nonzero = true;
}

static void float_widths(Fmt *f, int64_t off, void *arg) {
  FloatStats *s = arg;
  double v = tensor_get(f->t, off);
  if (!isfinite(v)) return;
  if (f->exp) {
    Dec x;
    dec_scientific(v, f->dbl, f->prec, &x);
    int il = signbit(v) ? 2 : 1;
    if (il > s->pad_left) s->pad_left = il;
    if (x.nd - 1 > s->prec_e) s->prec_e = x.nd - 1;
    if (exp_digits(x.e) > s->exp_size) s->exp_size = exp_digits(x.e);
  } else {
    char ip[64], fp[PRINT_MAX_PRECISION + 64];
    positional(v, f->dbl, f->prec, true, ip, fp);
    if ((int)strlen(ip) > s->pad_left) s->pad_left = (int)strlen(ip);
    if ((int)strlen(fp) > s->pad_right) s->pad_right = (int)strlen(fp);
  }
}

/* FloatingFormat.fillFormat. */
static void float_fill(Fmt *f) {
  FloatStats s = {0};
  each_shown(f, float_range, &s);
  f->exp = s.nonzero && (s.max_val >= 1e8 || s.min_val < 1e-4 || s.max_val / s.min_val > 1000);
  if (s.finite) {
    each_shown(f, float_widths, &s);
    if (f->exp) {
      f->prec = s.prec_e;
      f->exp_size = s.exp_size;
      f->pad_left = s.pad_left;
      f->pad_right = s.exp_size + 2 + s.prec_e;
    } else {
      f->pad_left = s.pad_left;
      f->pad_right = s.pad_right;
    }
  }
  if (s.nonfinite) {
    int offset = f->pad_right + 1;
    if (3 - offset > f->pad_left) f->pad_left = 3 - offset;
    if (3 + s.neginf - offset > f->pad_left) f->pad_left = 3 + s.neginf - offset;
  }
}

static void int_width(Fmt *f, int64_t off, void *arg) {
  (void)arg;
  char s[32];
  int n = snprintf(s, sizeof s, "%" PRId64, tensor_i64(f->t)[off]);
  if (n > f->width) f->width = n;
}

static void format_float(const Fmt *f, double v, Buf *b) {
  if (!isfinite(v)) {
    const char *s = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
    buf_repeat(b, ' ', f->pad_left + f->pad_right + 1 - (int)strlen(s));
    buf_puts(b, s);
    return;
  }
  if (f->exp) {
    /* Every value shows f->prec digits after the point: those past its
     * shortest digits are its exact value's, rounded (NumPy's min_digits),
     * so this is printf's rounding at f->prec. */
    char s[PRINT_MAX_PRECISION + 16];
    snprintf(s, sizeof s, "%.*e", f->prec, fabs(v));
    char *e = strchr(s, 'e');
    int ex = atoi(e + 1);
    *e = '\0';
    buf_repeat(b, ' ', f->pad_left - (signbit(v) ? 2 : 1));
    if (signbit(v)) buf_puts(b, "-");
    buf_puts(b, s);
    if (f->prec == 0) buf_puts(b, ".");
    char es[16];
    snprintf(es, sizeof es, "e%c%0*d", ex < 0 ? '-' : '+', f->exp_size, abs(ex));
    buf_puts(b, es);
    return;
  }
  char ip[64], fp[PRINT_MAX_PRECISION + 64];
  positional(v, f->dbl, f->prec, true, ip, fp);
  buf_repeat(b, ' ', f->pad_left - (int)strlen(ip));
  buf_puts(b, ip);
  buf_puts(b, ".");
  buf_puts(b, fp);
  buf_repeat(b, ' ', f->pad_right - (int)strlen(fp));
}

static void format_elem(const Fmt *f, int64_t off, Buf *b) {
  const Tensor *t = f->t;
  char s[32];
  switch (t->dtype) {
  case DT_F32: format_float(f, tensor_f32(t)[off], b); break;
  case DT_F64: format_float(f, tensor_f64(t)[off], b); break;
  case DT_I64:
    snprintf(s, sizeof s, "%*" PRId64, f->width, tensor_i64(t)[off]);
    buf_puts(b, s);
    break;
  default: buf_puts(b, tensor_bool(t)[off] ? " True" : "False"); break;
  }
}

/* The digits after the point t's floats show at most: the option's, but
 * for f64 PRINT_F64_PRECISION where the option is left at its default:
 * enough for the 17 significant digits of any value from 1e-4 (below it,
 * the exponent form shows them all). */
#define PRINT_F64_PRECISION 24
static int print_precision(const Tensor *t, const PrintOptions *o) {
  return t->dtype == DT_F64 && o->precision == PRINT_DEFAULT_PRECISION ? PRINT_F64_PRECISION : o->precision;
}

/* A 0-d tensor prints like a NumPy scalar: "3.0", "1e-05", "7", "True". */
static void format_scalar(const Tensor *t, const PrintOptions *o, Buf *b) {
  char s[PRINT_MAX_PRECISION + 64];
  if (t->dtype == DT_I64) {
    snprintf(s, sizeof s, "%" PRId64, tensor_i64(t)[0]);
    buf_puts(b, s);
    return;
  }
  if (!dtype_is_float(t->dtype)) {
    buf_puts(b, tensor_bool(t)[0] ? "True" : "False");
    return;
  }
  bool dbl = t->dtype == DT_F64;
  int prec = print_precision(t, o);
  double v = tensor_get(t, 0);
  double a = fabs(v);
  if (!isfinite(v)) {
    buf_puts(b, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
  } else if (a == 0 || (dbl ? a >= 1e-4 && a < 1e16 : a >= (double)1e-4f && a < (double)1e16f)) {
    char ip[64];
    positional(v, dbl, prec, false, ip, s);
    buf_puts(b, ip);
    buf_puts(b, ".");
    buf_puts(b, s[0] ? s : "0");
  } else {
    Dec x;
    dec_scientific(v, dbl, prec, &x);
    if (signbit(v)) buf_puts(b, "-");
    buf_put(b, x.d, 1);
    if (x.nd > 1) {
      buf_puts(b, ".");
      buf_put(b, x.d + 1, (size_t)x.nd - 1);
    }
    snprintf(s, sizeof s, "e%c%02d", x.e < 0 ? '-' : '+', abs(x.e));
    buf_puts(b, s);
  }
}

/* ---- layout: _formatArray ----------------------------------------------------- */

/* Appends word to line, first moving line to s if it would pass `width`
 * (unless the line holds nothing but its indent). */
static void extend_line(Buf *s, Buf *line, const Buf *word, int width, int indent) {
  if ((int)(line->n + word->n) > width && (int)line->n > indent) {
    size_t n = line->n;
    while (n > 0 && line->p[n - 1] == ' ') n--;
    buf_put(s, line->p, n);
    buf_puts(s, "\n");
    line->n = 0;
    buf_repeat(line, ' ', indent);
  }
  buf_put(line, word->p, word->n);
}

/* Appends the sub-tensor at element offset `off` from dimension `axis` on:
 * "[...]", its later lines indented by `indent`, rows fitting `width`. */
static void layout(const Fmt *f, Buf *out, int64_t off, int axis, int indent, int width) {
  const Tensor *t = f->t;
  if (axis == t->rank) {
    format_elem(f, off, out);
    return;
  }
  int left = t->rank - axis, e = f->o->edgeitems;
  int64_t n = t->shape[axis], st = f->stride[axis];
  bool summary = f->summarize && 2 * (int64_t)e < n;
  int64_t lead = summary ? e : 0, trail = summary ? e : n;
  Buf body = {0};
  if (left == 1) {
    int elem_width = width - 1;       /* room for the closing ']' */
    Buf line = {0}, word = {0};
    buf_repeat(&line, ' ', indent);
    for (int64_t i = 0; i < n; i++) {
      if (i >= lead && i < n - trail) {
        if (i == lead) {
          word.n = 0;
          buf_puts(&word, "...");
          extend_line(&body, &line, &word, elem_width, indent);
          buf_puts(&line, " ");
        }
        continue;
      }
      word.n = 0;
      layout(f, &word, off + i * st, axis + 1, indent + 1, width - 1);
      extend_line(&body, &line, &word, elem_width, indent);
      if (i < n - 1) buf_puts(&line, " ");
    }
    buf_put(&body, line.p, line.n);
    mem_free(line.p);
    mem_free(word.p);
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (i >= lead && i < n - trail) {
        if (i == lead) {
          buf_repeat(&body, ' ', indent);
          buf_puts(&body, "...");
          buf_repeat(&body, '\n', left - 1);
        }
        continue;
      }
      buf_repeat(&body, ' ', indent);
      layout(f, &body, off + i * st, axis + 1, indent + 1, width - 1);
      if (i < n - 1) buf_repeat(&body, '\n', left - 1);
    }
  }
  buf_puts(out, "[");
  if (body.n > (size_t)indent) buf_put(out, body.p + indent, body.n - (size_t)indent);
  buf_puts(out, "]");
  mem_free(body.p);
}

char *print_format(const Tensor *t, const PrintOptions *o) {
  Buf b = {0};
  buf_puts(&b, "");
  if (t->rank == 0) {
    format_scalar(t, o, &b);
    return b.p;
  }
  if (t->numel == 0) {
    buf_puts(&b, "[]");
    return b.p;
  }
  Fmt f = {.t = t, .o = o, .summarize = t->numel > o->threshold, .prec = print_precision(t, o),
           .dbl = t->dtype == DT_F64};
  int64_t st = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    f.stride[d] = st;
    st *= t->shape[d];
  }
  if (dtype_is_float(t->dtype)) float_fill(&f);
  else if (t->dtype == DT_I64) each_shown(&f, int_width, NULL);
  layout(&f, &b, 0, 0, 1, o->linewidth);
  return b.p;
}

void print_write(FILE *f, const Tensor *t, int precision) {
  PrintOptions o = print_options(precision);
  char *s = print_format(t, &o);
  fputs(s, f);
  mem_free(s);
}
