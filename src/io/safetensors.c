/* safetensors.c — reading and writing .safetensors files (safetensors.h):
 * the header's JSON, parsed by jansson, its checks, and the tensors read
 * through npy.c's conversions. */
#include "io/safetensors.h"

#include "base/diag.h"
#include "base/file.h"
#include "base/scan.h"

#include <jansson.h>

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

/* ---- the header -------------------------------------------------------------------- */

/* A non-negative integer: the JSON number v. */
static bool juint(json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

/* An array of at most max non-negative integers into v; *n: how many. */
static bool jints(json_t *a, uint64_t *v, int max, int *n, const char *name, const char *what, char *why, size_t wn) {
  if (!json_is_array(a)) return diag_why(why, wn, "header: tensor '%s': %s is not an array", name, what);
  if (json_array_size(a) > (size_t)max)
    return diag_why(why, wn, "header: tensor '%s': %s", name,
                    max == 2 ? "data_offsets is not [BEGIN, END]" : "more dimensions than netrun's 8");
  *n = (int)json_array_size(a);
  for (int i = 0; i < *n; i++)
    if (!juint(json_array_get(a, (size_t)i), &v[i]))
      return diag_why(why, wn, "header: tensor '%s': %s holds something other than a non-negative integer", name, what);
  return true;
}

static bool tensor_info(json_t *e, StTensor *t, char *why, size_t wn) {
  if (!json_is_object(e)) return diag_why(why, wn, "header: tensor '%s': its entry is not an object", t->name);
  const char *key;
  json_t *v;
  json_object_foreach(e, key, v) {
    if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data_offsets") != 0)
      return diag_why(why, wn, "header: tensor '%s': unknown key '%.64s'", t->name, key);
  }
  json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
  if (!dt || !shape || !off)
    return diag_why(why, wn, "header: tensor '%s' has no %s", t->name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");
  if (!json_is_string(dt)) return diag_why(why, wn, "header: tensor '%s': dtype is not a string", t->name);
  size_t i = 0;
  while (i < sizeof dtypes / sizeof *dtypes && strcmp(dtypes[i].name, json_string_value(dt)) != 0) i++;
  if (i == sizeof dtypes / sizeof *dtypes)
    return diag_why(why, wn, "tensor '%s': dtype %.32s is not supported: netrun reads F32, F64, I64, I32, U8 and BOOL",
                    t->name, json_string_value(dt));
  t->type = dtypes[i].type;
  uint64_t dims[SHAPE_MAX_RANK];
  if (!jints(shape, dims, SHAPE_MAX_RANK, &t->rank, t->name, "shape", why, wn)) return false;
  double numel = 1;
  for (int d = 0; d < t->rank; d++) t->shape[d] = (int64_t)dims[d], numel *= (double)dims[d];
  if (numel * 8 > (double)TENSOR_MAX_BYTES)
    return diag_why(why, wn, "tensor '%s': %.4g elements, more than netrun's largest tensor", t->name, numel);
  t->numel = (int64_t)numel;
  uint64_t o[2];
  int n;
  if (!jints(off, o, 2, &n, t->name, "data_offsets", why, wn)) return false;
  if (n != 2) return diag_why(why, wn, "header: tensor '%s': data_offsets is not [BEGIN, END]", t->name);
  t->begin = o[0];
  t->end = o[1];
  return true;
}

static bool metadata(json_t *m, StHeader *h, char *why, size_t wn) {
  if (!json_is_object(m)) return diag_why(why, wn, "header: __metadata__ is not an object");
  const char *key;
  json_t *v;
  json_object_foreach(m, key, v) {
    if (!json_is_string(v)) return diag_why(why, wn, "header: __metadata__ maps strings to strings");
    VEC_RESERVE(h->meta, h->capmeta, h->nmeta + 2);
    h->meta[h->nmeta++] = mem_strdup(key);
    h->meta[h->nmeta++] = mem_strdup(json_string_value(v));
  }
  return true;
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

/* The header's JSON is read by jansson: strict (no duplicate keys, no NUL
 * in strings, nothing after the object), its syntax errors with their
 * byte; then its structure is checked here. */
bool st_parse_header(const char *json, size_t n, uint64_t data, StHeader *h, char *why, size_t wn) {
  memset(h, 0, sizeof *h);
  if (n == 0 || json[0] != '{') return diag_why(why, wn, "header: not a JSON object");
  json_error_t err;
  json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    /* Python's json refuses what is not UTF-8, and so does jansson */
    if (strncmp(err.text, "unable to decode byte", 21) == 0)
      return diag_why(why, wn, "header: text that is not UTF-8 at byte %d", err.position);
    return diag_why(why, wn, "header: %s at byte %d", err.text, err.position);
  }
  bool ok = true;
  const char *name;
  json_t *v;
  json_object_foreach(root, name, v) {
    if (strcmp(name, "__metadata__") == 0) {
      if (!(ok = metadata(v, h, why, wn))) break;
      continue;
    }
    if (h->n == CKPT_MAX_TENSORS) {
      ok = diag_why(why, wn, "more than %d tensors", CKPT_MAX_TENSORS);
      break;
    }
    VEC_RESERVE(h->t, h->cap, h->n + 1);
    StTensor *t = &h->t[h->n++];
    memset(t, 0, sizeof *t);
    t->name = mem_strdup(name);
    if (!name[0] || strlen(name) > CKPT_MAX_NAME) {
      ok = diag_why(why, wn, "header: a tensor name of %zu bytes (1 to %d)", strlen(name), CKPT_MAX_NAME);
      break;
    }
    for (const char *c = name; ok && *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f)
        ok = diag_why(why, wn, "header: a tensor name holds a control character (0x%02x)", (unsigned char)*c);
    if (!ok || !(ok = tensor_info(v, t, why, wn))) break;
  }
  json_decref(root);
  return ok && check_layout(h, data, why, wn);
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

/* Parses the header of the file open at fd (named path in errors) into
 * *h: the stream is left open in *fp and the data's first byte is *base.
 * false with why (fd closed, no stream left). */
static bool open_header(int fd, const char *path, FILE **fp, StHeader *h, uint64_t *base, char *why, size_t wn) {
  char sub[1024];
  *fp = NULL;
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    close(fd);
    return diag_why(why, wn, "cannot read %s: %s", path, strerror(errno));
  }
  uint64_t size = (uint64_t)st.st_size, n = 0;
  uint8_t b[8];
  bool ok = fread(b, 1, 8, f) == 8;
  for (int i = 7; ok && i >= 0; i--) n = n << 8 | b[i];
  if (!ok) diag_why(sub, sizeof sub, "truncated: %" PRIu64 " bytes, not even the header's length", size);
  else if (n == 0) ok = diag_why(sub, sizeof sub, "a header of 0 bytes: a safetensors header is a JSON object");
  else if (n > ST_MAX_HEADER) ok = diag_why(sub, sizeof sub, "a header of %" PRIu64 " bytes: more than %d", n, ST_MAX_HEADER);
  else if (n > size - 8) ok = diag_why(sub, sizeof sub, "truncated: a header of %" PRIu64 " bytes, %" PRIu64 " follow", n,
                                       size - 8);
  char *json = ok ? mem_alloc(NULL, (size_t)n + 1) : NULL;
  if (ok && fread(json, 1, (size_t)n, f) != n) ok = diag_why(sub, sizeof sub, "cannot read the header");
  ok = ok && st_parse_header(json, (size_t)n, size - 8 - n, h, sub, sizeof sub);
  mem_free(json);
  if (!ok) {
    st_header_free(h);
    fclose(f);
    return diag_why(why, wn, "%s: %s", path, sub);
  }
  *fp = f;
  *base = 8 + n;
  return true;
}

bool st_read_header(const char *path, StHeader *h, char *err, size_t errlen) {
  char why[1024];
  *h = (StHeader){0};
  int fd = file_open_regular(path, why, sizeof why);
  if (fd < 0) return diag_why(err, errlen, "cannot read %s: %s", path, why);
  FILE *f;
  uint64_t base;
  if (!open_header(fd, path, &f, h, &base, err, errlen)) return false;
  fclose(f);
  return true;
}

bool st_read_fd(int fd, const char *path, Checkpoint *out, char *err, size_t errlen) {
  ckpt_init(out);
  char why[1024];
  FILE *f;
  uint64_t base;
  StHeader h = {0};
  if (!open_header(fd, path, &f, &h, &base, err, errlen)) return false;
  bool ok = read_tensors(f, base, &h, out, why, sizeof why);
  for (int i = 0; ok && i + 1 < h.nmeta; i += 2) ckpt_set(out, h.meta[i], h.meta[i + 1]);
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
