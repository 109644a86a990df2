/* checkpoint.c — the checkpoint file (format in checkpoint.h): building one
 * in memory, writing it atomically, and reading it back from untrusted
 * bytes (`netrun checkpoint`, cli/checkpointverb.c, describes one).
 *
 * The reader trusts nothing: every count, length and shape is checked
 * against the bytes that remain (and the limits in checkpoint.h) before
 * anything is allocated, and every failure is a message, never an abort. */
#include "io/checkpoint.h"

#include "base/file.h"
#include "base/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC "NETRUNCK"
#define PREAMBLE 20                     /* magic, version, total length */
#define SECTION_HEAD 12                 /* tag, payload length */
#define HEAD_BYTES 64
#define TRAILER 16                      /* "TAIL", total length, CRC-32 */
/* The smallest valid file: empty settings and tensors. */
#define MIN_TOTAL (PREAMBLE + SECTION_HEAD + HEAD_BYTES + 2 * (SECTION_HEAD + 4) + TRAILER)

/* The sections a version-1 file holds, in their order. */
static const char *const section_tag[] = {"HEAD", "SETS", "TENS"};
static const char *const section_name[] = {"header", "settings", "tensors"};
enum { N_SECTIONS = 3 };

/* dtype codes in the file, independent of the DType enum's values. */
static const DType code_dtype[] = {DT_F32, DT_I64, DT_BOOL, DT_F64};
enum { N_CODES = 4 };

static int dtype_code(DType t) {
  for (int i = 0; i < N_CODES; i++)
    if (code_dtype[i] == t) return i;
  return -1;
}

/* ---- building a checkpoint ------------------------------------------------ */

void ckpt_init(Checkpoint *c) {
  memset(c, 0, sizeof *c);
  c->version = CKPT_VERSION;
}

void ckpt_free(Checkpoint *c) {
  for (int i = 0; i < c->nsettings; i++) {
    mem_free(c->settings[i].key);
    mem_free(c->settings[i].value);
  }
  for (int i = 0; i < c->ntensors; i++) {
    mem_free(c->tensors[i].name);
    tensor_unref(c->tensors[i].t);
  }
  mem_free(c->settings);
  mem_free(c->tensors);
  ckpt_init(c);
}

uint64_t ckpt_hash(const void *bytes, size_t n) { return mem_fnv(MEM_FNV_BASIS, bytes, n); }

void ckpt_set(Checkpoint *c, const char *key, const char *value) {
  for (int i = 0; i < c->nsettings; i++)
    if (strcmp(c->settings[i].key, key) == 0) {
      mem_free(c->settings[i].value);
      c->settings[i].value = mem_strdup(value);
      return;
    }
  VEC_RESERVE(c->settings, c->capsettings, c->nsettings + 1);
  c->settings[c->nsettings].key = mem_strdup(key);
  c->settings[c->nsettings].value = mem_strdup(value);
  c->nsettings++;
}

void ckpt_setf(Checkpoint *c, const char *key, const char *fmt, ...) {
  char buf[CKPT_MAX_VALUE + 1];
  DIAG_FORMAT(buf, sizeof buf, fmt);
  ckpt_set(c, key, buf);
}

const char *ckpt_get(const Checkpoint *c, const char *key) {
  for (int i = 0; i < c->nsettings; i++)
    if (strcmp(c->settings[i].key, key) == 0) return c->settings[i].value;
  return NULL;
}

void ckpt_add_tensor(Checkpoint *c, const char *name, Tensor *t) {
  tensor_ref(t);
  for (int i = 0; i < c->ntensors; i++)
    if (strcmp(c->tensors[i].name, name) == 0) {
      tensor_unref(c->tensors[i].t);
      c->tensors[i].t = t;
      return;
    }
  VEC_RESERVE(c->tensors, c->captensors, c->ntensors + 1);
  c->tensors[c->ntensors].name = mem_strdup(name);
  c->tensors[c->ntensors].t = t;
  c->ntensors++;
}

Tensor *ckpt_find(const Checkpoint *c, const char *name) {
  for (int i = 0; i < c->ntensors; i++)
    if (strcmp(c->tensors[i].name, name) == 0) return c->tensors[i].t;
  return NULL;
}

/* ---- what the format can hold ------------------------------------------------ */

static bool is_control(unsigned char ch) { return ch < 0x20 || ch == 0x7f; }

static bool key_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
         ch == '.' || ch == '@' || ch == '-';
}

/* NULL if the n bytes at s are a valid key (keys) or name/value (!keys) of
 * at most max bytes, else what is wrong. */
static const char *check_text(const unsigned char *s, size_t n, size_t min, size_t max, bool key) {
  if (n < min) return "is empty";
  if (n > max) return "is too long";
  for (size_t i = 0; i < n; i++) {
    if (key && !key_char(s[i])) return "has a character other than [A-Za-z0-9_.@-]";
    if (!key && is_control(s[i])) return "has a control character";
  }
  return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The first name that appears twice among n, or NULL (sorts a copy). */
static const char *find_duplicate(char **names, int n) {
  if (n < 2) return NULL;
  char **sorted = mem_alloc(NULL, sizeof *sorted * (size_t)n);
  memcpy(sorted, names, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
  const char *dup = NULL;
  for (int i = 1; i < n && !dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
  mem_free(sorted);
  return dup;
}

/* The first tensor name (or setting key) that c holds twice, or NULL. */
static const char *held_twice(const Checkpoint *c, bool tensors) {
  int n = tensors ? c->ntensors : c->nsettings;
  char **names = mem_alloc(NULL, sizeof *names * (size_t)(n + 1));
  for (int i = 0; i < n; i++) names[i] = tensors ? c->tensors[i].name : c->settings[i].key;
  const char *dup = find_duplicate(names, n);
  mem_free(names);
  return dup;
}

/* Whether the reader will accept c; if not, writes why to err. */
static bool ckpt_valid(const Checkpoint *c, char *err, size_t errlen) {
  const char *why;
  if (c->nsettings > CKPT_MAX_SETTINGS || c->ntensors > CKPT_MAX_TENSORS) {
    snprintf(err, errlen, "too many %s (at most %d)", c->nsettings > CKPT_MAX_SETTINGS ? "settings" : "tensors",
             c->nsettings > CKPT_MAX_SETTINGS ? CKPT_MAX_SETTINGS : CKPT_MAX_TENSORS);
    return false;
  }
  char **names = mem_alloc(NULL, sizeof *names * (size_t)(c->nsettings + c->ntensors + 1));
  bool ok = true;
  for (int i = 0; i < c->nsettings && ok; i++) {
    const CkptSetting *s = &c->settings[i];
    names[i] = s->key;
    if ((why = check_text((const unsigned char *)s->key, strlen(s->key), 1, CKPT_MAX_NAME, true)))
      snprintf(err, errlen, "setting key '%.64s' %s", s->key, why), ok = false;
    else if ((why = check_text((const unsigned char *)s->value, strlen(s->value), 0, CKPT_MAX_VALUE, false)))
      snprintf(err, errlen, "the value of setting '%s' %s", s->key, why), ok = false;
  }
  const char *dup;
  if (ok && (dup = find_duplicate(names, c->nsettings)))
    snprintf(err, errlen, "setting '%s' appears twice", dup), ok = false;
  for (int i = 0; i < c->ntensors && ok; i++) {
    const CkptTensor *t = &c->tensors[i];
    names[i] = t->name;
    if ((why = check_text((const unsigned char *)t->name, strlen(t->name), 1, CKPT_MAX_NAME, false)))
      snprintf(err, errlen, "tensor name '%.64s' %s", t->name, why), ok = false;
    else if (!t->t)
      snprintf(err, errlen, "tensor '%s' is missing", t->name), ok = false;
    else if (dtype_code(t->t->dtype) < 0 || t->t->rank < 0 || t->t->rank > SHAPE_MAX_RANK)
      snprintf(err, errlen, "tensor '%s' has no file representation", t->name), ok = false;
  }
  if (ok && (dup = find_duplicate(names, c->ntensors)))
    snprintf(err, errlen, "tensor '%s' appears twice", dup), ok = false;
  mem_free(names);
  return ok;
}

/* ---- little-endian integers ------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

static void swap_elems(unsigned char *p, size_t count, size_t size) {
  for (size_t i = 0; i < count; i++, p += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      unsigned char x = p[a];
      p[a] = p[b];
      p[b] = x;
    }
}

static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
  uLong c = crc;
  while (n) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, k);
    p += k;
    n -= k;
  }
  return (uint32_t)c;
}

/* ---- writing ------------------------------------------------------------------ */

enum { WBUF = 1 << 20 };

typedef struct Writer {
  int fd;
  unsigned char *buf;
  size_t n;
  uint32_t crc;           /* of every byte put so far */
  int err;                /* the first errno, or 0 */
} Writer;

static void w_flush_bytes(Writer *w, const unsigned char *p, size_t n) {
  while (n && !w->err) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0) {
      if (errno != EINTR) w->err = errno;
    } else if (k == 0) {
      w->err = EIO;
    } else {
      p += k;
      n -= (size_t)k;
    }
  }
}

static void w_flush(Writer *w) {
  w_flush_bytes(w, w->buf, w->n);
  w->n = 0;
}

static void w_put(Writer *w, const void *data, size_t n) {
  const unsigned char *p = data;
  if (w->err) return;
  w->crc = crc_update(w->crc, p, n);
  if (w->n + n > WBUF) w_flush(w);
  if (n >= WBUF) w_flush_bytes(w, p, n);
  else memcpy(w->buf + w->n, p, n), w->n += n;
}

static void w_int(Writer *w, uint64_t v, int bytes) {
  unsigned char b[8];
  put_le(b, v, bytes);
  w_put(w, b, (size_t)bytes);
}

static void w_str(Writer *w, const char *s) {
  size_t n = strlen(s);
  w_int(w, n, 4);
  w_put(w, s, n);
}

static void w_section(Writer *w, int which, uint64_t len) {
  w_put(w, section_tag[which], 4);
  w_int(w, len, 8);
}

static void w_elems(Writer *w, const void *data, size_t count, size_t size) {
  if (!HOST_BIG_ENDIAN || size == 1) {
    w_put(w, data, count * size);
    return;
  }
  unsigned char tmp[4096];
  const unsigned char *p = data;
  size_t per = sizeof tmp / size;
  for (size_t i = 0; i < count; i += per) {
    size_t k = count - i < per ? count - i : per;
    memcpy(tmp, p + i * size, k * size);
    swap_elems(tmp, k, size);
    w_put(w, tmp, k * size);
  }
}

static uint64_t str_bytes(const char *s) { return 4 + (uint64_t)strlen(s); }

static uint64_t tensor_bytes(const Tensor *t) { return (uint64_t)t->numel * dtype_size(t->dtype); }

static uint64_t settings_len(const Checkpoint *c) {
  uint64_t n = 4;
  for (int i = 0; i < c->nsettings; i++) n += str_bytes(c->settings[i].key) + str_bytes(c->settings[i].value);
  return n;
}

static uint64_t tensors_len(const Checkpoint *c) {
  uint64_t n = 4;
  for (int i = 0; i < c->ntensors; i++) {
    const Tensor *t = c->tensors[i].t;
    n += str_bytes(c->tensors[i].name) + 2 + 8 * (uint64_t)t->rank + tensor_bytes(t);
  }
  return n;
}

static void write_all(Writer *w, const Checkpoint *c) {
  uint64_t sets = settings_len(c), tens = tensors_len(c);
  uint64_t total = PREAMBLE + (SECTION_HEAD + HEAD_BYTES) + (SECTION_HEAD + sets) + (SECTION_HEAD + tens) + TRAILER;
  w_put(w, MAGIC, 8);
  w_int(w, CKPT_VERSION, 4);
  w_int(w, total, 8);

  w_section(w, 0, HEAD_BYTES);
  w_int(w, c->program_hash, 8);
  w_int(w, c->epoch, 8);
  w_int(w, c->step, 8);
  w_int(w, c->samples, 8);
  for (int i = 0; i < 4; i++) w_int(w, c->rng.s[i], 8);

  w_section(w, 1, sets);
  w_int(w, (uint64_t)c->nsettings, 4);
  for (int i = 0; i < c->nsettings; i++) {
    w_str(w, c->settings[i].key);
    w_str(w, c->settings[i].value);
  }

  w_section(w, 2, tens);
  w_int(w, (uint64_t)c->ntensors, 4);
  for (int i = 0; i < c->ntensors && !w->err; i++) {
    const Tensor *t = c->tensors[i].t;
    w_str(w, c->tensors[i].name);
    w_int(w, (uint64_t)dtype_code(t->dtype), 1);
    w_int(w, (uint64_t)t->rank, 1);
    for (int d = 0; d < t->rank; d++) w_int(w, (uint64_t)t->shape[d], 8);
    w_elems(w, t->data, (size_t)t->numel, dtype_size(t->dtype));
  }

  w_put(w, "TAIL", 4);
  w_int(w, total, 8);
  unsigned char crc[4];
  put_le(crc, w->crc, 4);
  if (w->n + 4 > WBUF) w_flush(w);
  memcpy(w->buf + w->n, crc, 4);       /* the CRC does not cover itself */
  w->n += 4;
  w_flush(w);
}

bool ckpt_write(const char *path, const Checkpoint *c, char *err, size_t errlen) {
  char why[512];
  if (!ckpt_valid(c, why, sizeof why)) {
    snprintf(err, errlen, "%s: cannot save checkpoint: %s", path, why);
    return false;
  }
  Writer w = {.fd = -1, .buf = mem_alloc(NULL, WBUF), .crc = (uint32_t)crc32(0, Z_NULL, 0)};
  AtomicFile f;
  char ferr[4200];
  bool ok = file_begin(&f, path, ferr, sizeof ferr);
  if (ok) {
    w.fd = f.fd;
    write_all(&w, c);
    ok = file_commit(&f, w.err, ferr, sizeof ferr);
  }
  if (!ok) snprintf(err, errlen, "%s: cannot save checkpoint: %s", path, ferr);
  mem_free(w.buf);
  return ok;
}

/* ---- reading ------------------------------------------------------------------ */

/* A cursor over one section's payload, with what the error messages need. */
typedef struct Cursor {
  const unsigned char *buf;
  size_t off, end;        /* absolute offsets in buf */
  const char *section;    /* "header", "settings", "tensors" */
  char item[320];         /* "tensor 2 of 4 ('W1')", or "" */
  char *err;
  size_t errlen;
} Cursor;

static bool bad(Cursor *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(Cursor *p, const char *fmt, ...) {
  char msg[256];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  return diag_why(p->err, p->errlen, "malformed %s section: %s%s%s (at byte %zu)", p->section, p->item,
                  p->item[0] ? ": " : "", msg, p->off);
}

/* The next n bytes, or NULL (reported) if fewer remain. */
static const unsigned char *take(Cursor *p, size_t n, const char *field) {
  if (p->end - p->off < n) {
    bad(p, "%s needs %zu bytes, %zu remain", field, n, p->end - p->off);
    return NULL;
  }
  p->off += n;
  return p->buf + p->off - n;
}

static bool take_int(Cursor *p, int bytes, uint64_t *v, const char *field) {
  const unsigned char *b = take(p, (size_t)bytes, field);
  if (b) *v = get_le(b, bytes);
  return b != NULL;
}

/* A string of min..max bytes: a key (key) or a name/value; a new copy. */
static bool take_str(Cursor *p, size_t min, size_t max, bool key, const char *field, char **out) {
  uint64_t n;
  const unsigned char *s;
  if (!take_int(p, 4, &n, field)) return false;
  if (n > max) return bad(p, "%s is %" PRIu64 " bytes long (at most %zu)", field, n, max);
  if (!(s = take(p, (size_t)n, field))) return false;
  const char *why = check_text(s, (size_t)n, min, max, key);
  if (why) return bad(p, "%s %s", field, why);
  *out = mem_alloc(NULL, (size_t)n + 1);
  memcpy(*out, s, (size_t)n);
  (*out)[n] = 0;
  return true;
}

static bool parse_head(Cursor *p, Checkpoint *c) {
  uint64_t v[8];
  static const char *const field[] = {"program hash", "epoch", "step", "samples seen",
                                      "rng state",    "rng state", "rng state", "rng state"};
  for (int i = 0; i < 8; i++)
    if (!take_int(p, 8, &v[i], field[i])) return false;
  c->program_hash = v[0];
  c->epoch = v[1];
  c->step = v[2];
  c->samples = v[3];
  for (int i = 0; i < 4; i++) c->rng.s[i] = v[4 + i];
  return true;
}

/* A section's count of WHAT (at most MAX items of 8 bytes or more) in *n. */
static bool take_count(Cursor *p, const char *what, int max, uint64_t *n) {
  if (!take_int(p, 4, n, "the count")) return false;
  if (*n > (uint64_t)max) return bad(p, "%" PRIu64 " %s (at most %d)", *n, what, max);
  if (*n * 8 > p->end - p->off)
    return bad(p, "%" PRIu64 " %s need at least %" PRIu64 " bytes, %zu remain", *n, what, *n * 8, p->end - p->off);
  return true;
}

static bool parse_settings(Cursor *p, Checkpoint *c) {
  uint64_t n;
  if (!take_count(p, "settings", CKPT_MAX_SETTINGS, &n)) return false;
  for (uint64_t i = 0; i < n; i++) {
    char *key = NULL, *value = NULL;
    snprintf(p->item, sizeof p->item, "setting %" PRIu64 " of %" PRIu64, i + 1, n);
    if (!take_str(p, 1, CKPT_MAX_NAME, true, "the key", &key)) return false;
    snprintf(p->item, sizeof p->item, "setting %" PRIu64 " of %" PRIu64 " ('%s')", i + 1, n, key);
    if (!take_str(p, 0, CKPT_MAX_VALUE, false, "the value", &value)) {
      mem_free(key);
      return false;
    }
    VEC_RESERVE(c->settings, c->capsettings, c->nsettings + 1);
    c->settings[c->nsettings++] = (CkptSetting){key, value};
  }
  p->item[0] = 0;
  const char *dup = held_twice(c, false);
  return !dup || bad(p, "setting '%s' appears twice", dup);
}

static bool parse_tensor(Cursor *p, Checkpoint *c, uint64_t i, uint64_t n) {
  char *name = NULL;
  snprintf(p->item, sizeof p->item, "tensor %" PRIu64 " of %" PRIu64, i + 1, n);
  if (!take_str(p, 1, CKPT_MAX_NAME, false, "the name", &name)) return false;
  snprintf(p->item, sizeof p->item, "tensor %" PRIu64 " of %" PRIu64 " ('%s')", i + 1, n, name);
  uint64_t code, rank;
  int64_t shape[SHAPE_MAX_RANK];
  bool ok = take_int(p, 1, &code, "the dtype") && take_int(p, 1, &rank, "the rank");
  if (ok && code >= N_CODES) ok = bad(p, "unknown dtype code %" PRIu64, code);
  if (ok && rank > SHAPE_MAX_RANK) ok = bad(p, "rank %" PRIu64 " (at most %d)", rank, SHAPE_MAX_RANK);
  bool empty = false;
  for (int d = 0; ok && d < (int)rank; d++) {
    uint64_t v;
    ok = take_int(p, 8, &v, "a dimension");
    if (ok && v > (uint64_t)INT64_MAX) ok = bad(p, "dimension %d is %" PRIu64, d, v);
    if (ok) shape[d] = (int64_t)v, empty |= v == 0;
  }
  if (!ok) {
    mem_free(name);
    return false;
  }
  /* The data must fit in what remains: check before multiplying out. */
  DType dt = code_dtype[code];
  size_t size = dtype_size(dt), avail = (p->end - p->off) / size;
  uint64_t numel = 1;
  char dims[SHAPE_MAX_RANK * 22 + 3];
  size_t k = 0;
  for (int e = 0; e < (int)rank; e++)
    k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%" PRId64, e ? ", " : "[", shape[e]);
  snprintf(dims + k, sizeof dims - k, rank ? "]" : "[]");
  for (int d = 0; d < (int)rank && !empty; d++) {
    if ((uint64_t)shape[d] > avail / numel) {
      mem_free(name);
      return bad(p, "shape %s %s needs more data than the %zu bytes that remain", dims, dtype_name(dt),
                 p->end - p->off);
    }
    numel *= (uint64_t)shape[d];
  }
  if (empty) numel = 0;
  char why[TENSOR_WHY_MAX];
  Tensor *t = tensor_try_new(dt, (int)rank, shape, why);
  if (!t) {
    mem_free(name);
    return bad(p, "shape %s %s: %s", dims, dtype_name(dt), why);
  }
  const unsigned char *data = take(p, (size_t)numel * size, "the data");   /* checked above */
  if (numel && data) memcpy(t->data, data, (size_t)numel * size);
  if (HOST_BIG_ENDIAN) swap_elems(t->data, (size_t)numel, size);
  if (dt == DT_BOOL)
    for (uint64_t e = 0; e < numel; e++)
      if (tensor_bool(t)[e] > 1) {
        int v = tensor_bool(t)[e];
        tensor_unref(t);
        mem_free(name);
        return bad(p, "bool element %" PRIu64 " is %d (not 0 or 1)", e, v);
      }
  VEC_RESERVE(c->tensors, c->captensors, c->ntensors + 1);
  c->tensors[c->ntensors++] = (CkptTensor){name, t};
  return true;
}

static bool parse_tensors(Cursor *p, Checkpoint *c) {
  uint64_t n;
  /* The smallest tensor: a 1-byte name, dtype, rank, one bool. */
  if (!take_count(p, "tensors", CKPT_MAX_TENSORS, &n)) return false;
  for (uint64_t i = 0; i < n; i++)
    if (!parse_tensor(p, c, i, n)) return false;
  p->item[0] = 0;
  const char *dup = held_twice(c, true);
  return !dup || bad(p, "tensor '%s' appears twice", dup);
}

/* A 4-byte tag, printable. */
static const char *tag_str(const unsigned char *t, char out[5]) {
  for (int i = 0; i < 4; i++) out[i] = t[i] >= 0x20 && t[i] < 0x7f ? (char)t[i] : '?';
  out[4] = 0;
  return out;
}

/* Whether the last TRAILER bytes of the n at buf are a trailer saying n. */
static bool trailer_says(const unsigned char *buf, size_t n) {
  return n >= MIN_TOTAL && memcmp(buf + n - TRAILER, "TAIL", 4) == 0 && get_le(buf + n - TRAILER + 4, 8) == n;
}

static bool check_crc(const unsigned char *buf, size_t n, char *err, size_t errlen) {
  uint32_t stored = (uint32_t)get_le(buf + n - 4, 4);
  uint32_t computed = crc_update((uint32_t)crc32(0, Z_NULL, 0), buf, n - 4);
  if (stored == computed) return true;
  return diag_why(err, errlen, "corrupt (checksum mismatch: stored %08" PRIx32 ", computed %08" PRIx32 ")", stored,
                  computed);
}

static bool parse_file(const unsigned char *buf, size_t n, Checkpoint *c, char *err, size_t errlen) {
  if (n == 0) return diag_why(err, errlen, "not a netrun checkpoint (empty file)");
  if (memcmp(buf, MAGIC, n < 8 ? n : 8) != 0) return diag_why(err, errlen, "not a netrun checkpoint (bad magic)");
  if (n < 12) return diag_why(err, errlen, "truncated (%zu bytes, expected at least %d)", n, MIN_TOTAL);
  uint32_t version = (uint32_t)get_le(buf + 8, 4);
  if (version == 0) return diag_why(err, errlen, "malformed preamble: format version 0");
  if (version > CKPT_VERSION)
    return diag_why(err, errlen, "written by a newer netrun (format version %" PRIu32 "; this netrun reads up to %d)",
                    version, CKPT_VERSION);
  c->version = version;
  if (n < PREAMBLE) return diag_why(err, errlen, "truncated (%zu bytes, expected at least %d)", n, MIN_TOTAL);
  uint64_t total = get_le(buf + 12, 8);
  if (total != n) {
    /* A whole file whose preamble's length is damaged is corrupt, not
     * truncated: its trailer still says how long it is. */
    if (trailer_says(buf, n)) {
      if (!check_crc(buf, n, err, errlen)) return false;
      return diag_why(err, errlen, "corrupt (the preamble says %" PRIu64 " bytes, the trailer %zu)", total, n);
    }
    if (total > n) return diag_why(err, errlen, "truncated (%zu bytes, expected %" PRIu64 ")", n, total);
    return diag_why(err, errlen, "corrupt (%zu bytes, expected %" PRIu64 ": data after the end)", n, total);
  }
  if (total < MIN_TOTAL)
    return diag_why(err, errlen, "malformed preamble: total length %" PRIu64 " (at least %d)", total, MIN_TOTAL);
  if (!check_crc(buf, n, err, errlen)) return false;
  if (!trailer_says(buf, n)) return diag_why(err, errlen, "malformed trailer");

  size_t off = PREAMBLE, end = n - TRAILER;
  int next = 0;                         /* the section expected next */
  while (off < end) {
    char tag[5];
    if (end - off < SECTION_HEAD)
      return diag_why(err, errlen, "malformed file: a section at byte %zu needs %d bytes, %zu remain", off,
                      SECTION_HEAD, end - off);
    const unsigned char *head = buf + off;
    uint64_t len = get_le(head + 4, 8);
    if (len > end - off - SECTION_HEAD)
      return diag_why(err, errlen, "malformed file: section '%s' at byte %zu is %" PRIu64 " bytes long, %zu remain",
                      tag_str(head, tag), off, len, end - off - SECTION_HEAD);
    int which = -1;
    for (int s = 0; s < N_SECTIONS; s++)
      if (memcmp(head, section_tag[s], 4) == 0) which = s;
    if (which >= 0 && which != next) {
      if (next < N_SECTIONS)
        return diag_why(err, errlen, "malformed file: section '%s' at byte %zu where '%s' was expected",
                        tag_str(head, tag), off, section_tag[next]);
      return diag_why(err, errlen, "malformed file: a second '%s' section at byte %zu", tag_str(head, tag), off);
    }
    off += SECTION_HEAD;
    if (which >= 0) {
      Cursor p = {.buf = buf, .off = off, .end = off + (size_t)len, .section = section_name[which],
                 .err = err, .errlen = errlen};
      bool ok = which == 0 ? parse_head(&p, c) : which == 1 ? parse_settings(&p, c) : parse_tensors(&p, c);
      if (!ok) return false;
      if (p.off != p.end) return bad(&p, "%zu stray bytes at its end", p.end - p.off);
      next++;
    }
    off += (size_t)len;                 /* unknown sections are skipped */
  }
  if (next < N_SECTIONS) return diag_why(err, errlen, "malformed file: no %s section", section_name[next]);
  return true;
}

bool ckpt_parse(const void *buf, size_t n, Checkpoint *out, char *err, size_t errlen) {
  ckpt_init(out);
  if (parse_file(buf, n, out, err, errlen)) return true;
  ckpt_free(out);
  return false;
}

/* Reads the whole file open at fd (named path; closed here) into *buf
 * (mem_alloc'ed); false with err. */
static bool read_file(int fd, const char *path, unsigned char **buf, size_t *n, char *err, size_t errlen) {
  *buf = NULL;
  *n = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return diag_why(err, errlen, "%s: cannot read: %s", path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return diag_why(err, errlen, "%s: is a directory, not a checkpoint", path);
  }
  /* The whole file is read into memory: it must fit the memory limit too. */
  uint64_t most = CKPT_MAX_FILE < (uint64_t)tensor_memory_limit() ? CKPT_MAX_FILE : (uint64_t)tensor_memory_limit();
  if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > most) {
    close(fd);
    return diag_why(err, errlen, "%s: too large for a checkpoint (%lld bytes; at most %" PRIu64 "%s)", path,
                    (long long)st.st_size, most, most < CKPT_MAX_FILE ? ", the memory limit" : "");
  }
  /* A regular file is read in one allocation (and one byte more, to see its
   * end); anything else grows as it comes. */
  size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 16, len = 0;
  unsigned char *b = mem_alloc(NULL, cap);
  for (;;) {
    if (len == cap) {
      if (cap > most) {
        close(fd);
        mem_free(b);
        return diag_why(err, errlen, "%s: too large for a checkpoint (more than %" PRIu64 " bytes%s)", path, most,
                        most < CKPT_MAX_FILE ? ", the memory limit" : "");
      }
      cap *= 2;
      b = mem_alloc(b, cap);
    }
    ssize_t k = read(fd, b + len, cap - len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      int e = errno;
      close(fd);
      mem_free(b);
      return diag_why(err, errlen, "%s: cannot read: %s", path, strerror(e));
    }
    if (k == 0) break;
    len += (size_t)k;
    /* A stream (a pipe, /dev/zero) is read only as far as its preamble
     * says: a wrong magic, or bytes past the declared length, end it, and
     * ckpt_parse says what is wrong. */
    if (!S_ISREG(st.st_mode) && len >= PREAMBLE && (memcmp(b, MAGIC, 8) != 0 || len > get_le(b + 12, 8))) break;
  }
  close(fd);
  *buf = b;
  *n = len;
  return true;
}

bool ckpt_read(const char *path, Checkpoint *out, char *err, size_t errlen) {
  char why[512];
  int fd = file_open_regular(path, why, sizeof why);   /* a FIFO is refused, not waited on */
  if (fd < 0) {
    ckpt_init(out);
    if (strcmp(why, strerror(EISDIR)) == 0) return diag_why(err, errlen, "%s: is a directory, not a checkpoint", path);
    return diag_why(err, errlen, "%s: cannot read: %s", path, why);
  }
  return ckpt_read_fd(fd, path, out, err, errlen);
}

bool ckpt_read_fd(int fd, const char *path, Checkpoint *out, char *err, size_t errlen) {
  unsigned char *buf;
  size_t n;
  ckpt_init(out);
  if (!read_file(fd, path, &buf, &n, err, errlen)) return false;
  char msg[1024];
  bool ok = ckpt_parse(buf, n, out, msg, sizeof msg);
  mem_free(buf);
  if (!ok) snprintf(err, errlen, "%s: %s", path, msg);
  return ok;
}
