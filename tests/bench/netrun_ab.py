#!/usr/bin/env python3
"""netrun_ab.py — two netrun binaries on compare.py's training steps,
alternating (the order swapped each round), in one run: the ratio of the
second's step time to the first's (from the training log, as compare.py
takes it) and of their whole processes' CPU time (wait4), which a loaded
host moves less than wall time.  Speed is measured here, never asserted.

  python3 tests/bench/netrun_ab.py OLD_NETRUN NEW_NETRUN [--only char_lm,char_lm_256]
                                   [--threads 1,2] [--rounds 5]

A binary copied out of its checkout finds the stdlib through NETRUN_PATH."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def side(netrun, name, threads):
    """(seconds per step, process CPU seconds) of one training run."""
    script, batch, steps, extra = compare.WORKLOADS[name]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        cmd = [netrun, "train", script, "--epochs", "1", "--log", log, "--limit",
               str((compare.WARMUP + steps) * batch)] + extra
        p = subprocess.Popen(cmd, env=compare.env_threads(threads), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("%s failed" % " ".join(cmd))
        return compare.steady_step(log), ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", default="char_lm,char_lm_256")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    for name in a.only.split(","):
        if name not in compare.WORKLOADS or name in ("fashion_mlp", "adding_lstm"):
            sys.exit("netrun_ab.py: %s is not a step workload of compare.py" % name)
        for t in (int(x) for x in a.threads.split(",")):
            wall, cpu = [], []
            for r in range(a.rounds):
                res = {}
                for who in ((a.old, a.new) if r % 2 == 0 else (a.new, a.old)):
                    res[who] = side(who, name, t)
                wall.append(res[a.new][0] / res[a.old][0])
                cpu.append(res[a.new][1] / res[a.old][1])
                print("  %s, %d thread(s), round %d: step %.1f -> %.1f ms, CPU %.2f -> %.2f s" %
                      (name, t, r + 1, res[a.old][0] * 1e3, res[a.new][0] * 1e3, res[a.old][1], res[a.new][1]),
                      flush=True)
            print("%s, %d thread(s): new/old step time %.3f (%.3f-%.3f), process CPU %.3f (%.3f-%.3f)" %
                  (name, t, statistics.median(wall), min(wall), max(wall), statistics.median(cpu), min(cpu),
                   max(cpu)), flush=True)


if __name__ == "__main__":
    main()
