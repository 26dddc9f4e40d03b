set -uo pipefail
bin=.carry/vramlab; out=$1
mkdir -p $out
{ date -u +%Y-%m-%dT%H:%M:%SZ; hostname; nvidia-smi; } > $out/machine.txt 2>&1
step() { local name=$1; shift; local start=$SECONDS; "$@" > "$out/$name.log" 2>&1; echo "$name $((SECONDS - start)) s exit $?" >> "$out/times.txt"; }
step quick-calibrate $bin calibrate --part machine --into h200 --out $out/quick.toml --name h200-quick
for e in h2d_pageable d2h_pageable migration; do
  step builtin-$e $bin run $e --backend both --profile h200 --out $out/builtin
  step quick-$e $bin run $e --backend both --profile $out/quick.toml --out $out/quick
done
cat $out/times.txt
