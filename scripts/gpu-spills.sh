#!/usr/bin/env bash
# Register spills on this GPU: `vramlab calibrate --part spills` into a built-in profile, then
# the spills experiment on both backends with that profile.
# Usage: scripts/gpu-spills.sh VRAMLAB_BINARY OUT_DIR PROFILE
set -uo pipefail
bin=${1:?vramlab binary}
out=${2:?output folder}
base=${3:?built-in profile to start from}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$bin" calibrate --part spills --into "$base" --out "$out/profile-$base.toml" --name "$base" 2>&1 | tee "$out/calibrate-spills.log" || status=1
"$bin" run spills --backend both --profile "$out/profile-$base.toml" --out "$out/run" 2>&1 | tee "$out/run.log" || status=1
exit $status
