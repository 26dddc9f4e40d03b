//! Event timing with warm-up and medians.

use crate::cuda::{Event, Gpu, Queue, Stream};
use crate::error::Result;

/// How many timed samples to take, after how many untimed ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Repeats {
    pub(crate) warmup: usize,
    pub(crate) samples: usize,
}

/// Times `issue` between two events on `stream`, `repeats.samples` times after warm-up,
/// and returns the median in microseconds. `issue` may queue work on other streams too,
/// as long as it joins them back into `stream` before it returns.
pub(crate) fn median_us<'buf>(
    gpu: &Gpu,
    stream: &Stream,
    repeats: Repeats,
    start: &'buf Event,
    end: &'buf Event,
    issue: impl Fn(&Queue<'buf>) -> Result<()>,
) -> Result<f64> {
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
    Ok(median(&mut times))
}

/// The median of a non-empty list (mean of the two middle values for even lengths).
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A deterministic non-zero byte pattern (xorshift64*), so no copy is ever timed on zeros.
pub(crate) fn fill_pattern(bytes: &mut [u8], seed: u64) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
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
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn pattern_is_seeded_and_mostly_non_zero() {
        let (mut a, mut b, mut c) = (vec![0u8; 4099], vec![0u8; 4099], vec![0u8; 4099]);
        fill_pattern(&mut a, 1);
        fill_pattern(&mut b, 1);
        fill_pattern(&mut c, 2);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().filter(|&&x| x == 0).count() < 64);
    }
}
