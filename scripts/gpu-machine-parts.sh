#!/usr/bin/env bash
# Issue 13, 2026-11-24: one freshly started machine, for the machine's parts of a profile (copies,
# growth, migration): hw's GPU tests; the coalescing part calibrated (the model's new L2 case);
# then every suite of transfers.toml and growth.toml measured once (hw only), and the quick
# calibration QUICK_RUNS times in a row, each case's time on record. Errors of the built-in and
# quick profiles come afterwards from the same measurements (scripts/profiles_on_machine.sh).
# EXTRA (optional) is a suite file run with --backend both against PROFILE (a pre-registered
# hold-out, say).
# Usage: scripts/gpu-machine-parts.sh VRAMLAB UNIT_TESTS GPU_TESTS OUT PROFILE QUICK_RUNS [EXTRA]
set -uo pipefail
bin=${1:?vramlab binary}; unit=${2:?hw unit tests}; tests=${3:?hw gpu tests}; out=${4:?output folder}
profile=${5:?built-in profile}; quick_runs=${6:-2}; extra=${7:-}
mkdir -p "$out"
. "$(dirname "$0")/steps.sh"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
step unit-gpu-tests "$unit" --ignored --test-threads 1
step gpu-tests "$tests" --ignored --test-threads 1
if [ -n "$extra" ]; then
  step extra "$bin" run "$extra" --backend both --profile "$profile" --out "$out/extra"
fi
step coalescing-calibrate "$bin" calibrate --part coalescing --into "$profile" --out "$out/coalescing.toml" --name "$profile"
for e in $(experiments experiments/suites/transfers.toml experiments/suites/growth.toml); do
  step "hw-$e" "$bin" run "$e" --backend hw --profile "$profile" --out "$out/hw"
done
for run in $(seq 1 "$quick_runs"); do
  VRAMLAB_CASE_SECONDS=1 step "quick-$run" "$bin" calibrate --part machine --into "$profile" --out "$out/quick-$run.toml" --name "$profile-quick"
done
cat "$out/times.txt"
