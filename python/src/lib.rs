//! vramlab's Python layer: plain data in and out. Every function takes Python values, runs the
//! Rust core with the GIL released, and returns JSON text that `vramlab/__init__.py` turns
//! into dicts; errors become `ValueError` or `OSError` carrying the CLI's one-line message,
//! and a panic becomes a `RuntimeError` instead of crossing into Python.

// PyO3's macros expand to unsafe code of their own; this crate writes none.
#![deny(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use experiments::{Profile, Trace, DEFAULT_PROFILE};
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// Why a call failed, sorted into the Python exception it becomes.
enum Failure {
    Value(String),
    Os(String),
    Interrupted,
}

impl From<experiments::Error> for Failure {
    fn from(e: experiments::Error) -> Failure {
        match e {
            experiments::Error::Io { .. } => Failure::Os(e.to_string()),
            experiments::Error::Cancelled => Failure::Interrupted,
            other => Failure::Value(other.to_string()),
        }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Value(m) => PyValueError::new_err(m),
            Failure::Os(m) => PyOSError::new_err(m),
            Failure::Interrupted => PyKeyboardInterrupt::new_err("vramlab: cancelled"),
        }
    }
}

/// Runs `work` without the GIL on a thread of its own, turning a panic into a `RuntimeError`.
/// Every 100 ms the caller's thread takes the GIL back to let Python handle signals: a Ctrl-C
/// asks the work to stop (it looks every few thousand steps) and raises `KeyboardInterrupt`.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T, Failure> + Send) -> PyResult<T> {
    experiments::cancel::clear();
    let outcome = std::thread::scope(|scope| {
        let handle = scope.spawn(|| catch_unwind(AssertUnwindSafe(work)));
        loop {
            let finished = py.detach(|| {
                let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
                while !handle.is_finished() && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                handle.is_finished()
            });
            if finished {
                break;
            }
            if let Err(interrupt) = py.check_signals() {
                experiments::cancel::request();
                let _ = py.detach(|| handle.join());
                experiments::cancel::clear();
                return Err(interrupt);
            }
        }
        Ok(py.detach(|| handle.join()))
    })?;
    let result = outcome.unwrap_or_else(Err);
    result
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

/// Every device of a trace from a path, the bytes of a pickle (gzipped or not), or a snapshot
/// dict. A dict is pickled by Python's own pickler and read as a file would be, so that one
/// reader of the snapshot schema serves every route.
fn load_traces(py: Python<'_>, trace: &Bound<'_, PyAny>, device: Option<usize>) -> PyResult<Vec<Trace>> {
    if trace.downcast::<PyDict>().is_ok() {
        let pickled = py.import("pickle")?.call_method1("dumps", (trace, 4))?;
        let bytes = pickled.downcast::<PyBytes>()?.as_bytes().to_vec();
        return detached(py, move || {
            Ok(Trace::all_from_bytes("<snapshot dict>", &bytes, device)?)
        });
    }
    if let Ok(bytes) = trace.downcast::<PyBytes>() {
        let bytes = bytes.as_bytes().to_vec();
        return detached(py, move || Ok(Trace::all_from_bytes("<bytes>", &bytes, device)?));
    }
    let path: std::path::PathBuf = trace.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "trace must be a path, the bytes of a snapshot pickle, or the dict torch.cuda.memory._snapshot() returns, not {}",
            trace.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    let text = path.display().to_string();
    if Trace::is_synthetic(&text) {
        return detached(py, move || Ok(vec![Trace::synthetic(&text, 0)?]));
    }
    detached(py, move || Ok(Trace::load_all(Path::new(&path), device)?))
}

/// The one trace a call works on: the device asked for, or the first with events.
fn one_trace(traces: Vec<Trace>, device: Option<usize>) -> PyResult<Trace> {
    let count = traces.len();
    traces.into_iter().find(|t| !t.is_empty()).ok_or_else(|| {
        PyValueError::new_err(match device {
            Some(d) => format!("device={d}: the snapshot has no events on that device (nothing to replay)"),
            None if count > 0 => {
                "not a PyTorch memory snapshot: every device trace is empty (was _record_memory_history on?)"
                    .to_string()
            }
            None => "the trace has no events".to_string(),
        })
    })
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
    let traces = load_traces(py, trace, device)?;
    if device.is_some() {
        one_trace(traces.clone(), device)?;
    }
    detached(py, move || {
        let options = allocators::ReplayOptions::default();
        let record = allocators::replay_devices(
            &traces,
            policy.as_deref(),
            &alloc_conf,
            capacity,
            device_bytes()?,
            options,
        )?;
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
    let trace = one_trace(load_traces(py, trace, device)?, device)?;
    detached(py, move || {
        let record = allocators::tune_record(&trace, &grid, capacity, device_bytes()?)?;
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
