//! Event timing with warm-up and medians.

use experiments::median;

use crate::cuda::{Arg, DeviceBuffer, Event, Gpu, Kernel, LaunchConfig, Queue, Stream};
use crate::error::Result;

/// How many timed samples to take, after how many untimed ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Repeats {
    pub(crate) warmup: usize,
    pub(crate) samples: usize,
}

/// The spread of a point's timed samples, microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Timing {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Timing {
    /// Every figure divided by `n` (a batch of `n` operations per sample).
    pub(crate) fn per(self, n: usize) -> Timing {
        let n = n as f64;
        Timing {
            median: self.median / n,
            min: self.min / n,
            max: self.max / n,
        }
    }
}

/// Times `issue` between two events on `stream`, `repeats.samples` times after warm-up,
/// and returns the samples' median, minimum and maximum in microseconds. `issue` may queue work on other streams too,
/// as long as it joins them back into `stream` before it returns.
pub(crate) fn median_us<'buf>(
    gpu: &Gpu,
    stream: &Stream,
    repeats: Repeats,
    start: &'buf Event,
    end: &'buf Event,
    issue: impl Fn(&Queue<'buf>) -> Result<()>,
) -> Result<Timing> {
    let mut times = Vec::with_capacity(repeats.samples);
    for round in 0..repeats.warmup + repeats.samples {
        gpu.enqueue(|q| {
            q.record(start, stream)?;
            issue(q)?;
            q.record(end, stream)
        })?;
        if round >= repeats.warmup {
            times.push(start.elapsed_ms(end)? * 1e3);
        }
    }
    let median = median(&mut times);
    Ok(Timing {
        median,
        min: times[0],
        max: times[times.len() - 1],
    })
}

/// Launches a kernel that times itself with clock64 and writes the cycle count to `cycles`,
/// `launches` times (the first a warm-up); returns the median cycles divided by `per`.
pub(crate) fn median_clock64(
    gpu: &Gpu,
    kernel: &Kernel,
    config: LaunchConfig,
    args: &[Arg<'_>],
    cycles: &DeviceBuffer,
    per: u64,
    launches: usize,
) -> Result<f64> {
    let stream = gpu.stream()?;
    let mut samples = Vec::with_capacity(launches);
    for launch in 0..launches {
        gpu.enqueue(|q| q.launch(&stream, kernel, config, args))?;
        let mut raw = [0u8; 8];
        gpu.download_range(&mut raw, cycles, 0)?;
        if launch > 0 {
            samples.push(u64::from_le_bytes(raw) as f64 / per as f64);
        }
    }
    Ok(median(&mut samples))
}

/// A deterministic non-zero byte pattern (xorshift64*), so no copy is ever timed on zeros.
/// Different `(seed, stream)` pairs give different patterns.
pub(crate) fn fill_pattern(bytes: &mut [u8], seed: u64, stream: u64) {
    let mut state = (seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in bytes.chunks_mut(8) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_seeded_and_mostly_non_zero() {
        let (mut a, mut b, mut c) = (vec![0u8; 4099], vec![0u8; 4099], vec![0u8; 4099]);
        fill_pattern(&mut a, 1, 0);
        fill_pattern(&mut b, 1, 0);
        fill_pattern(&mut c, 1, 1);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().filter(|&&x| x == 0).count() < 64);
    }
}
