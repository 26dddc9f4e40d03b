//! CUDA's own occupancy answer for the kernel shapes of the occupancy family.

use std::collections::HashMap;

use cudarc::driver::sys::CUfunction_attribute;
use experiments::{occupancy_metrics, Metrics, OccupancyPoint, SmAttributes};

use crate::calibrate::sm_attributes;
use crate::cuda::{Gpu, Kernel};
use crate::error::{HwError, Result};
use crate::probes::Probe;

const SOURCE: &str = include_str!("../../kernels/occupancy.cu");

/// Compiled variants of kernels/occupancy.cu, one per (register cap, static shared bytes).
pub(crate) struct OccupancyProbe {
    sm: SmAttributes,
    kernels: HashMap<(u32, u32), Kernel>,
}

impl OccupancyProbe {
    pub(crate) fn new(gpu: &Gpu) -> Result<OccupancyProbe> {
        Ok(OccupancyProbe {
            sm: sm_attributes(gpu)?,
            kernels: HashMap::new(),
        })
    }

    /// Asks the driver how many blocks of this shape fit on an SM, and records what the compiler
    /// actually gave the kernel (registers, static shared and spilled local bytes).
    pub(crate) fn measure(&mut self, gpu: &Gpu, point: &OccupancyPoint) -> Result<Metrics> {
        let key = (point.registers, point.static_shared);
        if !self.kernels.contains_key(&key) {
            let options = vec![
                format!("-DREGISTER_CAP={}", point.registers),
                format!("-DSTATIC_SHARED_BYTES={}", point.static_shared),
            ];
            let module = gpu.compile_with("occupancy.cu", SOURCE, &options)?;
            // Opt in to the largest dynamic shared memory a block can have next to its static bytes.
            let max_dynamic = self.sm.shared_bytes_per_block_optin.saturating_sub(point.static_shared) as i32;
            self.kernels.insert(key, module.kernel("pressure", max_dynamic)?);
        }
        let kernel = &self.kernels[&key];
        let registers_used = kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
        let static_used = kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        let local_bytes = kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?;
        if static_used as u32 != point.static_shared {
            return Err(HwError::Unsupported(format!(
                "occupancy.cu compiled with {} static shared bytes where {} were asked",
                static_used, point.static_shared
            )));
        }
        let blocks = kernel.max_active_blocks(point.threads, point.dynamic_shared)?;
        let mut metrics = occupancy_metrics(
            blocks,
            point.threads,
            self.sm.warp_size,
            self.sm.max_threads_per_sm / self.sm.warp_size,
        );
        metrics.insert("registers_used".into(), f64::from(registers_used));
        metrics.insert("local_bytes_per_thread".into(), f64::from(local_bytes));
        Ok(metrics)
    }
}

pub(crate) type FamilyProbe = OccupancyProbe;

impl Probe for OccupancyProbe {
    type Point = OccupancyPoint;

    fn load(gpu: &Gpu) -> Result<OccupancyProbe> {
        OccupancyProbe::new(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &OccupancyPoint, _seed: u64) -> Result<Metrics> {
        OccupancyProbe::measure(self, gpu, point)
    }
}
