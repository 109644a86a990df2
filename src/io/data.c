/* data.c — datasets (data.h): opening one through the table of formats
 * (formats.c; the readers are idx.c, csv.c, npy.c, text.c, image.c),
 * choosing and splitting its columns, batches (with the images'
 * normalization and augmentation), and fitting a batch to a script's
 * input.  (`netrun data` is dataverb.c.)
 *
 * Everything is read whole, once.  IDX pixels stay u8 and are scaled to f32
 * when a batch is gathered (a 256-entry table), so memory holds the data as
 * compactly as the file does; labels and CSV values are small or already
 * numbers and are kept as i64 / f32. */
#include "io/data.h"

#include "base/file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void data_file_error(Diag *d, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror_in(d, SPAN_NONE, path, fmt, ap);
  va_end(ap);
}

const char *data_dims_str(int rank, const int64_t *dims, char *buf, size_t n) {
  Shape s = shape_of(rank, dims);
  return shape_str(&s, buf, n);
}

static const char *input_name(const VarDesc *v) { return v->user_name ? v->user_name : v->name; }

bool data_select(Diag *d, Dataset *ds, const VarDesc *const *inputs, int n) {
  if (!ds->named) return true;
  int pick[DATA_MAX_COLS];
  bool used[DATA_MAX_COLS] = {false};
  char have[1024] = "", fed[1024] = "";
  for (int c = 0; c < ds->ncols; c++)
    snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", c ? ", " : "", ds->cols[c].name);
  for (int k = 0; k < n; k++)
    snprintf(fed + strlen(fed), sizeof fed - strlen(fed), "%s%s", k ? ", " : "", input_name(inputs[k]));
  if (n > DATA_MAX_COLS) {
    data_file_error(d, ds->files[0], "%d inputs fed (%s): a dataset feeds at most %d", n, fed, DATA_MAX_COLS);
    return false;
  }
  for (int k = 0; k < n; k++) {
    pick[k] = -1;
    for (int c = 0; c < ds->ncols && pick[k] < 0; c++)
      if (strcmp(ds->cols[c].name, input_name(inputs[k])) == 0) pick[k] = c;
    if (pick[k] < 0) {
      data_file_error(d, ds->files[0], "no array '%s' for the input of that name (its arrays: %s)", input_name(inputs[k]),
                 have);
      return false;
    }
    used[pick[k]] = true;
  }
  for (int c = 0; c < ds->ncols; c++)
    if (!used[c]) {
      data_file_error(d, ds->files[0], "array '%s' feeds no input (the inputs fed: %s; a train block's feed = [...] "
                 "names them)", ds->cols[c].name, fed);
      return false;
    }
  DataColumn cols[DATA_MAX_COLS];
  for (int k = 0; k < n; k++) cols[k] = ds->cols[pick[k]];
  memcpy(ds->cols, cols, sizeof *cols * (size_t)n);
  ds->ncols = n;
  return true;
}

/* ---- datasets --------------------------------------------------------------------- */

/* path as data_open reads it: from opt->dir when it is relative. */
const char *data_in_dir(Arena *a, const DataOptions *opt, const char *path) {
  if (!opt->dir || !*opt->dir || path[0] == '/') return path;
  return arena_printf(a, "%s/%s", opt->dir, path);
}

/* Specs that name no file: a text file read as windows (its context
 * decides), or a dataset netrun knows by name (fashion-mnist). */
static bool is_named(const DataProbe *p) {
  const DataFormat *f = data_format_find(p);
  return f && (f->flags & DATA_BY_NAME);
}

/* What every example costs beyond its bytes, charged with the dataset so
 * that examples of zero bytes (a .npz of shape [2^62, 0]) are paid for too:
 * the batcher's order of them (data_batcher_init), 8 bytes each. */
static bool charge_order(Diag *d, const char *spec, Dataset *ds) {
  int64_t bytes;
  const int each = (int)sizeof(int64_t);
  if (!mem_mul_size(ds->n, each, &bytes)) {
    mem_limit_reached();
    data_file_error(d, spec, "out of memory: %" PRId64 " examples: the batches' order of them takes %d bytes each, more "
               "than netrun can count (--max-memory)", ds->n, each);
    return false;
  }
  if (!mem_charge(bytes)) {
    char lim[256];
    data_file_error(d, spec, "out of memory: %" PRId64 " examples: the batches' order of them takes %d bytes each: %s",
               ds->n, each, mem_limit_why((double)bytes, lim, sizeof lim));
    return false;
  }
  ds->charged += bytes;
  return true;
}

/* What stat says of p->path (no bytes read). */
static void probe_stat(DataProbe *p) {
  struct stat st;
  p->exists = stat(p->path, &st) == 0;
  p->folder = p->exists && S_ISDIR(st.st_mode);
}

const DataFormat *data_format_of(const char *spec, const DataOptions *opt) {
  static const DataOptions none = {0};
  if (!opt) opt = &none;
  Arena a;
  arena_init(&a);
  DataProbe p = {.spec = spec, .path = data_in_dir(&a, opt, spec), .opt = opt, .fd = -1};
  if (!is_named(&p)) probe_stat(&p);
  const DataFormat *f = data_format_find(&p);
  arena_free(&a);
  return f;
}

bool data_open(Diag *d, const char *spec, const DataOptions *opt, Dataset *out) {
  static const DataOptions none = {0};
  if (!opt) opt = &none;
  memset(out, 0, sizeof *out);
  arena_init(&out->arena);
  out->name = arena_strdup(&out->arena, spec);
  DataProbe p = {.spec = spec, .path = data_in_dir(&out->arena, opt, spec), .opt = opt, .fd = -1};
  const DataFormat *f = NULL;
  char why[256] = "";
  bool ok = true;
  if (is_named(&p)) {
    f = data_format_find(&p);
  } else if (opt->split) {
    data_file_error(d, spec, "no split '%s': only fashion-mnist has splits", opt->split);
    ok = false;
  } else {
    /* One open: the file read is the one checked (a regular file), and
     * its first bytes tell its format. */
    p.fd = file_open_regular(p.path, why, sizeof why);
    if (p.fd >= 0) {
      ssize_t k = pread(p.fd, p.head, sizeof p.head, 0);
      p.nhead = k > 0 ? (size_t)k : 0;
      p.exists = true;
    } else {
      probe_stat(&p);
    }
    /* a FIFO, a device or an unreadable file is nothing: why says what */
    f = p.fd >= 0 || !p.exists || p.folder ? data_format_find(&p) : NULL;
  }
  if (ok && !f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", p.path, why);
    ok = false;
  } else if (ok && !f->open) {
    data_file_error(d, p.path, "%s", f->refuse);
    ok = false;
  } else if (ok) {
    out->format = f;
    ok = f->open(d, &p, out);
  }
  if (p.fd >= 0) close(p.fd);
  if (ok) ok = charge_order(d, spec, out);
  if (ok && (opt->nmean || opt->nstd) && !out->cols[DATA_INPUT].channels) {
    data_file_error(d, spec, "mean and std normalize an image folder's channels; this data is not an image folder");
    ok = false;
  }
  if (!ok) data_free(out);
  return ok;
}

void data_free(Dataset *ds) {
  for (int i = 0; i < ds->ncols; i++) mem_free(ds->cols[i].data);
  mem_uncharge(ds->charged);
  arena_free(&ds->arena);
  memset(ds, 0, sizeof *ds);
}

int64_t data_bytes(const Dataset *ds) {
  int64_t bytes = 0;
  for (int i = 0; i < ds->ncols; i++) {
    const DataColumn *c = &ds->cols[i];
    bytes += ds->n * c->row * (c->store == DATA_U8 || c->store == DATA_BYTE ? 1 : c->store == DATA_F32 ? 4 : 8);
  }
  return bytes;
}

const DataColumn *data_column(const Dataset *ds, const char *name) {
  for (int i = 0; i < ds->ncols; i++)
    if (strcmp(ds->cols[i].name, name) == 0) return &ds->cols[i];
  return NULL;
}

/* The bytes one element of a column's store takes. */
static size_t store_size(DataStore s) { return s == DATA_U8 || s == DATA_BYTE ? 1 : s == DATA_F32 ? 4 : 8; }

bool data_split(Diag *d, Dataset *ds, int64_t nval, Rng *rng, Dataset *val) {
  memset(val, 0, sizeof *val);
  int64_t n = ds->n;
  bool *held = mem_alloc(NULL, (size_t)n);
  memset(held, 0, (size_t)n);
  Batcher b;
  data_batcher_init(&b, ds, 1, false);
  data_epoch(&b, rng);
  for (int64_t i = 0; i < nval; i++) held[b.order[i]] = true;
  data_batcher_free(&b);
  int64_t bytes = 0;
  for (int k = 0; k < ds->ncols; k++) bytes += nval * ds->cols[k].row * (int64_t)store_size(ds->cols[k].store);
  if (!mem_charge(bytes)) {
    char why[256];
    diag_error(d, SPAN_NONE, "out of memory: the validation split's %lld examples: %s", (long long)nval,
               mem_limit_why((double)bytes, why, sizeof why));
    mem_free(held);
    return false;
  }
  arena_init(&val->arena);
  val->name = arena_printf(&val->arena, "%s (validation)", ds->name ? ds->name : "data");
  val->n = nval;
  val->ncols = ds->ncols;
  val->named = ds->named;
  val->charged = bytes;
  for (int k = 0; k < ds->ncols; k++) {
    DataColumn *c = &ds->cols[k], *v = &val->cols[k];
    *v = *c;
    v->name = arena_strdup(&val->arena, c->name);
    v->source = c->source ? arena_strdup(&val->arena, c->source) : NULL;
    size_t row = (size_t)c->row * store_size(c->store);
    v->data = mem_alloc(NULL, row * (size_t)(nval ? nval : 1));
    char *src = c->data, *kept = c->data, *out = v->data;
    for (int64_t i = 0; i < n; i++) {   /* both keep the rows' order */
      if (held[i]) memcpy(out, src + (size_t)i * row, row), out += row;
      else memmove(kept, src + (size_t)i * row, row), kept += row;
    }
    v->shape[0] = nval;
    c->shape[0] = n - nval;
  }
  if (ds->ids) {   /* the kept examples' paths, in order (the held-out ones' are not kept) */
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++)
      if (!held[i]) ds->ids[j++] = ds->ids[i];
  }
  ds->n = n - nval;
  mem_free(held);
  return true;
}

/* ---- gathering and batches -------------------------------------------------------- */

/* A generator for one example's augmentation: seeded by the seed, the
 * epoch and the example alone (data.h). */
static void augment_rng(Rng *g, const DataAugment *aug, int64_t example) {
  uint64_t x = aug->seed ^ 0x9e3779b97f4a7c15ull * (uint64_t)(aug->epoch + 1);
  x ^= 0xbf58476d1ce4e5b9ull * (uint64_t)(example + 1);
  rng_seed(g, x);
}

static uint64_t below(Rng *r, uint64_t n);

/* Image rows idx[0..k) of c: each pixel through its channel's table
 * (value / 255 then normalized), shifted by the crop and mirrored by the
 * flip that aug draws for the example (none without aug).  Pixels shifted
 * in from outside read 0. */
static void gather_images(const DataColumn *c, const int64_t *idx, int64_t k, const DataAugment *aug, float *o) {
  float table[3][256];
  for (int ch = 0; ch < c->channels; ch++)
    for (int v = 0; v < 256; v++) table[ch][v] = c->normalized ? ((float)v / 255.0f - c->mean[ch]) / c->std[ch] : (float)v / 255.0f;
  int64_t h = c->shape[2], w = c->shape[3], plane = h * w;
  for (int64_t i = 0; i < k; i++) {
    int64_t dy = 0, dx = 0;
    bool mirror = false;
    if (aug && (aug->flip || aug->crop_pad)) {
      Rng g;
      augment_rng(&g, aug, idx[i]);
      uint64_t span = (uint64_t)(2 * aug->crop_pad + 1);
      dy = (int64_t)below(&g, span) - aug->crop_pad;
      dx = (int64_t)below(&g, span) - aug->crop_pad;
      mirror = aug->flip && (rng_next(&g) >> 63);
    }
    const uint8_t *src = (const uint8_t *)c->data + idx[i] * c->row;
    float *dst = o + i * c->row;
    for (int ch = 0; ch < c->channels; ch++)
      for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
          int64_t sy = y + dy, sx = (mirror ? w - 1 - x : x) + dx;
          uint8_t v = sy >= 0 && sy < h && sx >= 0 && sx < w ? src[ch * plane + sy * w + sx] : 0;
          dst[ch * plane + y * w + x] = table[ch][v];
        }
  }
}

Tensor *data_gather(const DataColumn *c, const int64_t *idx, int64_t k) { return data_gather_aug(c, idx, k, NULL); }

Tensor *data_gather_aug(const DataColumn *c, const int64_t *idx, int64_t k, const DataAugment *aug) {
  if (c->channels && (c->normalized || aug)) {
    int64_t shape[SHAPE_MAX_RANK];
    memcpy(shape, c->shape, sizeof shape);
    shape[0] = k;
    Tensor *t = tensor_new(c->dtype, c->rank, shape);
    gather_images(c, idx, k, aug, tensor_f32(t));
    return t;
  }
  float scale[256];   /* byte -> f32 in [0, 1], each correctly rounded */
  for (int i = 0; i < 256; i++) scale[i] = (float)i / 255.0f;
  int64_t shape[SHAPE_MAX_RANK];
  memcpy(shape, c->shape, sizeof shape);
  shape[0] = k;
  Tensor *t = tensor_new(c->dtype, c->rank, shape);
  int64_t row = c->row;
  if (c->store == DATA_U8) {
    const uint8_t *src = c->data;
    float *o = tensor_f32(t);
    for (int64_t i = 0; i < k; i++) {
      const uint8_t *r = src + idx[i] * row;
      float *dst = o + i * row;
      for (int64_t j = 0; j < row; j++) dst[j] = scale[r[j]];
    }
  } else if (c->store == DATA_BYTE) {
    const uint8_t *src = c->data;
    int64_t *o = tensor_i64(t);
    for (int64_t i = 0; i < k; i++)
      for (int64_t j = 0; j < row; j++) o[i * row + j] = src[idx[i] * row + j];
  } else {
    size_t bytes = (size_t)row * (c->store == DATA_F32 ? sizeof(float) : sizeof(int64_t));
    const char *src = c->data;
    char *o = t->data;
    for (int64_t i = 0; i < k; i++) memcpy(o + (size_t)i * bytes, src + (size_t)idx[i] * bytes, bytes);
  }
  return t;
}

void data_batcher_init(Batcher *b, const Dataset *ds, int64_t size, bool drop_last) {
  b->ds = ds;
  b->size = size > 0 ? size : 1;
  b->drop_last = drop_last;
  b->order = mem_calloc((size_t)(ds->n ? ds->n : 1), sizeof *b->order);   /* charged with ds (charge_order) */
  b->n = b->pos = ds->n;
  b->epoch = 0;
  memset(&b->aug, 0, sizeof b->aug);
}

void data_batcher_free(Batcher *b) {
  mem_free(b->order);
  b->order = NULL;
}

/* Uniform in [0, n), without modulo bias. */
static uint64_t below(Rng *r, uint64_t n) {
  uint64_t reject = (0 - n) % n;   /* 2^64 mod n: below it, x % n would be biased */
  uint64_t x;
  do x = rng_next(r);
  while (x < reject);
  return x % n;
}

void data_epoch(Batcher *b, Rng *rng) {
  int64_t n = b->ds->n;
  for (int64_t i = 0; i < n; i++) b->order[i] = i;
  if (rng)
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)below(rng, (uint64_t)i + 1);
      int64_t t = b->order[i];
      b->order[i] = b->order[j];
      b->order[j] = t;
    }
  b->n = n;
  b->pos = 0;
  b->epoch++;
}

void data_shard(Batcher *b, int rank, int ranks) {
  int64_t k = 0;
  for (int64_t i = rank; i < b->n; i += ranks) b->order[k++] = b->order[i];
  b->n = k;
}

int64_t data_batches(const Batcher *b) {
  int64_t n = b->n;
  return b->drop_last ? n / b->size : n / b->size + (n % b->size != 0);
}

bool data_next(Batcher *b, Batch *out) {
  memset(out, 0, sizeof *out);
  int64_t left = b->n - b->pos;
  if (left <= 0 || (b->drop_last && left < b->size)) return false;
  out->n = left < b->size ? left : b->size;
  out->index = b->order + b->pos;
  bool aug = b->aug.flip || b->aug.crop_pad;
  for (int c = 0; c < b->ds->ncols; c++)
    out->cols[c] = data_gather_aug(&b->ds->cols[c], out->index, out->n, aug ? &b->aug : NULL);
  b->pos += out->n;
  return true;
}

void data_skip(Batcher *b, int64_t k) {
  int64_t left = b->n - b->pos;
  b->pos = k >= 0 && k <= left / b->size ? b->pos + k * b->size : b->n;
}

void data_batch_release(Batch *bt) {
  for (int c = 0; c < DATA_MAX_COLS; c++) tensor_unref(bt->cols[c]);
  memset(bt, 0, sizeof *bt);
}

/* ---- fitting a batch to an input ----------------------------------------------------- */

bool data_fit_shape(Diag *d, const DataColumn *c, const VarDesc *decl, int64_t b, int64_t *shape) {
  const Shape *s = &decl->shape;
  const char *name = decl->user_name ? decl->user_name : decl->name;
  char want[256], have[256];
  shape_str(s, want, sizeof want);
  Shape cs = shape_of(c->rank, c->shape);
  shape_str(&cs, have, sizeof have);
  if (decl->dtype == DT_BOOL || (decl->dtype == DT_I64 && c->dtype == DT_F32)) {
    diag_error(d, decl->span, "input '%s' is declared %s%s, but column '%s' holds %s values", name,
               dtype_name(decl->dtype), want, c->name, dtype_name(c->dtype));
    return false;
  }
  if (s->rank < 1) {
    diag_error(d, decl->span,
               "input '%s' is declared %s%s, but a batch of column '%s' %s needs a first dimension for its examples",
               name, dtype_name(decl->dtype), want, c->name, have);
    return false;
  }
  if (s->d[0].n >= 0 && s->d[0].n != b) {
    diag_error(d, decl->span,
               "input '%s' is declared %s%s: batches of %" PRId64 ", but this batch of column '%s' holds %" PRId64
               " examples",
               name, dtype_name(decl->dtype), want, s->d[0].n, c->name, b);
    return false;
  }
  int64_t known = 1;
  int unknown = 0, at = -1;
  for (int i = 1; i < s->rank; i++) {
    if (s->d[i].n >= 0) known *= s->d[i].n;
    else unknown++, at = i;
  }
  shape[0] = b;
  for (int i = 1; i < s->rank; i++) shape[i] = s->d[i].n;
  bool fits = false;
  if (unknown == 0) {
    fits = known == c->row;
  } else if (s->rank == c->rank) {
    fits = true;   /* the same rank: unknown dims take the column's */
    for (int i = 1; i < s->rank && fits; i++) {
      if (s->d[i].n < 0) shape[i] = c->shape[i];
      else fits = s->d[i].n == c->shape[i];
    }
  }
  if (!fits && unknown == 1 && known > 0 && c->row % known == 0) {
    for (int i = 1; i < s->rank; i++) shape[i] = s->d[i].n;
    shape[at] = c->row / known;
    fits = true;
  }
  if (!fits) {
    char per[64];
    if (unknown == 0) snprintf(per, sizeof per, "%" PRId64 " values per example", known);
    else if (unknown == 1) snprintf(per, sizeof per, "a multiple of %" PRId64 " values per example", known);
    else snprintf(per, sizeof per, "%d dimensions to infer", unknown);
    diag_error(d, decl->span,
               "input '%s' is declared %s%s (%s), but column '%s' has shape %s (%" PRId64 " values per example)",
               name, dtype_name(decl->dtype), want, per, c->name, have, c->row);
    return false;
  }
  return true;
}

Tensor *data_fit(Diag *d, const DataColumn *c, Tensor *t, const VarDesc *decl) {
  int64_t shape[SHAPE_MAX_RANK];
  if (!data_fit_shape(d, c, decl, t->shape[0], shape)) return NULL;
  Tensor *cast = tensor_cast(t, decl->dtype);
  Tensor *v = tensor_view(cast, decl->shape.rank, shape);
  tensor_unref(cast);
  return v;
}

