//! One GPU reading another's memory: the second GPU runs the dense 16-byte read kernel of
//! kernels/coalescing.cu over a buffer of the first, mapped for it by VMM (one physical
//! allocation, access set for both devices) or by peer access (cuMemAlloc and
//! cuCtxEnablePeerAccess). On a machine with one GPU every point reports itself skipped.

use cudarc::driver::sys::CUdevice_attribute;
use experiments::{peer_calibration_bytes, throughput_metrics, Calibration, Metrics, PeerPoint, PeerSample};

use crate::cuda::{Arg, Gpu, Kernel, LaunchConfig, PeerBuffer};
use crate::error::{HwError, Result};
use crate::probes::Probe;
use crate::timing::{median_us, Repeats};

pub(crate) struct PeerProbe {
    /// The second GPU and its read kernel; `None` on a machine with one GPU.
    reader: Option<(Gpu, Kernel, LaunchConfig)>,
}

impl PeerProbe {
    pub(crate) fn load(first: &Gpu) -> Result<PeerProbe> {
        if Gpu::device_count()? < 2 {
            return Ok(PeerProbe { reader: None });
        }
        let reader = Gpu::open_device(1)?;
        let kernel = reader
            .compile("coalescing.cu", include_str!("../../kernels/coalescing.cu"))?
            .kernel("read16", 0)?;
        let sms = reader.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let config = LaunchConfig {
            blocks: sms * experiments::READ_KERNEL_BLOCKS_PER_SM,
            threads: experiments::READ_KERNEL_THREADS,
            shared_bytes: 0,
        };
        first.make_current()?;
        Ok(PeerProbe {
            reader: Some((reader, kernel, config)),
        })
    }

    /// Median microseconds of the second GPU reading `point.bytes` of the first's memory, or
    /// `None` with one GPU.
    pub(crate) fn time_us(&self, first: &Gpu, point: &PeerPoint) -> Result<Option<f64>> {
        let Some((reader, kernel, config)) = &self.reader else {
            return Ok(None);
        };
        let bytes = usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} B", point.bytes)))?;
        let buffer = PeerBuffer::new(first, reader, bytes, point.vmm)?;
        buffer.fill(0xA5)?;
        reader.make_current()?;
        let timed = (|| {
            let sink = reader.device_buffer(4)?;
            let stream = reader.stream()?;
            let (start, end) = (reader.event()?, reader.event()?);
            let warps = point.bytes / (32 * 16);
            let args = [
                Arg::Span(buffer.span()),
                Arg::U64(warps),
                Arg::I32(1),
                Arg::I32(0),
                Arg::I32(32),
                Arg::I32(1),
                Arg::Device(&sink),
            ];
            median_us(reader, &stream, Repeats { warmup: 2, samples: 7 }, &start, &end, |q| {
                q.launch(&stream, kernel, *config, &args)
            })
        })();
        drop(buffer);
        first.make_current()?;
        Ok(Some(timed?.median))
    }

    pub(crate) fn metrics(&self, first: &Gpu, point: &PeerPoint) -> Result<Metrics> {
        Ok(match self.time_us(first, point)? {
            Some(us) => throughput_metrics(us, point.bytes),
            None => Metrics::from([("skipped_one_gpu".to_string(), 1.0)]),
        })
    }

    pub(crate) fn calibrate(&self, first: &Gpu) -> Result<Vec<PeerSample>> {
        if self.reader.is_none() {
            return Err(HwError::Unsupported(
                "calibrate --part peer needs a machine with two GPUs".into(),
            ));
        }
        let mut samples = Vec::new();
        for vmm in [true, false] {
            for bytes in peer_calibration_bytes() {
                let time_us = self.time_us(first, &PeerPoint { bytes, vmm })?.expect("two GPUs");
                samples.push(PeerSample { bytes, vmm, time_us });
            }
        }
        Ok(samples)
    }
}

pub(crate) type FamilyProbe = PeerProbe;

impl Probe for PeerProbe {
    type Point = PeerPoint;

    fn load(gpu: &Gpu) -> Result<PeerProbe> {
        PeerProbe::load(gpu)
    }

    fn measure(&mut self, gpu: &Gpu, point: &PeerPoint, _seed: u64) -> Result<Metrics> {
        self.metrics(gpu, point)
    }

    const CALIBRATES: bool = true;

    fn calibrate(gpu: &Gpu, _seed: u64, calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        calibration.peer = PeerProbe::load(gpu)?.calibrate(gpu)?;
        Ok(calibration.peer.len())
    }
}
