//! Replay speed: trace events (allocations and frees) per second through each PyTorch model,
//! on the resnet18 trace, bookkeeping only (no timeline, no per-operation clock).

// criterion_group! and criterion_main! generate functions that cannot carry doc comments.
#![allow(missing_docs)]

use std::path::PathBuf;

use allocators::{build_pytorch_policy, replay, replay_policy, Replay, ReplayOptions, SimDevice};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use experiments::{BackendKind, PolicySpec, Trace, TraceEvent, TraceSource};

fn replay_speed(c: &mut Criterion) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
    let trace = Trace::load(&path).expect("the committed resnet18 trace loads");
    let options = ReplayOptions {
        capacity: None,
        timeline_points: 0,
        time_ops: false,
        check_recorded: false,
        stop_at_first_failure: false,
        record_events: false,
    };
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(trace.events.len() as u64));
    for policy in ["caching", "expandable", "best-fit", "cuda-malloc"] {
        let spec = PolicySpec::parse(policy).unwrap();
        group.bench_function(policy, |b| {
            b.iter(|| {
                let mut device = SimDevice::new(80 << 30);
                replay(&trace, &spec, &mut device, options, &mut (), BackendKind::Sim).unwrap()
            })
        });
    }
    group.finish();
    // PyTorch's defaults on the other recorded workloads, so a speed-up is not one trace's.
    let mut group = c.benchmark_group("replay_caching");
    let spec = PolicySpec::parse("caching").unwrap();
    for (root, workload) in [
        ("h100/alloc-traces", "gpt"),
        ("h100/alloc-traces", "serve"),
        ("h100/alloc-traces", "random"),
        ("h200/alloc-traces-holdout", "unet"),
        ("h200/alloc-traces-holdout", "lstm"),
    ] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../reports/reference")
            .join(root)
            .join(workload)
            .join("default.pickle.gz");
        let trace = Trace::load(&path).expect("the committed recording loads");
        group.throughput(Throughput::Elements(trace.events.len() as u64));
        group.bench_function(workload, |b| {
            b.iter(|| {
                let mut device = SimDevice::new(80 << 30);
                replay(&trace, &spec, &mut device, options, &mut (), BackendKind::Sim).unwrap()
            })
        });
    }
    group.finish();
}

/// The 10 M-event snapshot of `scripts/big_snapshot.py`, built in memory (CI has no such
/// file): the gpt recording's requests, requests to free and frees, what it leaves live freed
/// at its end (in the order it was allocated), repeated under fresh ids up to `events`, under
/// the settings the recording names.
fn big_trace(events: usize) -> Trace {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports/reference/h100/alloc-traces/gpt/default.pickle.gz");
    let recording = Trace::load(&path).expect("the committed gpt recording loads");
    let mut once: Vec<TraceEvent> = recording
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                TraceEvent::Alloc { .. } | TraceEvent::FreeRequested { .. } | TraceEvent::Free { .. }
            )
        })
        .copied()
        .collect();
    let mut live = Vec::new();
    let mut freed = std::collections::HashSet::new();
    for event in &once {
        match *event {
            TraceEvent::Alloc { id, .. } => live.push(id),
            TraceEvent::Free { id } => {
                freed.insert(id);
            }
            _ => {}
        }
    }
    for id in live.into_iter().filter(|id| !freed.contains(id)) {
        once.extend([TraceEvent::FreeRequested { id }, TraceEvent::Free { id }]);
    }
    let ids = once
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Alloc { id, .. } => Some(id + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let shifted = |event: &TraceEvent, by: u64| match *event {
        TraceEvent::Alloc { id, size, stream } => TraceEvent::Alloc {
            id: id + by,
            size,
            stream,
        },
        TraceEvent::FreeRequested { id } => TraceEvent::FreeRequested { id: id + by },
        TraceEvent::Free { id } => TraceEvent::Free { id: id + by },
        other => other,
    };
    let all = (0..).flat_map(|round| once.iter().map(move |e| shifted(e, round * ids)));
    let mut trace = Trace::new("big", TraceSource::PytorchSnapshot, all.take(events).collect());
    trace.allocator_settings = recording.allocator_settings.clone();
    trace
}

/// What users run on a long trace: `vramlab replay BIG.pickle` (the CLI's front and options:
/// the recording's own settings, one request in 16 timed, the timeline, and the
/// smallest-capacity search beside the replay, on the threads rayon has), reading aside. About
/// 2.5 s an iteration on one core: 10 samples.
fn replay_big_speed(c: &mut Criterion) {
    let events = 10_000_000;
    let front = Replay::new(vec![big_trace(events)], None).expect("the big trace replays");
    let mut group = c.benchmark_group("replay_cli");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events as u64));
    group.bench_function("big_10m", |b| b.iter(|| front.run().unwrap()));
    group.finish();
}

/// Trace import: rows (RMM CSV) and events (PyTorch pickle) read per second.
fn import_speed(c: &mut Criterion) {
    let mut csv = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    let rows = 200_000u64;
    for i in 0..rows / 2 {
        let addr = 0x1000_0000 + i * 0x10_0000;
        csv.push_str(&format!(
            "1,10:00:00.{:06},allocate,{addr:#x},{},0x0\n",
            i % 1_000_000,
            512 + i % 4096
        ));
        csv.push_str(&format!(
            "1,10:00:00.{:06},free,{addr:#x},{},0x0\n",
            i % 1_000_000,
            512 + i % 4096
        ));
    }
    let pickle_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
    let pickle = std::fs::read(pickle_path).unwrap();
    let events = Trace::from_bytes("p", &pickle, None).unwrap().events.len() as u64;
    let mut group = c.benchmark_group("import");
    group.throughput(Throughput::Elements(rows));
    group.bench_function("rmm_csv_rows", |b| {
        b.iter(|| Trace::from_bytes("log.csv", csv.as_bytes(), None).unwrap())
    });
    group.throughput(Throughput::Elements(events));
    group.bench_function("pytorch_pickle_events", |b| {
        b.iter(|| Trace::from_bytes("p", &pickle, None).unwrap())
    });
    group.finish();
}

/// Rebuilding a lost start: snapshots of a synthetic training loop (replayed under PyTorch's
/// defaults and written as a snapshot) cut at half their length, at two sizes. The time per
/// event at both says whether the rebuild grows linearly with the trace and its segments.
fn lost_start_speed(c: &mut Criterion) {
    let mut group = c.benchmark_group("lost_start_import");
    for steps in [200u64, 800] {
        let trace = Trace::synthetic(&format!("synthetic:training-loop:steps={steps}"), 7).unwrap();
        let options = ReplayOptions {
            timeline_points: 0,
            time_ops: false,
            record_events: true,
            ..ReplayOptions::default()
        };
        let mut device = SimDevice::new(80 << 30);
        let conf = experiments::AllocConf::default();
        let result = replay_policy(
            &trace,
            "loop",
            build_pytorch_policy(&conf),
            &mut device,
            options,
            &mut (),
            BackendKind::Sim,
        )
        .unwrap();
        let replayed = result.replayed.unwrap();
        let cut = trace.events.len() / 2;
        let window = experiments::ReplayedTrace {
            events: replayed.events.iter().filter(|e| e.at >= cut).copied().collect(),
            segments: replayed.segments.clone(),
            pools: Vec::new(),
            annotations: Vec::new(),
        };
        let bytes = experiments::snapshot_bytes(&window, Some(""));
        let imported = Trace::from_bytes("cut", &bytes, None).unwrap();
        assert!(imported.start.is_some());
        group.throughput(Throughput::Elements(window.events.len() as u64));
        group.bench_function(format!("{}_events", window.events.len()), |b| {
            b.iter(|| Trace::from_bytes("cut", &bytes, None).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, replay_speed, replay_big_speed, import_speed, lost_start_speed);
criterion_main!(benches);
