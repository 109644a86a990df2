/* data.h — datasets: examples read whole from IDX, CSV or NumPy .npz files,
 * text files or image folders, and the batches a trainer takes from them.
 *
 * A Dataset holds N examples in named columns.  Column c is, to its users,
 * a tensor [N, ...] of dtype f32 or i64; batches are gathered from it as new
 * tensors [b, ...].  Pixels are kept as the bytes the file holds (u8) and
 * become f32 in [0, 1] only when a batch is gathered, so a loaded
 * Fashion-MNIST training set costs its 47 MB of pixels, not 188 MB of f32.
 *
 * By convention column DATA_INPUT holds what a model reads (IDX "images",
 * CSV "x") and column DATA_LABEL what it predicts (IDX "labels", CSV "y").
 *
 * Ownership: data_open fills a Dataset that owns its memory until
 * data_free.  A Batcher borrows its Dataset (which must outlive it).  A
 * Batch owns one reference to each of its tensors (tensor.h's rule): keep a
 * tensor past data_batch_release() by taking a reference with tensor_ref().
 *
 * Errors: positions inside a CSV file go through diag_error (file:line:col
 * and a caret); errors about binary files are one line,
 *     netrun: error: FILE: truncated: 47040000 bytes of pixels expected, 1200 found
 * Both count in the Diag's nerrors.
 */
#ifndef NETRUN_DATA_H
#define NETRUN_DATA_H

#include "ir/tensor.h"

/* Where Debian's dataset-fashion-mnist installs the files. */
#define DATA_FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* A .npz dataset has a column per array (up to the 16 inputs a train
 * block may feed); the others have two. */
#define DATA_MAX_COLS 16
enum { DATA_INPUT = 0, DATA_LABEL = 1 };

/* How a column's elements are stored (its dtype is what batches hold). */
typedef enum DataStore {
  DATA_U8,        /* bytes, gathered as f32 value / 255 */
  DATA_F32,
  DATA_I64,
  DATA_BYTE,      /* bytes, gathered as their value (a .npz's u8 and bool arrays) */
} DataStore;

typedef struct DataColumn {
  const char *name;          /* "images", "labels", "x", "y" */
  DType dtype;               /* of the tensors gathered: f32 or i64 */
  DataStore store;
  int rank;                  /* shape[0] is the dataset's n */
  int64_t shape[SHAPE_MAX_RANK];
  int64_t row;               /* elements per example: the product of shape[1..] */
  void *data;                /* n * row elements of `store`, row-major */
  const char *source;        /* CSV: the columns it holds ("a, b, c"); else NULL */
  /* An image folder's images: u8 [N, C, H, W] with channels = C (else 0),
   * gathered as (value / 255 - mean[c]) / std[c] (mean 0, std 1 unless
   * normalized), and augmented in training (DataAugment). */
  int channels;
  bool normalized;
  float mean[3], std[3];
} DataColumn;

typedef struct Dataset {
  Arena arena;               /* names and strings */
  const char *name;          /* "fashion-mnist", a CSV path, "IMAGES:LABELS" */
  const char *split;         /* "train"/"test" for fashion-mnist, else NULL */
  int64_t n;                 /* examples */
  DataColumn cols[DATA_MAX_COLS];
  int ncols;
  const char *files[2];      /* the files read, as found */
  int nfiles;
  int64_t charged;           /* bytes counted against the memory limit (mem.h) */
  bool named;                /* a .npz: its columns feed the inputs named like them
                                (data_select), not the inputs in order */
  const char **classes;      /* an image folder: class k's folder name (arena), else NULL */
  int nclasses;
  const char **ids;          /* an image folder: example i's path inside it
                                ("cat/1.png", arena), else NULL */
  const struct DataFormat *format;   /* the format it was read as (data_formats) */
} Dataset;

typedef struct DataOptions {
  /* fashion-mnist's split: "train" (the default, NULL) or "test".  Other
   * datasets have none; naming one is an error. */
  const char *split;
  /* CSV: the label column, by its header name or its 0-based index.  NULL:
   * the column named "label" or "y" (any case), else the last one. */
  const char *label;
  /* CSV: the columns, by header name, the input column "x" holds, in
   * order (NULL: all but the labels); every other column is not read, so
   * it may hold text. */
  const char *const *columns;
  int ncolumns;
  /* CSV: several label (target) columns, by header name, instead of
   * `label`: the column "y" then holds f32 [N, nlabels]. */
  const char *const *labels;
  int nlabels;
  /* The folder that relative paths in the spec are read from (a train
   * block's data lies beside its script); NULL: the working folder. */
  const char *dir;
  /* > 0: the file is text, read as windows of this many bytes with split
   * "train" or "test" (text.h); the others' keys do not apply. */
  int64_t context;
  /* An image folder (image.h): the channels (1 or 3), height and width
   * its images are converted to; 0 takes the first image's.  And the
   * per-channel normalization: nmean / nstd values (0: none), one per
   * channel; with other data they are an error. */
  int channels;
  int64_t height, width;
  const double *mean, *std;
  int nmean, nstd;
} DataOptions;

/* Training augmentation of an image column (torchvision's RandomCrop with
 * padding, then RandomHorizontalFlip): each example is shifted by (dy, dx)
 * drawn uniformly from [-crop_pad, crop_pad]^2, the pixels shifted in
 * being 0 (before normalization), then mirrored left-right with
 * probability 1/2 when flip.  The draws come from a generator seeded by
 * (seed, epoch, the example's index in the dataset) alone, so they do not
 * depend on the batch size, the threads, the ranks or a resume. */
/* What the trainer's --seed is mixed with for augmentation (netrun data
 * --head --flip --seed S shows the first epoch's draws of a run with S). */
#define DATA_AUGMENT_SEED 0xa09e47a7ull

typedef struct DataAugment {
  bool flip;
  int64_t crop_pad;
  uint64_t seed;
  int64_t epoch;
} DataAugment;

/* ---- formats ------------------------------------------------------------------
 * What a spec or a file is, decided in one place: the table data_formats
 * (formats.c), asked in order, the first row whose sniff says yes wins.
 * data_open reads a dataset through it, --feed a file (feed.c), and the
 * trainer asks it what the data will be before reading it (its splits,
 * whether `label` names a column).  A new format is its reader's file and
 * one row (doc/design.md, "Data formats"). */

/* What a format's sniff sees.  spec is the name given (a train block's
 * data, --data, --feed's FILE), path the file it names (relative to
 * opt->dir).  fd >= 0: path is a regular file open for reading, head its
 * first nhead bytes (read with pread: the offset stays 0); a folder has
 * folder set; neither when path is not there (or is a name like
 * "fashion-mnist").  data_format_of fills only what stat says (no bytes:
 * nhead 0, fd -1). */
typedef struct DataProbe {
  const char *spec, *path;
  const DataOptions *opt;
  bool exists, folder;
  int fd;
  uint8_t head[16];
  size_t nhead;
} DataProbe;

/* Flags of a format. */
enum {
  DATA_SPLITS = 1,        /* comes in train and test splits (opt->split) */
  DATA_LABEL_COLUMN = 2,  /* a train block's label that is not an input names
                             a column (a CSV file's; image folders and text
                             files refuse one, with their reason) */
  DATA_BY_NAME = 4,       /* known by the spec and options alone (sniff
                             reads no file): data_open opens no file for it */
};

typedef struct DataFormat {
  const char *name;       /* "csv", "npz", "idx", ... */
  bool (*sniff)(const DataProbe *p);
  /* Reads the dataset (p->fd, when open, is the reader's to close); NULL:
   * not a dataset (refuse says why). */
  bool (*open)(Diag *d, DataProbe *p, Dataset *out);
  /* --feed's reader of one array for decl, from p->fd (the reader's to
   * close); NULL: --feed does not read this format. */
  Tensor *(*feed)(Diag *d, int fd, const char *path, const VarDesc *decl);
  unsigned flags;
  const char *refuse;     /* why a file of this format is not a dataset (no open) */
} DataFormat;

extern const DataFormat data_formats[];
extern const int data_nformats;

/* The format of p: the first row whose sniff says yes; NULL when none
 * does (no file at p->path, nor a name a row knows). */
const DataFormat *data_format_find(const DataProbe *p);
/* The format data_open would read spec as, from names and stat alone
 * (the trainer's question before reading): NULL when spec names nothing
 * known. */
const DataFormat *data_format_of(const char *spec, const DataOptions *opt);

/* What the readers share (datafmt.h): "netrun: error: FILE: message", for
 * errors about a whole file, or a binary one (there is no line to show);
 * a shape as "[2, 3]"; path as data_open reads it (from opt->dir when it
 * is relative). */
void data_file_error(Diag *d, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *data_dims_str(int rank, const int64_t *dims, char *buf, size_t n);
const char *data_in_dir(Arena *a, const DataOptions *opt, const char *path);

/* Opens the dataset `spec` names and reads it whole:
 *   fashion-mnist       the four files in $NETRUN_DATA, else in
 *                       /usr/share/datasets/fashion-mnist/ (Debian's
 *                       dataset-fashion-mnist); FILE.gz or FILE
 *   IMAGES:LABELS       an IDX pair, gzip or raw (by their magic bytes);
 *                       images: u8 with 2 or more dimensions, labels: u8 [N]
 *   FILE.npz            NumPy arrays (numpy.savez), each a column named
 *                       like the array: [N, ...] with the same N; f32 and
 *                       f64 are read as f32, i64 and i32 as i64, u8 and
 *                       bool as their byte values (not scaled) (npy.h)
 *   FILE, context > 0   a text file's byte windows (text.h)
 *   DIR                 an image folder (image.h): columns "images" (u8
 *                       [N, C, H, W], C, H, W from opt or the first
 *                       image) and "labels" (i64 class numbers); class
 *                       names in ds->classes
 *   FILE                a CSV file: an optional header row (detected: a
 *                       field that is not a number), then rows of numbers
 *                       (opt->columns and opt->labels choose columns by
 *                       header name; with other data they are an error)
 * `opt` may be NULL.  False, with the error reported, on failure; *out then
 * holds nothing to free. */
bool data_open(Diag *d, const char *spec, const DataOptions *opt, Dataset *out);
void data_free(Dataset *ds);
/* The bytes its columns hold in memory. */
int64_t data_bytes(const Dataset *ds);
/* A named dataset's columns (ds->named) put in the order of the inputs
 * they feed: column k then feeds inputs[k].  An input without an array of
 * its name, or an array no input takes, is an error naming them.  Other
 * datasets are left as they are.  path: the dataset, for messages. */
bool data_select(Diag *d, Dataset *ds, const VarDesc *const *inputs, int n);
/* The column named `name`, or NULL. */
const DataColumn *data_column(const Dataset *ds, const char *name);

/* Moves nval examples of ds, chosen by a permutation drawn from rng (the
 * first nval positions of data_epoch's order: the same generator state
 * holds out the same examples), into *val, a dataset of its own (freed by
 * data_free).  Both keep the examples in their file order.  0 < nval <
 * ds->n.  False, with the error reported, when the memory limit refuses
 * the copy (*val then holds nothing to free). */
bool data_split(Diag *d, Dataset *ds, int64_t nval, Rng *rng, Dataset *val);

/* Rows idx[0..k) of column c as a new tensor [k, ...] of c's dtype (an
 * image column normalized, and augmented by aug when not NULL). */
Tensor *data_gather(const DataColumn *c, const int64_t *idx, int64_t k);
Tensor *data_gather_aug(const DataColumn *c, const int64_t *idx, int64_t k, const DataAugment *aug);

/* ---- batches ---------------------------------------------------------------- */

typedef struct Batch {
  int64_t n;                     /* examples in this batch */
  const int64_t *index;          /* their indices in the dataset (the Batcher's,
                                    valid until its next data_epoch) */
  Tensor *cols[DATA_MAX_COLS];   /* per column, [n, ...]: owned by the batch */
} Batch;

typedef struct Batcher {
  const Dataset *ds;
  int64_t size;                  /* examples per batch */
  bool drop_last;                /* skip a last batch smaller than size */
  int64_t *order;                /* this epoch's order of the examples */
  int64_t n;                     /* examples in order: ds->n, or a shard's */
  int64_t pos;                   /* the next position in order */
  int64_t epoch;                 /* epochs started */
  DataAugment aug;               /* zero: none (data_batcher_init) */
} Batcher;

/* A batcher over ds (size >= 1).  No epoch is started: call data_epoch. */
void data_batcher_init(Batcher *b, const Dataset *ds, int64_t size, bool drop_last);
void data_batcher_free(Batcher *b);
/* Starts the next epoch: the examples in a new random order drawn from rng
 * (Fisher-Yates over 0..n-1, so the same generator state gives the same
 * order), or in dataset order when rng is NULL. */
void data_epoch(Batcher *b, Rng *rng);
/* Keeps the examples of shard `rank` of `ranks` of this epoch's order:
 * those at positions rank, rank + ranks, rank + 2 ranks ... (PyTorch's
 * DistributedSampler without padding: every example in exactly one shard,
 * and the shards' batch k together are the order's batch k of ranks times
 * the size). */
void data_shard(Batcher *b, int rank, int ranks);
/* Batches per epoch. */
int64_t data_batches(const Batcher *b);
/* The epoch's next batch into *out; false when the epoch is over.  The last
 * batch is smaller when size does not divide n (unless drop_last). */
bool data_next(Batcher *b, Batch *out);
/* Skips the next k batches of the epoch (resuming in the middle of one). */
void data_skip(Batcher *b, int64_t k);
void data_batch_release(Batch *bt);

/* ---- feeding a script's inputs ----------------------------------------------------- */

/* Whether batches of b examples of column c can feed input `decl`: the
 * declared first dimension takes the batch (a symbol, or exactly b), the
 * others must hold one example's elements (a symbolic or unknown one among
 * them is inferred), and the dtypes must agree (i64 may feed an f32 input).
 * Fills shape (rank decl->shape.rank) with the batch's shape as fed.  On a
 * mismatch, an error at the input's declaration names the input, its
 * declared shape and the column's shape. */
bool data_fit_shape(Diag *d, const DataColumn *c, const VarDesc *decl, int64_t b, int64_t *shape);
/* The batch tensor t of column c, shaped (a view) and typed (a copy, if cast)
 * for input decl; a new reference, or NULL with the error reported. */
Tensor *data_fit(Diag *d, const DataColumn *c, Tensor *t, const VarDesc *decl);

/* ---- CSV ----------------------------------------------------------------------
 * The CSV grammar shared with `--feed` (feed.c): lines of comma-separated
 * numbers; blank lines are skipped; a first row holding a field that is not
 * a number is a header.  Every data row must hold as many values as the
 * first; values must be finite, and finite as f32 unless written as
 * integers (which are read exactly, as 64-bit integers).  A NUL byte
 * anywhere is an error. */
typedef struct CsvScan {
  int file;                      /* the Diag source to read */
  /* Called per data row with its values and its span; false stops the scan
   * (the callback has reported why). */
  bool (*row)(void *ctx, Span at, const double *vals, int64_t n);
  void *ctx;
  /* During a row callback, per value: whether it was written as an integer
   * that fits in 64 bits (isint[i]), and then its exact value (ints[i]);
   * vals[i] is the nearest double. */
  const int64_t *ints;
  const bool *isint;
  /* Optional: called once the header row is read (header and names
   * filled); false stops the scan (the callback has reported why). */
  bool (*on_header)(void *ctx);
  /* Optional (on_header may set them): data-row columns c < nskip with
   * skip[c] are not read, whatever they hold. */
  const bool *skip;
  int64_t nskip;
  /* Optional: what to do about a text field, said after "column 'c'
   * holds 'abc', not a number: ...; " (the dataset's columns = [...]). */
  const char *text_hint;
  /* Filled by the scan: */
  int64_t rows, cols;            /* data rows, values per row (-1: none) */
  Span header;                   /* the header row; file -1 if none */
  Span *names;                   /* the header's fields (in the Diag's arena) */
  int64_t nnames;
} CsvScan;

/* Whether the source `file` (read from path) may be a CSV file: false, with
 * the reason reported, for a NumPy .npy, gzip, IDX or UTF-16 file.  `gzip` ends the
 * message for a gzip file: what to do instead. */
bool data_csv_sniff(Diag *d, const char *path, int file, const char *gzip);

/* Scans the source s->file; false if a row was malformed (reported) or the
 * callback stopped it.  A file without data rows is not an error here
 * (rows == 0): callers say what they expected. */
bool data_csv_scan(Diag *d, CsvScan *s);

#endif
