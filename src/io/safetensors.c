/* safetensors.c — reading and writing .safetensors files (safetensors.h):
 * the header's JSON, parsed by a small strict parser of its own (objects,
 * strings, arrays of integers: all a header holds), its checks, and the
 * tensors read through npy.c's conversions. */
#include "io/safetensors.h"

#include "base/diag.h"
#include "base/file.h"
#include "base/scan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  const char *name;
  NpyType type;
} dtypes[] = {{"F32", NPY_F32}, {"F64", NPY_F64}, {"I64", NPY_I64}, {"I32", NPY_I32}, {"U8", NPY_U8}, {"BOOL", NPY_BOOL}};

static const char *st_dtype(NpyType t) {
  for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
    if (dtypes[i].type == t) return dtypes[i].name;
  return "?";
}

/* ---- JSON ------------------------------------------------------------------------ */

typedef struct Json {
  const char *p, *end, *start;
  char *why;
  size_t wn;
} Json;

static bool jfail(Json *j, const char *what) {
  return diag_why(j->why, j->wn, "header: %s at byte %td", what, j->p - j->start);
}

static void ws(Json *j) { scan_blanks(&j->p, j->end); }
static bool eat(Json *j, char c) { return scan_eat(&j->p, j->end, c); }

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* One \u escape (and its low surrogate) at j->p, past the backslash-u. */
static bool uescape(Json *j, char *o, size_t *k) {
  int cp = j->end - j->p >= 4 ? hex4(j->p) : -1;
  if (cp < 0) return jfail(j, "a bad \\u escape");
  j->p += 4;
  if (cp >= 0xd800 && cp < 0xdc00) {
    int lo = j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' ? hex4(j->p + 2) : -1;
    if (lo < 0xdc00 || lo > 0xdfff) return jfail(j, "a lone surrogate escape");
    j->p += 6;
    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
  } else if (cp >= 0xdc00 && cp < 0xe000) {
    return jfail(j, "a lone surrogate escape");
  }
  if (cp == 0) return jfail(j, "a NUL character");
  *k += utf8(o + *k, (unsigned)cp);
  return true;
}

/* A string, its escapes decoded, into *out (mem_alloc'ed). */
static bool jstring(Json *j, char **out) {
  ws(j);
  if (j->p >= j->end || *j->p != '"') return jfail(j, "expected a string");
  j->p++;
  const char *close = j->p;
  while (close < j->end && *close != '"') close += *close == '\\' && close + 1 < j->end ? 2 : 1;
  if (close >= j->end) return jfail(j, "an unterminated string");
  char *o = mem_alloc(NULL, (size_t)(close - j->p) + 1);
  size_t k = 0;
  bool ok = true;
  while (ok && j->p < close) {
    unsigned char c = (unsigned char)*j->p++;
    if (c < 0x20) {
      j->p--;
      ok = jfail(j, "a control character in a string");
    } else if (c != '\\') {
      o[k++] = (char)c;
    } else {
      char e = *j->p++;
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *at = e ? strchr(from, e) : NULL;
      if (at) o[k++] = to[at - from];
      else if (e == 'u') ok = uescape(j, o, &k);
      else ok = jfail(j, "a bad escape");
    }
  }
  o[k] = 0;
  if (!ok) {
    mem_free(o);
    return false;
  }
  j->p = close + 1;
  *out = o;
  return true;
}

/* A non-negative integer below 2^63. */
static bool juint(Json *j, uint64_t *out) {
  ws(j);
  uint64_t v = 0;
  const char *b = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (v > (UINT64_C(1) << 63) / 10) return jfail(j, "an integer too large");
    v = v * 10 + (uint64_t)(*j->p++ - '0');
  }
  if (j->p == b) return jfail(j, "expected a non-negative integer");
  if (j->p - b > 1 && *b == '0') return jfail(j, "an integer with a leading zero");
  if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) return jfail(j, "expected an integer");
  if (v >= UINT64_C(1) << 63) return jfail(j, "an integer too large");
  *out = v;
  return true;
}

/* '[' int {',' int} ']' into v (at most max); *n: how many. */
static bool jints(Json *j, uint64_t *v, int max, int *n) {
  *n = 0;
  if (!eat(j, '[')) return jfail(j, "expected '['");
  if (eat(j, ']')) return true;
  do {
    if (*n == max) return jfail(j, max == 2 ? "data_offsets is not [BEGIN, END]" : "more dimensions than netrun's 8");
    if (!juint(j, &v[(*n)++])) return false;
  } while (eat(j, ','));
  return eat(j, ']') || jfail(j, "expected ',' or ']'");
}

/* ---- the header -------------------------------------------------------------------- */

static bool tensor_info(Json *j, StTensor *t) {
  bool seen[3] = {false, false, false};
  if (!eat(j, '{')) return jfail(j, "a tensor's entry is not an object");
  if (eat(j, '}')) return jfail(j, "a tensor's entry is empty");
  do {
    char *key;
    if (!jstring(j, &key)) return false;
    int k = strcmp(key, "dtype") == 0 ? 0 : strcmp(key, "shape") == 0 ? 1 : strcmp(key, "data_offsets") == 0 ? 2 : -1;
    bool known = k >= 0 && !seen[k];
    if (!known) diag_why(j->why, j->wn, "header: tensor '%s': %s key '%.64s'", t->name, k < 0 ? "unknown" : "repeated", key);
    mem_free(key);
    if (!known) return false;
    seen[k] = true;
    if (!eat(j, ':')) return jfail(j, "expected ':'");
    if (k == 0) {
      char *dt;
      if (!jstring(j, &dt)) return false;
      size_t i = 0;
      while (i < sizeof dtypes / sizeof *dtypes && strcmp(dtypes[i].name, dt) != 0) i++;
      if (i == sizeof dtypes / sizeof *dtypes)
        diag_why(j->why, j->wn, "tensor '%s': dtype %.32s is not supported: netrun reads F32, F64, I64, I32, U8 and BOOL",
                 t->name, dt);
      else
        t->type = dtypes[i].type;
      mem_free(dt);
      if (i == sizeof dtypes / sizeof *dtypes) return false;
    } else if (k == 1) {
      uint64_t dims[SHAPE_MAX_RANK];
      if (!jints(j, dims, SHAPE_MAX_RANK, &t->rank)) return false;
      double numel = 1;
      for (int d = 0; d < t->rank; d++) t->shape[d] = (int64_t)dims[d], numel *= (double)dims[d];
      if (numel * 8 > (double)TENSOR_MAX_BYTES)
        return diag_why(j->why, j->wn, "tensor '%s': %.4g elements, more than netrun's largest tensor", t->name, numel);
      t->numel = (int64_t)numel;
    } else {
      uint64_t off[2];
      int n;
      if (!jints(j, off, 2, &n)) return false;
      if (n != 2) return jfail(j, "data_offsets is not [BEGIN, END]");
      t->begin = off[0];
      t->end = off[1];
    }
  } while (eat(j, ','));
  if (!eat(j, '}')) return jfail(j, "expected ',' or '}'");
  if (!seen[0] || !seen[1] || !seen[2])
    return diag_why(j->why, j->wn, "header: tensor '%s' has no %s", t->name, !seen[0] ? "dtype" : !seen[1] ? "shape" : "data_offsets");
  return true;
}

static bool metadata(Json *j, StHeader *h) {
  if (!eat(j, '{')) return jfail(j, "__metadata__ is not an object");
  if (eat(j, '}')) return true;
  do {
    VEC_RESERVE(h->meta, h->capmeta, h->nmeta + 2);
    if (!jstring(j, &h->meta[h->nmeta])) return false;
    h->nmeta++;
    if (!eat(j, ':')) return jfail(j, "expected ':'");
    if (!jstring(j, &h->meta[h->nmeta])) return jfail(j, "__metadata__ maps strings to strings");
    h->nmeta++;
  } while (eat(j, ','));
  return eat(j, '}') || jfail(j, "expected ',' or '}'");
}

static int by_begin(const void *a, const void *b) {
  const StTensor *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* The ranges tile [0, data) exactly; each is its shape's size. */
static bool check_layout(StHeader *h, uint64_t data, char *why, size_t wn) {
  for (int i = 0; i < h->n; i++) {
    StTensor *t = &h->t[i];
    uint64_t need = (uint64_t)t->numel * (uint64_t)npy_size(t->type);
    if (t->end < t->begin || t->end - t->begin != need)
      return diag_why(why, wn, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] do not hold its %" PRId64
                      " elements of %s (%" PRIu64 " bytes)", t->name, t->begin, t->end, t->numel, st_dtype(t->type), need);
    for (int k = 0; k < i; k++)
      if (strcmp(h->t[k].name, t->name) == 0) return diag_why(why, wn, "header: tensor '%s' twice", t->name);
  }
  if (h->n) qsort(h->t, (size_t)h->n, sizeof *h->t, by_begin);   /* qsort(NULL, 0) is undefined */
  uint64_t at = 0;
  for (int i = 0; i < h->n; i++) {
    if (h->t[i].begin != at)
      return diag_why(why, wn, "tensor '%s' starts at byte %" PRIu64 " of the data, where %s", h->t[i].name,
                      h->t[i].begin, h->t[i].begin > at ? "a hole is before it" : "it overlaps the one before");
    at = h->t[i].end;
  }
  if (at != data)
    return diag_why(why, wn, "%s: the tensors hold %" PRIu64 " bytes of data, the file %" PRIu64,
                    at > data ? "truncated" : "trailing data", at, data);
  return true;
}

/* Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), as the safetensors header, JSON, must
 * be: Python's json refuses anything else. */
static bool utf8_ok(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    unsigned c = *p;
    int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (k < 0) return false;
    unsigned cp = k == 0 ? c : c & (0x3f >> k);
    for (int i = 1; i <= k; i++) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (p[i] & 0x3f);
    }
    static const unsigned least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    p += k + 1;
  }
  return true;
}

bool st_parse_header(const char *json, size_t n, uint64_t data, StHeader *h, char *why, size_t wn) {
  memset(h, 0, sizeof *h);
  Json j = {json, json + n, json, why, wn};
  if (n == 0 || json[0] != '{') return diag_why(why, wn, "header: not a JSON object");
  j.p++;
  bool meta = false;
  if (!eat(&j, '}')) {
    do {
      char *name;
      if (!jstring(&j, &name)) return false;
      if (!utf8_ok(name)) {
        mem_free(name);
        return jfail(&j, "a tensor name that is not UTF-8");
      }
      if (!eat(&j, ':')) {
        mem_free(name);
        return jfail(&j, "expected ':'");
      }
      if (strcmp(name, "__metadata__") == 0) {
        mem_free(name);
        if (meta) return jfail(&j, "__metadata__ twice");
        meta = true;
        if (!metadata(&j, h)) return false;
        continue;
      }
      if (h->n == CKPT_MAX_TENSORS) {
        mem_free(name);
        return diag_why(why, wn, "more than %d tensors", CKPT_MAX_TENSORS);
      }
      VEC_RESERVE(h->t, h->cap, h->n + 1);
      StTensor *t = &h->t[h->n++];
      memset(t, 0, sizeof *t);
      t->name = name;
      if (!name[0] || strlen(name) > CKPT_MAX_NAME)
        return diag_why(why, wn, "header: a tensor name of %zu bytes (1 to %d)", strlen(name), CKPT_MAX_NAME);
      for (const char *c = name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
          return diag_why(why, wn, "header: a tensor name holds a control character (0x%02x)", (unsigned char)*c);
      if (!tensor_info(&j, t)) return false;
    } while (eat(&j, ','));
    if (!eat(&j, '}')) return jfail(&j, "expected ',' or '}'");
  }
  ws(&j);
  if (j.p != j.end) return jfail(&j, "text after the header's object");
  return check_layout(h, data, why, wn);
}

void st_header_free(StHeader *h) {
  for (int i = 0; i < h->n; i++) mem_free(h->t[i].name);
  for (int i = 0; i < h->nmeta; i++) mem_free(h->meta[i]);
  mem_free(h->t);
  mem_free(h->meta);
  memset(h, 0, sizeof *h);
}

bool st_is_safetensors(const void *b, size_t n) {
  const uint8_t *p = b;
  if (n < 9) return false;
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = len << 8 | p[i];
  return len >= 2 && len <= ST_MAX_HEADER && p[8] == '{';
}

/* ---- files ------------------------------------------------------------------------ */

static DType dtype_of(NpyType t) {
  return t == NPY_F32 || t == NPY_F64 ? DT_F32 : t == NPY_BOOL ? DT_BOOL : DT_I64;
}

/* The tensors of h, whose data starts at byte base of f. */
static bool read_tensors(FILE *f, uint64_t base, const StHeader *h, Checkpoint *out, char *why, size_t wn) {
  for (int i = 0; i < h->n; i++) {
    const StTensor *t = &h->t[i];
    char tw[TENSOR_WHY_MAX];
    Tensor *x = tensor_try_new(dtype_of(t->type), t->rank, t->shape, tw);
    if (!x) return diag_why(why, wn, "tensor '%s': out of memory: %s", t->name, tw);
    NpyHeader nh = {.type = t->type, .numel = t->numel};
    NpyIn in = {npy_read_stdio, f, t->end - t->begin};
    bool ok = fseeko(f, (off_t)(base + t->begin), SEEK_SET) == 0;
    char sub[512] = "cannot seek";
    ok = ok && npy_read_data(&in, &nh, npy_of_dtype(x->dtype), x->data, sub, sizeof sub);
    if (ok) ckpt_add_tensor(out, t->name, x);
    tensor_unref(x);
    if (!ok) return diag_why(why, wn, "tensor '%s': %s", t->name, sub);
  }
  return true;
}

bool st_read(const char *path, Checkpoint *out, char *err, size_t errlen) {
  char why[1024];
  int fd = file_open_regular(path, why, sizeof why);
  if (fd < 0) {
    ckpt_init(out);
    return diag_why(err, errlen, "cannot read %s: %s", path, why);
  }
  return st_read_fd(fd, path, out, err, errlen);
}

bool st_read_fd(int fd, const char *path, Checkpoint *out, char *err, size_t errlen) {
  ckpt_init(out);
  char why[1024];
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    close(fd);
    return diag_why(err, errlen, "cannot read %s: %s", path, strerror(errno));
  }
  uint64_t size = (uint64_t)st.st_size, n = 0;
  uint8_t b[8];
  bool ok = fread(b, 1, 8, f) == 8;
  for (int i = 7; ok && i >= 0; i--) n = n << 8 | b[i];
  if (!ok) diag_why(why, sizeof why, "truncated: %" PRIu64 " bytes, not even the header's length", size);
  else if (n == 0) ok = diag_why(why, sizeof why, "a header of 0 bytes: a safetensors header is a JSON object");
  else if (n > ST_MAX_HEADER) ok = diag_why(why, sizeof why, "a header of %" PRIu64 " bytes: more than %d", n, ST_MAX_HEADER);
  else if (n > size - 8) ok = diag_why(why, sizeof why, "truncated: a header of %" PRIu64 " bytes, %" PRIu64 " follow", n,
                                       size - 8);
  StHeader h = {0};
  char *json = ok ? mem_alloc(NULL, (size_t)n + 1) : NULL;
  if (ok && fread(json, 1, (size_t)n, f) != n) ok = diag_why(why, sizeof why, "cannot read the header");
  ok = ok && st_parse_header(json, (size_t)n, size - 8 - n, &h, why, sizeof why);
  ok = ok && read_tensors(f, 8 + n, &h, out, why, sizeof why);
  for (int i = 0; ok && i + 1 < h.nmeta; i += 2) ckpt_set(out, h.meta[i], h.meta[i + 1]);
  mem_free(json);
  st_header_free(&h);
  fclose(f);
  if (!ok) {
    ckpt_free(out);
    return diag_why(err, errlen, "%s: %s", path, why);
  }
  return true;
}

/* ---- writing -------------------------------------------------------------------------- */

/* s as a JSON string, appended to the buffer. */
static void jquote(FILE *m, const char *s) {
  fputc('"', m);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(m, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(m, "\\u%04x", *p);
    else fputc(*p, m);
  }
  fputc('"', m);
}

bool st_write(const char *path, const char *const *names, Tensor *const *t, int n, const char *const *meta,
              int nmeta, char *err, size_t errlen) {
  for (int i = 0; i < n; i++)   /* the header is JSON: UTF-8 only */
    if (!utf8_ok(names[i])) return diag_why(err, errlen, "%s: tensor name '%s' is not UTF-8: refused", path, names[i]);
  for (int i = 0; i < 2 * nmeta; i++)
    if (!utf8_ok(meta[i])) return diag_why(err, errlen, "%s: metadata '%s' is not UTF-8: refused", path, meta[i]);
  int *order = mem_alloc(NULL, sizeof *order * (size_t)(n + 1)), k = 0;
  for (size_t size = 8; size >= 1; size /= 2)
    for (int i = 0; i < n; i++)
      if (dtype_size(t[i]->dtype) == size) order[k++] = i;
  char *json = NULL;
  size_t jlen = 0;
  FILE *m = open_memstream(&json, &jlen);
  if (!m) mem_oom(0);
  fputc('{', m);
  if (nmeta) {
    fputs("\"__metadata__\":{", m);
    for (int i = 0; i < nmeta; i++) {
      jquote(m, meta[2 * i]);
      fputc(':', m);
      jquote(m, meta[2 * i + 1]);
      if (i + 1 < nmeta) fputc(',', m);
    }
    fputc('}', m);
  }
  uint64_t at = 0;
  for (int j = 0; j < k; j++) {
    const Tensor *x = t[order[j]];
    uint64_t bytes = (uint64_t)x->numel * dtype_size(x->dtype);
    fputs(j || nmeta ? "," : "", m);
    jquote(m, names[order[j]]);
    fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype(npy_of_dtype(x->dtype)));
    for (int d = 0; d < x->rank; d++) fprintf(m, "%s%" PRId64, d ? "," : "", x->shape[d]);
    fprintf(m, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at, at + bytes);
    at += bytes;
  }
  fputc('}', m);
  while ((ftell(m) % 8) != 0) fputc(' ', m);
  fclose(m);
  AtomicFile a;
  char why[600];
  bool ok = file_begin(&a, path, why, sizeof why);
  if (ok) {
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)jlen >> (8 * i));
    int werr = file_write_all(a.fd, len, 8);
    if (!werr) werr = file_write_all(a.fd, json, jlen);
    for (int j = 0; j < k && !werr; j++)
      werr = file_write_all(a.fd, t[order[j]]->data, (size_t)t[order[j]]->numel * dtype_size(t[order[j]]->dtype));
    ok = file_commit(&a, werr, why, sizeof why);
  }
  free(json);
  mem_free(order);
  return ok || diag_why(err, errlen, "%s: %s", path, why);
}
