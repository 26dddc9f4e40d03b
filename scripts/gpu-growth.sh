#!/usr/bin/env bash
# Buffer growth on this GPU: the GPU tests, `vramlab calibrate --part growth` into a built-in
# profile, then the growth suite on both backends with that profile.
# Usage: scripts/gpu-growth.sh VRAMLAB_BINARY GPU_TEST_BINARY OUT_DIR PROFILE
set -uo pipefail
bin=${1:?vramlab binary}
tests=${2:?hw gpu test binary}
out=${3:?output folder}
base=${4:?built-in profile to start from}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$tests" --ignored --test-threads 1 2>&1 | tee "$out/gpu-tests.log" || status=1
"$bin" calibrate --part growth --into "$base" --out "$out/profile-$base.toml" --name "$base" 2>&1 | tee "$out/calibrate-growth.log" || status=1
"$bin" run experiments/suites/growth.toml --backend both --profile "$out/profile-$base.toml" --out "$out/run" 2>&1 | tee "$out/run.log" || status=1
exit $status
