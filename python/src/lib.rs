//! vramlab's Python layer: plain data in and out. Every function takes Python values, runs the
//! Rust core with the GIL released, and returns JSON text that `vramlab/__init__.py` turns
//! into dicts; errors become `ValueError` or `OSError` carrying the CLI's one-line message,
//! and a panic becomes a `RuntimeError` instead of crossing into Python.

// PyO3's macros expand to unsafe code of their own; this crate writes none.
#![deny(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use experiments::{DeviceInfo, Profile, ReplayRecord, SnapshotBuilder, Trace, DEFAULT_PROFILE, SETTINGS_KEYS};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

/// Why a call failed, sorted into the Python exception it becomes.
enum Failure {
    Value(String),
    Os(String),
}

impl From<experiments::Error> for Failure {
    fn from(e: experiments::Error) -> Failure {
        match e {
            experiments::Error::Io { .. } => Failure::Os(e.to_string()),
            other => Failure::Value(other.to_string()),
        }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Value(m) => PyValueError::new_err(m),
            Failure::Os(m) => PyOSError::new_err(m),
        }
    }
}

/// Runs `work` without the GIL, turning a panic into a `RuntimeError`.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T, Failure> + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(work)))
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            PyRuntimeError::new_err(format!("vramlab internal error (please report it): {what}"))
        })?
        .map_err(PyErr::from)
}

/// An integer field of a snapshot event, or a `ValueError` naming where it is missing.
fn event_number(event: &Bound<'_, PyDict>, key: &str, at: &str) -> PyResult<u64> {
    let value = event
        .get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("not a PyTorch memory snapshot: {at} has no '{key}'")))?;
    value.extract::<u64>().map_err(|_| {
        PyValueError::new_err(format!(
            "not a PyTorch memory snapshot: {at}.{key} = {} is not a non-negative integer",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

/// The dict `torch.cuda.memory._snapshot()` returns, read as it is (no pickling round trip).
fn trace_from_dict(snapshot: &Bound<'_, PyDict>, device: Option<usize>) -> PyResult<Trace> {
    let schema = |what: &str| PyValueError::new_err(format!("not a PyTorch memory snapshot: {what}"));
    if let Some(segments) = snapshot.get_item("segments")? {
        for segment in segments.try_iter()? {
            let pool: Option<Vec<i128>> = segment?
                .downcast::<PyDict>()
                .ok()
                .and_then(|s| s.get_item("segment_pool_id").ok().flatten())
                .and_then(|p| p.extract().ok());
            experiments::refuse_private_pool("<snapshot dict>", &pool.unwrap_or_default()).map_err(Failure::from)?;
        }
    }
    let traces = snapshot
        .get_item("device_traces")?
        .ok_or_else(|| schema("no 'device_traces'"))?;
    let traces = traces
        .downcast::<PyList>()
        .map_err(|_| schema("'device_traces' is not a list"))?;
    let index = match device {
        Some(d) if d < traces.len() => d,
        Some(d) => {
            return Err(PyValueError::new_err(format!(
                "device={d}: the snapshot has devices 0..{}",
                traces.len().saturating_sub(1)
            )))
        }
        None => (0..traces.len())
            .find(|&i| traces.get_item(i).is_ok_and(|t| t.len().is_ok_and(|n| n > 0)))
            .ok_or_else(|| schema("every device trace is empty (was _record_memory_history on?)"))?,
    };
    let events = traces.get_item(index)?;
    let events = events
        .downcast::<PyList>()
        .map_err(|_| schema(&format!("device_traces[{index}] is not a list")))?;
    let mut builder = SnapshotBuilder::new();
    for (i, event) in events.iter().enumerate() {
        let at = format!("device_traces[{index}][{i}]");
        let event = event
            .downcast::<PyDict>()
            .map_err(|_| schema(&format!("{at} is not a dict")))?;
        let action = event
            .get_item("action")?
            .ok_or_else(|| schema(&format!("{at} has no 'action'")))?;
        let action: String = action
            .extract()
            .map_err(|_| schema(&format!("{at}.action is not a string")))?;
        if SnapshotBuilder::wants(&action) {
            let addr = if action == "oom" {
                0
            } else {
                event_number(event, "addr", &at)?
            };
            builder.push(
                &action,
                addr,
                event_number(event, "size", &at)?,
                event_number(event, "stream", &at)?,
            );
        } else {
            builder.skip();
        }
    }
    let settings = match snapshot.get_item("allocator_settings")? {
        Some(value) if value.is_instance_of::<PyString>() => Some(value.extract::<String>()?),
        Some(value) => match value.downcast::<PyDict>() {
            Ok(dict) => SETTINGS_KEYS.iter().find_map(|key| {
                dict.get_item(key)
                    .ok()
                    .flatten()
                    .and_then(|v| v.extract::<String>().ok())
            }),
            Err(_) => None,
        },
        None => None,
    };
    Ok(builder.finish("<snapshot dict>", settings))
}

/// A trace from a path, the bytes of a pickle (gzipped or not), or a snapshot dict.
fn load_trace(py: Python<'_>, trace: &Bound<'_, PyAny>, device: Option<usize>) -> PyResult<Trace> {
    if let Ok(dict) = trace.downcast::<PyDict>() {
        return trace_from_dict(dict, device);
    }
    if let Ok(bytes) = trace.downcast::<PyBytes>() {
        let bytes = bytes.as_bytes().to_vec();
        return detached(py, move || Ok(Trace::from_bytes("<bytes>", &bytes, device)?));
    }
    let path: std::path::PathBuf = trace.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "trace must be a path, the bytes of a snapshot pickle, or the dict torch.cuda.memory._snapshot() returns, not {}",
            trace.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    let text = path.display().to_string();
    if Trace::is_synthetic(&text) {
        return detached(py, move || Ok(Trace::synthetic(&text, 0)?));
    }
    detached(py, move || Ok(Trace::load_device(Path::new(&path), device)?))
}

/// A cap of 0 bytes fits nothing: refused as the CLI refuses it.
fn check_capacity(capacity: Option<u64>) -> PyResult<()> {
    match capacity {
        Some(0) => Err(PyValueError::new_err("capacity=0: must be positive")),
        _ => Ok(()),
    }
}

fn device_bytes() -> Result<u64, Failure> {
    Ok(Profile::find(DEFAULT_PROFILE)?.device.memory_bytes)
}

/// `vramlab.replay`: one JSON object, as `vramlab replay --json` prints.
#[pyfunction]
#[pyo3(signature = (trace, alloc_conf, capacity=None, policy=None, device=None))]
fn replay(
    py: Python<'_>,
    trace: &Bound<'_, PyAny>,
    alloc_conf: Vec<String>,
    capacity: Option<u64>,
    policy: Option<String>,
    device: Option<usize>,
) -> PyResult<String> {
    check_capacity(capacity)?;
    let trace = load_trace(py, trace, device)?;
    detached(py, move || {
        let choices = allocators::choose_policies(&trace, policy.as_deref(), &alloc_conf)?;
        let options = allocators::ReplayOptions {
            capacity,
            ..allocators::ReplayOptions::default()
        };
        let results = allocators::replay_choices(&trace, &choices, device_bytes()?, options)?;
        let record = ReplayRecord::new(&trace, capacity, DeviceInfo::default(), results);
        Ok(record.summary_json().to_string())
    })
}

/// `vramlab.tune`: the ranked results, as `vramlab tune --json` prints.
#[pyfunction]
#[pyo3(signature = (trace, grid, capacity=None, device=None))]
fn tune(
    py: Python<'_>,
    trace: &Bound<'_, PyAny>,
    grid: Vec<String>,
    capacity: Option<u64>,
    device: Option<usize>,
) -> PyResult<String> {
    check_capacity(capacity)?;
    let trace = load_trace(py, trace, device)?;
    detached(py, move || {
        let settings = allocators::tune_grid(&trace, &grid)?;
        let mut results = allocators::tune(&trace, &settings, capacity, device_bytes()?)?;
        allocators::rank(&mut results);
        let record = ReplayRecord::new(&trace, capacity, DeviceInfo::default(), results);
        Ok(record.summary_json().to_string())
    })
}

/// `vramlab.run`: the records of every experiment the targets name, as a JSON list.
#[pyfunction]
#[pyo3(signature = (targets, backend, profile, seed))]
fn run(py: Python<'_>, targets: Vec<String>, backend: String, profile: String, seed: u64) -> PyResult<String> {
    use experiments::Backend;
    detached(py, move || {
        let (catalog, names) = experiments::Catalog::for_targets(&targets)?;
        let experiments = catalog.select(&names)?;
        let profile = Profile::find(&profile)?;
        let mut records = Vec::new();
        match backend.as_str() {
            "sim" => {
                let mut sim = sim::SimBackend::new(profile);
                for experiment in experiments {
                    records.push(
                        sim.run(experiment, seed, &|| {})
                            .map_err(|e| Failure::Value(e.to_string()))?,
                    );
                }
            }
            "hw" => {
                let mut hw = hw::HwBackend::open().map_err(|e| Failure::Os(e.to_string()))?;
                for experiment in experiments {
                    records.push(
                        hw.run(experiment, seed, &|| {})
                            .map_err(|e| Failure::Os(e.to_string()))?,
                    );
                }
            }
            other => return Err(Failure::Value(format!("backend = '{other}': must be 'sim' or 'hw'"))),
        }
        serde_json::to_string(&records).map_err(|e| Failure::Value(e.to_string()))
    })
}

/// `vramlab.explain`: the teaching view's text.
#[pyfunction]
#[pyo3(signature = (topic, params, profile))]
fn explain(py: Python<'_>, topic: String, params: Vec<String>, profile: String) -> PyResult<String> {
    detached(py, move || {
        let profile = Profile::find(&profile)?;
        Ok(sim::explain(&topic, &params, &profile)?)
    })
}

/// The Rust core behind the `vramlab` package.
#[pymodule]
fn _vramlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add("DEFAULT_TUNE_GRID", allocators::DEFAULT_TUNE_GRID.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
