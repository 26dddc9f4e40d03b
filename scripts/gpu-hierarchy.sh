#!/usr/bin/env bash
# Re-measures the global-memory and constant parts of a built-in profile on this GPU and runs
# the global-memory and constant experiments on both backends with the fresh profile.
# Usage: scripts/gpu-hierarchy.sh VRAMLAB_BINARY OUT_DIR PROFILE   (PROFILE: h100, h200)
set -uo pipefail
bin=${1:?vramlab binary}
out=${2:?output folder}
base=${3:?built-in profile to start from}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
# Each part writes its own profile and samples file; the second starts from the first.
"$bin" calibrate --part coalescing --into "$base" --out "$out/coalescing-$base.toml" --name "$base" 2>&1 | tee "$out/calibrate-coalescing.log" || status=1
"$bin" calibrate --part constant --into "$out/coalescing-$base.toml" --out "$out/profile-$base.toml" 2>&1 | tee "$out/calibrate-constant.log" || status=1
"$bin" run coalescing coalescing_mask coalescing_l2 coalescing_fresh coalescing_l2_fresh coalescing_holdout coalescing_l2_holdout \
  occupancy_bandwidth constant constant_odd \
  --backend both --profile "$out/profile-$base.toml" --out "$out/run" 2>&1 | tee "$out/run.log" || status=1
exit $status
