/* train.c — the train configuration and the training program (train.h).
 * The training loop is in loop.c (trainrun.h lists the trainer's files). */
#include "train/train.h"

#include "ir/rewrite.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum Kind { K_STRING, K_NAME, K_NAMES, K_NUMBER, K_NUMBERS, K_INT, K_BOOL } Kind;

/* Every key a train block may hold: its kind, default and meaning.  This
 * table is what lowering errors and the man page describe. */
static const struct TrainKey {
  const char *key;
  Kind kind;
  const char *doc;
} keys[] = {
    {"data", K_STRING, "the dataset: \"fashion-mnist\", a CSV file, a .npz archive, IMAGES.idx:LABELS.idx, or a folder of class folders of images"},
    {"context", K_INT, "text data: bytes per window; data is then read as text (x, y: i64 [N, context]; the last tenth is \"test\")"},
    {"mean", K_NUMBERS, "image folders: per-channel means subtracted from the pixels in [0, 1] (default: none)"},
    {"std", K_NUMBERS, "image folders: per-channel standard deviations the pixels are divided by (default: none)"},
    {"flip", K_BOOL, "image folders: mirror each training image left-right with probability 1/2 (default false)"},
    {"crop_pad", K_INT, "image folders: shift each training image by up to this many pixels, zeros shifted in (default 0)"},
    {"feed", K_NAMES, "the inputs the dataset's columns feed, in order (default: the inputs)"},
    {"label", K_NAMES, "the input holding the labels (default: the last one fed); CSV data: else the label column, or a list of target columns"},
    {"columns", K_NAMES, "CSV data: the columns, by header name, the input reads (default: all but the labels)"},
    {"label_column", K_STRING, "CSV data: the column holding the labels (default: label, y, or the last)"},
    {"loss", K_NAME, "the scalar to minimize (default: loss)"},
    {"metric", K_NAME, "logits whose argmax (one logit: its sign) is compared with the labels for accuracy"},
    {"optimizer", K_NAME, "sgd, momentum, adam, adamw or rmsprop (default: sgd)"},
    {"lr", K_NUMBER, "the learning rate (default 0.01)"},
    {"momentum", K_NUMBER, "momentum's factor (default 0.9)"},
    {"nesterov", K_BOOL, "Nesterov momentum (default false)"},
    {"beta1", K_NUMBER, "Adam's first-moment decay (default 0.9)"},
    {"beta2", K_NUMBER, "Adam's second-moment decay (default 0.999)"},
    {"epsilon", K_NUMBER, "Adam's and RMSprop's epsilon (default 1e-8)"},
    {"rho", K_NUMBER, "RMSprop's decay of the mean square, PyTorch's alpha (default 0.99)"},
    {"weight_decay", K_NUMBER, "L2 penalty (sgd, momentum) or decoupled decay (adamw) (default 0; adamw 0.01)"},
    {"no_decay", K_NAMES, "glob patterns (\"*.b\", \"*.gamma\") over scoped parameter names: those parameters get no weight decay"},
    {"lr_mult", K_NAMES, "\"PATTERN: FACTOR\" entries: parameters matching PATTERN step by lr times FACTOR (the first matching entry counts)"},
    {"clip_norm", K_NUMBER, "clip the gradients' global L2 norm to this (default: off)"},
    {"schedule", K_NAME, "the learning-rate schedule: constant, step or cosine (default constant)"},
    {"step_size", K_INT, "step schedule: epochs between decays (default 1)"},
    {"gamma", K_NUMBER, "step schedule: the decay factor (default 0.1)"},
    {"warmup", K_NUMBER, "epochs of linear warm-up from 0 (default 0)"},
    {"epochs", K_INT, "passes over the data (default 1)"},
    {"batch", K_INT, "examples per step (default 64)"},
    {"shuffle", K_BOOL, "reshuffle the data every epoch (default true)"},
    {"eval", K_STRING, "evaluated after each epoch: \"test\", \"train\", a data file (\"test.npz\"), or \"none\" (default test)"},
    {"val", K_STRING, "a validation data file, in the format of data, evaluated after each epoch (default: none)"},
    {"val_split", K_NUMBER, "the fraction of the training data held out for validation, chosen by the seed (default: none)"},
    {"patience", K_INT, "stop after this many epochs without a better validation (else test) score (default: never)"},
    {"log_every", K_INT, "steps between progress lines when not on a terminal (default 100)"},
    {"bucket_mb", K_NUMBER, "mpirun: megabytes of gradients averaged over the ranks per allreduce (default 25)"},
    {"overlap", K_BOOL, "mpirun: a bucket's allreduce runs while the rest of the backward does (default true)"},
};

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
static void lr_mults(Program *p, const Setting *s, TrainConfig *c) {
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
    if (!colon || len == 0 || end == colon + 1 || *end) {
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

bool train_config(Program *p, const TrainOverrides *o, TrainConfig *c, bool quiet) {
  Diag *d = p->diag;
  int before = d->nerrors;
  memset(c, 0, sizeof *c);
  c->loss = "loss";
  c->optimizer = "sgd";
  c->schedule = "constant";
  c->eval = "test";
  c->lr = 0.01, c->momentum = 0.9, c->beta1 = 0.9, c->beta2 = 0.999, c->epsilon = 1e-8, c->rho = 0.99, c->gamma = 0.1;
  c->epochs = 1, c->batch = 64, c->step_size = 1, c->log_every = 100;
  c->shuffle = true;
  c->bucket_mb = 25;
  c->overlap = true;
  c->ranks = 1;
  const char *names[sizeof keys / sizeof *keys];
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) names[k] = keys[k].key;
  for (int i = 0; i < p->nsettings; i++) {
    const Setting *s = &p->settings[i];
    if (strcmp(s->block, "train") != 0) continue;
    int k = -1;
    for (size_t j = 0; j < sizeof keys / sizeof *keys; j++)
      if (strcmp(keys[j].key, s->key) == 0) k = (int)j;
    if (k < 0) {
      const char *near = diag_nearest(s->key, names, (int)(sizeof keys / sizeof *keys));
      diag_error(d, s->span, "unknown train setting '%s'%s%s%s", s->key, DIAG_MEAN(near));
      continue;
    }
    if (!fits(s, keys[k].kind)) {
      diag_error(d, s->span, "train setting '%s' takes %s", s->key, kind_name(keys[k].kind));
      continue;
    }
    const char *key = s->key;
#define IS(name) (strcmp(key, name) == 0)
    if (IS("data")) c->data = s->value.u.s;
    else if (IS("eval")) c->eval = s->value.u.s;
    else if (IS("loss")) c->loss = s->value.u.s;
    else if (IS("metric")) c->metric = s->value.u.s;
    else if (IS("label") && s->value.type == ATTR_STRING) c->label = s->value.u.s;
    else if (IS("label")) c->labels = s->value.u.strings, c->nlabels = s->value.n;
    else if (IS("columns")) {
      if (s->value.type == ATTR_STRING) c->columns = &s->value.u.s, c->ncolumns = 1;
      else c->columns = s->value.u.strings, c->ncolumns = s->value.n;
    }
    else if (IS("label_column")) c->label_column = s->value.u.s;
    else if (IS("optimizer")) c->optimizer = s->value.u.s;
    else if (IS("schedule")) c->schedule = s->value.u.s;
    else if (IS("feed")) {
      if (s->value.type == ATTR_STRING) c->feed = &s->value.u.s, c->nfeed = 1;
      else c->feed = s->value.u.strings, c->nfeed = s->value.n;
    } else if (IS("lr")) c->lr = number(s);
    else if (IS("momentum")) c->momentum = number(s);
    else if (IS("nesterov")) c->nesterov = s->value.u.i;
    else if (IS("beta1")) c->beta1 = number(s);
    else if (IS("beta2")) c->beta2 = number(s);
    else if (IS("epsilon")) c->epsilon = number(s);
    else if (IS("rho")) c->rho = number(s);
    else if (IS("weight_decay")) c->weight_decay = number(s);
    else if (IS("clip_norm")) c->clip_norm = number(s);
    else if (IS("gamma")) c->gamma = number(s);
    else if (IS("warmup")) c->warmup = number(s);
    else if (IS("step_size")) c->step_size = s->value.u.i;
    else if (IS("epochs")) c->epochs = s->value.u.i;
    else if (IS("batch")) c->batch = s->value.u.i;
    else if (IS("shuffle")) c->shuffle = s->value.u.i;
    else if (IS("log_every")) c->log_every = s->value.u.i;
    else if (IS("context")) c->context = s->value.u.i;
    else if (IS("val")) c->val = s->value.u.s;
    else if (IS("val_split")) c->val_split = number(s);
    else if (IS("patience")) c->patience = s->value.u.i;
    else if (IS("bucket_mb")) c->bucket_mb = number(s);
    else if (IS("no_decay")) {
      if (s->value.type == ATTR_STRING) c->no_decay = &s->value.u.s, c->nno_decay = 1;
      else c->no_decay = s->value.u.strings, c->nno_decay = s->value.n;
    } else if (IS("lr_mult")) lr_mults(p, s, c);
    else if (IS("mean") || IS("std")) numbers(p, s, IS("mean") ? &c->mean : &c->std, IS("mean") ? &c->nmean : &c->nstd);
    else if (IS("flip")) c->flip = s->value.u.i;
    else if (IS("crop_pad")) c->crop_pad = s->value.u.i;
    else if (IS("overlap")) c->overlap = s->value.u.i;
#undef IS
  }
  /* Command-line overrides, said out loud when they replace a setting. */
#define OVERRIDE(field, given, key, fmt, val)                                                   \
  if (given) {                                                                                  \
    if (!quiet && prog_setting(p, "train", key))                                                \
      diag_note(d, SPAN_NONE, "--%s " fmt " overrides the script's %s", key, val, key);           \
    c->field = val;                                                                             \
  }
  if (o) {
    OVERRIDE(epochs, o->epochs >= 0, "epochs", "%lld", (long long)o->epochs)
    OVERRIDE(batch, o->batch >= 0, "batch", "%lld", (long long)o->batch)
    OVERRIDE(lr, o->lr >= 0, "lr", "%g", o->lr)
    OVERRIDE(optimizer, o->optimizer != NULL, "optimizer", "%s", o->optimizer)
    OVERRIDE(data, o->data != NULL, "data", "%s", o->data)
    if (o->limit >= 0) c->limit = o->limit;
  }
#undef OVERRIDE
  /* Values that make no sense. */
  const Setting *s;
#define CHECK(cond, key, ...)                                                    \
  if (!(cond)) {                                                                 \
    s = prog_setting(p, "train", key);                                           \
    diag_error(d, s ? s->span : SPAN_NONE, __VA_ARGS__);                         \
  }
  static const char *const scheds[] = {"constant", "step", "cosine"};
  bool sched_ok = false;
  for (int i = 0; i < 3; i++) sched_ok |= strcmp(c->schedule, scheds[i]) == 0;
  CHECK(train_optimizer_known(c->optimizer), "optimizer", "unknown optimizer '%s' (expected " TRAIN_OPTIMIZERS ")",
        c->optimizer)
  CHECK(sched_ok, "schedule", "unknown schedule '%s' (expected constant, step or cosine)", c->schedule)
  CHECK(c->lr > 0 && isfinite(c->lr), "lr", "the learning rate must be positive, got %g", c->lr)
  CHECK(c->context >= 0 && (c->context != 0 || !prog_setting(p, "train", "context")), "context",
        "context must be at least 1, got %lld", (long long)c->context)
  CHECK(c->epochs >= 1, "epochs", "epochs must be at least 1, got %lld", (long long)c->epochs)
  CHECK(c->batch >= 1, "batch", "batch must be at least 1, got %lld", (long long)c->batch)
  CHECK(c->momentum >= 0 && c->momentum < 1, "momentum", "momentum must be in [0, 1), got %g", c->momentum)
  CHECK(c->beta1 >= 0 && c->beta1 < 1, "beta1", "beta1 must be in [0, 1), got %g", c->beta1)
  CHECK(c->beta2 >= 0 && c->beta2 < 1, "beta2", "beta2 must be in [0, 1), got %g", c->beta2)
  CHECK(c->weight_decay >= 0, "weight_decay", "weight_decay must not be negative, got %g", c->weight_decay)
  CHECK(c->weight_decay == 0 || strcmp(c->optimizer, "adam") != 0, "weight_decay",
        "adam has no weight decay: use adamw (decoupled decay), or sgd or momentum (an L2 penalty)")
  CHECK(!c->nno_decay || c->weight_decay > 0 || strcmp(c->optimizer, "adamw") == 0, "no_decay",
        "no_decay has no effect: %s has no weight decay here (set weight_decay, or use adamw)", c->optimizer)
  CHECK(c->rho >= 0 && c->rho < 1, "rho", "rho must be in [0, 1), got %g", c->rho)
  rmsprop_settings(p, c);
  CHECK(c->clip_norm >= 0, "clip_norm", "clip_norm must not be negative, got %g", c->clip_norm)
  CHECK(c->step_size >= 1, "step_size", "step_size must be at least 1, got %lld", (long long)c->step_size)
  CHECK(c->warmup >= 0, "warmup", "warmup must not be negative, got %g", c->warmup)
  CHECK(!prog_setting(p, "train", "val_split") || (c->val_split > 0 && c->val_split < 1), "val_split",
        "val_split must be in (0, 1), got %g", c->val_split)
  CHECK(!c->val || !prog_setting(p, "train", "val_split"), "val_split",
        "give val = \"FILE\" or val_split, not both")
  CHECK(!prog_setting(p, "train", "patience") || c->patience >= 1, "patience", "patience must be at least 1, got %lld",
        (long long)c->patience)
  for (int i = 0; i < c->nstd; i++)
    CHECK(c->std[i] > 0 && isfinite(c->std[i]), "std", "std must be positive, got %g", c->std[i])
  for (int i = 0; i < c->nmean; i++)
    CHECK(isfinite(c->mean[i]), "mean", "mean must be finite, got %g", c->mean[i])
  CHECK(c->nmean <= 3 && c->nstd <= 3, c->nmean > 3 ? "mean" : "std",
        "%s has %d values: images have 1 or 3 channels", c->nmean > 3 ? "mean" : "std", c->nmean > 3 ? c->nmean : c->nstd)
  CHECK(c->crop_pad >= 0 && c->crop_pad <= 1 << 20, "crop_pad", "crop_pad must be in [0, 1048576], got %lld",
        (long long)c->crop_pad)
  CHECK(c->log_every >= 1, "log_every", "log_every must be at least 1, got %lld", (long long)c->log_every)
  CHECK(c->bucket_mb > 0 && c->bucket_mb <= 1 << 20, "bucket_mb", "bucket_mb must be in (0, 1048576], got %g",
        c->bucket_mb)
#undef CHECK
  return d->nerrors == before;
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

bool train_program(Program *p, const TrainConfig *c, BackwardResult *bw) {
  if (!bwd_append(p, c->loss, NULL, 0, NULL, 0, bw)) return false;
  Block *b0 = p->blocks[0];
  int bwd_end = b0->nops;
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
    rewrite_allreduce(p, &(AllreduceOpts){.grads = grads, .ngrads = ng, .bwd_end = bwd_end,
                                          .bucket_bytes = (int64_t)(c->bucket_mb * 1e6), .weight = TRAIN_WEIGHT_VAR,
                                          .overlap = c->overlap,
                                          .marks = &bw->first_grad_op, .nmarks = 1});
  }
  rewrite_program(p, &(RewriteOpts){RW_TRAIN, &bw->first_grad_op, 1});
  return true;
}
