//! Host <-> device copies, timed with events.
//!
//! Every copy reads and writes a different slot of an arena of at least [`ARENA_BYTES`] on
//! both sides, so no copy finds its data in a CPU or GPU cache left warm by the previous one:
//! without this, pageable uploads of a few MiB run from the CPU's last-level cache and look
//! 60% faster than uploads of data the program has not just touched.

use std::cell::Cell;

use experiments::{Direction, HostMemory, TransferPoint};

use crate::cuda::{Gpu, HostBuffer};
use crate::error::{HwError, Result};
use crate::timing::{fill_pattern, median_us, Repeats, Timing};

/// Small copies are timed in batches so one sample lasts well above the event resolution.
const BATCH_BYTES: u64 = 16 << 20;
const MAX_BATCH: u64 = 100;
/// Footprint the copies rotate through: larger than any CPU last-level cache or GPU L2.
const ARENA_BYTES: u64 = 1 << 30;

/// Median, fastest and slowest time of one copy, after checking that the bytes arrived intact.
pub(crate) fn measure_copy(gpu: &Gpu, point: &TransferPoint, seed: u64) -> Result<Timing> {
    let too_large = || {
        HwError::Unsupported(format!(
            "a {} B copy does not fit this machine's address space",
            point.bytes
        ))
    };
    let bytes = usize::try_from(point.bytes).map_err(|_| too_large())?;
    let slots = usize::try_from((ARENA_BYTES / point.bytes).max(1)).map_err(|_| too_large())?;
    let arena = bytes.checked_mul(slots).ok_or_else(too_large)?;
    let device = gpu.device_buffer(arena)?;
    let mut host = match point.host {
        HostMemory::Pinned => gpu.pinned_buffer(arena)?,
        HostMemory::Pageable => HostBuffer::pageable(arena),
    };
    // Slot i holds pattern (seed, i) on whichever side the copy reads from.
    let pattern = |slot: usize, out: &mut [u8]| fill_pattern(out, seed ^ point.bytes, slot as u64);
    for (slot, chunk) in host.contents_mut().chunks_mut(bytes).enumerate() {
        pattern(slot, chunk);
    }
    if point.direction == Direction::DeviceToHost {
        gpu.upload(&device, host.contents())?;
        host.contents_mut().fill(0xA5);
    }
    let batch = (BATCH_BYTES / point.bytes).clamp(1, MAX_BATCH) as usize;
    let repeats = Repeats {
        warmup: 3,
        samples: if point.bytes >= 256 << 20 { 7 } else { 15 },
    };
    let stream = gpu.stream()?;
    let (start, end) = (gpu.event()?, gpu.event()?);
    let copies = Cell::new(0usize);
    let timing = median_us(gpu, &stream, repeats, &start, &end, |q| {
        (0..batch).try_for_each(|_| {
            let slot = copies.get() % slots;
            copies.set(copies.get() + 1);
            let range = slot * bytes..(slot + 1) * bytes;
            match point.direction {
                Direction::HostToDevice => q.upload(&stream, &device, range.start, &host, range),
                Direction::DeviceToHost => q.download(&stream, &host, range, &device, slot * bytes),
            }
        })
    })?;
    // Check the first slot and the last one written.
    let mut expected = vec![0u8; bytes];
    let mut arrived = vec![0u8; bytes];
    for slot in [0, (copies.get() - 1) % slots] {
        pattern(slot, &mut expected);
        let range = slot * bytes..(slot + 1) * bytes;
        match point.direction {
            Direction::HostToDevice => gpu.download_range(&mut arrived, &device, range.start)?,
            Direction::DeviceToHost => arrived.copy_from_slice(&host.contents()[range]),
        }
        if let Some(at) = arrived.iter().zip(&expected).position(|(a, e)| a != e) {
            return Err(HwError::DataMismatch(format!(
                "{} B copy, slot {slot}: first wrong byte at offset {at}",
                point.bytes
            )));
        }
    }
    Ok(timing.per(batch))
}
