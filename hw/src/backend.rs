use experiments::{Backend, BackendKind, DeviceInfo, Experiment, PointRecord, Record};

use crate::cuda::Gpu;
use crate::error::{HwError, Result};
use crate::probes::Probes;

/// A CUDA GPU as a [`Backend`]: measures every point, one at a time, on device 0.
pub struct HwBackend {
    gpu: Gpu,
    device: DeviceInfo,
    probes: Probes,
}

impl HwBackend {
    /// Opens device 0; a clear error, never a panic, on a machine without a GPU or driver.
    pub fn open() -> Result<HwBackend> {
        let gpu = Gpu::open()?;
        let device = gpu.info()?;
        Ok(HwBackend {
            gpu,
            device,
            probes: Probes::default(),
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
            let metrics = self.probes.measure(&self.gpu, &point.workload, seed)?;
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
            commit: experiments::code_commit().to_string(),
            uncertainty: None,
            holdout_registered: experiment.holdout_registered.clone(),
            points,
        })
    }
}
