//! Global-memory coalescing: the 32-byte sectors and 128-byte lines one warp's read touches,
//! and the time to read through an array that way.
//!
//! Lane `i < active` of warp `w` reads `width` bytes at element `w x 32 x stride + offset +
//! i x stride`. Elements are naturally aligned (widths divide 32), so a lane touches one
//! sector. Sectors and lines per warp are what the load/store unit requests; what the kernel
//! costs is what memory delivers: DRAM traffic in `dram_fetch_bytes` pieces when the array
//! is larger than half the L2, else L2 traffic in sectors.

use experiments::{CoalescingPoint, GlobalParams};

/// What one warp's read touches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarpFootprint {
    /// Distinct 32-byte sectors.
    pub sectors: u32,
    /// Distinct 128-byte lines.
    pub lines: u32,
    /// Bytes the active lanes asked for.
    pub useful_bytes: u32,
    /// useful bytes / (sectors x sector bytes), in (0, 1].
    pub efficiency: f64,
}

/// Byte address of lane `lane` of warp `warp`.
fn lane_address(point: &CoalescingPoint, warp: u64, lane: u32) -> u64 {
    (warp * 32 * u64::from(point.stride) + u64::from(point.offset) + u64::from(lane) * u64::from(point.stride))
        * u64::from(point.width)
}

/// Distinct `unit`-byte pieces touched by the active lanes of warps `first..first + count`.
/// Addresses rise with lane and warp (stride >= 1), so a running "last piece" counts them.
fn distinct_pieces(point: &CoalescingPoint, first: u64, count: u64, unit: u64) -> u64 {
    let mut last = u64::MAX;
    let mut pieces = 0;
    for warp in first..first + count {
        for lane in 0..point.active_lanes {
            let piece = lane_address(point, warp, lane) / unit;
            if piece != last {
                pieces += 1;
                last = piece;
            }
        }
    }
    pieces
}

/// Distinct `unit`-byte pieces one warp touches, in closed form: lane addresses rise by
/// `d = stride x width`, so with `d >= unit` every lane has a piece of its own, and otherwise
/// the lanes cover every piece from the first lane's to the last's.
fn pieces_in_warp(point: &CoalescingPoint, unit: u64) -> u64 {
    let step = u64::from(point.stride) * u64::from(point.width);
    if step >= unit {
        return u64::from(point.active_lanes);
    }
    let first = lane_address(point, 0, 0) / unit;
    let last = lane_address(point, 0, point.active_lanes - 1) / unit;
    last - first + 1
}

/// Sectors, lines and efficiency of one warp's read (warp 0; every warp is the same shape).
pub fn warp_footprint(global: &GlobalParams, point: &CoalescingPoint) -> WarpFootprint {
    let sectors = pieces_in_warp(point, u64::from(global.sector_bytes)) as u32;
    let lines = pieces_in_warp(point, u64::from(global.line_bytes)) as u32;
    let useful_bytes = point.active_lanes * point.width;
    WarpFootprint {
        sectors,
        lines,
        useful_bytes,
        efficiency: f64::from(useful_bytes) / f64::from(sectors * global.sector_bytes),
    }
}

/// Warps sampled to estimate traffic over the whole array (neighbouring warps share pieces at
/// their edges, so one warp alone would over-count dense patterns).
const SAMPLE_WARPS: u64 = 64;

/// Bytes memory delivers for one pass over the array, and whether they come from the L2.
pub fn pass_traffic(global: &GlobalParams, point: &CoalescingPoint) -> (f64, bool) {
    let from_l2 = point.bytes <= global.l2_bytes / 2;
    let unit = u64::from(if from_l2 {
        global.sector_bytes
    } else {
        global.dram_fetch_bytes
    });
    let warps = point.warps();
    let sample = SAMPLE_WARPS.min(warps.max(1));
    let per_warp = distinct_pieces(point, 0, sample, unit) as f64 / sample as f64;
    (per_warp * warps as f64 * unit as f64, from_l2)
}

/// Predicted kernel time, microseconds.
pub fn read_time_us(global: &GlobalParams, point: &CoalescingPoint) -> f64 {
    let (bytes, from_l2) = pass_traffic(global, point);
    let gb_per_s = if from_l2 {
        global.l2_gb_per_s
    } else {
        global.dram_gb_per_s
    };
    global.launch_us + f64::from(point.passes()) * bytes / (gb_per_s * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn global(fetch: u32) -> GlobalParams {
        GlobalParams {
            source: "test".into(),
            sector_bytes: 32,
            line_bytes: 128,
            l2_bytes: 50 << 20,
            dram_fetch_bytes: fetch,
            dram_gb_per_s: 3000.0,
            l2_gb_per_s: 8000.0,
            launch_us: 4.0,
            calibration_cases: vec![],
        }
    }

    fn point(width: u32, stride: u32, offset: u32, active_lanes: u32) -> CoalescingPoint {
        CoalescingPoint {
            width,
            stride,
            offset,
            active_lanes,
            bytes: 1 << 30,
        }
    }

    #[test]
    fn textbook_footprints() {
        let g = global(32);
        let f = warp_footprint(&g, &point(4, 1, 0, 32));
        assert_eq!((f.sectors, f.lines, f.efficiency), (4, 1, 1.0), "128 contiguous bytes");
        assert_eq!(
            warp_footprint(&g, &point(4, 1, 1, 32)).sectors,
            5,
            "misaligned by one element"
        );
        assert_eq!(
            warp_footprint(&g, &point(4, 32, 0, 32)).sectors,
            32,
            "one element per line"
        );
        assert_eq!(warp_footprint(&g, &point(4, 32, 0, 32)).lines, 32);
        assert_eq!(
            warp_footprint(&g, &point(16, 1, 0, 32)).sectors,
            16,
            "512 contiguous bytes"
        );
        assert_eq!(warp_footprint(&g, &point(1, 1, 0, 32)).sectors, 1);
        assert!((warp_footprint(&g, &point(4, 2, 0, 32)).efficiency - 0.5).abs() < 1e-12);
    }

    #[test]
    fn dram_fetch_size_sets_sparse_traffic() {
        let sparse = point(4, 32, 0, 32);
        let (t32, _) = pass_traffic(&global(32), &sparse);
        let (t128, _) = pass_traffic(&global(128), &sparse);
        assert!(
            (t128 / t32 - 4.0).abs() < 1e-9,
            "one element per line: 4x the traffic at 128 B"
        );
        let dense = point(4, 1, 0, 32);
        assert!((pass_traffic(&global(32), &dense).0 - pass_traffic(&global(128), &dense).0).abs() < 1.0);
    }

    proptest! {
        #[test]
        fn efficiency_is_in_0_1(width in prop::sample::select(vec![1u32, 2, 4, 8, 16]), stride in 1u32..=64,
                                offset in 0u32..32, active in 1u32..=32) {
            let f = warp_footprint(&global(32), &point(width, stride, offset, active));
            prop_assert!(f.efficiency > 0.0 && f.efficiency <= 1.0, "{f:?}");
            prop_assert!(f.lines <= f.sectors && f.sectors <= active);
        }

        #[test]
        fn closed_form_matches_counting_lane_by_lane(width in prop::sample::select(vec![1u32, 2, 4, 8, 16]), stride in 1u32..=64,
                                                     offset in 0u32..32, active in 1u32..=32, unit in prop::sample::select(vec![32u64, 64, 128])) {
            let p = point(width, stride, offset, active);
            prop_assert_eq!(pieces_in_warp(&p, unit), distinct_pieces(&p, 0, 1, unit));
        }

        #[test]
        fn wider_strides_never_move_fewer_bytes(width in prop::sample::select(vec![1u32, 2, 4, 8, 16]), stride in 1u32..64,
                                                fetch in prop::sample::select(vec![32u32, 64, 128])) {
            // The same warps reading the same useful bytes, spread wider: memory delivers no less.
            let g = global(fetch);
            let bytes = |s: u32| (u64::from(s) << 26) * u64::from(width);
            let narrow = CoalescingPoint { width, stride, offset: 0, active_lanes: 32, bytes: bytes(stride) };
            let wide = CoalescingPoint { stride: stride + 1, bytes: bytes(stride + 1), ..narrow };
            prop_assert_eq!(narrow.warps(), wide.warps());
            prop_assert!(pass_traffic(&g, &wide).0 >= pass_traffic(&g, &narrow).0 * 0.999);
        }
    }
}
