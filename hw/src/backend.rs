use experiments::{
    coalescing_metrics, cycles_metrics, overlap_metrics, spill_metrics, transfer_metrics, Backend, BackendKind,
    DeviceInfo, Experiment, PointRecord, Record, Workload,
};

use crate::banks::BankProbe;
use crate::coalescing::ReadProbe;
use crate::constant::ConstantProbe;
use crate::cuda::Gpu;
use crate::error::{HwError, Result};
use crate::growth::{grown_metrics, GrowthProbe};
use crate::latency::ChaseProbe;
use crate::migration::MigrationProbe;
use crate::occupancy::OccupancyProbe;
use crate::overlap::{measure_overlap, Spin};
use crate::peer::PeerProbe;
use crate::spills::SpillProbe;
use crate::transfer::{measure_copy, CopyArena};

/// A CUDA GPU as a [`Backend`]: measures every point, one at a time, on device 0.
pub struct HwBackend {
    gpu: Gpu,
    device: DeviceInfo,
    copy_arena: Option<CopyArena>,
    spin: Option<Spin>,
    occupancy: Option<OccupancyProbe>,
    banks: Option<BankProbe>,
    reads: Option<ReadProbe>,
    chase: Option<ChaseProbe>,
    constant: Option<ConstantProbe>,
    growth: Option<GrowthProbe>,
    spills: Option<SpillProbe>,
    migration: Option<MigrationProbe>,
    peer: Option<PeerProbe>,
}

impl HwBackend {
    /// Opens device 0; a clear error, never a panic, on a machine without a GPU or driver.
    pub fn open() -> Result<HwBackend> {
        let gpu = Gpu::open()?;
        let device = gpu.info()?;
        Ok(HwBackend {
            gpu,
            device,
            copy_arena: None,
            spin: None,
            occupancy: None,
            banks: None,
            reads: None,
            chase: None,
            constant: None,
            growth: None,
            spills: None,
            migration: None,
            peer: None,
        })
    }

    fn measure(&mut self, workload: &Workload, seed: u64) -> Result<experiments::Metrics> {
        let gpu = &self.gpu;
        if !matches!(workload, Workload::Transfer(_)) {
            // The copies' arena holds device memory that other families (growth above all,
            // which measures what is free) must find free.
            self.copy_arena = None;
        }
        Ok(match workload {
            Workload::Transfer(point) => {
                let timing = measure_copy(gpu, &mut self.copy_arena, point, seed)?;
                let mut metrics = transfer_metrics(timing.median, point.bytes);
                metrics.insert("time_us_min".into(), timing.min);
                metrics.insert("time_us_max".into(), timing.max);
                metrics
            }
            Workload::Overlap(point) => {
                let spin = loaded(&mut self.spin, || Spin::load(gpu))?;
                let (serial, overlapped) = measure_overlap(gpu, spin, point, seed)?;
                overlap_metrics(overlapped, serial)
            }
            Workload::Banks(point) => {
                cycles_metrics(loaded(&mut self.banks, || BankProbe::load(gpu))?.measure(gpu, point)?)
            }
            Workload::Coalescing(point) => coalescing_metrics(
                loaded(&mut self.reads, || ReadProbe::load(gpu))?.measure(gpu, point)?,
                point,
            ),
            Workload::Peer(point) => loaded(&mut self.peer, || PeerProbe::load(gpu))?.metrics(gpu, point)?,
            Workload::Migration(point) => {
                let time_us = loaded(&mut self.migration, || MigrationProbe::load(gpu))?.measure(gpu, point)?;
                transfer_metrics(time_us, point.bytes)
            }
            Workload::Spills(point) => {
                let s = loaded(&mut self.spills, || Ok(SpillProbe::new()))?.measure(gpu, point)?;
                spill_metrics(s.ns_per_iteration, s.warps_per_sm, s.registers_used, s.local_bytes)
            }
            Workload::Growth(point) => {
                grown_metrics(&loaded(&mut self.growth, || GrowthProbe::load(gpu))?.measure(gpu, point, true)?)
            }
            Workload::Constant(point) => {
                cycles_metrics(loaded(&mut self.constant, || ConstantProbe::load(gpu))?.measure(gpu, point)?)
            }
            Workload::Latency(point) => {
                cycles_metrics(loaded(&mut self.chase, || ChaseProbe::load(gpu))?.measure(gpu, point, seed)?)
            }
            Workload::Occupancy(point) => {
                loaded(&mut self.occupancy, || OccupancyProbe::new(gpu))?.measure(gpu, point)?
            }
        })
    }
}

/// The probe in `slot`, loaded (compiling its kernels) the first time a point needs it.
fn loaded<T>(slot: &mut Option<T>, load: impl FnOnce() -> Result<T>) -> Result<&mut T> {
    if slot.is_none() {
        *slot = Some(load()?);
    }
    Ok(slot.as_mut().expect("filled above"))
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
            vramlab_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: experiments::CODE_COMMIT.to_string(),
            uncertainty: None,
            holdout_registered: experiment.holdout_registered.clone(),
            points,
        })
    }
}
