/* mkimages.c — writes an IDX image set (Fashion-MNIST's files) as an image
 * folder: OUT/K-NAME/NNNNN.png (or .jpg), one folder per label, so that
 * netrun's class k (folders in name order) is label k.  A test fixture and
 * the source of examples/fashion_folder.net's data; built by the Makefile
 * (build/mkimages).
 *
 *   mkimages [--jpeg] [--rgb] [--interlace] [--progressive] [--first N] IMAGES LABELS OUT
 *
 * IMAGES: u8 [N, H, W] IDX, LABELS: u8 [N] IDX, gzipped or not.  PNGs are
 * 8-bit grey, written by libpng; JPEGs grey at quality 95 by libjpeg.
 * --rgb writes each grey value as (g, g, g): an RGB PNG, a YCbCr JPEG;
 * --interlace an Adam7 PNG, --progressive a progressive JPEG. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <jpeglib.h>   /* after stdio.h and stddef.h, which it needs */
#include <png.h>

static const char *const names[10] = {"t-shirt", "trouser", "pullover", "dress", "coat",
                                      "sandal",  "shirt",   "sneaker",  "bag",   "ankle-boot"};

static void die(const char *what, const char *path) {
  fprintf(stderr, "mkimages: %s: %s\n", path, what);
  exit(1);
}

/* An IDX file's u8 elements; dims into d (rank into *rank). */
static uint8_t *read_idx(const char *path, int *rank, uint32_t *d, size_t *numel) {
  gzFile f = gzopen(path, "rb");
  uint8_t h[4];
  if (!f || gzread(f, h, 4) != 4 || h[2] != 8 || h[3] < 1 || h[3] > 3) die("not a u8 IDX file", path);
  *rank = h[3];
  *numel = 1;
  for (int i = 0; i < *rank; i++) {
    uint8_t b[4];
    if (gzread(f, b, 4) != 4) die("truncated", path);
    d[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    *numel *= d[i];
  }
  uint8_t *p = malloc(*numel ? *numel : 1);
  if (!p || gzread(f, p, (unsigned)*numel) != (int)*numel) die("truncated", path);
  gzclose(f);
  return p;
}

static int rgb, interlace, progressive;

/* The image's rows as written: grey, or (g, g, g) with --rgb. */
static uint8_t *pixels_out(const uint8_t *px, uint32_t h, uint32_t w) {
  int c = rgb ? 3 : 1;
  uint8_t *o = malloc((size_t)h * w * c);
  if (!o) die("out of memory", "mkimages");
  for (size_t i = 0; i < (size_t)h * w; i++)
    for (int k = 0; k < c; k++) o[i * c + k] = px[i];
  return o;
}

static void write_png(const char *path, const uint8_t *grey, uint32_t h, uint32_t w) {
  uint8_t *px = pixels_out(grey, h, w);
  size_t stride = (size_t)w * (rgb ? 3 : 1);
  FILE *f = fopen(path, "wb");
  if (!f) die(strerror(errno), path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) die("libpng failed", path);
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, rgb ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_bytep *rows = malloc(sizeof *rows * h);
  if (!rows) die("out of memory", path);
  for (uint32_t y = 0; y < h; y++) rows[y] = px + y * stride;
  png_write_image(png, rows);   /* every Adam7 pass when interlaced */
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(rows);
  free(px);
  if (fclose(f)) die(strerror(errno), path);
}

static void write_jpeg(const char *path, const uint8_t *grey, uint32_t h, uint32_t w) {
  uint8_t *px = pixels_out(grey, h, w);
  size_t stride = (size_t)w * (rgb ? 3 : 1);
  FILE *f = fopen(path, "wb");
  if (!f) die(strerror(errno), path);
  struct jpeg_compress_struct j;
  struct jpeg_error_mgr err;
  j.err = jpeg_std_error(&err);
  jpeg_create_compress(&j);
  jpeg_stdio_dest(&j, f);
  j.image_width = w, j.image_height = h;
  j.input_components = rgb ? 3 : 1, j.in_color_space = rgb ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&j);
  jpeg_set_quality(&j, 95, TRUE);
  if (progressive) jpeg_simple_progression(&j);
  jpeg_start_compress(&j, TRUE);
  while (j.next_scanline < h) {
    JSAMPROW row = (JSAMPROW)(px + j.next_scanline * stride);
    jpeg_write_scanlines(&j, &row, 1);
  }
  jpeg_finish_compress(&j);
  jpeg_destroy_compress(&j);
  free(px);
  if (fclose(f)) die(strerror(errno), path);
}

int main(int argc, char **argv) {
  int jpeg = 0, a = 1;
  long first = -1;
  for (; a < argc && argv[a][0] == '-'; a++) {
    if (strcmp(argv[a], "--jpeg") == 0) jpeg = 1;
    else if (strcmp(argv[a], "--rgb") == 0) rgb = 1;
    else if (strcmp(argv[a], "--interlace") == 0) interlace = 1;
    else if (strcmp(argv[a], "--progressive") == 0) progressive = 1;
    else if (strcmp(argv[a], "--first") == 0 && a + 1 < argc) first = atol(argv[++a]);
    else die("unknown option", argv[a]);
  }
  if (argc - a != 3) {
    fprintf(stderr, "usage: mkimages [--jpeg] [--rgb] [--interlace] [--progressive] [--first N] IMAGES LABELS OUT\n");
    return 2;
  }
  int ri, rl;
  uint32_t di[3], dl[3];
  size_t ni, nl;
  uint8_t *img = read_idx(argv[a], &ri, di, &ni), *lab = read_idx(argv[a + 1], &rl, dl, &nl);
  if (ri != 3 || rl != 1 || di[0] != dl[0]) die("expected images [N, H, W] and labels [N]", argv[a]);
  size_t n = first >= 0 && (size_t)first < di[0] ? (size_t)first : di[0];
  const char *out = argv[a + 2];
  char path[4096];
  mkdir(out, 0777);
  for (size_t i = 0; i < n; i++) {
    if (lab[i] > 9) die("a label above 9", argv[a + 1]);
    snprintf(path, sizeof path, "%s/%d-%s", out, lab[i], names[lab[i]]);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%d-%s/%05zu.%s", out, lab[i], names[lab[i]], i, jpeg ? "jpg" : "png");
    const uint8_t *px = img + i * (size_t)di[1] * di[2];
    if (jpeg) write_jpeg(path, px, di[1], di[2]);
    else write_png(path, px, di[1], di[2]);
  }
  free(img);
  free(lab);
  return 0;
}
