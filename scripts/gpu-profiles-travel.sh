#!/usr/bin/env bash
# Built-in profiles on a freshly started machine (issue 13, must-show 3): every suite but peer
# on both backends with the built-in profile; then `calibrate --part machine` (the quick one)
# and the machine's families again with it; then, time allowing, a full calibration and every
# suite again. Each step's wall time goes to times.txt.
# Usage: scripts/gpu-profiles-travel.sh VRAMLAB_BINARY OUT_DIR PROFILE [SECONDS_FOR_THE_FULL_STEP]
set -uo pipefail
bin=${1:?vramlab binary}
out=${2:?output folder}
profile=${3:?built-in profile}
full_budget=${4:-0}
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
. "$(dirname "$0")/steps.sh"
# One experiment at a time, so a failing one does not stop the rest (each run renders its
# report over everything in the folder so far).
each() {
  local label=$1 profile_file=$2; shift 2
  for e in $(experiments "$@"); do
    step "$label-$e" "$bin" run "$e" --backend both --profile "$profile_file" --out "$out/$label"
  done
}
each builtin "$profile" experiments/suites/hierarchy.toml experiments/suites/transfers.toml experiments/suites/growth.toml
step quick-calibrate "$bin" calibrate --part machine --into "$profile" --out "$out/quick.toml" --name "$profile-quick"
each quick "$out/quick.toml" experiments/suites/transfers.toml experiments/suites/growth.toml
if [ "$full_budget" -gt 0 ]; then
  step full-calibrate timeout "$full_budget" "$bin" calibrate --into "$out/quick.toml" --out "$out/full.toml" --name "$profile-full"
  [ -f "$out/full.toml" ] && each full "$out/full.toml" experiments/suites/hierarchy.toml experiments/suites/transfers.toml experiments/suites/growth.toml
fi
cat "$out/times.txt"
