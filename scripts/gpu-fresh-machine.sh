#!/usr/bin/env bash
# One freshly started machine, for issue 13's must-show 3 (built-in profiles on other machines),
# in two phases that fit the device tool's ten-minute calls:
#   measure: hw's GPU tests (the CUDA core still sound on this machine), then every suite but
#            peer measured once (hw only); the predictions of the built-in, quick and full
#            profiles are made afterwards from the same measurements (scripts/profiles_on_machine.sh);
#   calibrate: the quick calibration (`--part machine`), then the full one into it, time allowing.
# Each step's wall time goes to times.txt.
# Usage: scripts/gpu-fresh-machine.sh measure|calibrate VRAMLAB UNIT_TESTS GPU_TESTS OUT PROFILE [FULL_SECONDS]
set -uo pipefail
phase=${1:?measure or calibrate}
bin=${2:?vramlab binary}
unit=${3:?hw unit test binary}
tests=${4:?hw gpu test binary}
out=${5:?output folder}
profile=${6:?built-in profile}
full_budget=${7:-0}
mkdir -p "$out"
. "$(dirname "$0")/steps.sh"
case $phase in
  measure)
    "$(dirname "$0")/machine-info.sh" "$out/machine.txt"
    step unit-gpu-tests "$unit" --ignored --test-threads 1
    step gpu-tests "$tests" --ignored --test-threads 1
    for e in $(experiments experiments/suites/hierarchy.toml experiments/suites/transfers.toml experiments/suites/growth.toml); do
      step "hw-$e" "$bin" run "$e" --backend hw --profile "$profile" --out "$out/hw"
    done ;;
  calibrate)
    step quick-calibrate "$bin" calibrate --part machine --into "$profile" --out "$out/quick.toml" --name "$profile-quick"
    if [ "$full_budget" -gt 0 ] && [ -f "$out/quick.toml" ]; then
      step full-calibrate timeout "$full_budget" "$bin" calibrate --into "$out/quick.toml" --out "$out/full.toml" --name "$profile-full"
    fi ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
cat "$out/times.txt"
