#!/usr/bin/env bash
# Allocator policies on a real GPU: the GPU tests, then the resnet18 traces replayed by every
# policy over device memory (every block stamped and checked by a kernel) and in simulation.
# Usage: scripts/gpu-replay.sh VRAMLAB_BINARY GPU_TEST_BINARY OUT_DIR
set -uo pipefail
bin=${1:?vramlab binary}
tests=${2:?hw gpu test binary}
out=${3:?output folder}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$tests" --ignored --test-threads 1 2>&1 | tee "$out/gpu-tests.log" || status=1
for trace in resnet18_default resnet18_expandable; do
  for backend in hw sim; do
    "$bin" replay "tests/traces/$trace.pickle" --backend $backend --out "$out/$trace" 2>&1 | tee "$out/$trace-$backend.log" || status=1
  done
done
"$bin" replay tests/traces/resnet18_default.pickle --policy caching,expandable --json --backend hw --out "$out/json" > "$out/resnet18_default-hw.json" 2> "$out/json.log" || status=1
exit $status
