#!/usr/bin/env bats
# predict_formats.bats — issue 18's results out: `predict --format
# text|csv|json|npy -o FILE` with several --output values, never cut short,
# and `eval --confusion` (text and --format json) checked exactly on a model
# whose logits are its inputs (each row's class is its largest entry, so
# the matrix is counted by hand below).
bats_require_minimum_version 1.5.0

setup() {
  NETRUN=${NETRUN:-$BATS_TEST_DIRNAME/../netrun}
  cd "$BATS_TEST_TMPDIR"
  # logits = x: the predicted class of a row is the argmax of x0..x2.
  cat > cls.net <<'NET'
import "nn"
input x : f32[B, 3]
input y : i64[B]
logits = x * 1.0
loss = cross_entropy(logits, y)
train {
  data   = "rows.csv"
  metric = logits
  batch  = 3
}
NET
  # true -> predicted: 0->0, 1->1, 2->2, 1->0, 1->1, 1->2, 2->0, 2->2
  cat > rows.csv <<'CSV'
x0,x1,x2,y
3,1,0,0
0,2,1,1
0,1,2,2
2,1,0,1
0,3,1,1
0,1,3,1
1,0,0,2
0,0,1,2
CSV
  cat > vals.net <<'NET'
input x : f32[B, 3]
third = x / 3.0
lg = log(x)
big = ones([1200]) * 2.0
NET
}

@test "predict --format csv: the classes with a header, over every batch, each row's id its data row" {
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --batch 3 --format csv
  [ "$output" = $'id,class\n1,0\n2,1\n3,2\n4,0\n5,1\n6,2\n7,0\n8,2' ]
  # --limit keeps the first rows, numbered as in the file.
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --batch 3 --limit 2 --format csv
  [ "$output" = $'id,class\n1,0\n2,1' ]
}

@test "predict: a row's class is its first largest logit; a NaN never wins unless it is first (19 classes: two lanes of 8 and a tail)" {
  # logits = log(x): -1 gives NaN, 0 gives -inf.  Rows: a tie (3 and 12);
  # a NaN first; NaNs where lanes start (1, 4, 7) and the largest at 15;
  # all -inf; the largest in the tail (18); all NaN but the first; -inf
  # first, NaNs and another -inf; a tie across lanes (8 and 16).
  sed 's/f32\[B, 3\]/f32[B, 19]/; s/x \* 1.0/log(x)/' cls.net > log19.net
  python3 - <<'PY'
rows = []
def row(r): rows.append(",".join(r) + ",0")
def base(v): return [v] * 19
r = base("1"); r[3] = r[12] = "5"; row(r)
r = base("1"); r[0] = "-1"; r[5] = "9"; row(r)
r = base("2"); r[1] = r[4] = r[7] = "-1"; r[15] = "4"; row(r)
row(base("0"))
r = base("1"); r[18] = "3"; r[17] = "2"; row(r)
r = base("-1"); r[0] = "0.5"; row(r)
r = base("-1"); r[0] = r[9] = "0"; row(r)
r = base("1"); r[8] = r[16] = "6"; row(r)
open("rows.csv", "w").write(",".join("x%d" % i for i in range(19)) + ",y\n" + "\n".join(rows) + "\n")
PY
  run -0 --separate-stderr "$NETRUN" predict log19.net --data rows.csv --batch 4 --format csv
  [ "$output" = $'id,class\n1,3\n2,0\n3,15\n4,0\n5,18\n6,0\n7,0\n8,8' ] || { echo "$output"; false; }
}

@test "predict --format csv: several --output values, NAME[i] columns, 9 digits, nan and -inf" {
  run -0 --separate-stderr "$NETRUN" predict vals.net --set 'x=[[1,0,-1],[2,2,2]]' --output third --output lg --format csv
  # Fed inputs have no data rows: id counts the rows from 1.
  [ "$output" = "id,third[0],third[1],third[2],lg[0],lg[1],lg[2]
1,0.333333343,0,-0.333333343,0,-inf,nan
2,0.666666687,0.666666687,0.666666687,0.693147182,0.693147182,0.693147182" ]
  # Batches are joined: the logits of all 8 rows, 3 a batch.
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --batch 3 --output logits --format csv -o out.csv
  [ "$output" = "" ]
  [ "$(head -n 2 out.csv)" = $'id,logits[0],logits[1],logits[2]\n1,3,1,0' ]
  [ "$(wc -l < out.csv)" -eq 9 ]
  [ "$(tail -n 1 out.csv)" = "8,0,0,1" ]
  # A value per batch (the loss) is not per example: its rows count from 1.
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --batch 3 --output loss --format csv
  [ "$(cut -d, -f1 <<<"$output" | tr '\n' ' ')" = "id 1 2 3 " ]
  # Values with different numbers of rows cannot share a table.
  run -1 --separate-stderr "$NETRUN" predict vals.net --set 'x=[[1,0,-1],[2,2,2]]' --output third --output big --format csv
  [ "$stderr" = "netrun: error: --format csv: 'third' has 2 rows, 'big' 1200 (a row is an example)" ]
}

@test "predict: text cuts 1200 elements to ..., csv and json write them all" {
  run -0 "$NETRUN" predict vals.net --output big
  [[ "$output" == *"..."* ]]
  run -0 --separate-stderr "$NETRUN" predict vals.net --output big --format csv
  [ "${#lines[@]}" -eq 1201 ]
  [ "${lines[0]}" = "id,big" ]
  [ "${lines[1200]}" = "1200,2" ]
  run -0 --separate-stderr "$NETRUN" predict vals.net --output big --format json
  [[ "$output" != *"..."* ]]
  [ "$(grep -o ', 2' <<<"$output" | wc -l)" -eq 1199 ]
}

@test "predict --format json: one document, shapes, nan/-inf as strings" {
  run -0 --separate-stderr "$NETRUN" predict vals.net --set 'x=[[1,0,-1]]' --output third --output lg --format json
  [ "$output" = '{"third": {"dtype": "f32", "shape": [1, 3], "data": [0.333333343, 0, -0.333333343]},
 "lg": {"dtype": "f32", "shape": [1, 3], "data": [0, "-inf", "nan"]}}' ]
  # A scalar per batch (the loss) becomes one row each: 3 batches of 8 rows.
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --output loss --format json
  [[ "$output" == '{"loss": {"dtype": "f32", "shape": [3], "data": ['* ]]
}

@test "predict --format npy: a .npy for one value, a .npz for several, read back by --feed" {
  run -0 --separate-stderr "$NETRUN" predict cls.net --set 'x=[[1,2,3],[0,0,0]]' --output logits --format npy -o a.npy
  [ "$(head -c 8 a.npy | od -An -c | tr -s ' ')" = " 223 N U M P Y 001 \\0" ]
  grep -aq "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" a.npy
  [ "$(stat -c %s a.npy)" -eq $((128 + 24)) ]
  run -0 --separate-stderr "$NETRUN" predict cls.net --feed x=a.npy --output logits --format json
  [ "$output" = '{"logits": {"dtype": "f32", "shape": [2, 3], "data": [1, 2, 3, 0, 0, 0]}}' ]
  run -0 --separate-stderr "$NETRUN" predict cls.net --set 'x=[[1,2,3],[0,0,0]]' --output logits --output x --format npy -o b.npz
  [ "$(unzip -Z1 b.npz | tr '\n' ' ')" = "logits.npy x.npy " ]
  run -0 --separate-stderr "$NETRUN" predict cls.net --feed x=b.npz --output logits --format csv
  [ "$output" = $'id,logits[0],logits[1],logits[2]\n1,1,2,3\n2,0,0,0' ]
}

@test "predict --format: usage errors" {
  run -2 --separate-stderr "$NETRUN" predict cls.net --format xml
  [ "${stderr%%$'\n'*}" = "netrun: unknown format 'xml' (expected text, csv, json or npy)" ]
  run -2 --separate-stderr "$NETRUN" predict cls.net --output logits --format npy
  [ "${stderr%%$'\n'*}" = "netrun: --format npy needs -o FILE (a .npy file, or .npz for several --output values)" ]
  run -2 --separate-stderr "$NETRUN" eval cls.net --format csv
  [ "${stderr%%$'\n'*}" = "netrun: unknown format 'csv' (expected text or json)" ]
}

@test "predict --format text -o FILE: today's text, in the file" {
  run -0 --separate-stderr "$NETRUN" predict cls.net --data rows.csv --batch 3 -o out.txt
  [ "$output" = "" ]
  [ "$(cat out.txt)" = $'0\n1\n2\n0\n1\n2\n0\n2' ]
}

@test "eval --confusion: the matrix and per-class figures, counted by hand" {
  run -0 --separate-stderr "$NETRUN" eval cls.net --confusion
  [ "$output" = "rows.csv: loss 0.854406 accuracy 0.6250 (8 examples)
confusion (rows: true class, columns: predicted class)
                0        1        2
       0        1        0        0
       1        1        2        1
       2        1        0        2
   class precision    recall  accuracy   support
       0    0.3333    1.0000    0.7500         1
       1    1.0000    0.5000    0.7500         4
       2    0.6667    0.6667    0.7500         3
overall accuracy 0.6250 (5 of 8)" ]
}

@test "eval --confusion --format json; a class never predicted has no precision" {
  run -0 --separate-stderr "$NETRUN" eval cls.net --confusion --format json
  [ "$output" = '{"data": "rows.csv", "loss": 0.854405705, "accuracy": 0.625, "examples": 8,
 "classes": 3, "confusion": [[1, 0, 0], [1, 2, 1], [1, 0, 2]],
 "per_class": [{"class": 0, "precision": 0.333333333, "recall": 1, "accuracy": 0.75, "support": 1},
  {"class": 1, "precision": 1, "recall": 0.5, "accuracy": 0.75, "support": 4},
  {"class": 2, "precision": 0.666666667, "recall": 0.666666667, "accuracy": 0.75, "support": 3}]}' ]
  printf 'x0,x1,x2,y\n1,0,0,0\n1,0,0,1\n0,0,1,2\n' > two.csv
  run -0 --separate-stderr "$NETRUN" eval cls.net --data two.csv --confusion
  [ "${lines[8]}" = "       1         -    0.0000    0.6667         1" ]
  run -0 --separate-stderr "$NETRUN" eval cls.net --data two.csv --confusion --format json
  [[ "$output" == *'{"class": 1, "precision": null, "recall": 0, "accuracy": 0.666666667, "support": 1}'* ]]
}

@test "eval --confusion needs a classifier" {
  printf 'x0,x1,x2,y\n1,0,0,0\n' > one.csv
  cat > reg.net <<'NET'
input x : f32[B, 3]
input y : i64[B]
loss = mean(x)
train { data = "one.csv" }
NET
  run -1 --separate-stderr "$NETRUN" eval reg.net --confusion
  [ "$stderr" = "netrun: error: --confusion needs a classifier: metric = NAME (its logits) and a label input fed" ]
}

@test "predict --dtype f64: json in 17 digits, npy as '<f8'" {
  run -0 --separate-stderr "$NETRUN" predict vals.net --dtype f64 --set 'x=[[1,0,-1]]' --output third --format json
  [ "$output" = '{"third": {"dtype": "f64", "shape": [1, 3], "data": [0.33333333333333331, 0, -0.33333333333333331]}}' ]
  run -0 --separate-stderr "$NETRUN" predict vals.net --dtype f64 --set 'x=[[1,0,-1]]' --output third --format npy -o f.npy
  grep -aq "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 3), }" f.npy
  [ "$(stat -c %s f.npy)" -eq $((128 + 24)) ]
}

# Several --output values come from one forward pass: a random op and a
# print() run once, so b is exactly 1.5 * a (both from the same h), with
# fed inputs and with --data.
@test "predict --format text with several --output values names each" {
  run -0 --separate-stderr "$NETRUN" predict vals.net --set 'x=[[3,6,9]]' --output third --output x
  [ "$output" = "third =
[[1. 2. 3.]]
x =
[[3. 6. 9.]]" ]
  # one value alone is not named
  run -0 --separate-stderr "$NETRUN" predict vals.net --set 'x=[[3,6,9]]' --output third
  [ "$output" = "[[1. 2. 3.]]" ]
}

@test "predict --output a --output b runs the forward once: one draw of a random op, one print" {
  cat > once.net <<'NET'
input x : f32[B, 2]
input y : i64[B]
noise = uniform_random([1, 2], min=0.0, max=1.0)
h = x + noise
print(h)
a = h * 2.0
b = h * 3.0
loss = mean(h)
train {
  data   = "two.csv"
  metric = a
  batch  = 2
}
NET
  printf 'x0,x1,y\n1,2,0\n3,4,1\n' > two.csv
  for how in "--set x=[[1.0,2.0]]" "--data two.csv"; do
    run -0 "$NETRUN" predict once.net $how --output a --output b --format json
    [ "$(grep -c '^\[\[' <<<"$output")" -eq 1 ]   # print(h): once
    python3 - "$output" <<'PY'
import json, sys
text = sys.argv[1]
doc = json.loads(text[text.index("{"):])
a, b = doc["a"]["data"], doc["b"]["data"]
assert len(a) == len(b) > 0, (a, b)
for u, v in zip(a, b):
    assert abs(v - 1.5 * u) <= 1e-6 * abs(v), (u, v)
PY
  done
}
