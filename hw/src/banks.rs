//! Shared-memory bank conflicts: cycles per dependent load, from clock64 on the GPU.

use experiments::{bank_calibration_cases, cycles_metrics, BankPoint, BankSample, Calibration, Metrics};

use crate::cuda::{kernel_for_width, Arg, Gpu, Kernel, LaunchConfig};
use crate::error::Result;
use crate::probes::Probe;
use crate::timing::median_clock64;

const SOURCE: &str = include_str!("../../kernels/banks.cu");
/// Dependent loads per timed round; the kernel times the second of two rounds.
const ITERATIONS: i32 = 4096;
/// Launches per point; the first is a warm-up.
const LAUNCHES: usize = 8;

/// The compiled chase kernels, one per load width.
pub(crate) struct BankProbe {
    kernels: Vec<(u32, Kernel)>,
}

impl BankProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<BankProbe> {
        let module = gpu.compile("banks.cu", SOURCE)?;
        Ok(BankProbe {
            kernels: vec![
                (4, module.kernel("chase4", 48 << 10)?),
                (8, module.kernel("chase8", 48 << 10)?),
                (16, module.kernel("chase16", 48 << 10)?),
            ],
        })
    }

    /// Median cycles per dependent load of one warp with this pattern.
    pub(crate) fn measure(&self, gpu: &Gpu, point: &BankPoint) -> Result<f64> {
        let kernel = kernel_for_width(&self.kernels, point.width, "banks.cu")?;
        let shared_bytes = 32 * point.stride.max(1) * point.width;
        let cycles = gpu.device_buffer(8)?;
        let sink = gpu.device_buffer(32 * 4)?;
        let config = LaunchConfig {
            blocks: 1,
            threads: 32,
            shared_bytes,
        };
        let args = [
            Arg::Device(&cycles),
            Arg::Device(&sink),
            Arg::I32(point.stride as i32),
            Arg::I32(ITERATIONS),
        ];
        median_clock64(gpu, kernel, config, &args, &cycles, ITERATIONS as u64, LAUNCHES)
    }

    /// The calibration patterns, measured.
    pub(crate) fn calibrate(&self, gpu: &Gpu, cases: &[(u32, u32)]) -> Result<Vec<BankSample>> {
        cases
            .iter()
            .map(|&(width, stride)| {
                Ok(BankSample {
                    width,
                    stride,
                    cycles: self.measure(gpu, &BankPoint { width, stride })?,
                })
            })
            .collect()
    }
}

pub(crate) type FamilyProbe = BankProbe;

impl Probe for BankProbe {
    type Point = BankPoint;

    fn load(gpu: &Gpu) -> Result<BankProbe> {
        BankProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &BankPoint, _seed: u64) -> Result<Metrics> {
        Ok(cycles_metrics(BankProbe::measure(self, gpu, point)?))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.banks = BankProbe::load(gpu)?.calibrate(gpu, &bank_calibration_cases())?;
        Ok(calibration.banks.len())
    }
}
