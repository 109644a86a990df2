/* zip.h — the ZIP container of NumPy's .npz files: reading the members of
 * an archive (stored or deflated, ZIP64 sizes and offsets included) as
 * streams of bytes, and writing an archive of stored members.
 *
 * Reading trusts nothing: the central directory is the index (the sizes
 * and CRC-32 a member is checked against), every offset and size is checked
 * against the file's size before anything is read, a deflated member may
 * not announce more bytes than deflate can make from its compressed size,
 * and a member's CRC-32 is checked when its last byte has been read.
 *
 * Errors are written into the caller's `why` without the path, e.g.
 * "not a ZIP archive (no end of central directory record)"; the caller
 * prefixes the file's name.
 *
 * Ownership: a ZipReader borrows its FILE (the caller opens and closes
 * it) and owns its entries until zip_close.  A ZipStream borrows its
 * reader. */
#ifndef NETRUN_ZIP_H
#define NETRUN_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#define ZIP_MAX_ENTRIES 65536
#define ZIP_MAX_NAME 1024

typedef struct ZipEntry {
  char *name;                  /* NUL-terminated; a name holding a control character is refused */
  uint16_t method;             /* 0 stored, 8 deflated */
  uint16_t flags;
  uint32_t crc;
  uint64_t csize, usize;       /* compressed and uncompressed bytes */
  uint64_t offset;             /* of its local header */
} ZipEntry;

typedef struct ZipReader {
  FILE *f;
  uint64_t size;               /* of the file */
  ZipEntry *e;
  int n;
} ZipReader;

/* Reads the central directory of the archive f (of `size` bytes). */
bool zip_open(ZipReader *z, FILE *f, uint64_t size, char *why, size_t n);
void zip_close(ZipReader *z);
/* The entry named name, or NULL. */
const ZipEntry *zip_find(const ZipReader *z, const char *name);

/* A member's bytes as they are read. */
typedef struct ZipStream {
  ZipReader *z;
  const ZipEntry *e;
  uint64_t cleft;              /* compressed bytes not yet read from the file */
  uint64_t out;                /* bytes handed out so far */
  uint32_t crc;                /* of those */
  z_stream zs;
  bool inflating;
  uint8_t in[1 << 15];
} ZipStream;

/* Positions s at e's data (checking its local header). */
bool zip_stream_open(ZipStream *s, ZipReader *z, const ZipEntry *e, char *why, size_t n);
/* Reads up to len bytes: the count (less than len only at the member's
 * end), or -1 with why (corrupt deflate data, a read error, the CRC). */
int64_t zip_read(ZipStream *s, void *buf, size_t len, char *why, size_t n);
void zip_stream_close(ZipStream *s);

/* Writing: members are stored (not compressed), each added whole. */
typedef struct ZipWriter {
  int fd;
  uint64_t off;                /* bytes written */
  ZipEntry *e;
  int n, cap;
  int err;                     /* the first write error (errno), or 0 */
} ZipWriter;

void zip_writer_init(ZipWriter *w, int fd);
/* Adds a member called name whose bytes are the n parts parts[i] of
 * lens[i] bytes.  False (with why) if the archive would need ZIP64. */
bool zip_add(ZipWriter *w, const char *name, const void *const *parts, const size_t *lens, int nparts, char *why,
             size_t n);
/* Writes the central directory; false (with why) on a write error. */
bool zip_finish(ZipWriter *w, char *why, size_t n);
void zip_writer_free(ZipWriter *w);

#endif
