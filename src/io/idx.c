/* idx.c — LeCun's IDX files, read as an IMAGES:LABELS pair, and
 * Fashion-MNIST's four files (datafmt.h; data_formats' rows "idx" and
 * "fashion-mnist").  gzip or raw alike (zlib); each file is opened once
 * and checked on that descriptor (a regular file). */
#include "io/datafmt.h"

#include "base/file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- IDX ----------------------------------------------------------------------
 * The format of LeCun's MNIST files: a magic number 0x0000TTRR (T the
 * element type, R the number of dimensions), R big-endian u32 dimensions,
 * then the elements, row-major.  We read unsigned bytes (T = 0x08): images
 * are [N, ...] with R >= 2, labels [N]. */

typedef enum IdxRole { IDX_IMAGES, IDX_LABELS } IdxRole;

typedef struct IdxFile {
  const char *path;
  gzFile f;                    /* zlib reads gzip and raw files alike */
  IdxRole role;
  int rank;
  int64_t dims[SHAPE_MAX_RANK];
  int64_t numel;
} IdxFile;

static const char *idx_type_name(int t) {
  switch (t) {
  case 0x08: return "unsigned byte";
  case 0x09: return "signed byte";
  case 0x0B: return "16-bit integer";
  case 0x0C: return "32-bit integer";
  case 0x0D: return "32-bit float";
  case 0x0E: return "64-bit float";
  default: return NULL;
  }
}

static const char *idx_unit(const IdxFile *x) { return x->role == IDX_IMAGES ? "pixels" : "labels"; }

/* Reads up to n bytes into buf: the count read, or -1 if the file is corrupt
 * or unreadable (reported).  *cut: the gzip stream ended before its end. */
static int64_t idx_fill(Diag *d, IdxFile *x, void *buf, int64_t n, bool *cut) {
  int64_t got = 0;
  *cut = false;
  while (got < n) {
    unsigned want = n - got > (1 << 24) ? 1u << 24 : (unsigned)(n - got);
    int r = gzread(x->f, (char *)buf + got, want);
    if (r < 0) {
      int err;
      const char *msg = gzerror(x->f, &err);
      if (err == Z_ERRNO) data_file_error(d, x->path, "cannot read: %s", strerror(errno));
      else {
        const char *colon = strstr(msg, ": ");   /* zlib's message starts "<fd:N>: " */
        if (strncmp(msg, "<fd:", 4) == 0 && colon) msg = colon + 2;
        data_file_error(d, x->path, "corrupt gzip data (%s)", msg);
      }
      return -1;
    }
    got += r;
    if ((unsigned)r < want) {
      int err;
      gzerror(x->f, &err);
      *cut = err == Z_BUF_ERROR;
      break;
    }
  }
  return got;
}

static const char *cut_note(bool cut) { return cut ? " (the gzip stream is cut short)" : ""; }

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void idx_close(IdxFile *x) {
  if (x->f) gzclose(x->f);
  x->f = NULL;
}

/* Opens an IDX file and reads and checks its header. */
static bool idx_open(Diag *d, const char *path, IdxRole role, IdxFile *x) {
  memset(x, 0, sizeof *x);
  x->path = path;
  x->role = role;
  char why[256];
  int fd = file_open_regular(path, why, sizeof why);   /* one open: a FIFO is refused, not waited on */
  if (fd < 0) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return false;
  }
  errno = 0;
  x->f = gzdopen(fd, "rb");
  if (!x->f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(errno ? errno : ENOMEM));
    close(fd);
    return false;
  }
  gzbuffer(x->f, 1 << 17);
  const uint32_t want = role == IDX_IMAGES ? 0x803 : 0x801;
  const char *what = role == IDX_IMAGES ? "images" : "labels";
  uint8_t h[4 + 4 * SHAPE_MAX_RANK];
  bool cut;
  int64_t got = idx_fill(d, x, h, 4, &cut);
  if (got < 0) goto fail;
  if (got == 0 && !cut) {
    data_file_error(d, path, "empty file: expected IDX %s (magic number 0x%08x)", what, want);
    goto fail;
  }
  if (got < 4) {
    data_file_error(d, path, "truncated: a 4-byte IDX magic number expected, %" PRId64 " found%s", got, cut_note(cut));
    goto fail;
  }
  uint32_t magic = be32(h);
  int type = h[2], rank = h[3];
  if (h[0] || h[1] || !idx_type_name(type) || rank == 0) {
    data_file_error(d, path, "not an IDX file: magic number 0x%08x, expected 0x%08x (%s)", magic, want,
               role == IDX_IMAGES ? "images: unsigned bytes, 3 dimensions" : "labels: unsigned bytes, 1 dimension");
    goto fail;
  }
  if (type != 0x08) {
    data_file_error(d, path, "IDX elements of type 0x%02x (%s) are not supported: expected 0x08 (unsigned byte)", type,
               idx_type_name(type));
    goto fail;
  }
  if (role == IDX_LABELS && rank != 1) {
    data_file_error(d, path, "expected labels (IDX magic 0x00000801), found magic 0x%08x: %d dimensions, like images",
               magic, rank);
    goto fail;
  }
  if (role == IDX_IMAGES && rank == 1) {
    data_file_error(d, path, "expected images (IDX magic 0x00000803), found magic 0x%08x: 1 dimension, like labels",
               magic);
    goto fail;
  }
  if (rank > SHAPE_MAX_RANK) {
    data_file_error(d, path, "IDX magic 0x%08x: %d dimensions, more than netrun's %d", magic, rank, SHAPE_MAX_RANK);
    goto fail;
  }
  got = idx_fill(d, x, h + 4, 4 * rank, &cut);
  if (got < 0) goto fail;
  if (got < 4 * rank) {
    data_file_error(d, path, "truncated: a %d-byte IDX header expected, %" PRId64 " bytes found%s", 4 + 4 * rank,
               4 + got, cut_note(cut));
    goto fail;
  }
  x->rank = rank;
  double product = 1;
  bool empty = false;
  for (int i = 0; i < rank; i++) {
    x->dims[i] = be32(h + 4 + 4 * i);
    product *= (double)x->dims[i];
    empty |= x->dims[i] == 0;
  }
  char dims[256];
  data_dims_str(rank, x->dims, dims, sizeof dims);
  if (empty) {
    data_file_error(d, path, "%s: dims %s", x->dims[0] ? "empty examples" : "no examples", dims);
    goto fail;
  }
  /* Whole columns must stay allocatable as tensors (f32 pixels, i64 labels). */
  int64_t limit = TENSOR_MAX_BYTES / (role == IDX_IMAGES ? 4 : 8);
  if (product > (double)limit) {
    data_file_error(d, path, "dims %s are too large: %.4g %s, more than netrun's limit of %" PRId64, dims, product,
               idx_unit(x), limit);
    goto fail;
  }
  x->numel = (int64_t)product;
  return true;
fail:
  idx_close(x);
  return false;
}

/* An IDX file's elements as they arrive: the buffer grows with them, so a
 * header that lies about a huge size costs memory only for the bytes
 * really there. */
typedef struct IdxRead {
  uint8_t *buf;
  int64_t cap, got;
  bool cut;
} IdxRead;

/* Reads x's elements up to the upto-th (at most its numel); false, with
 * the error, if the file holds fewer. */
static bool idx_more(Diag *d, IdxFile *x, IdxRead *r, int64_t upto) {
  while (r->got < upto) {
    if (r->got == r->cap) {
      r->cap = r->cap < (1 << 20) ? (1 << 20) : r->cap < x->numel / 2 ? r->cap * 2 : x->numel;
      if (r->cap > x->numel) r->cap = x->numel;
      r->buf = mem_alloc(r->buf, (size_t)r->cap);
    }
    int64_t want = (upto < r->cap ? upto : r->cap) - r->got;
    int64_t k = idx_fill(d, x, r->buf + r->got, want, &r->cut);
    if (k < 0) return false;
    r->got += k;
    if (k < want) {
      data_file_error(d, x->path, "truncated: %" PRId64 " bytes of %s expected, %" PRId64 " found%s", x->numel,
                 idx_unit(x), r->got, cut_note(r->cut));
      return false;
    }
  }
  return true;
}

/* After the elements: nothing may follow, and a gzip stream must end whole.
 * Trailing bytes are counted up to IDX_MAX_TRAILING, so a file padded
 * with gigabytes of compressed zeros is not decompressed to the end. */
#define IDX_MAX_TRAILING ((int64_t)1 << 20)
static bool idx_end(Diag *d, IdxFile *x, IdxRead *r) {
  uint8_t extra[4096];
  int64_t more = 0, k;
  do {
    if ((k = idx_fill(d, x, extra, sizeof extra, &r->cut)) < 0) return false;
    more += k;
  } while (k == (int64_t)sizeof extra && more <= IDX_MAX_TRAILING);
  if (more) {
    data_file_error(d, x->path, "trailing data: %s%" PRId64 " bytes after the %" PRId64 " bytes of %s its header announces",
               more > IDX_MAX_TRAILING ? "more than " : "", more > IDX_MAX_TRAILING ? IDX_MAX_TRAILING : more,
               x->numel, idx_unit(x));
    return false;
  }
  if (r->cut) {
    data_file_error(d, x->path, "truncated: the gzip stream ends before its checksum");
    return false;
  }
  return true;
}

/* Reads the images and the labels in step, a block of examples at a time
 * (labels first), so a header that lies about the count (a 27-byte label
 * file announcing 2^30 labels) is caught after reading only as many
 * examples of the other file as the liar really holds.  What the headers
 * announce must fit the memory limit before anything is decompressed:
 * the pixels, the labels and their i64 copy (*charged, which the dataset
 * keeps, is the pixels and that copy). */
static bool idx_read_pair(Diag *d, IdxFile *xi, IdxFile *xl, uint8_t **pix, uint8_t **lab, int64_t *charged) {
  int64_t n = xi->dims[0], row = xi->numel / n;
  int64_t need = xi->numel + xl->numel + 8 * n;
  if (!mem_charge(need)) {
    char why[256], dims[256];
    data_dims_str(xi->rank - 1, xi->dims + 1, dims, sizeof dims);
    diag_error(d, SPAN_NONE, "out of memory: %s:%s: %" PRId64 " images of %s and their labels: %s", xi->path,
               xl->path, n, dims, mem_limit_why((double)need, why, sizeof why));
    return false;
  }
  IdxRead ri = {0}, rl = {0};
  bool ok = true;
  int64_t step = (1 << 16) / row + 1;
  for (int64_t done = 0; ok && done < n; step *= 2) {
    done = step < n - done ? done + step : n;
    ok = idx_more(d, xl, &rl, done) && idx_more(d, xi, &ri, done * row);
  }
  ok = ok && idx_end(d, xl, &rl) && idx_end(d, xi, &ri);
  if (!ok) {
    mem_free(ri.buf);
    mem_free(rl.buf);
    mem_uncharge(need);
    return false;
  }
  mem_uncharge(xl->numel);   /* the u8 labels live only until copied */
  *pix = ri.buf;
  *lab = rl.buf;
  *charged = need - xl->numel;
  return true;
}

static bool open_idx_pair(Diag *d, const char *images, const char *labels, Dataset *ds) {
  IdxFile xi, xl;
  if (!idx_open(d, images, IDX_IMAGES, &xi)) return false;
  if (!idx_open(d, labels, IDX_LABELS, &xl)) {
    idx_close(&xi);
    return false;
  }
  bool ok = false;
  uint8_t *pix = NULL, *lab = NULL;
  if (xi.dims[0] != xl.dims[0]) {
    data_file_error(d, labels, "%" PRId64 " labels, but %s holds %" PRId64 " images", xl.dims[0], images, xi.dims[0]);
  } else {
    ok = idx_read_pair(d, &xi, &xl, &pix, &lab, &ds->charged);
  }
  idx_close(&xi);
  idx_close(&xl);
  if (!ok) return false;
  ds->n = xi.dims[0];
  ds->files[0] = arena_strdup(&ds->arena, images);
  ds->files[1] = arena_strdup(&ds->arena, labels);
  ds->nfiles = 2;
  DataColumn *c = &ds->cols[DATA_INPUT];
  c->name = "images";
  c->dtype = DT_F32;
  c->store = DATA_U8;
  c->rank = xi.rank;
  memcpy(c->shape, xi.dims, sizeof xi.dims);
  c->row = xi.numel / ds->n;
  c->data = pix;
  c = &ds->cols[DATA_LABEL];
  c->name = "labels";
  c->dtype = DT_I64;
  c->store = DATA_I64;
  c->rank = 1;
  c->shape[0] = ds->n;
  c->row = 1;
  int64_t *y = mem_alloc(NULL, sizeof *y * (size_t)ds->n);
  for (int64_t i = 0; i < ds->n; i++) y[i] = lab[i];
  mem_free(lab);
  c->data = y;
  ds->ncols = 2;
  return true;
}

/* ---- Fashion-MNIST ---------------------------------------------------------------
 * Found in $NETRUN_DATA, then where Debian's dataset-fashion-mnist installs
 * it; each file gzipped (as shipped) or not.  A split is read from the first
 * folder holding either of its files, so images and labels never come from
 * two places. */

static const char *find_file(Arena *a, const char *dir, const char *base) {
  static const char *const ext[] = {".gz", ""};
  for (int i = 0; i < 2; i++) {
    char *p = arena_printf(a, "%s/%s%s", dir, base, ext[i]);
    struct stat st;
    if (stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) return p;
  }
  return NULL;
}

static bool open_fashion(Diag *d, const char *split, Dataset *ds) {
  bool test = split && strcmp(split, "test") == 0;
  if (split && !test && strcmp(split, "train") != 0) {
    data_file_error(d, "fashion-mnist", "no split '%s': its splits are train and test", split);
    return false;
  }
  ds->split = test ? "test" : "train";
  const char *base[2] = {test ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte",
                         test ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte"};
  const char *env = getenv("NETRUN_DATA");
  const char *dirs[2];
  int ndirs = 0;
  if (env && *env) dirs[ndirs++] = env;
  dirs[ndirs++] = DATA_FASHION_DIR;
  for (int i = 0; i < ndirs; i++) {
    const char *img = find_file(&ds->arena, dirs[i], base[0]);
    const char *lab = find_file(&ds->arena, dirs[i], base[1]);
    if (img && lab) return open_idx_pair(d, img, lab, ds);
    if (img || lab) {
      data_file_error(d, dirs[i], "holds %s but not %s.gz (nor %s)", img ? img : lab, base[img ? 1 : 0],
                 base[img ? 1 : 0]);
      return false;
    }
  }
  if (env && *env)
    data_file_error(d, "fashion-mnist", "%s.gz not found in $NETRUN_DATA (%s) nor in %s", base[0], env,
               DATA_FASHION_DIR);
  else
    data_file_error(d, "fashion-mnist",
               "%s.gz not found in %s (install Debian's dataset-fashion-mnist, or set NETRUN_DATA to a folder "
               "holding the files)",
               base[0], DATA_FASHION_DIR);
  return false;
}

bool data_idx_sniff(const DataProbe *p) {
  const uint8_t *t = p->head;
  return p->nhead >= 4 && t[0] == 0 && t[1] == 0 && t[2] == 8;
}

/* The ':' splitting IMAGES:LABELS: the first whose left part is a file (paths
 * may hold colons), else the first. */
static const char *pair_colon(Arena *a, const DataOptions *opt, const char *spec) {
  const char *first = strchr(spec, ':');
  for (const char *c = first; c; c = strchr(c + 1, ':')) {
    struct stat st;
    if (stat(data_in_dir(a, opt, arena_strndup(a, spec, (size_t)(c - spec))), &st) == 0) return c;
  }
  return first;
}

bool data_idx_open(Diag *d, DataProbe *p, Dataset *ds) {
  Arena *a = &ds->arena;
  const DataOptions *opt = p->opt;
  const char *spec = p->spec, *colon = pair_colon(a, opt, spec);
  const char *images = data_in_dir(a, opt, arena_strndup(a, spec, (size_t)(colon - spec)));
  if (opt->label) {
    data_file_error(d, spec, "an IDX pair's label column is fixed ('labels'); only a CSV file's can be chosen");
    return false;
  }
  return data_only_csv_columns(d, spec, opt) && open_idx_pair(d, images, data_in_dir(a, opt, colon + 1), ds);
}

bool data_fashion_open(Diag *d, DataProbe *p, Dataset *ds) {
  if (p->opt->label) {
    data_file_error(d, p->spec, "its label column is fixed ('labels'); only a CSV file's can be chosen");
    return false;
  }
  return data_only_csv_columns(d, p->spec, p->opt) && open_fashion(d, p->opt->split, ds);
}
