/* npy.h — NumPy's array files: .npy (one array) and .npz (a ZIP archive of
 * .npy members, numpy.savez), read without NumPy, and .npz written.
 *
 * ---- What is read ---------------------------------------------------------
 * A .npy file: the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or
 * 3.0), the header's length (u16 for 1.0, u32 after), the header — a
 * Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } — then the elements.  Read: little-endian f32 ('<f4'),
 * f64, i64, i32, u8 and bool, in C order (Fortran order is accepted for
 * rank 0 and 1, where it is the same).  Refused, with the reason: other
 * dtypes, big-endian data, Fortran order, object and structured arrays, a
 * header that is not such a dict, and data that is not exactly as long as
 * the header says (truncated, or trailing bytes).
 *
 * ---- Conversions (NumPy's astype with casting='same_kind', checked) ---------
 * Into f32: f32 as is; f64 rounded to the nearest f32 (a finite value
 * beyond f32's range is an error, not an infinity); i64, i32, u8 and bool
 * when every value is an f32 exactly (integers up to 2^24 always are).
 * Into i64: i64, i32, u8, bool.  Into bool: bool (any non-zero byte is
 * true).  Floats never become integers, nor integers bools: an error names
 * the array's dtype and the one wanted.
 *
 * ---- Errors ---------------------------------------------------------------
 * The readers below write the reason into why ("truncated: ..."); the
 * functions taking a Diag report "netrun: error: FILE: ..." themselves.
 */
#ifndef NETRUN_NPY_H
#define NETRUN_NPY_H

#include "ir/tensor.h"

/* Longest header read (NumPy itself refuses more than 10000 bytes). */
#define NPY_MAX_HEADER 65536

/* The member of an .npz that netrun exports which lists the names of the
 * script's states (the other arrays are parameters): a 1-D array of
 * strings, NumPy's '<U' N (np.load(f)["__netrun_states__"]), possibly
 * empty.  It is the only member read as strings; an archive without it
 * says nothing of which of its arrays are states. */
#define NPY_STATES "__netrun_states__"
#define NPY_MAX_CHARS 4096                /* characters in one such string */
#define NPY_MAX_TEXT ((uint64_t)1 << 22)  /* characters in all */

typedef enum NpyType { NPY_BOOL, NPY_U8, NPY_I32, NPY_I64, NPY_F32, NPY_F64 } NpyType;

typedef struct NpyHeader {
  NpyType type;
  int rank;
  int64_t shape[SHAPE_MAX_RANK];
  int64_t numel;
  uint64_t offset;             /* bytes before the elements */
  char descr[16];              /* as written: "<f4" */
  int chars;                   /* the NPY_STATES member's '<U' N: N (an element is N int32); else 0 */
} NpyHeader;

/* Bytes of an element; NumPy's name of the type ("float32"). */
int npy_size(NpyType t);
const char *npy_name(NpyType t);

/* Where an array's bytes come from: a file, a .npz member, memory.  read
 * returns the count read (fewer than n only at the end) or -1 with why.
 * size: the bytes it holds in all. */
typedef struct NpyIn {
  int64_t (*read)(void *ctx, void *buf, size_t n, char *why, size_t wn);
  void *ctx;
  uint64_t size;
} NpyIn;

/* NpyIn's read for a FILE * (the ctx) positioned at the array's bytes. */
int64_t npy_read_stdio(void *ctx, void *buf, size_t n, char *why, size_t wn);

/* Reads and checks the preamble and the header, and that the data that
 * follows is exactly numel elements long. */
bool npy_read_header(NpyIn *in, NpyHeader *h, char *why, size_t n);
/* Whether elements of type `from` may become `to` (the rules above). */
bool npy_can_cast(NpyType from, NpyType to);
/* Reads h's elements into dst as `to` (npy_can_cast must allow it),
 * checking each value the rules check. */
bool npy_read_data(NpyIn *in, const NpyHeader *h, NpyType to, void *dst, char *why, size_t n);
/* The strings of the NPY_STATES member (h->chars set), in UTF-8, each
 * ended by a NUL, from mem_alloc; NULL with why. */
char *npy_read_strings(NpyIn *in, const NpyHeader *h, char *why, size_t n);
/* The NpyType a tensor of dtype t holds. */
NpyType npy_of_dtype(DType t);

/* An array of a .npz archive, handed to a NpyEach: its name (the member's
 * without ".npy"), header and bytes.  The callback reads the elements
 * (npy_read_data) or not; it returns false to stop, with why set for the
 * caller to report as "FILE: array NAME: WHY", or with why empty when it
 * has reported the error itself. */
typedef bool (*NpyEach)(void *ctx, const char *name, const NpyHeader *h, NpyIn *in, char *why, size_t n);

/* Calls fn for each array of the .npz archive at path, in the archive's
 * order; false if the file cannot be read or is not such an archive, or fn
 * stopped (all reported). */
bool npy_each(Diag *d, const char *path, NpyEach fn, void *ctx);
/* The same for a file already open at fd (named path in errors), which it
 * closes. */
bool npy_each_fd(Diag *d, int fd, const char *path, NpyEach fn, void *ctx);

/* Whether the n bytes at b start a .npy file, a ZIP archive. */
bool npy_is_npy(const void *b, size_t n);
bool npy_is_zip(const void *b, size_t n);

/* --feed NAME=FILE: the array of a .npy file, or of a .npz archive the
 * member named like the input (or its only one), as a tensor of decl's
 * dtype in the array's shape, read from fd (open on path; closed here);
 * NULL, reported, on error. */
Tensor *npy_feed_fd(Diag *d, int fd, const char *path, const VarDesc *decl);

/* The tensors (in their order, each names[i]) written as the .npz file
 * at path, atomically; false with err ("PATH: ...") on failure. */
bool npy_write_npz(const char *path, const char *const *names, Tensor *const *t, int n, char *err, size_t errlen);
/* The same, with the NPY_STATES member listing states[0..nstates) (none
 * when states is NULL). */
bool npy_write_npz_states(const char *path, const char *const *names, Tensor *const *t, int n,
                          const char *const *states, int nstates, char *err, size_t errlen);

/* The bytes of a .npy file holding t: the header (its length in *hlen, a
 * multiple of 64) in hbuf; the elements follow as t holds them. */
void npy_format_header(const Tensor *t, char *hbuf, size_t cap, size_t *hlen);

#endif
