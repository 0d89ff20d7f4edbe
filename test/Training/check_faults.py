#!/usr/bin/env python3
"""A device that fails or stops mid-step ends a training run with an error
naming it, and never hangs.

Usage: check_faults.py BIN_DIR WORK_DIR [partc-run options...]

Trains a small MLP for a few steps with 2 data-parallel replicas and with a
2-stage pipeline, and injects faults with partc-run --inject-fault: a kernel
error (on a GPU a device-side trap, which breaks that GPU's context as an
illegal address does) and a hang (a kernel that never ends), on either
device, in the first step (launched kernel by kernel) and in the third (a
replayed CUDA graph). Each run must exit non-zero within a bound, print
the steps before the fault, and name the device: the GPU (and its plan
devices) that failed, or, after --step-timeout, the device the others wait
for. With one plan device per GPU the replicas average through NCCL, whose
communicators must be aborted for the healthy GPU to stop waiting; with
--devices-per-gpu they share a GPU and the peer-read average.

Prints PASS or FAIL per case; exits 1 if any failed. Runs on the CPU
backend too (--backend cpu), where the error is the device thread's.
"""
import os
import re
import subprocess
import sys
import time

BIN, WORK = sys.argv[1], sys.argv[2]
RUN_ARGS = sys.argv[3:]
HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 3
# A run must end this soon after the step timeout: the abort's grace period
# and a few steps of a small model.
BOUND_S = 60

os.makedirs(WORK, exist_ok=True)
subprocess.run([sys.executable, os.path.join(HERE, "..", "Inputs",
                                             "make_models.py"), WORK],
               check=True, stdout=subprocess.DEVNULL)
cuda = "cuda" in " ".join(RUN_ARGS)
TRAIN = ["--train", "--loss", "mse", "--optimizer", "sgd", "--lr", "0.01",
         "--batch", "8", "--quiet"]
PLANS = {
    "data": ["--devices", "2", "--strategy", "data"],
    "pipeline": ["--devices", "2", "--strategy", "pipeline",
                 "--micro-batches", "2"],
}
for name, options in PLANS.items():
    subprocess.run([os.path.join(BIN, "partc"), "compile",
                    os.path.join(WORK, "mlp.onnx"), "-o",
                    os.path.join(WORK, name + ".plan")] + TRAIN + options,
                   check=True)

GPU = r"GPU \d+"
# (plan, fault, the step it strikes, patterns the error must match).
CASES = [
    ("data", "error:1:3", 3,
     [rf"^partc-run: error: step 3 failed on {GPU} \(plan devices? [0-9, ]*1\)"]
     if cuda else
     [r"device 1 instruction \d+ \(all_reduce group \d+[^)]*\): injected fault"]),
    ("data", "error:0:1", 1,
     [rf"^partc-run: error: step 1 failed on {GPU} \(plan devices? 0"]
     if cuda else
     [r"device 0 instruction \d+ \(all_reduce group \d+[^)]*\): injected fault"]),
    ("data", "hang:1:3", 3,
     [rf"step 3 did not finish within {TIMEOUT_S} s",
      r"device 1( \(GPU \d+\))? has not reached instruction \d+ \(all_reduce "
      r"group \d+[^)]*\), which device 0( \(GPU \d+\))? waits for"]),
    ("data", "hang:0:1", 1,
     [rf"step 1 did not finish within {TIMEOUT_S} s",
      r"device 0( \(GPU \d+\))? has not reached instruction \d+ \(all_reduce "
      r"group \d+[^)]*\), which device 1( \(GPU \d+\))? waits for"]),
    # Stage 1 stops before its first receive; stage 0 waits for it.
    ("pipeline", "hang:1:3", 3,
     [rf"step 3 did not finish within {TIMEOUT_S} s",
      r"device 1( \(GPU \d+\))? has not reached instruction \d+ \(recv"]),
    ("pipeline", "error:0:3", 3,
     [rf"step 3 failed on {GPU}"] if cuda else
     [r"device 0 instruction \d+ \((recv|wait)[^)]*\): injected fault"]),
]

failed = 0


def report(ok, label, detail=""):
    global failed
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'} {label}{': ' + detail if detail else ''}",
          flush=True)


# A healthy run with the watchdog armed finishes and prints every step.
for name in PLANS:
    cmd = [os.path.join(BIN, "partc-run"), os.path.join(WORK, name + ".plan"),
           "--steps", "4", "--step-timeout", str(TIMEOUT_S)] + RUN_ARGS
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=BOUND_S)
    report(r.returncode == 0 and "step 4 loss" in r.stdout,
           f"{name} no fault", r.stderr.strip()[-300:])

for name, fault, step, patterns in CASES:
    label = f"{name} {fault}"
    cmd = [os.path.join(BIN, "partc-run"), os.path.join(WORK, name + ".plan"),
           "--steps", "4", "--inject-fault", fault,
           "--step-timeout", str(TIMEOUT_S)] + RUN_ARGS
    start = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        report(False, label, f"still running after {BOUND_S} s (a hang)")
        continue
    seconds = time.time() - start
    error = r.stderr.strip()
    missing = [p for p in patterns if not re.search(p, error, re.M)]
    steps_before = all(f"step {k} loss" in r.stdout for k in range(1, step))
    ok = (r.returncode != 0 and not missing and steps_before and
          f"step {step} loss" not in r.stdout and r.returncode < 128)
    detail = f"exit {r.returncode} after {seconds:.1f} s"
    if not ok:
        detail += f"; missing {missing}; stderr: {error[-600:]}"
    report(ok, label, detail)
    print("   ", error.splitlines()[-1][:400] if error else "(no error)")

sys.exit(1 if failed else 0)
