//! The caching-allocator models against what PyTorch itself reported for a real trace.

use std::path::PathBuf;

use allocators::{replay, ReplayOptions, SimDevice};
use experiments::{BackendKind, PolicyResult, PolicySpec, Trace};

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces")
}

/// A figure PyTorch reported, from the JSON it was recorded with.
fn reported(file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(traces().join(file)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key].as_u64().unwrap_or_else(|| panic!("{file} has no {key}"))
}

fn run(trace: &Trace, policy: &str) -> PolicyResult {
    // The trace was recorded on an H200: 141 GiB sizes the expandable segments' address range.
    let mut device = SimDevice::new(141 << 30);
    replay(
        trace,
        &PolicySpec::parse(policy).unwrap(),
        &mut device,
        ReplayOptions::default(),
        &mut (),
        BackendKind::Sim,
    )
    .unwrap()
}

fn within(value: u64, target: u64, tolerance: f64) -> bool {
    (value as f64 - target as f64).abs() <= tolerance * target as f64
}

#[test]
fn resnet18_caching_and_expandable_match_pytorch() {
    let trace = Trace::load(&traces().join("resnet18_default.pickle")).unwrap();
    assert_eq!(trace.warnings.count, 0, "{:?}", trace.warnings);
    let caching = run(&trace, "caching");
    let expandable = run(&trace, "expandable");
    let default_reserved = reported("resnet18_default.json", "max_reserved_bytes");
    let expandable_reserved = reported("resnet18_expandable.json", "max_reserved_bytes");
    let allocated = reported("resnet18_default.json", "max_allocated_bytes");
    eprintln!(
        "caching reserved {} (PyTorch {default_reserved}), expandable reserved {} (PyTorch {expandable_reserved}), allocated {} / {} (PyTorch {allocated}), segments matched {:?} of {}",
        caching.peak_reserved_bytes,
        expandable.peak_reserved_bytes,
        caching.peak_allocated_bytes,
        expandable.peak_allocated_bytes,
        caching.segments_matched,
        trace.segment_sizes.len()
    );
    assert!(within(caching.peak_reserved_bytes, default_reserved, 0.05));
    assert!(within(expandable.peak_reserved_bytes, expandable_reserved, 0.05));
    assert!(within(caching.peak_allocated_bytes, allocated, 0.01));
    assert!(within(expandable.peak_allocated_bytes, allocated, 0.01));
    assert_eq!(caching.failed_allocs + expandable.failed_allocs, 0);
}

#[test]
fn resnet18_recorded_with_expandable_segments_replays_to_its_own_figures() {
    let trace = Trace::load(&traces().join("resnet18_expandable.pickle")).unwrap();
    let expandable = run(&trace, "expandable");
    let reserved = reported("resnet18_expandable.json", "max_reserved_bytes");
    let allocated = reported("resnet18_expandable.json", "max_allocated_bytes");
    eprintln!(
        "expandable trace: reserved {} (PyTorch {reserved}), allocated {} (PyTorch {allocated})",
        expandable.peak_reserved_bytes, expandable.peak_allocated_bytes
    );
    assert!(within(expandable.peak_reserved_bytes, reserved, 0.05));
    assert!(within(expandable.peak_allocated_bytes, allocated, 0.01));
}
