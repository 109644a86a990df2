#!/usr/bin/env python3
"""train_keys.py ROOT — the train block's keys in netrun-lang(5) (section
TRAINING, "Keys") checked against the table in src/train/train.c: the same
keys, and for a key documented alone as "(a ...; default N)" the table's
default.  Prints each difference; exits 1 if there is one."""
import re
import sys

root = sys.argv[1]
src = open(root + "/src/train/train.c", encoding="utf-8").read()
table = src[src.index("static const TrainKey keys[] = {"):]
table = table[:table.index("\n};")]
rows = re.findall(r'\{"(\w+)", (K_\w+), [^,]+, [^,]+, ([^,]+), ', table)
keys = {k: (kind, d.strip()) for k, kind, d in rows}

man = open(root + "/man/netrun-lang.5", encoding="utf-8").read()
sec = man[man.index("\n.SS Keys\n"):]
sec = sec[:sec.index("\n.SS ", 1)]
lines = sec.split("\n")
doc = {}
for i, line in enumerate(lines):
    if lines[i - 1] != ".TP" or not line.startswith(".BR "):
        continue
    args = re.findall(r'"[^"]*"|\S+', line[4:])
    bold = []   # the key names: bold words before the roman text that says the default
    for j, a in enumerate(args):
        if j % 2 == 1 and "default" in a and not a.endswith(", \""):
            break
        if j % 2 == 0 and re.fullmatch(r"\w+", a):
            bold.append(a)
    m = re.fullmatch(r'\.BR (\w+) " \(an? [a-z ]+; default ([-0-9.e\\]+)\)"', line)
    for k in bold:
        doc[k] = m.group(2).replace("\\-", "-") if m and len(bold) == 1 else None

bad = 0
for k in sorted(set(keys) - set(doc)):
    print("key %s is in the table but not in netrun-lang(5)" % k)
    bad += 1
for k in sorted(set(doc) - set(keys)):
    print("key %s is in netrun-lang(5) but not in the table" % k)
    bad += 1
for k in sorted(set(doc) & set(keys)):
    if doc[k] is not None and keys[k][0] in ("K_INT", "K_NUMBER") and float(doc[k]) != float(keys[k][1]):
        print("key %s: netrun-lang(5) says default %s, the table %s" % (k, doc[k], keys[k][1]))
        bad += 1
print("%d keys checked" % len(keys))
sys.exit(1 if bad else 0)
