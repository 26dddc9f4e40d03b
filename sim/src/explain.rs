//! Teaching views: what the models decide for one case, with the working shown.

use std::fmt::Write;

use experiments::{format_bytes, BankPoint, OccupancyPoint, SharedParams, SmParams};

use crate::banks::{bank_access, bank_cycles};
use crate::occupancy::{occupancy, Limiter};

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
pub fn explain_banks(shared: &SharedParams, device: &str, point: &BankPoint) -> String {
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
    fn bank_view_shows_the_transpose_conflict_and_its_fix() {
        let shared = experiments::Profile::find("h100").unwrap().shared.unwrap();
        let column = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 32 });
        assert!(
            column.contains("32-way conflict") && column.contains(" 1->0 "),
            "{column}"
        );
        let padded = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 33 });
        assert!(padded.contains("no conflict") && padded.contains(" 1->1 "), "{padded}");
    }
}
