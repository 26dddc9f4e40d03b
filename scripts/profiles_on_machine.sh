#!/usr/bin/env bash
# Predictions of several profiles against one machine's measurements (issue 13, must-show 3):
# for each PROFILE (a built-in name or a .toml), copies the machine's hw records into
# OUT/<label>/ and runs sim beside them, so each report compares that profile with the same
# measurements; then prints one table of validation-point errors per family and profile.
# Usage: scripts/profiles_on_machine.sh VRAMLAB MACHINE_DIR LABEL=PROFILE...
#   (MACHINE_DIR holds hw/<experiment>/hw.json, as scripts/gpu-fresh-machine.sh writes it)
set -euo pipefail
bin=${1:?vramlab binary}; machine=${2:?machine folder}; shift 2
labels=()
for pair in "$@"; do
  label=${pair%%=*}; profile=${pair#*=}
  labels+=("$label")
  rm -rf "${machine:?}/$label"; mkdir -p "$machine/$label"
  for dir in "$machine"/hw/*/; do
    e=$(basename "$dir")
    [ -f "$dir/hw.json" ] || continue
    mkdir -p "$machine/$label/$e"; cp "$dir"/hw.* "$machine/$label/$e/"
    "$bin" run "$e" --backend sim --profile "$profile" --out "$machine/$label" > /dev/null
  done
done
python3 "$(dirname "$0")/profile_errors.py" "$machine" "${labels[@]}"
