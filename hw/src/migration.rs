//! Managed memory moving to the device: the host writes a pattern into managed memory, then a
//! kernel reads and checks every word, after a prefetch or letting its page faults move the
//! pages. Events time prefetch plus kernel; the host rewrites the buffer before every sample.

use experiments::{median, migration_calibration_bytes, throughput_metrics, Calibration, Metrics, MigrationPoint, MigrationSample};
use rayon::prelude::*;

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig, ManagedBuffer};
use crate::error::{HwError, Result};
use crate::probes::Probe;

const SAMPLES: usize = 5;

pub(crate) struct MigrationProbe {
    verify: Kernel,
    tag: u32,
}

/// The word the pattern of `tag` puts at index `i` (the same as kernels/replay.cu's).
fn pattern(tag: u32, i: u64) -> u32 {
    tag ^ (i.wrapping_mul(2654435761) as u32)
}

impl MigrationProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<MigrationProbe> {
        let module = gpu.compile("replay.cu", include_str!("../../kernels/replay.cu"))?;
        Ok(MigrationProbe {
            verify: module.kernel("verify", 0)?,
            tag: 7,
        })
    }

    /// Median microseconds of prefetch (if asked) plus the checking kernel.
    pub(crate) fn measure(&mut self, gpu: &Gpu, point: &MigrationPoint) -> Result<f64> {
        let bytes = usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} B", point.bytes)))?;
        let mut buffer = ManagedBuffer::new(gpu, bytes)?;
        let mismatches = gpu.device_buffer(8)?;
        gpu.fill(&mismatches, 0)?;
        let stream = gpu.stream()?;
        let (start, end) = (gpu.event()?, gpu.event()?);
        let words = (buffer.len() / 4) as u64;
        let config = LaunchConfig {
            blocks: words.div_ceil(256).clamp(1, 4096) as u32,
            threads: 256,
            shared_bytes: 0,
        };
        let mut times = Vec::new();
        // One warm-up sample, then SAMPLES timed ones.
        for round in 0..=SAMPLES {
            self.tag = self.tag.wrapping_add(1);
            let tag = self.tag;
            // The host writes every page (which brings them all to the host), on every core:
            // one thread writing 3 GiB took most of the calibration's time.
            const CHUNK: usize = 1 << 16;
            buffer.words_mut().par_chunks_mut(CHUNK).enumerate().for_each(|(c, words)| {
                for (i, word) in words.iter_mut().enumerate() {
                    *word = pattern(tag, (c * CHUNK + i) as u64);
                }
            });
            let buffer = &buffer;
            gpu.enqueue(|q| {
                q.record(&start, &stream)?;
                if point.prefetch {
                    q.prefetch(gpu, &stream, buffer)?;
                }
                let args = [
                    Arg::Span(buffer.span()),
                    Arg::U64(words),
                    Arg::I32(tag as i32),
                    Arg::Device(&mismatches),
                ];
                q.launch(&stream, &self.verify, config, &args)?;
                q.record(&end, &stream)
            })?;
            if round > 0 {
                times.push(start.elapsed_ms(&end)? * 1e3);
            }
        }
        let mut raw = [0u8; 8];
        gpu.download_range(&mut raw, &mismatches, 0)?;
        let damaged = u64::from_le_bytes(raw);
        if damaged > 0 {
            return Err(HwError::DataMismatch(format!(
                "{damaged} words of {} B of managed memory read back wrong on the device",
                point.bytes
            )));
        }
        Ok(median(&mut times))
    }

    pub(crate) fn calibrate(&mut self, gpu: &Gpu) -> Result<Vec<MigrationSample>> {
        let mut samples = Vec::new();
        for prefetch in [false, true] {
            for bytes in migration_calibration_bytes() {
                let time_us = self.measure(gpu, &MigrationPoint { bytes, prefetch })?;
                samples.push(MigrationSample {
                    bytes,
                    prefetch,
                    time_us,
                });
            }
        }
        Ok(samples)
    }
}

pub(crate) type FamilyProbe = MigrationProbe;

impl Probe for MigrationProbe {
    type Point = MigrationPoint;

    fn load(gpu: &Gpu) -> Result<MigrationProbe> {
        MigrationProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &MigrationPoint, _seed: u64) -> Result<Metrics> {
        let time_us = MigrationProbe::measure(self, gpu, point)?;
        Ok(throughput_metrics(time_us, point.bytes))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.migration = MigrationProbe::load(gpu)?.calibrate(gpu)?;
        Ok(calibration.migration.len())
    }
}
