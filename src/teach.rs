//! `vramlab teach --out DIR`: the teaching site. Every figure a page shows is computed here, from
//! the models (`sim`), the committed GPU records (`reports/reference/`, built into the binary)
//! and the allocator replay (`allocators`), over every value its controls reach; `reports`
//! writes the pages, whose script only looks the figures up and draws them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use experiments::{format_bytes, Family, Metrics, Profile, ReplayRecord, Trace, Workload, DEFAULT_PROFILE};
use reports::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView};
use serde_json::json;
use sim::SimBackend;

/// A committed GPU record built into the binary: (where it lives in the repository, its JSON).
macro_rules! reference {
    ($path:literal) => {
        ($path, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path)))
    };
}

/// The committed GPU measurements the pages set beside the model: the newest full run of each
/// family on each GPU.
const REFERENCE_RECORDS: &[(&str, &str)] = &[
    reference!("reports/reference/h100/all-suites/run/banks/hw.json"),
    reference!("reports/reference/h100/all-suites/run/coalescing/hw.json"),
    reference!("reports/reference/h100/all-suites/run/coalescing_mask/hw.json"),
    reference!("reports/reference/h100/all-suites/run/latency/hw.json"),
    reference!("reports/reference/h100/all-suites/run/occupancy/hw.json"),
    reference!("reports/reference/h100/all-suites/run/h2d_pinned/hw.json"),
    reference!("reports/reference/h100/all-suites/run/h2d_pageable/hw.json"),
    reference!("reports/reference/h100/all-suites/run/d2h_pinned/hw.json"),
    reference!("reports/reference/h100/all-suites/run/d2h_pageable/hw.json"),
    reference!("reports/reference/h100/all-suites/run/overlap/hw.json"),
    reference!("reports/reference/h100/global-v3/run/constant/hw.json"),
    reference!("reports/reference/h100/global-v3/run/constant_odd/hw.json"),
    reference!("reports/reference/h200/hierarchy/run/banks/hw.json"),
    reference!("reports/reference/h200/hierarchy/run/occupancy/hw.json"),
    reference!("reports/reference/h200/coalescing/run/coalescing/hw.json"),
    reference!("reports/reference/h200/constant/run/constant/hw.json"),
    reference!("reports/reference/h200/constant/run/constant_odd/hw.json"),
    reference!("reports/reference/h200/latency-v3/run/latency/hw.json"),
    reference!("reports/reference/h200/run/h2d_pinned/hw.json"),
    reference!("reports/reference/h200/run/h2d_pageable/hw.json"),
    reference!("reports/reference/h200/run/d2h_pinned/hw.json"),
    reference!("reports/reference/h200/run/d2h_pageable/hw.json"),
    reference!("reports/reference/h200/run/overlap/hw.json"),
];

/// The committed PyTorch snapshot the allocator page steps through by default.
const RESNET18: &[u8] = include_bytes!("../tests/traces/resnet18_default.pickle");
const RESNET18_NAME: &str = "tests/traces/resnet18_default.pickle";

/// The two allocator settings the allocator page sets side by side.
pub(crate) const TEACH_SETTINGS: [&str; 2] = ["", "expandable_segments:True"];

/// Frames of the allocator page: the trace is shown at this many evenly spaced events (and at
/// each setting's peak).
const FRAMES: usize = 120;

/// One measured point of a committed record.
struct Measured {
    gpu: String,
    path: &'static str,
    workload: Workload,
    metrics: Metrics,
}

/// Every point of the committed records, typed as the model's points are.
fn measured_points() -> Result<Vec<Measured>> {
    let mut points = Vec::new();
    for (path, text) in REFERENCE_RECORDS {
        let record: experiments::Record =
            serde_json::from_str(text).with_context(|| format!("{path}: not a record"))?;
        for point in &record.points {
            let args: Vec<String> = point.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let typed = experiments::point_from_args(record.family, &args)
                .with_context(|| format!("{path}: a point the model cannot read"))?;
            points.push(Measured {
                gpu: record.device.name.clone(),
                path,
                workload: typed.workload,
                metrics: point.metrics.clone(),
            });
        }
    }
    Ok(points)
}

/// The site's inputs: the profile, its model, and the measurements.
struct Teacher {
    profile: Profile,
    sim: SimBackend,
    measured: Vec<Measured>,
    /// ` --profile NAME` where it is not the default, for the commands shown.
    profile_flag: String,
}

impl Teacher {
    fn new(profile: &str) -> Result<Teacher> {
        let found = Profile::find(profile)?;
        Ok(Teacher {
            sim: SimBackend::new(found.clone()),
            profile: found,
            measured: measured_points()?,
            profile_flag: if profile == DEFAULT_PROFILE {
                String::new()
            } else {
                format!(" --profile {profile}")
            },
        })
    }

    /// A point of `family` from `name=value` pairs, as `vramlab explain` reads them.
    fn point(&self, family: Family, args: &[String]) -> Result<Workload> {
        Ok(experiments::point_from_args(family, args)
            .with_context(|| format!("{}: {}", family.name(), args.join(" ")))?
            .workload)
    }

    fn predict(&self, workload: &Workload) -> Result<Metrics> {
        self.sim.predict(workload).map_err(|e| anyhow!("{e}"))
    }

    /// `vramlab explain`'s text and command for one point.
    fn explain(&self, topic: &str, args: &[String]) -> Result<(String, String)> {
        let text = sim::explain(topic, args, &self.profile)?;
        Ok((
            text,
            format!("vramlab explain {topic} {}{}", args.join(" "), self.profile_flag),
        ))
    }

    /// The committed measurements of `workload`'s very point, one line each, with `metric`
    /// formatted by `show`; or the line saying there is none.
    fn measured(&self, workload: &Workload, what: &str, metric: &str, show: impl Fn(f64) -> String) -> Vec<String> {
        let lines: Vec<String> = self
            .measured
            .iter()
            .filter(|m| m.workload == *workload)
            .filter_map(|m| {
                m.metrics
                    .get(metric)
                    .map(|v| format!("Measured on {}: {what} {} ({})", m.gpu, show(*v), m.path))
            })
            .collect();
        if lines.is_empty() {
            vec![format!(
                "No committed GPU measurement of this point: the H100 and H200 runs built into vramlab did not measure it, so only the model's {what} is shown."
            )]
        } else {
            lines
        }
    }

    /// The measured points of a family, by GPU, for a curve: (gpu, [(x, y)]).
    fn measured_series(
        &self,
        keep: impl Fn(&Workload) -> Option<f64>,
        metric: &str,
    ) -> BTreeMap<String, Vec<(f64, f64)>> {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for m in &self.measured {
            if let (Some(x), Some(y)) = (keep(&m.workload), m.metrics.get(metric)) {
                series.entry(m.gpu.clone()).or_default().push((x, *y));
            }
        }
        for points in series.values_mut() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        series
    }
}

fn strings<T: ToString>(values: &[T]) -> Vec<String> {
    values.iter().map(T::to_string).collect()
}

fn metric(metrics: &Metrics, name: &str) -> Result<f64> {
    metrics
        .get(name)
        .copied()
        .ok_or_else(|| anyhow!("the model gave no '{name}'"))
}

/// Every combination of the controls' values, in key order.
fn combinations(controls: &[TeachControl]) -> Vec<Vec<String>> {
    let mut all: Vec<Vec<String>> = vec![Vec::new()];
    for control in controls {
        all = all
            .into_iter()
            .flat_map(|prefix| {
                control.values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect();
    }
    all
}

/// A panel whose every view `view` computes from its controls' values.
fn panel(
    id: &str,
    title: &str,
    controls: Vec<TeachControl>,
    mut view: impl FnMut(&[String]) -> Result<TeachView>,
) -> Result<TeachPanel> {
    let mut views = BTreeMap::new();
    for values in combinations(&controls) {
        views.insert(values.join("|"), view(&values)?);
    }
    Ok(TeachPanel {
        id: id.into(),
        title: title.into(),
        controls,
        views,
    })
}

fn args(names: &[&str], values: &[String]) -> Vec<String> {
    names.iter().zip(values).map(|(n, v)| format!("{n}={v}")).collect()
}

fn banks_page(t: &Teacher) -> Result<TeachPage> {
    let shared = t
        .profile
        .banks
        .as_ref()
        .ok_or_else(|| anyhow!("profile '{}' has no [banks] section", t.profile.name))?;
    let strides: Vec<u32> = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 48, 64];
    let stride_labels: Vec<String> = strides
        .iter()
        .map(|s| {
            if *s == 0 {
                "0 (broadcast)".to_string()
            } else {
                s.to_string()
            }
        })
        .collect();
    let controls = vec![
        TeachControl::new(
            "width",
            "Bytes per lane",
            "select",
            strings(&[4, 8, 16]),
            strings(&["4 (float)", "8 (double, float2)", "16 (float4)"]),
            "4",
        ),
        TeachControl::new(
            "stride",
            "Stride (elements between lanes)",
            "range",
            strings(&strides),
            stride_labels,
            "2",
        ),
    ];
    let panel = panel("banks", "One warp's shared-memory load", controls, |values| {
        let a = args(&["width", "stride"], values);
        let workload = t.point(Family::Banks, &a)?;
        let Workload::Banks(point) = workload else {
            return Err(anyhow!("not a bank point"));
        };
        let access = sim::bank_access(shared, &point);
        let metrics = t.predict(&workload)?;
        let cycles = metric(&metrics, "cycles")?;
        let padded = experiments::BankPoint {
            stride: point.stride + 1,
            ..point
        };
        let padded_access = sim::bank_access(shared, &padded);
        let padded_cycles = metric(&t.predict(&Workload::Banks(padded))?, "cycles")?;
        let (text, command) = t.explain("banks", &a)?;
        let passes_of_bank = |bank: u32| {
            access
                .lane_banks
                .iter()
                .zip(&access.lane_passes)
                .filter(|(b, _)| **b == bank)
                .map(|(_, p)| p + 1)
                .max()
                .unwrap_or(0)
        };
        let cells: Vec<serde_json::Value> = (0..32usize)
            .map(|lane| {
                let (bank, pass) = (access.lane_banks[lane], access.lane_passes[lane]);
                let sharing = (0..32)
                    .filter(|&o| access.lane_banks[o] == bank && access.lane_passes[o] == pass)
                    .count();
                let class = if passes_of_bank(bank) > 1 {
                    "conflict"
                } else if sharing > 1 {
                    "broadcast"
                } else {
                    "lane"
                };
                json!({"col": bank, "row": pass, "text": lane.to_string(), "class": class,
                       "title": format!("lane {lane}: bank {bank}, pass {}", pass + 1)})
            })
            .collect();
        let column_classes: Vec<&str> = (0..32)
            .map(|b| if passes_of_bank(b) > 1 { "#ffebee" } else { "#fafafa" })
            .collect();
        let degree = if access.conflict_degree == 1 {
            "none".to_string()
        } else {
            format!("{}-way", access.conflict_degree)
        };
        let fix = format!(
            "stride {}: {} wavefront(s), about {:.0} cycles",
            padded.stride, padded_access.wavefronts, padded_cycles
        );
        Ok(TeachView {
            facts: vec![
                TeachFact::new(
                    "wavefronts",
                    "Passes over the banks (wavefronts)",
                    access.wavefronts.to_string(),
                )
                .strong(),
                TeachFact::new(
                    "min_wavefronts",
                    "Passes without conflicts",
                    access.min_wavefronts.to_string(),
                ),
                TeachFact::new("conflict", "Bank conflict", degree),
                TeachFact::new("replays", "Replays", access.replays().to_string()),
                TeachFact::new("cycles", "Predicted cycles per dependent load", format!("{cycles:.0}")),
                TeachFact::new("padded", "With one more element of padding", fix),
            ],
            measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.1}")),
            command,
            text,
            picture: json!({
                "kind": "cells", "title": "lanes on banks",
                "column_title": "bank", "row_title": "pass",
                "column_labels": strings(&(0..32).collect::<Vec<u32>>()),
                "column_classes": column_classes,
                "row_labels": (1..=access.wavefronts).map(|p| p.to_string()).collect::<Vec<_>>(),
                "rows": access.wavefronts, "cells": cells, "cell_width": 36,
                "legend": [["lane", "lane, no conflict"], ["conflict", "lane in a conflicting bank"], ["broadcast", "lanes sharing one word"]],
            }),
        })
    })?;
    Ok(TeachPage {
        slug: "banks".into(),
        title: "Shared-memory banks".into(),
        intro: vec![
            "Shared memory is 32 banks of 4-byte words; each bank delivers one word per pass. Move the stride and watch which bank each of the warp's 32 lanes lands in: lanes that pile into one bank with different words take one pass each (a conflict); lanes reading the same word share it (a broadcast).".into(),
            "Each lane is drawn at the bank of its first word (8- and 16-byte loads also touch the next one or three banks); rows are the passes the model counts.".into(),
        ],
        terminal: format!("vramlab explain banks width=4 stride=2{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/banks.rs with profile '{}' ({}).", t.profile.name, shared.source),
            "Offset: vramlab's bank model takes a width and a stride, not an offset, so this page has no offset control; a broadcast is stride 0.".into(),
            "The padding line is the same model at the stride plus one element: the usual fix for a column read of a 32 x 32 float tile (stride 32 -> 33).".into(),
        ],
    })
}

fn coalescing_page(t: &Teacher) -> Result<TeachPage> {
    let global = t
        .profile
        .coalescing
        .as_ref()
        .ok_or_else(|| anyhow!("profile '{}' has no [coalescing] section", t.profile.name))?;
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
    let panel = panel("coalescing", "One warp's global-memory read", controls, |values| {
        let a = args(&["width", "stride", "offset"], values);
        let workload = t.point(Family::Coalescing, &a)?;
        let Workload::Coalescing(point) = workload else {
            return Err(anyhow!("not a coalescing point"));
        };
        let metrics = t.predict(&workload)?;
        let lanes = sim::lane_sectors(global, &point);
        let mut sectors: Vec<(u64, u64)> = lanes.clone();
        sectors.dedup();
        let column = |sector: u64| sectors.iter().position(|s| s.0 == sector).unwrap_or(0);
        let mut stacked: BTreeMap<u64, u32> = BTreeMap::new();
        let cells: Vec<serde_json::Value> = lanes
            .iter()
            .enumerate()
            .map(|(lane, &(sector, line))| {
                let row = stacked.entry(sector).or_default();
                let cell = json!({"col": column(sector), "row": *row, "text": lane.to_string(), "class": "lane",
                                  "title": format!("lane {lane}: sector {sector}, line {line}")});
                *row += 1;
                cell
            })
            .collect();
        let rows = stacked.values().copied().max().unwrap_or(1);
        let latency = metric(&metrics, "latency_bound_us")?;
        let bandwidth = metric(&metrics, "bandwidth_bound_us")?;
        let bound = if bandwidth >= latency {
            format!("throughput: {bandwidth:.1} us against latency {latency:.1} us")
        } else {
            format!("latency: {latency:.1} us against throughput {bandwidth:.1} us")
        };
        let footprint = sim::warp_footprint(global, &point);
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
                .strong(),
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
                "column_labels": sectors.iter().map(|s| s.0.to_string()).collect::<Vec<_>>(),
                "column_classes": sectors.iter().map(|s| if s.1 % 2 == 0 { "even" } else { "odd" }).collect::<Vec<_>>(),
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
        terminal: format!("vramlab explain coalescing width=4 stride=2{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/coalescing.rs with profile '{}'; the array read is the explain default (1 GiB, 32 lanes active).", t.profile.name),
            "Measured bandwidths are shown where a committed run read the same point (its misalignment runs used offset 0 and 1).".into(),
        ],
    })
}

fn constant_page(t: &Teacher) -> Result<TeachPage> {
    let distinct: Vec<u32> = (1..=32).collect();
    let controls = vec![
        TeachControl::new(
            "distinct",
            "Distinct addresses in the warp",
            "range",
            strings(&distinct),
            strings(&distinct),
            "1",
        ),
        TeachControl::new(
            "cache",
            "Constant cache",
            "select",
            strings(&["warm", "cold"]),
            strings(&["warm (hit)", "cold (miss)"]),
            "warm",
        ),
    ];
    let mut curves: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for cache in ["warm", "cold"] {
        for d in &distinct {
            let w = t.point(
                Family::Constant,
                &args(&["distinct", "cache"], &[d.to_string(), cache.to_string()]),
            )?;
            curves
                .entry(cache.to_string())
                .or_default()
                .push((f64::from(*d), metric(&t.predict(&w)?, "cycles")?));
        }
    }
    let panel = panel("constant", "One warp reading __constant__ memory", controls, |values| {
        let a = args(&["distinct", "cache"], values);
        let workload = t.point(Family::Constant, &a)?;
        let cycles = metric(&t.predict(&workload)?, "cycles")?;
        let (text, command) = t.explain("constant", &a)?;
        let cache = values[1].clone();
        let mut series =
            vec![json!({"name": format!("model, {cache}"), "class": "pinned", "line": true, "points": curves[&cache]})];
        let cold = cache == "cold";
        for (gpu, points) in t.measured_series(
            |w| match w {
                Workload::Constant(p) if p.cold == cold => Some(f64::from(p.distinct)),
                _ => None,
            },
            "cycles",
        ) {
            series.push(json!({"name": format!("measured, {gpu}"), "class": if gpu.contains("H200") { "block2" } else { "measured" }, "line": false, "points": points}));
        }
        Ok(TeachView {
            facts: vec![
                TeachFact::new("passes", "Passes (one per distinct address)", values[0].clone()),
                TeachFact::new(
                    "cycles",
                    "Predicted cycles per dependent access",
                    format!("{cycles:.0}"),
                )
                .strong(),
            ],
            measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.1}")),
            command,
            text,
            picture: json!({"kind": "curve", "title": "cycles against distinct addresses", "xlabel": "distinct addresses per warp",
                            "ylabel": "cycles per access", "xlog": false, "ylog": false, "series": series,
                            "xticks": [[1, "1"], [4, "4"], [8, "8"], [12, "12"], [16, "16"], [20, "20"], [24, "24"], [28, "28"], [32, "32"]],
                            "marks": [[values[0].parse::<f64>().unwrap_or(1.0), cycles]]}),
        })
    })?;
    Ok(TeachPage {
        slug: "constant".into(),
        title: "Constant memory: serialisation".into(),
        intro: vec![
            "The constant cache serves one address per pass. A warp whose lanes all read one word is served at once; each further distinct word adds a pass. Move the slider and watch the cost climb.".into(),
        ],
        terminal: format!("vramlab explain constant distinct=5{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![format!("Model: sim/src/constant.rs with profile '{}'.", t.profile.name)],
    })
}

fn occupancy_page(t: &Teacher) -> Result<TeachPage> {
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
    let panel = panel("occupancy", "One kernel's resident blocks per SM", controls, |values| {
        let a = args(&["threads", "registers", "dynamic_shared"], values);
        let workload = t.point(Family::Occupancy, &a)?;
        let Workload::Occupancy(point) = workload else {
            return Err(anyhow!("not an occupancy point"));
        };
        let occ = sim::occupancy(sm, &point);
        let metrics = t.predict(&workload)?;
        let blocks = occ.blocks_per_sm;
        // The step where another block fits: the largest value of one resource, the others
        // kept, at which the model lets one more block in.
        let more = |vary: &dyn Fn(u32) -> experiments::OccupancyPoint, from: u32, step: u32| -> Option<u32> {
            let mut v = from;
            while v >= step {
                v -= step;
                if v == 0 {
                    break;
                }
                if sim::occupancy(sm, &vary(v)).blocks_per_sm > blocks {
                    return Some(v);
                }
            }
            None
        };
        let by_registers = more(
            &|r| experiments::OccupancyPoint { registers: r, ..point },
            point.registers,
            1,
        );
        let by_threads = more(
            &|n| experiments::OccupancyPoint { threads: n, ..point },
            point.threads,
            32,
        );
        let by_shared = if point.dynamic_shared > 0 {
            more(
                &|s| experiments::OccupancyPoint {
                    dynamic_shared: s,
                    ..point
                },
                point.dynamic_shared + 1,
                1,
            )
            .or_else(|| {
                (sim::occupancy(
                    sm,
                    &experiments::OccupancyPoint {
                        dynamic_shared: 0,
                        ..point
                    },
                )
                .blocks_per_sm
                    > blocks)
                    .then_some(0)
            })
        } else {
            None
        };
        let mut steps = Vec::new();
        if let Some(r) = by_registers {
            steps.push(format!("{r} registers per thread"));
        }
        if let Some(s) = by_shared {
            steps.push(format!("{} of shared memory", format_bytes(u64::from(s))));
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
        let bar = |label: &str, value: u32, which: sim::Limiter| {
            let binding = blocks > 0 && occ.limiter == which;
            json!({"label": label, "value": value, "text": format!("{value} blocks{}", if binding { " (limits)" } else { "" }),
                   "class": if binding { "limit" } else { "other" }})
        };
        let (text, command) = t.explain("occupancy", &a)?;
        Ok(TeachView {
            facts: vec![
                TeachFact::new("blocks_per_sm", "Resident blocks per SM", blocks.to_string()).strong(),
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
                bar("warp slots", occ.by_warps, sim::Limiter::Warps),
                bar("registers", occ.by_registers, sim::Limiter::Registers),
                bar("shared memory", occ.by_shared, sim::Limiter::SharedMemory),
                bar("block slots", occ.by_blocks, sim::Limiter::Blocks),
            ]}),
        })
    })?;
    Ok(TeachPage {
        slug: "occupancy".into(),
        title: "Occupancy: what limits resident blocks".into(),
        intro: vec![
            "An SM holds as many blocks of a kernel as its warp slots, registers, shared memory and block slots all allow. Move threads, registers and shared memory: the bar that binds is red, and the page says how far one resource must fall before another block fits.".into(),
        ],
        terminal: format!("vramlab explain occupancy threads=256 registers=64{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/occupancy.rs with the SM of profile '{}' ({}).", t.profile.name, t.profile.device.name),
            "Measured: cuOccupancyMaxActiveBlocksPerMultiprocessor on the H100 and H200 over 1320 shapes; shown where this shape is one of them.".into(),
        ],
    })
}

/// Sizes 2^k and 3 x 2^(k-1) from `from` to `to`.
fn ladder(from: u64, to: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut s = from;
    while s <= to {
        sizes.push(s);
        if s + s / 2 <= to {
            sizes.push(s + s / 2);
        }
        s *= 2;
    }
    sizes
}

fn byte_ticks(from: u64, to: u64, every: u32) -> Vec<serde_json::Value> {
    let mut ticks = Vec::new();
    let mut s = from;
    while s <= to {
        ticks.push(json!([s as f64, format_bytes(s)]));
        s <<= every;
    }
    ticks
}

fn latency_page(t: &Teacher) -> Result<TeachPage> {
    let params = t
        .profile
        .latency
        .as_ref()
        .ok_or_else(|| anyhow!("profile '{}' has no [latency] section", t.profile.name))?;
    let sizes = ladder(4 << 10, 1 << 30);
    let mut model = Vec::new();
    for bytes in &sizes {
        let w = t.point(Family::Latency, &[format!("bytes={bytes}")])?;
        model.push((*bytes as f64, metric(&t.predict(&w)?, "cycles")?));
    }
    let measured = t.measured_series(
        |w| match w {
            Workload::Latency(p) => Some(p.bytes as f64),
            _ => None,
        },
        "cycles",
    );
    let controls = vec![TeachControl::new(
        "bytes",
        "Footprint of the chase",
        "range",
        strings(&sizes),
        sizes.iter().map(|s| format_bytes(*s)).collect(),
        &(1u64 << 20).to_string(),
    )];
    let panel = panel(
        "latency",
        "One thread chasing pointers through a footprint",
        controls,
        |values| {
            let workload = t.point(Family::Latency, &[format!("bytes={}", values[0])])?;
            let Workload::Latency(point) = workload else {
                return Err(anyhow!("not a latency point"));
            };
            let cycles = metric(&t.predict(&workload)?, "cycles")?;
            let [l1, l2, dram] = sim::level_shares(params, point.bytes);
            let mut series = vec![json!({"name": "model", "class": "pinned", "line": true, "points": model})];
            for (gpu, points) in &measured {
                series.push(json!({"name": format!("measured, {gpu}"), "class": if gpu.contains("H200") { "block2" } else { "measured" }, "line": false, "points": points}));
            }
            Ok(TeachView {
                facts: vec![
                    TeachFact::new("cycles", "Predicted cycles per dependent load", format!("{cycles:.0}")).strong(),
                    TeachFact::new("l1", "Loads served by the L1", format!("{:.0}%", 100.0 * l1)),
                    TeachFact::new("l2", "Loads served by the L2", format!("{:.0}%", 100.0 * l2)),
                    TeachFact::new("dram", "Loads served by DRAM", format!("{:.0}%", 100.0 * dram)),
                ],
                measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.0}")),
                command: format!("vramlab run latency{}", t.profile_flag),
                text: String::new(),
                picture: json!({"kind": "curve", "title": "the latency ladder", "xlabel": "footprint", "ylabel": "cycles per load",
                            "xlog": true, "ylog": false, "series": series, "xticks": byte_ticks(4 << 10, 1 << 30, 3),
                            "bands": [[0.0, params.l1_bytes as f64, "l1", format!("L1 {}", format_bytes(params.l1_bytes))],
                                      [params.l1_bytes as f64, params.l2_bytes as f64, "l2", format!("L2 {}", format_bytes(params.l2_bytes))]],
                            "marks": [[point.bytes as f64, cycles]]}),
            })
        },
    )?;
    Ok(TeachPage {
        slug: "latency".into(),
        title: "The latency ladder: L1, L2, DRAM".into(),
        intro: vec![
            "One thread follows a random cycle of pointers through a footprint. While the footprint fits in the L1, each load is an L1 hit; past it the L2 serves them, past the L2 DRAM does. Slide the footprint and read the cost per load off the model's curve, beside the committed measurements.".into(),
        ],
        terminal: format!("vramlab run latency{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/latency.rs with profile '{}' ({}).", t.profile.name, params.source),
            "`vramlab explain` has no latency view; the terminal command runs the model over the latency experiment's footprints and writes its report.".into(),
        ],
    })
}

fn transfers_page(t: &Teacher) -> Result<TeachPage> {
    let sizes: Vec<u64> = (10..=30).map(|k| 1u64 << k).collect();
    let point = |direction: &str, host: &str, bytes: u64| {
        t.point(
            Family::Transfer,
            &[
                format!("direction={direction}"),
                format!("host={host}"),
                format!("bytes={bytes}"),
            ],
        )
    };
    let controls = vec![
        TeachControl::new(
            "direction",
            "Direction",
            "select",
            strings(&["h2d", "d2h"]),
            strings(&["host to device", "device to host"]),
            "h2d",
        ),
        TeachControl::new(
            "bytes",
            "Bytes copied",
            "range",
            strings(&sizes),
            sizes.iter().map(|s| format_bytes(*s)).collect(),
            &(1u64 << 20).to_string(),
        ),
    ];
    let mut curves: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for direction in ["h2d", "d2h"] {
        for host in ["pinned", "pageable"] {
            for bytes in &sizes {
                let gb = metric(&t.predict(&point(direction, host, *bytes)?)?, "gb_per_s")?;
                curves
                    .entry((direction.to_string(), host.to_string()))
                    .or_default()
                    .push((*bytes as f64, gb));
            }
        }
    }
    let copies = panel("transfers", "One copy, pinned against pageable", controls, |values| {
        let (direction, bytes) = (&values[0], values[1].parse::<u64>()?);
        let pinned = point(direction, "pinned", bytes)?;
        let pageable = point(direction, "pageable", bytes)?;
        let (pm, gm) = (t.predict(&pinned)?, t.predict(&pageable)?);
        let mut series = Vec::new();
        for host in ["pinned", "pageable"] {
            series.push(json!({"name": format!("model, {host}"), "class": host, "line": true, "points": curves[&(direction.clone(), host.to_string())]}));
        }
        for host in ["pinned", "pageable"] {
            let Workload::Transfer(kind) = point(direction, host, 1)? else {
                return Err(anyhow!("not a transfer point"));
            };
            for (gpu, points) in t.measured_series(
                |w| match w {
                    Workload::Transfer(p) if p.direction == kind.direction && p.host == kind.host => {
                        Some(p.bytes as f64)
                    }
                    _ => None,
                },
                "gb_per_s",
            ) {
                let short = if gpu.contains("H200") {
                    "H200"
                } else if gpu.contains("H100") {
                    "H100"
                } else {
                    gpu.as_str()
                };
                series.push(json!({"name": format!("{short} {host}"), "class": if host == "pinned" { "#0d47a1" } else { "#bf360c" }, "line": false, "points": points}));
            }
        }
        let mut measured = t.measured(&pinned, "pinned", "gb_per_s", |v| format!("{v:.2} GB/s"));
        measured.extend(t.measured(&pageable, "pageable", "gb_per_s", |v| format!("{v:.2} GB/s")));
        if measured.iter().all(|m| m.starts_with("No committed")) {
            measured.truncate(1);
        }
        Ok(TeachView {
            facts: vec![
                TeachFact::new(
                    "pinned_us",
                    "Pinned: predicted time",
                    format!("{:.1} us", metric(&pm, "time_us")?),
                ),
                TeachFact::new(
                    "pinned_gb_per_s",
                    "Pinned: predicted bandwidth",
                    format!("{:.2} GB/s", metric(&pm, "gb_per_s")?),
                )
                .strong(),
                TeachFact::new(
                    "pageable_us",
                    "Pageable: predicted time",
                    format!("{:.1} us", metric(&gm, "time_us")?),
                ),
                TeachFact::new(
                    "pageable_gb_per_s",
                    "Pageable: predicted bandwidth",
                    format!("{:.2} GB/s", metric(&gm, "gb_per_s")?),
                )
                .strong(),
                TeachFact::new(
                    "ratio",
                    "Pageable takes",
                    format!(
                        "{:.2} x the pinned time",
                        metric(&gm, "time_us")? / metric(&pm, "time_us")?
                    ),
                ),
            ],
            measured,
            command: format!("vramlab run {direction}_pinned {direction}_pageable{}", t.profile_flag),
            text: String::new(),
            picture: json!({"kind": "curve", "title": "bandwidth against size", "xlabel": "bytes copied", "ylabel": "GB/s",
                            "xlog": true, "ylog": false, "series": series, "xticks": byte_ticks(1 << 10, 1 << 30, 2),
                            "marks": [[bytes as f64, metric(&pm, "gb_per_s")?], [bytes as f64, metric(&gm, "gb_per_s")?]]}),
        })
    })?;
    let overlap_controls = vec![
        TeachControl::new(
            "streams",
            "Streams",
            "select",
            strings(&[1, 2, 4]),
            strings(&[1, 2, 4]),
            "2",
        ),
        TeachControl::new("chunks", "Chunks", "select", strings(&[8, 32]), strings(&[8, 32]), "8"),
        TeachControl::new(
            "kernel_us",
            "Kernel time in all (us)",
            "select",
            strings(&[2000, 5000, 10000]),
            strings(&[2000, 5000, 10000]),
            "5000",
        ),
    ];
    let overlap = panel(
        "overlap",
        "A 256 MiB upload in chunks, each followed by a kernel, over streams",
        overlap_controls,
        |values| {
            let mut a = args(&["streams", "chunks", "kernel_us"], values);
            a.push(format!("bytes={}", 256u64 << 20));
            let workload = t.point(Family::Overlap, &a)?;
            let m = t.predict(&workload)?;
            let (time, serial, speedup) = (
                metric(&m, "time_us")?,
                metric(&m, "serial_time_us")?,
                metric(&m, "speedup")?,
            );
            Ok(TeachView {
                facts: vec![
                    TeachFact::new("time_us", "Predicted time, overlapped", format!("{time:.0} us")).strong(),
                    TeachFact::new(
                        "serial_time_us",
                        "Predicted time, copy then compute",
                        format!("{serial:.0} us"),
                    ),
                    TeachFact::new("speedup", "Speed-up", format!("{speedup:.2} x")),
                ],
                measured: t.measured(&workload, "overlapped time", "time_us", |v| format!("{v:.0} us")),
                command: format!("vramlab run overlap{}", t.profile_flag),
                text: String::new(),
                picture: json!({"kind": "bars", "title": "time", "bars": [
                    {"label": "copy, then compute", "value": serial, "text": format!("{serial:.0} us"), "class": "other"},
                    {"label": format!("overlapped, {} stream(s)", values[0]), "value": time, "text": format!("{time:.0} us"), "class": "pinned"},
                ]}),
            })
        },
    )?;
    Ok(TeachPage {
        slug: "transfers".into(),
        title: "Transfers: pinned, pageable, overlapped".into(),
        intro: vec![
            "A copy from page-locked (pinned) host memory goes straight to the copy engine; a pageable one is staged by the driver through pinned buffers, one chunk at a time. Slide the size to see where the fixed cost gives way to bandwidth, and how far pageable falls behind.".into(),
            "Below, an upload cut into chunks over several streams lets the copy of one chunk run beside the kernel of the previous one.".into(),
        ],
        terminal: format!("vramlab run transfers{}", t.profile_flag),
        panels: vec![copies, overlap],
        notes: vec![
            format!("Model: sim/src/transfer.rs and sim/src/overlap.rs with profile '{}'.", t.profile.name),
            "Pageable copies depend on the host's memory and CPU; the H100 and H200 measurements are of the lent machines named in reports/reference/.".into(),
            "`vramlab explain` has no transfer view; the terminal command runs the model over the transfer suite.".into(),
        ],
    })
}

/// One setting's device memory after each event: its segments (merged where mapped ranges
/// touch) and live blocks, from the replay's own operation log.
struct MemoryState {
    segments: BTreeMap<u64, u64>,
    blocks: BTreeMap<u64, u64>,
}

impl MemoryState {
    fn apply(&mut self, op: &experiments::ReplayedEvent) {
        match op.action {
            "alloc" => {
                self.blocks.insert(op.addr, op.size);
            }
            "free_completed" => {
                self.blocks.remove(&op.addr);
            }
            "segment_alloc" | "segment_map" => {
                self.segments.insert(op.addr, op.size);
            }
            "segment_free" | "segment_unmap" => self.release(op.addr, op.size),
            _ => {}
        }
    }

    /// Takes `[addr, addr + size)` out of the reserved ranges: a whole segment, or some pages of
    /// an expandable segment's mapped ranges.
    fn release(&mut self, addr: u64, size: u64) {
        let end = addr + size.max(1);
        let overlapping: Vec<(u64, u64)> = self
            .segments
            .range(..end)
            .filter(|(&a, &s)| a + s > addr)
            .map(|(&a, &s)| (a, s))
            .collect();
        for (a, s) in overlapping {
            self.segments.remove(&a);
            if a < addr {
                self.segments.insert(a, addr - a);
            }
            if a + s > end {
                self.segments.insert(end, a + s - end);
            }
        }
    }

    /// Segments in address order, touching ranges merged, each with its blocks as
    /// (offset, size): what the page draws.
    fn picture(&self) -> (Vec<serde_json::Value>, u64, u64) {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (&a, &s) in &self.segments {
            match merged.last_mut() {
                Some(last) if last.0 + last.1 == a => last.1 += s,
                _ => merged.push((a, s)),
            }
        }
        let reserved: u64 = merged.iter().map(|s| s.1).sum();
        let allocated: u64 = self.blocks.values().sum();
        let drawn = merged
            .iter()
            .map(|&(a, s)| {
                let blocks: Vec<[u64; 2]> = self.blocks.range(a..a + s).map(|(&b, &size)| [b - a, size]).collect();
                json!([a, s, format!("{} at {a:#x}", format_bytes(s)), blocks])
            })
            .collect();
        (drawn, reserved, allocated)
    }
}

/// The allocator page's replay: the two settings over the first device of `traces`, every
/// operation kept.
pub(crate) fn teach_replay(traces: Vec<Trace>) -> Result<ReplayRecord> {
    let settings: Vec<String> = TEACH_SETTINGS.iter().map(|s| s.to_string()).collect();
    let front = allocators::Replay::new(traces, None)?
        .policies(None, &settings)
        .keep_events(true);
    let record = front.run()?;
    Ok(if record.devices.is_empty() {
        record
    } else {
        record
            .devices
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("no device replayed"))?
    })
}

fn allocator_page(t: &Teacher, snapshot: Option<&Path>) -> Result<TeachPage> {
    let (traces, name) = match snapshot {
        Some(path) => (Trace::load_all(path, None)?, path.display().to_string()),
        None => (
            Trace::all_from_bytes(RESNET18_NAME, RESNET18, None)?,
            RESNET18_NAME.to_string(),
        ),
    };
    let record = teach_replay(traces)?;
    let results = &record.results;
    if results.len() != 2 {
        return Err(anyhow!("{name}: the replay gave {} results, not 2", results.len()));
    }
    let logs: Vec<&Vec<experiments::ReplayedEvent>> = results
        .iter()
        .map(|r| r.replayed.as_ref().map(|x| &x.events))
        .collect::<Option<_>>()
        .ok_or_else(|| anyhow!("{name}: the replay kept no operations"))?;
    let events = record.events.max(1);
    // Evenly spaced events, and each setting's peak (from its timeline).
    let mut at: Vec<usize> = (1..=FRAMES).map(|i| (i * events).div_ceil(FRAMES) - 1).collect();
    for r in results {
        for peak in [
            r.timeline
                .iter()
                .max_by_key(|p| (p.reserved, std::cmp::Reverse(p.event))),
            r.timeline
                .iter()
                .max_by_key(|p| (p.allocated, std::cmp::Reverse(p.event))),
        ]
        .into_iter()
        .flatten()
        {
            at.push(peak.event.min(events - 1));
        }
    }
    at.sort_unstable();
    at.dedup();
    let names = ["PyTorch defaults", "expandable_segments:True"];
    let mut states: Vec<MemoryState> = (0..2)
        .map(|_| MemoryState {
            segments: BTreeMap::new(),
            blocks: BTreeMap::new(),
        })
        .collect();
    let mut cursor = [0usize; 2];
    let mut frames = Vec::new();
    let mut scale = results.iter().map(|r| r.peak_reserved_bytes).max().unwrap_or(1);
    for &event in &at {
        let mut pictures = Vec::new();
        for p in 0..2 {
            while cursor[p] < logs[p].len() && logs[p][cursor[p]].at <= event {
                states[p].apply(&logs[p][cursor[p]]);
                cursor[p] += 1;
            }
            let (segments, reserved, allocated) = states[p].picture();
            scale = scale.max(reserved);
            pictures.push((segments, reserved, allocated));
        }
        frames.push((event, pictures));
    }
    let text = reports::replay_text(&record);
    let command = format!(
        "vramlab replay {} --alloc-conf \"\" --alloc-conf expandable_segments:True",
        snapshot.map_or(RESNET18_NAME.to_string(), |p| p.display().to_string())
    );
    let steps: Vec<String> = (0..frames.len()).map(|i| i.to_string()).collect();
    let labels: Vec<String> = frames
        .iter()
        .map(|(event, _)| format!("event {} of {}", event + 1, record.events))
        .collect();
    // The page opens at the defaults' peak, where the two settings differ most.
    let peak_step = results[0]
        .timeline
        .iter()
        .max_by_key(|p| (p.reserved, std::cmp::Reverse(p.event)))
        .and_then(|peak| {
            frames
                .iter()
                .position(|(event, _)| *event == peak.event.min(events - 1))
        })
        .unwrap_or(0);
    let controls = vec![TeachControl::new(
        "step",
        "Step through the trace",
        "range",
        steps,
        labels,
        &peak_step.to_string(),
    )];
    let panel = panel("allocator", "The same trace under two settings", controls, |values| {
        let index: usize = values[0].parse()?;
        let (event, pictures) = &frames[index];
        let mut facts = vec![TeachFact::new(
            "event",
            "Trace event",
            format!("{} of {}", event + 1, record.events),
        )];
        let mut policies = Vec::new();
        for (p, (segments, reserved, allocated)) in pictures.iter().enumerate() {
            let key = if p == 0 { "defaults" } else { "expandable" };
            let r = &results[p];
            facts.push(TeachFact::new(
                &format!("{key}_reserved"),
                &format!("{}: reserved now", names[p]),
                format_bytes(*reserved),
            ));
            facts.push(TeachFact::new(
                &format!("{key}_live"),
                &format!("{}: requested by live blocks now", names[p]),
                format_bytes(*allocated),
            ));
            facts.push(
                TeachFact::new(
                    &format!("{key}_peak_reserved"),
                    &format!("{}: peak reserved", names[p]),
                    format!(
                        "{} ({} bytes)",
                        format_bytes(r.peak_reserved_bytes),
                        r.peak_reserved_bytes
                    ),
                )
                .strong(),
            );
            facts.push(TeachFact::new(
                &format!("{key}_peak_allocated"),
                &format!("{}: peak allocated", names[p]),
                format!(
                    "{} ({} bytes)",
                    format_bytes(r.peak_allocated_bytes),
                    r.peak_allocated_bytes
                ),
            ));
            policies.push(json!({"name": format!("{} ({}): {} reserved, {} requested by live blocks, {} segment(s)", names[p], r.policy, format_bytes(*reserved), format_bytes(*allocated), segments.len()), "segments": segments}));
        }
        Ok(TeachView {
            facts,
            measured: vec![format!(
                "No GPU measurement is shown on this page: these are replays in simulation of {name}, as `vramlab replay` computes them (reports/reference/h100/alloc-traces holds recordings made on an H100)."
            )],
            command: command.clone(),
            text: text.clone(),
            picture: json!({"kind": "memory", "title": "segments and blocks", "scale_bytes": scale, "policies": policies}),
        })
    })?;
    Ok(TeachPage {
        slug: "allocator".into(),
        title: "The caching allocator, block by block".into(),
        intro: vec![
            format!("{name} replayed through PyTorch's caching allocator twice: with its defaults and with expandable_segments:True. Grey boxes are segments reserved from the device (in address order, drawn to one scale), coloured boxes the live blocks inside them. Step through the trace and watch where the defaults leave holes that expandable segments avoid."),
            format!("The trace has {} events; the page holds {} steps: {FRAMES} evenly spaced events plus the events where each setting's reserved and allocated memory peak.", record.events, frames.len()),
        ],
        terminal: command.clone(),
        panels: vec![panel],
        notes: vec![
            "Peaks are the replay's (the same numbers `vramlab replay` prints); the pictures are rebuilt from the replay's own log of segment and block operations.".into(),
            "`vramlab teach --snapshot FILE` draws your own torch.cuda.memory._snapshot() pickle here instead.".into(),
            format!("Profile '{}' sizes the device; the replay needs no GPU.", t.profile.name),
        ],
    })
}

/// Writes the site into `out`: an index and one page per topic. Gives the files written.
pub(crate) fn write_site(out: &Path, snapshot: Option<&Path>, profile: &str) -> Result<Vec<PathBuf>> {
    Ok(reports::write_teach_site(out, &pages(snapshot, profile)?)?)
}

/// Every topic's page, computed.
fn pages(snapshot: Option<&Path>, profile: &str) -> Result<Vec<TeachPage>> {
    let teacher = Teacher::new(profile)?;
    Ok(vec![
        banks_page(&teacher)?,
        coalescing_page(&teacher)?,
        constant_page(&teacher)?,
        occupancy_page(&teacher)?,
        latency_page(&teacher)?,
        transfers_page(&teacher)?,
        allocator_page(&teacher, snapshot)?,
    ])
}

/// `vramlab teach`.
pub(crate) fn teach(out: &Path, snapshot: Option<&Path>, profile: &str) -> Result<()> {
    let started = Instant::now();
    let written = write_site(out, snapshot, profile)?;
    println!(
        "{} pages -> {} in {:.1} s; open {}",
        written.len(),
        out.display(),
        started.elapsed().as_secs_f64(),
        written[0].display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(pages: &'a [TeachPage], slug: &str, panel: &str, key: &str) -> &'a TeachView {
        let page = pages.iter().find(|p| p.slug == slug).expect("page");
        let panel = page.panels.iter().find(|p| p.id == panel).expect("panel");
        panel.views.get(key).unwrap_or_else(|| panic!("{slug}: no view {key}"))
    }

    fn fact<'a>(view: &'a TeachView, key: &str) -> &'a str {
        &view
            .facts
            .iter()
            .find(|f| f.key == key)
            .unwrap_or_else(|| panic!("no fact {key}"))
            .value
    }

    /// The value of `metric` at the point of the committed record at `path` (read from disk,
    /// not from the built-in copy) whose parameters are `params`.
    fn recorded(path: &str, params: &[(&str, i64)], metric: &str) -> f64 {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        record["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| params.iter().all(|(k, v)| p["params"][k].as_i64() == Some(*v)))
            .and_then(|p| p["metrics"][metric].as_f64())
            .unwrap_or_else(|| panic!("{path}: no point {params:?}"))
    }

    #[test]
    fn the_site_is_an_index_and_seven_self_contained_pages() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("site");
        let written = write_site(&out, None, DEFAULT_PROFILE).unwrap();
        assert_eq!(written.len(), 8, "{written:?}");
        let mut on_disk: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert_eq!(
            on_disk,
            [
                "allocator.html",
                "banks.html",
                "coalescing.html",
                "constant.html",
                "index.html",
                "latency.html",
                "occupancy.html",
                "transfers.html"
            ]
        );
        for path in &written {
            let html = std::fs::read_to_string(path).unwrap();
            let name = path.display();
            // Nothing fetched: no external script, style, image, font or frame, no link out.
            for banned in [
                "src=\"http",
                "href=\"http",
                "src='http",
                "<link",
                "@import",
                "url(",
                "<iframe",
                "<img",
            ] {
                assert!(!html.contains(banned), "{name} holds {banned}");
            }
            assert!(!html.contains("<script src"), "{name}: an external script");
            // Links stay inside the site.
            for part in html.split("href=\"").skip(1) {
                let target = &part[..part.find('"').unwrap()];
                assert!(
                    target.ends_with(".html") && !target.contains('/'),
                    "{name}: link to {target}"
                );
                assert!(out.join(target).is_file(), "{name}: {target} missing");
            }
            if !path.ends_with("index.html") {
                assert!(html.contains("id=\"teach-data\""), "{name}: no data");
                assert!(
                    html.contains("In the terminal: <code>vramlab "),
                    "{name}: no terminal equivalent"
                );
                assert!(html.contains("@media print"), "{name}: no print style");
            }
        }
    }

    #[test]
    fn the_pages_figures_are_the_models() {
        let profile = Profile::find(DEFAULT_PROFILE).unwrap();
        let pages = pages(None, DEFAULT_PROFILE).unwrap();
        // Banks: every width and stride, passes and replays as the model counts them.
        let shared = profile.banks.as_ref().unwrap();
        for (width, stride) in [(4, 0), (4, 2), (4, 32), (4, 33), (8, 1), (16, 3)] {
            let v = view(&pages, "banks", "banks", &format!("{width}|{stride}"));
            let access = sim::bank_access(shared, &experiments::BankPoint { width, stride });
            assert_eq!(fact(v, "wavefronts"), access.wavefronts.to_string(), "{width}|{stride}");
            assert_eq!(fact(v, "replays"), access.replays().to_string());
            let args = [format!("width={width}"), format!("stride={stride}")];
            assert_eq!(
                v.text,
                sim::explain("banks", &args, &profile).unwrap(),
                "the explain text"
            );
        }
        // The stride-32 column conflicts 32 ways; one element of padding removes it.
        let column = view(&pages, "banks", "banks", "4|32");
        assert_eq!(fact(column, "conflict"), "32-way");
        assert!(
            fact(column, "padded").starts_with("stride 33: 1 wavefront"),
            "{}",
            fact(column, "padded")
        );
        // Coalescing: sectors, lines and efficiency from the model's prediction.
        let sim = SimBackend::new(profile.clone());
        for (width, stride, offset) in [(4, 1, 0), (4, 2, 1), (8, 3, 0), (16, 32, 31), (1, 5, 3)] {
            let args = [
                format!("width={width}"),
                format!("stride={stride}"),
                format!("offset={offset}"),
            ];
            let point = experiments::point_from_args(Family::Coalescing, &args).unwrap();
            let m = sim.predict(&point.workload).unwrap();
            let v = view(
                &pages,
                "coalescing",
                "coalescing",
                &format!("{width}|{stride}|{offset}"),
            );
            assert_eq!(fact(v, "sectors"), m["sectors_per_warp"].to_string());
            assert_eq!(fact(v, "lines"), m["lines_per_warp"].to_string());
            assert!(fact(v, "efficiency").starts_with(&format!("{:.0}%", 100.0 * m["efficiency"])));
            assert_eq!(fact(v, "gb_per_s"), format!("{:.0} GB/s", m["gb_per_s"]));
        }
        // Occupancy: blocks and the limiter as sim::occupancy finds them, and the step it names
        // really lets one more block in.
        for (threads, registers, shared_bytes) in [(256, 64, 0), (1024, 32, 0), (128, 255, 49152), (512, 40, 102400)] {
            let point = experiments::OccupancyPoint {
                threads,
                registers,
                static_shared: 0,
                dynamic_shared: shared_bytes,
            };
            let occ = sim::occupancy(&profile.sm, &point);
            let v = view(
                &pages,
                "occupancy",
                "occupancy",
                &format!("{threads}|{registers}|{shared_bytes}"),
            );
            assert_eq!(fact(v, "blocks_per_sm"), occ.blocks_per_sm.to_string());
            assert_eq!(fact(v, "limiter"), occ.limiter.to_string());
            let step = fact(v, "next_step");
            if let Some(rest) = step.strip_prefix("another block fits at ") {
                if let Some(r) = rest.split(" registers").next().and_then(|r| r.parse::<u32>().ok()) {
                    let fewer = experiments::OccupancyPoint { registers: r, ..point };
                    assert!(
                        sim::occupancy(&profile.sm, &fewer).blocks_per_sm > occ.blocks_per_sm,
                        "{step}"
                    );
                    let one_more = experiments::OccupancyPoint {
                        registers: r + 1,
                        ..point
                    };
                    assert_eq!(
                        sim::occupancy(&profile.sm, &one_more).blocks_per_sm,
                        occ.blocks_per_sm,
                        "{step}: the largest such count"
                    );
                }
            }
        }
        // Measurements: the committed records' numbers, the GPU named.
        let banks = view(&pages, "banks", "banks", "4|2");
        let h100 = recorded(
            "reports/reference/h100/all-suites/run/banks/hw.json",
            &[("width", 4), ("stride", 2)],
            "cycles",
        );
        assert!(
            banks
                .measured
                .iter()
                .any(|m| m.contains("NVIDIA H100") && m.contains(&format!("cycles {h100:.1}"))),
            "{:?}",
            banks.measured
        );
        let latency = view(&pages, "latency", "latency", &(1u64 << 20).to_string());
        let h100 = recorded(
            "reports/reference/h100/all-suites/run/latency/hw.json",
            &[("bytes", 1 << 20)],
            "cycles",
        );
        assert!(
            latency
                .measured
                .iter()
                .any(|m| m.contains(&format!("cycles {h100:.0}"))),
            "{:?}",
            latency.measured
        );
        // A point no GPU run measured says so.
        let unmeasured = view(&pages, "coalescing", "coalescing", "16|12|8");
        assert!(
            unmeasured.measured[0].starts_with("No committed GPU measurement"),
            "{:?}",
            unmeasured.measured
        );
    }

    #[test]
    fn the_allocator_page_shows_the_peaks_vramlab_replay_prints() {
        let pages = pages(None, DEFAULT_PROFILE).unwrap();
        // What `vramlab replay` runs (src/replay.rs): the front, without the kept events.
        let traces = Trace::load_all(&Path::new(env!("CARGO_MANIFEST_DIR")).join(RESNET18_NAME), None).unwrap();
        let settings: Vec<String> = TEACH_SETTINGS.iter().map(|s| s.to_string()).collect();
        let replay = allocators::Replay::new(traces, None)
            .unwrap()
            .policies(None, &settings)
            .run()
            .unwrap();
        assert_eq!(replay.results.len(), 2);
        let (defaults, expandable) = (&replay.results[0], &replay.results[1]);
        assert!(
            expandable.peak_reserved_bytes < defaults.peak_reserved_bytes,
            "the trace shows expandable segments reserving less"
        );
        let page = pages.iter().find(|p| p.slug == "allocator").unwrap();
        let panel = &page.panels[0];
        for (key, r) in [("defaults", defaults), ("expandable", expandable)] {
            for v in panel.views.values() {
                assert!(
                    fact(v, &format!("{key}_peak_reserved")).ends_with(&format!("({} bytes)", r.peak_reserved_bytes))
                );
                assert!(
                    fact(v, &format!("{key}_peak_allocated")).ends_with(&format!("({} bytes)", r.peak_allocated_bytes))
                );
            }
            // The pictures, rebuilt from the replay's log, reach the replay's peak and never
            // pass it.
            let reserved: Vec<u64> = panel
                .views
                .values()
                .map(|v| {
                    v.picture["policies"][usize::from(key == "expandable")]["segments"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s[1].as_u64().unwrap())
                        .sum()
                })
                .collect();
            assert_eq!(reserved.iter().max(), Some(&r.peak_reserved_bytes), "{key}");
        }
        assert!(
            panel.views.len() > FRAMES && panel.views.len() <= FRAMES + 4,
            "{} steps",
            panel.views.len()
        );
        // Every step's picture holds what the replay held then: the segments drawn add up to the
        // reserved bytes of its timeline near that event (the timeline keeps the largest value of
        // every two events, so the one drawn is among those two events' neighbours).
        let kept = teach_replay(Trace::all_from_bytes(RESNET18_NAME, RESNET18, None).unwrap()).unwrap();
        let mut compared = 0;
        for (p, r) in kept.results.iter().enumerate() {
            let timeline: Vec<(usize, u64)> = r.timeline.iter().map(|t| (t.event, t.reserved)).collect();
            for v in panel.views.values() {
                let event: usize = fact(v, "event").split(' ').next().unwrap().parse::<usize>().unwrap() - 1;
                let drawn: u64 = v.picture["policies"][p]["segments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s[1].as_u64().unwrap())
                    .sum();
                let near: Vec<u64> = timeline
                    .iter()
                    .filter(|(e, _)| e + 2 >= event && *e <= event + 2)
                    .map(|t| t.1)
                    .collect();
                assert!(
                    near.contains(&drawn),
                    "setting {p}, event {event}: drew {drawn}, timeline {near:?}"
                );
                compared += 1;
            }
        }
        assert!(compared > 100, "{compared} steps compared");
    }
}
