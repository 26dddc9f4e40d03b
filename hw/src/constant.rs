//! Constant memory: clock64 cycles per dependent access for 1..32 distinct words, warm or cold.

use experiments::{constant_calibration_cases, cycles_metrics, Calibration, ConstantPoint, ConstantSample, Metrics};

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig};
use crate::error::Result;
use crate::probes::Probe;
use crate::timing::median_clock64;

const SOURCE: &str = include_str!("../../kernels/constant.cu");
/// Dependent accesses per timed round; the kernel times the second of two rounds.
const ITERATIONS: i32 = 2048;
/// Launches per point; the first is a warm-up.
const LAUNCHES: usize = 8;

pub(crate) struct ConstantProbe {
    kernel: Kernel,
}

impl ConstantProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<ConstantProbe> {
        Ok(ConstantProbe {
            kernel: gpu.compile("constant.cu", SOURCE)?.kernel("constant_chase", 0)?,
        })
    }

    pub(crate) fn measure(&self, gpu: &Gpu, point: &ConstantPoint) -> Result<f64> {
        let cycles = gpu.device_buffer(8)?;
        let sink = gpu.device_buffer(32 * 4)?;
        let config = LaunchConfig {
            blocks: 1,
            threads: 32,
            shared_bytes: 0,
        };
        let args = [
            Arg::Device(&cycles),
            Arg::Device(&sink),
            Arg::I32(point.distinct as i32),
            Arg::I32(i32::from(point.cold)),
            Arg::I32(ITERATIONS),
        ];
        median_clock64(gpu, &self.kernel, config, &args, &cycles, ITERATIONS as u64, LAUNCHES)
    }

    pub(crate) fn calibrate(&self, gpu: &Gpu, cases: &[(u32, bool)]) -> Result<Vec<ConstantSample>> {
        cases
            .iter()
            .map(|&(distinct, cold)| {
                Ok(ConstantSample {
                    distinct,
                    cold,
                    cycles: self.measure(gpu, &ConstantPoint { distinct, cold })?,
                })
            })
            .collect()
    }
}

pub(crate) type FamilyProbe = ConstantProbe;

impl Probe for ConstantProbe {
    type Point = ConstantPoint;

    fn load(gpu: &Gpu) -> Result<ConstantProbe> {
        ConstantProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &ConstantPoint, _seed: u64) -> Result<Metrics> {
        Ok(cycles_metrics(ConstantProbe::measure(self, gpu, point)?))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.constant = ConstantProbe::load(gpu)?.calibrate(gpu, &constant_calibration_cases())?;
        Ok(calibration.constant.len())
    }
}
