//! Host <-> device copies, timed with events.
//!
//! Every copy reads and writes a different slot of an arena of at least [`ARENA_BYTES`] on
//! both sides, so no copy finds its data in a CPU or GPU cache left warm by the previous one:
//! without this, pageable uploads of a few MiB run from the CPU's last-level cache and look
//! 60% faster than uploads of data the program has not just touched.
//!
//! The arena is kept from one point to the next while the host memory stays the same kind
//! ([`CopyArena`]): allocating, pinning and filling a fresh gigabyte for every point took most of
//! a calibration's copy time. Before each point the slots read back afterwards are overwritten
//! on the side the copies write, so a copy that did not happen cannot pass the check with bytes
//! an earlier point left. Large slots are read back in evenly spread blocks, not whole.

use std::cell::Cell;

use rayon::prelude::*;

use experiments::{calibration_sizes, throughput_metrics, Calibration, Direction, HostMemory, Metrics, Sample, TransferPoint};

use crate::cuda::{DeviceBuffer, Gpu, HostBuffer};
use crate::error::{HwError, Result};
use crate::probes::Probe;
use crate::spin::Spin;
use crate::timing::{fill_pattern, median_us, Repeats, Timing};

/// Small copies are timed in batches so one sample lasts well above the event resolution.
const BATCH_BYTES: u64 = 16 << 20;
const MAX_BATCH: u64 = 100;
/// Footprint the copies rotate through: larger than any CPU last-level cache or GPU L2.
const ARENA_BYTES: u64 = 1 << 30;
/// The pattern restarts its generator every this many bytes, so any range can be rebuilt alone.
const PATTERN_BLOCK: usize = 64 << 10;
/// What the written side holds before a point's copies.
const POISON: u8 = 0xA5;

/// The memory copies of one host kind rotate through, with what each side holds now.
pub(crate) struct CopyArena {
    host_memory: HostMemory,
    seed: u64,
    host: HostBuffer,
    device: DeviceBuffer,
    host_holds_pattern: bool,
    device_holds_pattern: bool,
}

impl CopyArena {
    fn new(gpu: &Gpu, host_memory: HostMemory, bytes: usize, seed: u64) -> Result<CopyArena> {
        let device = gpu.device_buffer(bytes)?;
        let host = match host_memory {
            HostMemory::Pinned => gpu.pinned_buffer(bytes)?,
            HostMemory::Pageable => HostBuffer::pageable(bytes),
        };
        Ok(CopyArena {
            host_memory,
            seed,
            host,
            device,
            host_holds_pattern: false,
            device_holds_pattern: false,
        })
    }

    fn len(&self) -> usize {
        self.device.len()
    }

    fn fill_host_with_pattern(&mut self) {
        if !self.host_holds_pattern {
            fill_pattern_blocks(self.host.contents_mut(), self.seed, 0);
            self.host_holds_pattern = true;
        }
    }

    /// Readies the side `direction` reads to hold the pattern, and the `checked` ranges of the
    /// side it writes to hold [`POISON`] (only they are read back: poisoning a whole host GiB
    /// took half a second a point).
    fn prepare(&mut self, gpu: &Gpu, direction: Direction, checked: &[std::ops::Range<usize>]) -> Result<()> {
        match direction {
            Direction::HostToDevice => {
                self.fill_host_with_pattern();
                gpu.fill(&self.device, POISON)?;
                self.device_holds_pattern = false;
            }
            Direction::DeviceToHost => {
                // The host's pattern is only needed to put it on the device (refilling a GiB
                // at every point took 0.8 s of CPU a point).
                if !self.device_holds_pattern {
                    self.fill_host_with_pattern();
                    gpu.upload(&self.device, self.host.contents())?;
                    self.device_holds_pattern = true;
                }
                for range in checked {
                    self.host.contents_mut()[range.clone()].fill(POISON);
                }
                self.host_holds_pattern = false;
            }
        }
        Ok(())
    }
}

/// Fills `out` with the arena's pattern from block `first` on: every [`PATTERN_BLOCK`] bytes
/// restart the generator, keyed by the block's index, so blocks fill on every core at once.
fn fill_pattern_blocks(out: &mut [u8], seed: u64, first: usize) {
    out.par_chunks_mut(PATTERN_BLOCK)
        .enumerate()
        .for_each(|(i, chunk)| fill_pattern(chunk, seed, (first + i) as u64));
}

/// Blocks read back in each checked slot, at most: spread evenly from its first byte to its last.
const CHECKED_BLOCKS: usize = 16;

/// The parts of `slot` read back after a point's copies: all of it when small, else
/// [`CHECKED_BLOCKS`] pattern blocks spread from its start to its end. A copy that did not
/// happen, or stopped short, leaves poison in them; reading back whole 768 MiB slots took 3 s of
/// each such calibration point, ten times the copies.
fn checked_ranges(slot: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    let len = slot.len();
    if len <= CHECKED_BLOCKS * PATTERN_BLOCK {
        return vec![slot];
    }
    (0..CHECKED_BLOCKS)
        .map(|i| {
            let start = slot.start + (len - PATTERN_BLOCK) * i / (CHECKED_BLOCKS - 1);
            start..start + PATTERN_BLOCK
        })
        .collect()
}

/// The pattern's bytes at `range` of the arena.
fn pattern_at(seed: u64, range: std::ops::Range<usize>) -> Vec<u8> {
    let first = range.start / PATTERN_BLOCK;
    let last = range.end.div_ceil(PATTERN_BLOCK);
    let mut blocks = vec![0u8; (last - first) * PATTERN_BLOCK];
    fill_pattern_blocks(&mut blocks, seed, first);
    let skip = range.start - first * PATTERN_BLOCK;
    blocks[skip..skip + range.len()].to_vec()
}

/// Median, fastest and slowest time of one copy, after checking that the bytes arrived intact.
/// `arena` is kept for the next point; it is replaced when the host memory's kind, the seed or
/// the size needed changes.
pub(crate) fn measure_copy(
    gpu: &Gpu,
    arena: &mut Option<CopyArena>,
    point: &TransferPoint,
    seed: u64,
) -> Result<Timing> {
    let too_large = || {
        HwError::Unsupported(format!(
            "a {} B copy does not fit this machine's address space",
            point.bytes
        ))
    };
    let bytes = usize::try_from(point.bytes).map_err(|_| too_large())?;
    let needed = usize::try_from(point.bytes.max(ARENA_BYTES)).map_err(|_| too_large())?;
    let reusable = arena
        .as_ref()
        .is_some_and(|a| a.host_memory == point.host && a.seed == seed && a.len() >= needed);
    if !reusable {
        // The old arena is freed before the new one is taken, so both never hold memory at once.
        *arena = None;
        *arena = Some(CopyArena::new(gpu, point.host, needed, seed)?);
    }
    let arena = arena.as_mut().expect("made above");
    let slots = arena.len() / bytes;
    let batch = (BATCH_BYTES / point.bytes).clamp(1, MAX_BATCH) as usize;
    let repeats = Repeats {
        warmup: 3,
        samples: if point.bytes >= 256 << 20 { 7 } else { 15 },
    };
    // The first slot and the last one the copies will write are read back afterwards.
    let last = ((repeats.warmup + repeats.samples) * batch - 1) % slots;
    let mut checked = vec![0, last];
    checked.dedup();
    let checked: Vec<std::ops::Range<usize>> = checked
        .iter()
        .flat_map(|&slot| checked_ranges(slot * bytes..(slot + 1) * bytes))
        .collect();
    arena.prepare(gpu, point.direction, &checked)?;
    let stream = gpu.stream()?;
    let (start, end) = (gpu.event()?, gpu.event()?);
    let copies = Cell::new(0usize);
    let (device, host) = (&arena.device, &mut arena.host);
    let timing = median_us(gpu, &stream, repeats, &start, &end, |q| {
        (0..batch).try_for_each(|_| {
            let slot = copies.get() % slots;
            copies.set(copies.get() + 1);
            let range = slot * bytes..(slot + 1) * bytes;
            match point.direction {
                Direction::HostToDevice => q.upload(&stream, device, range.start, &*host, range),
                Direction::DeviceToHost => q.download(&stream, &*host, range, device, slot * bytes),
            }
        })
    })?;
    if (copies.get() - 1) % slots != last {
        return Err(HwError::DataMismatch(format!(
            "{} B copies ended at slot {}, not the slot poisoned for the check ({last})",
            point.bytes,
            (copies.get() - 1) % slots
        )));
    }
    for range in checked {
        let expected = pattern_at(seed, range.clone());
        let mut arrived = vec![0u8; range.len()];
        match point.direction {
            Direction::HostToDevice => gpu.download_range(&mut arrived, device, range.start)?,
            Direction::DeviceToHost => arrived.copy_from_slice(&host.contents()[range.clone()]),
        }
        if let Some(at) = arrived.iter().zip(&expected).position(|(a, e)| a != e) {
            return Err(HwError::DataMismatch(format!(
                "{} B copy, slot {}: first wrong byte at offset {}",
                point.bytes,
                range.start / bytes,
                range.start % bytes + at
            )));
        }
    }
    Ok(timing.per(batch))
}

/// The copies' probe: it keeps one arena between points of one host kind.
#[derive(Default)]
pub(crate) struct FamilyProbe {
    arena: Option<CopyArena>,
}

impl Probe for FamilyProbe {
    type Point = TransferPoint;

    fn load(_gpu: &Gpu) -> Result<FamilyProbe> {
        Ok(FamilyProbe::default())
    }

    fn measure(&mut self, gpu: &Gpu, point: &TransferPoint, seed: u64) -> Result<Metrics> {
        let timing = measure_copy(gpu, &mut self.arena, point, seed)?;
        let mut metrics = throughput_metrics(timing.median, point.bytes);
        metrics.insert("time_us_min".into(), timing.min);
        metrics.insert("time_us_max".into(), timing.max);
        Ok(metrics)
    }

    fn release(&mut self) {
        self.arena = None;
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, seed: u64, calibration: &mut Calibration, progress: &dyn Fn()) -> Result<usize> {
        let mut arena = None;
        let lists = [
            (Direction::HostToDevice, HostMemory::Pinned, &mut calibration.h2d_pinned),
            (Direction::DeviceToHost, HostMemory::Pinned, &mut calibration.d2h_pinned),
            (Direction::HostToDevice, HostMemory::Pageable, &mut calibration.h2d_pageable),
            (Direction::DeviceToHost, HostMemory::Pageable, &mut calibration.d2h_pageable),
        ];
        for (direction, host, samples) in lists {
            for bytes in calibration_sizes() {
                let point = TransferPoint { direction, host, bytes };
                let time_us = measure_copy(gpu, &mut arena, &point, seed)?.median;
                progress();
                samples.push(Sample { bytes, time_us });
            }
        }
        drop(arena);
        calibration.kernel_launch_us = Spin::load(gpu)?.launch_overhead_us(gpu, 200)?;
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_slots_are_checked_from_their_first_byte_to_their_last() {
        let small = 3 * PATTERN_BLOCK..5 * PATTERN_BLOCK;
        assert_eq!(checked_ranges(small.clone()), vec![small]);
        let slot = (768 << 20) + 5..(1536 << 20) + 5;
        let ranges = checked_ranges(slot.clone());
        assert_eq!(ranges.len(), CHECKED_BLOCKS);
        assert_eq!(ranges[0].start, slot.start);
        assert_eq!(ranges[CHECKED_BLOCKS - 1].end, slot.end);
        assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
        assert!(ranges.iter().all(|r| r.len() == PATTERN_BLOCK));
    }

    #[test]
    fn any_range_of_the_pattern_is_rebuilt_alone() {
        let seed = 42;
        let mut whole = vec![0u8; 5 * PATTERN_BLOCK];
        for (block, chunk) in whole.chunks_mut(PATTERN_BLOCK).enumerate() {
            fill_pattern(chunk, seed, block as u64);
        }
        for range in [
            0..3 << 10,
            3 << 10..6 << 10,
            PATTERN_BLOCK - 7..3 * PATTERN_BLOCK + 5,
            0..5 * PATTERN_BLOCK,
        ] {
            assert_eq!(pattern_at(seed, range.clone()), whole[range]);
        }
        assert_ne!(pattern_at(seed + 1, 0..64), whole[..64]);
    }
}
