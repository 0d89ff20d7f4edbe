#!/usr/bin/env bash
# Runs every fuzz target for a bounded time over a scratch copy of its seed
# corpus (test/fuzz/corpus is left as committed) and fails on any crash,
# leak, timeout or sanitizer report.
#   test/fuzz/run_fuzzers.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# BUILD_DIR is configured with -DPARTC_FUZZ=ON (docs/robustness.md).
# The seed is fixed (PARTC_FUZZ_SEED, default 1) so that CI is repeatable;
# PARTC_FUZZ_SEED=0 picks a new one each run.
# Reproduce a finding with: BUILD_DIR/bin/partc-fuzz-TARGET CRASH_FILE
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?build directory}
SECONDS_EACH=${2:-60}
shift 2 || true
TARGETS=${*:-tensor-file plan-reader compile}
WORK=${FUZZ_WORK:-$(mktemp -d)}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0
for t in $TARGETS; do
  bin=$BUILD/bin/partc-fuzz-$t
  mkdir -p $WORK/$t/corpus $WORK/$t/findings
  cp -n test/fuzz/corpus/$t/* $WORK/$t/corpus/ 2>/dev/null
  dict=()
  [ $t = compile ] && dict=(-dict=test/fuzz/onnx.dict)
  "$bin" $WORK/$t/corpus "${dict[@]}" -max_total_time=$SECONDS_EACH \
    -seed=${PARTC_FUZZ_SEED:-1} \
    -timeout=25 -rss_limit_mb=6144 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix=$WORK/$t/findings/ > $WORK/$t/log 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' $WORK/$t/log | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' $WORK/$t/log | tail -1)
  echo "fuzz $t: exit $rc, ${execs:-0} executions, $cov, $(ls $WORK/$t/corpus | wc -l) corpus files"
  if [ $rc -ne 0 ] || [ -n "$(ls $WORK/$t/findings)" ]; then
    status=1
    echo "fuzz $t FAILED; findings in $WORK/$t/findings:"
    ls $WORK/$t/findings
    grep -A30 -m1 'ERROR\|runtime error\|==ERROR\|deadly signal\|Timeout' $WORK/$t/log | head -60
  fi
done
exit $status
