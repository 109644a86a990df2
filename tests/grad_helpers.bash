# grad_helpers.bash — shared by grad.bats and grad2.bats (the registry walks).
# $NETRUN and $G (tests/grad) are set by the caller; runs in its folder.

# The ops that own a script of tests/grad/ops, one a line: OP.net and
# OP_VARIANT.net belong to OP, the longest op name they start with, so
# log_softmax.net is log_softmax's script, never log's.
script_owners() {
  "$NETRUN" ops | awk 'NR > 1 { print $1 }' > all_ops.txt
  for f in "$G"/ops/*.net; do basename "$f" .net; done |
    awk 'NR == FNR { op[$1] = 1; next }
         { best = ""; for (o in op) if (($0 == o || index($0, o "_") == 1) && length(o) > length(best)) best = o
           if (best != "") print best }' all_ops.txt - | sort -u
}
