/* onnx.c — the ONNX reader: protobuf's wire format decoded field by field
 * into the structures of onnx.h, every length and count checked before
 * it is used (the format and the limits are in onnx.h). */
#include "io/onnx.h"

#include "base/diag.h"
#include "base/file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the wire format ------------------------------------------------------------ */

typedef struct Pb {
  const uint8_t *p, *end;
} Pb;

/* One field: its number, wire type, and value (a number in v, or the
 * bytes of a length-delimited field in sub). */
typedef struct Field {
  uint32_t num;
  int wire;
  uint64_t v;
  Pb sub;
} Field;

typedef struct Rd {
  Arena *a;
  char *why;
  size_t wn;
  int depth;
  int64_t nodes;               /* in every graph so far */
  const char *dir;             /* the model's folder, where external data is read; NULL: refused */
  int64_t ext_left;            /* bytes external data may still take (raw and decoded) */
} Rd;

static bool fail(Rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(Rd *r, const char *fmt, ...) {
  DIAG_FORMAT(r->why, r->wn, fmt);
  return false;
}

static bool varint(Pb *b, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (b->p >= b->end) return false;
    uint8_t c = *b->p++;
    v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;   /* more than ten bytes */
}

/* The next field of b into f; false at the end (*bad set if the bytes
 * end inside a field or hold a wire type netrun does not know). */
static bool next_field(Pb *b, Field *f, bool *bad) {
  *bad = false;
  *f = (Field){0};
  if (b->p >= b->end) return false;
  uint64_t key;
  if (!varint(b, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) return !(*bad = true);
  f->num = (uint32_t)(key >> 3);
  f->wire = (int)(key & 7);
  size_t left = (size_t)(b->end - b->p);
  switch (f->wire) {
  case 0:
    if (!varint(b, &f->v)) return !(*bad = true);
    return true;
  case 1:
  case 5: {
    size_t k = f->wire == 1 ? 8 : 4;
    if (left < k) return !(*bad = true);
    f->v = 0;
    for (size_t i = k; i-- > 0;) f->v = f->v << 8 | b->p[i];
    b->p += k;
    return true;
  }
  case 2: {
    uint64_t n;
    if (!varint(b, &n) || n > (uint64_t)(b->end - b->p)) return !(*bad = true);
    f->sub = (Pb){b->p, b->p + n};
    b->p += n;
    return true;
  }
  default:   /* groups (3, 4) are long deprecated; 6 and 7 do not exist */
    return !(*bad = true);
  }
}

/* Iterates the fields of message `msg` (a Pb) as Field F; a malformed
 * field ends the loop with `bad` set, which the caller checks after. */
#define EACH_FIELD(msg, F, bad) for (Field F = {0}; next_field(&(msg), &F, &(bad));)

static bool want(Rd *r, const Field *f, int wire, const char *what) {
  if (f->wire == wire) return true;
  return fail(r, "%s has wire type %d, not %d", what, f->wire, wire);
}

static bool string(Rd *r, const Field *f, const char *what, const char **out) {
  if (!want(r, f, 2, what)) return false;
  size_t n = (size_t)(f->sub.end - f->sub.p);
  if (memchr(f->sub.p, 0, n)) return fail(r, "%s holds a NUL byte", what);
  *out = arena_strndup(r->a, (const char *)f->sub.p, n);
  return true;
}

static bool int_field(Rd *r, const Field *f, const char *what, int64_t *out) {
  if (!want(r, f, 0, what)) return false;
  *out = (int64_t)f->v;
  return true;
}

/* A repeated number, packed (one length-delimited field) or not (one
 * field per value): appended to *v (n, cap).  kind 'i' int64 varints, 'f'
 * floats (fixed32), 'd' doubles (fixed64). */
static bool repeated(Rd *r, const Field *f, char kind, const char *what, void **v, int *n, int *cap, int max) {
  int wire = kind == 'i' ? 0 : kind == 'f' ? 5 : 1;
  Pb one = {NULL, NULL}, b = f->wire == 2 ? f->sub : one;
  if (f->wire != 2 && f->wire != wire) return fail(r, "%s has wire type %d", what, f->wire);
  for (bool first = true; f->wire == 2 ? b.p < b.end : first; first = false) {
    uint64_t x = f->v;
    if (f->wire == 2) {
      size_t k = kind == 'f' ? 4 : 8;
      if (kind == 'i') {
        if (!varint(&b, &x)) return fail(r, "%s: a packed varint is cut short", what);
      } else {
        if ((size_t)(b.end - b.p) < k) return fail(r, "%s: packed values are cut short", what);
        x = 0;
        for (size_t i = k; i-- > 0;) x = x << 8 | b.p[i];
        b.p += k;
      }
    }
    if (*n >= max) return fail(r, "%s holds more than %d values", what, max);
    if (kind == 'i') {
      *(int64_t *)arena_push(r->a, v, n, cap, sizeof(int64_t)) = (int64_t)x;
    } else if (kind == 'f') {
      uint32_t u = (uint32_t)x;
      float g;
      memcpy(&g, &u, 4);
      *(double *)arena_push(r->a, v, n, cap, sizeof(double)) = g;
    } else {
      double g;
      memcpy(&g, &x, 8);
      *(double *)arena_push(r->a, v, n, cap, sizeof(double)) = g;
    }
  }
  return true;
}

/* ---- tensors ------------------------------------------------------------------- */

int onnx_elem_size(int t) {
  switch (t) {
  case ONNX_FLOAT: case ONNX_INT32: return 4;
  case ONNX_INT64: case ONNX_DOUBLE: return 8;
  case ONNX_UINT8: case ONNX_INT8: case ONNX_BOOL: return 1;
  default: return 0;
  }
}

const char *onnx_type_name(int t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                      "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "an unknown type";
}

static bool is_float(int t) { return t == ONNX_FLOAT || t == ONNX_DOUBLE; }

/* Element i of the little-endian raw bytes of type t. */
static void raw_elem(const uint8_t *p, int t, double *f, int64_t *iv) {
  uint64_t u = 0;
  int k = onnx_elem_size(t);
  for (int i = k; i-- > 0;) u = u << 8 | p[i];
  switch (t) {
  case ONNX_FLOAT: { uint32_t w = (uint32_t)u; float g; memcpy(&g, &w, 4); *f = g; break; }
  case ONNX_DOUBLE: memcpy(f, &u, 8); break;
  case ONNX_INT32: *iv = (int32_t)(uint32_t)u; break;
  case ONNX_INT8: *iv = (int8_t)(uint8_t)u; break;
  case ONNX_UINT8: *iv = (uint8_t)u; break;
  case ONNX_BOOL: *iv = u != 0; break;
  default: *iv = (int64_t)u; break;
  }
}

/* ---- external data ----------------------------------------------------------------
 * A tensor whose data_location is EXTERNAL names a file (location) in the
 * model's folder and the bytes there (offset, length).  The location must
 * stay inside the folder: not absolute, no '..' part, and no link that
 * leads out of it.  Every number is checked, the bytes must lie within
 * the file, be the tensor's size, and fit what is left of the limit. */

typedef struct Ext {
  const char *location, *offset, *length;
} Ext;

static bool ext_entry(Rd *r, Pb b, Ext *e) {
  bool bad;
  const char *key = "", *value = "";
  EACH_FIELD(b, f, bad) {
    if ((f.num == 1 && !string(r, &f, "external_data key", &key)) ||
        (f.num == 2 && !string(r, &f, "external_data value", &value)))
      return false;
  }
  if (bad) return fail(r, "external_data: malformed bytes");
  if (strcmp(key, "location") == 0) e->location = value;
  else if (strcmp(key, "offset") == 0) e->offset = value;
  else if (strcmp(key, "length") == 0) e->length = value;
  return true;
}

/* A decimal count of bytes: digits only, at most INT64_MAX. */
static bool ext_number(const char *s, int64_t *out) {
  if (!s[0] || strlen(s) > 19) return false;
  int64_t v = 0;
  for (const char *c = s; *c; c++) {
    if (*c < '0' || *c > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c - '0', &v))
      return false;
  }
  *out = v;
  return true;
}

static bool ext_read(Rd *r, const OnnxTensor *t, const Ext *e, int k, Pb *raw, const char *what) {
  const char *loc = e->location;
  if (!r->dir)
    return fail(r, "%s '%s' is stored outside the file (external data), which netrun reads only for a model read "
                "from a file", what, t->name);
  if (!loc || !loc[0]) return fail(r, "%s '%s': its external data has no location", what, t->name);
  size_t ll = strlen(loc);
  bool up = strcmp(loc, "..") == 0 || strncmp(loc, "../", 3) == 0 || strstr(loc, "/../") ||
            (ll >= 3 && strcmp(loc + ll - 3, "/..") == 0);
  if (loc[0] == '/' || up || strchr(loc, '\\'))
    return fail(r, "%s '%s': its external data '%s' is outside the model's folder (absolute paths and '..' are "
                "refused)", what, t->name, loc);
  int64_t off = 0, len = 0, need = t->numel * k;
  if (e->offset && !ext_number(e->offset, &off))
    return fail(r, "%s '%s': its external data offset '%s' is not a number of bytes", what, t->name, e->offset);
  if (e->length && !ext_number(e->length, &len))
    return fail(r, "%s '%s': its external data length '%s' is not a number of bytes", what, t->name, e->length);
  if (e->length && len != need)
    return fail(r, "%s '%s': its external data length is %lld bytes, but its dims say %lld", what, t->name,
                (long long)len, (long long)need);
  len = need;
  int64_t cost = len + t->numel * 8;   /* the bytes, then their values decoded */
  if (cost > r->ext_left)
    return fail(r, "%s '%s': its external data (%lld bytes, %lld once read) is more than the %lld bytes left of "
                "--max-memory", what, t->name, (long long)len, (long long)cost, (long long)r->ext_left);
  /* One open, and the folder checked on that descriptor: a link flipped
   * between a check of the path and its open cannot lead out. */
  char *path = arena_printf(r->a, "%s/%s", r->dir, loc), sub[256], proc[64];
  int fd = file_open_regular(path, sub, sizeof sub);
  if (fd < 0) return fail(r, "%s '%s': cannot read its external data '%s': %s", what, t->name, loc, sub);
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  char *real = mem_realpath(proc), *home = mem_realpath(r->dir);
  size_t hl = home ? strlen(home) : 0;
  bool inside = real && home && strncmp(real, home, hl) == 0 && (real[hl] == '/' || strcmp(home, "/") == 0);
  mem_free(real);
  mem_free(home);
  if (!inside) {
    close(fd);
    return fail(r, "%s '%s': its external data '%s' is a link leading out of the model's folder", what, t->name, loc);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || off > (int64_t)st.st_size || len > (int64_t)st.st_size - off) {
    close(fd);
    return fail(r, "%s '%s': its external data, %lld bytes at offset %lld, lies beyond the end of '%s' (%lld bytes)",
                what, t->name, (long long)len, (long long)off, loc, (long long)st.st_size);
  }
  uint8_t *buf = arena_alloc(r->a, (size_t)(len ? len : 1));
  for (int64_t got = 0; got < len;) {
    ssize_t n = pread(fd, buf + got, (size_t)(len - got), (off_t)(off + got));
    if (n <= 0) {
      close(fd);
      return fail(r, "%s '%s': cannot read its external data '%s': %s", what, t->name, loc,
                  n < 0 ? strerror(errno) : "it shrank");
    }
    got += n;
  }
  close(fd);
  r->ext_left -= cost;
  *raw = (Pb){buf, buf + len};
  return true;
}

static bool tensor(Rd *r, Pb b, OnnxTensor *t, const char *what) {
  bool bad;
  int64_t dt = 0;
  int64_t *dims = NULL;
  int nd = 0, capd = 0;
  double *fl = NULL;
  int64_t *il = NULL;
  int nf = 0, capf = 0, ni = 0, capi = 0;
  Pb raw = {NULL, NULL};
  bool external = false;
  Ext ext = {NULL, NULL, NULL};
  *t = (OnnxTensor){.name = ""};
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    switch (f.num) {
    case 1: ok = repeated(r, &f, 'i', "dims", (void **)&dims, &nd, &capd, ONNX_MAX_RANK); break;
    case 2: ok = int_field(r, &f, "data_type", &dt); break;
    case 4: ok = repeated(r, &f, 'f', "float_data", (void **)&fl, &nf, &capf, INT32_MAX); break;
    case 5: case 7: ok = repeated(r, &f, 'i', "int data", (void **)&il, &ni, &capi, INT32_MAX); break;
    case 10: ok = repeated(r, &f, 'd', "double_data", (void **)&fl, &nf, &capf, INT32_MAX); break;
    case 8: ok = string(r, &f, "name", &t->name); break;
    case 9: ok = want(r, &f, 2, "raw_data"), raw = f.sub; break;
    case 13: external = true, ok = want(r, &f, 2, "external_data") && ext_entry(r, f.sub, &ext); break;
    case 14: external = external || f.v == 1; break;
    default: break;
    }
    if (!ok) return false;
  }
  if (bad) return fail(r, "%s: malformed bytes", what);
  if (!onnx_elem_size((int)dt))
    return fail(r, "%s '%s' has data type %s, which netrun does not read", what, t->name,
                onnx_type_name((int)dt));
  t->data_type = (int)dt;
  t->rank = nd;
  t->numel = 1;
  for (int i = 0; i < nd; i++) {
    if (dims[i] < 0) return fail(r, "%s '%s' has a negative dimension (%lld)", what, t->name, (long long)dims[i]);
    t->dims[i] = dims[i];
    if (dims[i] && t->numel > ONNX_MAX_NUMEL / dims[i])
      return fail(r, "%s '%s' has more than 2^40 elements", what, t->name);
    t->numel *= dims[i];
  }
  if (t->numel > ONNX_MAX_NUMEL) return fail(r, "%s '%s' has more than 2^40 elements", what, t->name);
  int k = onnx_elem_size(t->data_type);
  if (external && !ext_read(r, t, &ext, k, &raw, what)) return false;
  if (external) nf = ni = 0;
  bool fl_type = is_float(t->data_type);
  int64_t have = raw.p ? (int64_t)(raw.end - raw.p) / k : fl_type ? nf : ni;
  if (raw.p && (raw.end - raw.p) % k)
    return fail(r, "%s '%s': raw_data holds %lld bytes, not a whole number of %d-byte elements", what, t->name,
                (long long)(raw.end - raw.p), k);
  if (have != t->numel)
    return fail(r, "%s '%s': its dims say %lld elements but its data holds %lld", what, t->name,
                (long long)t->numel, (long long)have);
  if (fl_type) t->f = raw.p ? arena_alloc(r->a, (size_t)t->numel * sizeof *t->f) : fl;
  else t->i = raw.p ? arena_alloc(r->a, (size_t)t->numel * sizeof *t->i) : il;
  for (int64_t i = 0; raw.p && i < t->numel; i++) {
    double g = 0;
    int64_t v = 0;
    raw_elem(raw.p + i * k, t->data_type, &g, &v);
    if (fl_type) t->f[i] = g;
    else t->i[i] = v;
  }
  if (!raw.p && t->data_type == ONNX_BOOL)
    for (int64_t i = 0; i < t->numel; i++) t->i[i] = t->i[i] != 0;
  return true;
}

/* ---- graphs --------------------------------------------------------------------- */

static bool graph(Rd *r, Pb b, OnnxGraph *g, const char *what);

static bool attribute(Rd *r, Pb b, OnnxAttr *at, const char *what) {
  bool bad;
  int capf = 0, capi = 0, caps = 0;
  *at = (OnnxAttr){.name = "", .s = ""};
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    switch (f.num) {
    case 1: ok = string(r, &f, "name", &at->name); break;
    case 2: {
      if (!(ok = want(r, &f, 5, "f"))) break;
      uint32_t u = (uint32_t)f.v;
      float g;
      memcpy(&g, &u, 4);
      at->f = g;
      break;
    }
    case 3: ok = int_field(r, &f, "i", &at->i); break;
    case 4: ok = want(r, &f, 2, "s") && string(r, &f, "s", &at->s); break;
    case 5:
      if (!(ok = want(r, &f, 2, "t"))) break;
      at->t = arena_alloc(r->a, sizeof *at->t);
      ok = tensor(r, f.sub, at->t, "a tensor attribute");
      break;
    case 6: case 11:
      if (!(ok = want(r, &f, 2, "g"))) break;
      if (r->depth >= ONNX_MAX_DEPTH) return fail(r, "%s: graphs nest more than %d deep", what, ONNX_MAX_DEPTH);
      if (!at->g) {
        at->g = arena_alloc(r->a, sizeof *at->g);
        r->depth++;
        ok = graph(r, f.sub, at->g, "a subgraph");
        r->depth--;
      }
      break;
    case 7:
      ok = repeated(r, &f, 'f', "floats", (void **)&at->floats, &at->nfloats, &capf, ONNX_MAX_LIST);
      break;
    case 8: ok = repeated(r, &f, 'i', "ints", (void **)&at->ints, &at->nints, &capi, ONNX_MAX_LIST); break;
    case 9: {
      if (at->nstrings >= ONNX_MAX_LIST) return fail(r, "%s: more than %d strings", what, ONNX_MAX_LIST);
      const char **s = ARENA_PUSH(r->a, at->strings, at->nstrings, caps);
      ok = string(r, &f, "strings", s);
      break;
    }
    case 20: {
      int64_t t = 0;
      ok = int_field(r, &f, "type", &t);
      at->type = t >= 0 && t < 100 ? (int)t : 0;
      break;
    }
    default: break;
    }
    if (!ok) return false;
  }
  if (bad) return fail(r, "%s: malformed bytes", what);
  at->n = at->type == ONNX_ATTR_FLOATS ? at->nfloats : at->type == ONNX_ATTR_STRINGS ? at->nstrings : at->nints;
  return true;
}

/* Appends the string of field f to a node's list. */
static bool name_list(Rd *r, const Field *f, const char ***list, int *n, int *cap, const char *what) {
  if (*n >= ONNX_MAX_LIST) return fail(r, "%s: more than %d names", what, ONNX_MAX_LIST);
  return string(r, f, what, ARENA_PUSH(r->a, *list, *n, *cap));
}

static bool node(Rd *r, Pb b, OnnxNode *nd, const char *what) {
  bool bad;
  *nd = (OnnxNode){.name = "", .op_type = "", .domain = ""};
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    switch (f.num) {
    case 1: ok = name_list(r, &f, &nd->in, &nd->nin, &nd->capin, "input"); break;
    case 2: ok = name_list(r, &f, &nd->out, &nd->nout, &nd->capout, "output"); break;
    case 3: ok = string(r, &f, "name", &nd->name); break;
    case 4: ok = string(r, &f, "op_type", &nd->op_type); break;
    case 7: ok = string(r, &f, "domain", &nd->domain); break;
    case 5: {
      if (!(ok = want(r, &f, 2, "attribute"))) break;
      if (nd->nattrs >= ONNX_MAX_LIST) return fail(r, "%s: more than %d attributes", what, ONNX_MAX_LIST);
      char sub[64];
      snprintf(sub, sizeof sub, "attribute[%d]", nd->nattrs);
      ok = attribute(r, f.sub, ARENA_PUSH(r->a, nd->attrs, nd->nattrs, nd->capattrs), sub);
      break;
    }
    default: break;
    }
    if (!ok) return false;
  }
  if (bad) return fail(r, "%s: malformed bytes", what);
  return true;
}

static bool dimension(Rd *r, Pb b, OnnxValue *v, int i) {
  bool bad;
  v->dims[i] = -1;
  v->syms[i] = "";
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    if (f.num == 1) {
      ok = int_field(r, &f, "dim_value", &v->dims[i]);
      if (ok && v->dims[i] < 0) return fail(r, "'%s': dimension %d is negative", v->name, i);
      if (ok && v->dims[i] > ONNX_MAX_NUMEL) return fail(r, "'%s': dimension %d is larger than 2^40", v->name, i);
      v->syms[i] = NULL;
    } else if (f.num == 2) {
      ok = string(r, &f, "dim_param", &v->syms[i]);
      v->dims[i] = -1;
    }
    if (!ok) return false;
  }
  return !bad || fail(r, "'%s': malformed dimension", v->name);
}

/* ValueInfoProto: its name, and from TypeProto.tensor_type the element
 * type and the shape. */
static bool value_info(Rd *r, Pb b, OnnxValue *v) {
  bool bad, bad2, bad3, bad4;
  *v = (OnnxValue){.name = "", .rank = -1};
  EACH_FIELD(b, f, bad) {
    if (f.num == 1 && !string(r, &f, "name", &v->name)) return false;
    if (f.num != 2 || f.wire != 2) continue;
    EACH_FIELD(f.sub, t, bad2) {
      if (t.num != 1 || t.wire != 2) continue;
      EACH_FIELD(t.sub, tt, bad3) {
        if (tt.num == 1 && tt.wire == 0) v->elem_type = tt.v < 100 ? (int)tt.v : 0;
        if (tt.num != 2 || tt.wire != 2) continue;
        v->rank = 0;
        EACH_FIELD(tt.sub, d, bad4) {
          if (d.num != 1 || d.wire != 2) continue;
          if (v->rank >= ONNX_MAX_RANK) return fail(r, "'%s' has more than %d dimensions", v->name, ONNX_MAX_RANK);
          if (!dimension(r, d.sub, v, v->rank++)) return false;
        }
        if (bad4) return fail(r, "'%s': malformed shape", v->name);
      }
      if (bad3) return fail(r, "'%s': malformed tensor type", v->name);
    }
    if (bad2) return fail(r, "'%s': malformed type", v->name);
  }
  return !bad || fail(r, "'%s': malformed value info", v->name);
}

static bool graph(Rd *r, Pb b, OnnxGraph *g, const char *what) {
  bool bad;
  *g = (OnnxGraph){.name = ""};
  char sub[96];
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    switch (f.num) {
    case 1:
      if (!(ok = want(r, &f, 2, "node"))) break;
      if (++r->nodes > ONNX_MAX_NODES) return fail(r, "%s: more than %d nodes", what, ONNX_MAX_NODES);
      snprintf(sub, sizeof sub, "node[%d]", g->nnodes);
      ok = node(r, f.sub, ARENA_PUSH(r->a, g->nodes, g->nnodes, g->capnodes), sub);
      if (!ok) {
        size_t k = strlen(r->why);
        char copy[512];
        snprintf(copy, sizeof copy, "%.*s", (int)k, r->why);
        fail(r, "%s %s: %s", what, sub, copy);
      }
      break;
    case 2: ok = string(r, &f, "name", &g->name); break;
    case 5:
      if (!(ok = want(r, &f, 2, "initializer"))) break;
      if (g->ninits >= ONNX_MAX_NODES) return fail(r, "%s: more than %d initializers", what, ONNX_MAX_NODES);
      ok = tensor(r, f.sub, ARENA_PUSH(r->a, g->inits, g->ninits, g->capinits), "initializer");
      break;
    case 11: case 12: {
      if (!(ok = want(r, &f, 2, f.num == 11 ? "input" : "output"))) break;
      int *n = f.num == 11 ? &g->ninputs : &g->noutputs;
      if (*n >= ONNX_MAX_LIST) return fail(r, "%s: more than %d inputs or outputs", what, ONNX_MAX_LIST);
      OnnxValue *v = f.num == 11 ? ARENA_PUSH(r->a, g->inputs, g->ninputs, g->capinputs)
                                 : ARENA_PUSH(r->a, g->outputs, g->noutputs, g->capoutputs);
      ok = value_info(r, f.sub, v);
      break;
    }
    default: break;
    }
    if (!ok) return false;
  }
  return !bad || fail(r, "%s: malformed bytes", what);
}

static bool parse(Arena *a, const uint8_t *bytes, size_t n, const char *dir, int64_t ext_limit, OnnxModel *m,
                  char *why, size_t wn) {
  Rd r = {a, why, wn, 0, 0, dir, ext_limit};
  Pb b = {bytes, bytes + n};
  bool bad;
  *m = (OnnxModel){0};
  EACH_FIELD(b, f, bad) {
    bool ok = true;
    switch (f.num) {
    case 1: ok = int_field(&r, &f, "ir_version", &m->ir_version); break;
    case 7:
      if (!(ok = want(&r, &f, 2, "graph"))) break;
      if (!m->graph) m->graph = arena_alloc(a, sizeof *m->graph);
      ok = graph(&r, f.sub, m->graph, "graph");
      break;
    case 8: {
      if (!(ok = want(&r, &f, 2, "opset_import"))) break;
      const char *domain = "";
      int64_t version = 0;
      bool bad2;
      EACH_FIELD(f.sub, o, bad2) {
        if (o.num == 1 && !string(&r, &o, "domain", &domain)) return false;
        if (o.num == 2 && !int_field(&r, &o, "version", &version)) return false;
      }
      if (bad2) return fail(&r, "opset_import: malformed bytes");
      if (!domain[0] || strcmp(domain, "ai.onnx") == 0) m->opset = version;
      break;
    }
    default: break;
    }
    if (!ok) return false;
  }
  if (bad) return fail(&r, "malformed bytes (not an ONNX model?)");
  if (!m->graph) return fail(&r, "no graph (not an ONNX model?)");
  return true;
}

bool onnx_parse(Arena *a, const uint8_t *bytes, size_t n, OnnxModel *m, char *why, size_t wn) {
  return parse(a, bytes, n, NULL, 0, m, why, wn);
}

bool onnx_read(Arena *a, const char *path, size_t limit, int64_t ext_limit, OnnxModel *m, char *why, size_t wn) {
  char sub[512];
  int fd = file_open_regular(path, sub, sizeof sub);
  if (fd < 0) return diag_why(why, wn, "cannot read %s: %s", path, sub);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    close(fd);
    return diag_why(why, wn, "cannot read %s: %s", path, strerror(errno));
  }
  if ((uint64_t)st.st_size > limit) {
    close(fd);
    return diag_why(why, wn, "%s: %lld bytes, more than the %zu an ONNX file may have", path,
                    (long long)st.st_size, limit);
  }
  size_t n = (size_t)st.st_size, got = 0;
  uint8_t *b = arena_alloc(a, n ? n : 1);
  while (got < n) {
    ssize_t k = read(fd, b + got, n - got);
    if (k <= 0) {
      close(fd);
      return diag_why(why, wn, "cannot read %s: %s", path, k < 0 ? strerror(errno) : "it shrank");
    }
    got += (size_t)k;
  }
  close(fd);
  const char *slash = strrchr(path, '/');
  const char *dir = !slash ? "." : slash == path ? "/" : arena_printf(a, "%.*s", (int)(slash - path), path);
  if (!parse(a, b, n, dir, ext_limit, m, sub, sizeof sub)) return diag_why(why, wn, "%s: %s", path, sub);
  return true;
}

/* ---- meaning ------------------------------------------------------------------------ */

const char *onnx_node_label(const OnnxGraph *g, int i, char *buf, size_t n) {
  if (g->nodes[i].name[0])
    snprintf(buf, n, "'%s'", g->nodes[i].name);
  else
    snprintf(buf, n, "#%d", i);
  return buf;
}

bool onnx_sort(Arena *a, const OnnxGraph *g, int *order, char *why, size_t wn) {
  char lb[ONNX_LABEL_MAX];
  StrMap def = {0};            /* name -> the node defining it, or nnodes for inputs and initializers */
  const int outer = g->nnodes;
  for (int i = 0; i < g->ninputs; i++) strmap_put(a, &def, g->inputs[i].name, outer);
  for (int i = 0; i < g->ninits; i++) strmap_put(a, &def, g->inits[i].name, outer);
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nout; k++) {
      const char *o = g->nodes[i].out[k];
      if (!o[0]) continue;
      int was = strmap_get(&def, o);
      if (was >= 0)
        return diag_why(why, wn, "node %s (%s) defines '%s', which %s already defines",
                        onnx_node_label(g, i, lb, sizeof lb), g->nodes[i].op_type, o, was < outer ? "another node" : "an input or initializer");
      strmap_put(a, &def, o, i);
    }
  /* Kahn's algorithm over the edges node -> the nodes reading its outputs. */
  int *pending = arena_alloc(a, (size_t)(g->nnodes + 1) * sizeof *pending);
  int **readers = arena_alloc(a, (size_t)(g->nnodes + 1) * sizeof *readers);
  int *nreaders = arena_alloc(a, (size_t)(g->nnodes + 1) * sizeof *nreaders);
  int *capreaders = arena_alloc(a, (size_t)(g->nnodes + 1) * sizeof *capreaders);
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) {
      const char *in = g->nodes[i].in[k];
      if (!in[0]) continue;
      int d = strmap_get(&def, in);
      if (d < 0)
        return diag_why(why, wn, "node %s (%s) reads '%s', which no node, input or initializer defines",
                        onnx_node_label(g, i, lb, sizeof lb), g->nodes[i].op_type, in);
      if (d == outer) continue;
      pending[i]++;
      *ARENA_PUSH(a, readers[d], nreaders[d], capreaders[d]) = i;
    }
  int n = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (!pending[i]) order[n++] = i;
  for (int k = 0; k < n; k++)
    for (int j = 0; j < nreaders[order[k]]; j++)
      if (--pending[readers[order[k]][j]] == 0) order[n++] = readers[order[k]][j];
  if (n < g->nnodes) {
    char list[400] = "";
    size_t len = 0;
    for (int i = 0, shown = 0; i < g->nnodes && len < sizeof list - 1; i++)
      if (pending[i] && shown++ < 6)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (%s)", len ? ", " : "",
                                onnx_node_label(g, i, lb, sizeof lb), g->nodes[i].op_type);
    return diag_why(why, wn, "the graph has a cycle: %d nodes lie on it or after it: %s", g->nnodes - n, list);
  }
  return true;
}

/* ---- writing ------------------------------------------------------------------------- */

static void put_raw(OnnxBuf *o, const void *p, size_t n) {
  VEC_RESERVE(o->b, o->cap, o->n + n + 1);
  if (n) memcpy(o->b + o->n, p, n);
  o->n += n;
}

static void put_var(OnnxBuf *o, uint64_t v) {
  uint8_t t[10];
  size_t k = 0;
  do {
    t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  put_raw(o, t, k);
}

void onnx_put_varint(OnnxBuf *o, uint32_t field, uint64_t v) {
  put_var(o, (uint64_t)field << 3);
  put_var(o, v);
}

void onnx_put_bytes(OnnxBuf *o, uint32_t field, const void *p, size_t n) {
  put_var(o, (uint64_t)field << 3 | 2);
  put_var(o, n);
  put_raw(o, p, n);
}

void onnx_put_str(OnnxBuf *o, uint32_t field, const char *s) { onnx_put_bytes(o, field, s, strlen(s)); }

void onnx_put_float(OnnxBuf *o, uint32_t field, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t t[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
  put_var(o, (uint64_t)field << 3 | 5);
  put_raw(o, t, 4);
}

void onnx_put_msg(OnnxBuf *o, uint32_t field, OnnxBuf *sub) {
  onnx_put_bytes(o, field, sub->b, sub->n);
  onnx_buf_free(sub);
}

void onnx_buf_free(OnnxBuf *o) {
  mem_free(o->b);
  *o = (OnnxBuf){0};
}
