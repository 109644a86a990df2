/* dataverb.c — `netrun data SPEC`: what a dataset holds (its files,
 * columns, classes or label range), an epoch through the batcher as the
 * trainer takes it (--batch), its first examples as a batch holds them
 * (--head, with training's augmentation), and how its columns fit a
 * script's inputs (--fit).  The datasets themselves are data.c's. */
#include "cli/cli.h"
#include "cli/cmd.h"
#include "io/data.h"
#include "cli/option.h"
#include "exec/print.h"
#include "front/session.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct DataArgs {
  const char *spec, *fit;
  DataOptions opt;
  int64_t head, batch;
  uint64_t seed;
  bool shuffle, drop_last;
  DataAugment aug;             /* --flip, --crop-pad: what training does to the --head images */
} DataArgs;

/* Stores the option p just returned; 0 or EXIT_USAGE. */
static int data_option(const OptionParser *p, int id, DataArgs *a) {
  const char *v = p->value;
  int64_t n;
  switch (id) {
  case O_SPLIT:
    if (strcmp(v, "train") != 0 && strcmp(v, "test") != 0) return option_bad(p);
    a->opt.split = v;
    break;
  case O_LABEL:
    if (!*v) return option_bad(p);
    a->opt.label = v;
    break;
  case O_HEAD: return option_int(p, 1, &a->head) ? 0 : EXIT_USAGE;
  case O_BATCH: return option_int(p, 1, &a->batch) ? 0 : EXIT_USAGE;
  case O_SEED:
    if (!option_int(p, 0, &n)) return EXIT_USAGE;
    a->seed = (uint64_t)n;
    break;
  case O_SHUFFLE: a->shuffle = true; break;
  case O_DROP_LAST: a->drop_last = true; break;
  case O_FIT: a->fit = v; break;
  case O_CONTEXT: return option_int(p, 1, &a->opt.context) ? 0 : EXIT_USAGE;
  case O_FLIP: a->aug.flip = true; break;
  case O_MAX_MEMORY:
    if (!mem_parse_size(v, &n)) return option_bad(p);
    tensor_set_memory_limit(n);
    break;
  case O_SHAPE: {
    long long c, h, w;
    char end;
    if (sscanf(v, "%lld,%lld,%lld%c", &c, &h, &w, &end) != 3 || (c != 1 && c != 3) || h < 1 || w < 1 || h > 1 << 20 ||
        w > 1 << 20)
      return option_bad(p);
    a->opt.channels = (int)c, a->opt.height = h, a->opt.width = w;
    break;
  }
  case O_CROP_PAD:
    if (!option_int(p, 0, &n) || n > 1 << 20) return option_bad(p);
    a->aug.crop_pad = n;
    break;
  }
  return 0;
}

static int data_args(int argc, char **argv, DataArgs *a) {
  memset(a, 0, sizeof *a);
  OptionParser p;
  cli_option_init(&p, argc, argv, OPT_DATA, "data: ");
  int id, rc = 0;
  while (!rc && (id = option_next(&p)) != OPTION_END) {
    if (id == OPTION_ERROR) rc = EXIT_USAGE;
    else if (id == OPTION_ARG && a->spec) rc = diag_usage("data takes one SPEC, got a second: '%s'", p.value);
    else if (id == OPTION_ARG) a->spec = p.value;
    else rc = data_option(&p, id, a);
  }
  if (rc) return rc;
  if (!a->spec) return diag_usage("data needs a SPEC: fashion-mnist, IMAGES:LABELS or a CSV file");
  if (a->drop_last && !a->batch) return diag_usage("data: --drop-last needs --batch");
  if ((a->aug.flip || a->aug.crop_pad) && !a->head) return diag_usage("data: --flip and --crop-pad need --head");
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The count of each value of an integer column. */
static void print_classes(const DataColumn *c, int64_t n) {
  int64_t *v = mem_alloc(NULL, sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = c->store == DATA_BYTE ? ((const uint8_t *)c->data)[i] : ((const int64_t *)c->data)[i];
  qsort(v, (size_t)n, sizeof *v, cmp_i64);
  int64_t distinct = 0;
  for (int64_t i = 0; i < n; i++) distinct += i == 0 || v[i] != v[i - 1];
  printf("classes %" PRId64 "\n", distinct);
  if (distinct <= 100)
    for (int64_t i = 0, j; i < n; i = j) {
      for (j = i; j < n && v[j] == v[i]; j++) {}
      printf("class %" PRId64 " %" PRId64 "\n", v[i], j - i);
    }
  mem_free(v);
}

static void print_tensor(const char *name, const Tensor *t) {
  printf("%s\n", name);
  print_write(stdout, t, -1);
  putchar('\n');
}

static int data_describe(const DataArgs *a, const Dataset *ds) {
  /* names from outside, printed with their control characters escaped */
  fputs("dataset ", stdout), diag_put_escaped(stdout, ds->name), putchar('\n');
  if (ds->split) printf("split %s\n", ds->split);
  for (int i = 0; i < ds->nfiles; i++) fputs("file ", stdout), diag_put_escaped(stdout, ds->files[i]), putchar('\n');
  printf("examples %" PRId64 "\n", ds->n);
  for (int i = 0; i < ds->ncols; i++) {
    const DataColumn *c = &ds->cols[i];
    char shape[256];
    Shape cs = shape_of(c->rank, c->shape);
    shape_str(&cs, shape, sizeof shape);
    printf("column %s %s %s", c->name, dtype_name(c->dtype), shape);
    if (c->store == DATA_U8) printf(" from u8 scaled to [0, 1]%s", c->normalized ? ", normalized" : "");
    else if (c->source) printf(" from %s", c->source);
    putchar('\n');
  }
  /* The labels: the last column (of a .npz, when it holds one value per example). */
  const DataColumn *y = ds->ncols >= 2 && ds->cols[ds->ncols - 1].rank == 1 ? &ds->cols[ds->ncols - 1] : NULL;
  if (ds->classes) {
    printf("classes %d\n", ds->nclasses);
    const int64_t *lab = ds->cols[DATA_LABEL].data;
    for (int k = 0, i = 0; k < ds->nclasses; k++) {
      int64_t count = 0;
      for (; i < ds->n && lab[i] == k; i++) count++;
      printf("class %d ", k), diag_put_escaped(stdout, ds->classes[k]), printf(" %" PRId64 "\n", count);
    }
  } else if (y && y->store != DATA_F32) {
    print_classes(y, ds->n);
  } else if (y) {
    const float *v = y->data;
    float lo = v[0], hi = v[0];
    for (int64_t i = 1; i < ds->n; i++) lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    printf("range %s %.9g %.9g\n", y->name, (double)lo, (double)hi);
  }
  if (a->batch) {
    /* An epoch through the batcher, as a trainer takes it. */
    Rng rng;
    rng_seed(&rng, a->seed);
    Batcher b;
    data_batcher_init(&b, ds, a->batch, a->drop_last);
    data_epoch(&b, a->shuffle ? &rng : NULL);
    uint8_t *seen = mem_calloc((size_t)ds->n, 1);
    int64_t nb = 0, last = 0, total = 0;
    Batch bt;
    while (data_next(&b, &bt)) {
      for (int64_t i = 0; i < bt.n; i++) seen[bt.index[i]]++;
      nb++;
      last = bt.n;
      total += bt.n;
      data_batch_release(&bt);
    }
    assert(nb == data_batches(&b));
    for (int64_t i = 0; i < ds->n; i++) assert(seen[i] <= 1);
    mem_free(seen);
    printf("batches %" PRId64 " of %" PRId64, nb, a->batch);
    if (total < ds->n) printf(", dropping the last %" PRId64, ds->n - total);
    else if (last != a->batch) printf(", the last of %" PRId64, last);
    putchar('\n');
    data_batcher_free(&b);
  }
  if (a->head) {
    Rng rng;
    rng_seed(&rng, a->seed);
    Batcher b;
    data_batcher_init(&b, ds, a->head, false);
    b.aug = a->aug;
    b.aug.seed = a->seed ^ DATA_AUGMENT_SEED;
    data_epoch(&b, a->shuffle ? &rng : NULL);
    Batch bt;
    data_next(&b, &bt);
    if (a->shuffle) printf("head %" PRId64 " shuffled with seed %" PRIu64 "\n", bt.n, a->seed);
    else printf("head %" PRId64 "\n", bt.n);
    Tensor *index = tensor_new(DT_I64, 1, &bt.n);
    memcpy(index->data, bt.index, sizeof(int64_t) * (size_t)bt.n);
    print_tensor("index", index);
    tensor_unref(index);
    for (int i = 0; i < ds->ncols; i++) print_tensor(ds->cols[i].name, bt.cols[i]);
    data_batch_release(&bt);
    data_batcher_free(&b);
  }
  return 0;
}

/* --fit: each column feeds the input of its name, or else the inputs not
 * taken by name, in declaration order. */
static int data_fit_script(const DataArgs *a, const Dataset *ds) {
  Session ld;
  if (!session_load(&ld, a->fit)) {
    session_free(&ld);
    return EXIT_SCRIPT;
  }
  const Block *top = ld.prog->blocks[0];
  const VarDesc *inputs[64];
  bool taken[64] = {0};
  int ninputs = 0;
  for (int i = 0; i < top->nvars && ninputs < 64; i++)
    if (top->vars[i]->flags & VAR_INPUT) inputs[ninputs++] = top->vars[i];
  int by_col[DATA_MAX_COLS];
  for (int c = 0; c < ds->ncols; c++) {
    by_col[c] = -1;
    for (int i = 0; i < ninputs; i++)
      if (inputs[i]->user_name && strcmp(inputs[i]->user_name, ds->cols[c].name) == 0) by_col[c] = i, taken[i] = true;
  }
  for (int c = 0, next = 0; c < ds->ncols; c++) {
    while (by_col[c] < 0 && next < ninputs) {
      if (!taken[next]) by_col[c] = next, taken[next] = true;
      next++;
    }
  }
  int64_t b = a->batch && a->batch < ds->n ? a->batch : ds->n;
  Batcher bat;
  data_batcher_init(&bat, ds, b, false);
  data_epoch(&bat, NULL);
  Batch bt;
  data_next(&bat, &bt);
  bool ok = true;
  for (int c = 0; c < ds->ncols; c++) {
    const DataColumn *col = &ds->cols[c];
    if (by_col[c] < 0) {
      printf("fit %s: no input of %s takes it\n", col->name, a->fit);
      continue;
    }
    const VarDesc *v = inputs[by_col[c]];
    Tensor *t = data_fit(&ld.diag, col, bt.cols[c], v);
    if (!t) {
      ok = false;
      continue;
    }
    char want[256], got[256];
    printf("fit %s %s%s takes %s as %s%s\n", v->user_name ? v->user_name : v->name, dtype_name(v->dtype),
           shape_str(&v->shape, want, sizeof want), col->name, dtype_name(t->dtype),
           tensor_shape_str(t, got, sizeof got));
    fflush(stdout);   /* in order with the errors of the next inputs */
    tensor_unref(t);
  }
  data_batch_release(&bt);
  data_batcher_free(&bat);
  diag_finish(&ld.diag);
  session_free(&ld);
  return ok ? 0 : EXIT_SCRIPT;
}

int cmd_data(int argc, char **argv) {
  DataArgs a;
  int rc = data_args(argc, argv, &a);
  if (rc) return rc;
  Arena arena;
  arena_init(&arena);
  Diag d;
  diag_init(&d, &arena);
  Dataset ds;
  if (!data_open(&d, a.spec, &a.opt, &ds)) {
    diag_finish(&d);
    arena_free(&arena);
    return EXIT_SCRIPT;
  }
  if ((a.aug.flip || a.aug.crop_pad) && !ds.cols[DATA_INPUT].channels) {
    diag_error(&d, SPAN_NONE, "data: --flip and --crop-pad augment an image folder's images; %s is not one", a.spec);
    diag_finish(&d);
    data_free(&ds);
    arena_free(&arena);
    return EXIT_SCRIPT;
  }
  rc = data_describe(&a, &ds);
  fflush(stdout);
  if (!rc && a.fit) rc = data_fit_script(&a, &ds);
  data_free(&ds);
  arena_free(&arena);
  return rc;
}
