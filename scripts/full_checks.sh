#!/usr/bin/env bash
# The whole-replay checks that a debug build (CI's `cargo test --workspace`) samples: tune's
# capacity search against whole replays of every committed trace under every policy and setting
# of the grid, the cuts of every committed trace, every samples file's refit. A release build runs
# them whole. Run after any change to alloc/ or sim/, and put the line it ends on in
# alloc/benches/FIGURES.md.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
cargo test --release -p allocators -p sim
echo "full checks passed in $(( $(date +%s) - start )) s at $(git rev-parse --short HEAD)"
