/* npy.c — NumPy's .npy and .npz files (npy.h): the header parser, the
 * element conversions, the readers behind --feed, datasets and --weights,
 * and the .npz writer behind `netrun export`. */
#include "io/npy.h"

#include "base/diag.h"
#include "base/file.h"
#include "base/scan.h"
#include "io/zip.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int npy_size(NpyType t) {
  static const int size[] = {1, 1, 4, 8, 4, 8};
  return size[t];
}

const char *npy_name(NpyType t) {
  static const char *const name[] = {"bool", "uint8", "int32", "int64", "float32", "float64"};
  return name[t];
}

NpyType npy_of_dtype(DType t) { return t == DT_I64 ? NPY_I64 : t == DT_BOOL ? NPY_BOOL : NPY_F32; }

bool npy_is_npy(const void *b, size_t n) { return n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0; }
bool npy_is_zip(const void *b, size_t n) {
  return n >= 4 && (memcmp(b, "PK\x03\x04", 4) == 0 || memcmp(b, "PK\x05\x06", 4) == 0);
}

/* ---- the header ---------------------------------------------------------------
 * The dict literal, as NumPy's format module writes it (and reads it, with
 * ast.literal_eval): keys 'descr', 'fortran_order' and 'shape' in any
 * order, each once; strings in single or double quotes; True/False; a
 * tuple of integers (Python 2 wrote them 3L). */

typedef struct Lex {
  const char *p, *end;
} Lex;

static void blanks(Lex *x) { scan_blanks(&x->p, x->end); }
static bool punct(Lex *x, char c) { return scan_eat(&x->p, x->end, c); }

/* A quoted string without escapes into buf. */
static bool string(Lex *x, char *buf, size_t cap) {
  blanks(x);
  if (x->p >= x->end || (*x->p != '\'' && *x->p != '"')) return false;
  char q = *x->p++;
  size_t k = 0;
  while (x->p < x->end && *x->p != q) {
    if (*x->p == '\\' || k + 1 >= cap) return false;
    buf[k++] = *x->p++;
  }
  if (x->p >= x->end) return false;
  x->p++;
  buf[k] = 0;
  return true;
}

static bool word(Lex *x, const char *w) {
  blanks(x);
  size_t n = strlen(w);
  if ((size_t)(x->end - x->p) < n || memcmp(x->p, w, n) != 0) return false;
  x->p += n;
  return true;
}

/* '(' [int {',' int} [',']] ')'.  Each size and their product are
 * checked in integers (mem_mul_size): a 19-digit size or a product past
 * 2^63 - 1 is refused, not wrapped; a zero size makes the product 0 however
 * large the others are. */
static bool shape_tuple(Lex *x, NpyHeader *h, char *why, size_t n) {
  if (!punct(x, '(')) return diag_why(why, n, "malformed header: 'shape' is not a tuple");
  h->rank = 0;
  while (!punct(x, ')')) {
    blanks(x);
    if (h->rank == SHAPE_MAX_RANK) return diag_why(why, n, "more than %d dimensions", SHAPE_MAX_RANK);
    int64_t v = 0;
    const char *start = x->p;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9' && x->p - start < 40) {
      if (!mem_mul_size(v, 10, &v) || !mem_add_size(v, *x->p - '0', &v)) {
        while (x->p < x->end && *x->p >= '0' && *x->p <= '9' && x->p - start < 40) x->p++;
        return diag_why(why, n, "shape has a size past 2^63 - 1 (%.*s)", (int)(x->p - start), start);
      }
      x->p++;
    }
    if (x->p == start || (x->p < x->end && *x->p >= '0' && *x->p <= '9'))
      return diag_why(why, n, "malformed header: 'shape' holds something that is not a size");
    if (x->p < x->end && *x->p == 'L') x->p++;
    h->shape[h->rank++] = v;
    if (!punct(x, ',')) {
      if (!punct(x, ')')) return diag_why(why, n, "malformed header: 'shape' is not a tuple of sizes");
      break;
    }
  }
  int64_t numel = 1;
  bool zero = false, over = false;
  for (int i = 0; i < h->rank; i++) {
    zero |= h->shape[i] == 0;
    over |= !mem_mul_size(numel, h->shape[i], &numel);
  }
  if (zero) numel = 0;
  if (over && !zero) {   /* so rank >= 2 */
    char dims[256];
    int len = 0;
    for (int i = 0; i < h->rank && len < (int)sizeof dims - 32; i++)
      len += snprintf(dims + len, sizeof dims - (size_t)len, "%s%" PRId64, i ? ", " : "(", h->shape[i]);
    return diag_why(why, n, "shape %s): more elements than netrun can count", dims);
  }
  if ((double)numel * npy_size(h->type) > (double)TENSOR_MAX_BYTES)
    return diag_why(why, n, "shape of %.4g elements: larger than netrun's largest tensor", (double)numel);
  h->numel = numel;
  return true;
}

/* Why descr (not one netrun reads) is refused. */
static bool bad_descr(const char *d, char *why, size_t n) {
  size_t len = strlen(d);
  if (len >= 2 && (d[0] == '>' || d[0] == '!') && strchr("fiub", d[1]))
    return diag_why(why, n, "big-endian data ('%s'): netrun reads little-endian arrays (a.astype('<%s'))", d, d + 1);
  if (strchr(d, 'O'))
    return diag_why(why, n, "an object array ('%s', pickled Python objects): netrun reads numbers only", d);
  return diag_why(why, n, "dtype '%s' is not supported: netrun reads float32 ('<f4'), float64, int64, int32, uint8 "
                  "and bool", d);
}

static bool descr(const char *d, NpyHeader *h, bool text, char *why, size_t n) {
  /* '<U' N (NumPy's str_, N UTF-32 code points an element), where the
   * caller reads strings: an element counts as N int32 (h->chars = N) */
  char *end;
  long chars = text && (d[0] == '<' || d[0] == '=') && d[1] == 'U' && d[2] >= '1' && d[2] <= '9' ? strtol(d + 2, &end, 10) : 0;
  if (chars > 0 && chars <= NPY_MAX_CHARS && !*end) {
    snprintf(h->descr, sizeof h->descr, "%s", d);
    h->type = NPY_I32;
    h->chars = (int)chars;
    return true;
  }
  static const struct {
    const char *code;
    NpyType t;
  } known[] = {{"f4", NPY_F32}, {"f8", NPY_F64}, {"i8", NPY_I64}, {"i4", NPY_I32}, {"u1", NPY_U8}, {"b1", NPY_BOOL}};
  snprintf(h->descr, sizeof h->descr, "%s", d);
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    bool one = npy_size(known[i].t) == 1;
    if (strcmp(d + 1, known[i].code) == 0 && (d[0] == '<' || d[0] == '=' || (one && (d[0] == '|' || d[0] == '>')))) {
      h->type = known[i].t;
      return true;
    }
  }
  return bad_descr(d, why, n);
}

/* The dict: each key once, all three. */
static bool header_dict(const char *text, size_t len, NpyHeader *h, bool strings, char *why, size_t n) {
  Lex x = {text, text + len};
  bool seen[3] = {false, false, false}, fortran = false;
  char key[32], val[16];
  Lex shape_at = {NULL, NULL};
  if (!punct(&x, '{')) return diag_why(why, n, "malformed header: not a Python dict");
  while (!punct(&x, '}')) {
    if (!string(&x, key, sizeof key) || !punct(&x, ':')) return diag_why(why, n, "malformed header: expected a 'key':");
    int k = strcmp(key, "descr") == 0 ? 0 : strcmp(key, "fortran_order") == 0 ? 1 : strcmp(key, "shape") == 0 ? 2 : -1;
    if (k < 0) return diag_why(why, n, "malformed header: unknown key '%s'", key);
    if (seen[k]) return diag_why(why, n, "malformed header: key '%s' twice", key);
    seen[k] = true;
    if (k == 0) {
      blanks(&x);
      if (x.p < x.end && *x.p == '[') return diag_why(why, n, "a structured array (a dtype with fields): not supported");
      if (!string(&x, val, sizeof val)) return diag_why(why, n, "malformed header: 'descr' is not a string");
      if (!descr(val, h, strings, why, n)) return false;
    } else if (k == 1) {
      if (word(&x, "True")) fortran = true;
      else if (!word(&x, "False")) return diag_why(why, n, "malformed header: 'fortran_order' is not True or False");
    } else {
      blanks(&x);
      shape_at = x;   /* parsed once the dtype is known */
      int depth = 0;
      while (x.p < x.end && (*x.p != ')' || --depth > 0)) depth += *x.p++ == '(';
      if (x.p < x.end) x.p++;
    }
    if (!punct(&x, ',')) {
      if (!punct(&x, '}')) return diag_why(why, n, "malformed header: expected ',' or '}'");
      break;
    }
  }
  blanks(&x);
  if (x.p != x.end) return diag_why(why, n, "malformed header: text after the dict");
  for (int k = 0; k < 3; k++)
    if (!seen[k])
      return diag_why(why, n, "malformed header: no '%s'", k == 0 ? "descr" : k == 1 ? "fortran_order" : "shape");
  if (!shape_tuple(&shape_at, h, why, n)) return false;
  if (fortran && h->rank > 1)
    return diag_why(why, n, "a Fortran-order (column-major) array: netrun reads C order (np.ascontiguousarray(a))");
  return true;
}

/* Reads exactly n bytes (false, why, if the input holds fewer). */
static bool take(NpyIn *in, void *buf, size_t n, const char *what, char *why, size_t wn) {
  for (size_t got = 0; got < n;) {
    int64_t k = in->read(in->ctx, (uint8_t *)buf + got, n - got, why, wn);
    if (k < 0) return false;
    if (k == 0) return diag_why(why, wn, "truncated: it ends in %s", what);
    got += (size_t)k;
  }
  return true;
}

/* npy_read_header; strings: a '<U' N array of strings is read too (h->chars). */
static bool read_header(NpyIn *in, NpyHeader *h, bool strings, char *why, size_t n) {
  memset(h, 0, sizeof *h);
  uint8_t pre[12];
  int64_t k = in->read(in->ctx, pre, 8, why, n);
  if (k < 0) return false;
  if (k < 6 || !npy_is_npy(pre, (size_t)k)) return diag_why(why, n, "not a NumPy .npy file (no \\x93NUMPY magic)");
  if (k < 8) return diag_why(why, n, "truncated: the file ends in the preamble");
  int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    return diag_why(why, n, ".npy format version %d.%d: netrun reads 1.0, 2.0 and 3.0", major, minor);
  int lenbytes = major == 1 ? 2 : 4;
  if (!take(in, pre + 8, (size_t)lenbytes, "the preamble", why, n)) return false;
  uint64_t hlen = pre[8] | (uint64_t)pre[9] << 8;
  if (lenbytes == 4) hlen |= (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
  if (hlen > NPY_MAX_HEADER) return diag_why(why, n, "a %" PRIu64 "-byte header: more than netrun reads (%d)", hlen,
                                             NPY_MAX_HEADER);
  char *text = mem_alloc(NULL, hlen + 1);
  char what[64];
  snprintf(what, sizeof what, "the %" PRIu64 "-byte header", hlen);
  bool ok = take(in, text, (size_t)hlen, what, why, n);
  if (ok && memchr(text, 0, hlen)) ok = diag_why(why, n, "malformed header: a NUL byte");
  ok = ok && header_dict(text, (size_t)hlen, h, strings, why, n);
  mem_free(text);
  if (!ok) return false;
  h->offset = 8 + (uint64_t)lenbytes + hlen;
  /* numel * 4 is at most TENSOR_MAX_BYTES (shape_tuple), chars at most NPY_MAX_CHARS */
  uint64_t data = (uint64_t)h->numel * (uint64_t)npy_size(h->type) * (uint64_t)(h->chars ? h->chars : 1);
  uint64_t have = in->size >= h->offset ? in->size - h->offset : 0;
  if (have < data)
    return diag_why(why, n, "truncated: the header says %" PRId64 " elements of %s (%" PRIu64 " bytes), the file holds %"
                    PRIu64 " bytes of data", h->numel, npy_name(h->type), data, have);
  if (have > data)
    return diag_why(why, n, "%" PRIu64 " bytes of trailing data after the %" PRId64 " elements of %s the header says",
                    have - data, h->numel, npy_name(h->type));
  return true;
}

bool npy_read_header(NpyIn *in, NpyHeader *h, char *why, size_t n) { return read_header(in, h, false, why, n); }

/* ---- elements ------------------------------------------------------------------- */

bool npy_can_cast(NpyType from, NpyType to) {
  switch (to) {
  case NPY_F32: return true;
  case NPY_I64: return from != NPY_F32 && from != NPY_F64;
  case NPY_U8: return from == NPY_U8 || from == NPY_BOOL;
  case NPY_BOOL: return from == NPY_BOOL;
  default: return false;
  }
}

/* Element i of src, of type t, as an integer (t an integer type). */
static int64_t int_at(const uint8_t *p, NpyType t) {
  switch (t) {
  case NPY_BOOL: return *p != 0;
  case NPY_U8: return *p;
  case NPY_I32: {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  default: {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  }
}

/* count elements from src (type from) into dst (type to); base: the
 * index of the first, for messages. */
static bool convert(const uint8_t *src, NpyType from, void *dst, NpyType to, int64_t count, int64_t base,
                    char *why, size_t n) {
  int sz = npy_size(from);
  for (int64_t i = 0; i < count; i++) {
    const uint8_t *p = src + i * sz;
    if (to == NPY_F32) {
      float f;
      if (from == NPY_F32) {
        memcpy(&f, p, 4);
      } else if (from == NPY_F64) {
        double v;
        memcpy(&v, p, 8);
        f = (float)v;
        if (isfinite(v) && !isfinite(f))
          return diag_why(why, n, "element %" PRId64 " is %.17g, beyond float32's range", base + i, v);
      } else {
        int64_t v = int_at(p, from);
        f = (float)v;
        /* exact when the float converts back to the same integer, compared
         * in integers: a double has rounded past 2^53 already; 2^63 (what
         * 2^63 - 1 rounds to) has no int64 to convert back to */
        if (f >= 0x1p63f || (int64_t)f != v)
          return diag_why(why, n, "element %" PRId64 " is %" PRId64 ", which float32 cannot hold exactly", base + i, v);
      }
      ((float *)dst)[i] = f;
    } else if (to == NPY_I64) {
      ((int64_t *)dst)[i] = int_at(p, from);
    } else {
      ((uint8_t *)dst)[i] = (uint8_t)(to == NPY_BOOL ? *p != 0 : from == NPY_BOOL ? *p != 0 : *p);
    }
  }
  return true;
}

bool npy_read_data(NpyIn *in, const NpyHeader *h, NpyType to, void *dst, char *why, size_t n) {
  if (h->chars) return diag_why(why, n, "an array of strings ('%s'): netrun reads numbers here", h->descr);
  int sz = npy_size(h->type), osz = npy_size(to);
  enum { CHUNK = 1 << 16 };
  if (h->type == to && to != NPY_BOOL)
    return take(in, dst, (size_t)h->numel * (size_t)sz, "the data", why, n);
  uint8_t *buf = mem_alloc(NULL, (size_t)CHUNK * 8);
  bool ok = true;
  for (int64_t at = 0; ok && at < h->numel; at += CHUNK) {
    int64_t k = h->numel - at < CHUNK ? h->numel - at : CHUNK;
    ok = take(in, buf, (size_t)(k * sz), "the data", why, n) &&
         convert(buf, h->type, (uint8_t *)dst + at * osz, to, k, at, why, n);
  }
  mem_free(buf);
  return ok;
}

/* One UTF-8 character of code point c into out (4 bytes at most); its length. */
static int utf8_put(uint32_t c, char *out) {
  if (c < 0x80) return out[0] = (char)c, 1;
  if (c < 0x800) return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000) {
    out[0] = (char)(0xe0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 0x3f)), out[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 0x3f));
  out[2] = (char)(0x80 | (c >> 6 & 0x3f)), out[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

char *npy_read_strings(NpyIn *in, const NpyHeader *h, char *why, size_t n) {
  if (!h->chars) return diag_why(why, n, "'%s' is not an array of strings ('<U')", h->descr), NULL;
  if ((uint64_t)h->numel * (uint64_t)h->chars > NPY_MAX_TEXT)
    return diag_why(why, n, "%" PRId64 " strings of %d characters: more than netrun reads", h->numel, h->chars), NULL;
  uint8_t *raw = mem_alloc(NULL, (size_t)(h->numel * h->chars) * 4 + 1);
  char *out = mem_alloc(NULL, (size_t)(h->numel * h->chars) * 4 + (size_t)h->numel + 1), *at = out;
  bool ok = take(in, raw, (size_t)(h->numel * h->chars) * 4, "the data", why, n);
  for (int64_t i = 0; ok && i < h->numel; i++) {
    for (int j = 0; ok && j < h->chars; j++) {
      const uint8_t *p = raw + ((size_t)i * (size_t)h->chars + (size_t)j) * 4;
      uint32_t c = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
      if (!c) break;   /* NumPy pads a shorter string with NULs */
      if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        ok = diag_why(why, n, "string %" PRId64 " holds U+%X, not a character", i, c);
      else
        at += utf8_put(c, at);
    }
    *at++ = 0;
  }
  mem_free(raw);
  if (!ok) mem_free(out);
  return ok ? out : NULL;
}

/* ---- files and archives -------------------------------------------------------- */

int64_t npy_read_stdio(void *ctx, void *buf, size_t n, char *why, size_t wn) {
  FILE *f = ctx;
  size_t k = fread(buf, 1, n, f);
  if (k < n && ferror(f)) {
    diag_why(why, wn, "cannot read: %s", strerror(errno));
    return -1;
  }
  return (int64_t)k;
}

static int64_t member_read(void *ctx, void *buf, size_t n, char *why, size_t wn) {
  return zip_read(ctx, buf, n, why, wn);
}

/* The file open at fd (named path; closed on failure) as a stream, its
 * size in *size. */
static FILE *open_fd(Diag *d, int fd, const char *path, uint64_t *size) {
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  *size = (uint64_t)st.st_size;
  return f;
}

/* Opens path for reading: a regular file, its size in *size. */
static FILE *open_file(Diag *d, const char *path, uint64_t *size) {
  char why[512];
  int fd = file_open_regular(path, why, sizeof why);
  if (fd < 0) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return NULL;
  }
  return open_fd(d, fd, path, size);
}

/* A member's array name: its name without ".npy"; NULL if it has none. */
static const char *array_name(const char *member, char *buf, size_t cap) {
  size_t len = strlen(member);
  if (len < 5 || strcmp(member + len - 4, ".npy") != 0 || len - 4 >= cap) return NULL;
  memcpy(buf, member, len - 4);
  buf[len - 4] = 0;
  return buf;
}

/* Opens member e of z as an array: its header read. */
static bool open_member(ZipReader *z, const ZipEntry *e, ZipStream *s, NpyIn *in, NpyHeader *h, bool strings,
                        char *why, size_t n) {
  if (!zip_stream_open(s, z, e, why, n)) return false;
  *in = (NpyIn){member_read, s, e->usize};
  return read_header(in, h, strings, why, n);
}

static bool each_array(Diag *d, FILE *f, uint64_t size, const char *path, NpyEach fn, void *ctx);

bool npy_each(Diag *d, const char *path, NpyEach fn, void *ctx) {
  uint64_t size;
  FILE *f = open_file(d, path, &size);
  return f && each_array(d, f, size, path, fn, ctx);
}

bool npy_each_fd(Diag *d, int fd, const char *path, NpyEach fn, void *ctx) {
  uint64_t size;
  FILE *f = open_fd(d, fd, path, &size);
  return f && each_array(d, f, size, path, fn, ctx);
}

/* fn on each array of the archive open as f (closed here). */
static bool each_array(Diag *d, FILE *f, uint64_t size, const char *path, NpyEach fn, void *ctx) {
  char why[1024] = "";
  ZipReader z;
  ZipStream *s = mem_calloc(1, sizeof *s);
  bool ok = zip_open(&z, f, size, why, sizeof why);
  if (!ok) diag_error(d, SPAN_NONE, "%s: %s", path, why);
  for (int i = 0; ok && i < z.n; i++) {
    char name[ZIP_MAX_NAME];
    NpyHeader h;
    NpyIn in;
    why[0] = 0;
    if (!array_name(z.e[i].name, name, sizeof name)) {
      diag_error(d, SPAN_NONE, "%s: member '%s' is not a .npy array (numpy.savez writes NAME.npy)", path, z.e[i].name);
      ok = false;
      break;
    }
    ok = open_member(&z, &z.e[i], s, &in, &h, strcmp(name, NPY_STATES) == 0, why, sizeof why) &&
         fn(ctx, name, &h, &in, why, sizeof why);
    zip_stream_close(s);
    if (!ok && why[0]) diag_error(d, SPAN_NONE, "%s: array '%s': %s", path, name, why);
  }
  zip_close(&z);
  mem_free(s);
  fclose(f);
  return ok;
}

/* ---- --feed ----------------------------------------------------------------------- */

/* The array as a tensor of dtype want; NULL with why. */
static Tensor *to_tensor(NpyIn *in, const NpyHeader *h, DType want, char *why, size_t n) {
  NpyType to = npy_of_dtype(want);
  if (!npy_can_cast(h->type, to)) {
    diag_why(why, n, "its %s ('%s') cannot become %s without changing values (netrun converts as NumPy's "
             "astype(casting='same_kind'))", npy_name(h->type), h->descr, dtype_name(want));
    return NULL;
  }
  char tw[TENSOR_WHY_MAX];
  Tensor *t = tensor_try_new(want, h->rank, h->shape, tw);
  if (!t) {
    diag_why(why, n, "out of memory: %s", tw);
    return NULL;
  }
  if (!npy_read_data(in, h, to, t->data, why, n)) {
    tensor_unref(t);
    return NULL;
  }
  return t;
}

/* The member of an archive --feed NAME takes. */
static const ZipEntry *feed_member(Diag *d, const char *path, const ZipReader *z, const char *name) {
  char want[ZIP_MAX_NAME + 8];
  snprintf(want, sizeof want, "%s.npy", name);
  const ZipEntry *e = zip_find(z, want);
  if (e) return e;
  if (z->n == 1) return &z->e[0];
  char list[512] = "";
  for (int i = 0; i < z->n && strlen(list) < 400; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", z->e[i].name);
  diag_error(d, SPAN_NONE, "%s: no array '%s' (member %s) among its %d: %s", path, name, want, z->n,
             z->n ? list : "none");
  return NULL;
}

static Tensor *feed_from(Diag *d, FILE *f, uint64_t size, const char *path, const VarDesc *decl);

Tensor *npy_feed_fd(Diag *d, int fd, const char *path, const VarDesc *decl) {
  uint64_t size;
  FILE *f = open_fd(d, fd, path, &size);
  return f ? feed_from(d, f, size, path, decl) : NULL;
}

/* npy_feed's reading of f (closed here), size bytes. */
static Tensor *feed_from(Diag *d, FILE *f, uint64_t size, const char *path, const VarDesc *decl) {
  uint8_t magic[8] = {0};
  size_t k = fread(magic, 1, sizeof magic, f);
  rewind(f);
  const char *name = decl->user_name ? decl->user_name : decl->name;
  char why[1024] = "";
  Tensor *t = NULL;
  if (npy_is_zip(magic, k)) {
    ZipReader z;
    ZipStream *s = mem_calloc(1, sizeof *s);
    if (!zip_open(&z, f, size, why, sizeof why)) {
      diag_error(d, SPAN_NONE, "%s: %s", path, why);
    } else {
      const ZipEntry *e = feed_member(d, path, &z, name);
      NpyHeader h;
      NpyIn in;
      if (e && (!open_member(&z, e, s, &in, &h, false, why, sizeof why) || !(t = to_tensor(&in, &h, decl->dtype, why, sizeof why))))
        diag_error(d, SPAN_NONE, "%s: member '%s': %s", path, e->name, why);
      zip_stream_close(s);
      zip_close(&z);
    }
    mem_free(s);
  } else {
    NpyIn in = {npy_read_stdio, f, size};
    NpyHeader h;
    if (!npy_read_header(&in, &h, why, sizeof why) || !(t = to_tensor(&in, &h, decl->dtype, why, sizeof why)))
      diag_error(d, SPAN_NONE, "%s: %s", path, why);
  }
  fclose(f);
  return t;
}

/* ---- writing -------------------------------------------------------------------------- */

/* A .npy header for an array of dtype descr and the shape given. */
static void format_header(const char *descr, int rank, const int64_t *dims, char *hbuf, size_t cap, size_t *hlen) {
  char shape[SHAPE_MAX_RANK * 22 + 4];
  size_t k = (size_t)snprintf(shape, sizeof shape, "(");
  for (int i = 0; i < rank; i++) k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, i ? ", " : "", dims[i]);
  snprintf(shape + k, sizeof shape - k, "%s)", rank == 1 ? "," : "");
  /* Version 1.0: magic, 1, 0, u16 length; the dict padded with spaces and
   * ended by '\n' so the elements start at a multiple of 64 bytes. */
  int len = snprintf(hbuf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64;
  memset(hbuf + 10 + len, ' ', total - 10 - (size_t)len - 1);
  hbuf[total - 1] = '\n';
  memcpy(hbuf, "\x93NUMPY\x01\x00", 8);
  hbuf[8] = (char)((total - 10) & 0xff);
  hbuf[9] = (char)((total - 10) >> 8);
  *hlen = total;
}

void npy_format_header(const Tensor *t, char *hbuf, size_t cap, size_t *hlen) {
  static const char *const descr[] = {[DT_F32] = "<f4", [DT_I64] = "<i8", [DT_BOOL] = "|b1", [DT_F64] = "<f8"};
  format_header(descr[t->dtype], t->rank, t->shape, hbuf, cap, hlen);
}

/* The code points of the UTF-8 string s into out (NULL: only counted);
 * their count, -1 if s is not UTF-8. */
static int64_t utf32_of(const char *s, uint32_t *out) {
  int64_t k = 0;
  for (const uint8_t *p = (const uint8_t *)s; *p; k++) {
    int len = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
    if (!len) return -1;
    uint32_t c = len == 1 ? *p : (uint32_t)(*p & (0x7f >> len));
    for (int i = 1; i < len; i++) {
      if ((p[i] & 0xc0) != 0x80) return -1;
      c = c << 6 | (p[i] & 0x3f);
    }
    if (out) out[k] = c;
    p += len;
  }
  return k;
}

/* The states member: the names as '<U' N, N their most characters. */
static bool add_states(ZipWriter *w, const char *const *states, int n, char *why, size_t wn) {
  int64_t chars = 1;
  for (int i = 0; i < n; i++) {
    int64_t k = utf32_of(states[i], NULL);
    if (k < 0) return diag_why(why, wn, "the state name '%s' is not UTF-8", states[i]);
    if (k > chars) chars = k;
  }
  size_t bytes = (size_t)n * (size_t)chars * 4;
  uint32_t *text = mem_calloc((size_t)n * (size_t)chars + 1, 4);
  for (int i = 0; i < n; i++) utf32_of(states[i], text + (size_t)i * (size_t)chars);   /* little-endian, as x86 */
  char descr[32], hbuf[640];
  size_t hlen;
  snprintf(descr, sizeof descr, "<U%" PRId64, chars);
  int64_t dims[1] = {n};
  format_header(descr, 1, dims, hbuf, sizeof hbuf, &hlen);
  const void *parts[2] = {hbuf, text};
  size_t lens[2] = {hlen, bytes};
  bool ok = zip_add(w, NPY_STATES ".npy", parts, lens, 2, why, wn);
  mem_free(text);
  return ok;
}

bool npy_write_npz(const char *path, const char *const *names, Tensor *const *t, int n, char *err, size_t errlen) {
  return npy_write_npz_states(path, names, t, n, NULL, 0, err, errlen);
}

bool npy_write_npz_states(const char *path, const char *const *names, Tensor *const *t, int n,
                          const char *const *states, int nstates, char *err, size_t errlen) {
  AtomicFile a;
  char why[600];
  if (!file_begin(&a, path, why, sizeof why)) return diag_why(err, errlen, "%s: %s", path, why);
  ZipWriter w;
  zip_writer_init(&w, a.fd);
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    char hbuf[640], member[ZIP_MAX_NAME + 8];
    size_t hlen;
    npy_format_header(t[i], hbuf, sizeof hbuf, &hlen);
    snprintf(member, sizeof member, "%s.npy", names[i]);
    const void *parts[2] = {hbuf, t[i]->data};
    size_t lens[2] = {hlen, (size_t)t[i]->numel * dtype_size(t[i]->dtype)};
    ok = zip_add(&w, member, parts, lens, 2, why, sizeof why);
  }
  if (ok && states) ok = add_states(&w, states, nstates, why, sizeof why);
  ok = ok && zip_finish(&w, why, sizeof why);
  int werr = w.err;
  zip_writer_free(&w);
  if (!ok) {
    file_abort(&a);
    return diag_why(err, errlen, "%s: %s", path, why);
  }
  if (!file_commit(&a, werr, why, sizeof why)) return diag_why(err, errlen, "%s: %s", path, why);
  return true;
}
