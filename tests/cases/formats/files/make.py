#!/usr/bin/env python3
# make.py — writes the NumPy and safetensors files the format cases and
# tests/formats.bats read, byte by byte with Python's standard library
# (struct, zipfile), so neither NumPy nor safetensors is needed to make
# them, and each bad file is bad in exactly one way.  Run from this folder:
#   python3 make.py
import json
import struct
import zipfile


def npy(descr, shape, data, version=1, fortran=False, header=None):
    """A .npy file: magic, version, header length, the dict padded to 64."""
    d = header if header is not None else "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, fortran, shape)
    pre = 10 if version == 1 else 12
    total = (pre + len(d) + 1 + 63) // 64 * 64
    d = d + ' ' * (total - pre - len(d) - 1) + '\n'
    if version == 1:
        head = b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d))
    else:
        head = b'\x93NUMPY' + bytes([version, 0]) + struct.pack('<I', len(d))
    return head + d.encode() + data


def write(name, data):
    with open(name, 'wb') as f:
        f.write(data)


X = [1.5, -2.0, 0.25, 4.0, 3.0, -1.0]   # a 2x3 input, exact in f32
f32 = struct.pack('<6f', *X)

# Read: every dtype and header version.
write('x_f32.npy', npy('<f4', '(2, 3)', f32))
write('x_f64_v2.npy', npy('<f8', '(2, 3)', struct.pack('<6d', 0.1, 0.2, 0.3, 1e-3, 1e30, -7.0), version=2))
write('x_i32_v3.npy', npy('<i4', '(2, 3)', struct.pack('<6i', 1, -2, 3, 16777216, 5, 6), version=3))
write('x_u8.npy', npy('|u1', '(2, 3)', bytes([0, 1, 2, 127, 128, 255])))
write('x_bool.npy', npy('|b1', '(2, 3)', bytes([1, 0, 1, 0, 0, 1])))
write('y_i64.npy', npy('<i8', '(2,)', struct.pack('<2q', 3, -9007199254740993)))
write('y_i32.npy', npy('<i4', '(2,)', struct.pack('<2i', 7, -1)))
# Errors, one each.
write('truncated.npy', npy('<f4', '(2, 3)', f32[:-4]))
write('trailing.npy', npy('<f4', '(2, 3)', f32 + b'\0\0\0\0'))
write('liar.npy', npy('<f4', '(100000, 1000)', f32))
write('giant.npy', npy('<f4', '(1000000000, 1000)', f32))
write('bigendian.npy', npy('>f4', '(2, 3)', struct.pack('>6f', *X)))
write('fortran.npy', npy('<f4', '(2, 3)', f32, fortran=True))
write('object.npy', npy('|O', '(2, 3)', b'\0' * 48))
write('float16.npy', npy('<f2', '(2, 3)', b'\0' * 12))
write('structured.npy', npy('', '', f32, header="{'descr': [('a', '<f4'), ('b', '<f4')], "
                            "'fortran_order': False, 'shape': (3,), }"))
write('version4.npy', npy('<f4', '(2, 3)', f32, version=4))
write('malformed.npy', npy('', '', f32, header="{'descr': '<f4', 'shape': (2, 3), }"))
write('x_f64_huge.npy', npy('<f8', '(2, 3)', struct.pack('<6d', 1, 2, 3, 4, 5, 1e300)))
write('x_i64_inexact.npy', npy('<i8', '(2, 3)', struct.pack('<6q', 1, 2, 3, 4, 5, 16777217)))

# .npz archives: stored and deflated members, as numpy.savez(_compressed).
def npz(name, members, method=zipfile.ZIP_STORED, zip64=False):
    with zipfile.ZipFile(name, 'w', compression=method) as z:
        for m, data in members:
            if zip64:
                with z.open(m, 'w', force_zip64=True) as f:   # as numpy.savez writes them
                    f.write(data)
            else:
                z.writestr(m, data)


# A tiny classification set: y = 1 when x0 + x1 > 0.
pts = [(0.5, 0.25), (-1.0, 0.5), (0.75, -0.25), (-0.5, -0.5), (1.0, 1.0), (-0.25, 0.0), (0.125, 0.5), (-2.0, 1.0)]
xs = struct.pack('<16d', *[v for p in pts for v in p])
ys = bytes([1 if a + b > 0 else 0 for a, b in pts])
npz('train.npz', [('y.npy', npy('|u1', '(8,)', ys)), ('x.npy', npy('<f8', '(8, 2)', xs))], zip64=True)
npz('test.npz', [('x.npy', npy('<f8', '(8, 2)', xs)), ('y.npy', npy('|u1', '(8,)', ys))], zipfile.ZIP_DEFLATED)
npz('feed.npz', [('x.npy', npy('<f4', '(2, 3)', f32)), ('z.npy', npy('<f4', '(1,)', f32[:4]))], zipfile.ZIP_DEFLATED)
npz('extra.npz', [('x.npy', npy('<f8', '(8, 2)', xs)), ('y.npy', npy('|u1', '(8,)', ys)),
                  ('w.npy', npy('<f4', '(8,)', b'\0' * 32))])
npz('missing.npz', [('x.npy', npy('<f8', '(8, 2)', xs))])
npz('uneven.npz', [('x.npy', npy('<f8', '(8, 2)', xs)), ('y.npy', npy('|u1', '(7,)', ys[:7]))])
npz('notnpy.npz', [('x.npy', npy('<f8', '(8, 2)', xs)), ('README.txt', b'hello')])
npz('badmember.npz', [('x.npy', npy('<f8', '(8, 2)', xs)), ('y.npy', npy('>i4', '(8,)', b'\0' * 32))])
good = open('test.npz', 'rb').read()
write('cut.npz', good[:len(good) // 2])
# One bit of a stored member's data flipped: the CRC-32 no longer matches.
stored = bytearray(open('missing.npz', 'rb').read())
stored[200] ^= 0x10
write('crc.npz', bytes(stored))


# safetensors: the weights of linear.net (W [2, 2], b [2]).
def safetensors(name, header, data, pad=True):
    h = json.dumps(header, separators=(',', ':')).encode()
    if pad:
        h += b' ' * ((8 - len(h) % 8) % 8)
    write(name, struct.pack('<Q', len(h)) + h + data)


W = struct.pack('<4f', 1.0, -2.0, 0.5, 3.0)
B = struct.pack('<2f', 0.25, -0.75)
ok = {'W': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [0, 16]},
      'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [16, 24]}}
safetensors('linear.safetensors', ok, W + B)
safetensors('linear_f64.safetensors',
            {'W': {'dtype': 'F64', 'shape': [2, 2], 'data_offsets': [0, 32]},
             'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [32, 40]}},
            struct.pack('<4d', 1.0, -2.0, 0.5, 3.0) + B)
safetensors('renamed.safetensors', {'W': ok['W'], 'bias': ok['b']}, W + B)
safetensors('extra.safetensors', dict(ok, c={'dtype': 'F32', 'shape': [1], 'data_offsets': [24, 28]}),
            W + B + b'\0' * 4)
safetensors('shape.safetensors', {'W': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}, 'b': ok['b']},
            W + B)
safetensors('f16.safetensors', {'W': {'dtype': 'F16', 'shape': [2, 2], 'data_offsets': [0, 8]},
                                'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [8, 16]}}, W[:8] + B)
safetensors('hole.safetensors', {'W': ok['W'], 'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [20, 28]}},
            W + b'\0' * 4 + B)
safetensors('short.safetensors', ok, W + B[:4])
safetensors('i64.safetensors', {'W': {'dtype': 'I64', 'shape': [2, 2], 'data_offsets': [0, 32]},
                                'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [32, 40]}},
            struct.pack('<4q', 1, -2, 0, 3) + B)
write('badjson.safetensors', struct.pack('<Q', 16) + b'{"W":{"dtype":"F')
