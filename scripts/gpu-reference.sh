#!/usr/bin/env bash
# A reference run on a real GPU: machine metadata, `vramlab calibrate`, the transfer suite on
# both backends with the fresh profile, and an independent cross-check through PyTorch.
# Usage: scripts/gpu-reference.sh VRAMLAB_BINARY OUT_DIR TAG   (TAG: h100, h200, ...)
set -uo pipefail
bin=${1:?vramlab binary}
out=${2:?output folder}
tag=${3:?gpu tag, e.g. h100}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"$(dirname "$0")/machine-info.sh" "$out/machine.txt"
status=0
"$bin" calibrate --out "$out/profile-$tag.toml" --name "$tag" 2>&1 | tee "$out/calibrate.log" || status=1
"$bin" run transfers --backend both --profile "$out/profile-$tag.toml" --out "$out/run" 2>&1 | tee "$out/run.log" || status=1
# A second, independent process over the same points: how much the GPU itself varies run to run.
"$bin" run transfers --backend hw --out "$out/repeat" 2>&1 | tee "$out/repeat.log" || status=1
timeout 120 python3 "$here/torch_crosscheck.py" > "$out/torch_crosscheck.txt" 2>&1 || echo "torch cross-check failed" >> "$out/torch_crosscheck.txt"
exit $status
