"""Independent check of vramlab's transfer figures with PyTorch (not part of vramlab).

Copies non-zero data host<->device with CUDA events, 5 warm-ups, median of 25, and prints
GB/s (10^9 bytes/s) for pinned and pageable memory at a few sizes.
"""
import statistics

import torch

SIZES = [1 << 20, 16 << 20, 256 << 20]


def median_ms(copy):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(30):
        start.record()
        copy()
        end.record()
        end.synchronize()
        if i >= 5:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


print(torch.cuda.get_device_name(0), "torch", torch.__version__)
for size in SIZES:
    data = torch.randint(1, 255, (size,), dtype=torch.uint8)
    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    for pinned in (True, False):
        host = data.pin_memory() if pinned else data.clone()
        kind = "pinned" if pinned else "pageable"
        h2d = median_ms(lambda: device.copy_(host, non_blocking=True))
        d2h = median_ms(lambda: host.copy_(device, non_blocking=True))
        print(f"{size:>10} B {kind:8} h2d {size / h2d / 1e6:7.2f} GB/s  d2h {size / d2h / 1e6:7.2f} GB/s")
