# Sourced by the GPU scripts: `step NAME COMMAND...` runs COMMAND with its output in
# $out/NAME.log and appends "NAME SECONDS s exit STATUS" to $out/times.txt; `experiments
# SUITE.toml...` lists the experiments of suite files, one per line.
step() {
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local status=$?
  echo "$name $((SECONDS - start)) s exit $status" >> "$out/times.txt"
}
experiments() { awk -F'"' '/^name = / { if (seen[FILENAME]++) print $2 }' "$@"; }
