//! Replays under the settings of PyTorch releases after 2.11 (issue 37): what each key the
//! releases added does to a replay, and which release a replay names.

use std::path::PathBuf;

use allocators::Replay;
use experiments::{Profile, TorchRelease, Trace, DEFAULT_PROFILE};

fn resnet() -> Vec<Trace> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
    Trace::load_input(path.to_str().unwrap(), None, 0).unwrap()
}

fn run(settings: &str, capacity: Option<u64>, torch: Option<&str>) -> experiments::ReplayRecord {
    Replay::new(resnet(), None)
        .unwrap()
        .capacity(capacity)
        .unwrap()
        .torch(torch)
        .unwrap()
        .policies(None, &[settings.to_string()])
        .run()
        .unwrap()
}

/// `per_process_memory_fraction` (c10/cuda/CUDAAllocatorConfig.h:161 at 2.11, :173 at
/// 2.12-2.14, :258 at 2.15) is `setMemoryFraction` at the allocator's construction: the
/// replay under it makes the decisions of a replay under the cap fraction x device memory.
#[test]
fn a_fraction_replays_as_the_cap_it_sets_in_every_release() {
    let device = Profile::find(DEFAULT_PROFILE).unwrap().device.memory_bytes;
    let unlimited = run("", None, None);
    let peak = unlimited.results[0].peak_reserved_bytes;
    // A fraction whose cap lies below the trace's peak: some requests must fail.
    let fraction = (peak as f64 / device as f64) / 2.0;
    let cap = (fraction * device as f64) as u64;
    let by_cap = run("", Some(cap), None);
    assert!(by_cap.results[0].failed_allocs > 0);
    for release in TorchRelease::ALL {
        let record = run(
            &format!("per_process_memory_fraction:{fraction}"),
            None,
            Some(release.name()),
        );
        let (ours, theirs) = (&record.results[0], &by_cap.results[0]);
        assert_eq!(ours.failed_allocs, theirs.failed_allocs, "{release}");
        assert_eq!(ours.peak_reserved_bytes, theirs.peak_reserved_bytes, "{release}");
        assert_eq!(record.torch.as_ref().unwrap().release, release);
        assert!(
            record
                .notes
                .iter()
                .any(|n| n.contains(&format!("capped at {fraction}"))),
            "{:?}",
            record.notes
        );
    }
    // A smaller cap given as well wins.
    let both = run(&format!("per_process_memory_fraction:{fraction}"), Some(cap / 2), None);
    assert_eq!(
        both.results[0].failed_allocs,
        run("", Some(cap / 2), None).results[0].failed_allocs
    );
}

/// 2.15's `expandable_segments_reserve` (c10/cuda/CUDAAllocatorConfig.h:261 at 2.15) bounds the
/// address range a segment reserves (`clamp_reserve_bytes`, :126): a reserve below what one
/// segment grows to changes the device operations; one above 9/8 of the device changes nothing.
#[test]
fn a_small_reserve_makes_more_expandable_segments_under_2_15() {
    let full = run("expandable_segments:True", None, Some("2.15"));
    let small = run(
        "expandable_segments:True,expandable_segments_reserve:0.5G",
        None,
        Some("2.15"),
    );
    let segments = |r: &experiments::ReplayRecord| r.results[0].pytorch_stats.unwrap().num_device_alloc;
    assert_ne!(segments(&small), segments(&full));
    // A reserve above 9/8 of the device is clamped to it: the same replay as none set.
    let clamped = run(
        "expandable_segments:True,expandable_segments_reserve:2",
        None,
        Some("2.15"),
    );
    assert_eq!(clamped.results[0].pytorch_stats, full.results[0].pytorch_stats);
    assert_eq!(
        clamped.results[0].peak_reserved_bytes,
        full.results[0].peak_reserved_bytes
    );
    // 2.14 does not know the key: refused in PyTorch's words.
    let e = Replay::new(resnet(), None)
        .unwrap()
        .torch(Some("2.14"))
        .unwrap()
        .policies(None, &["expandable_segments_reserve:0.5".to_string()])
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Unrecognized key 'expandable_segments_reserve' in CUDA allocator config. (PyTorch 2.14"),
        "{e}"
    );
}

/// Host-only keys (pinned memory) change nothing on the device, and the replay says so.
#[test]
fn host_only_keys_leave_the_device_figures_and_say_so() {
    // Not the recording's own settings (those replay over the recorded addresses): a key
    // that acts only under a cap, and no cap.
    let plain = run("garbage_collection_threshold:0.5", None, Some("2.13"));
    let pinned = run(
        "garbage_collection_threshold:0.5,pinned_max_round_threshold_mb:64,pinned_free_catch_all:True",
        None,
        Some("2.13"),
    );
    assert_eq!(
        plain.results[0].peak_reserved_bytes,
        pinned.results[0].peak_reserved_bytes
    );
    assert_eq!(plain.results[0].pytorch_stats, pinned.results[0].pytorch_stats);
    assert!(pinned
        .notes
        .iter()
        .any(|n| n.contains("pinned_free_catch_all:True") && n.contains("no effect on the device replay")));
}
