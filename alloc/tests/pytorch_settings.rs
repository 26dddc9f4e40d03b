//! PyTorch's allocator under every `PYTORCH_ALLOC_CONF` setting, against PyTorch itself.
//!
//! `reports/reference/h100/alloc-traces/` holds snapshots recorded on an H100 with PyTorch
//! 2.11 (`scripts/record_alloc_traces.py`): four workloads, each under fourteen settings, memory
//! caps with and without a garbage-collection threshold among them, with PyTorch's own
//! `torch.cuda.memory_stats()` beside each. Every one is replayed under the settings and cap it
//! ran with, and every statistic must equal PyTorch's.

use std::path::{Path, PathBuf};

use allocators::{build_pytorch_policy, replay_policy, ReplayOptions, SimDevice};
use experiments::{AllocConf, BackendKind, PytorchStats, RecordedCheck, Trace, Verdict};

/// The recordings the model was built against (H100), and the hold-out registered before it
/// was recorded (H200, commit eb4b1d8).
const ROOTS: [&str; 2] = ["h100/alloc-traces", "h200/alloc-traces-holdout"];

fn reference(root: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../reports/reference")
        .join(root)
}

struct Recording {
    name: String,
    meta: serde_json::Value,
    trace: Trace,
}

fn load_all() -> Vec<Recording> {
    ROOTS.iter().flat_map(|root| load_root(root)).collect()
}

fn load_root(root: &str) -> Vec<Recording> {
    let mut out = Vec::new();
    let mut workloads: Vec<_> = std::fs::read_dir(reference(root))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    workloads.sort();
    for dir in workloads {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for json in files {
            let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let pickle = json.with_extension("pickle.gz");
            let trace = Trace::load(&pickle).unwrap();
            let name = format!(
                "{}/{}",
                dir.file_name().unwrap().to_string_lossy(),
                json.file_stem().unwrap().to_string_lossy()
            );
            out.push(Recording { name, meta, trace });
        }
    }
    out
}

/// `trace` replayed (simulated) under `rec`'s settings and cap, over `device`.
fn replay_as(rec: &Recording, trace: &Trace, mut device: SimDevice, check_recorded: bool) -> experiments::PolicyResult {
    let conf = AllocConf::parse(rec.meta["alloc_conf"].as_str().unwrap()).unwrap();
    let options = ReplayOptions {
        capacity: rec.meta["allowed_memory_maximum"].as_u64(),
        timeline_points: 0,
        time_ops: false,
        check_recorded,
        stop_at_first_failure: false,
        record_events: false,
    };
    replay_policy(
        trace,
        &rec.name,
        build_pytorch_policy(&conf),
        &mut device,
        options,
        &mut (),
        BackendKind::Sim,
    )
    .unwrap()
}

fn replay_recording(rec: &Recording) -> (PytorchStats, RecordedCheck, u64) {
    assert_eq!(
        rec.trace.allocator_settings.as_deref(),
        rec.meta["alloc_conf"].as_str(),
        "{}: the snapshot names its own settings",
        rec.name
    );
    let device = SimDevice::following(rec.meta["device_total_bytes"].as_u64().unwrap(), &rec.trace);
    let result = replay_as(rec, &rec.trace, device, true);
    (
        result.pytorch_stats.unwrap(),
        result.recorded_check,
        result.peak_allocated_bytes,
    )
}

/// (key, ours) pairs for every statistic compared.
fn figures(stats: &PytorchStats) -> Vec<(String, u64)> {
    let value = serde_json::to_value(stats).unwrap();
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn every_recorded_setting_matches_pytorchs_memory_stats() {
    let recordings = load_all();
    assert_eq!(recordings.len(), 56 + 28, "H100 recordings and the H200 hold-out");
    let mut wrong = Vec::new();
    let mut compared = 0;
    for rec in &recordings {
        let (stats, check, peak_allocated) = replay_recording(rec);
        let theirs = &rec.meta["memory_stats"];
        for (key, ours) in figures(&stats) {
            let reference = theirs[&key]
                .as_u64()
                .unwrap_or_else(|| panic!("{}: no {key}", rec.name));
            compared += 1;
            if ours != reference {
                wrong.push(format!("{}: {key} = {ours}, PyTorch {reference}", rec.name));
            }
        }
        assert_eq!(
            peak_allocated, stats.allocated_peak,
            "{}: one definition of allocated",
            rec.name
        );
        if check.verdict != Verdict::Match {
            wrong.push(format!("{}: {}", rec.name, check.why));
        }
    }
    assert_eq!(compared, (56 + 28) * 13);
    assert!(
        wrong.is_empty(),
        "{} of {compared} figures differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_recording_is_read_whole() {
    for rec in load_all() {
        assert_eq!(rec.trace.warnings.count, 0, "{}: {:?}", rec.name, rec.trace.warnings);
        let path: &Path = Path::new(&rec.name);
        assert!(path.components().count() == 2);
    }
}

/// What-if: each workload's uncapped default trace, replayed under another recording's
/// settings and cap over the driver's placement (nothing taken from that recording), set against
/// what PyTorch did when it really ran so. Prints one line per recording.
#[test]
fn what_if_replays_of_the_default_trace_against_the_recorded_runs() {
    let recordings = load_all();
    let (mut verdicts, mut agree) = (0, 0);
    let mut reserved_errors = Vec::new();
    let mut wrong_verdicts = Vec::new();
    for rec in recordings.iter().filter(|r| !r.name.ends_with("/default")) {
        let workload = rec.name.split('/').next().unwrap();
        let default = recordings
            .iter()
            .find(|r| r.name == format!("{workload}/default"))
            .unwrap();
        let capacity = rec.meta["allowed_memory_maximum"].as_u64();
        let device = SimDevice::new(rec.meta["device_total_bytes"].as_u64().unwrap());
        let result = replay_as(rec, &default.trace, device, false);
        let stats = &rec.meta["memory_stats"];
        if capacity.is_some() {
            verdicts += 1;
            let recorded_fit = stats["num_ooms"].as_u64().unwrap() == 0;
            let predicted_fit = result.failed_allocs == 0;
            agree += usize::from(recorded_fit == predicted_fit);
            if recorded_fit != predicted_fit {
                wrong_verdicts.push(rec.name.clone());
            }
            println!("{}: fits predicted {predicted_fit}, recorded {recorded_fit}", rec.name);
        } else {
            let recorded = stats["reserved_bytes.all.peak"].as_u64().unwrap() as f64;
            let error = (result.peak_reserved_bytes as f64 - recorded) / recorded;
            reserved_errors.push(error.abs());
            println!("{}: peak reserved {:+.2}%", rec.name, error * 100.0);
        }
    }
    reserved_errors.sort_by(f64::total_cmp);
    println!(
        "fit verdicts agree: {agree} of {verdicts}; uncapped peak reserved |error| median {:.2}%, worst {:.2}%",
        experiments::median(&mut reserved_errors) * 100.0,
        reserved_errors.last().unwrap() * 100.0
    );
    assert_eq!((verdicts, reserved_errors.len()), (36, 42));
    // With the driver's placement (alloc/src/placement.rs) every uncapped what-if but
    // serve/expandable (+6.45%: expandable segments, which it does not touch) is within 0.6%
    // (over counted addresses: worst +24%, six over 4%). One verdict of 36 differs: gpt/cap, at
    // 1.05 times its peak allocated, fits in the replay and ran out of memory on the GPU.
    assert!(
        reserved_errors.last().unwrap() * 100.0 < 6.5,
        "uncapped what-ifs within 6.5%"
    );
    assert_eq!(
        wrong_verdicts,
        ["gpt/cap"],
        "a what-if replay must say 'fits' where PyTorch fitted"
    );
}

/// The smallest-cap search starts its probes from copies of the unlimited run; its answer must
/// be the one a search of whole replays (each probe from the first event, through the full
/// replay) gives, for every recording's own settings and for each workload's default trace
/// under every other setting.
#[test]
fn the_smallest_cap_search_gives_the_answer_of_whole_replays() {
    use experiments::TraceEvent;
    let recordings = load_all();
    let whole_replays = |trace: &Trace, conf: &AllocConf, device_bytes: u64| -> Option<u64> {
        let step = SimDevice::GRANULE;
        let fits = |capacity: Option<u64>| {
            let options = ReplayOptions::probe(capacity);
            let mut device = SimDevice::new(device_bytes);
            let policy = build_pytorch_policy(conf);
            replay_policy(trace, "probe", policy, &mut device, options, &mut (), BackendKind::Sim).unwrap()
        };
        let unlimited = fits(None);
        if unlimited.failed_allocs > 0 {
            return None;
        }
        let (mut fails, mut fit) = (
            unlimited.peak_requested_bytes.div_ceil(step).saturating_sub(1),
            unlimited.peak_reserved_bytes.div_ceil(step),
        );
        fails = fails.min(fit.saturating_sub(1));
        while fit - fails > 1 {
            let mid = fails + (fit - fails) / 2;
            if fits(Some(mid * step)).failed_allocs == 0 {
                fit = mid;
            } else {
                fails = mid;
            }
        }
        Some(fit * step)
    };
    let mut compared = 0;
    for rec in &recordings {
        let workload = rec.name.split('/').next().unwrap();
        let default = recordings
            .iter()
            .find(|r| r.name == format!("{workload}/default"))
            .unwrap();
        let conf = AllocConf::parse(rec.meta["alloc_conf"].as_str().unwrap()).unwrap();
        let device_bytes = rec.meta["device_total_bytes"].as_u64().unwrap();
        for trace in [&rec.trace, &default.trace] {
            assert!(trace.events.iter().any(|e| matches!(e, TraceEvent::Alloc { .. })));
            let build = || build_pytorch_policy(&conf);
            let resumed = allocators::min_capacity_of(trace, &build, device_bytes).unwrap();
            assert_eq!(resumed, whole_replays(trace, &conf, device_bytes), "{}", rec.name);
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * recordings.len());
}
