#!/usr/bin/env python3
"""Compares two kernel profiles of one plan at two batch sizes.

usage: profile_compare.py SMALL.json LARGE.json

Both files come from `partc-run --profile` on plans of the same model, the
first at the smaller batch. Each kernel of the small plan is matched with
the large plan's kernel of the same ONNX node and position; the table shows
where the small batch loses efficiency: its time against the large batch's
time scaled down to the same number of samples.
"""
import json
import re
import sys
from collections import defaultdict


def load(path):
    with open(path) as f:
        return json.load(f)["kernels"]


def kind(signature):
    return signature.split("(")[0].split()[0]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    small, large = load(sys.argv[1]), load(sys.argv[2])
    # Sample counts from the first kernel's first operand shape.
    counts = []
    for ks in (small, large):
        m = re.search(r"\[(\d+)", ks[0]["signature"])
        counts.append(int(m.group(1)) if m else None)
    if None in counts or counts[0] >= counts[1]:
        sys.exit(f"cannot tell the batches apart: {counts}")
    scale = counts[0] / counts[1]
    seen = defaultdict(int)
    index = {}
    for k in large:
        key = (k["node"], seen[k["node"]])
        seen[k["node"]] += 1
        index[key] = k
    seen.clear()
    rows = []
    for k in small:
        key = (k["node"], seen[k["node"]])
        seen[k["node"]] += 1
        other = index.get(key)
        if other is None:
            continue
        s_us = k["seconds"] * 1e6
        l_us = other["seconds"] * 1e6 * scale
        variants = k.get("variant", "-") + " / " + other.get("variant", "-")
        rows.append((s_us - l_us, s_us, l_us, kind(k["signature"]), k["node"],
                     variants))
    total_s = sum(r[1] for r in rows)
    total_l = sum(r[2] for r in rows)
    print(f"batch {counts[0]} against batch {counts[1]} scaled by {scale:g}: "
          f"{len(rows)} kernels, {total_s:.0f} us against {total_l:.0f} us "
          f"(+{total_s - total_l:.0f} us, x{total_s / total_l:.2f})")
    by_kind = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        by_kind[r[3]][0] += r[1]
        by_kind[r[3]][1] += r[2]
        by_kind[r[3]][2] += 1
    print("\nby kernel kind: count, small us, large us scaled, excess")
    for name, (s, l, n) in sorted(by_kind.items(), key=lambda x: x[1][1] - x[1][0]):
        print(f"  {name:28s} {n:4d} {s:9.1f} {l:9.1f} {s - l:+8.1f}")
    print("\nlargest excesses: excess us, small us, large us scaled, kind, "
          "node, implementations (small / large)")
    for r in sorted(rows, reverse=True)[:30]:
        print(f"  {r[0]:+7.1f} {r[1]:8.1f} {r[2]:8.1f}  {r[3]:12s} {r[4]:28s} {r[5]}")


if __name__ == "__main__":
    main()
