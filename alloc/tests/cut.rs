//! A trace cut anywhere: the starting state rebuilt from the rest and the final segments, and
//! the rest replayed from it, must be the whole trace's replay from that point on, statistic
//! for statistic (issue 21). The cut snapshots are written from a replay of the whole trace
//! (its operations after the cut, its final segments), as a job's ring buffer would leave them.

use std::path::PathBuf;

mod common;

use experiments::pytorch::TraceAction;
use experiments::{snapshot_bytes, PolicyResult, ReplayedTrace, Trace, Verdict};
use proptest::prelude::*;

fn load(path: &str) -> Trace {
    Trace::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path)).unwrap()
}

fn replay(trace: &Trace, record: bool) -> PolicyResult {
    common::replay_own(trace, None, record)
}

/// The whole trace's replay, kept to cut.
struct Whole {
    result: PolicyResult,
    replayed: ReplayedTrace,
    settings: Option<String>,
}

fn whole(path: &str) -> Whole {
    let trace = load(path);
    let mut result = replay(&trace, true);
    let replayed = result.replayed.take().unwrap();
    Whole {
        result,
        replayed,
        settings: trace.allocator_settings.clone(),
    }
}

/// Cuts `whole` before trace event `cut` and checks the window against it.
fn check_cut(whole: &Whole, cut: usize) -> Result<(), TestCaseError> {
    let window = ReplayedTrace {
        events: whole.replayed.events.iter().filter(|e| e.at >= cut).copied().collect(),
        segments: whole.replayed.segments.clone(),
        pools: whole.replayed.pools.clone(),
        annotations: Vec::new(),
    };
    let bytes = snapshot_bytes(&window, whole.settings.as_deref());
    let trace = Trace::from_bytes("cut", &bytes, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let result = replay(&trace, false);
    // The whole replay's figures from just before the cut to the end.
    let from = cut.saturating_sub(1);
    let timeline = &whole.result.timeline;
    let later = || timeline.iter().filter(|p| p.event >= from);
    let peak_reserved = later().map(|p| p.reserved).max().unwrap();
    let peak_allocated = later().map(|p| p.allocated).max().unwrap();
    let slack = trace.start.as_ref().map_or(0, |s| s.undetermined_bytes);
    if slack > 0 {
        // Tails the snapshot does not record, and it says so: the allocated bytes at the start
        // are short by at most what it says (what follows may part from the whole replay).
        prop_assert!(
            trace.unknowns.iter().any(|u| u.contains("unsplit tail")),
            "{:?}",
            trace.unknowns
        );
        let at_cut = timeline.iter().find(|p| p.event == from).unwrap().allocated;
        let started = trace.start.as_ref().unwrap().allocated();
        prop_assert!(
            started <= at_cut && started + slack >= at_cut,
            "{started} {at_cut} {slack}"
        );
        // Where every allocation was still placed as in the whole replay, only the allocated
        // bytes can be short: the device memory is exact.
        if result.recorded_check.verdict != Verdict::Differs && !trace.alloc_addrs.is_empty() {
            prop_assert_eq!(result.peak_reserved_bytes, peak_reserved);
            prop_assert_eq!(
                result.pytorch_stats.unwrap().reserved_current,
                whole.result.pytorch_stats.unwrap().reserved_current
            );
        }
        return Ok(());
    }
    let check = &result.recorded_check;
    if trace.start.as_ref().is_some_and(|s| s.undetermined_pools > 0) {
        // Segments whose pool nothing in the window tells, and it says so: the check may part.
        prop_assert!(trace.unknowns.iter().any(|u| u.contains("their pool cannot be told")));
        return Ok(());
    }
    if trace.records_device_operations() {
        prop_assert_eq!(check.verdict, Verdict::Match, "{}", check.why);
    } else {
        prop_assert_eq!(check.verdict, Verdict::Unchecked);
        prop_assert!(
            check.why.contains("the segments it ends with are the snapshot's"),
            "{}",
            check.why
        );
    }
    let (ours, theirs) = (result.pytorch_stats.unwrap(), whole.result.pytorch_stats.unwrap());
    prop_assert_eq!(result.peak_reserved_bytes, peak_reserved);
    prop_assert_eq!(ours.reserved_peak, peak_reserved);
    prop_assert_eq!(result.peak_allocated_bytes, peak_allocated);
    prop_assert_eq!(ours.allocated_peak, peak_allocated);
    prop_assert_eq!(ours.reserved_current, theirs.reserved_current);
    prop_assert_eq!(ours.allocated_current, theirs.allocated_current);
    let operations_after = window
        .events
        .iter()
        .filter(|e| matches!(e.action, TraceAction::SegmentAlloc | TraceAction::SegmentMap))
        .count() as u64;
    prop_assert_eq!(ours.num_device_alloc, operations_after);
    prop_assert_eq!(result.segment_sizes.len() as u64, operations_after);
    Ok(())
}

/// Traces with every kind of state a cut can fall in: default and expandable segments, a CUDA
/// graph's private pool and eager work beside it, a MemPool, two streams with frees that
/// complete late, empty_cache calls. The edge cases run on these.
const TRACES: [&str; 6] = [
    "tests/traces/resnet18_default.pickle",
    "reports/reference/h100/real-jobs/gpt-expandable-lost-11000.pickle.gz",
    "reports/reference/h100/real-jobs/graph-keep.pickle.gz",
    "reports/reference/h100/real-jobs/mempool-keep.pickle.gz",
    "reports/reference/h100/real-jobs/two-streams.pickle.gz",
    "reports/reference/h100/real-jobs/graph-del-empty-cache.pickle.gz",
];

/// Every committed snapshot: the test traces, the recordings of every setting, the real jobs.
fn committed() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out: Vec<String> = TRACES[..1].iter().map(|s| s.to_string()).collect();
    out.push("tests/traces/resnet18_expandable.pickle".to_string());
    for dir in [
        "reports/reference/h100/alloc-traces",
        "reports/reference/h200/alloc-traces-holdout",
        "reports/reference/h100/real-jobs",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(folder) = stack.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.to_string_lossy().ends_with(".pickle.gz") {
                    out.push(path.strip_prefix(&root).unwrap().to_string_lossy().to_string());
                }
            }
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_trace_cut_anywhere_replays_as_the_whole_from_there(which in 0usize..1000, at in 0.0f64..1.0) {
        thread_local! {
            static FILES: Vec<String> = committed();
            static WHOLE: std::cell::RefCell<std::collections::HashMap<usize, Whole>> = Default::default();
        }
        let files = FILES.with(|f| f.clone());
        prop_assert!(files.len() > 100, "{} committed snapshots", files.len());
        let which = which % files.len();
        WHOLE.with(|cache| {
            let mut cache = cache.borrow_mut();
            let whole = cache.entry(which).or_insert_with(|| whole(&files[which]));
            let events = whole.result.timeline.len();
            let cut = 1 + ((events - 1) as f64 * at) as usize;
            check_cut(whole, cut).map_err(|e| TestCaseError::fail(format!("{} cut at {cut}: {e}", files[which])))
        })?;
    }
}

/// The edges: a cut before the first event is the whole trace, one before the last leaves a
/// single event.
#[test]
fn cuts_at_the_edges() {
    for path in TRACES {
        let whole = whole(path);
        let events = whole.result.timeline.len();
        for cut in [1, events / 2, events - 1] {
            check_cut(&whole, cut).unwrap_or_else(|e| panic!("{path} cut at {cut}: {e}"));
        }
    }
}

/// Every committed snapshot cut at nine evenly spread points: each cut is exact, or says what it
/// leaves undetermined (tails, pools) and keeps to that bound. Prints how often each happens.
#[test]
fn every_committed_snapshot_cut_at_nine_points() {
    let files = committed();
    let (mut exact, mut declared) = (0, 0);
    // A debug build cuts one file in seven; a release build, or VRAMLAB_FULL_CHECKS (CI), all.
    let full = !cfg!(debug_assertions) || std::env::var_os("VRAMLAB_FULL_CHECKS").is_some();
    for file in files.iter().step_by(if full { 1 } else { 7 }) {
        let whole = whole(file);
        let events = whole.result.timeline.len();
        for k in 1..10 {
            let cut = 1 + (events - 1) * k / 10;
            let window = ReplayedTrace {
                events: whole.replayed.events.iter().filter(|e| e.at >= cut).copied().collect(),
                segments: whole.replayed.segments.clone(),
                pools: whole.replayed.pools.clone(),
                annotations: Vec::new(),
            };
            let trace = Trace::from_bytes("cut", &snapshot_bytes(&window, whole.settings.as_deref()), None).unwrap();
            let undetermined = trace
                .start
                .as_ref()
                .is_some_and(|s| s.undetermined_bytes > 0 || s.undetermined_pools > 0);
            if undetermined {
                declared += 1;
            } else {
                exact += 1;
            }
            check_cut(&whole, cut).unwrap_or_else(|e| panic!("{file} cut at {cut}: {e}"));
        }
    }
    println!("cuts: {exact} exact, {declared} with something undetermined, said so");
    assert!(
        exact > 0 && declared > 0,
        "both kinds are exercised: {exact} exact, {declared} undetermined"
    );
}
