//! Result records: what a backend produced for one experiment, as JSON and CSV.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::family::Family;
use crate::files::write_atomically;
use crate::params::{Metrics, Params};

/// Where the numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// Predicted by the model.
    Sim,
    /// Measured on a GPU.
    Hw,
}

impl BackendKind {
    /// "sim" or "hw": the file stem of the record.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Hw => "hw",
        }
    }
}

/// The device a record describes: the GPU that was measured or the profile's GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DeviceInfo {
    /// GPU name as the driver reports it.
    pub name: String,
    /// "major.minor".
    pub compute_capability: String,
    /// Device memory, bytes.
    pub memory_bytes: u64,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Copy engines (async engine count).
    pub copy_engines: u32,
    /// CUDA driver version, e.g. "13.0"; empty for a simulated device.
    pub driver_version: String,
    /// SM clock, MHz; 0 when unknown.
    pub clock_mhz: u32,
    /// Memory clock, MHz; 0 when unknown.
    pub memory_clock_mhz: u32,
    /// PCI bus id, e.g. "0000:18:00.0"; empty for a simulated device.
    pub pci_bus_id: String,
    /// Whether the device has a stream-ordered memory pool (cuMemAllocAsync); vramlab's
    /// transfer buffers never use it, they come from cuMemAlloc and cuMemAllocHost.
    pub stream_ordered_pool: bool,
}

/// One point's parameters and figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    /// The sweep point.
    pub params: Params,
    /// What was predicted or measured there.
    pub metrics: Metrics,
}

/// Everything one backend produced for one experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The experiment's name.
    pub experiment: String,
    /// Its suite.
    pub suite: String,
    /// Its family.
    pub family: Family,
    /// sim or hw.
    pub backend: BackendKind,
    /// The GPU (measured, or the profile's).
    pub device: DeviceInfo,
    /// The profile the prediction used; for hw, the profile in force (unused by the measurement).
    pub profile: String,
    /// The run's seed.
    pub seed: u64,
    /// For a prediction: the points its profile was fitted on, as partial parameter sets (a
    /// point that has all of one set's values is a calibration point, not a validation point).
    #[serde(default)]
    pub calibration_points: Vec<Params>,
    /// vramlab's version that wrote it (records written before the rename say `memlab_version`).
    #[serde(alias = "memlab_version")]
    pub vramlab_version: String,
    /// The commit of the code that made it (`unknown` where the binary did not say; a `-dirty`
    /// suffix, in records made before the binaries stamped it, marks uncommitted changes; empty in
    /// records written before records carried it).
    #[serde(default)]
    pub commit: String,
    /// For a prediction: the spread of repeated measurements of this family in its profile
    /// (a fraction), the band within which a measurement cannot tell the model wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty: Option<f64>,
    /// For an experiment of a pre-registered hold-out: the commit that registered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout_registered: Option<String>,
    /// One entry per sweep point, in sweep order.
    pub points: Vec<PointRecord>,
}

/// The commit of the code this process runs, as its binary stamped it.
static CODE_COMMIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Says which commit this process's code was built from: the binary's first act (the CLI's
/// `main`, the Python module's init), with the `VRAMLAB_COMMIT` its build script stamps. The
/// library does not stamp it itself, so that moving HEAD rebuilds only the binaries. The first
/// call wins; later ones change nothing.
pub fn set_code_commit(commit: &'static str) {
    let _ = CODE_COMMIT.set(commit);
}

/// The commit given to [`set_code_commit`], or `"unknown"` where it was never called (as in
/// the library's own tests). Every record written says it.
pub fn code_commit() -> &'static str {
    CODE_COMMIT.get().copied().unwrap_or("unknown")
}

impl Record {
    /// `DIR/<experiment>/<backend>.json`
    pub fn json_path(dir: &Path, experiment: &str, backend: BackendKind) -> PathBuf {
        dir.join(experiment).join(format!("{}.json", backend.name()))
    }

    /// Writes the record as pretty JSON and as CSV beside it, each atomically.
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        if let Some(why) = crate::files::unsafe_name(&self.experiment) {
            return Err(Error::Invalid(format!("record of experiment {why}: not written")));
        }
        let path = Record::json_path(dir, &self.experiment, self.backend);
        let mut json = serde_json::to_vec_pretty(self).expect("records always serialize");
        json.push(b'\n');
        write_atomically(&path, &json)?;
        write_atomically(&path.with_extension("csv"), &self.to_csv())?;
        Ok(path)
    }

    /// Reads a record written by [`Record::save`].
    pub fn load(path: &Path) -> Result<Record> {
        let bytes = crate::files::read_input(path)?;
        let record: Record = serde_json::from_slice(&bytes).map_err(|reason| Error::Json {
            path: path.to_path_buf(),
            reason,
        })?;
        // Reports name plots after the experiment: a record must not steer them out of the folder.
        if let Some(why) = crate::files::unsafe_name(&record.experiment) {
            return Err(Error::Invalid(format!("{}: experiment {why}", path.display())));
        }
        Ok(record)
    }

    /// Whether `params` is one of the points the prediction's profile was fitted on.
    pub fn is_calibration_point(&self, params: &Params) -> bool {
        self.calibration_points
            .iter()
            .any(|set| set.iter().all(|(k, v)| params.get(k) == Some(v)))
    }

    /// One row per point: the parameters, then the metrics, then backend and device.
    pub fn to_csv(&self) -> Vec<u8> {
        let param_names: Vec<&String> = self
            .points
            .first()
            .map(|p| p.params.keys().collect())
            .unwrap_or_default();
        let metric_names: Vec<&String> = self
            .points
            .first()
            .map(|p| p.metrics.keys().collect())
            .unwrap_or_default();
        let mut writer = csv::Writer::from_writer(Vec::new());
        let header: Vec<&str> = ["experiment", "backend", "device"]
            .into_iter()
            .chain(param_names.iter().map(|s| s.as_str()))
            .chain(metric_names.iter().map(|s| s.as_str()))
            .collect();
        writer.write_record(&header).expect("writing to memory");
        for point in &self.points {
            let mut row = vec![
                self.experiment.clone(),
                self.backend.name().to_string(),
                self.device.name.clone(),
            ];
            row.extend(
                param_names
                    .iter()
                    .map(|k| point.params.get(*k).map(|v| v.to_string()).unwrap_or_default()),
            );
            row.extend(
                metric_names
                    .iter()
                    .map(|k| point.metrics.get(*k).map(|v| v.to_string()).unwrap_or_default()),
            );
            writer.write_record(&row).expect("writing to memory");
        }
        writer.into_inner().expect("writing to memory")
    }
}
