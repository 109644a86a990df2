/* data.c — datasets (data.h): the IDX and CSV readers, Fashion-MNIST's
 * files, .npz archives (through npy.c), image folders (through image.c),
 * batches (with the images' normalization and augmentation), and fitting a
 * batch to a script's input.  (`netrun data` is dataverb.c.)
 *
 * Everything is read whole, once.  IDX pixels stay u8 and are scaled to f32
 * when a batch is gathered (a 256-entry table), so memory holds the data as
 * compactly as the file does; labels and CSV values are small or already
 * numbers and are kept as i64 / f32. */
#include "io/data.h"
#include "io/image.h"
#include "io/text.h"

#include "base/file.h"
#include "io/npy.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

/* "netrun: error: FILE: message": errors about a whole file, or a binary one
 * (there is no line to show). */
static void file_error(Diag *d, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void file_error(Diag *d, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror_in(d, SPAN_NONE, path, fmt, ap);
  va_end(ap);
}

/* The same words diag_load_file uses. */
static void cannot_read(Diag *d, const char *path, int err) {
  diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(err));
}

/* False (reported) unless path names a readable regular file: a FIFO
 * would block the read, a device (/dev/zero) stream forever (file.h). */
static bool regular_file(Diag *d, const char *path) {
  char why[256];
  if (file_check_regular(path, why, sizeof why)) return true;
  diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
  return false;
}

static const char *dims_str(int rank, const int64_t *dims, char *buf, size_t n) {
  Shape s = shape_of(rank, dims);
  return shape_str(&s, buf, n);
}

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
      if (err == Z_ERRNO) file_error(d, x->path, "cannot read: %s", strerror(errno));
      else {
        size_t len = strlen(x->path);   /* zlib's message starts "PATH: " */
        if (strncmp(msg, x->path, len) == 0 && strncmp(msg + len, ": ", 2) == 0) msg += len + 2;
        file_error(d, x->path, "corrupt gzip data (%s)", msg);
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
  if (!regular_file(d, path)) return false;
  errno = 0;
  x->f = gzopen(path, "rb");
  if (!x->f) {
    cannot_read(d, path, errno ? errno : ENOMEM);
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
    file_error(d, path, "empty file: expected IDX %s (magic number 0x%08x)", what, want);
    goto fail;
  }
  if (got < 4) {
    file_error(d, path, "truncated: a 4-byte IDX magic number expected, %" PRId64 " found%s", got, cut_note(cut));
    goto fail;
  }
  uint32_t magic = be32(h);
  int type = h[2], rank = h[3];
  if (h[0] || h[1] || !idx_type_name(type) || rank == 0) {
    file_error(d, path, "not an IDX file: magic number 0x%08x, expected 0x%08x (%s)", magic, want,
               role == IDX_IMAGES ? "images: unsigned bytes, 3 dimensions" : "labels: unsigned bytes, 1 dimension");
    goto fail;
  }
  if (type != 0x08) {
    file_error(d, path, "IDX elements of type 0x%02x (%s) are not supported: expected 0x08 (unsigned byte)", type,
               idx_type_name(type));
    goto fail;
  }
  if (role == IDX_LABELS && rank != 1) {
    file_error(d, path, "expected labels (IDX magic 0x00000801), found magic 0x%08x: %d dimensions, like images",
               magic, rank);
    goto fail;
  }
  if (role == IDX_IMAGES && rank == 1) {
    file_error(d, path, "expected images (IDX magic 0x00000803), found magic 0x%08x: 1 dimension, like labels",
               magic);
    goto fail;
  }
  if (rank > SHAPE_MAX_RANK) {
    file_error(d, path, "IDX magic 0x%08x: %d dimensions, more than netrun's %d", magic, rank, SHAPE_MAX_RANK);
    goto fail;
  }
  got = idx_fill(d, x, h + 4, 4 * rank, &cut);
  if (got < 0) goto fail;
  if (got < 4 * rank) {
    file_error(d, path, "truncated: a %d-byte IDX header expected, %" PRId64 " bytes found%s", 4 + 4 * rank,
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
  dims_str(rank, x->dims, dims, sizeof dims);
  if (empty) {
    file_error(d, path, "%s: dims %s", x->dims[0] ? "empty examples" : "no examples", dims);
    goto fail;
  }
  /* Whole columns must stay allocatable as tensors (f32 pixels, i64 labels). */
  int64_t limit = TENSOR_MAX_BYTES / (role == IDX_IMAGES ? 4 : 8);
  if (product > (double)limit) {
    file_error(d, path, "dims %s are too large: %.4g %s, more than netrun's limit of %" PRId64, dims, product,
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
      file_error(d, x->path, "truncated: %" PRId64 " bytes of %s expected, %" PRId64 " found%s", x->numel,
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
    file_error(d, x->path, "trailing data: %s%" PRId64 " bytes after the %" PRId64 " bytes of %s its header announces",
               more > IDX_MAX_TRAILING ? "more than " : "", more > IDX_MAX_TRAILING ? IDX_MAX_TRAILING : more,
               x->numel, idx_unit(x));
    return false;
  }
  if (r->cut) {
    file_error(d, x->path, "truncated: the gzip stream ends before its checksum");
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
    dims_str(xi->rank - 1, xi->dims + 1, dims, sizeof dims);
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
    file_error(d, labels, "%" PRId64 " labels, but %s holds %" PRId64 " images", xl.dims[0], images, xi.dims[0]);
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
    file_error(d, "fashion-mnist", "no split '%s': its splits are train and test", split);
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
      file_error(d, dirs[i], "holds %s but not %s.gz (nor %s)", img ? img : lab, base[img ? 1 : 0],
                 base[img ? 1 : 0]);
      return false;
    }
  }
  if (env && *env)
    file_error(d, "fashion-mnist", "%s.gz not found in $NETRUN_DATA (%s) nor in %s", base[0], env,
               DATA_FASHION_DIR);
  else
    file_error(d, "fashion-mnist",
               "%s.gz not found in %s (install Debian's dataset-fashion-mnist, or set NETRUN_DATA to a folder "
               "holding the files)",
               base[0], DATA_FASHION_DIR);
  return false;
}

/* ---- CSV ---------------------------------------------------------------------- */

/* A CSV field's value: as a double, and exactly as an integer when it was
 * written as one that fits in 64 bits (is_int). */
typedef struct CsvNum {
  double v;
  int64_t i;
  bool is_int;
} CsvNum;

/* A number filling [s, end) but for blanks; false if it is not one.  An
 * integer is read as an integer (strtoll: exact past 2^53); others with
 * strtod, where an underflow (1e-999) reads as 0 or a denormal, and an
 * overflow (1e999) as an infinity the caller refuses. */
static bool parse_number(const char *s, const char *end, CsvNum *out) {
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
  if (s == end || memchr(s, 0, (size_t)(end - s))) return false;
  size_t n = (size_t)(end - s);
  char small[128];
  char *buf = n < sizeof small ? small : mem_alloc(NULL, n + 1);   /* zero-padded numbers can be long */
  memcpy(buf, s, n);
  buf[n] = 0;
  char *stop;
  const char *p = buf + (*buf == '-' || *buf == '+');
  bool digits = *p >= '0' && *p <= '9';
  while (*p >= '0' && *p <= '9') p++;
  errno = 0;
  out->is_int = digits && !*p && (out->i = strtoll(buf, &stop, 10), errno == 0 && !*stop);
  bool ok = true;
  if (out->is_int) {
    out->v = (double)out->i;
  } else {
    errno = 0;
    out->v = strtod(buf, &stop);
    ok = stop != buf && !*stop && (errno != ERANGE || fabs(out->v) <= DBL_MIN || isinf(out->v));
  }
  if (buf != small) mem_free(buf);
  return ok;
}

bool data_csv_sniff(Diag *d, const char *path, int file, const char *gzip) {
  const Source *src = &d->files[file];
  const uint8_t *t = (const uint8_t *)src->text;
  size_t n = src->len;
  if (n >= 6 && memcmp(t, "\x93NUMPY", 6) == 0)
    file_error(d, path, "a NumPy .npy file: --feed reads it; a dataset is a .npz archive of one array per input "
               "(numpy.savez)");
  else if (n >= 2 && t[0] == 0x1f && t[1] == 0x8b)
    file_error(d, path, "a gzip file: %s", gzip);
  else if (n >= 4 && t[0] == 0 && t[1] == 0 && t[2] == 8)
    file_error(d, path, "an IDX file: name IDX files as a pair, IMAGES:LABELS");
  else if ((n >= 2 && ((t[0] == 0xff && t[1] == 0xfe) || (t[0] == 0xfe && t[1] == 0xff))) ||
           (n >= 2 && ((t[0] == 0 && t[1] != 0) || (t[0] != 0 && t[1] == 0))))
    file_error(d, path, "a UTF-16 file: CSV files are read as UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)");
  else
    return true;
  return false;
}

static Span span_of(int file, const Source *src, const char *b, const char *e) {
  return (Span){file, (uint32_t)(b - src->text), (uint32_t)(e - src->text)};
}

static char *field_name(Arena *a, const Source *src, Span s);

/* A data-row field [f, fe) of column c that is not a number: empty (a
 * missing value) or text, named by its header column (else its index). */
static void not_a_number(Diag *d, const CsvScan *s, const Source *src, const char *f, const char *fe, int64_t c) {
  Span at = span_of(s->file, src, f, fe);
  const char *col = s->header.file >= 0 && c < s->nnames
                        ? arena_printf(d->arena, "'%s'", field_name(d->arena, src, s->names[c]))
                        : arena_printf(d->arena, "%" PRId64, c);
  const char *text = field_name(d->arena, src, at);
  if (!*text) {
    diag_error(d, at, "column %s has a missing value", col);
    return;
  }
  diag_error(d, at, "column %s holds '%s', not a number: CSV columns are read as numbers (text is not encoded "
             "as categories)%s%s", col, text, s->text_hint ? "; " : "", s->text_hint ? s->text_hint : "");
}

bool data_csv_scan(Diag *d, CsvScan *s) {
  const Source *src = &d->files[s->file];
  const char *nul = memchr(src->text, 0, src->len);
  if (nul) {
    diag_error(d, span_of(s->file, src, nul, nul + 1), "a NUL byte: a CSV file is text");
    return false;
  }
  double *vals = NULL;
  int64_t *ints = NULL;
  bool *isint = NULL;
  int64_t cap = 0;
  s->rows = 0;
  s->cols = -1;
  s->header = SPAN_NONE;
  s->names = NULL;
  s->nnames = 0;
  bool ok = true;
  for (int line = 0; line < src->nlines && ok; line++) {
    const char *b = src->text + src->line_starts[line];
    const char *e = line + 1 < src->nlines ? src->text + src->line_starts[line + 1] - 1 : src->text + src->len;
    const char *t = b;
    while (t < e && (*t == ' ' || *t == '\t' || *t == '\r')) t++;
    if (t == e) continue;
    int64_t c = 0;
    bool header = false;
    for (const char *f = b;; c++) {
      const char *comma = memchr(f, ',', (size_t)(e - f));
      const char *fe = comma ? comma : e;
      CsvNum v = {0};
      if (s->header.file >= 0 && c < s->nskip && s->skip[c]) {
        /* a column not read */
      } else if (!parse_number(f, fe, &v)) {
        if (s->cols < 0 && s->header.file < 0) {
          header = true;   /* the first row: a header */
        } else {
          not_a_number(d, s, src, f, fe, c);
          ok = false;
          break;
        }
      } else if (!isfinite(v.v)) {
        diag_error(d, span_of(s->file, src, f, fe), "not a finite number");
        ok = false;
        break;
      } else if (!v.is_int && !isfinite((float)v.v)) {
        diag_error(d, span_of(s->file, src, f, fe), "not a finite f32 number (f32 holds magnitudes up to 3.4e38)");
        ok = false;
        break;
      }
      if (c == cap) {
        cap = cap ? cap * 2 : 64;
        vals = mem_alloc(vals, sizeof *vals * (size_t)cap);
        ints = mem_alloc(ints, sizeof *ints * (size_t)cap);
        isint = mem_alloc(isint, sizeof *isint * (size_t)cap);
      }
      vals[c] = v.v;
      ints[c] = v.i;
      isint[c] = v.is_int;
      if (!comma) break;
      f = comma + 1;
    }
    if (!ok) break;
    Span row = span_of(s->file, src, b, e);
    if (header) {
      s->header = row;
      s->nnames = c + 1;
      s->names = arena_alloc(d->arena, sizeof *s->names * (size_t)s->nnames);
      const char *f = b;
      for (int64_t i = 0; i < s->nnames; i++) {
        const char *comma = memchr(f, ',', (size_t)(e - f));
        const char *fe = comma ? comma : e;
        s->names[i] = span_of(s->file, src, f, fe);
        f = comma ? comma + 1 : e;
      }
      if (s->on_header && !s->on_header(s->ctx)) ok = false;
      continue;
    }
    if (s->cols >= 0 && c + 1 != s->cols) {
      diag_error(d, row, "this row has %" PRId64 " values, the rows before have %" PRId64, c + 1, s->cols);
      ok = false;
      break;
    }
    s->cols = c + 1;
    s->rows++;
    s->ints = ints;
    s->isint = isint;
    if (s->row && !s->row(s->ctx, row, vals, c + 1)) ok = false;
  }
  s->ints = NULL;
  s->isint = NULL;
  mem_free(vals);
  mem_free(ints);
  mem_free(isint);
  return ok;
}

/* A CSV file as a dataset: the label column "y", the others "x". */
typedef struct CsvLoad {
  Diag *d;
  const char *path;
  Dataset *ds;
  CsvScan scan;
  const char *label;           /* the option */
  const DataOptions *opt;      /* columns and labels by name */
  int64_t ycol;                /* the label's column: -1 until the first row */
  int64_t *xcols, nxc;         /* the columns x holds, once chosen */
  int64_t *ycols, nyc;         /* the label columns (ycols[0] == ycol) */
  bool *skip;                  /* the columns not read */
  float *x;
  double *y;
  int64_t *yi;                 /* the labels as integers, while all are (yint) */
  bool yint;
  int64_t nx, capx, ny, capy;
  int64_t charged;             /* bytes of x, y and yi counted against the memory limit */
} CsvLoad;

/* A header field as a name: without blanks or enclosing double quotes, its
 * control characters escaped (\x1b), as names are printed to a terminal. */
static char *field_name(Arena *a, const Source *src, Span s) {
  const char *b = src->text + s.start, *e = src->text + s.end;
  while (b < e && (*b == ' ' || *b == '\t')) b++;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
  if (e - b >= 2 && *b == '"' && e[-1] == '"') b++, e--;
  char *name = arena_alloc(a, (size_t)(e - b) * 4 + 1), *o = name;
  for (; b < e; b++) {
    unsigned char ch = (unsigned char)*b;
    if (ch < 0x20 || ch == 0x7f) o += sprintf(o, "\\x%02x", ch);
    else *o++ = (char)ch;
  }
  *o = 0;
  return name;
}

/* The columns cols[0, total), by name ("a, b, c") or index ("columns 0, 1,
 * 2"); a long list shows its first three and its last. */
static const char *columns_str(CsvLoad *L, const int64_t *cols, int64_t total) {
  const Source *src = &L->d->files[L->scan.file];
  bool header = L->scan.header.file >= 0;
  int64_t pick[6], np = 0;
  for (int64_t i = 0; i < total && np < (total <= 6 ? 6 : 3); i++) pick[np++] = cols[i];
  if (total > 6) pick[np++] = cols[total - 1];
  char buf[512];
  size_t k = (size_t)snprintf(buf, sizeof buf, "%s", header ? "" : total > 1 ? "columns " : "column ");
  for (int64_t j = 0; j < np && k < sizeof buf; j++) {
    const char *sep = j == 0 ? "" : total > 6 && j == np - 1 ? ", ..., " : ", ";
    if (header)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", sep, field_name(&L->ds->arena, src, L->scan.names[pick[j]]));
    else
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%" PRId64, sep, pick[j]);
  }
  if (total > 6 && k < sizeof buf) snprintf(buf + k, sizeof buf - k, " (%" PRId64 " columns)", total);
  return arena_strdup(&L->ds->arena, buf);
}

/* Decides the label column at the first data row (n values). */
static bool csv_pick_label(CsvLoad *L, Span row, int64_t n) {
  Diag *d = L->d;
  const Source *src = &d->files[L->scan.file];
  bool header = L->scan.header.file >= 0;
  if (header && L->scan.nnames != n) {
    diag_error(d, row, "this row has %" PRId64 " values, the header names %" PRId64 " columns", n, L->scan.nnames);
    return false;
  }
  if (n < 2) {
    diag_error(d, row, "one column: a dataset needs columns of features and a label column");
    return false;
  }
  char **names = NULL;
  if (header) {
    names = arena_alloc(&L->ds->arena, sizeof *names * (size_t)n);
    for (int64_t i = 0; i < n; i++) names[i] = field_name(&L->ds->arena, src, L->scan.names[i]);
  }
  L->ycol = n - 1;
  if (!L->label) {
    for (int64_t i = 0; header && i < n; i++)
      if (strcasecmp(names[i], "label") == 0 || strcasecmp(names[i], "y") == 0) {
        L->ycol = i;
        break;
      }
    return true;
  }
  for (int64_t i = 0; header && i < n; i++)
    if (strcmp(names[i], L->label) == 0) {
      L->ycol = i;
      return true;
    }
  char *end;
  errno = 0;
  long long k = strtoll(L->label, &end, 10);
  if (*L->label && !*end && !errno && L->label[0] != '-' && L->label[0] != '+') {
    if (k >= n) {
      file_error(d, L->path, "no label column %lld: the rows have %" PRId64 " columns (0 to %" PRId64 ")", k, n,
                 n - 1);
      return false;
    }
    L->ycol = k;
    return true;
  }
  if (!header) {
    file_error(d, L->path, "no header row to find the label column '%s' in: give its index (0 to %" PRId64 ")",
               L->label, n - 1);
    return false;
  }
  const char *near = diag_nearest(L->label, (const char *const *)names, (int)n);
  diag_error(d, L->scan.header, "no column named '%s'%s%s%s", L->label, DIAG_MEAN(near));
  return false;
}

/* The columns x and the labels take, once the label column is known (x:
 * all the others), when columns = [...] did not choose them. */
static void csv_default_columns(CsvLoad *L, int64_t n) {
  L->ycols = arena_alloc(&L->ds->arena, sizeof *L->ycols);
  L->ycols[0] = L->ycol, L->nyc = 1;
  L->xcols = arena_alloc(&L->ds->arena, sizeof *L->xcols * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    if (i != L->ycol) L->xcols[L->nxc++] = i;
}

/* The header column called name into *at; else an error at the header,
 * with the nearest name. */
static bool csv_find(CsvLoad *L, const char *key, const char *name, int64_t *at) {
  const Source *src = &L->d->files[L->scan.file];
  int64_t n = L->scan.nnames;
  char **names = arena_alloc(&L->ds->arena, sizeof *names * (size_t)n);
  for (int64_t i = 0; i < n; i++) names[i] = field_name(&L->ds->arena, src, L->scan.names[i]);
  for (int64_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return *at = i, true;
  const char *near = diag_nearest(name, (const char *const *)names, (int)n);
  diag_error(L->d, L->scan.header, "%s names '%s', which is not a column%s%s%s", key, name,
             DIAG_MEAN(near));
  return false;
}

/* on_header with columns = [...] or several labels: the columns by name,
 * and those neither takes left unread. */
static bool csv_named_columns(void *ctx) {
  CsvLoad *L = ctx;
  const DataOptions *o = L->opt;
  int64_t n = L->scan.nnames;
  if (o->nlabels) {
    L->ycols = arena_alloc(&L->ds->arena, sizeof *L->ycols * (size_t)o->nlabels);
    for (int i = 0; i < o->nlabels; i++)
      if (!csv_find(L, "label", o->labels[i], &L->ycols[L->nyc++])) return false;
    L->ycol = L->ycols[0];
  } else {
    if (!csv_pick_label(L, L->scan.header, n)) return false;
    csv_default_columns(L, n);
  }
  L->xcols = arena_alloc(&L->ds->arena, sizeof *L->xcols * (size_t)(n + o->ncolumns));
  L->nxc = 0;
  if (o->ncolumns) {
    for (int i = 0; i < o->ncolumns; i++)
      if (!csv_find(L, "columns", o->columns[i], &L->xcols[L->nxc++])) return false;
  } else {
    for (int64_t i = 0; i < n; i++) {
      bool y = false;
      for (int64_t j = 0; j < L->nyc; j++) y |= L->ycols[j] == i;
      if (!y) L->xcols[L->nxc++] = i;
    }
  }
  L->skip = arena_alloc(&L->ds->arena, (size_t)n);
  memset(L->skip, 1, (size_t)n);
  for (int64_t i = 0; i < L->nxc; i++) L->skip[L->xcols[i]] = false;
  for (int64_t j = 0; j < L->nyc; j++) {
    if (!L->skip[L->ycols[j]]) {
      diag_error(L->d, L->scan.header, "column '%s' is both an input column and a label",
                 field_name(&L->ds->arena, &L->d->files[L->scan.file], L->scan.names[L->ycols[j]]));
      return false;
    }
    L->skip[L->ycols[j]] = false;
  }
  L->scan.skip = L->skip, L->scan.nskip = n;
  return true;
}

/* Counts the buffers' growth from the capacities (capx, capy) to the
 * ones asked for against the memory limit: false (reported) when it is
 * refused. */
static bool csv_charge(CsvLoad *L, Span at, int64_t capx, int64_t capy) {
  int64_t more = (capx - L->capx) * (int64_t)sizeof *L->x +
                 (capy - L->capy) * (int64_t)(sizeof *L->y + sizeof *L->yi);
  if (mem_charge(more)) {
    L->charged += more;
    return true;
  }
  char why[256];
  diag_error(L->d, at, "out of memory: the dataset's values, %" PRId64 " rows so far, grow at this row: %s", L->ny,
             mem_limit_why((double)more, why, sizeof why));
  return false;
}

static bool csv_row(void *ctx, Span at, const double *v, int64_t n) {
  CsvLoad *L = ctx;
  if (!L->xcols && L->scan.on_header) {
    diag_error(L->d, at, "columns and label name header columns, but the file has no header row");
    return false;
  }
  if (L->ycol < 0) {
    if (!csv_pick_label(L, at, n)) return false;
    csv_default_columns(L, n);
  }
  if (L->nx + L->nxc > L->capx) {
    int64_t cap = L->capx ? L->capx * 2 : 4096;
    while (cap < L->nx + L->nxc) cap *= 2;
    if (!csv_charge(L, at, cap, L->capy)) return false;
    L->capx = cap;
    L->x = mem_alloc(L->x, sizeof *L->x * (size_t)L->capx);
  }
  if (L->ny + L->nyc > L->capy) {
    int64_t cap = L->capy ? L->capy * 2 : 4096;
    if (!csv_charge(L, at, L->capx, cap)) return false;
    L->capy = cap;
    L->y = mem_alloc(L->y, sizeof *L->y * (size_t)L->capy);
    L->yi = mem_alloc(L->yi, sizeof *L->yi * (size_t)L->capy);
  }
  for (int64_t i = 0; i < L->nxc; i++) L->x[L->nx++] = (float)v[L->xcols[i]];
  if (L->nyc > 1) {   /* regression targets: f32 */
    for (int64_t j = 0; j < L->nyc; j++) L->y[L->ny++] = v[L->ycols[j]];
    L->yint = false;
    return true;
  }
  /* An integer label is kept exact (past 2^53); 3.0 counts as one too. */
  double y = v[L->ycol];
  bool exact = L->scan.isint[L->ycol];
  L->yint = L->yint && (exact || (y == floor(y) && fabs(y) < 0x1p53));
  L->yi[L->ny] = exact ? L->scan.ints[L->ycol] : L->yint ? (int64_t)y : 0;
  L->y[L->ny++] = y;
  return true;
}

static bool open_csv(Diag *d, const char *path, const DataOptions *opt, Dataset *ds) {
  /* The text is needed only while reading (for carets), so it lives in a
   * Diag of its own, freed once the file is read; errors count in d. */
  Arena ta;
  arena_init(&ta);
  Diag td;
  diag_init(&td, &ta);
  td.out = d->out;
  td.color = d->color;
  td.max_errors = d->max_errors - d->nerrors;
  CsvLoad L = {.d = &td, .path = path, .ds = ds, .label = opt->label, .opt = opt, .ycol = -1, .yint = true};
  bool ok = false;
  int file = diag_load_file(&td, path);
  if (file < 0) goto done;
  const Source *src = &td.files[file];
  if (!data_csv_sniff(&td, path, file, "CSV files are read uncompressed, IDX files as IMAGES:LABELS")) goto done;
  L.scan = (CsvScan){.file = file, .row = csv_row, .ctx = &L,
                     .text_hint = opt->ncolumns ? "leave the column out of columns = [...]"
                                                : "name the numeric columns with columns = [...] in the train block"};
  if (opt->ncolumns || opt->nlabels) L.scan.on_header = csv_named_columns;
  if (!data_csv_scan(&td, &L.scan)) goto done;
  if (L.scan.rows == 0) {
    if (L.scan.header.file >= 0) diag_error(&td, L.scan.header, "a header but no rows of numbers");
    else diag_error(&td, (Span){file, 0, 0}, "empty file: expected rows of numbers, after an optional header");
    goto done;
  }
  int64_t n = L.scan.rows, k = L.nxc, ny = L.nyc;
  ds->n = n;
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, path);
  DataColumn *c = &ds->cols[DATA_INPUT];
  c->name = "x";
  c->dtype = DT_F32;
  c->store = DATA_F32;
  c->rank = 2;
  c->shape[0] = n;
  c->shape[1] = k;
  c->row = k;
  c->data = mem_alloc(L.x, sizeof *L.x * (size_t)(n * k));
  c->source = columns_str(&L, L.xcols, L.nxc);
  L.x = NULL;
  c = &ds->cols[DATA_LABEL];
  c->name = "y";
  bool integral = L.yint;
  c->dtype = integral ? DT_I64 : DT_F32;
  c->store = integral ? DATA_I64 : DATA_F32;
  c->rank = ny > 1 ? 2 : 1;
  c->shape[0] = n;
  c->shape[1] = ny;
  c->row = ny;
  if (integral) {
    c->data = mem_alloc(L.yi, sizeof *L.yi * (size_t)n);
    L.yi = NULL;
  } else {
    float *y = mem_alloc(NULL, sizeof *y * (size_t)(n * ny));
    for (int64_t i = 0; i < n * ny; i++) y[i] = (float)L.y[i];
    c->data = y;
  }
  c->source = ny > 1 ? columns_str(&L, L.ycols, ny)
            : L.scan.header.file >= 0 ? field_name(&ds->arena, src, L.scan.names[L.ycol])
                                      : arena_printf(&ds->arena, "column %" PRId64, L.ycol);
  ds->ncols = 2;
  /* The dataset keeps x and the labels: the rest of what was counted,
   * the growth's slack and the other form of the labels, is given back. */
  int64_t keep = n * k * (int64_t)sizeof(float) + n * ny * (int64_t)(integral ? sizeof(int64_t) : sizeof(float));
  ds->charged += keep;
  L.charged -= keep;
  ok = true;
done:
  mem_uncharge(L.charged);
  mem_free(L.x);
  mem_free(L.y);
  mem_free(L.yi);
  diag_absorb(d, &td);
  arena_free(&ta);
  return ok;
}

/* ---- NumPy .npz ---------------------------------------------------------------------
 * One column per array, named like it; npy.c reads and checks each.  An
 * array's memory is counted against the limit before it is read. */

typedef struct NpzLoad {
  Dataset *ds;
} NpzLoad;

static bool npz_column(void *ctx, const char *name, const NpyHeader *h, NpyIn *in, char *why, size_t n) {
  Dataset *ds = ((NpzLoad *)ctx)->ds;
  char shape[256];
  dims_str(h->rank, h->shape, shape, sizeof shape);
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

static bool open_npz(Diag *d, const char *path, Dataset *ds) {
  NpzLoad L = {ds};
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, path);
  ds->named = true;
  if (!npy_each(d, path, npz_column, &L)) return false;
  if (ds->ncols == 0) {
    file_error(d, path, "an archive without arrays");
    return false;
  }
  return true;
}

/* A .npz: named so, or a ZIP archive by its first bytes. */
static bool is_npz(const char *path) {
  size_t len = strlen(path);
  if (len >= 4 && strcmp(path + len - 4, ".npz") == 0) return true;
  FILE *f = fopen(path, "rb");
  uint8_t b[4];
  size_t n = f ? fread(b, 1, 4, f) : 0;
  if (f) fclose(f);
  return npy_is_zip(b, n);
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
    file_error(d, ds->files[0], "%d inputs fed (%s): a dataset feeds at most %d", n, fed, DATA_MAX_COLS);
    return false;
  }
  for (int k = 0; k < n; k++) {
    pick[k] = -1;
    for (int c = 0; c < ds->ncols && pick[k] < 0; c++)
      if (strcmp(ds->cols[c].name, input_name(inputs[k])) == 0) pick[k] = c;
    if (pick[k] < 0) {
      file_error(d, ds->files[0], "no array '%s' for the input of that name (its arrays: %s)", input_name(inputs[k]),
                 have);
      return false;
    }
    used[pick[k]] = true;
  }
  for (int c = 0; c < ds->ncols; c++)
    if (!used[c]) {
      file_error(d, ds->files[0], "array '%s' feeds no input (the inputs fed: %s; a train block's feed = [...] "
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
static const char *in_dir(Arena *a, const DataOptions *opt, const char *path) {
  if (!opt->dir || !*opt->dir || path[0] == '/') return path;
  return arena_printf(a, "%s/%s", opt->dir, path);
}

/* The ':' splitting IMAGES:LABELS: the first whose left part is a file (paths
 * may hold colons), else the first. */
static const char *pair_colon(Arena *a, const DataOptions *opt, const char *spec) {
  const char *first = strchr(spec, ':');
  for (const char *c = first; c; c = strchr(c + 1, ':')) {
    struct stat st;
    if (stat(in_dir(a, opt, arena_strndup(a, spec, (size_t)(c - spec))), &st) == 0) return c;
  }
  return first;
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
static bool open_text(Diag *d, const char *path, int64_t context, const char *split, Dataset *ds) {
  ds->files[ds->nfiles++] = arena_strdup(&ds->arena, path);
  ds->split = split ? arena_strdup(&ds->arena, split) : NULL;
  TextWindows w;
  if (!text_windows(d, path, context, split, &w)) return false;
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
      file_error(d, spec, "%s = [...] has %d value%s, but the images are read with %d channel%s: give one per channel",
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
static bool open_images(Diag *d, const char *spec, const char *path, const DataOptions *opt, Dataset *ds) {
  if (opt->label) {
    file_error(d, spec, "an image folder's labels are its class folders; only a CSV file's label column can be chosen");
    return false;
  }
  if (opt->channels && opt->channels != 1 && opt->channels != 3) {
    file_error(d, spec, "images are read with 1 channel (grey) or 3 (RGB), but the input fed takes %d", opt->channels);
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
static bool only_csv_columns(Diag *d, const char *spec, const DataOptions *opt) {
  if (!opt->ncolumns && !opt->nlabels) return true;
  file_error(d, spec, "%s chooses a CSV file's columns by name; this data is not a CSV file",
             opt->ncolumns ? "columns = [...]" : "label = [...]");
  return false;
}

/* What every example costs beyond its bytes, charged with the dataset so
 * that examples of zero bytes (a .npz of shape [2^62, 0]) are paid for too:
 * the batcher's order of them (data_batcher_init), 8 bytes each. */
static bool charge_order(Diag *d, const char *spec, Dataset *ds) {
  int64_t bytes;
  const int each = (int)sizeof(int64_t);
  if (!mem_mul_size(ds->n, each, &bytes)) {
    mem_limit_reached();
    file_error(d, spec, "out of memory: %" PRId64 " examples: the batches' order of them takes %d bytes each, more "
               "than netrun can count (--max-memory)", ds->n, each);
    return false;
  }
  if (!mem_charge(bytes)) {
    char lim[256];
    file_error(d, spec, "out of memory: %" PRId64 " examples: the batches' order of them takes %d bytes each: %s",
               ds->n, each, mem_limit_why((double)bytes, lim, sizeof lim));
    return false;
  }
  ds->charged += bytes;
  return true;
}

bool data_open(Diag *d, const char *spec, const DataOptions *opt, Dataset *out) {
  static const DataOptions none = {0};
  if (!opt) opt = &none;
  memset(out, 0, sizeof *out);
  arena_init(&out->arena);
  out->name = arena_strdup(&out->arena, spec);
  Arena *a = &out->arena;
  const char *path = in_dir(a, opt, spec);
  bool ok;
  struct stat st;
  if (opt->context != 0) {
    ok = opt->label ? (file_error(d, spec, "text data has no label column: y is the next byte"), false)
                    : regular_file(d, path) && open_text(d, path, opt->context, opt->split, out);
  } else if (strcmp(spec, "fashion-mnist") == 0) {
    if (opt->label) {
      file_error(d, spec, "its label column is fixed ('labels'); only a CSV file's can be chosen");
      ok = false;
    } else {
      ok = only_csv_columns(d, spec, opt) && open_fashion(d, opt->split, out);
    }
  } else if (opt->split) {
    file_error(d, spec, "no split '%s': only fashion-mnist has splits", opt->split);
    ok = false;
  } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    ok = only_csv_columns(d, spec, opt) && open_images(d, spec, path, opt, out);
  } else if (stat(path, &st) != 0 && strchr(spec, ':')) {
    const char *colon = pair_colon(a, opt, spec);
    const char *images = in_dir(a, opt, arena_strndup(a, spec, (size_t)(colon - spec)));
    if (opt->label) {
      file_error(d, spec, "an IDX pair's label column is fixed ('labels'); only a CSV file's can be chosen");
      ok = false;
    } else {
      ok = only_csv_columns(d, spec, opt) && open_idx_pair(d, images, in_dir(a, opt, colon + 1), out);
    }
  } else {
    ok = regular_file(d, path) && (is_npz(path) ? only_csv_columns(d, spec, opt) && open_npz(d, path, out)
                                                : open_csv(d, path, opt, out));
  }
  if (ok) ok = charge_order(d, spec, out);
  if (ok && (opt->nmean || opt->nstd) && !out->cols[DATA_INPUT].channels) {
    file_error(d, spec, "mean and std normalize an image folder's channels; this data is not an image folder");
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
