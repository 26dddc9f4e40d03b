use experiments::{
    coalescing_metrics, overlap_metrics, transfer_metrics, Backend, BackendKind, DeviceInfo, Experiment, PointRecord,
    Record, Workload,
};

use crate::banks::{bank_metrics, BankProbe};
use crate::coalescing::ReadProbe;
use crate::constant::ConstantProbe;
use crate::cuda::Gpu;
use crate::error::{HwError, Result};
use crate::latency::ChaseProbe;
use crate::occupancy::OccupancyProbe;
use crate::overlap::{measure_overlap, Spin};
use crate::transfer::measure_copy;

/// A CUDA GPU as a [`Backend`]: measures every point, one at a time, on device 0.
pub struct HwBackend {
    gpu: Gpu,
    device: DeviceInfo,
    spin: Option<Spin>,
    occupancy: Option<OccupancyProbe>,
    banks: Option<BankProbe>,
    reads: Option<ReadProbe>,
    chase: Option<ChaseProbe>,
    constant: Option<ConstantProbe>,
}

impl HwBackend {
    /// Opens device 0; a clear error, never a panic, on a machine without a GPU or driver.
    pub fn open() -> Result<HwBackend> {
        let gpu = Gpu::open()?;
        let device = gpu.info()?;
        Ok(HwBackend {
            gpu,
            device,
            spin: None,
            occupancy: None,
            banks: None,
            reads: None,
            chase: None,
            constant: None,
        })
    }

    fn measure(&mut self, workload: &Workload, seed: u64) -> Result<experiments::Metrics> {
        Ok(match workload {
            Workload::Transfer(point) => {
                let timing = measure_copy(&self.gpu, point, seed)?;
                let mut metrics = transfer_metrics(timing.median, point.bytes);
                metrics.insert("time_us_min".into(), timing.min);
                metrics.insert("time_us_max".into(), timing.max);
                metrics
            }
            Workload::Overlap(point) => {
                if self.spin.is_none() {
                    self.spin = Some(Spin::load(&self.gpu)?);
                }
                let spin = self.spin.as_ref().expect("loaded above");
                let (serial, overlapped) = measure_overlap(&self.gpu, spin, point, seed)?;
                overlap_metrics(overlapped, serial)
            }
            Workload::Banks(point) => {
                if self.banks.is_none() {
                    self.banks = Some(BankProbe::load(&self.gpu)?);
                }
                bank_metrics(self.banks.as_ref().expect("loaded above").measure(&self.gpu, point)?)
            }
            Workload::Coalescing(point) => {
                if self.reads.is_none() {
                    self.reads = Some(ReadProbe::load(&self.gpu)?);
                }
                let time_us = self.reads.as_mut().expect("loaded above").measure(&self.gpu, point)?;
                coalescing_metrics(time_us, point)
            }
            Workload::Constant(point) => {
                if self.constant.is_none() {
                    self.constant = Some(ConstantProbe::load(&self.gpu)?);
                }
                let cycles = self
                    .constant
                    .as_ref()
                    .expect("loaded above")
                    .measure(&self.gpu, point)?;
                experiments::Metrics::from([("cycles".to_string(), cycles)])
            }
            Workload::Latency(point) => {
                if self.chase.is_none() {
                    self.chase = Some(ChaseProbe::load(&self.gpu)?);
                }
                let cycles = self
                    .chase
                    .as_ref()
                    .expect("loaded above")
                    .measure(&self.gpu, point, seed)?;
                experiments::Metrics::from([("cycles".to_string(), cycles)])
            }
            Workload::Occupancy(point) => {
                if self.occupancy.is_none() {
                    self.occupancy = Some(OccupancyProbe::new(&self.gpu)?);
                }
                self.occupancy
                    .as_mut()
                    .expect("created above")
                    .measure(&self.gpu, point)?
            }
        })
    }
}

impl Backend for HwBackend {
    type Error = HwError;

    fn kind(&self) -> BackendKind {
        BackendKind::Hw
    }

    fn device(&self) -> DeviceInfo {
        self.device.clone()
    }

    fn run(&mut self, experiment: &Experiment, seed: u64, progress: &(dyn Fn() + Sync)) -> Result<Record> {
        let mut points = Vec::with_capacity(experiment.points.len());
        for point in &experiment.points {
            let metrics = self.measure(&point.workload, seed)?;
            progress();
            points.push(PointRecord {
                params: point.params.clone(),
                metrics,
            });
        }
        Ok(Record {
            experiment: experiment.name.clone(),
            suite: experiment.suite.clone(),
            family: experiment.family,
            backend: BackendKind::Hw,
            device: self.device.clone(),
            profile: "measured".to_string(),
            seed,
            calibration_points: Vec::new(),
            memlab_version: env!("CARGO_PKG_VERSION").to_string(),
            points,
        })
    }
}
