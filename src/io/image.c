/* image.c — PNG and JPEG decoding (libpng, libjpeg-turbo), the conversion
 * of a decoded image to the channels and size wanted, and image folders
 * (image.h).
 *
 * Both libraries report errors by calling back; here the callbacks write
 * the message into the Decoder and longjmp to the setjmp in the function
 * that drives the library, which destroys the library's state and frees
 * what the Decoder holds.  Everything a decode allocates hangs off the
 * Decoder, so nothing leaks on that jump. */
#include "io/image.h"

#include "base/file.h"


#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>

/* A progressive JPEG may hold any number of scans, each a pass over the
 * whole image: beyond this many it is refused (a CPU bomb otherwise). */
#define IMAGE_MAX_SCANS 1000
/* A sanity bound on any one allocation of pixels (tensor.h's too). */
#define IMAGE_MAX_BYTES ((int64_t)16 << 30)

typedef enum ImageKind { IMG_NONE, IMG_PNG, IMG_JPEG } ImageKind;

/* One decode: the file, what it decodes to, and where an error jumps. */
typedef struct Decoder {
  const char *path;
  FILE *f;
  jmp_buf jump;
  char why[JMSG_LENGTH_MAX + 64];
  int want;                    /* channels wanted (charged beside the decoded image) */
  bool header_only;
  int64_t w, h;                /* the image's size */
  int ch;                      /* its channels as decoded: 1 or 3 */
  uint8_t *px;                 /* h * w * ch bytes, interleaved */
  uint8_t **rows;
  int64_t charged;
} Decoder;

static void decoder_release(Decoder *c) {
  mem_free(c->px);
  mem_free(c->rows);
  mem_uncharge(c->charged);
  c->px = NULL, c->rows = NULL, c->charged = 0;
}

static ImageKind kind_of(const uint8_t *b, size_t n) {
  static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n >= 8 && memcmp(b, png_magic, 8) == 0) return IMG_PNG;
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return IMG_JPEG;
  return IMG_NONE;
}

bool image_is_image(const void *b, size_t n) { return kind_of(b, n) != IMG_NONE; }

/* Charges and allocates the decoded image once its header is read; the
 * header's dimensions are checked here, before any pixel is decoded.
 * extra: bytes per pixel the library keeps beside (a progressive JPEG's
 * coefficients).  False with why set. */
static bool decoder_alloc(Decoder *c, int64_t extra) {
  double bytes = (double)c->w * (double)c->h * (double)(c->ch + c->want + extra);
  char lim[192];
  if (bytes > (double)IMAGE_MAX_BYTES || !mem_charge((int64_t)bytes)) {
    mem_limit_reached();   /* out of memory either way: status 3 */
    snprintf(c->why, sizeof c->why, "a %" PRId64 " x %" PRId64 " image is too large: %s", c->w, c->h,
             mem_limit_why(bytes, lim, sizeof lim));
    return false;
  }
  c->charged = (int64_t)bytes;
  c->px = mem_alloc(NULL, (size_t)(c->w * c->h * c->ch));
  c->rows = mem_alloc(NULL, sizeof *c->rows * (size_t)c->h);
  for (int64_t y = 0; y < c->h; y++) c->rows[y] = c->px + y * c->w * c->ch;
  return true;
}

/* ---- PNG ------------------------------------------------------------------- */

static void on_png_error(png_structp png, png_const_charp msg) {
  Decoder *c = png_get_error_ptr(png);
  if (!c->why[0]) snprintf(c->why, sizeof c->why, "corrupt PNG: %s", msg);
  png_longjmp(png, 1);
}

/* libpng's warnings (an odd colour profile, a bad ancillary chunk it
 * skips) leave the pixels right: not reported. */
static void on_png_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void read_png_bytes(png_structp png, png_bytep buf, size_t n) {
  Decoder *c = png_get_io_ptr(png);
  if (fread(buf, 1, n, c->f) != n) {
    snprintf(c->why, sizeof c->why, "truncated PNG: the file ends inside its data");
    png_error(png, "truncated");
  }
}

/* libpng's transforms to 8-bit grey or RGB, alpha dropped. */
static void to_8bit(png_structp png, png_infop info) {
  int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_scale_16(png);
  if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
}

static bool decode_png(Decoder *c) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, on_png_error, on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    mem_oom(sizeof(png_struct *));
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    decoder_release(c);
    return false;
  }
  png_set_read_fn(png, c, read_png_bytes);
  png_read_info(png, info);
  c->w = png_get_image_width(png, info);
  c->h = png_get_image_height(png, info);
  to_8bit(png, info);
  c->ch = png_get_channels(png, info);
  if (c->ch != 1 && c->ch != 3) png_error(png, "unexpected channel count after conversion");
  if (!c->header_only) {
    if (!decoder_alloc(c, 0)) png_error(png, "too large");
    png_read_image(png, c->rows);
    png_read_end(png, NULL);
  }
  png_destroy_read_struct(&png, &info, NULL);
  return true;
}

/* ---- JPEG ------------------------------------------------------------------ */

typedef struct JpegErr {
  struct jpeg_error_mgr mgr;
  Decoder *c;
} JpegErr;

static _Noreturn void on_jpeg_error(j_common_ptr j) {
  Decoder *c = ((JpegErr *)j->err)->c;
  if (!c->why[0]) {
    char msg[JMSG_LENGTH_MAX];
    j->err->format_message(j, msg);
    snprintf(c->why, sizeof c->why, "corrupt JPEG: %s", msg);
  }
  longjmp(c->jump, 1);
}

/* A warning (level -1) is corrupt data libjpeg would paper over with
 * grey: an error here.  Trace messages (level >= 0) are not shown. */
static void on_jpeg_message(j_common_ptr j, int level) {
  if (level < 0) on_jpeg_error(j);
}

static void on_jpeg_progress(j_common_ptr j) {
  j_decompress_ptr dj = (j_decompress_ptr)j;
  if (dj->input_scan_number > IMAGE_MAX_SCANS) {
    Decoder *c = ((JpegErr *)j->err)->c;
    snprintf(c->why, sizeof c->why, "JPEG with more than %d scans", IMAGE_MAX_SCANS);
    on_jpeg_error(j);
  }
}

static bool decode_jpeg(Decoder *c) {
  struct jpeg_decompress_struct j;
  JpegErr err;
  struct jpeg_progress_mgr progress = {.progress_monitor = on_jpeg_progress};
  j.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  err.mgr.emit_message = on_jpeg_message;
  err.c = c;
  if (setjmp(c->jump)) {
    jpeg_destroy_decompress(&j);
    decoder_release(c);
    return false;
  }
  jpeg_create_decompress(&j);
  j.progress = &progress;
  jpeg_stdio_src(&j, c->f);
  jpeg_read_header(&j, TRUE);
  c->w = j.image_width, c->h = j.image_height;
  if (j.jpeg_color_space == JCS_CMYK || j.jpeg_color_space == JCS_YCCK) {
    snprintf(c->why, sizeof c->why, "CMYK JPEG images are not supported (grey or colour: YCbCr, RGB)");
    on_jpeg_error((j_common_ptr)&j);
  }
  j.out_color_space = j.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  c->ch = j.num_components == 1 ? 1 : 3;
  if (!c->header_only) {
    /* a progressive image's coefficients: 2 bytes per sample and component */
    if (!decoder_alloc(c, j.progressive_mode ? 2 * j.num_components : 0)) on_jpeg_error((j_common_ptr)&j);
    jpeg_start_decompress(&j);
    while (j.output_scanline < j.output_height)
      jpeg_read_scanlines(&j, (JSAMPARRAY)(c->rows + j.output_scanline), (JDIMENSION)(j.output_height - j.output_scanline));
    jpeg_finish_decompress(&j);
  }
  jpeg_destroy_decompress(&j);
  return true;
}

/* ---- one file ---------------------------------------------------------------- */

/* Opens path and decodes it (header_only: its size and channels). */
static bool decode_file(Diag *d, const char *path, Decoder *c) {
  char why[256];
  c->path = path;
  c->f = file_fopen_regular(path, why, sizeof why);   /* checked on the descriptor read */
  if (!c->f) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", path, why);
    return false;
  }
  uint8_t magic[8];
  size_t got = fread(magic, 1, sizeof magic, c->f);
  ImageKind k = kind_of(magic, got);
  rewind(c->f);
  bool ok = false;
  if (k == IMG_NONE && got == 0)
    diag_error(d, SPAN_NONE, "%s: empty file: expected a PNG or JPEG image", path);
  else if (k == IMG_NONE)
    diag_error(d, SPAN_NONE, "%s: not a PNG or JPEG image (by its first bytes)", path);
  else if (!(ok = k == IMG_PNG ? decode_png(c) : decode_jpeg(c)))
    diag_error(d, SPAN_NONE, "%s: %s", path, c->why);
  fclose(c->f);
  c->f = NULL;
  return ok;
}

bool image_probe(Diag *d, const char *path, ImageShape *out) {
  Decoder c = {.header_only = true};
  if (!decode_file(d, path, &c)) return false;
  *out = (ImageShape){c.ch, c.h, c.w};
  return true;
}

/* The decoded pixels (interleaved, c->ch channels) as `want` planes at the
 * image's size. */
static void to_planes(const Decoder *c, int want, uint8_t *planes) {
  int64_t n = c->w * c->h;
  const uint8_t *p = c->px;
  for (int64_t i = 0; i < n; i++) {
    if (c->ch == want) {
      for (int k = 0; k < want; k++) planes[k * n + i] = p[i * want + k];
    } else if (c->ch == 1) {
      for (int k = 0; k < want; k++) planes[k * n + i] = p[i];
    } else {
      const uint8_t *rgb = p + i * 3;
      planes[i] = (uint8_t)((19595u * rgb[0] + 38470u * rgb[1] + 7471u * rgb[2] + 32768u) >> 16);
    }
  }
}

/* The source coordinate of output index i (PyTorch's bilinear with
 * align_corners=False): its lower neighbour, the next one, and the weight
 * of the next. */
static void bilinear_at(int64_t i, int64_t in, int64_t out, int64_t *lo, int64_t *hi, double *t) {
  double x = ((double)i + 0.5) * (double)in / (double)out - 0.5;
  if (x < 0) x = 0;
  *lo = (int64_t)x;
  if (*lo > in - 1) *lo = in - 1;
  *hi = *lo < in - 1 ? *lo + 1 : *lo;
  *t = x - (double)*lo;
}

static void resize_plane(const uint8_t *src, int64_t sw, int64_t sh, uint8_t *dst, int64_t w, int64_t h) {
  for (int64_t y = 0; y < h; y++) {
    int64_t y0, y1;
    double ty;
    bilinear_at(y, sh, h, &y0, &y1, &ty);
    for (int64_t x = 0; x < w; x++) {
      int64_t x0, x1;
      double tx;
      bilinear_at(x, sw, w, &x0, &x1, &tx);
      double top = src[y0 * sw + x0] * (1 - tx) + src[y0 * sw + x1] * tx;
      double bottom = src[y1 * sw + x0] * (1 - tx) + src[y1 * sw + x1] * tx;
      double v = floor(top * (1 - ty) + bottom * ty + 0.5);
      dst[y * w + x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

bool image_read(Diag *d, const char *path, ImageShape want, uint8_t *dst) {
  Decoder c = {.want = want.channels};
  if (!decode_file(d, path, &c)) return false;
  int64_t n = c.w * c.h;
  if (c.w == want.width && c.h == want.height) {
    to_planes(&c, want.channels, dst);
  } else {
    /* the planes at the image's size were charged with it (decoder_alloc) */
    uint8_t *planes = mem_alloc(NULL, (size_t)(n * want.channels));
    to_planes(&c, want.channels, planes);
    for (int k = 0; k < want.channels; k++)
      resize_plane(planes + k * n, c.w, c.h, dst + k * want.height * want.width, want.width, want.height);
    mem_free(planes);
  }
  decoder_release(&c);
  return true;
}

/* ---- folders ------------------------------------------------------------------ */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in folder dir (not those starting with '.'), sorted by
 * strcmp, in the arena; false (reported) if it cannot be read. */
static bool list_dir(Diag *d, Arena *a, const char *dir, char ***names, int *n) {
  DIR *dp = opendir(dir);
  if (!dp) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", dir, strerror(errno));
    return false;
  }
  int cap = 0;
  *names = NULL, *n = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (e->d_name[0] != '.') *ARENA_PUSH(a, *names, *n, cap) = arena_strdup(a, e->d_name);
  closedir(dp);
  if (*n) qsort(*names, (size_t)*n, sizeof **names, by_name);
  return true;
}

/* The files of a folder, class by class. */
typedef struct Listing {
  const char **files;          /* paths, class-major */
  int64_t *labels;
  int nfiles, capf, capl;
} Listing;

/* The image files of class folder k (its path cdir) appended to L. */
static bool list_class(Diag *d, Arena *a, const char *cdir, int k, Listing *L) {
  char **names;
  int n;
  if (!list_dir(d, a, cdir, &names, &n)) return false;
  if (n == 0) {
    diag_error(d, SPAN_NONE, "%s: class folder %d is empty: every class folder must hold PNG or JPEG images", cdir, k);
    return false;
  }
  for (int i = 0; i < n; i++) {
    const char *p = arena_printf(a, "%s/%s", cdir, names[i]);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      diag_error(d, SPAN_NONE, "%s: a folder inside a class folder (images are read from one level of class folders)", p);
      return false;
    }
    *ARENA_PUSH(a, L->files, L->nfiles, L->capf) = p;
    int nl = L->nfiles - 1;
    *ARENA_PUSH(a, L->labels, nl, L->capl) = k;
  }
  return true;
}

/* The class folders of dir and their files. */
static bool list_folder(Diag *d, Arena *a, const char *dir, ImageSet *out, Listing *L) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    diag_error(d, SPAN_NONE, "cannot read %s: %s", dir, stat(dir, &st) != 0 ? strerror(errno) : "Not a directory");
    return false;
  }
  char **names;
  int n;
  if (!list_dir(d, a, dir, &names, &n)) return false;
  if (n == 0) {
    diag_error(d, SPAN_NONE, "%s: no class folders: an image folder holds one folder of PNG or JPEG images per class", dir);
    return false;
  }
  out->classes = arena_alloc(a, sizeof *out->classes * (size_t)n);
  out->counts = arena_alloc(a, sizeof *out->counts * (size_t)n);
  for (int k = 0; k < n; k++) {
    const char *p = arena_printf(a, "%s/%s", dir, names[k]);
    if (stat(p, &st) != 0) {   /* a dangling link, a link loop */
      diag_error(d, SPAN_NONE, "cannot read %s: %s", p, strerror(errno));
      return false;
    }
    if (!S_ISDIR(st.st_mode)) {
      diag_error(d, SPAN_NONE, "%s: a file beside the class folders (an image folder holds only class folders)", p);
      return false;
    }
    int before = L->nfiles;
    if (!list_class(d, a, p, k, L)) return false;
    out->classes[k] = names[k];
    out->counts[k] = L->nfiles - before;
  }
  out->nclasses = n;
  return true;
}

bool image_folder(Diag *d, Arena *a, const char *dir, ImageShape want, ImageSet *out) {
  memset(out, 0, sizeof *out);
  Listing L = {0};
  if (!list_folder(d, a, dir, out, &L)) return false;
  if (!want.channels || !want.height || !want.width) {
    ImageShape first;
    if (!image_probe(d, L.files[0], &first)) return false;
    if (!want.channels) want.channels = first.channels;
    if (!want.height) want.height = first.height;
    if (!want.width) want.width = first.width;
  }
  int64_t n = L.nfiles, row = want.channels * want.height * want.width;
  double bytes = (double)n * (double)(row + 8);
  char why[192];
  if (bytes > (double)IMAGE_MAX_BYTES || !mem_charge((int64_t)bytes)) {
    mem_limit_reached();   /* out of memory either way: status 3 */
    diag_error(d, SPAN_NONE, "out of memory: %s: %" PRId64 " images of %d x %" PRId64 " x %" PRId64 ": %s", dir, n,
               want.channels, want.height, want.width, mem_limit_why(bytes, why, sizeof why));
    return false;
  }
  out->pixels = mem_alloc(NULL, (size_t)(n * row));
  for (int64_t i = 0; i < n; i++) {
    if (!image_read(d, L.files[i], want, out->pixels + i * row)) {
      mem_free(out->pixels);
      mem_uncharge((int64_t)bytes);
      memset(out, 0, sizeof *out);
      return false;
    }
  }
  out->files = L.files;
  out->labels = mem_alloc(NULL, sizeof *out->labels * (size_t)n);
  memcpy(out->labels, L.labels, sizeof *out->labels * (size_t)n);
  out->n = n;
  out->channels = want.channels;
  out->height = want.height, out->width = want.width;
  out->charged = (int64_t)bytes;
  return true;
}
