//! Invariants every policy keeps, on random request sequences.

use std::collections::BTreeMap;

use experiments::{PolicySpec, POLICIES};
use proptest::prelude::*;

use super::{build_policy, Block, Metered, Policy, SimDevice};

/// Every policy, with arenas small enough that random sequences run out of them.
fn specs() -> Vec<PolicySpec> {
    POLICIES
        .iter()
        .map(|p| match p.name {
            "bump" => PolicySpec::parse("bump:arena=256MiB").unwrap(),
            "buddy" => PolicySpec::parse("buddy:arena=128MiB").unwrap(),
            name => PolicySpec::parse(name).unwrap(),
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Alloc { size: u64, stream: u64 },
    Free { pick: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..27, 0u64..2).prop_map(|(log, stream)| Op::Alloc { size: (1u64 << log) + u64::from(log) * 37, stream }),
        2 => any::<usize>().prop_map(|pick| Op::Free { pick }),
    ]
}

struct Checked {
    live: BTreeMap<u64, u64>,
    allocated: u64,
}

impl Checked {
    fn insert(&mut self, block: Block, size: u64, policy: &dyn Policy, name: &str) -> Result<(), TestCaseError> {
        prop_assert!(
            block.size >= size,
            "{name}: block {} for a request of {size}",
            block.size
        );
        prop_assert!(
            block.addr.is_multiple_of(policy.alignment()),
            "{name}: {:#x} misaligned",
            block.addr
        );
        let end = block.addr + block.size;
        if let Some((&a, &e)) = self.live.range(..end).next_back() {
            prop_assert!(
                e <= block.addr || a >= end,
                "{name}: [{:#x},{end:#x}) overlaps [{a:#x},{e:#x})",
                block.addr
            );
        }
        self.live.insert(block.addr, end);
        self.allocated += block.size;
        Ok(())
    }
}

fn run(spec: &PolicySpec, ops: &[Op], capacity: Option<u64>) -> Result<(), TestCaseError> {
    let name = spec.label();
    let mut policy = build_policy(spec).unwrap();
    let mut device = SimDevice::new(1 << 34);
    let mut meter = Metered::new(&mut device, capacity);
    let mut blocks: Vec<Block> = Vec::new();
    let mut checked = Checked {
        live: BTreeMap::new(),
        allocated: 0,
    };
    for op in ops {
        match *op {
            Op::Alloc { size, stream } => {
                // Exhaustion must be a failed request: an Err here, never a panic.
                if let Ok(block) = policy.allocate(&mut meter, size, stream) {
                    checked.insert(block, size, policy.as_ref(), &name)?;
                    blocks.push(block);
                }
            }
            Op::Free { pick } if !blocks.is_empty() => {
                let block = blocks.swap_remove(pick % blocks.len());
                checked.live.remove(&block.addr);
                checked.allocated -= block.size;
                policy.free(&mut meter, block);
            }
            Op::Free { .. } => {}
        }
        let reserved = meter.reserved();
        prop_assert!(
            checked.allocated <= reserved,
            "{name}: allocated {} > reserved {reserved}",
            checked.allocated
        );
        prop_assert!(
            reserved <= capacity.unwrap_or(u64::MAX),
            "{name}: reserved {reserved} over capacity"
        );
        let free = policy.free_space();
        prop_assert!(
            free.largest <= free.total && free.total <= reserved - checked.allocated,
            "{name}: {free:?}"
        );
    }
    for block in blocks.drain(..) {
        policy.free(&mut meter, block);
    }
    let free = policy.free_space();
    prop_assert_eq!(
        free.total,
        meter.reserved(),
        "{}: everything freed, yet not all reserved memory is free",
        &name
    );
    policy.release_cached(&mut meter);
    prop_assert_eq!(meter.reserved(), 0, "{}: memory kept after release", &name);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn policies_keep_their_invariants(
        ops in prop::collection::vec(op(), 1..300),
        capacity in prop_oneof![Just(None), (24u64..2048).prop_map(|mib| Some(mib << 20))],
    ) {
        for spec in specs() {
            run(&spec, &ops, capacity)?;
        }
    }
}

#[test]
fn bump_commit_freezes_and_release_all_resets() {
    let mut bump = super::simple::Bump::new(1 << 20, 256, false);
    let mut device = SimDevice::new(1 << 30);
    let first = bump.allocate(&mut device, 100, 0).unwrap();
    let second = bump.allocate(&mut device, 100, 0).unwrap();
    assert_eq!(second.addr - first.addr, 256);
    let err = bump.allocate(&mut device, 2 << 20, 0).unwrap_err().to_string();
    assert!(
        err.contains("2 MiB requested at offset 512 B of a 1 MiB arena"),
        "{err}"
    );
    bump.commit();
    assert!(bump.allocate(&mut device, 1, 0).is_err());
    bump.release_all();
    assert_eq!(bump.allocate(&mut device, 1, 0).unwrap().addr, first.addr);
}

#[test]
fn buckets_count_hits_misses_and_returns() {
    let mut policy = build_policy(&PolicySpec::parse("buckets").unwrap()).unwrap();
    let mut device = SimDevice::new(1 << 30);
    let a = policy.allocate(&mut device, 1000, 0).unwrap();
    assert_eq!(a.size, 1024);
    policy.free(&mut device, a);
    let b = policy.allocate(&mut device, 600, 0).unwrap();
    assert_eq!(b.addr, a.addr);
    let counters: BTreeMap<_, _> = policy.counters().into_iter().collect();
    assert_eq!((counters["hits"], counters["misses"], counters["returns"]), (1, 1, 1));
}

#[test]
fn caching_splits_small_segments_and_reuses_best_fit() {
    let mut policy = build_policy(&PolicySpec::parse("caching").unwrap()).unwrap();
    let mut device = SimDevice::new(1 << 30);
    let mut meter = Metered::new(&mut device, None);
    let a = policy.allocate(&mut meter, 1, 0).unwrap();
    let b = policy.allocate(&mut meter, 1000, 0).unwrap();
    assert_eq!((a.size, b.size, b.addr - a.addr), (512, 1024, 512));
    let big = policy.allocate(&mut meter, 5 << 20, 0).unwrap();
    assert_eq!(meter.sizes(), [2 << 20, 20 << 20]);
    policy.free(&mut meter, big);
    // Best fit takes the cached 20 MiB block for 12 MiB and splits off the 8 MiB rest.
    let c = policy.allocate(&mut meter, 12 << 20, 0).unwrap();
    assert_eq!((c.addr, c.size, meter.sizes().len()), (big.addr, 12 << 20, 2));
}

/// A request no device could hold (up to 2^64 - 1 bytes) among live blocks is a refused
/// request for every policy and PyTorch setting, with and without a cap: no panic, no wrapped
/// size, the other blocks intact and everything given back at the end.
#[test]
fn impossible_requests_are_refused_by_every_policy() {
    use experiments::{AllocConf, BackendKind, Trace, TraceEvent, TraceSource};

    let alloc = |id, size| TraceEvent::Alloc { id, size, stream: 0 };
    let trace = Trace::new(
        "impossible",
        TraceSource::Vramlab,
        vec![
            alloc(0, 3 << 20),
            alloc(1, 4096),
            alloc(2, u64::MAX),
            alloc(3, u64::MAX - 511),
            alloc(4, 1 << 62),
            TraceEvent::Free { id: 2 },
            TraceEvent::Free { id: 0 },
            alloc(5, 1 << 20),
            TraceEvent::Free { id: 1 },
            TraceEvent::Free { id: 5 },
        ],
    );
    type Build = Box<dyn Fn() -> Box<dyn Policy>>;
    let mut builders: Vec<(String, Build)> = specs()
        .into_iter()
        .map(|spec| {
            let label = spec.label();
            let build: Build = Box::new(move || build_policy(&spec).unwrap());
            (label, build)
        })
        .collect();
    for settings in [
        "roundup_power2_divisions:4",
        "expandable_segments:True",
        "max_split_size_mb:64,garbage_collection_threshold:0.5",
    ] {
        let conf = AllocConf::parse(settings).unwrap();
        builders.push((settings.into(), Box::new(move || super::build_pytorch_policy(&conf))));
    }
    for (label, build) in &builders {
        for capacity in [None, Some(1u64 << 30)] {
            let mut device = SimDevice::new(80 << 30);
            let options = super::ReplayOptions {
                capacity,
                ..super::ReplayOptions::default()
            };
            let result = super::replay_policy(&trace, label, build(), &mut device, options, &mut (), BackendKind::Sim)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(
                result.failed_allocs, 3,
                "{label}, cap {capacity:?}: {:?}",
                result.first_failure
            );
            assert!(
                result.peak_reserved_bytes < 1 << 40,
                "{label}: {}",
                result.peak_reserved_bytes
            );
            assert_eq!(result.counters["held_after_release"], 0, "{label}");
        }
    }
}

#[test]
fn a_device_without_a_recording_places_segments_as_a_fresh_processs_driver_does() {
    use super::DeviceMemory;
    let mut device = SimDevice::new(80 << 30);
    let a = device.allocate(20 << 20).unwrap();
    let b = device.allocate(3 << 20).unwrap();
    // The start's free range fills from the bottom up, in 2 MiB granules.
    assert_eq!(b, a + (20 << 20));
    assert_eq!(device.allocate(1 << 20).unwrap(), b + (4 << 20));
    // What is given back is reused first (the lowest free range that fits).
    device.free(a, 20 << 20);
    assert_eq!(device.allocate(16 << 20).unwrap(), a);
    // Reservations (expandable segments) are counted apart, and never meet a segment.
    let reserved = device.reserve(1 << 30).unwrap();
    assert!(reserved + (1 << 30) <= a || reserved >= b + (6 << 20));
}

#[test]
fn a_reset_of_the_peaks_starts_pytorchs_peaks_again_and_leaves_the_replays_own() {
    use experiments::{AllocConf, BackendKind, Trace, TraceEvent, TraceSource};

    // 8 MiB held and freed, the peaks reset, then 1 MiB: PyTorch's memory_stats() after the
    // reset (CUDACachingAllocator.cpp, resetPeakStats) reports peaks of the 1 MiB and of what
    // was still reserved; the replay's own peak is the whole program's.
    let alloc = |id, size| TraceEvent::Alloc { id, size, stream: 0 };
    let mut trace = Trace::new(
        "reset",
        TraceSource::Vramlab,
        vec![
            alloc(0, 8 << 20),
            TraceEvent::Free { id: 0 },
            TraceEvent::EmptyCache { within_request: false },
            alloc(1, 1 << 20),
            TraceEvent::Free { id: 1 },
        ],
    );
    let run = |trace: &Trace| {
        let conf = AllocConf::parse("").unwrap();
        let mut device = SimDevice::new(80 << 30);
        super::replay_policy(
            trace,
            "reset",
            super::build_pytorch_policy(&conf),
            &mut device,
            super::ReplayOptions::default(),
            &mut (),
            BackendKind::Sim,
        )
        .unwrap()
    };
    let whole = run(&trace);
    assert_eq!(whole.pytorch_stats.as_ref().unwrap().allocated_peak, 8 << 20);
    trace.peak_resets = vec![3];
    let reset = run(&trace);
    let stats = reset.pytorch_stats.as_ref().unwrap();
    assert_eq!(stats.allocated_peak, 1 << 20);
    assert_eq!(stats.reserved_peak, 2 << 20);
    assert_eq!(reset.peak_allocated_bytes, 8 << 20);
    assert_eq!(reset.peak_reserved_bytes, whole.peak_reserved_bytes);
}
