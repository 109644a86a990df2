#!/usr/bin/env bats
# images.bats — image folders (image.h): Fashion-MNIST test images written
# as PNG and JPEG folders by build/mkimages, decoded back to the IDX bytes
# / 255; the channel conversions, the bilinear resize and 16-bit PNGs on
# hand-made files (tests/tools/png.py) with values worked out by hand;
# training and eval --confusion on a folder; normalization; seeded flip
# and crop; and every error, word for word.

FASHION=/usr/share/datasets/fashion-mnist

bats_require_minimum_version 1.5.0

setup_file() {
  cd "$BATS_FILE_TMPDIR"
  local root=$BATS_TEST_DIRNAME/..
  MK=$root/build/mkimages
  [ -x "$MK" ] || make -C "$root" -s build/mkimages >&2
  "$MK" --first 200 $FASHION/t10k-images-idx3-ubyte.gz $FASHION/t10k-labels-idx1-ubyte.gz png200
  "$MK" --jpeg --first 200 $FASHION/t10k-images-idx3-ubyte.gz $FASHION/t10k-labels-idx1-ubyte.gz jpg200
  # the first 20 as interlaced RGB PNGs and progressive colour JPEGs, (g, g, g) per pixel
  "$MK" --rgb --interlace --first 20 $FASHION/t10k-images-idx3-ubyte.gz $FASHION/t10k-labels-idx1-ubyte.gz il20
  "$MK" --jpeg --rgb --progressive --first 20 $FASHION/t10k-images-idx3-ubyte.gz $FASHION/t10k-labels-idx1-ubyte.gz pj20
  PNG="python3 $root/tests/tools/png.py"
  mkdir -p rgb/a grey/a r/a wide/a b16/a pal/a
  $PNG rgb/a/red.png 1 1 2 8 255 0 0                     # RGB (255, 0, 0)
  $PNG grey/a/g.png 2 1 0 8 10 200                        # grey 10, 200
  $PNG pal/a/p.png 2 1 3 8 0 200                          # palette: (0, 255, 0), (200, 55, 100)
  $PNG r/a/1.png 2 2 0 8 0 255 255 0                      # 2 x 2 to be resized
  $PNG wide/a/1.png 4 1 0 8 10 20 30 40                   # a row, to flip and shift
  for i in 2 3 4 5 6 7 8; do cp wide/a/1.png wide/a/$i.png; done
  $PNG b16/a/1.png 3 1 0 16 4660 32896 65535              # 16-bit grey
  $PNG b16/a/2.png 3 1 6 16 65535 0 0 0 0 65535 0 0 0 0 65535 0  # 16-bit RGBA, alpha 0 (dropped)
  # errors
  mkdir -p empty noimg/a/.hidden-dir trunc/a notimg/a emptycls/a emptycls/b beside/a nested/a/deep bomb/a badjpg/a
  one=png200/0-t-shirt/$(ls png200/0-t-shirt | head -1)
  cp $one emptycls/a/
  head -c 100 $one >trunc/a/cut.png
  printf 'hello, not an image\n' >notimg/a/notes.png
  cp $one beside/a/ && printf 'x\n' >beside/README
  cp $one nested/a/
  $PNG bomb/a/big.png bomb 60000 60000
  f=$(ls jpg200/0-t-shirt | head -1)
  head -c 300 jpg200/0-t-shirt/$f >badjpg/a/cut.jpg
  # A model over the folder.
  cat >folder.net <<'EOF'
import "nn"
input x : f32[B, 1, 28, 28]
input y : i64[B]
logits = dense(flatten(x), 10, scope="out")
loss = cross_entropy(logits, y)
train {
  data = "png200"
  eval = "png200"
  metric = logits
  optimizer = adam
  lr = 0.01
  batch = 50
  epochs = 3
}
EOF
}

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_FILE_TMPDIR"
}

same() { diff -u - <(printf '%s\n' "$output"); }

# The count of each of the first 200 test labels, and example k of class
# c's IDX bytes, from the gzip files with Python's standard library.
idx_py() {
  python3 - "$@" <<'EOF'
import gzip, sys
lab = gzip.open(sys.argv[1] + "/t10k-labels-idx1-ubyte.gz").read()[8:208]
img = gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz").read()[16:16 + 200 * 784]
if sys.argv[2] == "counts":
    for c in range(10): print(c, lab.count(c))
else:
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    c = int(sys.argv[2]); k = [i for i in range(n) if lab[i] == c][int(sys.argv[3])]
    print(" ".join(str(b) for b in img[k * 784:(k + 1) * 784]))
EOF
}

# Checks the numbers netrun data printed for the images (as f32) against
# IDX bytes / 255 in f32 (b / 255 in double rounds to the same f32: 53 >=
# 2 * 24 + 2 bits), as printed, or with a mean difference below $3 (and some
# difference).  Example $4 (default 0) of the images printed.
pixels_match() {
  python3 - "$@" <<'EOF'
import struct, sys
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
out, want = sys.argv[1], sys.argv[2]
tol = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "exact" else None
k = int(sys.argv[4]) if len(sys.argv) > 4 else 0
text = out.split("images\n", 1)[1].split("labels", 1)[0]
got = [f32(float(v)) for v in text.replace("[", " ").replace("]", " ").split()][k * 784:(k + 1) * 784]
exp = [f32(int(b) / 255) for b in want.split()]
assert len(got) == len(exp) == 784, (len(got), len(exp))
d = [abs(a - b) for a, b in zip(got, exp)]
print("max", max(d), "mean", sum(d) / len(d))
# printed with at most 8 significant digits (print.h): within 1e-7 of the
# f32 in [0, 1], where neighbouring bytes are 1 / 255 apart
sys.exit(0 if (tol is None and max(d) <= 1e-7) or (tol is not None and sum(d) / len(d) < tol and max(d) > 0) else 1)
EOF
}

@test "images: netrun data DIR names the classes by sorted folder name, with their counts" {
  run "$NETRUN" data png200
  [ "$status" -eq 0 ]
  counts=$(idx_py $FASHION counts)
  want=$(printf 'dataset png200\nfile png200\nexamples 200\ncolumn images f32 [200, 1, 28, 28] from u8 scaled to [0, 1]\ncolumn labels i64 [200]\nclasses 10\n'
         names=(t-shirt trouser pullover dress coat sandal shirt sneaker bag ankle-boot)
         while read -r c n; do echo "class $c $c-${names[$c]} $n"; done <<<"$counts")
  same <<<"$want"
}

@test "images: PNG pixels are the IDX bytes / 255 exactly (the first of class 0, the third of class 7)" {
  run "$NETRUN" data png200 --head 1
  [ "$status" -eq 0 ]
  pixels_match "$output" "$(idx_py $FASHION 0 0)"
  # (--head prints up to 1000 values: a folder of the one image)
  mkdir -p c7/x && cp "png200/7-sneaker/$(ls png200/7-sneaker | sed -n 3p)" c7/x/
  run "$NETRUN" data c7 --head 1
  [ "$status" -eq 0 ]
  pixels_match "$output" "$(idx_py $FASHION 7 2)"
}

@test "images: interlaced RGB PNGs of (g, g, g) read as 1 channel are the IDX bytes exactly (luminance of grey is grey)" {
  # (19595 + 38470 + 7471) g = 65536 g: L = (65536 g + 32768) >> 16 = g
  run "$NETRUN" data il20 --head 1
  [ "$status" -eq 0 ]
  [[ "$output" == *"column images f32 [20, 3, 28, 28]"* ]]
  run "$NETRUN" data il20 --head 1 --shape 1,28,28
  [ "$status" -eq 0 ]
  [[ "$output" == *"column images f32 [20, 1, 28, 28]"* ]]
  pixels_match "$output" "$(idx_py $FASHION 0 0)"
}

@test "images: progressive colour JPEGs read as 1 channel come close to the IDX bytes" {
  run "$NETRUN" data pj20 --head 1 --shape 1,28,28
  [ "$status" -eq 0 ]
  pixels_match "$output" "$(idx_py $FASHION 0 0)" 0.02
}

@test "images: JPEG (quality 95) decodes close to the IDX bytes, not equal (lossy)" {
  run "$NETRUN" data jpg200 --head 1
  [ "$status" -eq 0 ]
  [[ "$output" == *"column images f32 [200, 1, 28, 28]"* ]]
  pixels_match "$output" "$(idx_py $FASHION 0 0)" 0.02
}

@test "images: RGB to 1 channel is the luminance, grey to 3 replicates, alpha and 16 bits" {
  # (19595 * 255 + 32768) >> 16 = 76; 76 / 255 = 0.29803923
  run "$NETRUN" data rgb --shape 1,1,1 --head 1
  [ "$status" -eq 0 ]
  [[ "$output" == *$'images\n[[[[0.29803923]]]]'* ]]
  run "$NETRUN" data rgb --head 1
  [[ "$output" == *"column images f32 [1, 3, 1, 1]"* ]]
  [[ "$output" == *$'images\n[[[[1.]]\n\n  [[0.]]\n\n  [[0.]]]]'* ]]
  # 10 / 255, 200 / 255 in each of 3 channels
  run "$NETRUN" data grey --shape 3,1,2 --head 1
  [ "$status" -eq 0 ]
  [[ "$output" == *"[[[[0.03921569 0.78431374]]"*"[[0.03921569 0.78431374]]"*"[[0.03921569 0.78431374]]]]"* ]]
  # 16 bits scaled to 8 (rounded): 4660 -> 18, 32896 -> 128, 65535 -> 255.
  # The RGBA image (1 x 3, alpha 0) keeps its colours: its luminance is
  # 76, 150 ((38470 * 255 + 32768) >> 16), 29.
  run "$NETRUN" data b16 --shape 1,1,3 --head 2
  [ "$status" -eq 0 ]
  python3 -c '
import sys
text = sys.argv[1].split("images\n", 1)[1].split("labels", 1)[0]
got = [round(float(v) * 255) for v in text.replace("[", " ").replace("]", " ").split()]
assert got == [18, 128, 255, 76, 150, 29], got' "$output"
}

@test "images: a palette PNG expands to RGB; as 1 channel, the luminance" {
  run "$NETRUN" data pal --head 1
  [ "$status" -eq 0 ]
  python3 -c '
import sys
text = sys.argv[1].split("images\n", 1)[1].split("labels", 1)[0]
got = [round(float(v) * 255) for v in text.replace("[", " ").replace("]", " ").split()]
assert got == [0, 200, 255, 55, 0, 100], got' "$output"
  # (38470 * 255 + 32768) >> 16 = 150; (19595 * 200 + 38470 * 55 + 7471 * 100 + 32768) >> 16 = 103
  run "$NETRUN" data pal --head 1 --shape 1,1,2
  python3 -c '
import sys
text = sys.argv[1].split("images\n", 1)[1].split("labels", 1)[0]
got = [round(float(v) * 255) for v in text.replace("[", " ").replace("]", " ").split()]
assert got == [150, 103], got' "$output"
}

@test "images: another size is resized bilinearly, half-pixel centres (PyTorch's align_corners=False)" {
  # [[0, 255], [255, 0]] to 4 x 4: rows [0, 63.75, 191.25, 255] and
  # [63.75, 95.625, 159.375, 191.25] ... rounded: 64, 96, 159, 191.
  run "$NETRUN" data r --shape 1,4,4 --head 1
  [ "$status" -eq 0 ]
  python3 -c '
import sys
text = sys.argv[1].split("images\n", 1)[1].split("labels", 1)[0]
got = [round(float(v) * 255) for v in text.replace("[", " ").replace("]", " ").split()]
assert got == [0, 64, 191, 255, 64, 96, 159, 191, 191, 159, 96, 64, 255, 191, 64, 0], got' "$output"
}

@test "images: --flip and --crop-pad: each image mirrored or shifted with zeros, the same draws for the same seed" {
  run "$NETRUN" data wide --head 8 --flip --crop-pad 1 --seed 3
  [ "$status" -eq 0 ]
  first=$output
  python3 -c '
import sys
text = sys.argv[1].split("images\n", 1)[1].split("labels", 1)[0]
v = [round(float(x) * 255) for x in text.replace("[", " ").replace("]", " ").split()]
rows = [tuple(v[i:i + 4]) for i in range(0, len(v), 4)]
base = [10, 20, 30, 40]
ok = set()
for flip in (0, 1):
    r = base[::-1] if flip else base
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            s = [0] * 4 if dy else [r[x + dx] if 0 <= x + dx < 4 else 0 for x in range(4)]
            # the crop shifts before the flip mirrors (torchvision: RandomCrop, then RandomHorizontalFlip)
            if flip:
                s = [0] * 4 if dy else [base[3 - x + dx] if 0 <= 3 - x + dx < 4 else 0 for x in range(4)]
            ok.add(tuple(s))
assert all(r in ok for r in rows), rows
assert len(set(rows)) > 2, rows
print(rows)' "$output"
  run "$NETRUN" data wide --head 8 --flip --crop-pad 1 --seed 3
  [ "$output" = "$first" ]
  run "$NETRUN" data wide --head 8 --flip --crop-pad 1 --seed 4
  [ "$output" != "$first" ]
}

@test "images: train on a PNG folder and eval --confusion; the folder scores as the IDX images do" {
  run "$NETRUN" train folder.net --save folder.ckpt
  [ "$status" -eq 0 ]
  [[ "$output" == *"epoch 3/3: train loss"* ]]
  run "$NETRUN" eval folder.net --weights folder.ckpt --confusion
  [ "$status" -eq 0 ]
  [[ "$output" == *"confusion (rows: true class, columns: predicted class)"* ]]
  folder=$(printf '%s\n' "$output" | sed -n 's/^png200: loss \([0-9.]*\) accuracy \([0-9.]*\) (200 examples)$/\1 \2/p')
  [ -n "$folder" ]
  # The same 200 images from the IDX files: the same loss and accuracy.
  sed 's/data = "png200"/data = "fashion-mnist"/; s/eval = "png200"/eval = "test"/' folder.net >idx.net
  run "$NETRUN" eval idx.net --weights folder.ckpt --limit 200
  [ "$status" -eq 0 ]
  idx=$(printf '%s\n' "$output" | sed -n 's/^test: loss \([0-9.]*\) accuracy \([0-9.]*\) (200 examples)$/\1 \2/p')
  echo "folder $folder idx $idx"
  [ "$folder" = "$idx" ]
  # eval --data DIR: the folder named on the command line, labelled by it
  run "$NETRUN" eval idx.net --weights folder.ckpt --data png200
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | sed -n 's/^png200: loss \([0-9.]*\) accuracy \([0-9.]*\) (200 examples)$/\1 \2/p')" = "$folder" ]
}

@test "images: folders train/ and test/ side by side (torchvision's layout): eval = \"test\" is the folder; without one, the hint fits images" {
  mkdir -p tv/train/a tv/train/b tv/test/a tv/test/b
  for d in train/a train/b test/a test/b; do cp wide/a/1.png tv/$d/; done
  cp wide/a/2.png tv/train/a/
  cat >tv/m.net <<'EOF'
import "nn"
input x : f32[B, 1, 1, 4]
input y : i64[B]
param W : [4, 2] = zeros()
logits = flatten(x) @ W
loss = cross_entropy(logits, y)
train {
  data = "train"
  eval = "test"
  metric = logits
}
EOF
  # zeros: loss log 2, and every image is class 0 (a): half right
  run -0 "$NETRUN" eval tv/m.net
  [ "$output" = "test: loss 0.693147 accuracy 0.5000 (2 examples)" ]
  rm -r tv/test
  run -1 --separate-stderr "$NETRUN" eval tv/m.net
  [ "${stderr_lines[0]}" = 'tv/m.net:9:3: error: train: eval = "test" names a split, but train has none: name a folder of class folders (eval = "images/test") or "none"' ]
}

@test "images: training with flip and crop_pad is seeded: the same bits on 1 and 2 threads and resumed, another seed differs" {
  sed 's/epochs = 3/epochs = 2\n  flip = true\n  crop_pad = 2\n  mean = [0.3]\n  std = [0.35]/' folder.net >aug.net
  OMP_NUM_THREADS=1 run "$NETRUN" train aug.net --seed 5 --save a1.ckpt
  [ "$status" -eq 0 ]
  OMP_NUM_THREADS=2 run "$NETRUN" train aug.net --seed 5 --save a2.ckpt
  [ "$status" -eq 0 ]
  cmp a1.ckpt a2.ckpt
  # one epoch, then resumed for the second: the same draws, the same bits
  run "$NETRUN" train aug.net --seed 5 --epochs 1 --save r.ckpt
  [ "$status" -eq 0 ]
  run "$NETRUN" train aug.net --seed 5 --resume r.ckpt --epochs 2
  [ "$status" -eq 0 ]
  cmp a1.ckpt r.ckpt
  run "$NETRUN" train aug.net --seed 6 --save a3.ckpt
  [ "$status" -eq 0 ]
  run ! cmp -s a1.ckpt a3.ckpt
  # without augmentation, the same seed trains other weights
  sed 's/flip = true/flip = false/; s/crop_pad = 2/crop_pad = 0/' aug.net >noaug.net
  run "$NETRUN" train noaug.net --seed 5 --save a4.ckpt
  [ "$status" -eq 0 ]
  run ! cmp -s a1.ckpt a4.ckpt
}

@test "images: mean and std normalize each channel: (v / 255 - mean) / std" {
  # grey 10 and 200 as 3 channels, mean [0, 0.5, 1], std [1, 0.5, 2]
  cat >norm.net <<'EOF'
input x : f32[B, 3, 1, 2]
input y : i64[B]
loss = mean(x)
train { data = "grey"; mean = [0, 0.5, 1]; std = [1, 0.5, 2]; eval = "none" }
EOF
  # mean over 6 values: ch0 (10+200)/255/2, ch1 ((10/255-.5)/.5 + (200/255-.5)/.5)/2,
  # ch2 ((10/255-1)/2 + (200/255-1)/2)/2
  want=$(python3 -c '
import struct
f = lambda x: struct.unpack("f", struct.pack("f", x))[0]
v = [f(10 / 255), f(200 / 255)]
m = [f(f(x - mu) / sd) for mu, sd in ((0, 1), (0.5, 0.5), (1, 2)) for x in v]
print(sum(m) / 6)')
  run "$NETRUN" train norm.net --epochs 1
  [ "$status" -eq 0 ]
  echo "$output"; echo "want $want"
  [[ "$output" == *"train loss $(printf '%.4f' "$want")"* ]]
}

@test "images: errors, word for word" {
  run "$NETRUN" data empty
  [ "$status" -ne 0 ]
  same <<<"netrun: error: empty: no class folders: an image folder holds one folder of PNG or JPEG images per class"
  run "$NETRUN" data emptycls
  same <<<"netrun: error: emptycls/b: class folder 1 is empty: every class folder must hold PNG or JPEG images"
  run "$NETRUN" data trunc
  same <<<"netrun: error: trunc/a/cut.png: truncated PNG: the file ends inside its data"
  run "$NETRUN" data notimg
  same <<<"netrun: error: notimg/a/notes.png: not a PNG or JPEG image (by its first bytes)"
  run "$NETRUN" data beside
  same <<<"netrun: error: beside/README: a file beside the class folders (an image folder holds only class folders)"
  run "$NETRUN" data nested
  same <<<"netrun: error: nested/a/deep: a folder inside a class folder (images are read from one level of class folders)"
  run "$NETRUN" data badjpg
  [ "$status" -ne 0 ]
  [[ "$output" == "netrun: error: badjpg/a/cut.jpg: corrupt JPEG: Premature end of JPEG file" ]]
  # the header's 60000 x 60000 is refused before decoding, for the image
  # itself, and for the folder when its images would take that size
  run "$NETRUN" data bomb --max-memory 64M --shape 1,28,28
  [ "$status" -ne 0 ]
  same <<<"netrun: error: bomb/a/big.png: a 60000 x 60000 image is too large: it would take 6.71 GiB, but only 64 MiB of the memory limit of 64 MiB is free (--max-memory)"
  run "$NETRUN" data bomb --max-memory 64M
  same <<<"netrun: error: out of memory: bomb: 1 images of 1 x 60000 x 60000: it would take 3.35 GiB, but only 64 MiB of the memory limit of 64 MiB is free (--max-memory)"
  run "$NETRUN" data missing
  same <<<"netrun: error: cannot read missing: No such file or directory"
}

@test "images: train-block errors: normalization per channel, augmentation only for image folders" {
  sed 's/epochs = 3/mean = [0.1, 0.2]/' folder.net >m2.net
  run "$NETRUN" train m2.net
  [ "$status" -ne 0 ]
  same <<<"netrun: error: png200: mean = [...] has 2 values, but the images are read with 1 channel: give one per channel"
  sed 's/epochs = 3/std = [0]/' folder.net >s0.net
  run "$NETRUN" train s0.net
  [ "$status" -ne 0 ]
  [[ "$output" == *"s0.net:"*"error: std must be positive, got 0"* ]]
  printf '1,2,0\n3,4,1\n' >t.csv
  cat >csvflip.net <<'EOF'
input x : f32[B, 2]
input y : i64[B]
loss = mean(x)
train { data = "t.csv"; flip = true }
EOF
  run "$NETRUN" train csvflip.net
  [ "$status" -ne 0 ]
  [[ "$output" == *"csvflip.net:4:"*"error: train: flip augments an image folder's images, but t.csv is not an image folder"* ]]
  sed 's/flip = true/mean = [0.5]/' csvflip.net >csvmean.net
  run "$NETRUN" train csvmean.net
  same <<<"netrun: error: t.csv: mean and std normalize an image folder's channels; this data is not an image folder"
  sed 's/f32\[B, 1, 28, 28\]/f32[B, 2, 28, 28]/' folder.net >c2.net
  run "$NETRUN" train c2.net
  same <<<"netrun: error: png200: images are read with 1 channel (grey) or 3 (RGB), but the input fed takes 2"
}

@test "images: predict names the classes by their folders; csv's id is the image's path in the folder" {
  cd "$BATS_TEST_TMPDIR"
  PNG="python3 $BATS_TEST_DIRNAME/tools/png.py"
  mkdir -p cd/cat 'cd/dog, big'
  $PNG cd/cat/a.png 1 1 0 8 10          # 10/255: cat
  $PNG 'cd/dog, big/b.png' 1 1 0 8 200  # 200/255: dog
  $PNG 'cd/dog, big/c.png' 1 1 0 8 30   # 30/255: taken for a cat
  cat >cd.net <<'EOF'
import "nn"
input x : f32[B, 1, 1, 1]
input y : i64[B]
p = reshape(x, [-1, 1])
logits = concat([0.5 - p, p - 0.5], axis=1)
loss = cross_entropy(logits, y)
train {
  data = "cd"
  metric = logits
  batch = 2
}
EOF
  run -0 --separate-stderr "$NETRUN" predict cd.net --data cd
  [ "$output" = $'cat\ndog, big\ncat' ]
  run -0 --separate-stderr "$NETRUN" predict cd.net --data cd --format csv
  [ "$output" = 'id,class
cat/a.png,cat
"dog, big/b.png","dog, big"
"dog, big/c.png",cat' ]
  run -0 --separate-stderr "$NETRUN" predict cd.net --data cd --format json
  [ "$output" = '{"class": {"dtype": "str", "shape": [3], "data": ["cat", "dog, big", "cat"]}}' ]
  # --output values are written as computed, beside the paths.
  run -0 --separate-stderr "$NETRUN" predict cd.net --data cd --format csv --output p
  [ "$output" = 'id,p[0]
cat/a.png,0.0392156877
"dog, big/b.png",0.784313738
"dog, big/c.png",0.117647059' ]
  # npy holds the class numbers.
  run -0 --separate-stderr "$NETRUN" predict cd.net --data cd --format npy -o c.npy
  [ "$(tail -c 24 c.npy | od -An -td8 | tr -s ' \n' ' ')" = " 0 1 0 " ]
}
