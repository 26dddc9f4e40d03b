#!/usr/bin/env bash
# What a GPU run was made on, for its machine.txt: when, which host, the GPU, driver, PCIe link,
# clocks, topology and CPU. Every gpu-*.sh script writes it the same way.
# Usage: scripts/machine-info.sh OUT_FILE
out=${1:?output file}
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  hostname
  uname -a
  nvidia-smi
  nvidia-smi -q | grep -E -A3 "Product Name|Driver Version|CUDA Version|PCIe Generation|Link Width|Bus Id|Clocks$|Max Clocks"
  nvidia-smi topo -m
  lscpu | head -20
} > "$out" 2>&1
