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
    #[serde(deserialize_with = "bounded_map")]
    pub params: Params,
    /// What was predicted or measured there.
    #[serde(deserialize_with = "bounded_map")]
    pub metrics: Metrics,
}

/// The most parameters and metrics (all points together) a record read back may hold, unless
/// `VRAMLAB_MAX_RECORD_VALUES` says otherwise; a report's folder holds no more in all. The
/// committed records hold at most about 10,000; 100,000 points of 64 figures each (a 110 MB
/// file) took `vramlab report` to 730 MB, each value costing several times its text.
pub const DEFAULT_MAX_RECORD_VALUES: u64 = 5_000_000;

/// The limit on values, as the environment sets it.
pub fn max_record_values() -> Result<u64> {
    crate::files::env_limit("VRAMLAB_MAX_RECORD_VALUES", DEFAULT_MAX_RECORD_VALUES)
}

thread_local! {
    /// While [`Record::load`] reads on this thread: (values it may still take, the limit).
    static VALUES_LEFT: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
}

/// A point's parameters or metrics, each entry counted against the record's limit as it is
/// read (a single point of millions of metrics is refused before it is held).
fn bounded_map<'de, D, V>(deserializer: D) -> std::result::Result<std::collections::BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Entries<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Entries<V> {
        type Value = std::collections::BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of names to values")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
            let mut out = std::collections::BTreeMap::new();
            while let Some((name, value)) = map.next_entry::<String, V>()? {
                if let Some((left, most)) = VALUES_LEFT.get() {
                    if left == 0 {
                        return Err(serde::de::Error::custom(format!(
                            "more than {most} parameters and metrics (VRAMLAB_MAX_RECORD_VALUES raises the limit)"
                        )));
                    }
                    VALUES_LEFT.set(Some((left - 1, most)));
                }
                out.insert(name, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Entries(std::marker::PhantomData))
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
    #[serde(deserialize_with = "bounded_points")]
    pub points: Vec<PointRecord>,
}

/// The most points a record read back may hold, unless `VRAMLAB_MAX_RECORD_POINTS` says
/// otherwise: the largest committed record has 1,320; one of 1.5 million took `vramlab report`
/// past 3 GiB.
pub(crate) const DEFAULT_MAX_RECORD_POINTS: u64 = 100_000;

/// A record's points, read one at a time and refused past the limit before any more is held.
fn bounded_points<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Vec<PointRecord>, D::Error> {
    struct Points(u64);
    impl<'de> serde::de::Visitor<'de> for Points {
        type Value = Vec<PointRecord>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of points")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
            let mut points = Vec::new();
            while let Some(point) = seq.next_element()? {
                if points.len() as u64 >= self.0 {
                    return Err(serde::de::Error::custom(format!(
                        "more than {} points (VRAMLAB_MAX_RECORD_POINTS raises the limit)",
                        self.0
                    )));
                }
                points.push(point);
            }
            Ok(points)
        }
    }
    let most = crate::files::env_limit("VRAMLAB_MAX_RECORD_POINTS", DEFAULT_MAX_RECORD_POINTS)
        .map_err(serde::de::Error::custom)?;
    deserializer.deserialize_seq(Points(most))
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
        Record::load_within(path, max_record_values()?)
    }

    /// [`Record::load`], holding at most `most` parameters and metrics.
    fn load_within(path: &Path, most: u64) -> Result<Record> {
        // Parsed as it is read: the file's text is never held whole.
        let reader = crate::files::open_input(path)?;
        struct Counting;
        impl Drop for Counting {
            fn drop(&mut self) {
                VALUES_LEFT.set(None);
            }
        }
        VALUES_LEFT.set(Some((most, most)));
        let counting = Counting;
        let record: Record = serde_json::from_reader(reader).map_err(|reason| Error::Json {
            path: path.to_path_buf(),
            reason,
        })?;
        drop(counting);
        // Reports name plots after the experiment: a record must not steer them out of the folder.
        if let Some(why) = crate::files::unsafe_name(&record.experiment) {
            return Err(Error::Invalid(format!("{}: experiment {why}", path.display())));
        }
        Ok(record)
    }

    /// Its parameters and metrics, all points together (what [`max_record_values`] bounds).
    pub fn values(&self) -> u64 {
        self.points
            .iter()
            .map(|p| (p.params.len() + p.metrics.len()) as u64)
            .sum()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 40: a record of 1.5 million points took `vramlab report` past 3 GiB; a record
    /// past the limit is refused in one line, read one point at a time until then.
    #[test]
    fn a_record_past_the_points_limit_is_refused_in_one_line() {
        let reference = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../reports/reference/h200/hierarchy/run/occupancy/sim.json"
        );
        let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(reference).unwrap()).unwrap();
        let point = value["points"][0].clone();
        let mut record = |n: u64| {
            value["points"] = serde_json::Value::Array(vec![point.clone(); n as usize]);
            serde_json::to_vec(&value).unwrap()
        };
        let dir = std::env::temp_dir().join(format!("vramlab-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sim.json");
        std::fs::write(&path, record(DEFAULT_MAX_RECORD_POINTS)).unwrap();
        assert_eq!(
            Record::load(&path).unwrap().points.len() as u64,
            DEFAULT_MAX_RECORD_POINTS
        );
        std::fs::write(&path, record(DEFAULT_MAX_RECORD_POINTS + 1)).unwrap();
        let err = Record::load(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.contains("more than 100000 points (VRAMLAB_MAX_RECORD_POINTS"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }

    /// Issue 40: within the points limit, a record's points may each hold thousands of
    /// figures: 100,000 points of 64 took `vramlab report` to 730 MB. The parameters and
    /// metrics of all points together are bounded, counted as they are read, so one point of
    /// millions of metrics is refused before it is held.
    #[test]
    fn a_record_past_the_values_limit_is_refused_as_it_is_read() {
        let reference = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../reports/reference/h200/hierarchy/run/occupancy/sim.json"
        );
        let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(reference).unwrap()).unwrap();
        let mut point = value["points"][0].clone();
        let per_point =
            (point["params"].as_object().unwrap().len() + point["metrics"].as_object().unwrap().len()) as u64;
        let dir = std::env::temp_dir().join(format!("vramlab-values-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sim.json");
        value["points"] = serde_json::Value::Array(vec![point.clone(); 10]);
        std::fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
        assert_eq!(Record::load(&path).unwrap().values(), 10 * per_point);
        assert!(Record::load_within(&path, 10 * per_point).is_ok());
        let err = Record::load_within(&path, 10 * per_point - 1).unwrap_err().to_string();
        assert!(
            err.contains(&format!("more than {} parameters", 10 * per_point - 1)),
            "{err}"
        );
        // One point of more metrics than the limit.
        let metrics = point["metrics"].as_object_mut().unwrap();
        for k in 0..=1000 {
            metrics.insert(format!("m{k}"), serde_json::json!(1.0));
        }
        value["points"] = serde_json::Value::Array(vec![point]);
        std::fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
        let err = Record::load_within(&path, 1000).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.contains("more than 1000 parameters and metrics (VRAMLAB_MAX_RECORD_VALUES"),
            "{err}"
        );
        assert!(err.contains("sim.json") && !err.contains('\n'), "{err}");
    }
}
