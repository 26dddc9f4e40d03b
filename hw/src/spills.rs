//! Register spills, measured: kernels/spills.cu compiled for each (live values, register cap),
//! what the compiler used (registers, local bytes) and clock64 cycles per loop iteration.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use cudarc::driver::sys::CUfunction_attribute;

use experiments::{SpillPoint, SpillSample};

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig};
use crate::error::Result;
use crate::timing::median_clock64;

const SOURCE: &str = include_str!("../../kernels/spills.cu");
/// Loop iterations per launch.
const ITERATIONS: i32 = 1000;
/// Launches per point; the first is a warm-up.
const LAUNCHES: usize = 8;

pub(crate) struct SpillProbe {
    kernels: HashMap<(u32, u32), Kernel>,
}

/// One measured case.
pub(crate) struct Spilled {
    pub(crate) cycles: f64,
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
        let input = gpu.device_buffer(1024 * 4)?;
        gpu.fill(&input, 0x3c)?;
        let output = gpu.device_buffer(32 * 4)?;
        let cycles = gpu.device_buffer(8)?;
        let config = LaunchConfig {
            blocks: 1,
            threads: 32,
            shared_bytes: 0,
        };
        let args = [
            Arg::Device(&input),
            Arg::Device(&output),
            Arg::I32(ITERATIONS),
            Arg::Device(&cycles),
        ];
        Ok(Spilled {
            cycles: median_clock64(gpu, kernel, config, &args, &cycles, ITERATIONS as u64, LAUNCHES)?,
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
                    cycles: s.cycles,
                })
            })
            .collect()
    }
}
