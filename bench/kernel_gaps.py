#!/usr/bin/env python3
"""How far apart a program's kernels run, from bench/kernel_trace.cpp's CSV.

Over the last part of the trace (a streamed run's steady state): the span
from the first kernel's start to the last one's end, the time some kernel
ran (the union of their intervals), the idle rest, and the gaps before
each kernel by what ran before it and what ran then. A benchmark tool,
never a test.
"""
import argparse
import csv
import statistics


def short(name):
    name = name.split("(")[0]
    for prefix in ("void ", "partc::runtime::cuda::", "(anonymous namespace)::"):
        name = name.replace(prefix, "")
    return name[:48]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--label", default="")
    ap.add_argument("--tail", type=float, default=0.5,
                    help="share of the trace, from its end, to analyse")
    ap.add_argument("--last", type=int, default=0,
                    help="analyse the last N kernels instead (a streamed "
                         "run's steady state, after the tuning at load)")
    ap.add_argument("--pairs", type=int, default=8,
                    help="kernel pairs to list, largest total gap first")
    ap.add_argument("--top", type=int, default=0,
                    help="also list the N kernels (by name) that ran longest "
                         "in all")
    ap.add_argument("--batches", type=int, default=0,
                    help="batches in that share, for per-batch figures")
    a = ap.parse_args()
    rows = []
    with open(a.csv) as f:
        for r in csv.DictReader(f, quoting=csv.QUOTE_NONE):
            rows.append((int(r["start_ns"]), int(r["end_ns"]),
                         int(r["stream"]), r["name"]))
    rows.sort()
    rows = rows[-a.last:] if a.last else rows[int(len(rows) * (1 - a.tail)):]
    if len(rows) < 2:
        print(a.label, "too few kernels:", len(rows))
        return
    span = rows[-1][1] - rows[0][0]
    busy, gaps, end = 0, [], rows[0][0]
    previous = None
    previous_stream = None
    pairs = {}
    # Gaps where the next kernel runs on another stream than the one before
    # (a graph's fork or join) against those on the same stream.
    by_stream = {True: [], False: []}
    for start, stop, stream, name in rows:
        if start > end:
            busy += stop - start
            gap = start - end
        else:
            busy += max(0, stop - end)
            gap = 0
        if previous is not None:
            gaps.append(gap)
            by_stream[stream != previous_stream].append(gap)
            key = (short(previous), short(name))
            pairs.setdefault(key, []).append(gap)
        end = max(end, stop)
        previous = name
        previous_stream = stream
    total = sum(stop - start for start, stop, _, _ in rows)
    gaps.sort()
    q = lambda p: gaps[min(len(gaps) - 1, int(p * len(gaps)))] / 1e3
    per = (" per batch: %.3f ms span, %.0f kernels" %
           (span / 1e6 / a.batches, len(rows) / a.batches)) if a.batches else ""
    print("%s %d kernels, span %.3f ms, some kernel running %.3f ms (%.1f%%),"
          " kernel sum %.3f ms; idle %.3f ms%s" %
          (a.label, len(rows), span / 1e6, busy / 1e6, 100.0 * busy / span,
           total / 1e6, (span - busy) / 1e6, per))
    print("  gap before a kernel, us: p10 %.1f, median %.1f, p90 %.1f, "
          "p99 %.1f" % (q(0.1), q(0.5), q(0.9), q(0.99)))
    for changed, label in ((False, "same stream"), (True, "stream changes")):
        g = by_stream[changed]
        print("  %s: %d gaps, %.3f ms in all" %
              (label, len(g), sum(g) / 1e6))
    if a.top:
        by_name = {}
        for start, stop, _, name in rows:
            t = by_name.setdefault(short(name), [0, 0])
            t[0] += stop - start
            t[1] += 1
        for name, (ns, count) in sorted(by_name.items(),
                                        key=lambda kv: -kv[1][0])[:a.top]:
            print("  %5.1f%% of the span, %5d x %7.2f us: %s" %
                  (100.0 * ns / span, count, ns / count / 1e3, name))
    by_total = sorted(pairs.items(), key=lambda kv: -sum(kv[1]))
    for (before, after), g in by_total[:a.pairs]:
        print("  %5d x %6.1f us median: %s -> %s" %
              (len(g), statistics.median(g) / 1e3, before, after))


if __name__ == "__main__":
    main()
