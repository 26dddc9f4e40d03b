//! The occupancy calculator: how many blocks of a kernel one SM holds at once.
//!
//! Four limits, each from one resource, and the smallest wins:
//! - warp slots: `max_threads_per_sm / warp_size` warps, handed out per whole warp;
//! - registers: each warp gets `registers x warp_size` rounded up to the allocation unit, from
//!   the register file of one of the SM's sub-partitions (a warp cannot straddle two);
//! - shared memory: each block gets its static + dynamic bytes plus the driver's reserved
//!   bytes, rounded up to the allocation unit;
//! - the SM's block slots.
//!
//! The rules follow CUDA's occupancy calculator (cuda_occupancy.h) for kernels that opted in
//! to the device's largest dynamic shared memory per block, under the default carveout
//! preference, which on compute capability 9.x gives every SM its full shared memory.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{args, fail, metric, strings, Teacher};
use experiments::{Metrics, Profile};

use crate::backend::SimError;
use crate::models::Model;

use std::fmt;

use std::fmt::Write as _;

use experiments::{format_bytes, OccupancyPoint, SmParams};

/// Which resource sets the number of resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    /// Warp slots (threads per SM).
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
    /// The SM's block slots.
    Blocks,
}

impl fmt::Display for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limiter::Warps => "warp slots",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Blocks => "block slots",
        })
    }
}

/// The calculator's answer, with its working shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occupancy {
    /// Resident blocks per SM (0: the kernel cannot launch with this shape).
    pub blocks_per_sm: u32,
    /// The binding resource (the first of equals, in the order warps, registers, shared, blocks).
    pub limiter: Limiter,
    /// Blocks allowed by warp slots.
    pub by_warps: u32,
    /// Blocks allowed by registers.
    pub by_registers: u32,
    /// Blocks allowed by shared memory.
    pub by_shared: u32,
    /// Blocks allowed by block slots.
    pub by_blocks: u32,
    /// Warps per block.
    pub warps_per_block: u32,
    /// Registers one warp is given.
    pub registers_per_warp: u32,
    /// Shared memory one block is given, bytes (reserved bytes included).
    pub shared_per_block: u32,
    /// Why no block fits, when none does.
    pub cannot_launch: Option<String>,
}

fn round_up(value: u32, unit: u32) -> u32 {
    value.div_ceil(unit) * unit
}

/// Blocks of `kernel` resident on one SM described by `sm`.
pub fn occupancy(sm: &SmParams, kernel: &OccupancyPoint) -> Occupancy {
    let warps_per_block = kernel.threads.div_ceil(sm.warp_size).max(1);
    let mut cannot_launch = None;

    let by_warps = if kernel.threads > sm.max_threads_per_block {
        cannot_launch = Some(format!(
            "{} threads exceed {} per block",
            kernel.threads, sm.max_threads_per_block
        ));
        0
    } else {
        (sm.max_threads_per_sm / sm.warp_size) / warps_per_block
    };

    let registers_per_warp = round_up(kernel.registers * sm.warp_size, sm.register_allocation_unit);
    let registers_per_block = registers_per_warp * warps_per_block;
    // The hardware checks a launch as if every sub-partition took a share of the block's warps.
    let registers_checked = registers_per_warp * round_up(warps_per_block, sm.sub_partitions);
    let by_registers = if kernel.registers > sm.max_registers_per_thread
        || registers_per_block > sm.registers_per_block
        || registers_checked > sm.registers_per_block
    {
        cannot_launch.get_or_insert(format!(
            "{} registers x {} threads need {} registers, over the {} a block may use",
            kernel.registers, kernel.threads, registers_checked, sm.registers_per_block
        ));
        0
    } else {
        // A kernel that uses no registers is not limited by them.
        match (sm.registers_per_sm / sm.sub_partitions).checked_div(registers_per_warp) {
            Some(warps_per_sub_partition) => warps_per_sub_partition * sm.sub_partitions / warps_per_block,
            None => u32::MAX,
        }
    };

    let requested = kernel.static_shared + kernel.dynamic_shared + sm.reserved_shared_bytes_per_block;
    let shared_per_block = round_up(requested, sm.shared_allocation_unit);
    let shared_limit = sm.shared_bytes_per_block_optin + sm.reserved_shared_bytes_per_block;
    let by_shared = if shared_per_block > shared_limit {
        cannot_launch.get_or_insert(format!(
            "{} B of shared memory per block exceed the {} B a block may have",
            kernel.static_shared + kernel.dynamic_shared,
            sm.shared_bytes_per_block_optin
        ));
        0
    } else {
        sm.shared_bytes_per_sm / shared_per_block
    };

    let by_blocks = sm.max_blocks_per_sm;
    let candidates = [
        (by_warps, Limiter::Warps),
        (by_registers, Limiter::Registers),
        (by_shared, Limiter::SharedMemory),
        (by_blocks, Limiter::Blocks),
    ];
    let (blocks_per_sm, limiter) = candidates
        .into_iter()
        .fold(candidates[0], |best, c| if c.0 < best.0 { c } else { best });
    Occupancy {
        blocks_per_sm,
        limiter,
        by_warps,
        by_registers,
        by_shared,
        by_blocks,
        warps_per_block,
        registers_per_warp,
        shared_per_block,
        cannot_launch,
    }
}

/// The occupancy calculator's working for one kernel shape, as terminal text.
pub(crate) fn explain_occupancy(sm: &SmParams, device: &str, kernel: &OccupancyPoint) -> String {
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

/// The occupancy calculator as a family's model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = OccupancyPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &OccupancyPoint) -> Result<Metrics, SimError> {
        let sm = &profile.sm;
        let blocks = occupancy(sm, point).blocks_per_sm;
        Ok(experiments::occupancy_metrics(
            blocks,
            point.threads,
            sm.warp_size,
            sm.max_threads_per_sm / sm.warp_size,
        ))
    }

    const EXPLAINS: bool = true;

    fn explain(profile: &Profile, point: &OccupancyPoint) -> Result<String, experiments::Error> {
        Ok(explain_occupancy(&profile.sm, &profile.device.name, point))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let sm = &t.profile.sm;
    let threads: Vec<u32> = vec![32, 64, 128, 192, 256, 384, 512, 640, 768, 1024];
    let registers: Vec<u32> = vec![16, 32, 40, 48, 64, 80, 96, 128, 168, 255];
    let shared_kib: Vec<u32> = vec![0, 4, 8, 16, 24, 32, 48, 64, 100, 164];
    let controls = vec![
        TeachControl::new(
            "threads",
            "Threads per block",
            "range",
            strings(&threads),
            strings(&threads),
            "256",
        ),
        TeachControl::new(
            "registers",
            "Registers per thread",
            "range",
            strings(&registers),
            strings(&registers),
            "64",
        ),
        TeachControl::new(
            "dynamic_shared",
            "Shared memory per block",
            "range",
            shared_kib.iter().map(|k| k * 1024).map(|b| b.to_string()).collect(),
            shared_kib.iter().map(|k| format!("{k} KiB")).collect(),
            "0",
        ),
    ];
    let panel = TeachPanel::build("occupancy", "One kernel's resident blocks per SM", controls, |values| {
        let a = args(&["threads", "registers", "dynamic_shared"], values);
        let workload = t.point(experiments::Family::Occupancy, &a)?;
        let Workload::Occupancy(point) = workload else {
            return Err(fail("not an occupancy point"));
        };
        let occ = occupancy(sm, &point);
        let metrics = t.predict(&workload)?;
        let blocks = occ.blocks_per_sm;
        // The step where another block fits: the largest value of one resource, the others
        // kept, at which the model lets one more block in. Fewer registers, threads or bytes
        // never let fewer blocks in (this module's property tests), so the values that let one
        // more in are those up to some value, found by bisection over `lo, lo + step, ..` up to
        // `hi`.
        let more = |vary: &dyn Fn(u32) -> experiments::OccupancyPoint, lo: u32, hi: u32, step: u32| -> Option<u32> {
            let fits = |k: u32| occupancy(sm, &vary(lo + k * step)).blocks_per_sm > blocks;
            if hi < lo || !fits(0) {
                return None;
            }
            let (mut good, mut bad) = (0, (hi - lo) / step + 1);
            while bad - good > 1 {
                let mid = good + (bad - good) / 2;
                if fits(mid) {
                    good = mid;
                } else {
                    bad = mid;
                }
            }
            Some(lo + good * step)
        };
        let by_registers = more(
            &|r| experiments::OccupancyPoint { registers: r, ..point },
            1,
            point.registers.saturating_sub(1),
            1,
        );
        let by_threads = more(
            &|n| experiments::OccupancyPoint { threads: n, ..point },
            32,
            point.threads.saturating_sub(32),
            32,
        );
        let by_shared = if point.dynamic_shared > 0 {
            more(
                &|s| experiments::OccupancyPoint {
                    dynamic_shared: s,
                    ..point
                },
                0,
                point.dynamic_shared - 1,
                1,
            )
        } else {
            None
        };
        let mut steps = Vec::new();
        if let Some(r) = by_registers {
            steps.push(format!("{r} registers per thread"));
        }
        if let Some(s) = by_shared {
            steps.push(format!("{} of shared memory", experiments::format_bytes(u64::from(s))));
        }
        if let Some(n) = by_threads {
            steps.push(format!("{n} threads per block"));
        }
        let step = if steps.is_empty() {
            "no single change of registers, shared memory or threads lets another block in".to_string()
        } else {
            format!("another block fits at {}", steps.join(", or "))
        };
        let limiter = occ.limiter.to_string();
        let bar = |label: &str, value: u32, which: Limiter| {
            let binding = blocks > 0 && occ.limiter == which;
            json!({"label": label, "value": value, "text": format!("{value} blocks{}", if binding { " (limits)" } else { "" }),
                   "class": if binding { "limit" } else { "other" }})
        };
        let (text, command) = t.explain("occupancy", &a)?;
        Ok(TeachView {
            facts: vec![
                TeachFact::new("blocks_per_sm", "Resident blocks per SM", blocks.to_string())
                    .strong()
                    .bad_if(blocks == 0),
                TeachFact::new(
                    "warps_per_sm",
                    "Resident warps per SM",
                    format!("{}", metric(&metrics, "warps_per_sm")?),
                ),
                TeachFact::new(
                    "occupancy",
                    "Occupancy",
                    format!("{:.0}%", 100.0 * metric(&metrics, "occupancy")?),
                ),
                TeachFact::new(
                    "limiter",
                    "Limiting resource",
                    if blocks == 0 {
                        occ.cannot_launch.clone().unwrap_or_else(|| "cannot launch".into())
                    } else {
                        limiter
                    },
                ),
                TeachFact::new("next_step", "The step to one more block", step),
            ],
            measured: t.measured(&workload, "resident blocks per SM", "blocks_per_sm", |v| {
                format!("{v:.0}")
            }),
            command,
            text,
            picture: json!({"kind": "bars", "title": "blocks each resource allows", "bars": [
                bar("warp slots", occ.by_warps, Limiter::Warps),
                bar("registers", occ.by_registers, Limiter::Registers),
                bar("shared memory", occ.by_shared, Limiter::SharedMemory),
                bar("block slots", occ.by_blocks, Limiter::Blocks),
            ]}),
        })
    })?;
    Ok(TeachPage {
        slug: "occupancy".into(),
        title: "Occupancy: what limits resident blocks".into(),
        intro: vec![
            "An SM holds as many blocks of a kernel as its warp slots, registers, shared memory and block slots all allow. Move threads, registers and shared memory: the bar that binds is red, and the page says how far one resource must fall before another block fits.".into(),
        ],
        terminal: panel.initial_command(),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/occupancy.rs with the SM of profile '{}' ({}).", t.profile.name, t.profile.device.name),
            "Measured: cuOccupancyMaxActiveBlocksPerMultiprocessor on the H100 and H200 over 1320 shapes; shown where this shape is one of them.".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// Compute capability 9.0, as the built-in h100 profile has it.
    fn hopper() -> SmParams {
        experiments::Profile::find("h100").unwrap().sm
    }

    fn kernel(threads: u32, registers: u32, static_shared: u32, dynamic_shared: u32) -> OccupancyPoint {
        OccupancyPoint {
            threads,
            registers,
            static_shared,
            dynamic_shared,
        }
    }

    #[test]
    fn textbook_cases_on_hopper() {
        let sm = hopper();
        // 256 threads, 32 registers: 8 blocks fill the 64 warp slots.
        let o = occupancy(&sm, &kernel(256, 32, 0, 0));
        assert_eq!((o.blocks_per_sm, o.limiter), (8, Limiter::Warps));
        // 64 registers: 2048 per warp, 8 warps per sub-partition, 32 warps: 4 blocks of 8 warps.
        let o = occupancy(&sm, &kernel(256, 64, 0, 0));
        assert_eq!((o.blocks_per_sm, o.limiter), (4, Limiter::Registers));
        // 32 threads, few registers: the 32 block slots bind.
        let o = occupancy(&sm, &kernel(32, 16, 0, 0));
        assert_eq!((o.blocks_per_sm, o.limiter), (32, Limiter::Blocks));
        // 100 KiB dynamic + 1 KiB reserved per block: two blocks in 228 KiB.
        let o = occupancy(&sm, &kernel(128, 32, 0, 100 << 10));
        assert_eq!((o.blocks_per_sm, o.limiter), (2, Limiter::SharedMemory));
        // 1024 threads x 255 registers cannot launch at all.
        let o = occupancy(&sm, &kernel(1024, 255, 0, 0));
        assert_eq!(o.blocks_per_sm, 0);
        assert!(o.cannot_launch.unwrap().contains("registers"));
    }

    proptest! {
        #[test]
        fn occupancy_never_exceeds_any_limit(threads in 1u32..=1024, registers in 1u32..=255,
                                             static_shared in 0u32..=(48 << 10), dynamic_shared in 0u32..=(240 << 10)) {
            let sm = hopper();
            let o = occupancy(&sm, &kernel(threads, registers, static_shared, dynamic_shared));
            prop_assert!(o.blocks_per_sm <= sm.max_blocks_per_sm);
            prop_assert!(o.blocks_per_sm * o.warps_per_block * sm.warp_size <= sm.max_threads_per_sm);
            prop_assert!(o.blocks_per_sm * o.warps_per_block * o.registers_per_warp <= sm.registers_per_sm);
            prop_assert!(o.blocks_per_sm * o.shared_per_block <= sm.shared_bytes_per_sm);
            prop_assert_eq!(o.blocks_per_sm == 0, o.cannot_launch.is_some());
        }

        #[test]
        fn more_registers_never_raise_occupancy(threads in 1u32..=1024, registers in 1u32..255,
                                                dynamic_shared in 0u32..=(100 << 10)) {
            let sm = hopper();
            let fewer = occupancy(&sm, &kernel(threads, registers, 0, dynamic_shared)).blocks_per_sm;
            let more = occupancy(&sm, &kernel(threads, registers + 1, 0, dynamic_shared)).blocks_per_sm;
            prop_assert!(more <= fewer, "{} registers: {}, {}: {}", registers, fewer, registers + 1, more);
        }

        /// What the teaching page's bisection for "the step where another block fits" rests on,
        /// with the two properties beside it.
        #[test]
        fn more_threads_never_raise_occupancy(warps in 1u32..32, registers in 1u32..=255,
                                              dynamic_shared in 0u32..=(200 << 10)) {
            let sm = hopper();
            let fewer = occupancy(&sm, &kernel(warps * 32, registers, 0, dynamic_shared)).blocks_per_sm;
            let more = occupancy(&sm, &kernel((warps + 1) * 32, registers, 0, dynamic_shared)).blocks_per_sm;
            prop_assert!(more <= fewer, "{} warps: {}, {}: {}", warps, fewer, warps + 1, more);
        }

        #[test]
        fn more_shared_memory_never_raises_occupancy(threads in 1u32..=1024, registers in 1u32..=255,
                                                     dynamic_shared in 0u32..=(200 << 10), extra in 1u32..(16 << 10)) {
            let sm = hopper();
            let less = occupancy(&sm, &kernel(threads, registers, 0, dynamic_shared)).blocks_per_sm;
            let more = occupancy(&sm, &kernel(threads, registers, 0, dynamic_shared + extra)).blocks_per_sm;
            prop_assert!(more <= less);
        }
    }
}
