#!/bin/bash
# What a refactoring must leave unchanged: every committed trace (and ../shared/traces/wild)
# replayed under its own settings, under two what-ifs with a 3 GiB cap and under --policy all;
# tune of two traces; and `vramlab run`'s records. Run with two binaries into two folders, then
# compare the JSON with the timings left out:
#   scripts/compare_outputs.sh OLD_BIN /tmp/before; scripts/compare_outputs.sh NEW_BIN /tmp/after
#   strip() { grep -v '"commit"\|_ns_p\|"timed_one_in"' "$1" | sed -z 's/,\n\( *\)}/\n\1}/g'; }
#   for f in /tmp/before/*.json; do cmp -s <(strip $f) <(strip /tmp/after/${f##*/}) || echo $f; done
# (`timed_one_in`, which says how the host timings were sampled, came with issue 26; the sed
# drops the comma its removal leaves at the end of an object.)
set -u
BIN=$(realpath "$1"); OUT=$(realpath -m "$2"); mkdir -p "$OUT"
cd "$(dirname "$0")/.."
SCRATCH=$(mktemp -d)
i=0
for f in tests/traces/*.pickle tests/traces/formats/*.pickle* reports/reference/h100/alloc-traces/*/*.pickle.gz reports/reference/h100/real-jobs/*.pickle.gz ../shared/traces/wild/* ; do
  [ -f "$f" ] || continue
  i=$((i+1)); n=$(echo $f | tr '/' '_')
  $BIN replay "$f" --json --out $SCRATCH/$i > $OUT/$n.own.json 2>$OUT/$n.own.err
  $BIN replay "$f" --json --out $SCRATCH/$i --alloc-conf "expandable_segments:True" --alloc-conf "max_split_size_mb:64,garbage_collection_threshold:0.6" --capacity "3 GiB" > $OUT/$n.whatif.json 2>$OUT/$n.whatif.err
  $BIN replay "$f" --json --out $SCRATCH/$i --policy all > $OUT/$n.all.json 2>$OUT/$n.all.err
done
$BIN tune tests/traces/resnet18_default.pickle --json --out $SCRATCH/t1 > $OUT/tune1.json 2>/dev/null
$BIN tune reports/reference/h100/alloc-traces/serve/default.pickle.gz --json --out $SCRATCH/t2 > $OUT/tune2.json 2>/dev/null
$BIN run --out $SCRATCH/run > /dev/null 2>&1; cp -r $SCRATCH/run $OUT/run
