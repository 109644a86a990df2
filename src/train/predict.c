/* predict.c — `netrun predict` (trainrun.h): the forward pass on fed
 * inputs or on --data, with the classes or the --output values written in
 * --format; on N ranks, rank 0 gathers and writes every rank's values. */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "exec/dist.h"
#include "exec/print.h"


/* The class each example's logits in v predict, one a line (trun_predicted()
 * says how); rows is the batch's size when known, else -1. */
static void print_classes(FILE *f, const Tensor *v, int64_t rows, const ReportValues *rv) {
  int64_t n = trun_predictions(v, rows);
  for (int64_t i = 0; i < n; i++) {
    int64_t c = trun_predicted(v, i, rows);
    const char *name = report_class_name(rv, c);   /* an image folder's class */
    if (name) fprintf(f, "%s\n", name);
    else fprintf(f, "%lld\n", (long long)c);
  }
}

/* The classes print_classes prints, as an i64 tensor [N]. */
static Tensor *classes_of(const Tensor *v, int64_t rows) {
  int64_t n = trun_predictions(v, rows);
  Tensor *c = tensor_new(DT_I64, 1, &n);
  for (int64_t i = 0; i < n; i++) tensor_i64(c)[i] = trun_predicted(v, i, rows);
  return c;
}

/* The values of one forward pass (rows: the batch's examples, or -1): each
 * of vars[n] (the --output values) in turn, or with `classes` the classes
 * of the metric vars[0]; printed to f (--format text) or kept in rv. */
static void emit_value(Run *r, int k, Tensor *v, bool classes, int64_t rows, FILE *f, ReportValues *rv) {
  bool as_classes = classes && v->rank >= 1 && dtype_is_float(v->dtype);
  if (rv->format == REPORT_TEXT && as_classes) {
    print_classes(f, v, rows, rv);
  } else if (rv->format == REPORT_TEXT) {
    if (rv->n > 1) fprintf(f, "%s =\n", rv->names[k]);   /* several values: each named */
    print_write(f, v, r->t->opt.precision);
    fputc('\n', f);
  } else if (as_classes) {
    Tensor *c = classes_of(v, rows);
    report_values_add(rv, k, c);
    tensor_unref(c);
  } else {
    report_values_add(rv, k, v);
  }
}

static bool predict_pass(Run *r, const char *const *vars, int n, bool classes, int64_t rows, FILE *f,
                         ReportValues *rv) {
  if (exec_run_for(r->ex, vars, n) != 0) return false;
  for (int k = 0; k < n; k++) {
    Tensor *v = exec_value(r->ex, vars[k]);
    if (v) emit_value(r, k, v, classes, rows, f, rv);
  }
  return true;
}

/* ---- predict --data on N ranks ---- */

/* A value as it travels to rank 0: this header, then its elements. */
typedef struct Wire {
  int32_t present, dtype, rank, pad;
  int64_t rows;
  int64_t shape[SHAPE_MAX_RANK];
} Wire;

/* v (NULL: none) and its batch's rows as bytes, *bytes of them. */
static char *wire_pack(const Tensor *v, int64_t rows, size_t *bytes) {
  Wire w = {.present = v != NULL, .rows = rows};
  size_t data = v ? (size_t)v->numel * dtype_size(v->dtype) : 0;
  if (v) {
    w.dtype = (int32_t)v->dtype, w.rank = v->rank;
    memcpy(w.shape, v->shape, sizeof *w.shape * (size_t)v->rank);
  }
  char *buf = mem_alloc(NULL, sizeof w + data);
  memcpy(buf, &w, sizeof w);
  if (data) memcpy(buf + sizeof w, v->data, data);
  *bytes = sizeof w + data;
  return buf;
}

/* The value wire_pack packed (NULL: none), its rows in *rows. */
static Tensor *wire_unpack(const char *buf, int64_t *rows) {
  Wire w;
  memcpy(&w, buf, sizeof w);
  *rows = w.rows;
  if (!w.present) return NULL;
  Tensor *v = tensor_new((DType)w.dtype, w.rank, w.shape);
  memcpy(v->data, buf + sizeof w, (size_t)v->numel * dtype_size(v->dtype));
  return v;
}

/* One step of predict on N ranks: this rank's batch bt (NULL past the
 * data's end) run for each value; rank 0 gathers them and writes them
 * rank by rank, each rank's values in --output's order: what one process
 * writes at the same --batch.  False on every rank when one failed. */
static bool predict_step(Run *r, const Dataset *ds, Batch *bt, const char *const *vars, int n, bool classes, FILE *f,
                         ReportValues *rv) {
  int N = dist_size();
  char *mine[REPORT_MAX_OUTPUTS] = {0}, *all[REPORT_MAX_OUTPUTS] = {0};
  size_t bytes[REPORT_MAX_OUTPUTS], *sizes = mem_alloc(NULL, sizeof *sizes * (size_t)N * REPORT_MAX_OUTPUTS);
  bool ok = !bt || (trun_feed_batch(r, ds, bt, false) && exec_run_for(r->ex, vars, n) == 0);
  for (int k = 0; k < n; k++) {
    mine[k] = wire_pack(ok && bt ? exec_value(r->ex, vars[k]) : NULL, bt ? bt->n : 0, &bytes[k]);
  }
  DistReport me = {.ok = ok}, sum, *reports = mem_alloc(NULL, sizeof *reports * (size_t)N);
  bool every = dist_agree(&me, &sum, reports);
  char why[DIAG_FIRST_MAX + 2];
  int bad = dist_odd_rank(reports, false, why);
  mem_free(reports);
  if (!every && ok)
    diag_error(NULL, SPAN_NONE, "rank %d of %d: predicting failed on rank %d%s; stopping", dist_rank(), N, bad, why);
  for (int k = 0; k < n && every; k++)
    if (!dist_gather_bytes(mine[k], bytes[k], (void **)&all[k], sizes + (size_t)k * N)) {
      diag_error(NULL, SPAN_NONE, "one step's values exceed 2 GB: lower --batch");
      every = false;
    }
  for (int q = 0; q < N && every && all[0]; q++)
    for (int k = 0; k < n; k++) {
      size_t at = 0;
      for (int j = 0; j < q; j++) at += sizes[(size_t)k * N + j];
      int64_t rows;
      Tensor *v = wire_unpack(all[k] + at, &rows);
      if (v) emit_value(r, k, v, classes, rows, f, rv);
      tensor_unref(v);
    }
  for (int k = 0; k < n; k++) mem_free(mine[k]), mem_free(all[k]);
  mem_free(sizes);
  if (!every) trun_failure_agreed = true;
  return every;
}

/* The variables of predict's values (vars, names): each --output, or the
 * train block's metric; false, reported, when the script lacks one. */
static bool predict_vars(Run *r, const char **vars, const char **names, int *n) {
  const TrainArgs *t = r->t;
  *n = t->noutputs ? t->noutputs : 1;
  for (int k = 0; k < *n; k++) {
    const char *name = t->noutputs ? t->outputs[k] : r->c.metric;
    names[k] = t->noutputs ? name : "class";
    const char *var = name ? prog_export(r->p, name) : NULL;
    vars[k] = var ? var : name;
    if (!name) {
      diag_error(&r->ld.diag, SPAN_NONE, "predict needs --output NAME (or metric = NAME in the train block)");
      return false;
    }
    if (!prog_var(r->p, vars[k])) {
      const char *near = prog_nearest_name(r->p, name);
      diag_error(&r->ld.diag, SPAN_NONE, "the script has no value named '%s'%s%s%s", name, DIAG_MEAN(near));
      return false;
    }
  }
  return true;
}

/* Predict's results, once every pass has run: the text's file closed, or
 * the values written in their format.  False when ok was, or once a
 * failure is reported. */
static bool predict_finish(const TrainArgs *t, bool ok, OutFile *o, ReportValues *rv) {
  if (t->format == REPORT_TEXT && !ok && o->path) {   /* a failed run leaves no file */
    fclose(o->f);
    o->file.fd = -1;
    file_abort(&o->file);
  } else if (t->format == REPORT_TEXT) {
    ok = file_out_close(o) && ok;
  } else {
    ok = ok && report_values_write(rv, t->out);
  }
  report_values_free(rv);
  return ok;
}

/* Where text goes (-o FILE, else standard output); other formats are
 * written at the end. */
static bool predict_start(const TrainArgs *t, int n, const char *const *names, OutFile *o, ReportValues *rv) {
  report_values_init(rv, t->format, n, names);
  o->f = stdout;
  o->path = NULL;
  return t->format != REPORT_TEXT || file_out_open(o, t->out);
}

/* predict --data: the values over the examples of the data eval would
 * take (the test split, or the file), batch by batch.  On N ranks, step k
 * of the ranks takes batches kN .. kN + N - 1, one each, and rank 0 alone
 * writes their values, in order (predict_step).  False once a failure
 * is reported. */
static bool predict_data(TrainArgs *t) {
  Run r;
  int N = dist_size();
  const char *vars[REPORT_MAX_OUTPUTS], *names[REPORT_MAX_OUTPUTS];
  int n = 0;
  OutFile o = {0};
  ReportValues rv;
  bool ok = trun_setup(&r, t, false) && (!t->weights || trun_restore(&r, t->weights, false)) &&
            predict_vars(&r, vars, names, &n);
  bool started = ok && dist_rank() == 0 && predict_start(t, n, names, &o, &rv);
  ok = ok && (started || dist_rank() > 0);
  if ((N > 1 && !trun_agree_start(&r, ok, "predicts with")) || !ok) {
    if (started) predict_finish(t, false, &o, &rv);
    ok = false;
    goto out;
  }
  const Dataset *ds = r.has_test ? &r.test : &r.train;
  if (started) {   /* csv's ids; the classes' names (report.h) */
    rv.ids = ds->ids, rv.nexamples = ds->n;
    if (!t->noutputs) rv.class_names = ds->classes, rv.nclasses = ds->nclasses;
  }
  Batcher b;
  data_batcher_init(&b, ds, r.c.batch, false);
  data_epoch(&b, NULL);
  int64_t steps = (data_batches(&b) + N - 1) / N;
  data_skip(&b, dist_rank());
  for (int64_t s = 0; ok && s < steps; s++) {
    Batch bt;
    bool has = data_next(&b, &bt);
    if (N > 1) {
      ok = predict_step(&r, ds, has ? &bt : NULL, vars, n, !t->noutputs, o.f, &rv);
    } else {
      ok = trun_feed_batch(&r, ds, &bt, false) && predict_pass(&r, vars, n, !t->noutputs, bt.n, o.f, &rv);
    }
    data_batch_release(&bt);
    data_skip(&b, N - 1);
  }
  data_batcher_free(&b);
  if (started) ok = predict_finish(t, ok, &o, &rv);
out:
  trun_teardown(&r);
  return ok;
}

/* predict: the forward pass on fed inputs (or --data) with trained
 * weights; prints the class (see predicted) of each example by the train
 * block's metric, or the values of --output NAME, in --format. */
int trainer_predict(TrainArgs *t) {
  t->predicting = true;
  if (!trun_ranks_start()) return EXIT_SCRIPT;
  if (t->o.data) return trun_ranks_stop(predict_data(t) ? 0 : EXIT_SCRIPT);
  /* fed inputs: nothing to share out; rank 0 alone predicts */
  if (dist_rank() > 0) return trun_ranks_stop(0);
  Run r;
  memset(&r, 0, sizeof r);
  r.t = t;
  int status = EXIT_SCRIPT;
  const char *vars[REPORT_MAX_OUTPUTS], *names[REPORT_MAX_OUTPUTS];
  int n;
  OutFile o;
  ReportValues rv;
  bool loaded = session_load(&r.ld, t->file);
  r.p = r.ld.prog;   /* unloaded below, loaded or not */
  if (!loaded) goto out;   /* session_load has counted the errors */
  if (!train_config(r.p, &t->o, &r.c, true)) goto fail;
  r.hash = trun_program_hash(r.p);
  if (!predict_vars(&r, vars, names, &n)) goto out;
  if (!trun_weights_given(&r)) goto fail;
  ExecOptions opt = t->opt;
  opt.tape = false;
  if (!(r.ex = run_start(&r.ld, &opt, &t->feeds, NULL, 0))) goto out;   /* it has counted the errors */
  if (exec_startup(r.ex) < 0) goto fail;
  if (t->weights && !trun_restore(&r, t->weights, false)) goto out;
  /* Predicting is not training, unless --set says otherwise. */
  r.mode_var = trun_mode_input(r.p);
  r.mode_set = trainer_sets_mode(&t->feeds);
  if (!trun_feed_mode(&r, false)) goto fail;
  if (!predict_start(t, n, names, &o, &rv)) goto out;
  bool ok = predict_pass(&r, vars, n, !t->noutputs, -1, o.f, &rv);
  if (predict_finish(t, ok, &o, &rv)) status = 0;
  if (!ok) goto fail;
  goto out;
fail:
  diag_finish(&r.ld.diag);   /* "N errors" */
out:
  exec_free(r.ex);
  if (r.p) session_free(&r.ld);
  return trun_ranks_stop(status);
}
