//! Global-memory reads with a stride, offset and lane mask, timed with events.

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use experiments::{coalescing_calibration_cases, coalescing_metrics, Calibration, CoalescingPoint, CoalescingSample, Metrics, READ_KERNEL_BLOCKS_PER_SM, READ_KERNEL_THREADS};

use crate::cuda::{kernel_for_width, Arg, DeviceBuffer, Gpu, Kernel, LaunchConfig};
use crate::error::{HwError, Result};
use crate::probes::Probe;
use crate::timing::{median_us, Repeats};

const SOURCE: &str = include_str!("../../kernels/coalescing.cu");

/// The read kernels, one per width, and the array they read (kept between points).
pub(crate) struct ReadProbe {
    kernels: Vec<(u32, Kernel)>,
    config: LaunchConfig,
    array: Option<DeviceBuffer>,
    array_bytes: u64,
    sink: DeviceBuffer,
}

impl ReadProbe {
    pub(crate) fn load(gpu: &Gpu) -> Result<ReadProbe> {
        let module = gpu.compile("coalescing.cu", SOURCE)?;
        // Points may ask for shared memory only to limit occupancy: allow up to the opt-in limit.
        let max_shared = gpu.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let kernels = [(1, "read1"), (2, "read2"), (4, "read4"), (8, "read8"), (16, "read16")]
            .into_iter()
            .map(|(width, name)| Ok((width, module.kernel(name, max_shared)?)))
            .collect::<Result<_>>()?;
        // Eight blocks of 256 threads per SM: 64 warps, every warp slot of a Hopper SM.
        let sms = gpu.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let config = LaunchConfig {
            blocks: sms * READ_KERNEL_BLOCKS_PER_SM,
            threads: READ_KERNEL_THREADS,
            shared_bytes: 0,
        };
        Ok(ReadProbe {
            kernels,
            config,
            array: None,
            array_bytes: 0,
            sink: gpu.device_buffer(4)?,
        })
    }

    /// Median time of the read kernel over this pattern, microseconds.
    pub(crate) fn measure(&mut self, gpu: &Gpu, point: &CoalescingPoint) -> Result<f64> {
        if self.array_bytes < point.bytes {
            let bytes =
                usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} B array", point.bytes)))?;
            self.array = None;
            let array = gpu.device_buffer(bytes)?;
            // Never read zeros: a fixed non-zero byte everywhere.
            gpu.fill(&array, 0xA5)?;
            self.array = Some(array);
            self.array_bytes = point.bytes;
        }
        let array = self.array.as_ref().expect("allocated above");
        let kernel = kernel_for_width(&self.kernels, point.width, "coalescing.cu")?;
        let stream = gpu.stream()?;
        let (start, end) = (gpu.event()?, gpu.event()?);
        let args = [
            Arg::Device(array),
            Arg::U64(point.warps()),
            Arg::I32(point.stride as i32),
            Arg::I32(point.offset as i32),
            Arg::I32(point.active_lanes as i32),
            Arg::I32(point.passes() as i32),
            Arg::Device(&self.sink),
        ];
        let config = LaunchConfig {
            shared_bytes: point.dynamic_shared,
            ..self.config
        };
        let timing = median_us(gpu, &stream, Repeats { warmup: 2, samples: 9 }, &start, &end, |q| {
            q.launch(&stream, kernel, config, &args)
        })?;
        Ok(timing.median)
    }

    /// The most registers per thread any width of the read kernel uses (its occupancy).
    pub(crate) fn registers(&self) -> Result<u32> {
        let mut most = 0;
        for (_, kernel) in &self.kernels {
            most = most.max(kernel.attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32);
        }
        Ok(most)
    }

    /// The calibration reads, measured.
    pub(crate) fn calibrate(&mut self, gpu: &Gpu, cases: &[(u32, u32, u64)]) -> Result<Vec<CoalescingSample>> {
        cases
            .iter()
            .map(|&(width, stride, bytes)| {
                let point = CoalescingPoint::calibration(width, stride, bytes);
                Ok(CoalescingSample {
                    width,
                    stride,
                    bytes,
                    time_us: self.measure(gpu, &point)?,
                })
            })
            .collect()
    }
}

pub(crate) type FamilyProbe = ReadProbe;

impl Probe for ReadProbe {
    type Point = CoalescingPoint;

    fn load(gpu: &Gpu) -> Result<ReadProbe> {
        ReadProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &CoalescingPoint, _seed: u64) -> Result<Metrics> {
        Ok(coalescing_metrics(ReadProbe::measure(self, gpu, point)?, point))
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        let mut probe = ReadProbe::load(gpu)?;
        calibration.read_kernel_registers = probe.registers()?;
        calibration.coalescing = probe.calibrate(gpu, &coalescing_calibration_cases())?;
        Ok(calibration.coalescing.len())
    }
}
