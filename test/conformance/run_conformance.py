#!/usr/bin/env python3
"""Runs ONNX's backend test data through partc compile + partc-run --check.

Every case is compiled and checked for 1 device; cases with more than one op
also for 2 devices pipelined (2 micro-batches where the graph allows
splitting the batch, else 1) and 2 devices data-parallel (where the graph
treats samples independently; otherwise the case counts as not applicable
for that configuration).

Outcomes per case: pass, fail, or unsupported (the compiler rejects the model
as outside its supported operator/type set, with a clear message). Writes the
counts to docs/conformance.md with --write-doc and enforces the expected-pass
list: a case listed there that does not pass makes the run fail.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
# Messages by which partc says "outside what I support" rather than "wrong".
UNSUPPORTED = re.compile(
    r"unsupported operator|is not supported|are not supported|unsupported data type|"
    r"unsupported element type|must be a compile-time constant|supports opsets|"
    r"has dynamic dimension|has no shape|unsupported value type|cannot cast|"
    r"element type \w+ is not supported|supports f32 only|unsupported type|"
    r"unsupported operand types|Indices output|training mode|only tensor|is not a tensor|"
    r"not supported by partc")
# The operators the project commits to (issue 2): every case using only these
# must pass.
REQUIRED_OPS = set("""Conv BatchNormalization Relu LeakyRelu Sigmoid Tanh Erf Gelu Clip
HardSigmoid HardSwish Add Sub Mul Div Pow Sqrt Neg Exp Log MatMul Gemm MaxPool
AveragePool GlobalAveragePool Flatten Reshape Transpose Concat Split Slice Gather
Softmax LogSoftmax LayerNormalization ReduceMean ReduceSum ReduceMax Squeeze
Unsqueeze Expand Pad Where Cast Dropout Identity Shape Constant ConstantOfShape
Range Size""".split())


def model_ops(path):
    """Default-domain op types of a model, or None without python3-onnx."""
    try:
        import onnx
    except ImportError:
        return None
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    return {n.op_type for n in m.graph.node if n.domain in ("", "ai.onnx")} | \
        {"<" + n.domain + ">" for n in m.graph.node if n.domain not in ("", "ai.onnx")}


SINGLE_OP = re.compile(r"cannot split 1 op\(s\) over|cannot split 0 op")
NOT_SPLITTABLE = re.compile(r"cannot be split along the batch|is smaller than 2 parts|"
                            r"no input with a batch")


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s: %s" % (timeout, " ".join(cmd))


def tensor_name(path):
    """The name field (8) of an ONNX TensorProto file, or ''."""
    data = open(path, "rb").read()
    pos = 0

    def varint():
        nonlocal pos
        shift = value = 0
        while True:
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value
    try:
        while pos < len(data):
            key = varint()
            field, wire = key >> 3, key & 7
            if wire == 0:
                varint()
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            elif wire == 2:
                n = varint()
                if field == 8:
                    return data[pos:pos + n].decode()
                pos += n
            else:
                return ""
    except IndexError:
        pass
    return ""


FREEZE = re.compile(r"--const-input (\S+)=FILE")


def compile_plan(bindir, case, plan, args, data_set):
    """Compiles; graph inputs that must be constants (shape operands given
    as inputs by the test) are frozen to the data set's values."""
    frozen = []
    for _ in range(8):
        rc, out = run([os.path.join(bindir, "partc"), "compile",
                       os.path.join(case, "model.onnx"), "-o", plan, "--quiet"]
                      + args + frozen)
        m = FREEZE.search(out)
        if rc == 0 or not m or not data_set:
            return rc, out, bool(frozen)
        name = m.group(1)
        files = [os.path.join(data_set, f) for f in sorted(os.listdir(data_set))
                 if f.startswith("input_")]
        match = [f for f in files if tensor_name(f) == name]
        if not match or ("--const-input", name) in zip(frozen[::2], [a.split("=")[0] for a in frozen[1::2]]):
            return rc, out, bool(frozen)
        frozen += ["--const-input", name + "=" + match[0]]
    return rc, out, bool(frozen)


RUN_ARGS = []  # extra partc-run arguments, e.g. --backend cuda


def check_config(bindir, case, tmp, name, args):
    """Returns (status, message): pass | fail | unsupported | single-op | n/a."""
    plan = os.path.join(tmp, name + ".plan")
    sets = sorted(d for d in os.listdir(case) if d.startswith("test_data_set_"))
    first = os.path.join(case, sets[0]) if sets else None
    rc, out, frozen = compile_plan(bindir, case, plan, args, first)
    if rc == 0 and frozen:
        # Frozen inputs differ per data set: one plan per set.
        for s in sets:
            rc, out, _ = compile_plan(bindir, case, plan, args, os.path.join(case, s))
            if rc != 0:
                break
            rc2, out2 = run([os.path.join(bindir, "partc-run"), plan, "--quiet",
                             "--check", os.path.join(case, s)] + RUN_ARGS)
            if rc2 != 0:
                return "fail", "%s: %s" % (s, out2[-800:])
        if rc == 0:
            return "pass", ""
    if rc != 0:
        if rc < 0 or rc > 128:
            return "fail", "compiler crashed: " + out[-500:]
        if SINGLE_OP.search(out):
            return "single-op", out
        if NOT_SPLITTABLE.search(out):
            return "n/a", out
        if UNSUPPORTED.search(out):
            return "unsupported", out
        return "fail", out
    for s in sets:
        rc, out = run([os.path.join(bindir, "partc-run"), plan, "--quiet",
                       "--check", os.path.join(case, s)] + RUN_ARGS)
        if rc != 0:
            return "fail", "%s: %s" % (s, out[-800:])
    return "pass", ""


def check_case(bindir, case):
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        status, msg = check_config(bindir, case, tmp, "single", [])
        results["single"] = (status, msg)
        if status != "pass":
            return results
        status, msg = check_config(bindir, case, tmp, "pipe2",
                                   ["--devices", "2", "--strategy", "pipeline",
                                    "--micro-batches", "2"])
        if status == "n/a":
            status, msg = check_config(bindir, case, tmp, "pipe2",
                                       ["--devices", "2", "--strategy", "pipeline"])
        results["pipe2"] = (status, msg)
        if status == "single-op":
            return results
        results["data2"] = check_config(bindir, case, tmp, "data2",
                                        ["--devices", "2", "--strategy", "data"])
        return results


def outcome(results):
    statuses = [s for s, _ in results.values()]
    if "fail" in statuses:
        return "fail"
    if results["single"][0] == "unsupported":
        return "unsupported"
    if "unsupported" in statuses:
        return "fail"
    return "pass"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with partc and partc-run")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--expected", default=os.path.join(os.path.dirname(__file__),
                                                       "expected_pass.txt"))
    ap.add_argument("--write-doc", help="write the markdown report here")
    ap.add_argument("--update-expected", action="store_true",
                    help="rewrite the expected-pass list from this run")
    ap.add_argument("--filter", default="", help="only cases whose path contains this")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--run-args", default="",
                    help="extra partc-run arguments, e.g. '--backend cuda'")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    RUN_ARGS.extend(args.run_args.split())

    if not os.path.isdir(args.data):
        print("conformance: ONNX test data not found at %s "
              "(apt-get install libonnx-testdata)" % args.data)
        return 1
    cases = []
    for suite in SUITES:
        root = os.path.join(args.data, suite)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            key = suite + "/" + name
            if os.path.isfile(os.path.join(path, "model.onnx")) and args.filter in key:
                cases.append((key, path))

    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(check_case, args.bin, path): key for key, path in cases}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = f.result()

    counts = {}
    multi = {"pipe2": [0, 0, 0], "data2": [0, 0, 0]}  # pass, fail, n/a
    for key, res in sorted(results.items()):
        suite = key.split("/")[0]
        o = outcome(res)
        counts.setdefault(suite, {"pass": 0, "fail": 0, "unsupported": 0})[o] += 1
        for cfg in ("pipe2", "data2"):
            if cfg in res:
                s = res[cfg][0]
                idx = 0 if s == "pass" else (2 if s in ("n/a", "single-op") else 1)
                multi[cfg][idx] += 1
        if args.verbose or (o == "fail"):
            for cfg, (s, msg) in res.items():
                if s == "fail" or args.verbose:
                    print("%-60s %-7s %s %s" % (key, cfg, s,
                                               msg.strip().splitlines()[-1][:200] if msg.strip() else ""))

    in_scope_total = 0
    in_scope_not_passing = []
    for key, path in cases:
        ops = model_ops(os.path.join(path, "model.onnx"))
        if ops is None or not ops or not ops <= REQUIRED_OPS:
            continue
        in_scope_total += 1
        if outcome(results[key]) != "pass":
            why = next((m for s_, m in results[key].values() if s_ != "pass"), "")
            in_scope_not_passing.append((key, why.strip().splitlines()[-1] if why.strip() else ""))
    print("in scope (only required ops): %d cases, %d not passing"
          % (in_scope_total, len(in_scope_not_passing)))

    expected = set()
    if os.path.exists(args.expected):
        with open(args.expected) as f:
            expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    passing = {k for k, r in results.items() if outcome(r) == "pass"}
    regressions = sorted(k for k in expected if k in results and k not in passing)

    total = {"pass": 0, "fail": 0, "unsupported": 0}
    lines = ["| suite | passed | failed | unsupported |", "|---|---|---|---|"]
    for suite in SUITES:
        if suite in counts:
            c = counts[suite]
            lines.append("| %s | %d | %d | %d |" % (suite, c["pass"], c["fail"], c["unsupported"]))
            for k in total:
                total[k] += c[k]
    lines.append("| **all** | %d | %d | %d |" % (total["pass"], total["fail"], total["unsupported"]))
    print("\n".join(lines))
    print("2-device pipeline: %d passed, %d failed, %d not applicable" % tuple(multi["pipe2"]))
    print("2-device data-parallel: %d passed, %d failed, %d not applicable" % tuple(multi["data2"]))

    if args.write_doc:
        with open(args.write_doc, "w") as f:
            f.write("# Conformance against ONNX's backend test data\n\n")
            f.write("Generated by `test/conformance/run_conformance.py --write-doc`; do not edit.\n")
            f.write("Data: Debian's `libonnx-testdata` (ONNX 1.12 backend tests). Each case is "
                    "compiled and checked with `partc-run --check` (rtol 1e-3, atol 1e-7) for "
                    "1 device; cases with more than one op also for 2 devices pipelined "
                    "(2 micro-batches where the batch can be split, else 1) and 2 devices "
                    "data-parallel. *unsupported* means partc rejected the model with a clear "
                    "message (an operator, data type or dynamic shape outside its scope); "
                    "*failed* means it compiled something that crashed or gave a wrong answer, "
                    "or a multi-device configuration failed.\n\n")
            f.write("\n".join(lines) + "\n\n")
            f.write("Multi-device runs over cases that passed on 1 device (not applicable: a "
                    "single op, or a graph that mixes samples of the batch):\n\n")
            f.write("| configuration | passed | failed | not applicable |\n|---|---|---|---|\n")
            f.write("| 2 devices, pipeline | %d | %d | %d |\n" % tuple(multi["pipe2"]))
            f.write("| 2 devices, data-parallel | %d | %d | %d |\n\n" % tuple(multi["data2"]))
            f.write("## Cases that use only the required operators\n\n")
            f.write("%d cases use only the operators listed in the project's scope; %d of them "
                    "do not pass:\n\n" % (in_scope_total, len(in_scope_not_passing)))
            for k, why in sorted(in_scope_not_passing):
                f.write("- `%s`: %s\n" % (k, why.replace("|", "/")[:240]))
            f.write("\n")
            fails = sorted(k for k, r in results.items() if outcome(r) == "fail")
            f.write("## Failing cases\n\n")
            for k in fails:
                res = results[k]
                why = next((m for s, m in res.values() if s in ("fail", "unsupported")), "")
                last = why.strip().splitlines()[-1] if why.strip() else ""
                f.write("- `%s`: %s\n" % (k, last.replace("|", "/")[:240]))
            f.write("\n")

    if args.update_expected:
        with open(args.expected, "w") as f:
            f.write("# Cases that pass on every applicable configuration; CI fails if one stops passing.\n")
            f.write("# Regenerate with run_conformance.py --update-expected.\n")
            for k in sorted(passing):
                f.write(k + "\n")
    if regressions:
        print("REGRESSIONS (expected to pass):")
        for k in regressions:
            print("  " + k)
        print("conformance: %d passed, %d failed" % (len(expected) - len(regressions), len(regressions)))
        return 1
    print("conformance: %d passed, 0 failed (of %d expected-pass cases)" % (len(expected), len(expected)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
