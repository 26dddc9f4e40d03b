#!/bin/bash
# Records one group of traced workloads (scripts/trace_workloads_GROUP.py, e.g. 35k) on this GPU,
# under the default and the expandable-segments setting, four fresh processes at a time (each its
# own CUDA context), with the machine's metadata, into $OUT/trace-workloads-GROUP. Run from the
# repository root on a GPU machine: OUT=dir bash scripts/record_trace_group.sh 35k
# On a host of several GPUs, GPUS=N spreads the processes over them, four to each (a process
# sees its one GPU as device 0; each is its own CUDA context, so the recordings are the same).
# PARALLEL=N runs N processes at a time instead (the programs and the GPU's memory allow it).
set -u
group=$1
out=$OUT/trace-workloads-$group
mkdir -p "$out"
cd "$(dirname "$0")"
upper=$(echo "$group" | tr a-z A-Z)
python -c "import sys; sys.path.insert(0,'.'); from trace_workloads_$group import ISSUE$upper as g; print('\n'.join(f'{n} default\n{n} expandable_segments:True' for n in g))" > /tmp/jobs
gpus=${GPUS:-1}
run_one() {
  n=$1; s=$2; [ "$s" = default ] && s=""
  [ "$gpus" -gt 1 ] && export CUDA_VISIBLE_DEVICES=$((SLOT % gpus))
  if PYTORCH_ALLOC_CONF="$s" timeout 300 python record_trace_workloads.py "$out" "$n" > "/tmp/log-$n-${s:+exp}" 2>&1; then echo "$n ${s:-default} ok"; else echo "$n ${s:-default} FAILED"; tail -5 "/tmp/log-$n-${s:+exp}"; fi
}
export -f run_one; export out gpus
xargs -P ${PARALLEL:-$((4 * gpus))} --process-slot-var=SLOT -L 1 bash -c 'run_one "$0" "$1"' < /tmp/jobs
python -c "import torch,transformers,timm,peft,torchvision,accelerate; p=torch.cuda.get_device_properties(0); print(p.name, torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__, 'timm', timm.__version__, 'peft', peft.__version__, 'torchvision', torchvision.__version__, 'accelerate', accelerate.__version__)" > "$out/machine-issue$group.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$out/machine-issue$group.txt"
