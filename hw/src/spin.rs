//! The spin kernel: one block per SM that spins for a given time. The overlap family's kernels
//! and the launch overhead every model adds to a kernel are measured with it.

use cudarc::driver::sys::CUdevice_attribute;

use crate::cuda::{Gpu, Kernel, LaunchConfig};
use crate::error::{HwError, Result};
use crate::timing::{median_us, Repeats};

const SPIN_SOURCE: &str = include_str!("../../kernels/spin.cu");

/// The spin kernel, configured to fill the GPU with one block per SM.
pub(crate) struct Spin {
    pub(crate) kernel: Kernel,
    pub(crate) config: LaunchConfig,
}

impl Spin {
    pub(crate) fn load(gpu: &Gpu) -> Result<Spin> {
        use CUdevice_attribute::*;
        let per_sm = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?;
        let per_block = gpu.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        // More than half an SM's shared memory: a second block cannot fit beside the first.
        let shared_bytes = (per_sm / 2 + 1024).min(per_block);
        if shared_bytes * 2 <= per_sm {
            return Err(HwError::Unsupported(format!(
                "cannot force one block per SM: {per_sm} B shared memory per SM, at most {per_block} B per block"
            )));
        }
        let module = gpu.compile("spin.cu", SPIN_SOURCE)?;
        let kernel = module.kernel("spin", shared_bytes)?;
        let blocks = gpu.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        Ok(Spin {
            kernel,
            config: LaunchConfig {
                blocks,
                threads: 128,
                shared_bytes: shared_bytes as u32,
            },
        })
    }

    /// Median time per kernel of `count` back-to-back zero-length spins: the launch overhead
    /// the overlap model adds to every kernel.
    pub(crate) fn launch_overhead_us(&self, gpu: &Gpu, count: usize) -> Result<f64> {
        let stream = gpu.stream()?;
        let (start, end) = (gpu.event()?, gpu.event()?);
        let repeats = Repeats { warmup: 2, samples: 9 };
        let total = median_us(gpu, &stream, repeats, &start, &end, |q| {
            (0..count).try_for_each(|_| q.launch_u64(&stream, &self.kernel, self.config, 0))
        })?;
        Ok(total.median / count as f64)
    }
}
