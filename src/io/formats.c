/* formats.c — the table of data formats (data.h, data_formats): what a
 * spec or a file is, and which reader reads it; the readers of .npz
 * archives, text files and image folders as datasets (their files' own
 * readers are npy.c, text.c and image.c; IDX and CSV are idx.c and
 * csv.c).  Adding a format: its reader's file, and a row here. */
#include "io/datafmt.h"
#include "io/image.h"
#include "io/npy.h"
#include "io/text.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* ---- NumPy .npz ---------------------------------------------------------------------
 * One column per array, named like it; npy.c reads and checks each.  An
 * array's memory is counted against the limit before it is read. */

typedef struct NpzLoad {
  Dataset *ds;
} NpzLoad;

static bool npz_column(void *ctx, const char *name, const NpyHeader *h, NpyIn *in, char *why, size_t n) {
  Dataset *ds = ((NpzLoad *)ctx)->ds;
  char shape[256];
  data_dims_str(h->rank, h->shape, shape, sizeof shape);
  if (ds->ncols == DATA_MAX_COLS) {
    snprintf(why, n, "one array too many: a dataset feeds at most %d inputs", DATA_MAX_COLS);
    return false;
  }
  if (h->rank < 1 || h->shape[0] == 0) {
    snprintf(why, n, "shape %s: a dataset's arrays are [N, ...], N >= 1 examples", shape);
    return false;
  }
  if (ds->ncols && h->shape[0] != ds->n) {
    snprintf(why, n, "shape %s: %" PRId64 " examples, but array '%s' has %" PRId64, shape, h->shape[0],
             ds->cols[0].name, ds->n);
    return false;
  }
  bool f = h->type == NPY_F32 || h->type == NPY_F64, byte = h->type == NPY_U8 || h->type == NPY_BOOL;
  NpyType to = f ? NPY_F32 : byte ? NPY_U8 : NPY_I64;
  int64_t bytes = h->numel * npy_size(to);
  if (!mem_charge(bytes)) {
    char lim[256];
    snprintf(why, n, "out of memory: shape %s %s: %s", shape, npy_name(h->type),
             mem_limit_why((double)bytes, lim, sizeof lim));
    return false;
  }
  void *data = mem_alloc(NULL, bytes ? (size_t)bytes : 1);
  if (!npy_read_data(in, h, to, data, why, n)) {
    mem_free(data);
    mem_uncharge(bytes);
    return false;
  }
  ds->charged += bytes;
  ds->n = h->shape[0];
  DataColumn *c = &ds->cols[ds->ncols++];
  c->name = arena_strdup(&ds->arena, name);
  c->dtype = f ? DT_F32 : DT_I64;
  c->store = f ? DATA_F32 : byte ? DATA_BYTE : DATA_I64;
  c->rank = h->rank;
  memcpy(c->shape, h->shape, sizeof h->shape);
  c->row = h->numel / h->shape[0];
  c->data = data;
  c->source = npy_name(h->type);
  return true;
}

static bool open_npz(Diag *d, DataProbe *p, Dataset *ds) {
  int fd = p->fd;
  p->fd = -1;
  NpzLoad L = {ds};
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, p->path);
  ds->named = true;
  if (!data_only_csv_columns(d, p->spec, p->opt)) {
    close(fd);
    return false;
  }
  if (!npy_each_fd(d, fd, p->path, npz_column, &L)) return false;
  if (ds->ncols == 0) {
    data_file_error(d, p->path, "an archive without arrays");
    return false;
  }
  return true;
}

/* Column `name` of ds: windows [n, t] of bytes, gathered as i64. */
static void text_column(Dataset *ds, const char *name, uint8_t *bytes, int64_t n, int64_t t) {
  DataColumn *c = &ds->cols[ds->ncols++];
  c->name = name;
  c->dtype = DT_I64;
  c->store = DATA_BYTE;
  c->rank = 2;
  c->shape[0] = n, c->shape[1] = t;
  c->row = t;
  c->data = bytes;
  c->source = "bytes";
}

/* A text file's windows (text.h) as columns x and y. */
static bool open_text(Diag *d, DataProbe *p, Dataset *ds) {
  const DataOptions *opt = p->opt;
  if (opt->label) {
    data_file_error(d, p->spec, "text data has no label column: y is the next byte");
    return false;
  }
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, p->path);
  ds->split = opt->split ? arena_strdup(&ds->arena, opt->split) : NULL;
  TextWindows w;
  if (!text_windows(d, p->path, opt->context, opt->split, &w)) return false;
  ds->n = w.n;
  ds->charged += w.charged;
  text_column(ds, "x", w.x, w.n, w.context);
  text_column(ds, "y", w.y, w.n, w.context);
  return true;
}

/* ---- image folders ------------------------------------------------------------- */

/* The normalization of opt (one value per channel) into column c. */
static bool image_norm(Diag *d, const char *spec, const DataOptions *opt, DataColumn *c) {
  for (int k = 0; k < 2; k++) {
    int n = k ? opt->nstd : opt->nmean;
    const double *v = k ? opt->std : opt->mean;
    if (n && n != c->channels) {
      data_file_error(d, spec, "%s = [...] has %d value%s, but the images are read with %d channel%s: give one per channel",
                 k ? "std" : "mean", n, n == 1 ? "" : "s", c->channels, c->channels == 1 ? "" : "s");
      return false;
    }
    for (int i = 0; i < c->channels; i++) (k ? c->std : c->mean)[i] = n ? (float)v[i] : (float)k;
  }
  c->normalized = opt->nmean || opt->nstd;
  return true;
}

/* A folder of class folders of PNG or JPEG files (image.h) as the columns
 * images (u8 [N, C, H, W]) and labels (i64 [N], the class numbers). */
static bool open_images(Diag *d, DataProbe *p, Dataset *ds) {
  const char *spec = p->spec, *path = p->path;
  const DataOptions *opt = p->opt;
  if (!data_only_csv_columns(d, spec, opt)) return false;
  if (opt->label) {
    data_file_error(d, spec, "an image folder's labels are its class folders; only a CSV file's label column can be chosen");
    return false;
  }
  if (opt->channels && opt->channels != 1 && opt->channels != 3) {
    data_file_error(d, spec, "images are read with 1 channel (grey) or 3 (RGB), but the input fed takes %d", opt->channels);
    return false;
  }
  ImageSet im;
  ImageShape want = {opt->channels, opt->height, opt->width};
  if (!image_folder(d, &ds->arena, path, want, &im)) return false;
  ds->n = im.n;
  ds->charged = im.charged;
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, path);
  ds->classes = im.classes;
  ds->nclasses = im.nclasses;
  ds->ids = arena_alloc(&ds->arena, sizeof *ds->ids * (size_t)im.n);
  for (int64_t i = 0; i < im.n; i++) ds->ids[i] = im.files[i] + strlen(path) + 1;
  DataColumn *c = &ds->cols[DATA_INPUT];
  *c = (DataColumn){.name = "images", .dtype = DT_F32, .store = DATA_U8, .rank = 4, .channels = im.channels,
                    .shape = {im.n, im.channels, im.height, im.width}, .data = im.pixels};
  c->row = im.channels * im.height * im.width;
  c = &ds->cols[DATA_LABEL];
  *c = (DataColumn){.name = "labels", .dtype = DT_I64, .store = DATA_I64, .rank = 1, .shape = {im.n}, .row = 1,
                    .data = im.labels};
  ds->ncols = 2;
  return image_norm(d, spec, opt, &ds->cols[DATA_INPUT]);
}

/* Columns chosen by name (opt->columns, opt->labels) are a CSV file's:
 * with other data, an error, not ignored. */
bool data_only_csv_columns(Diag *d, const char *spec, const DataOptions *opt) {
  if (!opt->ncolumns && !opt->nlabels) return true;
  data_file_error(d, spec, "%s chooses a CSV file's columns by name; this data is not a CSV file",
             opt->ncolumns ? "columns = [...]" : "label = [...]");
  return false;
}

/* ---- the table ---------------------------------------------------------------- */

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

static bool is_text(const DataProbe *p) { return p->opt && p->opt->context != 0; }
static bool is_fashion(const DataProbe *p) { return strcmp(p->spec, "fashion-mnist") == 0; }
static bool is_folder(const DataProbe *p) { return p->folder; }
/* IMAGES:LABELS: no file of that name, and a colon. */
static bool is_pair(const DataProbe *p) { return !p->exists && strchr(p->spec, ':'); }
/* A .npz: named so, or a ZIP archive by its first bytes. */
static bool is_npz(const DataProbe *p) {
  return p->exists && !p->folder && (ends_with(p->path, ".npz") || npy_is_zip(p->head, p->nhead));
}
static bool is_npy(const DataProbe *p) { return p->exists && npy_is_npy(p->head, p->nhead); }
static bool is_idx(const DataProbe *p) { return p->exists && data_idx_sniff(p); }
static bool is_file(const DataProbe *p) { return p->exists && !p->folder; }

/* In order: the first row whose sniff says yes is the format.  Names and
 * options first (text, fashion-mnist), then what the file system says
 * (a folder, a pair's name that is no file), then the file's first bytes;
 * CSV takes every other file. */
const DataFormat data_formats[] = {
    {"text", is_text, open_text, NULL, DATA_BY_NAME | DATA_SPLITS | DATA_LABEL_COLUMN, NULL},
    {"fashion-mnist", is_fashion, data_fashion_open, NULL, DATA_BY_NAME | DATA_SPLITS, NULL},
    {"images", is_folder, open_images, NULL, DATA_LABEL_COLUMN, NULL},
    {"idx", is_pair, data_idx_open, NULL, 0, NULL},
    {"npz", is_npz, open_npz, npy_feed_fd, 0, NULL},
    {"npy", is_npy, NULL, npy_feed_fd, DATA_LABEL_COLUMN,
     "a NumPy .npy file: --feed reads it; a dataset is a .npz archive of one array per input (numpy.savez)"},
    {"idx-file", is_idx, NULL, NULL, DATA_LABEL_COLUMN, "an IDX file: name IDX files as a pair, IMAGES:LABELS"},
    {"csv", is_file, data_csv_open, data_csv_feed, DATA_LABEL_COLUMN, NULL},
};
const int data_nformats = (int)(sizeof data_formats / sizeof *data_formats);

const DataFormat *data_format_find(const DataProbe *p) {
  for (int i = 0; i < data_nformats; i++)
    if (data_formats[i].sniff(p)) return &data_formats[i];
  return NULL;
}
