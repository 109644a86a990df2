/* checkpointverb.c — `netrun checkpoint [--format text|json] PATH`: a
 * checkpoint (io/checkpoint.h) described, as a listing or as one JSON
 * document holding every value. */
#include "cli/cmd.h"
#include "cli/option.h"
#include "io/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t tensor_bytes(const Tensor *t) { return (uint64_t)t->numel * dtype_size(t->dtype); }

static void shape_text(const Tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < t->rank && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", t->shape[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* A one-line summary of t's elements. */
static void summarize(const Tensor *t, char *buf, size_t n) {
  if (t->numel == 0) {
    snprintf(buf, n, "empty");
    return;
  }
  if (t->dtype == DT_BOOL) {
    int64_t on = 0;
    for (int64_t i = 0; i < t->numel; i++) on += tensor_bool(t)[i] != 0;
    if (t->numel == 1) snprintf(buf, n, "value %s", on ? "true" : "false");
    else snprintf(buf, n, "true %" PRId64 " of %" PRId64, on, t->numel);
    return;
  }
  if (t->dtype == DT_I64) {
    const int64_t *x = tensor_i64(t);
    int64_t lo = x[0], hi = x[0];
    for (int64_t i = 1; i < t->numel; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    if (t->numel == 1) snprintf(buf, n, "value %" PRId64, lo);
    else snprintf(buf, n, "min %" PRId64 "  max %" PRId64, lo, hi);
    return;
  }
  if (t->numel == 1) {
    snprintf(buf, n, t->dtype == DT_F64 ? "value %.17g" : "value %.9g", tensor_get(t, 0));
    return;
  }
  /* Mean and standard deviation (population) of the finite elements;
   * non-finite ones are counted apart. */
  double sum = 0, lo = (double)INFINITY, hi = -(double)INFINITY;
  int64_t finite = 0;
  for (int64_t i = 0; i < t->numel; i++) {
    double v = tensor_get(t, i);
    if (isfinite(v)) sum += v, finite++, lo = fmin(lo, v), hi = fmax(hi, v);
  }
  size_t k = 0;
  if (finite) {
    double mean = sum / (double)finite, ss = 0;
    for (int64_t i = 0; i < t->numel; i++) {
      double v = tensor_get(t, i);
      if (isfinite(v)) ss += (v - mean) * (v - mean);
    }
    k = (size_t)snprintf(buf, n, "mean %.6g  std %.6g  min %.6g  max %.6g", mean, sqrt(ss / (double)finite), lo,
                         hi);
  }
  if (finite < t->numel && k < n)
    snprintf(buf + k, n - k, "%s%" PRId64 " non-finite", k ? "  " : "", t->numel - finite);
}

/* Columns s takes on a terminal: its UTF-8 characters. */
static int text_width(const char *s) {
  int w = 0;
  for (; *s; s++) w += ((unsigned char)*s & 0xc0) != 0x80;
  return w;
}

/* Whether tensor i is a script's state (marked by a CKPT_STATE_MARK
 * setting), not a parameter or optimizer state. */
static bool state_marked(const Checkpoint *c, const char *name) {
  char mark[CKPT_MAX_NAME + sizeof CKPT_STATE_MARK];
  snprintf(mark, sizeof mark, "%s%s", CKPT_STATE_MARK, name);
  return ckpt_get(c, mark) != NULL;
}

static bool is_state(const Checkpoint *c, int i) { return state_marked(c, c->tensors[i].name); }

/* The listing: the header, the settings, then a tensor a line (with a
 * column that says "state" when the checkpoint holds any). */
static void describe(const char *path, const Checkpoint *c) {
  printf("checkpoint: %s\n", path);
  printf("format version: %" PRIu32 "\n", c->version);
  printf("program hash: %016" PRIx64 "\n", c->program_hash);
  printf("epoch: %" PRIu64 "\n", c->epoch);
  printf("step: %" PRIu64 "\n", c->step);
  printf("samples seen: %" PRIu64 "\n", c->samples);
  printf("rng state: %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n", c->rng.s[0], c->rng.s[1],
         c->rng.s[2], c->rng.s[3]);
  printf("settings: %d\n", c->nsettings);
  for (int i = 0; i < c->nsettings; i++)
    printf("  %s =%s%s\n", c->settings[i].key, c->settings[i].value[0] ? " " : "", c->settings[i].value);
  uint64_t elems = 0, bytes = 0;
  int wname = 0, wshape = 0;
  char shape[SHAPE_MAX_RANK * 22 + 3], summary[200];
  for (int i = 0; i < c->ntensors; i++) {
    const Tensor *t = c->tensors[i].t;
    elems += (uint64_t)t->numel;
    bytes += tensor_bytes(t);
    int len = text_width(c->tensors[i].name);
    wname = len > wname ? len : wname;
    shape_text(t, shape, sizeof shape);
    len = (int)strlen(shape);
    wshape = len > wshape ? len : wshape;
  }
  bool any_state = false;
  for (int i = 0; i < c->ntensors; i++) any_state |= is_state(c, i);
  printf("tensors: %d (%" PRIu64 " elements, %" PRIu64 " bytes)\n", c->ntensors, elems, bytes);
  for (int i = 0; i < c->ntensors; i++) {
    const Tensor *t = c->tensors[i].t;
    shape_text(t, shape, sizeof shape);
    summarize(t, summary, sizeof summary);
    printf("  %s%*s  %-4s  %-*s  %s%s\n", c->tensors[i].name, wname - text_width(c->tensors[i].name), "",
           dtype_name(t->dtype), wshape, shape, !any_state ? "" : is_state(c, i) ? "state  " : "       ", summary);
  }
}

/* ---- netrun checkpoint --format json ---------------------------------------------- */

/* What a tensor of the checkpoint is, by its name: "optimizer" for the
 * optimizer's values (a parameter's name, '@', what it is: W1@MOMENT1,
 * and the optimizer's own, @beta1_pow), "state" for a script's state
 * (marked by its CKPT_STATE_MARK setting), else "param".  The one place that
 * decides it. */
static const char *value_kind(const Checkpoint *c, const char *name) {
  return strchr(name, '@') ? "optimizer" : state_marked(c, name) ? "state" : "param";
}

/* The length of the valid UTF-8 sequence at s (1-4 bytes), or 0 if the
 * bytes there are not one. */
static int utf8_len(const unsigned char *s) {
  int n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
        : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
      (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
    return 0;   /* overlong, a surrogate, or past U+10FFFF */
  return n;
}

/* s as a JSON string.  A file may hold names and settings that are not
 * UTF-8 (the format asks only for no control characters); a byte that
 * starts no valid sequence is written as U+FFFD, so the document stays
 * valid JSON. */
static void json_text(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n = utf8_len(p);
    if (n == 0) fputs("\\ufffd", f), n = 1;
    else if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
    else fwrite(p, 1, (size_t)n, f);
    p += n;
  }
  fputc('"', f);
}

/* Element i of t as JSON: f32 in nine significant digits (enough to read
 * back the same float), NaN and infinities as the strings "nan", "inf" and
 * "-inf" (JSON has no number for them); i64 exactly; bool as true/false. */
static void json_elem(FILE *f, const Tensor *t, int64_t i) {
  if (t->dtype == DT_I64) {
    fprintf(f, "%" PRId64, tensor_i64(t)[i]);
  } else if (t->dtype == DT_BOOL) {
    fputs(tensor_bool(t)[i] ? "true" : "false", f);
  } else {
    double x = (double)tensor_f32(t)[i];
    if (isnan(x)) fputs("\"nan\"", f);
    else if (isinf(x)) fputs(x < 0 ? "\"-inf\"" : "\"inf\"", f);
    else fprintf(f, "%.9g", x);
  }
}

static void json_value(FILE *f, const Checkpoint *c, const CkptTensor *v) {
  fputs("  {\"name\": ", f);
  json_text(f, v->name);
  fprintf(f, ", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": [", value_kind(c, v->name),
          dtype_name(v->t->dtype));
  for (int d = 0; d < v->t->rank; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", v->t->shape[d]);
  fputs("], \"data\": [", f);
  for (int64_t i = 0; i < v->t->numel; i++) {
    if (i) fputs(", ", f);
    json_elem(f, v->t, i);
  }
  fputs("]}", f);
}

/* The whole checkpoint as one JSON document: the fields the listing
 * shows, then every tensor in full (netrun(1) documents the layout). */
static void describe_json(FILE *f, const char *path, const Checkpoint *c) {
  uint64_t elems = 0, bytes = 0;
  for (int i = 0; i < c->ntensors; i++) elems += (uint64_t)c->tensors[i].t->numel, bytes += tensor_bytes(c->tensors[i].t);
  fputs("{\"checkpoint\": ", f);
  json_text(f, path);
  fprintf(f, ",\n \"format_version\": %" PRIu32 ", \"program_hash\": \"%016" PRIx64 "\",\n", c->version,
          c->program_hash);
  fprintf(f, " \"epoch\": %" PRIu64 ", \"step\": %" PRIu64 ", \"samples_seen\": %" PRIu64 ",\n", c->epoch, c->step,
          c->samples);
  fprintf(f, " \"rng_state\": [\"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\", \"%016" PRIx64 "\"],\n",
          c->rng.s[0], c->rng.s[1], c->rng.s[2], c->rng.s[3]);
  fputs(" \"settings\": {", f);
  for (int i = 0; i < c->nsettings; i++) {
    fputs(i ? ", " : "", f);
    json_text(f, c->settings[i].key);
    fputs(": ", f);
    json_text(f, c->settings[i].value);
  }
  fprintf(f, "},\n \"elements\": %" PRIu64 ", \"bytes\": %" PRIu64 ",\n \"values\": [", elems, bytes);
  for (int i = 0; i < c->ntensors; i++) {
    fputs(i ? ",\n" : "\n", f);
    json_value(f, c, &c->tensors[i]);
  }
  fputs(c->ntensors ? "\n ]}\n" : "]}\n", f);
}

static const Option checkpoint_options[] = {
    {"--format", OPTION_VALUE, "FMT", "a value", 1, 0},
    {NULL, 0, NULL, NULL, 0, 0},
};

int cmd_checkpoint(int argc, char **argv) {
  const char *path = NULL, *format = "text";
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){checkpoint_options, NULL}, "");
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (id == OPTION_ARG && path) return diag_usage("%s takes one PATH", argv[0]);
    if (id == OPTION_ARG) path = p.value;
    else if (strcmp(p.value, "text") == 0 || strcmp(p.value, "json") == 0) format = p.value;
    else return diag_usage("unknown format '%s' (expected text or json)", p.value);
  }
  if (!path) return diag_usage("%s needs a PATH", argv[0]);
  Checkpoint c;
  char err[1400];
  if (!ckpt_read(path, &c, err, sizeof err)) {
    diag_error(NULL, SPAN_NONE, "%s", err);
    return EXIT_SCRIPT;
  }
  if (strcmp(format, "json") == 0) describe_json(stdout, path, &c);
  else describe(path, &c);
  ckpt_free(&c);
  return fflush(stdout) == 0 ? 0 : EXIT_SCRIPT;
}
