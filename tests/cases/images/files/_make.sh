#!/bin/sh
# _make.sh — how the image folders beside the cases were made (from the
# checkout's root); the files are committed.  .keep files are skipped by
# the reader (names starting with '.'), so emptycls/b is an empty class.
set -e
D=tests/cases/images/files
python3 tests/tools/png.py $D/grey/a/g.png 2 1 0 8 10 200
python3 tests/tools/png.py /tmp/g64.png 8 8 0 8 $(seq 0 63)
head -c 60 /tmp/g64.png >$D/cut/a/cut.png
printf 'not an image\n' >$D/notimg/a/x.png
cp $D/grey/a/g.png $D/emptycls/a/
touch $D/emptycls/b/.keep $D/noclasses/.keep
printf '1,2,0\n3,4,1\n' >$D/t.csv
