//! The one list of experiment families. Every per-family list in every crate (the [`Family`]
//! enum, the typed [`Workload`], a profile's sections, a calibration's samples, the models the
//! simulator dispatches to, the probes the GPU backend loads) is generated from it by
//! [`for_each_family!`], so a family that is half added fails to compile.
//!
//! Each entry names the family's module (the same name in `experiments`, `sim` and `hw`, each
//! holding that layer's part of the family), its [`Family`] variant and typed point, then, where
//! the family has them, its optional profile section `[Params]` and its calibration samples
//! `{Sample}`.
//!
//! [`Family`]: crate::Family
//! [`Workload`]: crate::Workload

/// Calls `$callback!` with every family's entry, in the order `vramlab list` shows them:
/// `doc, module: Variant(Point) [Section]? {Sample}?`.
#[macro_export]
macro_rules! for_each_family {
    ($callback:ident) => {
        $callback! {
            /// One host <-> device copy of a given size.
            transfer: Transfer($crate::TransferPoint),
            /// A pinned upload split into chunks over several streams, each chunk followed by a kernel.
            overlap: Overlap($crate::OverlapPoint),
            /// How many blocks of a kernel fit on one SM, given its registers, threads and shared memory.
            occupancy: Occupancy($crate::OccupancyPoint),
            /// One warp's shared-memory load: bank conflicts, broadcast, and what they cost.
            banks: Banks($crate::BankPoint) [$crate::BankParams] {$crate::BankSample},
            /// Global-memory reads with a stride, offset and lane mask: sectors, lines and bandwidth.
            coalescing: Coalescing($crate::CoalescingPoint) [$crate::CoalescingParams] {$crate::CoalescingSample},
            /// One thread chasing pointers through a footprint: the L1, L2 and DRAM latency ladder.
            latency: Latency($crate::LatencyPoint) [$crate::LatencyParams] {$crate::LatencySample},
            /// A warp reading 1..32 distinct constant-memory addresses, from a warm or cold cache.
            constant: Constant($crate::ConstantPoint) [$crate::ConstantParams] {$crate::ConstantSample},
            /// A device buffer doubled to a size by one of three strategies, with or without reserving
            /// up front: time per grow and peak device memory.
            growth: Growth($crate::GrowthPoint) [$crate::GrowthParams] {$crate::GrowthSample},
            /// A loop keeping `live` values in registers, compiled with a register cap: what spills to
            /// local memory and what the local traffic costs per iteration.
            spills: Spills($crate::SpillPoint) [$crate::SpillParams] {$crate::SpillSample},
            /// A kernel reading managed memory last written by the host: pages migrated on demand
            /// (faults) or prefetched first.
            migration: Migration($crate::MigrationPoint) [$crate::MigrationParams] {$crate::MigrationSample},
            /// One GPU reading another's memory: a VMM allocation mapped for both, or a cuMemAlloc
            /// buffer with peer access enabled.
            peer: Peer($crate::PeerPoint) [$crate::PeerParams] {$crate::PeerSample},
        }
    };
}

/// Section (and calibration part) names from before each family had one name in every layer,
/// and the family's name that replaced them.
pub const FORMER_NAMES: [(&str, &str); 2] = [("shared", "banks"), ("global", "coalescing")];
