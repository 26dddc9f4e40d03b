//! Global-memory coalescing: the 32-byte sectors and 128-byte lines one warp's read touches,
//! and the time to read through an array that way.
//!
//! Lane `i < active` of warp `w` reads `width` bytes at element `w x 32 x stride + offset +
//! i x stride`. Elements are naturally aligned (widths divide 32), so a lane touches one
//! sector. Sectors and lines per warp are what the load/store unit requests; what the kernel
//! costs is what memory delivers: DRAM traffic in `dram_fetch_bytes` pieces when the array
//! is larger than half the L2, else L2 traffic in sectors. The kernel's time is bounded by
//! that traffic over bandwidth and by the latency of each warp's loads (see [`ReadTime`]).

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{args, fail, metric, strings, Teacher};
use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{explained, fitted_or_kept, int, params, required, Model};

use crate::solve::minimise_positive;
use std::fmt::Write as _;

use experiments::CoalescingSample;

use experiments::{
    format_bytes, CoalescingParams, CoalescingPoint, OccupancyPoint, SmParams, READ_KERNEL_BLOCKS_PER_SM,
    READ_KERNEL_THREADS,
};

use crate::occupancy::occupancy;

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
pub fn warp_footprint(global: &CoalescingParams, point: &CoalescingPoint) -> WarpFootprint {
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

/// For each active lane of one warp, the 32-byte sector and the 128-byte line its first byte
/// falls in, counted from the first lane's (the picture `vramlab teach` draws).
pub(crate) fn lane_sectors(global: &CoalescingParams, point: &CoalescingPoint) -> Vec<(u64, u64)> {
    let first = lane_address(point, 0, 0);
    let (sector, line) = (u64::from(global.sector_bytes), u64::from(global.line_bytes));
    (0..point.active_lanes)
        .map(|lane| {
            let address = lane_address(point, 0, lane);
            (address / sector - first / sector, address / line - first / line)
        })
        .collect()
}

/// Warps sampled to estimate traffic over the whole array (neighbouring warps share pieces at
/// their edges, so one warp alone would over-count dense patterns).
const SAMPLE_WARPS: u64 = 64;

/// Distinct `unit`-byte pieces over the whole array, estimated from the first warps.
fn pieces_per_pass(point: &CoalescingPoint, unit: u64) -> f64 {
    let warps = point.warps();
    let sample = SAMPLE_WARPS.min(warps.max(1));
    distinct_pieces(point, 0, sample, unit) as f64 / sample as f64 * warps as f64
}

/// What one pass over the array asks of memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PassTraffic {
    /// Bytes DRAM delivers, in `dram_fetch_bytes` pieces (if the pass is served by DRAM).
    pub dram_bytes: f64,
    /// Bytes the L2 delivers, in sectors.
    pub l2_bytes: f64,
    /// 128-byte line requests the L2 answers.
    pub lines: f64,
    /// Whether what the pass touches fits in half the L2, so that after the warm-up runs every
    /// pass is served by the L2.
    pub from_l2: bool,
}

/// What one pass over the array asks of memory.
pub(crate) fn pass_traffic(global: &CoalescingParams, point: &CoalescingPoint) -> PassTraffic {
    let dram_bytes = pieces_per_pass(point, u64::from(global.dram_fetch_bytes)) * f64::from(global.dram_fetch_bytes);
    let l2_bytes = pieces_per_pass(point, u64::from(global.sector_bytes)) * f64::from(global.sector_bytes);
    PassTraffic {
        dram_bytes,
        l2_bytes,
        lines: pieces_per_pass(point, u64::from(global.line_bytes)),
        from_l2: dram_bytes <= (global.l2_bytes / 2) as f64,
    }
}

/// The two limits on a read kernel's time and how they combine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ReadTime {
    /// Time if only the latency of each warp's loads counted: every resident warp has one
    /// load in flight (the kernel's loads wait on the loop), so the kernel takes the number
    /// of loads each warp makes times the latency of one (Little's law), microseconds. A load
    /// waits for its first line, plus a little for each further line it touches.
    pub latency_us: f64,
    /// Time if only throughput counted: bytes fetched over the bandwidth of the level serving
    /// them (plus, from DRAM, every page the read opens over the page-open rate), or the line
    /// requests over the rate the L2 answers them, whichever is longer.
    pub bandwidth_us: f64,
    /// Resident blocks per SM of the read kernel (occupancy).
    pub blocks_per_sm: u32,
    /// The prediction: launch + (latency^p + bandwidth^p)^(1/p), microseconds.
    pub total_us: f64,
}

/// Predicted time of the read kernel over `point`, on a GPU with `multiprocessors` SMs.
/// `None` when the kernel cannot launch (its shared memory does not fit an SM).
pub(crate) fn read_time(
    global: &CoalescingParams,
    sm: &SmParams,
    multiprocessors: u32,
    point: &CoalescingPoint,
) -> Option<ReadTime> {
    let traffic = pass_traffic(global, point);
    let passes = f64::from(point.passes());
    let memory_us = if traffic.from_l2 {
        traffic.l2_bytes / (global.l2_gb_per_s * 1e3)
    } else {
        let page = u64::from(global.dram_page_bytes);
        let opened = pieces_per_pass(point, page) * page as f64;
        traffic.dram_bytes / (global.dram_gb_per_s * 1e3) + opened / (global.dram_page_gb_per_s * 1e3)
    };
    // Every line request passes through the L2, which answers a limited number per second.
    let request_us = traffic.lines / (global.l2_lines_g_per_s * 1e3);
    let bandwidth_us = passes * memory_us.max(request_us);
    let kernel = OccupancyPoint {
        threads: READ_KERNEL_THREADS,
        registers: global.read_kernel_registers,
        static_shared: 0,
        dynamic_shared: point.dynamic_shared,
    };
    let blocks_per_sm = occupancy(sm, &kernel).blocks_per_sm.min(READ_KERNEL_BLOCKS_PER_SM);
    if blocks_per_sm == 0 {
        return None;
    }
    // The grid is READ_KERNEL_BLOCKS_PER_SM blocks per SM; fewer resident means waves.
    let waves = READ_KERNEL_BLOCKS_PER_SM.div_ceil(blocks_per_sm);
    let grid_warps =
        u64::from(multiprocessors * READ_KERNEL_BLOCKS_PER_SM * READ_KERNEL_THREADS.div_ceil(sm.warp_size));
    let loads_per_warp = point.warps().div_ceil(grid_warps.max(1)) as f64 * passes * f64::from(waves);
    let first_line_ns = if traffic.from_l2 {
        global.l2_latency_ns
    } else {
        global.dram_latency_ns
    };
    // The SM sends a request's lines one after another, so a load touching many lines waits longer.
    let lines_per_load = pieces_in_warp(point, u64::from(global.line_bytes)) as f64;
    let latency_ns = first_line_ns + (lines_per_load - 1.0) * global.line_latency_ns;
    let latency_us = loads_per_warp * latency_ns / 1e3;
    let p = match global.l2_overlap_exponent {
        Some(l2) if traffic.from_l2 => l2,
        _ => global.overlap_exponent,
    };
    let total_us = global.launch_us + (latency_us.powf(p) + bandwidth_us.powf(p)).powf(1.0 / p);
    Some(ReadTime {
        latency_us,
        bandwidth_us,
        blocks_per_sm,
        total_us,
    })
}

/// Fits the read kernel's model to the global calibration cases: DRAM and L2 bandwidth, the
/// DRAM page-open rate, the L2's line-request rate, the latency of one warp's load from each
/// level and per extra line, how the two bounds combine, and DRAM's fetch size (32, 64 or 128 bytes, whichever predicts best). Every
/// continuous parameter is fitted jointly by least absolute relative error.
pub(crate) fn fit_coalescing(
    samples: &[CoalescingSample],
    machine: &CoalescingMachine,
    source: String,
) -> Result<CoalescingParams, FitError> {
    let what = "global-memory reads";
    let launch_us = machine.launch_us;
    if let Some(bad) = samples
        .iter()
        .find(|s| !(s.time_us.is_finite() && s.time_us > launch_us))
    {
        return Err(FitError::BadSamples {
            what,
            reason: format!(
                "the {} B read at stride {} of {} took {} us, not longer than the launch cost ({launch_us} us)",
                bad.width,
                bad.stride,
                experiments::format_bytes(bad.bytes),
                bad.time_us
            ),
        });
    }
    if samples.len() < 9 || machine.read_kernel_registers == 0 {
        return Err(FitError::BadSamples {
            what,
            reason: format!(
                "need the calibration cases (nine or more) and the read kernel's registers, got {} cases and {} registers",
                samples.len(),
                machine.read_kernel_registers
            ),
        });
    }
    let since_2026_11_24 = has_latency_bound_lines(samples);
    let as_point = |s: &CoalescingSample| CoalescingPoint::calibration(s.width, s.stride, s.bytes);
    let with = |fetch: u32, page: u32, x: &CoalescingFree| CoalescingParams {
        source: source.clone(),
        sector_bytes: 32,
        line_bytes: 128,
        l2_bytes: machine.l2_bytes,
        dram_fetch_bytes: fetch,
        dram_gb_per_s: x.dram_gb_per_s,
        dram_page_bytes: page,
        dram_page_gb_per_s: x.dram_page_gb_per_s,
        l2_gb_per_s: x.l2_gb_per_s,
        l2_lines_g_per_s: x.l2_lines_g_per_s,
        dram_latency_ns: x.dram_latency_ns,
        l2_latency_ns: x.l2_latency_ns,
        line_latency_ns: x.line_latency_ns,
        overlap_exponent: 1.0 + x.overlap_excess,
        l2_overlap_exponent: x.l2_overlap_excess.map(|excess| 1.0 + excess),
        read_kernel_registers: machine.read_kernel_registers,
        launch_us,
        calibration_cases: samples.iter().map(|s| (s.width, s.stride, s.bytes)).collect(),
    };
    let error = |params: &CoalescingParams| -> f64 {
        samples
            .iter()
            .map(
                |s| match read_time(params, &machine.sm, machine.multiprocessors, &as_point(s)) {
                    Some(t) => ((t.total_us - s.time_us) / s.time_us).abs(),
                    None => f64::INFINITY,
                },
            )
            .sum()
    };
    // Start from what each kind of case says alone (bandwidth from bytes over time, latency
    // from time over loads per warp, with the other bound ignored), at a few exponents; then
    // fit everything together from each start and keep the best.
    let time_of = |width: u32, stride: u32, bytes: u64| {
        samples
            .iter()
            .find(|s| (s.width, s.stride, s.bytes) == (width, stride, bytes))
            .map_or(f64::NAN, |s| s.time_us - launch_us)
    };
    let grid_warps = f64::from(machine.multiprocessors * READ_KERNEL_BLOCKS_PER_SM * (READ_KERNEL_THREADS / 32));
    let loads = |width: u32, bytes: u64| {
        let point = CoalescingPoint::calibration(width, 1, bytes);
        (point.warps() as f64 / grid_warps).ceil() * f64::from(point.passes())
    };
    let guess = |value: f64, fallback: f64| {
        if value.is_finite() && value > 0.0 {
            value
        } else {
            fallback
        }
    };
    let gib = (1u64 << 30) as f64;
    let base = CoalescingFree {
        dram_gb_per_s: guess(gib / time_of(16, 1, 1 << 30) / 1e3, 3000.0),
        dram_page_gb_per_s: 30000.0,
        l2_gb_per_s: guess(gib / time_of(16, 1, 16 << 20) / 1e3, 8000.0),
        dram_latency_ns: guess(time_of(1, 1, 1 << 30) / loads(1, 1 << 30) * 1e3, 400.0),
        l2_latency_ns: guess(time_of(1, 1, 16 << 20) / loads(1, 16 << 20) * 1e3, 150.0),
        overlap_excess: 1.0,
        l2_lines_g_per_s: guess((gib / 128.0) / time_of(4, 32, 16 << 20) / 1e3, 100.0),
        line_latency_ns: 5.0,
        // Calibrations before the latency-bound 32-line case have one exponent for both levels.
        l2_overlap_excess: since_2026_11_24.then_some(3.0),
    };
    let mut best: Option<(f64, CoalescingParams)> = None;
    for page in dram_pages(since_2026_11_24) {
        for fetch in [32, 64, 128] {
            for exponent in [0.5, 1.5, 3.0] {
                let start = CoalescingFree {
                    overlap_excess: exponent,
                    ..base
                };
                let x = minimise_positive(&start.values(), |x| {
                    error(&with(fetch, page, &CoalescingFree::from_values(x)))
                });
                let params = with(fetch, page, &CoalescingFree::from_values(&x));
                let e = error(&params);
                if best.as_ref().is_none_or(|(b, _)| e < *b) {
                    best = Some((e, params));
                }
            }
        }
    }
    Ok(best.expect("nine starts or more").1)
}

/// The global fit's free parameters, named; the solver sees them as a list in this order
/// (coordinate descent visits them in turn, so the order is part of the fit).
#[derive(Debug, Clone, Copy)]
struct CoalescingFree {
    dram_gb_per_s: f64,
    dram_page_gb_per_s: f64,
    l2_gb_per_s: f64,
    dram_latency_ns: f64,
    l2_latency_ns: f64,
    /// The overlap exponent less 1 (the solver keeps parameters positive).
    overlap_excess: f64,
    l2_lines_g_per_s: f64,
    line_latency_ns: f64,
    /// The L2's exponent less 1, when calibration can tell it apart.
    l2_overlap_excess: Option<f64>,
}

impl CoalescingFree {
    fn values(&self) -> Vec<f64> {
        let mut values = vec![
            self.dram_gb_per_s,
            self.dram_page_gb_per_s,
            self.l2_gb_per_s,
            self.dram_latency_ns,
            self.l2_latency_ns,
            self.overlap_excess,
            self.l2_lines_g_per_s,
            self.line_latency_ns,
        ];
        values.extend(self.l2_overlap_excess);
        values
    }

    fn from_values(x: &[f64]) -> CoalescingFree {
        CoalescingFree {
            dram_gb_per_s: x[0],
            dram_page_gb_per_s: x[1],
            l2_gb_per_s: x[2],
            dram_latency_ns: x[3],
            l2_latency_ns: x[4],
            overlap_excess: x[5],
            l2_lines_g_per_s: x[6],
            line_latency_ns: x[7],
            l2_overlap_excess: x.get(8).copied(),
        }
    }
}

/// The calibration case whose 32-line loads are latency bound in the L2 (width, stride, bytes).
const LATENCY_BOUND_LINES: (u32, u32, u64) = (16, 32, 2 << 20);

/// Whether calibration measured [`LATENCY_BOUND_LINES`] (it did from 2026-11-24 on).
fn has_latency_bound_lines(samples: &[CoalescingSample]) -> bool {
    samples.iter().any(|s| (s.width, s.stride, s.bytes) == LATENCY_BOUND_LINES)
}

/// What the global fit needs to know about the machine besides the samples.
#[derive(Debug, Clone)]
pub(crate) struct CoalescingMachine {
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Fixed cost of a kernel launch, microseconds.
    pub launch_us: f64,
    /// The SM's limits, for the read kernel's occupancy.
    pub sm: SmParams,
    /// SMs on the device.
    pub multiprocessors: u32,
    /// Registers per thread of the read kernel.
    pub read_kernel_registers: u32,
}

/// HBM3's page (row) size per pseudo-channel: 1 KiB (JEDEC JESD238, HBM3 DRAM standard).
pub(crate) const DRAM_PAGE_BYTES: u32 = 1024;

/// The DRAM page sizes a calibration chooses among, the datasheet's first (it keeps ties).
/// What a strided read pays for is the bytes of a row it reaches before the GPU's address
/// mapping moves on to another channel, which can be less than a row: on h200-f, reads
/// 256 B to 1 KiB apart cost the same per fetch. Calibrations before 2026-11-24 (no
/// latency-bound L2 case) keep the datasheet's page.
fn dram_pages(since_2026_11_24: bool) -> Vec<u32> {
    if since_2026_11_24 {
        vec![DRAM_PAGE_BYTES, 512, 256]
    } else {
        vec![DRAM_PAGE_BYTES]
    }
}

/// Which sector and line each lane of one warp's global load touches, what fraction of the
/// fetched bytes is used, and what bounds the read kernel's time.
pub(crate) fn explain_coalescing(
    global: &CoalescingParams,
    sm: &SmParams,
    multiprocessors: u32,
    device: &str,
    point: &CoalescingPoint,
) -> String {
    let mut out = String::new();
    let element = |lane: u32| u64::from(point.offset) + u64::from(lane) * u64::from(point.stride);
    let address = |lane: u32| element(lane) * u64::from(point.width);
    let (sector, line) = (u64::from(global.sector_bytes), u64::from(global.line_bytes));
    let first_sector = address(0) / sector;
    let first_line = address(0) / line;
    let _ = writeln!(
        out,
        "{}-byte loads, lane i reads element {} + i x {}, {} of 32 lanes active, {} array, on {device}\n",
        point.width,
        point.offset,
        point.stride,
        point.active_lanes,
        format_bytes(point.bytes)
    );
    let _ = writeln!(out, "  lane -> sector (line), counted from the first lane's");
    let lanes: Vec<u32> = (0..point.active_lanes).collect();
    for row in lanes.chunks(8) {
        let cells: Vec<String> = row
            .iter()
            .map(|&lane| {
                format!(
                    "{:>2}->{:<3}({})",
                    lane,
                    address(lane) / sector - first_sector,
                    address(lane) / line - first_line
                )
            })
            .collect();
        let _ = writeln!(out, "  {}", cells.join(" "));
    }
    let f = warp_footprint(global, point);
    let _ = writeln!(
        out,
        "\n{} sector(s) in {} line(s): {} of {} bytes fetched are used, {:.0}% efficiency.",
        f.sectors,
        f.lines,
        f.useful_bytes,
        f.sectors * global.sector_bytes,
        100.0 * f.efficiency
    );
    if let Some(t) = read_time(global, sm, multiprocessors, point) {
        let traffic = pass_traffic(global, point);
        let level = if traffic.from_l2 {
            format!(
                "the L2 ({} per pass at {:.0} GB/s)",
                format_bytes(traffic.l2_bytes as u64),
                global.l2_gb_per_s
            )
        } else {
            format!(
                "DRAM ({} per pass in {} B pieces at {:.0} GB/s, plus opening pages)",
                format_bytes(traffic.dram_bytes as u64),
                global.dram_fetch_bytes,
                global.dram_gb_per_s
            )
        };
        let bound = if t.latency_us > t.bandwidth_us {
            "latency bound"
        } else {
            "throughput bound"
        };
        let useful = point.warps() as f64 * f64::from(point.useful_bytes_per_warp()) * f64::from(point.passes());
        let _ = writeln!(
            out,
            "Reading the array {} time(s) with {} resident blocks per SM: latency bound {:.1} us, throughput bound {:.1} us, served by {level}; predicted {:.1} us, {:.0} GB/s of useful bytes ({bound}).",
            point.passes(),
            t.blocks_per_sm,
            t.latency_us,
            t.bandwidth_us,
            t.total_us,
            useful / t.total_us / 1e3
        );
    } else {
        let _ = writeln!(
            out,
            "The read kernel cannot launch: its block's shared memory does not fit an SM."
        );
    }
    let step = u64::from(point.stride) * u64::from(point.width);
    let why = if f.efficiency >= 0.999 {
        "Why: neighbouring lanes read neighbouring bytes, so every byte of every sector fetched is used.".to_string()
    } else if step >= sector {
        format!(
            "Why: lanes are {step} bytes apart, so each needs a sector of its own and uses {} of its {sector} bytes; reading neighbouring elements (stride 1) would use them all.",
            point.width
        )
    } else if point.offset > 0 && point.stride == 1 {
        "Why: the misalignment makes the warp's bytes straddle one more sector than they fill.".to_string()
    } else {
        format!(
            "Why: lanes are {step} bytes apart, so part of every sector fetched is skipped; stride 1 would use every byte."
        )
    };
    let _ = writeln!(out, "{why}");
    out
}

/// The coalescing model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = CoalescingPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &CoalescingPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.coalescing, Family::Coalescing)?;
        let footprint = warp_footprint(params, point);
        let time = read_time(params, &profile.sm, profile.device.multiprocessors, point).ok_or_else(|| {
            SimError::new(format!(
                "dynamic_shared = {}: the read kernel's block does not fit an SM of profile '{}'",
                point.dynamic_shared, profile.name
            ))
        })?;
        let mut metrics = experiments::coalescing_metrics(time.total_us, point);
        metrics.insert("blocks_per_sm".into(), f64::from(time.blocks_per_sm));
        metrics.insert("latency_bound_us".into(), time.latency_us);
        metrics.insert("bandwidth_bound_us".into(), time.bandwidth_us);
        metrics.insert("sectors_per_warp".into(), f64::from(footprint.sectors));
        metrics.insert("lines_per_warp".into(), f64::from(footprint.lines));
        metrics.insert("efficiency".into(), footprint.efficiency);
        Ok(metrics)
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        let cases = profile.coalescing.iter().flat_map(|g| g.calibration_cases.iter());
        cases
            .map(|&(width, stride, bytes)| {
                params([
                    ("width", int(width)),
                    ("stride", int(stride)),
                    ("bytes", int(bytes)),
                    ("offset", int(0u32)),
                    ("active_lanes", int(32u32)),
                    ("dynamic_shared", int(0u32)),
                ])
            })
            .collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        let kept = base.and_then(|b| b.coalescing.as_ref());
        profile.coalescing = fitted_or_kept(&calibration.coalescing, kept, || {
            let machine = CoalescingMachine {
                l2_bytes: calibration.l2_bytes,
                launch_us: profile.transfer.kernel_launch_us,
                sm: profile.sm.clone(),
                multiprocessors: d.multiprocessors,
                read_kernel_registers: calibration.read_kernel_registers,
            };
            let (lines, pages) = if has_latency_bound_lines(&calibration.coalescing) {
                (
                    "16-byte reads at stride 32 of 2 MiB (latency per extra line) and of 16 MiB (the L2's exponent)",
                    "the DRAM page a strided read sees chosen by the fit among 1 KiB (HBM3's row, JEDEC JESD238), 512 and 256 B",
                )
            } else {
                (
                    "16-byte reads at stride 32 of 16 MiB (latency per extra line)",
                    "1 KiB DRAM pages (JEDEC JESD238, HBM3)",
                )
            };
            fit_coalescing(
                &calibration.coalescing,
                &machine,
                format!(
                    "vramlab calibrate on {} ({}): median event-timed reads (through the L2 only, ld.global.cg) at calibration_cases, all parameters fitted jointly by least absolute relative error: dense 16-byte reads of 1 GiB and 16 MiB (DRAM and L2 bandwidth), 1-byte dense reads (latency bound: one load in flight per warp), 4-byte dense reads (both bounds: the exponent), 4- and 16-byte reads at stride 32 (fetch size, page-open rate), 4-byte reads at stride 32 of 16 MiB (L2 line-request rate), {lines}; {pages}; launch cost = the transfer part's kernel_launch_us; 32 B sectors and 128 B lines (CUDA C++ Best Practices Guide); L2 size from cuDeviceGetAttribute",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }

    const EXPLAINS: bool = true;

    fn explain(profile: &Profile, point: &CoalescingPoint) -> Result<String, experiments::Error> {
        let params = explained(profile, &profile.coalescing, Family::Coalescing)?;
        Ok(explain_coalescing(
            params,
            &profile.sm,
            profile.device.multiprocessors,
            &profile.device.name,
            point,
        ))
    }

    fn summary(profile: &Profile) -> Option<String> {
        let g = profile.coalescing.as_ref()?;
        Some(format!(
            "DRAM {:.0} GB/s in {} B fetches, L2 {:.0} GB/s",
            g.dram_gb_per_s, g.dram_fetch_bytes, g.l2_gb_per_s
        ))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let global = t
        .profile
        .coalescing
        .as_ref()
        .ok_or_else(|| fail(format!("profile '{}' has no [coalescing] section", t.profile.name)))?;
    let strides: Vec<u32> = vec![1, 2, 3, 4, 5, 6, 8, 12, 16, 32];
    let offsets: Vec<u32> = vec![0, 1, 2, 3, 4, 8, 16, 31];
    let controls = vec![
        TeachControl::new(
            "width",
            "Bytes per lane",
            "select",
            strings(&[1, 2, 4, 8, 16]),
            strings(&[1, 2, 4, 8, 16]),
            "4",
        ),
        TeachControl::new(
            "stride",
            "Stride (elements)",
            "range",
            strings(&strides),
            strings(&strides),
            "1",
        ),
        TeachControl::new(
            "offset",
            "Offset (elements)",
            "range",
            strings(&offsets),
            strings(&offsets),
            "0",
        ),
    ];
    let panel = TeachPanel::build("coalescing", "One warp's global-memory read", controls, |values| {
        let a = args(&["width", "stride", "offset"], values);
        let workload = t.point(experiments::Family::Coalescing, &a)?;
        let Workload::Coalescing(point) = workload else {
            return Err(fail("not a coalescing point"));
        };
        let metrics = t.predict(&workload)?;
        let lanes = lane_sectors(global, &point);
        let mut sectors: Vec<(u64, u64)> = lanes.clone();
        sectors.dedup();
        // Each touched sector is a column of at most 8 lanes, widened where more lanes share it.
        const ROWS: usize = 8;
        let lanes_in = |sector: u64| lanes.iter().filter(|l| l.0 == sector).count();
        let (mut first_column, mut column_labels, mut column_classes) = (Vec::new(), Vec::new(), Vec::new());
        for &(sector, line) in &sectors {
            first_column.push(column_labels.len());
            for sub in 0..lanes_in(sector).div_ceil(ROWS) {
                column_labels.push(if sub == 0 { sector.to_string() } else { String::new() });
                column_classes.push(if line % 2 == 0 { "even" } else { "odd" });
            }
        }
        let mut placed = vec![0usize; sectors.len()];
        let cells: Vec<serde_json::Value> = lanes
            .iter()
            .enumerate()
            .map(|(lane, &(sector, line))| {
                let s = sectors.iter().position(|x| x.0 == sector).unwrap_or(0);
                let (col, row) = (first_column[s] + placed[s] / ROWS, placed[s] % ROWS);
                placed[s] += 1;
                json!({"col": col, "row": row, "text": lane.to_string(), "class": "lane",
                       "title": format!("lane {lane}: sector {sector}, line {line}")})
            })
            .collect();
        let rows = placed.iter().copied().max().unwrap_or(1).min(ROWS);
        let latency_us = metric(&metrics, "latency_bound_us")?;
        let bandwidth = metric(&metrics, "bandwidth_bound_us")?;
        let bound = if bandwidth >= latency_us {
            format!("throughput: {bandwidth:.1} us against latency {latency_us:.1} us")
        } else {
            format!("latency: {latency_us:.1} us against throughput {bandwidth:.1} us")
        };
        let footprint = warp_footprint(global, &point);
        let (text, command) = t.explain("coalescing", &a)?;
        Ok(TeachView {
            facts: vec![
                TeachFact::new(
                    "sectors",
                    "32-byte sectors per warp",
                    format!("{}", metric(&metrics, "sectors_per_warp")?),
                ),
                TeachFact::new(
                    "lines",
                    "128-byte lines per warp",
                    format!("{}", metric(&metrics, "lines_per_warp")?),
                ),
                TeachFact::new(
                    "efficiency",
                    "Efficiency (bytes used of bytes fetched)",
                    format!(
                        "{:.0}% ({} of {} bytes)",
                        100.0 * metric(&metrics, "efficiency")?,
                        footprint.useful_bytes,
                        footprint.sectors * global.sector_bytes
                    ),
                )
                .strong()
                .bad_if(footprint.useful_bytes < footprint.sectors * global.sector_bytes),
                TeachFact::new("bound", "The bound that sets the time", bound),
                TeachFact::new(
                    "time_us",
                    "Predicted time to read the array",
                    format!("{:.1} us", metric(&metrics, "time_us")?),
                ),
                TeachFact::new(
                    "gb_per_s",
                    "Predicted useful bandwidth",
                    format!("{:.0} GB/s", metric(&metrics, "gb_per_s")?),
                ),
            ],
            measured: t.measured(&workload, "useful bandwidth", "gb_per_s", |v| format!("{v:.0} GB/s")),
            command,
            text,
            picture: json!({
                "kind": "cells", "title": "lanes on sectors",
                "column_title": "sector (touched only)", "row_title": "lanes",
                "column_labels": column_labels,
                "column_classes": column_classes,
                "rows": rows, "cells": cells, "cell_width": 36,
                "legend": [["even", "sector in an even 128-byte line"], ["odd", "sector in an odd 128-byte line"]],
            }),
        })
    })?;
    Ok(TeachPage {
        slug: "coalescing".into(),
        title: "Coalescing: sectors and lines".into(),
        intro: vec![
            "A warp's global read is served in 32-byte sectors of 128-byte lines. Move the stride, width and offset and see which sectors the 32 lanes touch (only the sectors touched are drawn, numbered from the first lane's), how much of what is fetched is used, and which limit the model says sets the time.".into(),
        ],
        terminal: panel.initial_command(),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/coalescing.rs with profile '{}'; the array read is the explain default (1 GiB, 32 lanes active).", t.profile.name),
            "Measured bandwidths are shown where a committed run read the same point (its misalignment runs used offset 0 and 1).".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn coalescing_view_counts_sectors_and_names_the_bound() {
        let profile = experiments::Profile::find("h100").unwrap();
        let global = profile.coalescing.unwrap();
        let point = |width, stride| CoalescingPoint {
            width,
            stride,
            offset: 0,
            active_lanes: 32,
            bytes: 1 << 30,
            dynamic_shared: 0,
        };
        let dense = explain_coalescing(&global, &profile.sm, 132, "H100", &point(4, 1));
        assert!(
            dense.contains("4 sector(s) in 1 line(s): 128 of 128 bytes") && dense.contains("100% efficiency"),
            "{dense}"
        );
        let strided = explain_coalescing(&global, &profile.sm, 132, "H100", &point(4, 8));
        assert!(
            strided.contains("32 sector(s) in 8 line(s)") && strided.contains(" 1->1  (0)"),
            "{strided}"
        );
        assert!(strided.contains("lanes are 32 bytes apart"), "{strided}");
    }

    fn global(fetch: u32) -> CoalescingParams {
        CoalescingParams {
            source: "test".into(),
            sector_bytes: 32,
            line_bytes: 128,
            l2_bytes: 50 << 20,
            dram_fetch_bytes: fetch,
            dram_gb_per_s: 3000.0,
            dram_page_bytes: 1024,
            dram_page_gb_per_s: 30000.0,
            l2_gb_per_s: 8000.0,
            l2_lines_g_per_s: 100.0,
            dram_latency_ns: 400.0,
            l2_latency_ns: 150.0,
            line_latency_ns: 4.0,
            overlap_exponent: 2.5,
            l2_overlap_exponent: None,
            read_kernel_registers: 16,
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
            dynamic_shared: 0,
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
        let t32 = pass_traffic(&global(32), &sparse).dram_bytes;
        let t128 = pass_traffic(&global(128), &sparse).dram_bytes;
        assert!(
            (t128 / t32 - 4.0).abs() < 1e-9,
            "one element per line: 4x the traffic at 128 B"
        );
        let dense = point(4, 1, 0, 32);
        assert!(
            (pass_traffic(&global(32), &dense).dram_bytes - pass_traffic(&global(128), &dense).dram_bytes).abs() < 1.0
        );
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
            let narrow = CoalescingPoint { width, stride, offset: 0, active_lanes: 32, bytes: bytes(stride), dynamic_shared: 0 };
            let wide = CoalescingPoint { stride: stride + 1, bytes: bytes(stride + 1), ..narrow };
            prop_assert_eq!(narrow.warps(), wide.warps());
            prop_assert!(pass_traffic(&g, &wide).dram_bytes >= pass_traffic(&g, &narrow).dram_bytes * 0.999);
        }
    }
}

#[cfg(test)]
mod fit_tests {
    use crate::fit::sm_params;
    use crate::coalescing::read_time;
    use super::*;
    use experiments::coalescing_calibration_cases;
    use experiments::*;

    fn h100_sm() -> SmParams {
        sm_params(
            "9.0",
            &SmAttributes {
                warp_size: 32,
                max_threads_per_sm: 2048,
                max_threads_per_block: 1024,
                max_blocks_per_sm: 32,
                registers_per_sm: 65536,
                registers_per_block: 65536,
                shared_bytes_per_sm: 233472,
                shared_bytes_per_block: 49152,
                shared_bytes_per_block_optin: 232448,
                reserved_shared_bytes_per_block: 1024,
            },
        )
        .unwrap()
    }

    #[test]
    fn recovers_a_known_read_model_from_the_calibration_cases() {
        // HBM3's 1 KiB row, and the 256 B page the H200's strided reads see.
        for page in [1024, 256] {
            recovers_a_known_read_model_with_pages_of(page);
        }
    }

    fn recovers_a_known_read_model_with_pages_of(page: u32) {
        let machine = CoalescingMachine {
            l2_bytes: 50 << 20,
            launch_us: 4.0,
            sm: h100_sm(),
            multiprocessors: 132,
            read_kernel_registers: 16,
        };
        let truth = CoalescingParams {
            source: "truth".into(),
            sector_bytes: 32,
            line_bytes: 128,
            l2_bytes: machine.l2_bytes,
            dram_fetch_bytes: 64,
            dram_gb_per_s: 3200.0,
            dram_page_bytes: page,
            dram_page_gb_per_s: 30000.0,
            l2_gb_per_s: 9000.0,
            l2_lines_g_per_s: 90.0,
            dram_latency_ns: 380.0,
            l2_latency_ns: 160.0,
            line_latency_ns: 4.0,
            overlap_exponent: 2.5,
            l2_overlap_exponent: Some(6.0),
            read_kernel_registers: 16,
            launch_us: 4.0,
            calibration_cases: vec![],
        };
        let samples: Vec<CoalescingSample> = coalescing_calibration_cases()
            .into_iter()
            .map(|(width, stride, bytes)| {
                let point = CoalescingPoint::calibration(width, stride, bytes);
                CoalescingSample {
                    width,
                    stride,
                    bytes,
                    time_us: read_time(&truth, &machine.sm, 132, &point).unwrap().total_us,
                }
            })
            .collect();
        let fitted = fit_coalescing(&samples, &machine, "fit".into()).unwrap();
        assert_eq!(fitted.dram_fetch_bytes, 64, "{fitted:?}");
        assert_eq!(fitted.dram_page_bytes, page, "{fitted:?}");
        for (name, got, want) in [
            ("dram", fitted.dram_gb_per_s, 3200.0),
            ("l2", fitted.l2_gb_per_s, 9000.0),
            ("dram latency", fitted.dram_latency_ns, 380.0),
            ("l2 latency", fitted.l2_latency_ns, 160.0),
            ("exponent", fitted.overlap_exponent, 2.5),
            ("l2 exponent", fitted.l2_overlap_exponent.unwrap_or(f64::NAN), 6.0),
            ("pages", fitted.dram_page_gb_per_s, 30000.0),
            ("lines", fitted.l2_lines_g_per_s, 90.0),
            ("line latency", fitted.line_latency_ns, 4.0),
        ] {
            assert!((got / want - 1.0).abs() < 0.03, "{name}: {got} vs {want}; {fitted:?}");
        }
    }
}
