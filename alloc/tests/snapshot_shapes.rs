//! Snapshot shapes that public repositories hold (issue 37 section 2), from
//! `../shared/traces/wild/` (skipped, with a message, where a fresh clone has none): the bare
//! list of segments `torch.cuda.memory_snapshot()` returns, and PyTorch 2.0's shape. The
//! figures checked are those `SOURCES.md` there gives, read with Python's own unpickler.

use std::path::PathBuf;

use allocators::Replay;
use experiments::Trace;

fn wild(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/traces/wild")
        .join(name);
    if !path.exists() {
        eprintln!(
            "skipped: {} is missing (the wild snapshots sit in ../shared beside the checkout)",
            path.display()
        );
        return None;
    }
    Some(path)
}

const MIB: u64 = 1 << 20;

/// `layoutedit_memory_snapshot`: a bare list of 255 segments, all on cuda:1, 3480 MiB
/// (SOURCES.md). Once refused as "not a PyTorch memory snapshot"; now the state at the end,
/// per pool and stream, whose sums are those figures.
#[test]
fn a_bare_list_of_segments_is_reported_not_refused() {
    let Some(path) = wild("layoutedit_memory_snapshot.pickle.gz") else {
        return;
    };
    let record = Replay::new(Trace::load_all(&path, None).unwrap(), None)
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(record.devices.len(), 2, "devices 0 and 1");
    assert!(record.devices[0].final_state.is_empty(), "nothing on cuda:0");
    let state = &record.devices[1].final_state;
    assert!(!state.is_empty());
    let segments: usize = state.iter().map(|p| p.segments).sum();
    let reserved: u64 = state.iter().map(|p| p.reserved_bytes).sum();
    assert_eq!((segments, reserved), (255, 3480 * MIB));
    for pool in state {
        assert!(
            pool.allocated_bytes + pool.free_bytes <= pool.reserved_bytes,
            "{pool:?}"
        );
        assert!(pool.largest_free_bytes <= pool.free_bytes, "{pool:?}");
        assert!((0.0..1.0).contains(&pool.fragmentation), "{pool:?}");
    }
    assert!(record.devices[1]
        .notes
        .iter()
        .any(|n| n.contains("a bare list of segments")));
}

/// `llminference_*`: PyTorch 2.0's shape (176 segments of 11296 MiB, and 266 of 6350 MiB),
/// said to be 2.0's, its segments all read.
#[test]
fn pytorch_2_0s_snapshots_are_said_to_be_2_0s() {
    for (name, segments, mib) in [
        ("llminference_oom_snapshot.pickle.gz", 176, 11296),
        ("llminference_1.3b_snapshot.pickle.gz", 266, 6350),
    ] {
        let Some(path) = wild(name) else {
            return;
        };
        let traces = Trace::load_all(&path, None).unwrap();
        let trace = &traces[0];
        assert!(
            trace.unknowns.iter().any(|u| u.contains("PyTorch 2.0's shape")),
            "{name}: {:?}",
            trace.unknowns
        );
        let reserved: u64 = trace.final_segments.iter().map(|s| s.size).sum();
        assert_eq!(trace.final_segments.len(), segments, "{name}");
        assert_eq!(reserved / MIB, mib, "{name}");
    }
}
