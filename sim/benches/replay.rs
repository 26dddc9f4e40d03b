//! Replay speed: trace events (allocations and frees) per second through each PyTorch model,
//! on the resnet18 trace, bookkeeping only (no timeline, no per-operation clock).

// criterion_group! and criterion_main! generate functions that cannot carry doc comments.
#![allow(missing_docs)]

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use experiments::{BackendKind, PolicySpec, Trace};
use sim::{replay, ReplayOptions, SimDevice};

fn replay_speed(c: &mut Criterion) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
    let trace = Trace::load(&path).expect("the committed resnet18 trace loads");
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(trace.events.len() as u64));
    let options = ReplayOptions {
        capacity: None,
        timeline_points: 0,
        time_ops: false,
        check_recorded: false,
        stop_at_first_failure: false,
        record_events: false,
    };
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
}

criterion_group!(benches, replay_speed);
criterion_main!(benches);
