#!/usr/bin/env bash
# Re-measures one part of a built-in profile on this GPU and runs experiments on both backends
# with the result. Usage: scripts/gpu-part.sh VRAMLAB_BINARY OUT_DIR PROFILE PART EXPERIMENT...
set -uo pipefail
bin=${1:?vramlab binary}
out=${2:?output folder}
base=${3:?built-in profile to start from}
part=${4:?part to calibrate}
shift 4
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$bin" calibrate --part "$part" --into "$base" --out "$out/profile-$base.toml" --name "$base" 2>&1 | tee "$out/calibrate-$part.log" || status=1
"$bin" run "$@" --backend both --profile "$out/profile-$base.toml" --out "$out/run" 2>&1 | tee "$out/run.log" || status=1
exit $status
