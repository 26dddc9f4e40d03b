#!/usr/bin/env bash
# The CUDA core on this GPU: hw's unit GPU tests (among them the injected-failure walk through
# every grow), the GPU integration tests, then the growth suite on both backends with the
# built-in profile, its peaks measured by the driver.
# Usage: scripts/gpu-core-check.sh VRAMLAB_BINARY HW_UNIT_TEST_BINARY GPU_TEST_BINARY OUT_DIR PROFILE
set -uo pipefail
bin=${1:?vramlab binary}
unit=${2:?hw unit test binary}
tests=${3:?hw gpu test binary}
out=${4:?output folder}
profile=${5:?built-in profile}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$unit" --ignored --test-threads 1 2>&1 | tee "$out/unit-gpu-tests.log" || status=1
"$tests" --ignored --test-threads 1 2>&1 | tee "$out/gpu-tests.log" || status=1
/usr/bin/time -v "$bin" run growth --backend both --profile "$profile" --out "$out/run" > "$out/run.log" 2>&1 || status=1
exit $status
