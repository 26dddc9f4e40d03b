#!/usr/bin/env bash
# Issue 13, 2026-11-24: on one freshly started machine, (1) the coalescing part calibrated with
# the latency-bound 32-line case added, and every coalescing suite measured beside it; (2)
# pageable copies with the copying thread on each CPU in turn, in two processes; (3) the quick
# calibration QUICK_RUNS times in a row with each case's time, so its spread between processes
# and where its time goes are on record.
# Usage: scripts/gpu-diagnose.sh VRAMLAB OUT PROFILE QUICK_RUNS
set -uo pipefail
bin=${1:?vramlab binary}; out=${2:?output folder}; profile=${3:?built-in profile}; quick_runs=${4:-2}
mkdir -p "$out"
. "$(dirname "$0")/steps.sh"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
step coalescing-calibrate "$bin" calibrate --part coalescing --into "$profile" --out "$out/coalescing.toml" --name "$profile"
for e in coalescing coalescing_mask coalescing_l2 coalescing_fresh coalescing_l2_fresh coalescing_holdout coalescing_l2_holdout; do
  step "hw-$e" "$bin" run "$e" --backend hw --profile "$profile" --out "$out/hw"
done
for run in 1 2; do
  step "pageable-by-cpu-$run" sh -c "python3 $(dirname "$0")/pageable_by_cpu.py process-$run >> $out/pageable-by-cpu.jsonl"
done
for run in $(seq 1 "$quick_runs"); do
  VRAMLAB_CASE_SECONDS=1 step "quick-$run" "$bin" calibrate --part machine --into "$profile" --out "$out/quick-$run.toml" --name "$profile-quick"
done
cat "$out/times.txt"
