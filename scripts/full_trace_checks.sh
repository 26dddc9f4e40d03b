#!/usr/bin/env bash
# Every traced workload against its recording, where CI takes a share (python/tests/sampling.py):
# the one-GPU table (python/tests/test_trace.py) and every rank's (test_trace_distributed.py),
# under the Python given (default python3; it needs vramlab installed with its test extras,
# pytest-xdist and the workloads' libraries: .ci/run's list). The recordings are torch 2.11's.
# Run after any change to python/vramlab/_tracer/, and put the line it ends on in
# python/tests/FULL_CHECKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python3}"
start=$(date +%s)
unset VRAMLAB_TRACE_SAMPLE
# Every torchrun script too (CI takes a few: test_trace_distributed.py, SCRIPTS_IN_CI).
export VRAMLAB_ALL_SCRIPTS=1
"$python" -m pytest -q -n 2 --dist loadgroup -p no:cacheprovider python/tests/test_trace.py python/tests/test_trace_distributed.py
echo "full trace checks passed in $(( $(date +%s) - start )) s at $(git rev-parse --short HEAD) under torch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
