//! The latency ladder: clock64 cycles per load of a one-thread random pointer chase.

use experiments::{cycles_metrics, latency_calibration_bytes, Calibration, LatencyPoint, LatencySample, Metrics};

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig};
use crate::error::{HwError, Result};
use crate::probes::Probe;
use crate::timing::median_clock64;

const SOURCE: &str = include_str!("../../kernels/latency.cu");
/// Timed loads per launch.
const STEPS: u64 = 1 << 16;
/// At most this many loads to warm the caches (a full lap for any footprint the L2 can hold).
const MAX_WARM_STEPS: u64 = 1 << 20;
/// Launches per point; the first is a warm-up.
const LAUNCHES: usize = 4;

pub(crate) struct ChaseProbe {
    kernel: Kernel,
}

impl ChaseProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<ChaseProbe> {
        let kernel = gpu.compile("latency.cu", SOURCE)?.kernel("chase", 0)?;
        kernel.prefer_l1()?;
        Ok(ChaseProbe { kernel })
    }

    /// Median cycles per load through a random cycle over `point.bytes`.
    pub(crate) fn measure(&self, gpu: &Gpu, point: &LatencyPoint, seed: u64) -> Result<f64> {
        let nodes = point.nodes();
        let too_large = || HwError::Unsupported(format!("a {} B chase does not fit this machine", point.bytes));
        let bytes = usize::try_from(nodes * LatencyPoint::NODE_BYTES).map_err(|_| too_large())?;
        if nodes > u64::from(u32::MAX / 32) {
            return Err(too_large());
        }
        let mut host = vec![0u8; bytes];
        for (node, successor) in random_cycle(nodes, seed ^ point.bytes).into_iter().enumerate() {
            let at = node * LatencyPoint::NODE_BYTES as usize;
            host[at..at + 4].copy_from_slice(&successor.to_le_bytes());
        }
        let next = gpu.device_buffer(bytes)?;
        gpu.upload(&next, &host)?;
        drop(host);
        let cycles = gpu.device_buffer(8)?;
        let sink = gpu.device_buffer(4)?;
        let config = LaunchConfig {
            blocks: 1,
            threads: 1,
            shared_bytes: 0,
        };
        let warm = nodes.min(MAX_WARM_STEPS);
        let args = [
            Arg::Device(&next),
            Arg::U64(warm),
            Arg::U64(STEPS),
            Arg::Device(&cycles),
            Arg::Device(&sink),
        ];
        median_clock64(gpu, &self.kernel, config, &args, &cycles, STEPS, LAUNCHES)
    }

    pub(crate) fn calibrate(&self, gpu: &Gpu, footprints: &[u64], seed: u64) -> Result<Vec<LatencySample>> {
        footprints
            .iter()
            .map(|&bytes| {
                Ok(LatencySample {
                    bytes,
                    cycles: self.measure(gpu, &LatencyPoint { bytes }, seed)?,
                })
            })
            .collect()
    }
}

/// A uniformly random single cycle through `nodes` nodes (Sattolo's algorithm): entry i is
/// the node that follows node i.
fn random_cycle(nodes: u64, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..nodes as u32).collect();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = (state % i as u64) as usize;
        order.swap(i, j);
    }
    let mut next = vec![0u32; order.len()];
    for k in 0..order.len() {
        next[order[k] as usize] = order[(k + 1) % order.len()];
    }
    next
}

pub(crate) type FamilyProbe = ChaseProbe;

impl Probe for ChaseProbe {
    type Point = LatencyPoint;

    fn load(gpu: &Gpu) -> Result<ChaseProbe> {
        ChaseProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &LatencyPoint, seed: u64) -> Result<Metrics> {
        Ok(cycles_metrics(ChaseProbe::measure(self, gpu, point, seed)?))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.latency = ChaseProbe::load(gpu)?.calibrate(gpu, &latency_calibration_bytes(), seed)?;
        Ok(calibration.latency.len())
    }
}

#[cfg(test)]
mod tests {
    use super::random_cycle;

    #[test]
    fn the_cycle_visits_every_node_once() {
        for nodes in [2u64, 3, 100, 4096] {
            let next = random_cycle(nodes, 7);
            let (mut node, mut seen) = (0u32, vec![false; nodes as usize]);
            for _ in 0..nodes {
                assert!(!seen[node as usize], "node {node} visited twice in {nodes}");
                seen[node as usize] = true;
                node = next[node as usize];
            }
            assert_eq!(node, 0, "back at the start after {nodes} steps");
        }
    }
}
