/* trainer.c — a run of `netrun train`, `eval`, `predict` or `lr-find`
 * set up (trainer.h; their options are trainverb.c's): the script and its
 * train block, the data it reads and the inputs each column feeds; the
 * evaluation of the forward ops over a dataset, and `netrun eval`.  The
 * loop is loop.c's, checkpoints save.c's, progress progress.c's, the
 * ranks ranks.c's, predict predict.c's (trainrun.h).
 *
 * One executor runs the training program (forward, backward, optimizer
 * ops: train.c) once per batch; evaluation runs only its forward ops.
 * Everything a run depends on is seeded: the executor's generator
 * (initializers, dropout) and the shuffling generator, both saved in
 * checkpoints with the parameters and the optimizer state, so a resumed
 * run continues exactly where the interrupted one stopped. */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "io/checkpoint.h"
#include "exec/dist.h"
#include "ir/dump.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

bool trainer_sets_mode(const RunFeeds *f) {
  for (int i = 0; i < f->nsets; i++)
    if (strncmp(f->sets[i], "training=", 9) == 0) return true;
  return false;
}

/* FNV-1a of the forward program's text: a checkpoint belongs to it. */
uint64_t trun_program_hash(const Program *p) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) mem_oom(0);
  DumpOptions opt = {.format = DUMP_TEXT, .startup = true};
  dump_program(f, p, &opt);
  fclose(f);
  uint64_t h = ckpt_hash(buf, n);
  free(buf);
  return h;
}

/* Text data's windows are byte values: the inputs they feed must be i64
 * (an f32 input would silently take token ids as numbers). */
static bool text_inputs_i64(Run *r) {
  for (int i = 0; i < r->nfeed && r->c.context > 0; i++)
    if (r->feed[i]->dtype != DT_I64) {
      diag_error(&r->ld.diag, r->feed[i]->span, "input '%s' is %s, but text data (context = %lld) feeds byte values: "
                 "declare it i64", r->feed[i]->name, dtype_name(r->feed[i]->dtype), (long long)r->c.context);
      return false;
    }
  return true;
}
static bool label_is_column(Run *r);

/* Which input each dataset column feeds: the train block's feed list, or
 * the script's inputs in order.  A feed list one short of the columns
 * leaves out the labels (the last column): an autoencoder reads only the
 * images. */
/* The script's input nearest to a misspelt name, for "did you mean". */
static const char *nearest_input(const Program *p, const char *name) {
  const Block *b0 = p->blocks[0];
  const char **names = mem_alloc(NULL, sizeof *names * (size_t)(b0->nvars + 1));
  int n = 0;
  for (int i = 0; i < b0->nvars; i++)
    if (b0->vars[i]->flags & VAR_INPUT) names[n++] = b0->vars[i]->user_name ? b0->vars[i]->user_name : b0->vars[i]->name;
  const char *near = diag_nearest(name, names, n);
  mem_free(names);
  return near;
}

static bool bind_feeds(Run *r, Dataset *ds) {
  Program *p = r->p;
  const Block *b0 = p->blocks[0];
  r->nfeed = 0;
  if (r->c.nfeed) {
    for (int i = 0; i < r->c.nfeed && r->nfeed < 16; i++) {
      const VarDesc *v = prog_named_var(p, r->c.feed[i]);
      if (!v || !(v->flags & VAR_INPUT)) {
        const Setting *s = prog_setting(p, "train", "feed");
        const char *near = nearest_input(p, r->c.feed[i]);
        diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: feed names '%s', which is not an input%s%s%s",
                   r->c.feed[i], DIAG_MEAN(near));
        return false;
      }
      r->feed[r->nfeed++] = v;
    }
  } else {
    for (int i = 0; i < b0->nvars && r->nfeed < 16; i++)
      if ((b0->vars[i]->flags & VAR_INPUT) && b0->vars[i]->name != r->mode_var) r->feed[r->nfeed++] = b0->vars[i];
  }
  /* a .npz's arrays feed the inputs of their names */
  if (!data_select(&r->ld.diag, ds, r->feed, r->nfeed) ||
      (r->has_test && ds != &r->test && !data_select(&r->ld.diag, &r->test, r->feed, r->nfeed)) ||
      (r->has_val && !data_select(&r->ld.diag, &r->val, r->feed, r->nfeed)) || !text_inputs_i64(r))
    return false;
  bool unlabelled = r->c.nfeed && r->nfeed == ds->ncols - 1 && ds->ncols == DATA_LABEL + 1;
  if (r->nfeed != ds->ncols && !unlabelled) {
    char cols[1024] = "", fed[1024] = "";
    for (int i = 0; i < ds->ncols; i++)
      snprintf(cols + strlen(cols), sizeof cols - strlen(cols), "%s%s", i ? ", " : "", ds->cols[i].name);
    for (int i = 0; i < r->nfeed; i++)
      snprintf(fed + strlen(fed), sizeof fed - strlen(fed), "%s%s", i ? ", " : "", r->feed[i]->name);
    diag_error(&r->ld.diag, SPAN_NONE,
               "the dataset %s has %d columns (%s) but %d inputs are fed (%s); name them with feed = [...] in the "
               "train block", r->c.data, ds->ncols, cols, r->nfeed, fed);
    return false;
  }
  if (unlabelled) {
    const char *key = r->c.label ? "label" : r->c.metric ? "metric" : NULL;
    const Setting *s = key ? prog_setting(p, "train", key) : NULL;
    if (key)
      diag_error(&r->ld.diag, s ? s->span : SPAN_NONE,
                 "train: %s needs the labels, but feed leaves out the dataset's label column '%s'", key,
                 ds->cols[DATA_LABEL].name);
    r->label = NULL;
    return !key;
  }
  r->label = r->c.label && !label_is_column(r) ? prog_named_var(p, r->c.label) : r->feed[r->nfeed - 1];
  if (!r->label || !(r->label->flags & VAR_INPUT)) {
    const Setting *s = prog_setting(p, "train", "label");
    const char *near = r->c.label ? nearest_input(p, r->c.label) : NULL;
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: label names '%s', which is not an input%s%s%s", r->c.label,
               DIAG_MEAN(near));
    return false;
  }
  return true;
}

/* The mode input: a script that declares `input training : bool` gets
 * true during training steps and false when evaluating or predicting, so
 * dropout and the like can tell the two apart (stdlib's dropout wrappers
 * take it as an argument). */
const char *trun_mode_input(const Program *p) {
  const VarDesc *d = prog_named_var(p, "training");
  return d && d->block == 0 && (d->flags & VAR_INPUT) && d->dtype == DT_BOOL && d->shape.rank == 0 ? d->name : NULL;
}

bool trun_feed_mode(Run *r, bool training) {
  if (!r->mode_var || (!training && r->mode_set)) return true;   /* evaluation keeps --set's value */
  Tensor *t = tensor_scalar_bool(training);
  bool ok = exec_feed(r->ex, r->mode_var, t, "the trainer");
  tensor_unref(t);
  return ok;
}

/* Feeds one batch: column k to input feed[k], shaped as the input says,
 * and the mode. */
bool trun_feed_batch(Run *r, const Dataset *ds, Batch *b, bool training) {
  exec_unbind(r->ex);
  if (!trun_feed_mode(r, training)) return false;
  for (int k = 0; k < r->nfeed; k++) {
    Tensor *t = data_fit(&r->ld.diag, &ds->cols[k], b->cols[k], r->feed[k]);
    if (!t) return false;
    bool ok = exec_feed(r->ex, r->feed[k]->name, t, "data");
    tensor_unref(t);
    if (!ok) return false;
  }
  return true;
}

/* The class logits m predict for example i: the argmax of its row; a
 * single logit per example (logistic regression: [B, 1], or [B] when
 * `rows` says B) predicts 1 when it is positive, else 0. */
int64_t trun_predicted(const Tensor *m, int64_t i, int64_t rows) {
  int64_t c = m->shape[m->rank - 1];
  if (c == 1 || (m->rank == 1 && m->numel == rows)) return tensor_get(m, i) > 0;
  int64_t best = 0;
  if (m->dtype == DT_F32) {
    /* The class the scan below picks (f32 to double is exact), found in
     * two vectorized passes: the running scan's compare and branch per
     * element was 2% of a char_lm step (256 logits for each of its 1024
     * predictions).  The scan keeps the first of equal entries, never
     * moves to a NaN and never leaves a NaN first entry; so: 0 when the
     * first entry is NaN, else the first entry equal to the largest of
     * the others (max in eight lanes that skip NaNs). */
    const float *row = tensor_f32(m) + i * c;
    if (c < 1 || row[0] != row[0]) return 0;
    float lane[8];
    for (int k = 0; k < 8; k++) lane[k] = -INFINITY;
    int64_t j = 0;
    for (; j + 8 <= c; j += 8)
      for (int k = 0; k < 8; k++) lane[k] = row[j + k] > lane[k] ? row[j + k] : lane[k];
    for (int k = 0; j + k < c; k++) lane[k] = row[j + k] > lane[k] ? row[j + k] : lane[k];
    float top = lane[0];
    for (int k = 1; k < 8; k++) top = lane[k] > top ? lane[k] : top;
    while (row[best] != top) best++;   /* row[0] is a number: top >= it, and is some entry */
    return best;
  }
  for (int64_t j = 1; j < c; j++)
    if (tensor_get(m, i * c + j) > tensor_get(m, i * c + best)) best = j;
  return best;
}

/* The examples the logits m hold a prediction for (see predicted). */
int64_t trun_predictions(const Tensor *m, int64_t rows) {
  int64_t c = m->shape[m->rank - 1];
  return m->rank == 1 && m->numel == rows ? rows : m->numel / (c ? c : 1);
}

/* Correct predictions of the metric's logits against the labels. */
int64_t trun_correct(Run *r) {
  if (!r->metric_var || !r->label) return 0;
  Tensor *m = exec_var_value(r->ex, r->metric_var), *y = exec_var_value(r->ex, r->label->name);
  if (!m || !y || m->rank < 1 || !dtype_is_float(m->dtype)) return 0;
  int64_t n = trun_predictions(m, y->numel), hits = 0;
  int64_t classes = m->shape[m->rank - 1] == 1 || (m->rank == 1 && m->numel == y->numel) ? 2 : m->shape[m->rank - 1];
  for (int64_t i = 0; i < n && i < y->numel; i++) {
    int64_t p = trun_predicted(m, i, y->numel), truth = (int64_t)tensor_get(y, i);
    hits += p == truth;
    if (r->confusion) report_confusion_add(r->confusion, classes, truth, p);
  }
  if (y->rank >= 2 && y->shape[0] > 0) r->per_example = (n < y->numel ? n : y->numel) / y->shape[0];
  return hits;
}

/* Accuracy: the share of the metric's predictions that are right. */
double trun_accuracy(const Run *r, int64_t hits, int64_t n) {
  int64_t per = r->per_example > 0 ? r->per_example : 1;
  return n ? (double)hits / ((double)n * (double)per) : (double)NAN;
}

double trun_loss_value(Run *r) {
  Tensor *l = exec_var_value(r->ex, r->loss_var);
  return l ? tensor_get(l, 0) : (double)NAN;
}

/* Loss and accuracy of the forward ops over a whole dataset. */
bool trun_evaluate(Run *r, const Dataset *ds, double *loss, double *acc) {
  Batcher b;
  data_batcher_init(&b, ds, r->c.batch, false);
  data_epoch(&b, NULL);
  if (dist_size() > 1) data_shard(&b, dist_rank(), dist_size());   /* each rank its shard */
  Batch bt;
  double total = 0;
  int64_t n = 0, hits = 0;
  bool ok = true;
  while (ok && data_next(&b, &bt)) {
    int64_t bn = bt.n;
    ok = trun_feed_batch(r, ds, &bt, false) && exec_run_range(r->ex, 0, r->nforward) == 0;
    data_batch_release(&bt);
    if (!ok) break;
    total += trun_loss_value(r) * (double)bn;
    hits += trun_correct(r);
    n += bn;
  }
  data_batcher_free(&b);
  if (dist_size() > 1) {
    DistReport mine = {.loss = total, .hits = hits, .n = n, .ok = ok}, sum;
    DistReport *all = mem_alloc(NULL, sizeof *all * (size_t)dist_size());
    if (!dist_agree(&mine, &sum, all)) {
      char why[DIAG_FIRST_MAX + 2];
      int k = dist_odd_rank(all, false, why);
      if (ok) diag_error(NULL, SPAN_NONE, "rank %d of %d: evaluating failed on rank %d%s; stopping", dist_rank(),
                         dist_size(), k, why);
      ok = false, trun_failure_agreed = true;
    }
    mem_free(all);
    total = sum.loss, hits = sum.hits, n = sum.n;
    if (ok && r->confusion) trun_reduce_confusion(r->confusion);
  }
  *loss = n ? total / (double)n : (double)NAN;
  *acc = trun_accuracy(r, hits, n);
  return ok;
}

/* ---- train ------------------------------------------------------------------------------ */

/* --limit N: only the first N examples of a split. */
static void limit(Dataset *ds, int64_t n) {
  if (n <= 0 || n >= ds->n) return;
  ds->n = n;
  for (int k = 0; k < ds->ncols; k++) ds->cols[k].shape[0] = n;
}

/* The folder a train block's data path (`key` data or eval) is read
 * from: that of the file setting it (the folder import searches first),
 * so a model file names the data beside it wherever it is run from.  A
 * --data path is the working folder's, as for any command. */
static const char *data_dir(Run *r, const char *key) {
  const Setting *s = prog_setting(r->p, "train", key);
  if ((key[0] == 'd' && r->t->o.data) || !s || s->span.file < 0) return NULL;
  const char *path = r->ld.diag.files[s->span.file].path;
  const char *slash = strrchr(path, '/');
  return !slash ? NULL : slash == path ? "/" : arena_strndup(&r->ld.arena, path, (size_t)(slash - path));
}

/* The format the train block's data will be read as (data.h's table),
 * asked before reading it: NULL when it names nothing there. */
static const DataFormat *data_format(Run *r) {
  DataOptions o = {.context = r->c.context, .dir = data_dir(r, "data")};
  return data_format_of(r->c.data, &o);
}

/* Does the dataset come in train and test splits? (fashion-mnist, and a
 * text file read with context = T, text.h; a CSV file does not.) */
static bool has_splits(Run *r) {
  const DataFormat *f = data_format(r);
  return f && (f->flags & DATA_SPLITS);
}

/* Whether the train block's label names a column of the data rather than
 * an input: a name that is not one of the script's inputs (and no
 * label_column), with data whose format reads a label column (a CSV
 * file's; the others that take one refuse it with their reason). */
static bool label_is_column(Run *r) {
  if (!r->c.label || r->c.label_column) return false;
  const DataFormat *f = data_format(r);
  if (f && !(f->flags & DATA_LABEL_COLUMN)) return false;
  const VarDesc *v = prog_named_var(r->p, r->c.label);
  return !v || !(v->flags & VAR_INPUT);
}

/* The input the dataset's first column feeds (see bind_feeds), or NULL. */
static const VarDesc *first_feed(const Run *r) {
  if (r->c.nfeed) {
    const VarDesc *v = prog_named_var(r->p, r->c.feed[0]);
    return v && (v->flags & VAR_INPUT) ? v : NULL;
  }
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++)
    if ((b0->vars[i]->flags & VAR_INPUT) && b0->vars[i]->name != r->mode_var) return b0->vars[i];
  return NULL;
}

/* How the train block reads a data file (`key` data, eval or val): the
 * CSV columns it chooses, from the folder of the script that sets key;
 * an image folder's images in the shape of the input they feed, when it
 * declares [B, C, H, W] (else the first image's), normalized. */
static DataOptions data_options(Run *r, const char *key) {
  DataOptions o = {.label = label_is_column(r) ? r->c.label : r->c.label_column, .dir = data_dir(r, key),
                   .columns = r->c.columns, .ncolumns = r->c.ncolumns, .labels = r->c.labels,
                   .nlabels = r->c.nlabels, .context = r->c.context, .mean = r->c.mean, .nmean = r->c.nmean,
                   .std = r->c.std, .nstd = r->c.nstd};
  const VarDesc *x = first_feed(r);
  if (x && x->shape.rank == 4 && x->shape.d[1].n > 0 && x->shape.d[2].n > 0 && x->shape.d[3].n > 0)
    o.channels = (int)(x->shape.d[1].n < 1000 ? x->shape.d[1].n : 1000), o.height = x->shape.d[2].n,
    o.width = x->shape.d[3].n;
  return o;
}

/* flip and crop_pad augment an image folder's training images: with
 * other data, an error at the setting. */
static bool augment_fits(Run *r) {
  if (r->train.cols[DATA_INPUT].channels) return true;
  const char *key = r->c.flip ? "flip" : r->c.crop_pad ? "crop_pad" : NULL;
  const Setting *s = key ? prog_setting(r->p, "train", key) : NULL;
  if (key)
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: %s augments an image folder's images, but %s is not "
               "an image folder", key, r->c.data);
  return !key;
}

/* The data evaluated after each epoch, and by `eval` and `predict`: the
 * train block's eval = "none"; a split ("test", "train") of a dataset
 * that has them; or a dataset of its own (a CSV file, IMAGES:LABELS).
 * The default "test" of a dataset without splits evaluates nothing (eval
 * and predict then take the training data); said out loud, it is an
 * error, as is a file that is not there.  `eval --data` and `predict
 * --data` take the data they name. */
static bool open_eval(Run *r, bool training) {
  const char *e = r->c.eval, *data = r->c.data;
  r->eval_name = has_splits(r) ? "train" : data;
  if (strcmp(e, "none") == 0 || (!training && r->t->o.data && !has_splits(r))) return true;
  const Setting *s = prog_setting(r->p, "train", "eval");
  DataOptions dopt = data_options(r, "eval");
  struct stat st;
  const char *path = dopt.dir && e[0] != '/' ? arena_printf(&r->ld.arena, "%s/%s", dopt.dir, e) : e;
  /* "test" names a split of data that has them; else a file or folder of
   * that name, when one exists and the block says so (torchvision's
   * train/ and test/ folders). */
  bool split = (strcmp(e, "test") == 0 || strcmp(e, "train") == 0) && (has_splits(r) || !s || stat(path, &st) != 0);
  if (split) dopt = data_options(r, "data");
  if (split && !has_splits(r)) {
    const DataFormat *f = data_format(r);
    bool folder = f && strcmp(f->name, "images") == 0;
    if (s) diag_error(&r->ld.diag, s->span, "train: eval = \"%s\" names a split, but %s has none: name %s or \"none\"",
                      e, data, folder ? "a folder of class folders (eval = \"images/test\")" : "a data file (eval = \"test.csv\")");
    return !s;
  }
  if (!split && !strchr(e, ':') && stat(path, &st) != 0) {
    diag_error(&r->ld.diag, s ? s->span : SPAN_NONE,
               "train: eval must be \"test\", \"train\", \"none\" or a data file, got \"%s\" (no such file)", e);
    return false;
  }
  dopt.split = split ? e : NULL;
  if (!data_open(&r->ld.diag, split ? data : e, &dopt, &r->test)) return false;
  r->has_test = true;
  r->eval_name = e;
  r->data_bytes += data_bytes(&r->test);
  limit(&r->test, r->c.limit);
  return true;
}

/* The validation data of a training run: the train block's val file, or
 * the val_split fraction of the training data held out (rounded to whole
 * examples; the shuffle's seed chooses which).  patience needs something
 * to evaluate: the validation data, else the eval split. */
static bool open_val(Run *r) {
  Diag *d = &r->ld.diag;
  const Setting *s;
  if (r->c.val) {
    DataOptions dopt = data_options(r, "val");
    const char *v = r->c.val;
    struct stat st;
    if (!strchr(v, ':') && stat(dopt.dir && v[0] != '/' ? arena_printf(&r->ld.arena, "%s/%s", dopt.dir, v) : v, &st) != 0) {
      s = prog_setting(r->p, "train", "val");
      diag_error(d, s ? s->span : SPAN_NONE, "train: val must name a data file, got \"%s\" (no such file)", v);
      return false;
    }
    if (!data_open(d, v, &dopt, &r->val)) return false;
    limit(&r->val, r->c.limit);
  } else if ((s = prog_setting(r->p, "train", "val_split"))) {
    int64_t n = r->train.n, nval = (int64_t)floor(r->c.val_split * (double)n + 0.5);
    if (nval < 1 || nval >= n) {
      diag_error(d, s->span, "val_split = %g of %lld examples leaves %s", r->c.val_split, (long long)n,
                 nval < 1 ? "no validation example" : "no training example");
      return false;
    }
    Rng rng;
    rng_seed(&rng, r->t->opt.seed ^ 0x7a11da7aull);
    if (!data_split(d, &r->train, nval, &rng, &r->val)) return false;
  }
  r->has_val = r->c.val || prog_setting(r->p, "train", "val_split");
  if (r->has_val) r->data_bytes += data_bytes(&r->val);
  if (r->c.patience && !r->has_val && !r->has_test) {
    s = prog_setting(r->p, "train", "patience");
    diag_error(d, s ? s->span : SPAN_NONE, "patience needs data evaluated after each epoch: give val_split, "
               "val = \"FILE\", or an eval split");
    return false;
  }
  return true;
}

/* The training data (also what eval and predict take when there is no
 * eval data), --limit applied; false (said) when it cannot be read or is
 * too small for the ranks. */
static bool open_train(Run *r) {
  DataOptions dopt = data_options(r, "data");
  dopt.split = has_splits(r) ? "train" : NULL;
  if (!data_open(&r->ld.diag, r->c.data, &dopt, &r->train)) return false;
  r->has_train = true;
  if (!augment_fits(r)) return false;
  r->data_bytes += data_bytes(&r->train);
  limit(&r->train, r->c.limit);
  if (r->train.n < dist_size()) {
    diag_error(&r->ld.diag, SPAN_NONE, "%d ranks need at least %d training examples, got %lld", dist_size(),
               dist_size(), (long long)r->train.n);
    return false;
  }
  return true;
}

/* A CSV file's columns as a note, when the train block did not choose
 * them: "x gets columns a, b, c and y gets column label". */
static void note_columns(const Run *r) {
  const DataColumn *x = &r->train.cols[DATA_INPUT], *y = &r->train.cols[DATA_LABEL];
  if (!x->source || !y->source || r->nfeed < 2 || r->train.ncols != 2) return;
  const char *xs = strncmp(x->source, "column", 6) == 0 ? "" : x->shape[1] == 1 ? "column " : "columns ";
  const char *ys = strncmp(y->source, "column", 6) == 0 ? "" : y->rank > 1 && y->shape[1] > 1 ? "columns " : "column ";
  diag_note(NULL, SPAN_NONE, "%s: %s gets %s%s and %s gets %s%s (columns = [...] and label = \"...\" in the train "
            "block choose others)", r->c.data, r->feed[0]->user_name ? r->feed[0]->user_name : r->feed[0]->name, xs,
            x->source, r->feed[1]->user_name ? r->feed[1]->user_name : r->feed[1]->name, ys, y->source);
}

/* The first parameter whose initializer (in the startup block) draws from
 * the generator, directly or through the values it reads; *op gets the
 * op that draws.  NULL when every one is deterministic (constants,
 * zeros(), weights("FILE")). */
static const VarDesc *random_param(const Program *p, const char **op) {
  const Block *s = p->startup;
  const char **drawn = mem_alloc(NULL, sizeof *drawn * (size_t)(s->nvars + s->nops + 1));
  const char **by = mem_alloc(NULL, sizeof *by * (size_t)(s->nvars + s->nops + 1));
  int n = 0;
  const VarDesc *found = NULL;
  for (int i = 0; i < s->nops && !found; i++) {
    const OpDesc *o = s->ops[i];
    const OpProto *proto = reg_find_op(p, o->type);
    const char *from = proto && (proto->flags & OP_RANDOM) ? o->type : NULL;
    for (int k = 0; k < o->nin && !from; k++)
      for (int j = 0; j < o->in[k].n && !from; j++)
        for (int d = 0; d < n && !from; d++)
          if (strcmp(o->in[k].args[j], drawn[d]) == 0) from = by[d];
    if (!from) continue;
    for (int k = 0; k < o->nout && !found; k++)
      for (int j = 0; j < o->out[k].n && !found; j++) {
        const VarDesc *v = prog_var(p, o->out[k].args[j]);
        if (v && (v->flags & VAR_PARAM)) found = v, *op = from;
        drawn[n] = o->out[k].args[j], by[n++] = from;
      }
  }
  mem_free(drawn);
  mem_free(by);
  return found;
}

bool trun_weights_given(Run *r) {
  const char *op = NULL;
  const VarDesc *v = r->t->weights || r->t->init ? NULL : random_param(r->p, &op);
  if (!v) return true;
  diag_error(&r->ld.diag, v->span,
             "parameter '%s' starts from random values (%s), and no --weights gives trained ones: %s would "
             "report on an untrained model (give --weights PATH, or --init to use the initial values on purpose)",
             v->user_name ? v->user_name : v->name, op, r->t->predicting ? "predict" : "eval");
  return false;
}

bool trun_setup(Run *r, TrainArgs *t, bool training) {
  memset(r, 0, sizeof *r);
  r->t = t;
  r->best = -INFINITY;
  bool loaded = session_load(&r->ld, t->file);
  r->p = r->ld.prog;   /* teardown unloads it, loaded or not */
  if (!loaded) return false;
  r->quiet = dist_rank() > 0;
  r->hash = trun_program_hash(r->p);
  TrainOverrides o = t->o;
  if (training && t->resume && !trun_resume_settings(r, &o)) return false;
  if (!train_config(r->p, &o, &r->c, !training || r->quiet)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  if (!r->c.data) {
    diag_error(&r->ld.diag, SPAN_NONE, "%s names no data: add data = \"...\" to its train block, or give --data SPEC",
               t->file);
    return false;
  }
  r->mode_var = trun_mode_input(r->p);
  r->mode_set = trainer_sets_mode(&t->feeds);
  r->nforward = r->p->blocks[0]->nops;
  r->c.ranks = dist_size();
  if (training && !train_program(r->p, &r->c, &r->bw)) {
    diag_finish(&r->ld.diag);
    return false;
  }
  const char *lv = prog_export(r->p, r->c.loss);
  r->loss_var = lv ? lv : r->c.loss;
  if (!t->predicting && !prog_var(r->p, r->loss_var)) {
    const char *near = prog_nearest_name(r->p, r->c.loss);
    diag_error(&r->ld.diag, SPAN_NONE, "the script has no value named '%s' to use as the loss%s%s%s", r->c.loss,
               DIAG_MEAN(near));
    return false;
  }
  if (r->c.metric) {
    const char *mv = prog_export(r->p, r->c.metric);
    r->metric_var = mv ? mv : r->c.metric;
    if (!prog_var(r->p, r->metric_var)) {
      const Setting *s = prog_setting(r->p, "train", "metric");
      const char *near = prog_nearest_name(r->p, r->c.metric);
      diag_error(&r->ld.diag, s ? s->span : SPAN_NONE, "train: metric names '%s', which the script does not define%s%s%s",
                 r->c.metric, DIAG_MEAN(near));
      diag_finish(&r->ld.diag);
      return false;
    }
  }
  /* eval and predict read only the data they evaluate: the eval data
   * when there is some, else the training data. */
  if ((!training && (!open_eval(r, false) || (!r->has_test && !open_train(r)))) ||
      (training && (!open_train(r) || !open_eval(r, true) || !open_val(r)))) {
    diag_finish(&r->ld.diag);
    return false;
  }
  if (!bind_feeds(r, r->has_train ? &r->train : &r->test) || (!training && !trun_weights_given(r))) return false;
  if (training && !r->quiet && !r->c.ncolumns && !r->c.nlabels && r->c.context <= 0 && !r->train.named)
    note_columns(r);   /* a CSV file (text and .npz columns have sources too) */
  ExecOptions opt = t->opt;
  opt.tape = false;
  if (!(r->ex = run_start(&r->ld, &opt, &t->feeds, &r->nforward, 1))) return false;
  r->backward_end = training ? r->p->phase[PHASE_ALLREDUCE] : r->nforward;
  int nkeep;
  const char **keep = train_plan_keep(r->p, &r->c, training ? &r->bw : NULL, &nkeep);
  exec_use_plan(r->ex, keep, nkeep);
  mem_free(keep);
  /* Initializers run now, so checkpoints can overwrite them. */
  if (exec_startup(r->ex) < 0) return false;
  r->lr = tensor_scalar_f32((float)r->c.lr);
  exec_preload(r->ex, TRAIN_LR_VAR, r->lr);
  if (r->c.ranks > 1) {
    r->weight = tensor_scalar_f32(1);
    exec_preload(r->ex, TRAIN_WEIGHT_VAR, r->weight);
    if (r->c.overlap) exec_between(r->ex, dist_progress);
  }
  rng_seed(&r->shuffle, t->opt.seed ^ 0x5eedda7aull);
  r->shuffle_at_epoch = r->shuffle;
  return true;
}

void trun_teardown(Run *r) {
  char err[4200];
  if (r->logging && !file_log_close(&r->log, err, sizeof err) && !r->log_failed)
    diag_error(&r->ld.diag, SPAN_NONE, "%s: %s", r->log.path, err);
  tensor_unref(r->lr);
  tensor_unref(r->weight);
  for (int i = 0; r->acc && i < r->bw.npairs; i++) mem_free(r->acc[i]);
  mem_free(r->acc);
  mem_free(r->acc_in_place);
  tensor_unref(r->acc_rate);
  exec_free(r->ex);
  if (r->has_train) data_free(&r->train);
  if (r->has_test) data_free(&r->test);
  if (r->has_val) data_free(&r->val);
  if (r->p) session_free(&r->ld);
}

/* ---- eval and predict ----------------------------------------------------------------- */

/* eval's results: the line (or a JSON document, --format json), then
 * with --confusion the matrix and the per-class figures. */
static void eval_report(const Run *r, int64_t n, double l, double a) {
  if (r->t->format != REPORT_JSON) {
    printf("%s: loss %s", r->eval_name, trun_loss_str(l, 6).s);
    if (r->metric_var) printf(" accuracy %.4f", a);
    printf(" (%lld examples)\n", (long long)n);
    if (r->confusion) report_confusion_text(stdout, r->confusion);
    return;
  }
  fputs("{\"data\": ", stdout);
  report_json_string(stdout, r->eval_name);
  fputs(", \"loss\": ", stdout);
  if (isfinite(l)) printf("%.9g", l);
  else printf("\"%s\"", isnan(l) ? "nan" : l < 0 ? "-inf" : "inf");
  if (r->metric_var) printf(", \"accuracy\": %.9g", a);
  printf(", \"examples\": %lld", (long long)n);
  if (r->confusion) fputs(",\n ", stdout), report_confusion_json(stdout, r->confusion);
  puts("}");
}

/* eval: the loss and accuracy over the test data (or the training data).
 * On N ranks each takes its shard (as training's evaluation does) and
 * rank 0 prints the reduced figures. */
int trainer_eval(TrainArgs *t) {
  if (!trun_ranks_start()) return EXIT_SCRIPT;
  Run r;
  int status = EXIT_SCRIPT;
  Confusion conf = {0};
  bool ok = trun_setup(&r, t, false) && (!t->weights || trun_restore(&r, t->weights, false));
  if (dist_size() > 1 && !trun_agree_start(&r, ok, "evaluates")) ok = false;
  if (ok) {
    const Dataset *ds = r.has_test ? &r.test : &r.train;
    double l, a;
    r.confusion = t->confusion ? &conf : NULL;
    if (t->confusion && (!r.metric_var || !r.label))
      diag_error(&r.ld.diag, SPAN_NONE, "--confusion needs a classifier: metric = NAME (its logits) and a label input fed");
    else if (trun_evaluate(&r, ds, &l, &a)) {
      eval_report(&r, ds->n, l, a);
      status = 0;
    }
  }
  trun_teardown(&r);
  report_confusion_free(&conf);
  return trun_ranks_stop(status);
}
