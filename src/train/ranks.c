/* ranks.c — data-parallel training under mpirun (trainrun.h, dist.h):
 * what the ranks agree on before a run, at each step and at each epoch's
 * end, and the state they share. */
#include "train/trainer.h"
#include "train/trainrun.h"

#include "io/checkpoint.h"
#include "exec/dist.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

/* On N > 1 ranks, a failure every rank saw (a rank's failed start or
 * forward pass, a loss that is not finite): they all stop, none waits. */
bool trun_failure_agreed;

/* ---- ranks: data-parallel training under mpirun (dist.h) ------------------------------ */

/* Steps per epoch: a step takes `batch` examples on each rank. */
int64_t trun_epoch_steps(const Run *r) {
  int64_t per = r->c.batch * dist_size();
  return (r->train.n + per - 1) / per;
}

/* A hash of the examples of ds (every column's bytes, in order): ranks
 * that read other data, under one file name or another, differ in it. */
static uint64_t data_hash(const Dataset *ds, bool has) {
  uint64_t h = MEM_FNV_BASIS;
  if (!has) return h;
  for (int i = 0; i < ds->ncols; i++) {
    const DataColumn *c = &ds->cols[i];
    size_t es = c->store == DATA_U8 || c->store == DATA_BYTE ? 1 : c->store == DATA_F32 ? 4 : 8;
    h = mem_fnv_step(h, ckpt_hash(c->data, (size_t)(ds->n * c->row) * es));
  }
  return h;
}

/* A hash of what trun_sync_model will broadcast (each value's name,
 * dtype and size): ranks that would send and receive other values (another
 * optimizer's state) must differ here before a broadcast is tried. */
static uint64_t sync_hash(const Run *r) {
  uint64_t h = MEM_FNV_BASIS;
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    bool held = v->flags & (VAR_PARAM | VAR_STATE) && strcmp(v->name, TRAIN_LR_VAR) != 0;
    Tensor *t = held ? exec_var_value(r->ex, v->name) : NULL;
    if (!t) continue;
    h = mem_fnv_str(h, v->name);
    h = mem_fnv_step(h, (uint64_t)t->dtype);
    h = mem_fnv_step(h, (uint64_t)t->numel);
  }
  return h;
}

/* What the ranks of one job must share, as one hash of fixed size that
 * they compare before anything else crosses between them: the program,
 * the optimizer and the settings that shape a step, the position a
 * checkpoint resumes from, the examples each read, and the values they
 * are about to broadcast. */
static uint64_t fingerprint(const Run *r) {
  double lr = r->c.lr;
  uint64_t v[] = {r->hash, (uint64_t)r->c.batch, (uint64_t)r->c.epochs, (uint64_t)r->train.n,
                  (uint64_t)r->step, 0, mem_fnv_str(MEM_FNV_BASIS, r->c.optimizer ? r->c.optimizer : ""),
                  data_hash(&r->train, r->has_train), data_hash(&r->test, r->has_test),
                  data_hash(&r->val, r->has_val), sync_hash(r)};
  memcpy(&v[5], &lr, sizeof lr);
  return ckpt_hash(v, sizeof v);
}

/* Every rank set up (and resumed) the same run; when one did not, every
 * rank stops, and says which (what: what the ranks do, "trains"...). */
bool trun_agree_start(Run *r, bool ok, const char *what) {
  int n = dist_size();
  DistReport mine = {.ok = ok, .tag = ok ? fingerprint(r) : 0}, sum, *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  bool same = dist_agree(&mine, &sum, all);
  char why[DIAG_FIRST_MAX + 2];
  int k = dist_odd_rank(all, same, why);
  mem_free(all);
  if (k < 0) return true;
  if (!same && ok)
    diag_error(NULL, SPAN_NONE, "rank %d of %d: rank %d could not start%s; stopping", dist_rank(), n, k, why);
  else if (same && dist_rank() == 0)
    diag_error(NULL, SPAN_NONE, "rank %d %s another program, settings, data or checkpoint than rank 0; stopping",
               k, what);
  trun_failure_agreed = true;
  return false;
}

/* Rank 0's parameters, optimizer state and generators on every rank: the
 * same model everywhere, whatever each rank initialised or read. */
void trun_sync_model(Run *r) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    const VarDesc *v = b0->vars[i];
    bool held = v->flags & (VAR_PARAM | VAR_STATE) && strcmp(v->name, TRAIN_LR_VAR) != 0;
    Tensor *t = held ? exec_var_value(r->ex, v->name) : NULL;
    if (t) dist_broadcast(t->data, (size_t)t->numel * dtype_size(t->dtype));
  }
  dist_broadcast(exec_rng(r->ex), sizeof *exec_rng(r->ex));
  dist_broadcast(&r->shuffle, sizeof r->shuffle);
  dist_broadcast(&r->shuffle_at_epoch, sizeof r->shuffle_at_epoch);
}

/* NETRUN_TEST_SLOW_STEP=R:S, for netrun's own tests only: rank R's first
 * step takes S seconds more, its main thread out of every collective, as
 * a large product or a slow disk would keep it; the other ranks wait for
 * it in the step's agreement.  Unset, or not of that form: nothing. */
static void test_slow_step(void) {
  static bool done;
  const char *v = getenv("NETRUN_TEST_SLOW_STEP");
  int rank;
  double s;
  if (done || !v || sscanf(v, "%d:%lf", &rank, &s) != 2 || rank != dist_rank() || !(s > 0 && s < 3600)) return;
  done = true;
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0) continue;
}

/* NETRUN_TEST_CUT=R:S, for netrun's own tests only: once the first
 * step's agreement is done, rank R stops as a rank whose link is cut S
 * seconds into the next collective wait (dist_test_cut): the other ranks
 * wait for it in the step's gradient sum, hearing it wait for S seconds
 * and then nothing.  Unset, or not of that form: nothing. */
static void test_cut(void) {
  const char *v = getenv("NETRUN_TEST_CUT");
  int rank;
  double s;
  if (!v || sscanf(v, "%d:%lf", &rank, &s) != 2 || rank != dist_rank() || !(s >= 0 && s < 3600)) return;
  dist_test_cut(s);
}

/* After a step's forward pass: the step's loss (the mean over every
 * rank's examples), correct predictions and examples in *st; this rank's
 * share of the examples, the weight of its gradients in the allreduce;
 * and the signal every rank stops for.  False (every rank stops) when a
 * rank's forward pass failed. */
bool trun_agree_step(Run *r, bool ok, Step *st) {
  int n = dist_size();
  test_slow_step();
  DistReport mine = {.loss = st->n ? st->loss * (double)st->n : 0, .hits = st->hits, .n = st->n, .ok = ok,
                 .sig = trun_stop_signal},
         sum, *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  bool every = dist_agree(&mine, &sum, all);
  char why[DIAG_FIRST_MAX + 2];
  int k = dist_odd_rank(all, false, why);
  mem_free(all);
  test_cut();
  if (!every) {
    if (ok) diag_error(NULL, SPAN_NONE, "rank %d of %d: step %lld failed on rank %d%s; stopping", dist_rank(), n,
                       (long long)r->step + 1, k, why);
    trun_failure_agreed = true;
    return false;
  }
  *st = (Step){sum.n ? sum.loss / (double)sum.n : (double)NAN, sum.hits, sum.n};
  tensor_f32(r->weight)[0] = (float)((double)mine.n / (double)(sum.n ? sum.n : 1));
  r->stop_sig = sum.sig;
  return true;
}

/* Whether the run stops after this step, and for which signal: on N
 * ranks, the one every rank agreed on at the step's forward pass. */
int trun_stop_sig(const Run *r) { return dist_size() > 1 ? r->stop_sig : trun_stop_signal; }

/* The hash of this rank's variables of `flags` (FNV-1a of their bytes,
 * in order): its parameters, or its script's states. */
static uint64_t vars_hash(Run *r, unsigned flags) {
  const Block *b0 = r->p->blocks[0];
  uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & flags ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t) h = (h ^ ckpt_hash(t->data, (size_t)t->numel * dtype_size(t->dtype))) * 1099511628211ull;
  }
  return h;
}

/* The script's f32 states (a batch normalisation's running mean and
 * variance), which each rank updates from its own shard: the mean over
 * the ranks (their sum in rank order, over N) on every rank, before an
 * evaluation or a checkpoint reads them. */
void trun_average_states(Run *r) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_KEPT ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (!t || t->dtype != DT_F32) continue;
    float *x = tensor_f32(t);
    dist_sum_f32(x, t->numel);
    for (int64_t k = 0; k < t->numel; k++) x[k] /= (float)dist_size();
  }
}

/* The script's states of a rank's step that counts for nothing (a shard's
 * stand-in example): copied before it, put back after, so that the
 * example a rank runs twice does not move its running statistics. */
Tensor **trun_save_states(Run *r) {
  const Block *b0 = r->p->blocks[0];
  Tensor **saved = mem_calloc((size_t)b0->nvars + 1, sizeof *saved);
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = b0->vars[i]->flags & VAR_KEPT ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t) saved[i] = tensor_copy(t);
  }
  return saved;
}
void trun_restore_states(Run *r, Tensor **saved) {
  const Block *b0 = r->p->blocks[0];
  for (int i = 0; i < b0->nvars; i++) {
    Tensor *t = saved[i] ? exec_var_value(r->ex, b0->vars[i]->name) : NULL;
    if (t && t->numel == saved[i]->numel && t->dtype == saved[i]->dtype)
      memcpy(t->data, saved[i]->data, (size_t)t->numel * dtype_size(t->dtype));
    tensor_unref(saved[i]);
  }
  mem_free(saved);
}

/* eval --confusion on N ranks: the sum of every rank's matrix (each
 * padded to the most classes one saw), on every rank. */
void trun_reduce_confusion(Confusion *c) {
  int n = dist_size();
  int64_t *ks = mem_alloc(NULL, sizeof *ks * (size_t)n), k = 0;
  dist_gather(&c->k, sizeof c->k, ks);
  for (int i = 0; i < n; i++) k = ks[i] > k ? ks[i] : k;
  mem_free(ks);
  if (k == 0) return;
  size_t kk = (size_t)(k * k);
  int64_t *mine = mem_calloc(kk, sizeof *mine), *all = mem_alloc(NULL, sizeof *all * kk * (size_t)n);
  for (int64_t i = 0; i < c->k; i++)
    for (int64_t j = 0; j < c->k; j++) mine[i * k + j] = c->m[i * c->k + j];
  dist_gather(mine, sizeof *mine * kk, all);
  memset(mine, 0, sizeof *mine * kk);
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < kk; i++) mine[i] += all[(size_t)r * kk + i];
  mem_free(all);
  mem_free(c->m);
  c->m = mine, c->k = k;
}

/* At an epoch's end on N ranks: every rank's parameters hash the same, or
 * the run stops (every rank says so).  The log records the hashes. */
bool trun_agree_params(Run *r) {
  int n = dist_size();
  DistReport mine = {.ok = 1, .tag = vars_hash(r, VAR_PARAM), .states = vars_hash(r, VAR_KEPT)}, sum,
             *all = mem_alloc(NULL, sizeof *all * (size_t)n);
  dist_agree(&mine, &sum, all);
  int k = dist_odd_rank(all, true, NULL);
  char list[1024] = "", states[1024] = "";
  for (int i = 0; i < n && strlen(list) + 24 < sizeof list; i++) {
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%016llx\"", i ? ", " : "",
             (unsigned long long)all[i].tag);
    snprintf(states + strlen(states), sizeof states - strlen(states), "%s\"%016llx\"", i ? ", " : "",
             (unsigned long long)all[i].states);
  }
  mem_free(all);
  trun_log_line(r, "{\"event\": \"ranks\", \"epoch\": %lld, \"ranks\": %d, \"param_hashes\": [%s], \"state_hashes\": [%s]}",
           (long long)r->epoch, n, list, states);
  if (k < 0) return true;
  diag_error(&r->ld.diag, SPAN_NONE,
             "after epoch %lld, rank %d's parameters differ from rank 0's (hashes %s); stopping",
             (long long)r->epoch, k, list);
  trun_failure_agreed = true;
  return false;
}

/* Under mpirun (eval and predict --data): MPI started, and the output of
 * every rank but rank 0 dropped.  False after an error. */
bool trun_ranks_start(void) {
  if (dist_launched() && !dist_start(NULL)) return false;
  return dist_rank() == 0 || freopen("/dev/null", "w", stdout);
}

/* Under mpirun: a rank's failure the others did not see ends them all
 * (they may wait for it in a collective); then MPI ends. */
int trun_ranks_stop(int status) {
  if (status && !trun_failure_agreed) dist_abort(status);
  dist_stop();
  return status;
}
