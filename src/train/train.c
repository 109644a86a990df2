/* train.c — the train configuration and the training program (train.h).
 * The training loop is in loop.c (trainrun.h lists the trainer's files). */
#include "train/train.h"

#include "ir/names.h"
#include "ir/rewrite.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum Kind { K_STRING, K_NAME, K_NAMES, K_NUMBER, K_NUMBERS, K_INT, K_BOOL } Kind;

/* A key's range (checked for K_INT and K_NUMBER): lo and hi, each
 * included or not; R_IF_SET checks it only when the block sets the key
 * (its default, 0, means "off"). */
enum { R_NONE = 0, R_LO = 1 << 0, R_LO_OPEN = 1 << 1, R_HI = 1 << 2, R_HI_OPEN = 1 << 3, R_IF_SET = 1 << 4 };
#define AT_LEAST(n) (double)(n), 0, R_LO
#define NOT_NEGATIVE 0, 0, R_LO
#define POSITIVE 0, 0, R_LO | R_LO_OPEN
#define UNIT 0, 1, R_LO | R_HI | R_HI_OPEN                       /* [0, 1) */
#define NO_RANGE 0, 0, R_NONE
#define MAX_COUNT (1 << 20)

/* Every key a train block may hold (netrun-lang(5), TRAINING; a test
 * checks the page against this table): its kind, where it goes in the
 * TrainConfig (and for a list, its count), its default (a number, or a
 * string), its range, the TrainOverrides field a command-line option sets
 * (-1: none) with the bit saying a resumed run kept it, and its meaning.
 * A key the table cannot hold alone (label, lr_mult) has a setter. */
typedef struct TrainKey {
  const char *key;
  Kind kind;
  long off, count_off;          /* offsetof into TrainConfig; -1: none */
  double def;                   /* K_INT, K_NUMBER, K_BOOL */
  const char *sdef;             /* K_STRING, K_NAME */
  double lo, hi;
  unsigned range;
  const char *what;             /* the range error's subject (default: the key) */
  long over;                    /* offsetof into TrainOverrides; -1: none */
  unsigned kept;                /* TRAIN_KEPT_* */
  void (*set)(Program *p, const Setting *s, TrainConfig *c);
  const char *doc;
} TrainKey;

static void set_label(Program *p, const Setting *s, TrainConfig *c);
static void set_lr_mult(Program *p, const Setting *s, TrainConfig *c);

#define C(f) (long)offsetof(TrainConfig, f)
#define O(f) (long)offsetof(TrainOverrides, f)
#define NONE -1
static const TrainKey keys[] = {
    {"data", K_STRING, C(data), NONE, 0, NULL, NO_RANGE, NULL, O(data), TRAIN_KEPT_DATA, NULL,
     "the dataset: \"fashion-mnist\", a CSV file, a .npz archive, IMAGES.idx:LABELS.idx, or a folder of class folders of images"},
    {"context", K_INT, C(context), NONE, 0, NULL, AT_LEAST(1) | R_IF_SET, NULL, NONE, 0, NULL,
     "text data: bytes per window; data is then read as text (x, y: i64 [N, context]; the last tenth is \"test\")"},
    {"mean", K_NUMBERS, C(mean), C(nmean), 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "image folders: per-channel means subtracted from the pixels in [0, 1] (default: none)"},
    {"std", K_NUMBERS, C(std), C(nstd), 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "image folders: per-channel standard deviations the pixels are divided by (default: none)"},
    {"flip", K_BOOL, C(flip), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "image folders: mirror each training image left-right with probability 1/2 (default false)"},
    {"crop_pad", K_INT, C(crop_pad), NONE, 0, NULL, 0, MAX_COUNT, R_LO | R_HI, NULL, NONE, 0, NULL,
     "image folders: shift each training image by up to this many pixels, zeros shifted in (default 0)"},
    {"feed", K_NAMES, C(feed), C(nfeed), 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "the inputs the dataset's columns feed, in order (default: the inputs)"},
    {"label", K_NAMES, NONE, NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, set_label,
     "the input holding the labels (default: the last one fed); CSV data: else the label column, or a list of target columns"},
    {"columns", K_NAMES, C(columns), C(ncolumns), 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "CSV data: the columns, by header name, the input reads (default: all but the labels)"},
    {"label_column", K_STRING, C(label_column), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "CSV data: the column holding the labels (default: label, y, or the last)"},
    {"loss", K_NAME, C(loss), NONE, 0, "loss", NO_RANGE, NULL, NONE, 0, NULL, "the scalar to minimize (default: loss)"},
    {"metric", K_NAME, C(metric), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "logits whose argmax (one logit: its sign) is compared with the labels for accuracy"},
    {"optimizer", K_NAME, C(optimizer), NONE, 0, "sgd", NO_RANGE, NULL, O(optimizer), TRAIN_KEPT_OPTIMIZER, NULL,
     "sgd, momentum, adam, adamw or rmsprop (default: sgd)"},
    {"lr", K_NUMBER, C(lr), NONE, 0.01, NULL, POSITIVE, "the learning rate", O(lr), TRAIN_KEPT_LR, NULL,
     "the learning rate (default 0.01)"},
    {"momentum", K_NUMBER, C(momentum), NONE, 0.9, NULL, UNIT, NULL, NONE, 0, NULL, "momentum's factor (default 0.9)"},
    {"nesterov", K_BOOL, C(nesterov), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL, "Nesterov momentum (default false)"},
    {"beta1", K_NUMBER, C(beta1), NONE, 0.9, NULL, UNIT, NULL, NONE, 0, NULL, "Adam's first-moment decay (default 0.9)"},
    {"beta2", K_NUMBER, C(beta2), NONE, 0.999, NULL, UNIT, NULL, NONE, 0, NULL, "Adam's second-moment decay (default 0.999)"},
    {"epsilon", K_NUMBER, C(epsilon), NONE, 1e-8, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "Adam's and RMSprop's epsilon (default 1e-8)"},
    {"rho", K_NUMBER, C(rho), NONE, 0.99, NULL, UNIT, NULL, NONE, 0, NULL,
     "RMSprop's decay of the mean square, PyTorch's alpha (default 0.99)"},
    {"weight_decay", K_NUMBER, C(weight_decay), NONE, 0, NULL, NOT_NEGATIVE, NULL, NONE, 0, NULL,
     "L2 penalty (sgd, momentum) or decoupled decay (adamw) (default 0; adamw 0.01)"},
    {"no_decay", K_NAMES, C(no_decay), C(nno_decay), 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "glob patterns (\"*.b\", \"*.gamma\") over scoped parameter names: those parameters get no weight decay"},
    {"lr_mult", K_NAMES, NONE, NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, set_lr_mult,
     "\"PATTERN: FACTOR\" entries: parameters matching PATTERN step by lr times FACTOR (the first matching entry counts)"},
    {"clip_norm", K_NUMBER, C(clip_norm), NONE, 0, NULL, NOT_NEGATIVE, NULL, NONE, 0, NULL,
     "clip the gradients' global L2 norm to this (default: off)"},
    {"schedule", K_NAME, C(schedule), NONE, 0, "constant", NO_RANGE, NULL, O(schedule), TRAIN_KEPT_SCHEDULE, NULL,
     "the learning-rate schedule: constant, step or cosine (default constant)"},
    {"step_size", K_INT, C(step_size), NONE, 1, NULL, AT_LEAST(1), NULL, NONE, 0, NULL,
     "step schedule: epochs between decays (default 1)"},
    {"gamma", K_NUMBER, C(gamma), NONE, 0.1, NULL, NO_RANGE, NULL, NONE, 0, NULL, "step schedule: the decay factor (default 0.1)"},
    {"warmup", K_NUMBER, C(warmup), NONE, 0, NULL, NOT_NEGATIVE, NULL, NONE, 0, NULL, "epochs of linear warm-up from 0 (default 0)"},
    {"epochs", K_INT, C(epochs), NONE, 1, NULL, AT_LEAST(1), NULL, O(epochs), TRAIN_KEPT_EPOCHS, NULL,
     "passes over the data (default 1)"},
    {"batch", K_INT, C(batch), NONE, 64, NULL, AT_LEAST(1), NULL, O(batch), TRAIN_KEPT_BATCH, NULL,
     "examples per step (default 64)"},
    {"accumulate", K_INT, C(accumulate), NONE, 1, NULL, 1, MAX_COUNT, R_LO | R_HI, NULL, O(accumulate),
     TRAIN_KEPT_ACCUMULATE, NULL, "batches whose gradients, weighted by their examples, make one update (default 1)"},
    {"shuffle", K_BOOL, C(shuffle), NONE, 1, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "reshuffle the data every epoch (default true)"},
    {"eval", K_STRING, C(eval), NONE, 0, "test", NO_RANGE, NULL, NONE, 0, NULL,
     "evaluated after each epoch: \"test\", \"train\", a data file (\"test.npz\"), or \"none\" (default test)"},
    {"val", K_STRING, C(val), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "a validation data file, in the format of data, evaluated after each epoch (default: none)"},
    {"val_split", K_NUMBER, C(val_split), NONE, 0, NULL, 0, 1, R_LO | R_LO_OPEN | R_HI | R_HI_OPEN | R_IF_SET, NULL, NONE, 0,
     NULL, "the fraction of the training data held out for validation, chosen by the seed (default: none)"},
    {"patience", K_INT, C(patience), NONE, 0, NULL, AT_LEAST(1) | R_IF_SET, NULL, NONE, 0, NULL,
     "stop after this many epochs without a better validation (else test) score (default: never)"},
    {"monitor", K_STRING, C(monitor), NONE, 0, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "the score patience and --keep-best watch: \"val_loss\" or \"val_accuracy\" (default: val_accuracy with a metric, else val_loss)"},
    {"log_every", K_INT, C(log_every), NONE, 100, NULL, AT_LEAST(1), NULL, NONE, 0, NULL,
     "steps between progress lines when not on a terminal (default 100)"},
    {"bucket_mb", K_NUMBER, C(bucket_mb), NONE, 25, NULL, 0, MAX_COUNT, R_LO | R_LO_OPEN | R_HI, NULL, NONE, 0, NULL,
     "mpirun: megabytes of gradients averaged over the ranks per allreduce (default 25)"},
    {"overlap", K_BOOL, C(overlap), NONE, 1, NULL, NO_RANGE, NULL, NONE, 0, NULL,
     "mpirun: a bucket's allreduce runs while the rest of the backward does (default true)"},
};
#undef C
#undef O
#undef NONE
#define NKEYS (sizeof keys / sizeof *keys)

const char *train_key(int i, const char **doc) {
  if (i < 0 || (size_t)i >= sizeof keys / sizeof *keys) return NULL;
  *doc = keys[i].doc;
  return keys[i].key;
}

static const char *kind_name(Kind k) {
  switch (k) {
  case K_STRING: return "a string";
  case K_NAME: return "a name";
  case K_NAMES: return "a list of names";
  case K_NUMBER: return "a number";
  case K_NUMBERS: return "a list of numbers";
  case K_INT: return "a whole number";
  case K_BOOL: return "true or false";
  }
  return "?";
}

static bool fits(const Setting *s, Kind k) {
  switch (k) {
  case K_STRING: return s->value.type == ATTR_STRING;
  case K_NAME: return s->value.type == ATTR_STRING;
  case K_NAMES: return s->value.type == ATTR_STRINGS || s->value.type == ATTR_STRING;
  case K_NUMBER: return s->value.type == ATTR_INT || s->value.type == ATTR_FLOAT;
  case K_NUMBERS: return s->value.type == ATTR_FLOATS || s->value.type == ATTR_INT || s->value.type == ATTR_FLOAT;
  case K_INT: return s->value.type == ATTR_INT;
  case K_BOOL: return s->value.type == ATTR_BOOL;
  }
  return false;
}

static double number(const Setting *s) { return s->value.type == ATTR_FLOAT ? s->value.u.f : (double)s->value.u.i; }

/* A setting's list of numbers (or one number) into *v, *n. */
static void numbers(Program *p, const Setting *s, const double **v, int *n) {
  if (s->value.type == ATTR_FLOATS) {
    *v = s->value.u.floats, *n = s->value.n;
    return;
  }
  double *one = arena_alloc(p->arena, sizeof *one);
  *one = number(s);
  *v = one, *n = 1;
}

/* A setting's list of names (or one name) into *v, *n. */
static void names_of(const Setting *s, const char *const **v, int *n) {
  if (s->value.type == ATTR_STRING) *v = &s->value.u.s, *n = 1;
  else *v = s->value.u.strings, *n = s->value.n;
}

static void *field(TrainConfig *c, long off) { return (char *)c + off; }

/* Every key's default. */
static void defaults(TrainConfig *c) {
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < NKEYS; i++) {
    const TrainKey *k = &keys[i];
    if (k->off < 0) continue;
    void *f = field(c, k->off);
    if (k->kind == K_INT) *(int64_t *)f = (int64_t)k->def;
    else if (k->kind == K_NUMBER) *(double *)f = k->def;
    else if (k->kind == K_BOOL) *(bool *)f = k->def != 0;
    else if (k->kind == K_STRING || k->kind == K_NAME) *(const char **)f = k->sdef;
  }
  c->ranks = 1;
}

/* Setting s of key k into c. */
static void set_key(Program *p, const TrainKey *k, const Setting *s, TrainConfig *c) {
  if (k->set) {
    k->set(p, s, c);
    return;
  }
  void *f = field(c, k->off);
  switch (k->kind) {
  case K_STRING:
  case K_NAME: *(const char **)f = s->value.u.s; break;
  case K_NAMES: names_of(s, (const char *const **)f, (int *)field(c, k->count_off)); break;
  case K_NUMBER: *(double *)f = number(s); break;
  case K_NUMBERS: numbers(p, s, (const double **)f, (int *)field(c, k->count_off)); break;
  case K_INT: *(int64_t *)f = s->value.u.i; break;
  case K_BOOL: *(bool *)f = s->value.u.i != 0; break;
  }
}

/* label = NAME (the input, or a CSV column) or [NAMES] (CSV target
 * columns). */
static void set_label(Program *p, const Setting *s, TrainConfig *c) {
  (void)p;
  if (s->value.type == ATTR_STRING) c->label = s->value.u.s;
  else c->labels = s->value.u.strings, c->nlabels = s->value.n;
}

/* Key k's command-line override in o (or the setting a resumed run keeps)
 * into c, said when it replaces the script's setting. */
static void override(Program *p, const TrainKey *k, const TrainOverrides *o, TrainConfig *c, bool quiet) {
  const void *src = (const char *)o + k->over;
  void *f = field(c, k->off);
  char text[64];
  const char *shown = text;
  bool same;
  if (k->kind == K_INT) {
    int64_t v = *(const int64_t *)src;
    if (v < 0) return;
    same = *(int64_t *)f == v, *(int64_t *)f = v;
    snprintf(text, sizeof text, "%lld", (long long)v);
  } else if (k->kind == K_NUMBER) {
    double v = *(const double *)src;
    if (v < 0) return;
    same = *(double *)f == v, *(double *)f = v;
    snprintf(text, sizeof text, "%g", v);
  } else {
    const char *v = *(const char *const *)src;
    if (!v) return;
    same = *(const char **)f && strcmp(*(const char **)f, v) == 0, *(const char **)f = v;
    shown = v;
  }
  if (quiet || !prog_setting(p, "train", k->key)) return;
  if (!(o->kept & k->kept))
    diag_note(p->diag, SPAN_NONE, "--%s %s overrides the script's %s", k->key, shown, k->key);
  else if (!same)
    diag_note(p->diag, SPAN_NONE, "%s %s is kept from %s, the run resumed (the script's is not used)", k->key, shown,
              o->resumed);
}

/* x in the fewest digits that read back as x (1048576, not 1.04858e+06). */
static const char *exact(double x, char *buf, size_t n) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) break;
  }
  return buf;
}

/* Key k's value in c against its range: an error at the setting when it
 * is out of it ("epochs must be at least 1, got 0"). */
static void check_range(Program *p, const TrainKey *k, TrainConfig *c) {
  unsigned r = k->range;
  const Setting *s = prog_setting(p, "train", k->key);
  if (!(r & (R_LO | R_HI)) || (k->kind != K_INT && k->kind != K_NUMBER) || ((r & R_IF_SET) && !s)) return;
  double x = k->kind == K_INT ? (double)*(int64_t *)field(c, k->off) : *(double *)field(c, k->off);
  bool lo = !(r & R_LO) || (r & R_LO_OPEN ? x > k->lo : x >= k->lo);
  bool hi = !(r & R_HI) || (r & R_HI_OPEN ? x < k->hi : x <= k->hi);
  if (isfinite(x) && lo && hi) return;
  char got[32], a[32], b[32];
  if (k->kind == K_INT) snprintf(got, sizeof got, "%lld", (long long)*(int64_t *)field(c, k->off));
  else snprintf(got, sizeof got, "%g", x);
  const char *what = k->what ? k->what : k->key;
  Span at = s ? s->span : SPAN_NONE;
  if (r & R_HI)
    diag_error(p->diag, at, "%s must be in %c%s, %s%c, got %s", what, r & R_LO_OPEN ? '(' : '[',
               exact(k->lo, a, sizeof a), exact(k->hi, b, sizeof b), r & R_HI_OPEN ? ')' : ']', got);
  else if (k->lo == 0)
    diag_error(p->diag, at, "%s must %s, got %s", what, r & R_LO_OPEN ? "be positive" : "not be negative", got);
  else
    diag_error(p->diag, at, "%s must be at least %s, got %s", what, exact(k->lo, a, sizeof a), got);
}

/* An error at key's setting (or nowhere, when the block lacks it). */
static void refuse(Program *p, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(Program *p, const char *key, const char *fmt, ...) {
  char msg[1024];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  const Setting *s = prog_setting(p, "train", key);
  diag_error(p->diag, s ? s->span : SPAN_NONE, "%s", msg);
}

bool train_optimizer_known(const char *name) {
  static const char *const opts[] = {"sgd", "momentum", "adam", "adamw", "rmsprop"};
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
    if (strcmp(name, opts[i]) == 0) return true;
  return false;
}

/* The settings RMSprop has no use for (PyTorch's RMSprop with its
 * defaults: no momentum, no weight decay) are refused with it, and its rho
 * with the other optimizers: none is silently ignored. */
static void rmsprop_settings(Program *p, const TrainConfig *c) {
  static const char *const others[] = {"momentum", "nesterov", "beta1", "beta2", "weight_decay"};
  bool rms = strcmp(c->optimizer, "rmsprop") == 0;
  const Setting *s = prog_setting(p, "train", "rho");
  if (s && !rms)
    diag_error(p->diag, s->span, "rho is rmsprop's setting, but the optimizer is %s", c->optimizer);
  for (size_t i = 0; rms && i < sizeof others / sizeof *others; i++)
    if ((s = prog_setting(p, "train", others[i])))
      diag_error(p->diag, s->span, "rmsprop has no %s (PyTorch's RMSprop without momentum or weight decay)",
                 others[i]);
}

/* lr_mult = ["PATTERN: FACTOR", ...]: each entry split at its last ':'
 * into a glob pattern and a positive finite factor. */
static void set_lr_mult(Program *p, const Setting *s, TrainConfig *c) {
  int n = s->value.type == ATTR_STRING ? 1 : s->value.n;
  const char *const *v = s->value.type == ATTR_STRING ? &s->value.u.s : s->value.u.strings;
  c->mult_pattern = arena_alloc(p->arena, sizeof *c->mult_pattern * (size_t)(n + 1));
  c->mult = arena_alloc(p->arena, sizeof *c->mult * (size_t)(n + 1));
  c->nmult = 0;
  for (int i = 0; i < n; i++) {
    const char *colon = strrchr(v[i], ':');
    char *end = NULL;
    double f = colon ? strtod(colon + 1, &end) : 0;
    size_t len = colon ? (size_t)(colon - v[i]) : 0;
    while (len > 0 && v[i][len - 1] == ' ') len--;
    while (end && *end == ' ') end++;
    if (!colon || !end || len == 0 || end == colon + 1 || *end) {
      diag_error(p->diag, s->span, "lr_mult entry \"%s\" is not \"PATTERN: FACTOR\" (e.g. \"embed.*: 0.1\")", v[i]);
      continue;
    }
    if (!(f > 0) || !isfinite(f)) {
      diag_error(p->diag, s->span, "lr_mult entry \"%s\": the factor must be positive, got %g", v[i], f);
      continue;
    }
    c->mult_pattern[c->nmult] = arena_printf(p->arena, "%.*s", (int)len, v[i]);
    c->mult[c->nmult++] = f;
  }
}

/* The rules between keys, and the values of lists and names the table's
 * ranges do not cover: an error at the setting for each broken one. */
static void cross_checks(Program *p, TrainConfig *c) {
  static const char *const scheds[] = {"constant", "step", "cosine"};
  bool sched_ok = false;
  for (int i = 0; i < 3; i++) sched_ok |= strcmp(c->schedule, scheds[i]) == 0;
  if (!train_optimizer_known(c->optimizer))
    refuse(p, "optimizer", "unknown optimizer '%s' (expected " TRAIN_OPTIMIZERS ")", c->optimizer);
  if (!sched_ok) refuse(p, "schedule", "unknown schedule '%s' (expected constant, step or cosine)", c->schedule);
  if (c->weight_decay != 0 && strcmp(c->optimizer, "adam") == 0)
    refuse(p, "weight_decay", "adam has no weight decay: use adamw (decoupled decay), or sgd or momentum (an L2 penalty)");
  if (c->nno_decay && !(c->weight_decay > 0) && strcmp(c->optimizer, "adamw") != 0)
    refuse(p, "no_decay", "no_decay has no effect: %s has no weight decay here (set weight_decay, or use adamw)",
           c->optimizer);
  rmsprop_settings(p, c);
  if (c->val && prog_setting(p, "train", "val_split"))
    refuse(p, "val_split", "give val = \"FILE\" or val_split, not both");
  if (c->monitor && strcmp(c->monitor, "val_loss") != 0 && strcmp(c->monitor, "val_accuracy") != 0)
    refuse(p, "monitor", "monitor must be \"val_loss\" or \"val_accuracy\", got \"%s\"", c->monitor);
  else if (c->monitor && strcmp(c->monitor, "val_accuracy") == 0 && !c->metric)
    refuse(p, "monitor", "monitor = \"val_accuracy\" needs metric = NAME (the logits accuracy is measured on)");
  for (int i = 0; i < c->nstd; i++)
    if (!(c->std[i] > 0 && isfinite(c->std[i]))) refuse(p, "std", "std must be positive, got %g", c->std[i]);
  for (int i = 0; i < c->nmean; i++)
    if (!isfinite(c->mean[i])) refuse(p, "mean", "mean must be finite, got %g", c->mean[i]);
  if (c->nmean > 3 || c->nstd > 3)
    refuse(p, c->nmean > 3 ? "mean" : "std", "%s has %d values: images have 1 or 3 channels", c->nmean > 3 ? "mean" : "std",
           c->nmean > 3 ? c->nmean : c->nstd);
  if (c->accumulate > 1 && c->overlap && prog_setting(p, "train", "overlap"))
    refuse(p, "overlap", "overlap = true cannot be kept with accumulate = %lld: the gradients are summed over the ranks "
           "once per update, after the last batch's backward", (long long)c->accumulate);
}

/* The train block's settings into c (the table's setter for each), each
 * checked for its kind; an unknown key gets the nearest known one. */
static void read_block(Program *p, TrainConfig *c) {
  const char *names[NKEYS];
  for (size_t k = 0; k < NKEYS; k++) names[k] = keys[k].key;
  for (int i = 0; i < p->nsettings; i++) {
    const Setting *s = &p->settings[i];
    if (strcmp(s->block, "train") != 0) continue;
    const TrainKey *k = NULL;
    for (size_t j = 0; j < NKEYS && !k; j++)
      if (strcmp(keys[j].key, s->key) == 0) k = &keys[j];
    if (!k) {
      const char *near = diag_nearest(s->key, names, (int)NKEYS);
      diag_error(p->diag, s->span, "unknown train setting '%s'%s%s%s", s->key, DIAG_MEAN(near));
    } else if (!fits(s, k->kind)) {
      diag_error(p->diag, s->span, "train setting '%s' takes %s", s->key, kind_name(k->kind));
    } else {
      set_key(p, k, s, c);
    }
  }
}

bool train_config(Program *p, const TrainOverrides *o, TrainConfig *c, bool quiet) {
  int before = p->diag->nerrors;
  defaults(c);
  read_block(p, c);
  for (size_t k = 0; o && k < NKEYS; k++)
    if (keys[k].over >= 0) override(p, &keys[k], o, c, quiet);
  if (o && o->limit >= 0) c->limit = o->limit;
  for (size_t k = 0; k < NKEYS; k++) check_range(p, &keys[k], c);
  cross_checks(p, c);
  /* Accumulating, the sum over the ranks waits for the update's last
   * batch: one blocking allreduce per update. */
  if (c->accumulate > 1) c->overlap = false;
  return p->diag->nerrors == before;
}

/* ---- the training program -------------------------------------------------------- */

/* A persistable variable of block 0 initialized to `value` by the startup
 * block. */
static const char *state_var(Program *p, const char *name, const VarDesc *like, double value, bool scalar) {
  VarDesc *v = prog_add_var(p, p->blocks[0], name);
  v->dtype = like->dtype == DT_F64 ? DT_F64 : DT_F32;   /* updated in place with the parameter */
  v->shape = scalar ? shape_of(1, (int64_t[]){1}) : like->shape;
  v->flags = VAR_STATE;
  v->span = like->span;
  OpDesc *op = op_new(p, "fill_constant", like->span);
  int64_t dims[SHAPE_MAX_RANK];
  for (int i = 0; i < v->shape.rank; i++) dims[i] = v->shape.d[i].n;
  op_set_attr(p, op, "shape", attr_ints(p, dims, v->shape.rank));
  op_set_attr(p, op, "value", attr_float(value));
  op_set_attr(p, op, "dtype", attr_dtype(v->dtype));
  slot_push(p, op_add_output(p, op, "Out"), v->name);
  op_append(p->startup, p, op);
  return v->name;
}

static void in(Program *p, OpDesc *op, const char *slot, const char *var) {
  slot_push(p, op_add_input(p, op, slot), var);
}

static void out(Program *p, OpDesc *op, const char *slot, const char *var) {
  slot_push(p, op_add_output(p, op, slot), var);
}

/* A state variable of an optimizer op: read from slot `in`, written to
 * slot `out`, named PARAM@SUFFIX and started at `value` (a [1] scalar if
 * `scalar`, else the parameter's shape). */
typedef struct OptState {
  const char *in, *out, *suffix;
  double value;
  bool scalar;
} OptState;

static const OptState momentum_state[] = {{"Velocity", "VelocityOut", "@VELOCITY", 0, false}};
static const OptState rmsprop_state[] = {{"MeanSquare", "MeanSquareOut", "@MEANSQUARE", 0, false}};
static const OptState adam_state[] = {{"Moment1", "Moment1Out", "@MOMENT1", 0, false},
                                      {"Moment2", "Moment2Out", "@MOMENT2", 0, false},
                                      {"Beta1Pow", "Beta1PowOut", "@BETA1POW", 1, true},
                                      {"Beta2Pow", "Beta2PowOut", "@BETA2POW", 1, true}};

/* The n state variables s of the optimizer op that updates parameter w. */
static void add_state(Program *p, OpDesc *op, const VarDesc *w, const OptState *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *v = state_var(p, arena_printf(p->arena, "%s%s", w->name, s[i].suffix), w, s[i].value, s[i].scalar);
    in(p, op, s[i].in, v);
    out(p, op, s[i].out, v);
  }
}

/* The script's states (section 11) keep, after each training step, the
 * value last bound to their names: an assign into each, after the updates
 * (eval and predict run only the forward ops, so they leave states as they
 * were). */
static void keep_states(Program *p) {
  Block *b0 = p->blocks[0];
  int n = b0->nvars;
  for (int i = 0; i < n; i++) {
    const VarDesc *v = b0->vars[i];
    if (!(v->flags & VAR_KEPT) || !v->next) continue;
    OpDesc *op = op_new(p, "assign", v->next_at);
    in(p, op, "X", v->next);
    out(p, op, "Out", v->name);
    op_append(b0, p, op);
    reg_infer(p, b0, op);
  }
}

/* ---- parameter groups: no_decay and lr_mult -------------------------------------------- */

/* The index of the first of n glob patterns that name matches, or -1. */
static int first_match(const char *const *pats, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (fnmatch(pats[i], name, 0) == 0) return i;
  return -1;
}

/* A pattern that matches no parameter is a typo until shown otherwise: an
 * error at the setting, with the nearest of the parameters' names and of
 * the patterns SCOPE.* and *.NAME they fit. */
static void unmatched(Program *p, const char *key, const char *const *pats, int n, const BackwardResult *bw) {
  const char **cands = arena_alloc(p->arena, sizeof *cands * (size_t)(3 * bw->npairs + 1));
  int nc = 0;
  for (int i = 0; i < bw->npairs; i++) {
    const char *w = bw->pairs[i].param, *dot = strrchr(w, '.');
    cands[nc++] = w;
    if (dot) cands[nc++] = arena_printf(p->arena, "*%s", dot);
    if (dot) cands[nc++] = arena_printf(p->arena, "%.*s.*", (int)(strchr(w, '.') - w), w);
  }
  const Setting *s = prog_setting(p, "train", key);
  for (int k = 0; k < n; k++) {
    bool hit = false;
    for (int i = 0; i < bw->npairs && !hit; i++) hit = fnmatch(pats[k], bw->pairs[i].param, 0) == 0;
    if (hit) continue;
    const char *near = diag_nearest(pats[k], cands, nc);
    diag_error(p->diag, s ? s->span : SPAN_NONE, "%s pattern \"%s\" matches no parameter%s%s%s", key, pats[k],
               near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
  }
}

/* The weight decay and learning-rate multiplier of parameter w's group. */
static double group_decay(const TrainConfig *c, const char *w, double wd) {
  return first_match(c->no_decay, c->nno_decay, w) >= 0 ? 0 : wd;
}
static double group_mult(const TrainConfig *c, const char *w) {
  int k = first_match(c->mult_pattern, c->nmult, w);
  return k >= 0 ? c->mult[k] : 1;
}

/* The optimizer op that updates parameter w by gradient g, with its
 * group's settings: an lr_mult attribute on every op once the train block
 * has lr_mult (1 for parameters it does not match), so dumps show each. */
static OpDesc *optimizer_op(Program *p, const TrainConfig *c, const char *w, const char *g) {
  const VarDesc *wv = prog_var(p, w);
  OpDesc *op = op_new(p, c->optimizer, wv->span);
  in(p, op, "Param", w);
  in(p, op, "Grad", g);
  out(p, op, "ParamOut", w);
  if (strcmp(c->optimizer, "momentum") == 0) {
    add_state(p, op, wv, momentum_state, sizeof momentum_state / sizeof *momentum_state);
    in(p, op, "LearningRate", TRAIN_LR_VAR);
    op_set_attr(p, op, "mu", attr_float(c->momentum));
    op_set_attr(p, op, "use_nesterov", attr_bool(c->nesterov));
    op_set_attr(p, op, "weight_decay", attr_float(group_decay(c, w, c->weight_decay)));
  } else if (strcmp(c->optimizer, "rmsprop") == 0) {
    in(p, op, "LearningRate", TRAIN_LR_VAR);
    add_state(p, op, wv, rmsprop_state, sizeof rmsprop_state / sizeof *rmsprop_state);
    op_set_attr(p, op, "rho", attr_float(c->rho));
    op_set_attr(p, op, "epsilon", attr_float(c->epsilon));
  } else if (strncmp(c->optimizer, "adam", 4) == 0) {
    in(p, op, "LearningRate", TRAIN_LR_VAR);
    add_state(p, op, wv, adam_state, sizeof adam_state / sizeof *adam_state);
    op_set_attr(p, op, "beta1", attr_float(c->beta1));
    op_set_attr(p, op, "beta2", attr_float(c->beta2));
    op_set_attr(p, op, "epsilon", attr_float(c->epsilon));
    double wd = prog_setting(p, "train", "weight_decay") ? c->weight_decay : 0.01;
    if (strcmp(c->optimizer, "adamw") == 0) op_set_attr(p, op, "coeff", attr_float(group_decay(c, w, wd)));
  } else {
    in(p, op, "LearningRate", TRAIN_LR_VAR);
    op_set_attr(p, op, "weight_decay", attr_float(group_decay(c, w, c->weight_decay)));
  }
  if (c->nmult) op_set_attr(p, op, "lr_mult", attr_float(group_mult(c, w)));
  return op;
}

/* Accumulating (accumulate = N > 1), a weight matrix's gradient that one
 * matmul of the backward writes, and no other op of the backward touches,
 * is summed where it stands: the matmul becomes sgd_matmul(Param = the
 * gradient, LearningRate = TRAIN_ACC_RATE_VAR), whose GEMM adds -rate *
 * X'Y to it (beta 1), the trainer setting the rate to minus the batch's
 * examples.  The gradient then holds the group's weighted sum, and no
 * gradient apart from it is ever written: accumulating spends one
 * gradient's memory, not two (the trainer divides the sum before the
 * update and zeroes it after).  It stays inside the backward phase. */
static void sum_in_place(Program *p, const BackwardResult *bw) {
  Block *b0 = p->blocks[0];
  int from = p->phase[PHASE_BACKWARD], to = p->phase[PHASE_ALLREDUCE];
  bool rate = false;
  for (int j = from; j < to; j++) {
    const OpDesc *mm = b0->ops[j];
    const char *g = op_out1(mm, "Out");
    if (strcmp(mm->type, "matmul") != 0 || !g || !name_is_grad(g)) continue;
    const VarDesc *x = prog_var(p, op_in1(mm, "X")), *y = prog_var(p, op_in1(mm, "Y")), *gv = prog_var(p, g);
    if (!x || !y || !gv || x->shape.rank != 2 || y->shape.rank != 2 || x->dtype != DT_F32 || y->dtype != DT_F32 ||
        gv->dtype != DT_F32)
      continue;
    bool alone = false;   /* a parameter's gradient, which no other backward op touches */
    for (int i = 0; i < bw->npairs && !alone; i++) alone = bw->pairs[i].grad && strcmp(bw->pairs[i].grad, g) == 0;
    for (int k = from; k < to && alone; k++)
      for (int t = 0; t < b0->ops[k]->nin && alone && k != j; t++)
        for (int a = 0; a < b0->ops[k]->in[t].n; a++) alone = alone && strcmp(b0->ops[k]->in[t].args[a], g) != 0;
    for (int k = from; k < to && alone; k++)
      for (int t = 0; t < b0->ops[k]->nout && alone && k != j; t++)
        for (int a = 0; a < b0->ops[k]->out[t].n; a++) alone = alone && strcmp(b0->ops[k]->out[t].args[a], g) != 0;
    if (!alone) continue;
    if (!rate) {
      VarDesc *v = prog_var(p, TRAIN_ACC_RATE_VAR) ? NULL : prog_add_var(p, b0, TRAIN_ACC_RATE_VAR);
      if (v) v->dtype = DT_F32, v->shape = shape_scalar();
      rate = true;
    }
    OpDesc *op = op_new(p, "sgd_matmul", mm->span);
    op->fwd_block = mm->fwd_block;
    op->fwd_op = mm->fwd_op;
    in(p, op, "Param", g);
    in(p, op, "X", op_in1(mm, "X"));
    in(p, op, "Y", op_in1(mm, "Y"));
    in(p, op, "LearningRate", TRAIN_ACC_RATE_VAR);
    out(p, op, "ParamOut", g);
    op_set_attr(p, op, "transpose_x", attr_bool(op_attr_i(mm, "transpose_x", 0) != 0));
    op_set_attr(p, op, "transpose_y", attr_bool(op_attr_i(mm, "transpose_y", 0) != 0));
    b0->ops[j] = op;
  }
}

const char **train_plan_keep(const Program *p, const TrainConfig *c, const BackwardResult *bw, int *n) {
  int np = bw ? bw->npairs : 0;
  const char **keep = mem_calloc((size_t)np + 3, sizeof *keep);
  *n = 0;
  const char *names[2] = {c->loss, c->metric};
  for (int k = 0; k < 2; k++)
    if (names[k]) {
      const char *v = prog_export(p, names[k]);
      keep[(*n)++] = v ? v : names[k];
    }
  for (int i = 0; i < np; i++)
    if (bw->pairs[i].grad) keep[(*n)++] = bw->pairs[i].grad;
  return keep;
}

bool train_program(Program *p, const TrainConfig *c, BackwardResult *bw) {
  if (!bwd_append(p, c->loss, NULL, 0, NULL, 0, bw)) return false;
  Block *b0 = p->blocks[0];
  int bwd_end = b0->nops;
  p->phased = true;
  p->phase[PHASE_FORWARD] = 0;
  p->phase[PHASE_BACKWARD] = bw->first_grad_op;
  p->phase[PHASE_ALLREDUCE] = p->phase[PHASE_UPDATE] = bwd_end;   /* the update: clipping, optimizers, states */
  if (!prog_var(p, TRAIN_LR_VAR)) {
    VarDesc *lr = prog_add_var(p, b0, TRAIN_LR_VAR);
    lr->dtype = DT_F32;
    lr->shape = shape_scalar();
    lr->flags = VAR_STATE;
  }
  if (c->clip_norm > 0) {
    OpDesc *op = op_new(p, "clip_by_global_norm", SPAN_NONE);
    for (int i = 0; i < bw->npairs; i++)
      if (bw->pairs[i].grad) in(p, op, "X", bw->pairs[i].grad), out(p, op, "Out", bw->pairs[i].grad);
    op_set_attr(p, op, "max_norm", attr_float(c->clip_norm));
    op_append(b0, p, op);
    reg_infer(p, b0, op);
  }
  int before = p->diag->nerrors;
  unmatched(p, "no_decay", c->no_decay, c->nno_decay, bw);
  unmatched(p, "lr_mult", (const char *const *)c->mult_pattern, c->nmult, bw);
  if (p->diag->nerrors != before) return false;
  for (int i = 0; i < bw->npairs; i++) {
    const char *w = bw->pairs[i].param, *g = bw->pairs[i].grad;
    if (!g) continue;
    OpDesc *op = optimizer_op(p, c, w, g);
    op_append(b0, p, op);
    if (!reg_infer(p, b0, op)) return false;
  }
  keep_states(p);
  /* On N ranks, the gradients averaged over them (before sgd_matmul would
   * fuse one away); plain SGD on a weight matrix as one sgd_matmul
   * (rewrite.c). */
  if (c->ranks > 1) {
    const char **grads = arena_alloc(p->arena, sizeof *grads * (size_t)(bw->npairs + 1));
    int ng = 0;
    for (int i = 0; i < bw->npairs; i++)
      if (bw->pairs[i].grad) grads[ng++] = bw->pairs[i].grad;
    /* Fed by the trainer each step; not state: no checkpoint holds it. */
    VarDesc *w = prog_var(p, TRAIN_WEIGHT_VAR) ? NULL : prog_add_var(p, b0, TRAIN_WEIGHT_VAR);
    if (w) w->dtype = DT_F32, w->shape = shape_scalar();
    bool overlap = c->overlap;   /* off when accumulating (train_config) */
    int marks[3] = {bw->first_grad_op, p->phase[PHASE_ALLREDUCE], p->phase[PHASE_UPDATE]};
    int made = rewrite_allreduce(p, &(AllreduceOpts){.grads = grads, .ngrads = ng, .bwd_end = bwd_end,
                                                     .bucket_bytes = (int64_t)(c->bucket_mb * 1e6),
                                                     .weight = TRAIN_WEIGHT_VAR, .overlap = overlap,
                                                     .marks = marks, .nmarks = 3});
    /* blocking, the allreduce ops stand together at the backward's end:
     * the allreduce phase; overlapped, the starts join the backward and
     * the waits the update, and the phase is empty */
    bw->first_grad_op = marks[0], p->phase[PHASE_ALLREDUCE] = marks[1];
    p->phase[PHASE_UPDATE] = overlap ? marks[2] : marks[1] + made;
  }
  unsigned hold = c->accumulate > 1 ? 1u << PHASE_ALLREDUCE | 1u << PHASE_UPDATE : 0;
  rewrite_program(p, &(RewriteOpts){RW_TRAIN, &bw->first_grad_op, 1, hold, NULL, 0});
  if (c->accumulate > 1) sum_in_place(p, bw);
  return true;
}
