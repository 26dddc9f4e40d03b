//! Register spills, measured: kernels/spills.cu compiled for each (live values, register cap),
//! what the compiler used (registers, local bytes), and the kernel time per loop iteration with
//! every SM holding as many blocks as fit.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use experiments::{spill_calibration_cases, spill_metrics, Calibration, Metrics, SPILL_KERNEL_THREADS, SpillPoint, SpillSample};

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig};
use crate::error::Result;
use crate::probes::Probe;
use crate::timing::{median_us, Repeats};

const SOURCE: &str = include_str!("../../kernels/spills.cu");
/// Loop iterations per launch.
const ITERATIONS: i32 = 1000;

pub(crate) struct SpillProbe {
    kernels: HashMap<(u32, u32), Kernel>,
}

/// One measured case.
pub(crate) struct Spilled {
    /// Kernel time per loop iteration with every SM holding as many blocks as fit, ns.
    pub(crate) ns_per_iteration: f64,
    /// Warps resident per SM in that launch.
    pub(crate) warps_per_sm: u32,
    pub(crate) registers_used: u32,
    pub(crate) local_bytes: u32,
}

impl SpillProbe {
    pub(crate) fn new() -> SpillProbe {
        SpillProbe {
            kernels: HashMap::new(),
        }
    }

    pub(crate) fn measure(&mut self, gpu: &Gpu, point: &SpillPoint) -> Result<Spilled> {
        let kernel = match self.kernels.entry((point.live, point.registers)) {
            Entry::Occupied(compiled) => compiled.into_mut(),
            Entry::Vacant(slot) => {
                let options = vec![
                    format!("-DLIVE={}", point.live),
                    format!("-DREGISTER_CAP={}", point.registers),
                ];
                slot.insert(gpu.compile_with("spills.cu", SOURCE, &options)?.kernel("spill", 0)?)
            }
        };
        let blocks_per_sm = kernel.max_active_blocks(SPILL_KERNEL_THREADS, 0)?;
        let sms = gpu.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let full = LaunchConfig {
            blocks: blocks_per_sm * sms,
            threads: SPILL_KERNEL_THREADS,
            shared_bytes: 0,
        };
        let input = gpu.device_buffer(1024 * 4)?;
        gpu.fill(&input, 0x3c)?;
        let output = gpu.device_buffer((full.blocks * full.threads) as usize * 4)?;
        let cycles = gpu.device_buffer(8)?;
        let args = [
            Arg::Device(&input),
            Arg::Device(&output),
            Arg::I32(ITERATIONS),
            Arg::Device(&cycles),
        ];
        let stream = gpu.stream()?;
        let (start, end) = (gpu.event()?, gpu.event()?);
        let timing = median_us(gpu, &stream, Repeats { warmup: 2, samples: 7 }, &start, &end, |q| {
            q.launch(&stream, kernel, full, &args)
        })?;
        Ok(Spilled {
            ns_per_iteration: timing.median * 1e3 / f64::from(ITERATIONS),
            warps_per_sm: blocks_per_sm * SPILL_KERNEL_THREADS / 32,
            registers_used: kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32,
            local_bytes: kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as u32,
        })
    }

    pub(crate) fn calibrate(&mut self, gpu: &Gpu, cases: &[(u32, u32)]) -> Result<Vec<SpillSample>> {
        cases
            .iter()
            .map(|&(live, registers)| {
                let s = self.measure(gpu, &SpillPoint { live, registers })?;
                Ok(SpillSample {
                    live,
                    registers,
                    registers_used: s.registers_used,
                    local_bytes: s.local_bytes,
                    warps_per_sm: s.warps_per_sm,
                    ns_per_iteration: s.ns_per_iteration,
                })
            })
            .collect()
    }
}

pub(crate) type FamilyProbe = SpillProbe;

impl Probe for SpillProbe {
    type Point = SpillPoint;

    fn load(_gpu: &Gpu) -> Result<SpillProbe> {
        Ok(SpillProbe::new())
    }

    fn measure(&mut self, gpu: &Gpu, point: &SpillPoint, _seed: u64) -> Result<Metrics> {
        let s = SpillProbe::measure(self, gpu, point)?;
        Ok(spill_metrics(s.ns_per_iteration, s.warps_per_sm, s.registers_used, s.local_bytes))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.spills = SpillProbe::new().calibrate(gpu, &spill_calibration_cases())?;
        Ok(calibration.spills.len())
    }
}
