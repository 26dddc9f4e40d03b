use crate::record::{BackendKind, DeviceInfo, Record};
use crate::suite::Experiment;

/// Something that can produce a [`Record`] for an experiment: the model or a GPU.
pub trait Backend {
    /// The backend's own error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// sim or hw.
    fn kind(&self) -> BackendKind;

    /// The device the numbers describe.
    fn device(&self) -> DeviceInfo;

    /// Runs every point of `experiment`; calls `progress` once per finished point.
    fn run(&mut self, experiment: &Experiment, seed: u64, progress: &(dyn Fn() + Sync)) -> Result<Record, Self::Error>;
}
