use rayon::prelude::*;

use experiments::{Backend, BackendKind, DeviceInfo, Experiment, PointRecord, Profile, Record, Workload};

use crate::models;

/// The model as a [`Backend`]: predicts every point from a device profile, in parallel.
#[derive(Debug, Clone)]
pub struct SimBackend {
    profile: Profile,
}

/// The model never fails on a point that parsed; this type exists for the trait.
#[derive(Debug, thiserror::Error)]
#[error("simulation failed: {0}")]
pub struct SimError(String);

impl SimError {
    pub(crate) fn new(message: String) -> SimError {
        SimError(message)
    }
}

impl SimBackend {
    /// The profile it predicts from.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// A model of the GPU that `profile` describes.
    pub fn new(profile: Profile) -> SimBackend {
        SimBackend { profile }
    }

    /// Predicts one point.
    pub fn predict(&self, workload: &Workload) -> Result<experiments::Metrics, SimError> {
        models::predict(&self.profile, workload)
    }
}

impl Backend for SimBackend {
    type Error = SimError;

    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn device(&self) -> DeviceInfo {
        let d = &self.profile.device;
        DeviceInfo {
            name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            memory_bytes: d.memory_bytes,
            multiprocessors: d.multiprocessors,
            copy_engines: d.copy_engines,
            ..DeviceInfo::default()
        }
    }

    fn run(&mut self, experiment: &Experiment, seed: u64, progress: &(dyn Fn() + Sync)) -> Result<Record, SimError> {
        let points = experiment
            .points
            .par_iter()
            .map(|point| {
                let metrics = self.predict(&point.workload)?;
                progress();
                Ok(PointRecord {
                    params: point.params.clone(),
                    metrics,
                })
            })
            .collect::<Result<Vec<_>, SimError>>()?;
        Ok(Record {
            experiment: experiment.name.clone(),
            suite: experiment.suite.clone(),
            family: experiment.family,
            backend: BackendKind::Sim,
            device: self.device(),
            profile: self.profile.name.clone(),
            seed,
            calibration_points: models::calibration_points(&self.profile, experiment.family),
            vramlab_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: experiments::code_commit().to_string(),
            uncertainty: self.profile.spread_of(experiment.family),
            holdout_registered: experiment.holdout_registered.clone(),
            points,
        })
    }
}
