//! Growing a device buffer, measured: each point builds a buffer of half the size (untimed),
//! stamps it with a kernel, times the grow on the host clock (the grow ends synchronized), and
//! checks with a kernel that everything written before is still there, grown or refused.

use std::time::Instant;

use experiments::{growth_calibration_bytes, growth_metrics, Calibration, GrowthPoint, GrowthSample, GrowthStrategy, MANAGED_LIMIT_FRACTION, Metrics};

use crate::cuda::{BackedBy, Gpu, GrowingBuffer, Kernel};
use crate::error::{HwError, Result};
use crate::probes::Probe;

pub(crate) struct GrowthProbe {
    stamp: Kernel,
    verify: Kernel,
    tag: u32,
}

/// One measured grow.
pub(crate) struct Grown {
    pub(crate) grow_us: Option<f64>,
    /// Device bytes in use at the grow's peak beyond those in use before (cuMemGetInfo).
    pub(crate) peak_bytes: u64,
    pub(crate) free_bytes: u64,
    /// The grow was not tried (vramlab's managed-memory safety limit): nothing was measured.
    pub(crate) not_measured: bool,
}

impl GrowthProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<GrowthProbe> {
        let module = gpu.compile("replay.cu", include_str!("../../kernels/replay.cu"))?;
        // Warm up every path once (the first large allocation of a process sets up more than
        // later ones do), so no measured grow pays for it.
        let (free, _) = gpu.memory_info()?;
        let managed_limit = (free as f64 * MANAGED_LIMIT_FRACTION) as u64;
        for strategy in GrowthStrategy::ALL {
            let mut buffer = GrowingBuffer::new(gpu, backed_by(strategy), None)?;
            buffer.grow(2 << 30, managed_limit)?;
            buffer.grow(4 << 30, managed_limit)?;
        }
        Ok(GrowthProbe {
            stamp: module.kernel("stamp", 0)?,
            verify: module.kernel("verify", 0)?,
            tag: 1,
        })
    }

    /// Every grow is repeated on a fresh buffer and the median kept: 5 times up to 1 GiB, 3 above.
    fn repeats(bytes: u64) -> usize {
        if bytes <= 1 << 30 {
            5
        } else {
            3
        }
    }

    /// The grow's median time over its timed repeats, then (with `peak`) its peak from one
    /// more, untimed repeat that asks the driver what is in use at the grow's fullest moment
    /// (asking inside a timed grow would add the query's own time to it). Calibration fits times
    /// only and skips it.
    pub(crate) fn measure(&mut self, gpu: &Gpu, point: &GrowthPoint, peak: bool) -> Result<Grown> {
        let mut times = Vec::new();
        let mut last = None;
        let mut kept = None;
        for _ in 0..Self::repeats(point.bytes) {
            let grown = self.once(gpu, point, false, &mut kept)?;
            times.extend(grown.grow_us);
            let refused = grown.grow_us.is_none() || grown.not_measured;
            last = Some(grown);
            if refused {
                break;
            }
        }
        let mut grown = last.expect("at least one repeat");
        if grown.not_measured {
            return Ok(grown);
        }
        if peak {
            grown.peak_bytes = self.once(gpu, point, true, &mut kept)?.peak_bytes;
        }
        if kept.take().is_some() {
            settle(point);
        }
        if grown.grow_us.is_some() {
            times.sort_by(f64::total_cmp);
            grown.grow_us = Some(times[times.len() / 2]);
        }
        Ok(grown)
    }

    /// One grow. A copy buffer's reserve is handed back emptied in `kept` for the next repeat
    /// (with the free memory seen before it was taken), and taken from there if one is waiting.
    fn once<'g>(
        &mut self,
        gpu: &'g Gpu,
        point: &GrowthPoint,
        measure_peak: bool,
        kept: &mut Option<(GrowingBuffer<'g>, u64)>,
    ) -> Result<Grown> {
        let (old, new) = experiments::grow_sizes(point.bytes);
        let (mut buffer, free_bytes) = match kept.take() {
            Some(emptied) => emptied,
            None => {
                let (free_bytes, _) = gpu.memory_info()?;
                let capacity = point.reserve.then(|| experiments::reserved_bytes(free_bytes));
                (GrowingBuffer::new(gpu, backed_by(point.strategy), capacity)?, free_bytes)
            }
        };
        let managed_limit = (free_bytes as f64 * MANAGED_LIMIT_FRACTION) as u64;
        buffer.measure_peaks(measure_peak);
        let first = buffer.grow(old, managed_limit)?;
        if first.not_measured.is_some() {
            return Ok(Grown {
                grow_us: None,
                peak_bytes: 0,
                free_bytes,
                not_measured: true,
            });
        }
        if !first.grown {
            return Err(HwError::Unsupported(format!(
                "could not build the {} B buffer a grow to {} B starts from: {}",
                old,
                new,
                first.refusal.unwrap_or_default()
            )));
        }
        self.tag = self.tag.wrapping_add(1);
        buffer.stamp(&self.stamp, self.tag)?;
        let start = Instant::now();
        let outcome = buffer.grow(new, managed_limit)?;
        let elapsed_us = start.elapsed().as_secs_f64() * 1e6;
        buffer.verify(&self.verify, old, self.tag)?;
        let damaged = buffer.mismatches()?;
        if damaged > 0 {
            return Err(HwError::DataMismatch(format!(
                "{} grow {old} -> {new} B: {damaged} words written before the grow read back wrong after it",
                point.strategy.name()
            )));
        }
        if point.strategy == GrowthStrategy::Vmm && outcome.grown {
            // Give the new half back and check the old half once more: shrinking unmaps only
            // whole chunks past the size kept.
            let kept = buffer.shrink(old)?;
            buffer.verify(&self.verify, old, self.tag)?;
            let damaged = buffer.mismatches()?;
            // The fewest whole chunks holding the old size: exactly it when it is whole chunks.
            if kept < old || kept > new || buffer.size() != kept || damaged > 0 {
                return Err(HwError::DataMismatch(format!(
                    "vmm shrink {new} -> {old} B kept {kept} B and {damaged} damaged words"
                )));
            }
        }
        if buffer.restart_in_reserve() {
            *kept = Some((buffer, free_bytes));
        } else {
            drop(buffer);
            settle(point);
        }
        Ok(Grown {
            grow_us: outcome.grown.then_some(elapsed_us),
            peak_bytes: outcome.peak_bytes,
            free_bytes,
            not_measured: outcome.not_measured.is_some(),
        })
    }

    /// The growth calibration: every strategy, with and without a reserve, at every size.
    pub(crate) fn calibrate(&mut self, gpu: &Gpu, progress: &dyn Fn()) -> Result<(Vec<GrowthSample>, u64)> {
        let (free_bytes, _) = gpu.memory_info()?;
        let mut samples = Vec::new();
        for strategy in GrowthStrategy::ALL {
            for reserve in [false, true] {
                for bytes in growth_calibration_bytes() {
                    let point = GrowthPoint {
                        strategy,
                        reserve,
                        bytes,
                    };
                    let grown = self.measure(gpu, &point, false)?;
                    let grow_us = grown.grow_us.ok_or_else(|| {
                        HwError::Unsupported(format!(
                            "calibration grow of {} to {bytes} B was refused",
                            strategy.name()
                        ))
                    })?;
                    samples.push(GrowthSample {
                        strategy,
                        reserve,
                        bytes,
                        grow_us,
                    });
                    progress();
                }
            }
        }
        Ok((samples, free_bytes))
    }
}

/// Waits after a grow's memory was freed: the driver clears freed memory in the background, and
/// a grow that started right after a large free would wait for it, so each grow starts from a
/// quiet device.
fn settle(point: &GrowthPoint) {
    let (_, new) = experiments::grow_sizes(point.bytes);
    std::thread::sleep(std::time::Duration::from_millis(if new >= 1 << 30 { 100 } else { 5 }));
}

/// The metrics of a measured grow.
pub(crate) fn grown_metrics(grown: &Grown) -> Metrics {
    if grown.not_measured {
        return Metrics::from([
            ("not_measured".to_string(), 1.0),
            ("free_bytes".to_string(), grown.free_bytes as f64),
        ]);
    }
    let mut metrics = growth_metrics(grown.grow_us, grown.peak_bytes);
    metrics.insert("free_bytes".into(), grown.free_bytes as f64);
    metrics
}

/// The CUDA core's buffer for a strategy.
fn backed_by(strategy: GrowthStrategy) -> BackedBy {
    match strategy {
        GrowthStrategy::Copy => BackedBy::Copy,
        GrowthStrategy::Managed => BackedBy::Managed,
        GrowthStrategy::Vmm => BackedBy::Vmm,
    }
}

pub(crate) type FamilyProbe = GrowthProbe;

impl Probe for GrowthProbe {
    type Point = GrowthPoint;

    fn load(gpu: &Gpu) -> Result<GrowthProbe> {
        GrowthProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &GrowthPoint, _seed: u64) -> Result<Metrics> {
        Ok(grown_metrics(&GrowthProbe::measure(self, gpu, point, true)?))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, progress: &dyn Fn()) -> Result<usize> {
        // Growth ticks progress per grow itself: its grows are the slowest cases.
        (calibration.growth, calibration.free_bytes) = GrowthProbe::load(gpu)?.calibrate(gpu, progress)?;
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
    fn a_vmm_buffer_grows_shrinks_and_grows_again_keeping_its_data() {
        let gpu = Gpu::open().expect("a GPU");
        let probe = GrowthProbe::load(&gpu).unwrap();
        let (free, _) = gpu.memory_info().unwrap();
        let limit = (free as f64 * MANAGED_LIMIT_FRACTION) as u64;
        let mut buffer = GrowingBuffer::new(&gpu, BackedBy::Vmm, None).unwrap();
        for step in [64u64 << 20, 256 << 20, 1 << 30] {
            assert!(buffer.grow(step, limit).unwrap().grown);
        }
        buffer.stamp(&probe.stamp, 41).unwrap();
        // Back to the first two chunks (64 + 192 MiB), then up again: the kept part is intact.
        assert_eq!(buffer.shrink(200 << 20).unwrap(), 256 << 20);
        assert!(buffer.grow(2 << 30, limit).unwrap().grown);
        buffer.verify(&probe.verify, 256 << 20, 41).unwrap();
        assert_eq!(buffer.mismatches().unwrap(), 0);
        assert_eq!(buffer.size(), 2 << 30);
        let mut copy = GrowingBuffer::new(&gpu, BackedBy::Copy, None).unwrap();
        assert!(copy.grow(64 << 20, limit).unwrap().grown);
        assert!(copy.shrink(1).is_err(), "only vmm shrinks in place");
    }
}
