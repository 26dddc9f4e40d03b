//! Copy/compute overlap: a pinned upload cut into chunks over several streams, each chunk
//! followed on its stream by a kernel of known duration, against copy-then-compute.

use cudarc::driver::sys::CUdevice_attribute;

use experiments::{median, OverlapPoint};

use crate::cuda::{Event, Gpu, Kernel, LaunchConfig, Stream};
use crate::error::{HwError, Result};
use crate::timing::{fill_pattern, median_us, Repeats};

/// Timed samples of each schedule per point.
const OVERLAP_SAMPLES: usize = 9;
const SPIN_SOURCE: &str = include_str!("../../kernels/spin.cu");

/// The spin kernel, configured to fill the GPU with one block per SM.
pub(crate) struct Spin {
    kernel: Kernel,
    config: LaunchConfig,
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

/// Median serial and overlapped times of one point, microseconds.
pub(crate) fn measure_overlap(gpu: &Gpu, spin: &Spin, point: &OverlapPoint, seed: u64) -> Result<(f64, f64)> {
    let bytes = usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} bytes", point.bytes)))?;
    let device = gpu.device_buffer(bytes)?;
    let mut host = gpu.pinned_buffer(bytes)?;
    fill_pattern(host.contents_mut(), seed ^ point.bytes, 0);
    let streams: Vec<Stream> = (0..point.streams).map(|_| gpu.stream()).collect::<Result<_>>()?;
    let joins: Vec<Event> = (0..point.streams).map(|_| gpu.event()).collect::<Result<_>>()?;
    let (start, end) = (gpu.event()?, gpu.event()?);
    let total_ns = (point.kernel_us * 1e3).round() as u64;
    let chunk_ns = (point.kernel_us * 1e3 / f64::from(point.chunks)).round() as u64;
    let main = &streams[0];

    let serial = |repeats| {
        median_us(gpu, main, repeats, &start, &end, |q| {
            q.upload(main, &device, 0, &host, 0..bytes)?;
            q.launch_u64(main, &spin.kernel, spin.config, total_ns)
        })
        .map(|t| t.median)
    };
    let overlapped = |repeats| {
        median_us(gpu, main, repeats, &start, &end, |q| {
            for stream in &streams[1..] {
                q.wait(stream, &start)?;
            }
            let mut offset = 0usize;
            for chunk in 0..point.chunks {
                let stream = &streams[(chunk % point.streams) as usize];
                let len = point.chunk_bytes(chunk) as usize;
                q.upload(stream, &device, offset, &host, offset..offset + len)?;
                q.launch_u64(stream, &spin.kernel, spin.config, chunk_ns)?;
                offset += len;
            }
            for (stream, join) in streams.iter().zip(&joins).skip(1) {
                q.record(join, stream)?;
                q.wait(main, join)?;
            }
            Ok(())
        })
        .map(|t| t.median)
    };
    // The two schedules take turns, sample by sample, so a slow spell of the machine slows
    // both alike instead of only the one measured while it lasted (a serial reference timed
    // alone once came out 35% slow and made one stream look faster than serial).
    serial(Repeats { warmup: 2, samples: 1 })?;
    overlapped(Repeats { warmup: 2, samples: 1 })?;
    let (mut serial_us, mut overlapped_us) = (Vec::new(), Vec::new());
    for _ in 0..OVERLAP_SAMPLES {
        serial_us.push(serial(Repeats { warmup: 0, samples: 1 })?);
        overlapped_us.push(overlapped(Repeats { warmup: 0, samples: 1 })?);
    }
    let (serial, overlapped) = (median(&mut serial_us), median(&mut overlapped_us));
    Ok((serial, overlapped))
}
