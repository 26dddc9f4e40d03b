//! vramlab's Python layer: plain data in and out. Every function takes Python values, runs the
//! Rust core (through the same front as the CLI, `allocators::Replay`) with the GIL released,
//! and returns JSON text that `vramlab/__init__.py` turns into dicts. Errors become the classes
//! of `vramlab.errors`, chosen by the Rust error's variant, each also the built-in exception it
//! stands for (`TraceError` is a `ValueError`, `FileError` an `OSError`); a cancel becomes
//! `KeyboardInterrupt` and a panic a `RuntimeError` instead of crossing into Python.

// PyO3's macros expand to unsafe code of their own; this crate writes none.
#![deny(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use allocators::Replay;
use experiments::pytorch::TraceAction;
use experiments::{Profile, Trace};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyType};

/// Why a call failed: the class of `vramlab.errors` it becomes, and the one-line message.
struct Failure {
    class: &'static str,
    message: String,
}

impl Failure {
    fn new(class: &'static str, message: impl ToString) -> Failure {
        Failure {
            class,
            message: experiments::error_line(&message.to_string()),
        }
    }
}

/// The Python class each variant becomes ("cancelled" is not a class: it raises
/// `KeyboardInterrupt`).
impl From<experiments::Error> for Failure {
    fn from(e: experiments::Error) -> Failure {
        Failure::new(class_of(&e), e)
    }
}

/// The class of `vramlab.errors` an error of the library becomes.
fn class_of(e: &experiments::Error) -> &'static str {
    use experiments::Error as E;
    match e {
        E::Io { .. } => "FileError",
        E::Cancelled => "cancelled",
        E::Trace(_) | E::Json { .. } => "TraceError",
        E::Settings(_) => "SettingsError",
        E::Unknown { kind: "policy", .. } => "SettingsError",
        E::Syntax { .. } | E::InvalidParam { .. } | E::Unknown { .. } | E::Invalid(_) => "InputError",
    }
}

impl From<allocators::Error> for Failure {
    fn from(e: allocators::Error) -> Failure {
        match e {
            allocators::Error::Input(e) => e.into(),
            backend @ allocators::Error::Backend { .. } => Failure::new("DeviceError", backend),
        }
    }
}

impl From<hw::HwError> for Failure {
    fn from(e: hw::HwError) -> Failure {
        match e {
            hw::HwError::Replay(e) => e.into(),
            other => Failure::new("DeviceError", other),
        }
    }
}

/// An error of the command line's own functions (list, teach, report): the class its cause
/// names where it has one of the library's errors, else an input error.
impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        let message = format!("{e:#}");
        let cause = e.chain().find_map(|cause| {
            cause
                .downcast_ref::<experiments::Error>()
                .or(match cause.downcast_ref::<reports::ReportError>() {
                    Some(reports::ReportError::Files(inner)) => Some(inner),
                    _ => None,
                })
        });
        let class = match cause {
            Some(inner) => class_of(inner),
            None if e.chain().any(|cause| cause.is::<std::io::Error>()) => "FileError",
            None => "InputError",
        };
        Failure::new(class, message)
    }
}

impl Failure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        if self.class == "cancelled" {
            return PyKeyboardInterrupt::new_err("vramlab: cancelled");
        }
        let class = py
            .import("vramlab.errors")
            .and_then(|errors| errors.getattr(self.class))
            .and_then(|class| Ok(class.downcast_into::<PyType>()?));
        match class {
            Ok(class) => PyErr::from_type(class, self.message),
            Err(e) => e,
        }
    }
}

/// Runs `work` without the GIL on a thread of its own, turning a panic into a `RuntimeError`.
/// Every 100 ms the caller's thread takes the GIL back to let Python handle signals: a Ctrl-C
/// asks the work to stop (it looks every few thousand steps) and raises `KeyboardInterrupt`.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> Result<T, Failure> + Send) -> PyResult<T> {
    // This call's own token: a Ctrl-C cancels this call's work, not another thread's call.
    let token = experiments::cancel::Token::new();
    let outcome = std::thread::scope(|scope| {
        let handle = scope.spawn(|| allocators::run_cancellable(&token, || catch_unwind(AssertUnwindSafe(work))));
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
                token.cancel();
                let _ = py.detach(|| handle.join());
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
        .map_err(|failure| failure.into_py(py))
}

/// How messages name a snapshot given as a dict.
const SNAPSHOT_DICT: &str = "<snapshot dict>";

/// The traces of a snapshot dict whose device traces are lists of plain events (dicts whose
/// `action` is a string and whose `addr`, `size`, `stream` and `device_free`, where present, are
/// integers), read from the objects themselves: each event's fields looked up by key objects
/// made once, with nothing copied but the numbers, and the rest of the snapshot (its segments,
/// settings and notes) pickled without the events and read as a file would be. `None` for
/// anything else (a subclass, a value of another type): the caller then pickles it all, so that
/// such a snapshot is read, or refused with the message, as its pickle would be.
fn snapshot_of_dict(
    py: Python<'_>,
    snapshot: &Bound<'_, PyDict>,
    device: Option<usize>,
) -> PyResult<Option<Vec<Trace>>> {
    let Some(devices) = snapshot.get_item(intern!(py, "device_traces"))? else {
        return Ok(None);
    };
    // Subclasses (an OrderedDict of events) are read as their builtins are.
    let Ok(devices) = devices.downcast::<PyList>() else {
        return Ok(None);
    };
    // The event's keys as the Rust reader names them (one list, so the two cannot drift).
    let keys = experiments::SnapshotEvents::FIELDS.map(|field| PyString::new(py, field));
    // `time_us`, the last, only places annotations: read only where the snapshot has some, so
    // that the others are read at the speed they were.
    let annotated = match snapshot.get_item(intern!(py, "external_annotations"))? {
        Some(marks) => marks.downcast::<PyList>().map_or(true, |list| !list.is_empty()),
        None => false,
    };
    let read = if annotated { keys.len() } else { keys.len() - 1 };
    // An event's action text, kept for each action object met: snapshots share one string
    // object per action among their events, so the text is read once per object, not per event.
    let mut actions: Vec<(Bound<'_, PyAny>, String, Option<TraceAction>)> = Vec::new();
    let mut events = experiments::SnapshotEvents::new(device);
    let mut seen = 0usize;
    for (d, list) in devices.iter().enumerate() {
        let Ok(list) = list.downcast::<PyList>() else {
            return Ok(None);
        };
        for item in list.iter() {
            seen += 1;
            // A Ctrl-C during a long conversion is answered as during a replay.
            if seen.is_multiple_of(1 << 16) {
                py.check_signals()?;
            }
            let Ok(event) = item.downcast::<PyDict>() else {
                return Ok(None);
            };
            let Some(action) = event.get_item(&keys[0])? else {
                return Ok(None);
            };
            let text;
            let (action, parsed) = match actions.iter().find(|(object, ..)| object.is(&action)) {
                Some((_, known, parsed)) => (known.as_str(), *parsed),
                None => {
                    let Ok(string) = action.downcast_exact::<PyString>() else {
                        return Ok(None);
                    };
                    text = string.to_cow()?.into_owned();
                    let parsed = TraceAction::parse(&text);
                    // Objects of their own for each event are not kept: the list stays short.
                    if actions.len() < SHARED_ACTIONS {
                        actions.push((action, text.clone(), parsed));
                    }
                    (text.as_str(), parsed)
                }
            };
            let mut numbers = [None; 5];
            for (number, key) in numbers.iter_mut().zip(&keys[1..read]) {
                if let Some(value) = event.get_item(key)? {
                    match exact_int(&value) {
                        Some(n) => *number = Some(n),
                        None => return Ok(None),
                    }
                }
            }
            let source = if parsed == Some(TraceAction::Alloc) {
                program_line_of(event.get_item(intern!(py, "frames"))?)?
            } else {
                None
            };
            if !events.push_from(d, action, numbers, source) {
                break;
            }
        }
    }
    // The rest of the snapshot, its device traces emptied, as the file reader reads it.
    let rest = snapshot.copy()?;
    let emptied = PyList::empty(py);
    for _ in 0..devices.len() {
        emptied.append(PyList::empty(py))?;
    }
    rest.set_item(intern!(py, "device_traces"), emptied)?;
    let pickled = pickle_plain(py, rest.as_any())?;
    let pickled = pickled.downcast::<PyBytes>()?.as_bytes();
    events
        .finish(SNAPSHOT_DICT, pickled)
        .map(Some)
        .map_err(|e| Failure::from(e).into_py(py))
}

/// The program's line among an event's `frames` (a list of dicts of `filename`, `line` and
/// `name`, innermost first), as the pickle reader takes it ([`experiments::program_line`]);
/// `None` where there are none, or they are not of that shape.
fn program_line_of(frames: Option<Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(frames) = frames else { return Ok(None) };
    let Ok(frames) = frames.downcast::<PyList>() else {
        return Ok(None);
    };
    if frames.is_empty() {
        return Ok(None);
    }
    let mut read: Vec<(String, i128, String)> = Vec::with_capacity(frames.len());
    for frame in frames.iter() {
        let Ok(frame) = frame.downcast::<PyDict>() else {
            continue;
        };
        let text = |key: &str| -> PyResult<Option<String>> {
            Ok(match frame.get_item(key)? {
                Some(value) => value
                    .downcast::<PyString>()
                    .ok()
                    .map(|s| s.to_cow().map(|c| c.into_owned()))
                    .transpose()?,
                None => None,
            })
        };
        let Some(file) = text("filename")? else { continue };
        let line = frame.get_item("line")?.as_ref().and_then(exact_int).unwrap_or(0);
        read.push((file, line, text("name")?.unwrap_or_default()));
    }
    Ok(experiments::program_line(
        read.iter().map(|(f, l, n)| (f.as_str(), *l, n.as_str())),
    ))
}

/// `value` pickled by Python's pickler once made plain (`vramlab._plain`: subclasses of the
/// builtins made builtins, a structure that contains itself or nests too deep refused in one
/// line, where the pickler would raise `RecursionError` or write classes the reader refuses).
fn pickle_plain<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let plain = py.import("vramlab._plain")?.call_method1("plain", (value,))?;
    py.import("pickle")?.call_method1("dumps", (plain, 4))
}

/// Action objects whose text is kept (a snapshot has about ten actions).
const SHARED_ACTIONS: usize = 64;

/// A Python `int` (not a subclass such as `bool`, which a pickle keeps apart) within what the
/// pickle reader holds.
fn exact_int(value: &Bound<'_, PyAny>) -> Option<i128> {
    if !value.is_exact_instance_of::<PyInt>() {
        return None;
    }
    match value.extract::<i64>() {
        Ok(n) => Some(i128::from(n)),
        Err(_) => value.extract::<i128>().ok(),
    }
}

/// Every device of a trace from a path, the bytes of a pickle (gzipped or not), or a snapshot
/// dict, ready to replay. A dict is pickled by Python's own pickler and read as a file would
/// be, so that one reader of the snapshot schema serves every route.
fn load_replay(py: Python<'_>, trace: &Bound<'_, PyAny>, device: Option<usize>) -> PyResult<Replay> {
    let from_bytes = |name: &'static str, bytes: Vec<u8>| {
        detached(py, move || {
            Ok(Replay::new(Trace::all_from_bytes(name, &bytes, device)?, device)?)
        })
    };
    if let Ok(snapshot) = trace.downcast::<PyDict>() {
        if let Some(traces) = snapshot_of_dict(py, snapshot, device)? {
            return detached(py, move || Ok(Replay::new(traces, device)?));
        }
        let pickled = pickle_plain(py, trace)?;
        return from_bytes(SNAPSHOT_DICT, pickled.downcast::<PyBytes>()?.as_bytes().to_vec());
    }
    if let Ok(bytes) = trace.downcast::<PyBytes>() {
        return from_bytes("<bytes>", bytes.as_bytes().to_vec());
    }
    let path: std::path::PathBuf = trace.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "trace must be a path, the bytes of a snapshot pickle, or the dict torch.cuda.memory._snapshot() returns, not {}",
            trace.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    let text = path.display().to_string();
    detached(py, move || {
        Ok(Replay::new(Trace::load_input(&text, device, 0)?, device)?)
    })
}

/// `vramlab.replay`: one JSON object, as `vramlab replay --json` prints.
#[pyfunction]
#[pyo3(signature = (trace, alloc_conf, capacity=None, policy=None, device=None, torch=None, gpu=None))]
#[allow(clippy::too_many_arguments)]
fn replay(
    py: Python<'_>,
    trace: &Bound<'_, PyAny>,
    alloc_conf: Vec<String>,
    capacity: Option<u64>,
    policy: Option<String>,
    device: Option<usize>,
    torch: Option<String>,
    gpu: Option<String>,
) -> PyResult<String> {
    let front = load_replay(py, trace, device)?.device_bytes(gpu_bytes(py, gpu)?);
    detached(py, move || {
        let record = front
            .capacity(capacity)?
            .torch(torch.as_deref())?
            .policies(policy.as_deref(), &alloc_conf)
            .run()?;
        Ok(record.summary_json().to_string())
    })
}

/// `vramlab.tune`: the ranked results, as `vramlab tune --json` prints.
#[pyfunction]
#[pyo3(signature = (trace, grid, capacity=None, device=None, torch=None, gpu=None))]
fn tune(
    py: Python<'_>,
    trace: &Bound<'_, PyAny>,
    grid: Vec<String>,
    capacity: Option<u64>,
    device: Option<usize>,
    torch: Option<String>,
    gpu: Option<String>,
) -> PyResult<String> {
    let front = load_replay(py, trace, device)?.device_bytes(gpu_bytes(py, gpu)?);
    detached(py, move || {
        let record = front.capacity(capacity)?.torch(torch.as_deref())?.tune(&grid)?;
        Ok(record.summary_json().to_string())
    })
}

/// The memory of the GPU `gpu` names, which sizes the device a replay runs on (as `--gpu` does
/// for `vramlab replay` and `vramlab tune`: expandable segments reserve address space for all of
/// it, and no replay holds more); `None`: the built-in profile's.
fn gpu_bytes(py: Python<'_>, gpu: Option<String>) -> PyResult<Option<u64>> {
    gpu.map(|name| {
        experiments::Gpu::find(&name)
            .map(|g| g.memory_bytes)
            .map_err(|e| Failure::new("InputError", e.to_string()).into_py(py))
    })
    .transpose()
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
                    let record = sim.run(experiment, seed, &|| {});
                    records.push(record.map_err(|e| Failure::new("InputError", e))?);
                }
            }
            "hw" => {
                let mut hw = hw::HwBackend::open()?;
                for experiment in experiments {
                    records.push(hw.run(experiment, seed, &|| {})?);
                }
            }
            other => {
                return Err(Failure::new(
                    "InputError",
                    format!("backend = '{other}': must be 'sim' or 'hw'"),
                ))
            }
        }
        serde_json::to_string(&records).map_err(|e| Failure::new("InputError", e))
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

/// The device a profile describes (a built-in name such as `h100`, or a profile file): name,
/// compute capability, SM count and memory, as JSON.
#[pyfunction]
fn gpu(py: Python<'_>, profile: String) -> PyResult<String> {
    detached(py, move || {
        let gpu = experiments::Gpu::find(&profile)?;
        Ok(serde_json::json!({
            "profile": gpu.name,
            "name": gpu.device_name,
            "compute_capability": gpu.compute_capability,
            "multiprocessors": gpu.multiprocessors,
            "memory_bytes": gpu.memory_bytes,
            "measured": gpu.measured,
            "source": gpu.source,
            "memory_said": gpu.memory_said(),
            // The CUDA context, outside what the caching allocator can use: measured on an H100
            // only (experiments::CONTEXT_BYTES_MEASURED_H100).
            "context_bytes": experiments::CONTEXT_BYTES_MEASURED_H100,
            "context_measured": gpu.measured && gpu.device_name.starts_with("NVIDIA H100"),
            // What the driver reported at calibration (torch.cuda.get_device_properties in a
            // trace); null where it was not measured.
            "l2_bytes": gpu.l2_bytes,
            "sm": gpu.sm,
        })
        .to_string())
    })
}

/// A byte count as the CLI reads one (`"3 GiB"`, `"512 MB"`, `"1048576"`).
#[pyfunction]
fn parse_bytes(py: Python<'_>, text: &str) -> PyResult<u64> {
    experiments::parse_bytes(text).map_err(|why| Failure::new("SettingsError", format!("'{text}': {why}")).into_py(py))
}

/// A cap as `--capacity` reads one, with `gpu` (a name, or None) for a share of its memory
/// (`"90%"`, `"0.9"`): the bytes, and how the cap reads back.
#[pyfunction]
#[pyo3(signature = (text, gpu=None))]
fn capacity(py: Python<'_>, text: &str, gpu: Option<String>) -> PyResult<(u64, String)> {
    let gpu = match gpu {
        Some(name) => {
            Some(experiments::Gpu::find(&name).map_err(|e| Failure::new("InputError", e.to_string()).into_py(py))?)
        }
        None => None,
    };
    experiments::Capacity::parse(text, gpu.as_ref())
        .map(|c| (c.bytes, c.said))
        .map_err(|why| Failure::new("SettingsError", format!("capacity {why}")).into_py(py))
}

/// `vramlab.list`: what `vramlab list` prints, as one JSON object.
#[pyfunction]
fn catalogue(py: Python<'_>) -> PyResult<String> {
    detached(py, || {
        let value = vramlab::catalogue()?;
        Ok(value.to_string())
    })
}

/// `vramlab.teach`: writes the teaching site into `out`; the pages written, the index first.
#[pyfunction]
#[pyo3(signature = (out, snapshot=None, profile="h100".to_string()))]
fn teach(
    py: Python<'_>,
    out: std::path::PathBuf,
    snapshot: Option<std::path::PathBuf>,
    profile: String,
) -> PyResult<Vec<String>> {
    detached(py, move || {
        let written = vramlab::teach_site(&out, snapshot.as_deref(), &profile)?;
        Ok(written.iter().map(|p| p.display().to_string()).collect())
    })
}

/// `vramlab.report`: redraws the report of a run's `--out` folder; (report.md, report.html,
/// the plots).
#[pyfunction]
fn report(py: Python<'_>, dir: std::path::PathBuf) -> PyResult<(String, String, Vec<String>)> {
    detached(py, move || {
        let rendered = vramlab::report_dir(&dir)?;
        Ok((
            rendered.markdown.display().to_string(),
            rendered.html.display().to_string(),
            rendered.plots.iter().map(|p| p.display().to_string()).collect(),
        ))
    })
}

/// `vramlab` on the command line (`python -m vramlab`, the command pip installs): the same
/// code as the Rust binary, run without the GIL; its exit status.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| vramlab::main(argv))
}

/// The Rust core behind the `vramlab` package.
#[pymodule]
fn _vramlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    experiments::set_code_commit(env!("VRAMLAB_COMMIT"));
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(teach, m)?)?;
    m.add_function(wrap_pyfunction!(report, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(gpu, m)?)?;
    m.add_function(wrap_pyfunction!(capacity, m)?)?;
    m.add("DEFAULT_TUNE_GRID", allocators::DEFAULT_TUNE_GRID.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
