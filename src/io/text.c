/* text.c — a text file as byte windows (text.h). */
#include "io/text.h"

#include "base/file.h"
#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void text_error(Diag *d, const char *path, const char *msg) { diag_error(d, SPAN_NONE, "%s: %s", path, msg); }

/* The file's bytes into a new buffer of *len bytes, charged to the memory
 * limit for as long as it is held; NULL (reported) on failure. */
static uint8_t *text_read(Diag *d, const char *path, int64_t *len) {
  char why[256];
  FILE *f = file_fopen_regular(path, why, sizeof why);   /* checked on the descriptor read */
  if (!f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return NULL;
  }
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, strerror(errno));
    fclose(f);
    return NULL;
  }
  if (!mem_charge(n)) {
    char lim[256], msg[512];
    snprintf(msg, sizeof msg, "out of memory: %ld bytes of text: %s", n, mem_limit_why((double)n, lim, sizeof lim));
    text_error(d, path, msg);
    fclose(f);
    return NULL;
  }
  uint8_t *buf = mem_alloc(NULL, n ? (size_t)n : 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, "short read");
    mem_free(buf);
    mem_uncharge(n);
    return NULL;
  }
  *len = n;
  return buf;
}

/* n windows of t bytes from `from`, each shifted by `shift`, charged to the
 * memory limit; NULL past it. */
static uint8_t *text_cut(const uint8_t *from, int64_t n, int64_t t, int shift) {
  if (!mem_charge(n * t)) return NULL;
  uint8_t *data = mem_alloc(NULL, (size_t)(n * t));
  for (int64_t k = 0; k < n; k++) memcpy(data + k * t, from + k * t + shift, (size_t)t);
  return data;
}

/* n windows of t bytes from buf, and the same one byte on, into *out; false
 * (reported) when they do not fit in memory. */
static bool text_split(Diag *d, const char *path, const uint8_t *buf, int64_t n, int64_t t, TextWindows *out) {
  out->x = text_cut(buf, n, t, 0);
  out->y = out->x ? text_cut(buf, n, t, 1) : NULL;
  if (!out->y) {
    char lim[256], msg[512];
    snprintf(msg, sizeof msg, "out of memory: %" PRId64 " windows of %" PRId64 " bytes: %s", n, t,
             mem_limit_why((double)(n * t), lim, sizeof lim));
    text_error(d, path, msg);
    if (out->x) mem_free(out->x), mem_uncharge(n * t);
    out->x = NULL;
    return false;
  }
  out->n = n, out->context = t, out->charged = 2 * n * t;
  return true;
}

bool text_windows(Diag *d, const char *path, int64_t context, const char *split, TextWindows *out) {
  memset(out, 0, sizeof *out);
  char msg[512];
  if (context < 1) {
    snprintf(msg, sizeof msg, "context must be at least 1, got %" PRId64, context);
    text_error(d, path, msg);
    return false;
  }
  if (split && strcmp(split, "train") != 0 && strcmp(split, "test") != 0) {
    snprintf(msg, sizeof msg, "no split '%s': a text file has \"train\" and \"test\" (its last tenth)", split);
    text_error(d, path, msg);
    return false;
  }
  int64_t len = 0;
  uint8_t *buf = text_read(d, path, &len);
  if (!buf) return false;
  bool test = split && strcmp(split, "test") == 0;
  int64_t cut = len - len / TEXT_HOLDOUT;
  int64_t start = test ? cut : 0, end = split && !test ? cut : len;
  int64_t m = end - start, n = m > 0 ? (m - 1) / context : 0;
  bool ok = n >= 1;
  if (!ok) {
    const char *what = !split ? "" : test ? "the test split (the last tenth) has "
                                          : "the train split (all but the last tenth) has ";
    snprintf(msg, sizeof msg, "%s%" PRId64 " bytes, but context = %" PRId64 " needs at least %" PRIu64
             " (a window and the byte after it)", what, m, context, (uint64_t)context + 1);   /* 2^63 for 2^63 - 1 */
    text_error(d, path, msg);
  }
  ok = ok && text_split(d, path, buf + start, n, context, out);
  mem_free(buf);
  mem_uncharge(len);
  return ok;
}
