//! How fast the models evaluate one warp access (issue 3 asks >= 50 million per second on
//! one core for the bank and coalescing models). `cargo bench -p sim`; criterion reports
//! throughput in warp accesses per second.

// criterion_group! and criterion_main! generate functions that cannot carry doc comments.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use experiments::{BankPoint, CoalescingPoint, Profile};

/// 1024 bank patterns cycling through every width and stride 0..64 the suite uses.
fn bank_points() -> Vec<BankPoint> {
    (0..1024u32)
        .map(|i| BankPoint {
            width: [4, 8, 16][(i % 3) as usize],
            stride: (i * 7) % 65,
        })
        .collect()
}

fn banks(c: &mut Criterion) {
    let shared = Profile::find("h100")
        .expect("built-in profile")
        .banks
        .expect("h100 has [banks]");
    let points = bank_points();
    let mut group = c.benchmark_group("banks");
    group.throughput(Throughput::Elements(points.len() as u64));
    group.bench_function("cycles per warp access", |b| {
        b.iter(|| {
            points
                .iter()
                .map(|p| sim::bank_cycles(&shared, black_box(p)))
                .sum::<f64>()
        })
    });
    group.finish();
}

/// 1024 read patterns over every width, strides 1..64, offsets and lane masks.
fn coalescing_points() -> Vec<CoalescingPoint> {
    (0..1024u32)
        .map(|i| CoalescingPoint {
            width: [1, 2, 4, 8, 16][(i % 5) as usize],
            stride: 1 + (i * 7) % 64,
            offset: i % 3,
            active_lanes: 32 - (i % 4) * 8,
            bytes: 1 << 30,
            dynamic_shared: 0,
        })
        .collect()
}

fn coalescing(c: &mut Criterion) {
    let global = Profile::find("h100")
        .expect("built-in profile")
        .coalescing
        .expect("h100 has [coalescing]");
    let points = coalescing_points();
    let mut group = c.benchmark_group("coalescing");
    group.throughput(Throughput::Elements(points.len() as u64));
    group.bench_function("sectors per warp access", |b| {
        b.iter(|| {
            points
                .iter()
                .map(|p| sim::warp_footprint(&global, black_box(p)).sectors)
                .sum::<u32>()
        })
    });
    group.finish();
}

criterion_group!(models, banks, coalescing);
criterion_main!(models);
