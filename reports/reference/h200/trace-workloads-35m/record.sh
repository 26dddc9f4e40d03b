#!/bin/bash
# Records ISSUE35M on this GPU, four fresh processes at a time (each its own CUDA context).
set -u
out=$OUT/trace-workloads-35m
mkdir -p $out
cd scripts
names=$(python -c "import sys; sys.path.insert(0,'.'); from trace_workloads_35m import ISSUE35M as ISSUE35H; print(' '.join(ISSUE35H))")
for n in $names; do echo "$n default"; echo "$n expandable_segments:True"; done > /tmp/jobs
run_one() {
  n=$1; s=$2; [ "$s" = default ] && s=""
  if PYTORCH_ALLOC_CONF="$s" timeout 300 python record_trace_workloads.py $out $n > /tmp/log-$n-${s:+exp} 2>&1; then echo "$n ${s:-default} ok"; else echo "$n ${s:-default} FAILED"; tail -5 /tmp/log-$n-${s:+exp}; fi
}
export -f run_one; export out
xargs -P 4 -L 1 bash -c 'run_one "$0" "$1"' < /tmp/jobs
python -c "import torch,transformers,timm,peft,torchvision,accelerate; p=torch.cuda.get_device_properties(0); print(p.name, torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__, 'timm', timm.__version__, 'peft', peft.__version__, 'torchvision', torchvision.__version__, 'accelerate', accelerate.__version__)" > $out/machine-issue35m.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $out/machine-issue35m.txt
