/* image.h — PNG and JPEG files, and folders of them (torchvision's
 * ImageFolder), as u8 pixels [N, C, H, W] with labels.
 *
 * Decoding is Debian's libpng and libjpeg-turbo (fuzzed, maintained
 * decoders for untrusted files); their errors come back through
 * setjmp/longjmp into one line "netrun: error: FILE: ..." (diag).
 *
 * ---- One image ------------------------------------------------------------
 * A file is a PNG or a JPEG by its first bytes (not its name).  Decoded:
 * any PNG libpng reads (grey, grey+alpha, palette, RGB, RGBA; 1-16 bits;
 * interlaced): palettes expand to RGB, 16-bit samples are scaled to 8 bits
 * (rounded), alpha is dropped (not composited); a JPEG in grey or YCbCr/RGB
 * (CMYK is refused).  Then converted to C channels: grey to 3 replicates
 * the grey, RGB to 1 takes the luminance L = (19595 R + 38470 G + 7471 B
 * + 32768) >> 16 (ITU-R 601, PIL's convert("L")).  An image of another
 * size than H x W is resized by bilinear interpolation with half-pixel
 * centres (PyTorch's interpolate(mode="bilinear", align_corners=False),
 * no antialiasing), rounded to the nearest byte.
 *
 * Before decoding, the header's width x height is checked against the
 * memory limit (mem.h): the decoded image is charged first, so an image
 * announcing 60000 x 60000 pixels is refused without decoding it.  A
 * truncated or corrupt file, and any warning of libjpeg (a premature end
 * of data), is an error, never a partly grey image.
 *
 * ---- A folder ---------------------------------------------------------------
 * DIR holds one subfolder per class; class k is the k-th folder name in
 * byte order (strcmp); each class folder holds image files, read in name
 * order.  Names starting with '.' are skipped.  Errors: DIR not a folder,
 * no class folder, a file beside the class folders, a class folder that is
 * empty or holds a folder, a file that is not a PNG or a JPEG. */
#ifndef NETRUN_IMAGE_H
#define NETRUN_IMAGE_H

#include "base/diag.h"
#include "base/mem.h"

#include <stdint.h>

/* A folder as images: pixels n x channels x height x width (mem_alloc'd,
 * charged), labels n (mem_alloc'd), class names and counts (in arena). */
typedef struct ImageSet {
  int64_t n;
  int channels;
  int64_t height, width;
  uint8_t *pixels;
  int64_t *labels;
  const char **classes;
  const char **files;          /* example i's path, "DIR/CLASS/FILE" (arena) */
  int64_t *counts;
  int nclasses;
  int64_t charged;             /* bytes charged to the memory limit (pixels, labels) */
} ImageSet;

/* The shape wanted: channels 1 or 3, height and width >= 1; a 0 takes the
 * first image's (its channels: 1 for grey, 3 for colour). */
typedef struct ImageShape {
  int channels;
  int64_t height, width;
} ImageShape;

/* Whether the n bytes at b start a PNG or a JPEG file. */
bool image_is_image(const void *b, size_t n);

/* Reads the folder dir (see above) into *out; false, with the error
 * reported, on failure (*out then holds nothing). */
bool image_folder(Diag *d, Arena *a, const char *dir, ImageShape want, ImageSet *out);

/* Decodes the image file at path into dst (want's channels x height x
 * width bytes, planar); want must be complete (no 0).  False, reported,
 * on failure. */
bool image_read(Diag *d, const char *path, ImageShape want, uint8_t *dst);

/* The header of the image file at path: its width, height and channels
 * (1 grey, 3 colour); false, reported, on failure. */
bool image_probe(Diag *d, const char *path, ImageShape *out);

#endif
