/* fuzz_image.c — bytes read as an image file of a folder: the header
 * (image_probe), then the whole decode by libpng or libjpeg-turbo with the
 * conversion to 1 or 3 channels and the bilinear resize (image_read).
 *
 * Seeds (tests/fuzz/corpus/image): small PNGs written by tests/tools/png.py
 * (grey, RGB, palette, grey+alpha, 16-bit grey and RGBA, a 60000 x 60000
 * header), a Fashion-MNIST image as PNG and JPEG, as an interlaced RGB PNG
 * and a progressive colour JPEG (build/mkimages), and both cut short. */
#include "fuzz.h"

#include "io/image.h"
#include "ir/tensor.h"

static void read_image(Diag *d, const char *path, const uint8_t *data, size_t size) {
  (void)data;   /* read through path */
  ImageShape s;
  if (image_probe(d, path, &s)) {
    /* the image as it is, and resized to another size and channel count */
    ImageShape want[2] = {s, {s.channels == 1 ? 3 : 1, 1 + (int64_t)(size % 7), 1 + (int64_t)(size % 5)}};
    for (int i = 0; i < 2; i++) {
      int64_t bytes = (int64_t)want[i].channels * want[i].height * want[i].width;
      if (bytes > (16 << 20)) continue;
      uint8_t *dst = mem_alloc(NULL, (size_t)bytes);
      image_read(d, path, want[i], dst);
      mem_free(dst);
    }
  }
}

FUZZ_FILE_HARNESS(read_image)
