//! Host <-> device copies, timed with events.

use experiments::{Direction, HostMemory, TransferPoint};

use crate::cuda::{Gpu, HostBuffer};
use crate::error::{HwError, Result};
use crate::timing::{fill_pattern, median_us, Repeats};

/// Small copies are timed in batches so one sample lasts well above the event resolution.
const BATCH_BYTES: u64 = 16 << 20;
const MAX_BATCH: u64 = 100;

/// Median time of one copy, microseconds, after checking that the bytes arrived intact.
pub(crate) fn measure_copy(gpu: &Gpu, point: &TransferPoint, seed: u64) -> Result<f64> {
    let bytes = usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} bytes", point.bytes)))?;
    let device = gpu.device_buffer(bytes)?;
    let mut host = match point.host {
        HostMemory::Pinned => gpu.pinned_buffer(bytes)?,
        HostMemory::Pageable => HostBuffer::pageable(bytes),
    };
    let mut expected = vec![0u8; bytes];
    fill_pattern(&mut expected, seed ^ point.bytes);
    match point.direction {
        Direction::HostToDevice => host.contents_mut().copy_from_slice(&expected),
        Direction::DeviceToHost => gpu.upload(&device, &expected)?,
    }
    let batch = (BATCH_BYTES / point.bytes).clamp(1, MAX_BATCH) as usize;
    let repeats = Repeats { warmup: 3, samples: if point.bytes >= 256 << 20 { 7 } else { 15 } };
    let stream = gpu.stream()?;
    let (start, end) = (gpu.event()?, gpu.event()?);
    let time_us = median_us(gpu, &stream, repeats, &start, &end, |q| {
        (0..batch).try_for_each(|_| match point.direction {
            Direction::HostToDevice => q.upload(&stream, &device, 0, &host, 0..bytes),
            Direction::DeviceToHost => q.download(&stream, &host, &device),
        })
    })?;
    let arrived = match point.direction {
        Direction::HostToDevice => {
            let mut back = vec![0u8; bytes];
            gpu.download(&mut back, &device)?;
            back
        }
        Direction::DeviceToHost => host.contents().to_vec(),
    };
    if let Some(at) = arrived.iter().zip(&expected).position(|(a, e)| a != e) {
        return Err(HwError::DataMismatch(format!("{} B copy: first wrong byte at offset {at}", point.bytes)));
    }
    Ok(time_us / batch as f64)
}
