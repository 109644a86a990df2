/* zip.c — reading and writing the ZIP archives .npz files are (zip.h).
 *
 * The layout read (PKWARE's APPNOTE): members, each a local header then
 * its data; the central directory, one record per member; the end of
 * central directory record (EOCD), found by scanning back over the
 * archive's comment.  Sizes and offsets that do not fit 32 bits are in
 * ZIP64 records: a ZIP64 EOCD (located by the record before the EOCD) and
 * a ZIP64 extra field in a member's central record.  Python's zipfile,
 * which numpy.savez uses, writes those for members it was told might grow
 * past 4 GiB (force_zip64), so they are read here, whatever the size. */
#include "io/zip.h"

#include "base/diag.h"
#include "base/file.h"
#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u
#define EOCD_BYTES 22
#define CENTRAL_BYTES 46
#define LOCAL_BYTES 30
/* A central directory larger than this is refused (64K members with long
 * names fit in far less). */
#define MAX_CD_BYTES ((uint64_t)64 << 20)
/* Deflate makes at most 1032 bytes of one compressed byte (258-byte
 * matches coded in 2 bits): a member announcing more is corrupt, and is
 * refused before any memory is spent on it. */
#define MAX_RATIO 1032

static uint64_t le(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Reads n bytes at off; false (why) when the file holds fewer. */
static bool read_at(ZipReader *z, uint64_t off, void *buf, size_t n, const char *what, char *why, size_t wn) {
  if (off > z->size || n > z->size - off) return diag_why(why, wn, "truncated: %s lies past the end of the file", what);
  if (fseeko(z->f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, z->f) != n)
    return diag_why(why, wn, "cannot read %s: %s", what, ferror(z->f) ? strerror(errno) : "the file is shorter");
  return true;
}

/* ---- the end of central directory ----------------------------------------- */

typedef struct Eocd {
  uint64_t entries, cd_size, cd_off;
} Eocd;

/* The ZIP64 end record, through its locator just before the EOCD at pos. */
static bool eocd64(ZipReader *z, uint64_t pos, Eocd *e, char *why, size_t n) {
  uint8_t b[56];
  if (pos < 20 || !read_at(z, pos - 20, b, 20, "the ZIP64 locator", why, n)) {
    if (pos < 20) diag_why(why, n, "corrupt: the EOCD says ZIP64, but no ZIP64 locator precedes it");
    return false;
  }
  if (le(b, 4) != SIG_LOCATOR64) return diag_why(why, n, "corrupt: the EOCD says ZIP64, but no ZIP64 locator precedes it");
  if (le(b + 4, 4) != 0 || le(b + 16, 4) > 1) return diag_why(why, n, "a multi-disk ZIP archive: not supported");
  uint64_t at = le(b + 8, 8);
  if (!read_at(z, at, b, 56, "the ZIP64 end record", why, n)) return false;
  if (le(b, 4) != SIG_EOCD64) return diag_why(why, n, "corrupt: no ZIP64 end record at offset %" PRIu64, at);
  if (le(b + 16, 4) != 0 || le(b + 20, 4) != 0) return diag_why(why, n, "a multi-disk ZIP archive: not supported");
  e->entries = le(b + 32, 8);
  e->cd_size = le(b + 40, 8);
  e->cd_off = le(b + 48, 8);
  if (le(b + 24, 8) != e->entries) return diag_why(why, n, "a multi-disk ZIP archive: not supported");
  return true;
}

/* Finds the EOCD: the last signature whose comment ends the file. */
static bool find_eocd(ZipReader *z, Eocd *e, char *why, size_t n) {
  if (z->size < EOCD_BYTES) return diag_why(why, n, "not a ZIP archive (%" PRIu64 " bytes, too short)", z->size);
  size_t tail = z->size < EOCD_BYTES + 65535 ? (size_t)z->size : EOCD_BYTES + 65535;
  uint8_t *b = mem_alloc(NULL, tail);
  bool ok = read_at(z, z->size - tail, b, tail, "the end of the archive", why, n);
  int64_t pos = -1;
  for (int64_t i = (int64_t)tail - EOCD_BYTES; ok && i >= 0 && pos < 0; i--)
    if (le(b + i, 4) == SIG_EOCD && le(b + i + 20, 2) == (uint64_t)tail - (uint64_t)i - EOCD_BYTES) pos = i;
  if (ok && pos < 0) ok = diag_why(why, n, "not a ZIP archive (no end of central directory record)");
  if (ok) {
    const uint8_t *r = b + pos;
    if (le(r + 4, 2) != 0 || le(r + 6, 2) != 0 || le(r + 8, 2) != le(r + 10, 2))
      ok = diag_why(why, n, "a multi-disk ZIP archive: not supported");
    e->entries = le(r + 10, 2);
    e->cd_size = le(r + 12, 4);
    e->cd_off = le(r + 16, 4);
    if (ok && (e->entries == 0xffff || e->cd_size == 0xffffffffu || e->cd_off == 0xffffffffu))
      ok = eocd64(z, z->size - tail + (uint64_t)pos, e, why, n);
  }
  mem_free(b);
  return ok;
}

/* ---- the central directory ------------------------------------------------- */

/* The ZIP64 extra field of a central record: 8-byte values for the fields
 * that hold all ones, in the order usize, csize, offset. */
static bool zip64_extra(ZipEntry *en, const uint8_t *x, size_t len, char *why, size_t n) {
  while (len >= 4) {
    uint64_t id = le(x, 2), sz = le(x + 2, 2);
    if (sz > len - 4) return diag_why(why, n, "corrupt: member '%s': an extra field runs past its record", en->name);
    if (id == 1) {
      uint64_t *f[3] = {&en->usize, &en->csize, &en->offset};
      const uint8_t *p = x + 4;
      for (int i = 0; i < 3; i++) {
        if (*f[i] != 0xffffffffu) continue;
        if (p + 8 > x + 4 + sz)
          return diag_why(why, n, "corrupt: member '%s': its ZIP64 extra field is too short", en->name);
        *f[i] = le(p, 8);
        p += 8;
      }
      return true;
    }
    x += 4 + sz;
    len -= 4 + sz;
  }
  return true;
}

/* Parses the central record at b (of `left` bytes); *used: its size. */
static bool central(ZipReader *z, const uint8_t *b, uint64_t left, ZipEntry *en, uint64_t *used, char *why,
                    size_t n) {
  if (left < CENTRAL_BYTES || le(b, 4) != SIG_CENTRAL)
    return diag_why(why, n, "corrupt: central directory record %d is malformed", z->n + 1);
  uint64_t nlen = le(b + 28, 2), xlen = le(b + 30, 2), clen = le(b + 32, 2);
  if (CENTRAL_BYTES + nlen + xlen + clen > left)
    return diag_why(why, n, "corrupt: central directory record %d runs past the directory", z->n + 1);
  for (uint64_t i = 0; i < nlen; i++)
    if (b[CENTRAL_BYTES + i] < 0x20 || b[CENTRAL_BYTES + i] == 0x7f)
      return diag_why(why, n, "member %d's name holds a control character (byte 0x%02x)", z->n + 1, b[CENTRAL_BYTES + i]);
  if (nlen == 0) return diag_why(why, n, "corrupt: member %d has an empty name", z->n + 1);
  en->name = mem_alloc(NULL, nlen + 1);
  memcpy(en->name, b + CENTRAL_BYTES, nlen);
  en->name[nlen] = 0;
  en->flags = (uint16_t)le(b + 8, 2);
  en->method = (uint16_t)le(b + 10, 2);
  en->crc = (uint32_t)le(b + 16, 4);
  en->csize = le(b + 20, 4);
  en->usize = le(b + 24, 4);
  en->offset = le(b + 42, 4);
  *used = CENTRAL_BYTES + nlen + xlen + clen;
  if (le(b + 34, 2) != 0 && le(b + 34, 2) != 0xffff) return diag_why(why, n, "a multi-disk ZIP archive: not supported");
  return zip64_extra(en, b + CENTRAL_BYTES + nlen, xlen, why, n);
}

/* Why a member name is not one to unpack (NULL if it is): one that leaves
 * the folder it is unpacked in (an absolute path, a ".." part, or a
 * backslash, which Windows tools take for a folder separator), refused on
 * reading and on writing alike. */
static const char *unsafe_name(const char *name) {
  if (name[0] == '/') return "an absolute path";
  if (strchr(name, '\\')) return "a backslash (a folder separator to Windows tools)";
  for (const char *p = name; *p;) {
    size_t k = strcspn(p, "/");
    if (k == 2 && p[0] == '.' && p[1] == '.') return "a '..' that climbs out of the folder it is unpacked in";
    p += k + (p[k] == '/');
  }
  return NULL;
}

/* Whether e's data can be what its record says, before reading any. */
static bool check_entry(const ZipReader *z, const ZipEntry *e, uint64_t cd_off, char *why, size_t n) {
  const char *bad = unsafe_name(e->name);
  if (bad) return diag_why(why, n, "member '%s' has %s: refused", e->name, bad);
  if (e->flags & 1) return diag_why(why, n, "member '%s' is encrypted: not supported", e->name);
  if (e->method != 0 && e->method != 8)
    return diag_why(why, n, "member '%s' is compressed with method %u: only stored (0) and deflated (8) are read",
                    e->name, e->method);
  if (e->offset >= cd_off || e->csize > cd_off - e->offset)
    return diag_why(why, n, "corrupt: member '%s' lies outside the archive's data (offset %" PRIu64 ", %" PRIu64
                    " bytes)", e->name, e->offset, e->csize);
  if (e->method == 0 && e->csize != e->usize)
    return diag_why(why, n, "corrupt: stored member '%s' has %" PRIu64 " bytes but announces %" PRIu64, e->name,
                    e->csize, e->usize);
  if (e->method == 8 && e->usize / MAX_RATIO > e->csize)
    return diag_why(why, n, "corrupt: member '%s' announces %" PRIu64 " bytes, more than deflate makes of %" PRIu64,
                    e->name, e->usize, e->csize);
  for (int i = 0; i < z->n; i++)
    if (strcmp(z->e[i].name, e->name) == 0) return diag_why(why, n, "corrupt: two members are named '%s'", e->name);
  return true;
}

bool zip_open(ZipReader *z, FILE *f, uint64_t size, char *why, size_t n) {
  memset(z, 0, sizeof *z);
  z->f = f;
  z->size = size;
  Eocd e = {0, 0, 0};
  if (!find_eocd(z, &e, why, n)) return false;
  if (e.cd_off > size || e.cd_size > size - e.cd_off)
    return diag_why(why, n, "truncated: the central directory (%" PRIu64 " bytes at %" PRIu64 ") lies past the end",
                    e.cd_size, e.cd_off);
  if (e.cd_size > MAX_CD_BYTES || e.entries > ZIP_MAX_ENTRIES)
    return diag_why(why, n, "%" PRIu64 " members in a %" PRIu64 "-byte directory: more than netrun reads (%d)", e.entries,
                    e.cd_size, ZIP_MAX_ENTRIES);
  uint8_t *cd = mem_alloc(NULL, e.cd_size ? (size_t)e.cd_size : 1);
  bool ok = read_at(z, e.cd_off, cd, (size_t)e.cd_size, "the central directory", why, n);
  z->e = mem_calloc(e.entries ? (size_t)e.entries : 1, sizeof *z->e);
  uint64_t at = 0;
  for (uint64_t i = 0; ok && i < e.entries; i++) {
    uint64_t used = 0;
    ZipEntry *en = &z->e[z->n];
    ok = central(z, cd + at, e.cd_size - at, en, &used, why, n) && check_entry(z, en, e.cd_off, why, n);
    if (en->name) z->n++;
    at += ok ? used : 0;
  }
  mem_free(cd);
  if (!ok) zip_close(z);
  return ok;
}

void zip_close(ZipReader *z) {
  for (int i = 0; i < z->n; i++) mem_free(z->e[i].name);
  mem_free(z->e);
  z->e = NULL;
  z->n = 0;
}

const ZipEntry *zip_find(const ZipReader *z, const char *name) {
  for (int i = 0; i < z->n; i++)
    if (strcmp(z->e[i].name, name) == 0) return &z->e[i];
  return NULL;
}

/* ---- members' bytes --------------------------------------------------------- */

bool zip_stream_open(ZipStream *s, ZipReader *z, const ZipEntry *e, char *why, size_t n) {
  memset(s, 0, offsetof(ZipStream, in));
  s->z = z;
  s->e = e;
  uint8_t h[LOCAL_BYTES];
  if (!read_at(z, e->offset, h, LOCAL_BYTES, "a member's local header", why, n)) return false;
  if (le(h, 4) != SIG_LOCAL) return diag_why(why, n, "corrupt: no local header at offset %" PRIu64, e->offset);
  uint64_t data = e->offset + LOCAL_BYTES + le(h + 26, 2) + le(h + 28, 2);
  if (le(h + 8, 2) != e->method)
    return diag_why(why, n, "corrupt: its local header and the directory disagree on its compression method");
  if (data > z->size || e->csize > z->size - data)
    return diag_why(why, n, "truncated: its data runs past the end of the file");
  if (fseeko(z->f, (off_t)data, SEEK_SET) != 0) return diag_why(why, n, "cannot seek: %s", strerror(errno));
  s->cleft = e->csize;
  s->crc = (uint32_t)crc32(0, NULL, 0);
  if (e->method == 8) {
    if (inflateInit2(&s->zs, -MAX_WBITS) != Z_OK) return diag_why(why, n, "cannot start inflating: out of memory");
    s->inflating = true;
  }
  return true;
}

void zip_stream_close(ZipStream *s) {
  if (s->inflating) inflateEnd(&s->zs);
  s->inflating = false;
}

/* Reads up to len raw bytes of the member from the file. */
static int64_t raw(ZipStream *s, void *buf, size_t len, char *why, size_t n) {
  size_t want = len < s->cleft ? len : (size_t)s->cleft;
  size_t got = want ? fread(buf, 1, want, s->z->f) : 0;
  if (got < want) {
    diag_why(why, n, "cannot read: %s", ferror(s->z->f) ? strerror(errno) : "the file is shorter");
    return -1;
  }
  s->cleft -= got;
  return (int64_t)got;
}

static int64_t inflated(ZipStream *s, uint8_t *buf, size_t len, char *why, size_t n) {
  s->zs.next_out = buf;
  s->zs.avail_out = (uInt)len;
  while (s->zs.avail_out) {
    if (s->zs.avail_in == 0 && s->cleft) {
      int64_t k = raw(s, s->in, sizeof s->in, why, n);
      if (k < 0) return -1;
      s->zs.next_in = s->in;
      s->zs.avail_in = (uInt)k;
    }
    int rc = inflate(&s->zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && s->zs.avail_in == 0 && s->cleft == 0) break;   /* the data ends early */
    if (rc != Z_OK) {
      diag_why(why, n, "corrupt: bad deflate data (%s)", s->zs.msg ? s->zs.msg : "zlib error");
      return -1;
    }
  }
  return (int64_t)(len - s->zs.avail_out);
}

int64_t zip_read(ZipStream *s, void *buf, size_t len, char *why, size_t n) {
  uint64_t left = s->e->usize - s->out;
  if (len > left) len = (size_t)left;
  if (len > (1u << 30)) len = 1u << 30;
  int64_t k = len == 0 ? 0 : s->inflating ? inflated(s, buf, len, why, n) : raw(s, buf, len, why, n);
  if (k < 0) return -1;
  s->crc = (uint32_t)crc32(s->crc, buf, (uInt)k);
  s->out += (uint64_t)k;
  if (k > 0 && s->out == s->e->usize && s->crc != s->e->crc) {
    diag_why(why, n, "corrupt: CRC-32 mismatch (%08" PRIx32 ", the directory says %08" PRIx32 ")", s->crc, s->e->crc);
    return -1;
  }
  return k;
}

/* ---- writing ------------------------------------------------------------------ */

/* The fixed date of every member, 1980-01-01 00:00: archives written from
 * the same tensors are the same bytes. */
#define DOS_DATE 0x21

void zip_writer_init(ZipWriter *w, int fd) {
  memset(w, 0, sizeof *w);
  w->fd = fd;
}

void zip_writer_free(ZipWriter *w) {
  for (int i = 0; i < w->n; i++) mem_free(w->e[i].name);
  mem_free(w->e);
  w->e = NULL;
}

static void emit(ZipWriter *w, const void *b, size_t len) {
  if (!w->err) w->err = file_write_all(w->fd, b, len);
  w->off += len;
}

/* The fields a local and a central header share, from `version needed`. */
static void common(uint8_t *p, const ZipEntry *e) {
  put(p, 20, 2);                                /* version needed: 2.0 */
  put(p + 2, 0, 2);                             /* flags */
  put(p + 4, 0, 2);                             /* stored */
  put(p + 6, 0, 2);                             /* time */
  put(p + 8, DOS_DATE, 2);
  put(p + 10, e->crc, 4);
  put(p + 14, e->csize, 4);
  put(p + 18, e->usize, 4);
  put(p + 22, strlen(e->name), 2);
  put(p + 24, 0, 2);                            /* extra */
}

bool zip_add(ZipWriter *w, const char *name, const void *const *parts, const size_t *lens, int nparts, char *why,
             size_t n) {
  uint64_t total = 0;
  uLong crc = crc32(0, NULL, 0);
  for (int i = 0; i < nparts; i++) {
    total += lens[i];
    for (size_t k = 0; k < lens[i]; k += 1u << 30)
      crc = crc32(crc, (const Bytef *)parts[i] + k, (uInt)(lens[i] - k < (1u << 30) ? lens[i] - k : 1u << 30));
  }
  const char *bad = unsafe_name(name);
  if (bad) return diag_why(why, n, "member '%s' would have %s: refused", name, bad);
  size_t nlen = strlen(name);
  if (total >= 0xffffffffu || w->off + total + LOCAL_BYTES + nlen >= 0xffffffffu || w->n >= 0xfffe ||
      nlen > ZIP_MAX_NAME)
    return diag_why(why, n, "'%s': too large for a ZIP archive without ZIP64 (4 GiB), which netrun does not write",
                    name);
  VEC_RESERVE(w->e, w->cap, w->n + 1);
  ZipEntry *e = &w->e[w->n++];
  *e = (ZipEntry){.name = mem_strdup(name), .crc = (uint32_t)crc, .csize = total, .usize = total, .offset = w->off};
  uint8_t h[LOCAL_BYTES];
  put(h, SIG_LOCAL, 4);
  common(h + 4, e);
  emit(w, h, sizeof h);
  emit(w, name, nlen);
  for (int i = 0; i < nparts; i++) emit(w, parts[i], lens[i]);
  return true;
}

bool zip_finish(ZipWriter *w, char *why, size_t n) {
  uint64_t cd = w->off;
  for (int i = 0; i < w->n; i++) {
    const ZipEntry *e = &w->e[i];
    uint8_t h[CENTRAL_BYTES] = {0};
    put(h, SIG_CENTRAL, 4);
    put(h + 4, 3 << 8 | 20, 2);                 /* made by: Unix, 2.0 */
    common(h + 6, e);
    put(h + 38, (uint64_t)0100644 << 16, 4);    /* a regular file, rw-r--r-- */
    put(h + 42, e->offset, 4);
    emit(w, h, sizeof h);
    emit(w, e->name, strlen(e->name));
  }
  uint8_t r[EOCD_BYTES] = {0};
  put(r, SIG_EOCD, 4);
  put(r + 8, (uint64_t)w->n, 2);
  put(r + 10, (uint64_t)w->n, 2);
  put(r + 12, w->off - cd, 4);
  put(r + 16, cd, 4);
  emit(w, r, sizeof r);
  if (w->off >= 0xffffffffu) return diag_why(why, n, "too large for a ZIP archive without ZIP64 (4 GiB)");
  if (w->err) return diag_why(why, n, "cannot write it: %s", strerror(w->err));
  return true;
}
