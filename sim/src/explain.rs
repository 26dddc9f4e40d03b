//! Teaching views: what the models decide for one case, with the working shown.

use std::fmt::Write;

use experiments::{
    format_bytes, BankParams, BankPoint, CoalescingParams, CoalescingPoint, ConstantParams, ConstantPoint, Family,
    OccupancyPoint, Profile, SmParams, Workload,
};

use crate::banks::{bank_access, bank_cycles};
use crate::coalescing::{pass_traffic, read_time, warp_footprint};
use crate::constant::constant_cycles;
use crate::occupancy::{occupancy, Limiter};

/// The topics [`explain`] knows.
pub const EXPLAIN_TOPICS: [&str; 4] = ["occupancy", "banks", "coalescing", "constant"];

/// One case's teaching view: `topic` is one of [`EXPLAIN_TOPICS`], `params` its `name=value`
/// pairs (as `vramlab explain` takes them), read against `profile`.
pub fn explain(topic: &str, params: &[String], profile: &Profile) -> Result<String, experiments::Error> {
    let family = match topic {
        "occupancy" => Family::Occupancy,
        "banks" => Family::Banks,
        "coalescing" => Family::Coalescing,
        "constant" => Family::Constant,
        other => {
            return Err(experiments::Error::Unknown {
                kind: "topic",
                name: other.to_string(),
                valid: EXPLAIN_TOPICS.iter().map(|t| t.to_string()).collect(),
            })
        }
    };
    let point = experiments::point_from_args(family, params)
        .map_err(|e| experiments::Error::Invalid(format!("explain {topic}: {e}")))?;
    let device = &profile.device.name;
    let missing = |name: &str| {
        experiments::Error::Invalid(format!(
            "profile '{}' has no [{name}] section (vramlab calibrate --part {name} --into FILE)",
            profile.name
        ))
    };
    Ok(match point.workload {
        Workload::Occupancy(kernel) => explain_occupancy(&profile.sm, device, &kernel),
        Workload::Banks(access) => {
            explain_banks(profile.banks.as_ref().ok_or_else(|| missing("banks"))?, device, &access)
        }
        Workload::Coalescing(read) => explain_coalescing(
            profile.coalescing.as_ref().ok_or_else(|| missing("coalescing"))?,
            &profile.sm,
            profile.device.multiprocessors,
            device,
            &read,
        ),
        Workload::Constant(read) => explain_constant(
            profile.constant.as_ref().ok_or_else(|| missing("constant"))?,
            device,
            &read,
        ),
        _ => unreachable!("point_from_args gives a point of the family asked for"),
    })
}

/// The occupancy calculator's working for one kernel shape, as terminal text.
pub fn explain_occupancy(sm: &SmParams, device: &str, kernel: &OccupancyPoint) -> String {
    let o = occupancy(sm, kernel);
    let max_warps = sm.max_threads_per_sm / sm.warp_size;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} threads/block, {} registers/thread, {} static + {} dynamic shared memory, on {device}\n",
        kernel.threads,
        kernel.registers,
        format_bytes(u64::from(kernel.static_shared)),
        format_bytes(u64::from(kernel.dynamic_shared)),
    );
    let mark = |limiter: Limiter| {
        if o.limiter == limiter && o.blocks_per_sm > 0 {
            "  <- limits"
        } else {
            ""
        }
    };
    let show = |blocks: u32| {
        if blocks == u32::MAX {
            "any".to_string()
        } else {
            blocks.to_string()
        }
    };
    let rows = [
        (
            "warp slots",
            format!("{} warps", o.warps_per_block),
            format!("{max_warps} warps"),
            show(o.by_warps),
            mark(Limiter::Warps),
        ),
        (
            "registers",
            format!("{} warps x {} regs", o.warps_per_block, o.registers_per_warp),
            format!(
                "{} x {} regs",
                sm.sub_partitions,
                sm.registers_per_sm / sm.sub_partitions
            ),
            show(o.by_registers),
            mark(Limiter::Registers),
        ),
        (
            "shared memory",
            format!("{} B", o.shared_per_block),
            format!("{} B", sm.shared_bytes_per_sm),
            show(o.by_shared),
            mark(Limiter::SharedMemory),
        ),
        (
            "block slots",
            "1".to_string(),
            sm.max_blocks_per_sm.to_string(),
            show(o.by_blocks),
            mark(Limiter::Blocks),
        ),
    ];
    let _ = writeln!(
        out,
        "  {:<14} {:<26} {:<20} blocks that fit",
        "resource", "one block takes", "one SM has"
    );
    for (name, takes, has, fit, note) in rows {
        let _ = writeln!(out, "  {name:<14} {takes:<26} {has:<20} {fit}{note}");
    }
    let _ = writeln!(out);
    if let Some(reason) = &o.cannot_launch {
        let _ = writeln!(out, "No block fits: {reason}. The launch would fail.");
        return out;
    }
    let warps = o.blocks_per_sm * o.warps_per_block;
    let _ = writeln!(
        out,
        "{} blocks per SM = {warps} of {max_warps} warps = {:.0}% occupancy, limited by {}.",
        o.blocks_per_sm,
        100.0 * f64::from(warps) / f64::from(max_warps),
        o.limiter
    );
    let why = match o.limiter {
        Limiter::Warps => format!(
            "Why: {} threads make {} warps; {max_warps} warp slots hold {} such blocks.",
            kernel.threads, o.warps_per_block, o.by_warps
        ),
        Limiter::Registers => format!(
            "Why: a warp takes {} x {} = {} registers, rounded up to {} (units of {}); each of the {} sub-partitions' {} registers holds {} warps.",
            kernel.registers,
            sm.warp_size,
            kernel.registers * sm.warp_size,
            o.registers_per_warp,
            sm.register_allocation_unit,
            sm.sub_partitions,
            sm.registers_per_sm / sm.sub_partitions,
            (sm.registers_per_sm / sm.sub_partitions) / o.registers_per_warp.max(1)
        ),
        Limiter::SharedMemory => format!(
            "Why: a block takes {} B of shared memory ({} asked + {} reserved by the driver, rounded up to {} B units).",
            o.shared_per_block,
            kernel.static_shared + kernel.dynamic_shared,
            sm.reserved_shared_bytes_per_block,
            sm.shared_allocation_unit
        ),
        Limiter::Blocks => format!("Why: blocks are small; an SM never holds more than {} blocks.", sm.max_blocks_per_sm),
    };
    let _ = writeln!(out, "{why}");
    if o.limiter == Limiter::Registers {
        if let Some(fewer) = (1..kernel.registers).rev().find(|r| {
            occupancy(
                sm,
                &OccupancyPoint {
                    registers: *r,
                    ..*kernel
                },
            )
            .blocks_per_sm
                > o.blocks_per_sm
        }) {
            let _ = writeln!(
                out,
                "At {fewer} registers per thread or fewer, another block would fit."
            );
        }
    }
    out
}

/// Which bank each lane hits for one shared load, and how many passes the banks need.
pub fn explain_banks(shared: &BankParams, device: &str, point: &BankPoint) -> String {
    let access = bank_access(shared, point);
    let mut out = String::new();
    let pattern = if point.stride == 0 {
        "every lane loads the same element".to_string()
    } else {
        format!("lane i loads element i x {}", point.stride)
    };
    let _ = writeln!(
        out,
        "{}-byte shared loads, {pattern}, on {device} ({} banks of {} bytes)
",
        point.width, shared.banks, shared.bank_bytes
    );
    let _ = writeln!(out, "  lane -> first bank");
    for row in access.lane_banks.chunks(8).enumerate() {
        let cells: Vec<String> = row
            .1
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{:>2}->{:<2}", row.0 * 8 + i, b))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  "));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} wavefront(s) where {} would do: {}, {} replay(s); about {:.0} cycles per dependent load.",
        access.wavefronts,
        access.min_wavefronts,
        if access.conflict_degree == 1 {
            "no conflict".to_string()
        } else {
            format!("{}-way conflict", access.conflict_degree)
        },
        access.replays(),
        bank_cycles(shared, point)
    );
    let why = if point.stride == 0 {
        "Why: lanes that read the same word share it (broadcast); one pass serves them all.".to_string()
    } else if access.conflict_degree == 1 {
        "Why: the busiest bank holds no more distinct words than the load's size requires.".to_string()
    } else {
        format!(
            "Why: the busiest bank must deliver {} different words, one per pass. A stride whose words are odd-spaced (e.g. one word of padding) spreads lanes over all banks.",
            access.wavefronts
        )
    };
    let _ = writeln!(out, "{why}");
    out
}

/// Which sector and line each lane of one warp's global load touches, what fraction of the
/// fetched bytes is used, and what bounds the read kernel's time.
pub fn explain_coalescing(
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
            "latency"
        } else {
            "throughput"
        };
        let useful = point.warps() as f64 * f64::from(point.useful_bytes_per_warp()) * f64::from(point.passes());
        let _ = writeln!(
            out,
            "Reading the array {} time(s) with {} resident blocks per SM: latency bound {:.1} us, throughput bound {:.1} us, served by {level}; predicted {:.1} us, {:.0} GB/s of useful bytes ({bound} bound).",
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

/// Which word each lane of one warp reads from constant memory, and what that costs.
pub fn explain_constant(params: &ConstantParams, device: &str, point: &ConstantPoint) -> String {
    let mut out = String::new();
    let state = if point.cold {
        "cold (every access misses)"
    } else {
        "warm"
    };
    let _ = writeln!(
        out,
        "One warp reading {} distinct word(s) of __constant__ memory, each in its own 128-byte line, cache {state}, on {device}\n",
        point.distinct
    );
    let _ = writeln!(out, "  lane -> word");
    let lanes: Vec<u32> = (0..32).collect();
    for row in lanes.chunks(8) {
        let cells: Vec<String> = row
            .iter()
            .map(|&lane| format!("{:>2}->{:<2}", lane, lane % point.distinct.max(1)))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  "));
    }
    let spills = !point.cold && point.distinct > params.capacity_lines;
    let (first, extra) = if point.cold || spills {
        (params.cold_cycles, params.cold_per_extra)
    } else {
        (params.warm_cycles, params.warm_per_extra)
    };
    let _ = writeln!(
        out,
        "\n{} address(es): served one after another, {} pass(es); about {:.0} cycles per dependent access ({:.0} + {} x {:.0}).",
        point.distinct,
        point.distinct,
        constant_cycles(params, point),
        first,
        point.distinct.saturating_sub(1),
        extra
    );
    if spills {
        let _ = writeln!(
            out,
            "{} lines are more than the constant cache keeps ({}): each is evicted before its turn comes again, so this warm chain costs what a cold one does.",
            point.distinct, params.capacity_lines
        );
    }
    let why = if point.distinct == 1 {
        "Why: every lane reads the same word, which the constant cache broadcasts to the whole warp in one pass."
    } else {
        "Why: the constant cache serves one address per pass; a warp whose lanes name different words waits for each in turn. Constant memory pays off when a warp reads one word (a loop bound, a coefficient)."
    };
    let _ = writeln!(out, "{why}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_limit_and_the_way_out() {
        let sm = experiments::Profile::find("h100").unwrap().sm;
        let text = explain_occupancy(
            &sm,
            "H100",
            &OccupancyPoint {
                threads: 256,
                registers: 64,
                static_shared: 0,
                dynamic_shared: 0,
            },
        );
        assert!(
            text.contains("4 blocks per SM = 32 of 64 warps = 50% occupancy, limited by registers"),
            "{text}"
        );
        // 56 registers: 9 warps per sub-partition, 36 warps, still 4 blocks of 8; 48: 10, 40, 5 blocks.
        assert!(text.contains("At 48 registers per thread or fewer"), "{text}");
        let text = explain_occupancy(
            &sm,
            "H100",
            &OccupancyPoint {
                threads: 1024,
                registers: 255,
                static_shared: 0,
                dynamic_shared: 0,
            },
        );
        assert!(text.contains("No block fits"), "{text}");
    }

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

    #[test]
    fn constant_view_serializes_and_knows_the_capacity() {
        let params = experiments::Profile::find("h100").unwrap().constant.unwrap();
        let one = explain_constant(
            &params,
            "H100",
            &ConstantPoint {
                distinct: 1,
                cold: false,
            },
        );
        assert!(one.contains("broadcasts"), "{one}");
        let many = explain_constant(
            &params,
            "H100",
            &ConstantPoint {
                distinct: 24,
                cold: false,
            },
        );
        assert!(
            many.contains("24 address(es)") && many.contains("costs what a cold one does"),
            "{many}"
        );
    }

    #[test]
    fn bank_view_shows_the_transpose_conflict_and_its_fix() {
        let shared = experiments::Profile::find("h100").unwrap().banks.unwrap();
        let column = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 32 });
        assert!(
            column.contains("32-way conflict") && column.contains(" 1->0 "),
            "{column}"
        );
        let padded = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 33 });
        assert!(padded.contains("no conflict") && padded.contains(" 1->1 "), "{padded}");
    }
}
