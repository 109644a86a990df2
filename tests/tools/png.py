#!/usr/bin/env python3
"""png.py — writes small PNG files for tests/images.bats, with only zlib
(no PIL): png.py OUT WIDTH HEIGHT COLOR DEPTH SAMPLES...

COLOR is PNG's colour type (0 grey, 2 RGB, 3 palette, 4 grey+alpha,
6 RGBA), DEPTH 8 or 16; SAMPLES are the row-major sample values (each
pixel's channels in turn; with a palette, indices into the 256 colours
(i, 255 - i, i / 2 rounded down)).  `png.py OUT bomb W H` writes a valid header
announcing W x H 8-bit grey pixels with one short IDAT (a dimension bomb)."""
import struct
import sys
import zlib


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def png(width, height, color, depth, rows):
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0))
    if color == 3:
        head += chunk(b"PLTE", bytes(v for i in range(256) for v in (i, 255 - i, i // 2)))
    return head + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def main():
    out = sys.argv[1]
    if sys.argv[2] == "bomb":
        w, h = int(sys.argv[3]), int(sys.argv[4])
        data = png(w, h, 0, 8, b"\x00" * 64)
    else:
        w, h, color, depth = (int(a) for a in sys.argv[2:6])
        samples = [int(v) for v in sys.argv[6:]]
        per = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
        assert len(samples) == w * h * per, "wrong sample count"
        fmt = ">%dH" if depth == 16 else ">%dB"
        rows = b""
        for y in range(h):
            row = samples[y * w * per:(y + 1) * w * per]
            rows += b"\x00" + struct.pack(fmt % len(row), *row)
        data = png(w, h, color, depth, rows)
    with open(out, "wb") as f:
        f.write(data)


main()
