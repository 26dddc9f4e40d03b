//! `vramlab teach --out DIR`: the teaching site. Each family's page is built in its own module of
//! `sim` (from its model and the committed GPU records, which are built into the binary here);
//! the allocator's page is built here, from the replay (`allocators`). Every figure is computed
//! over every value the controls reach; `reports` writes the pages, whose script only looks the
//! figures up and draws them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use experiments::pytorch::TraceAction;
use experiments::{
    format_bytes, Profile, ReplayRecord, TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Trace,
};
use serde_json::json;
use sim::Measured;

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
                source: path.to_string(),
                workload: typed.workload,
                metrics: point.metrics.clone(),
            });
        }
    }
    Ok(points)
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
            TraceAction::Alloc => {
                self.blocks.insert(op.addr, op.size);
            }
            TraceAction::FreeCompleted => {
                self.blocks.remove(&op.addr);
            }
            TraceAction::SegmentAlloc | TraceAction::SegmentMap => {
                self.segments.insert(op.addr, op.size);
            }
            TraceAction::SegmentFree | TraceAction::SegmentUnmap => self.release(op.addr, op.size),
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

fn allocator_page(profile: &str, snapshot: Option<&Path>) -> Result<TeachPage> {
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
    let panel = TeachPanel::build("allocator", "The same trace under two settings", controls, |values| {
        let index: usize = values[0]
            .parse()
            .map_err(|_| experiments::Error::Invalid(format!("step {}", values[0])))?;
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
                .strong()
                // Bad where the setting holds a fifth more than its live blocks ever needed.
                .bad_if(r.peak_reserved_bytes as f64 > 1.2 * r.peak_allocated_bytes as f64),
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
        title: "The caching allocator: block by block".into(),
        intro: vec![
            format!("{name} replayed through PyTorch's caching allocator twice: with its defaults and with expandable_segments:True. Grey boxes are segments reserved from the device (in address order, drawn to one scale), coloured boxes the live blocks inside them. Step through the trace and watch where the defaults leave holes that expandable segments avoid."),
            format!("The trace has {} events; the page holds {} steps: {FRAMES} evenly spaced events plus the events where each setting's reserved and allocated memory peak.", record.events, frames.len()),
        ],
        terminal: command.clone(),
        panels: vec![panel],
        notes: vec![
            "Peaks are the replay's (the same numbers `vramlab replay` prints); the pictures are rebuilt from the replay's own log of segment and block operations.".into(),
            "`vramlab teach --snapshot FILE` draws your own torch.cuda.memory._snapshot() pickle here instead.".into(),
            format!("Profile '{profile}' sizes the device; the replay needs no GPU."),
        ],
    })
}

/// Writes the site into `out`: an index and one page per topic. Gives the files written.
pub(crate) fn write_site(out: &Path, snapshot: Option<&Path>, profile: &str) -> Result<Vec<PathBuf>> {
    Ok(reports::write_teach_site(out, &pages(snapshot, profile)?)?)
}

/// Every topic's page, computed.
fn pages(snapshot: Option<&Path>, profile: &str) -> Result<Vec<TeachPage>> {
    let found = Profile::find(profile)?;
    let mut pages = sim::teach_pages(&found, profile, &measured_points()?)?;
    pages.push(allocator_page(profile, snapshot)?);
    Ok(pages)
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
    use experiments::{Family, DEFAULT_PROFILE};
    use sim::SimBackend;

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

    /// Issue 38 item 15: a headline is red only where its value is bad, and a page's "in the
    /// terminal" line is the command of what its controls show first.
    #[test]
    fn headlines_are_bad_only_when_bad_and_the_terminal_line_is_the_first_view() {
        let pages = pages(None, DEFAULT_PROFILE).unwrap();
        let bad = |slug: &str, panel: &str, key: &str| -> bool {
            let v = view(&pages, slug, panel, key);
            let headline = v.facts.iter().find(|f| f.strong).expect("a headline");
            headline.bad
        };
        for (slug, panel, good, poor) in [
            ("banks", "banks", "4|1", "4|2"),
            ("banks", "banks", "4|33", "4|32"),
            ("coalescing", "coalescing", "4|1|0", "4|2|0"),
            ("constant", "constant", "1|warm", "5|warm"),
        ] {
            assert!(!bad(slug, panel, good), "{slug} {good} drawn as bad");
            assert!(bad(slug, panel, poor), "{slug} {poor} not drawn as bad");
        }
        let allocator = &pages.iter().find(|p| p.slug == "allocator").unwrap().panels[0];
        let first = allocator.initial_view().unwrap();
        let bad_of = |key: &str| first.facts.iter().find(|f| f.key == key).unwrap().bad;
        // ResNet-18's defaults hold 2.71 GiB for 1.52 GiB of blocks; expandable 1.56 for 1.51.
        assert!(bad_of("defaults_peak_reserved") && !bad_of("expandable_peak_reserved"));
        for page in &pages {
            let first = page.panels[0].initial_command();
            if page.terminal.starts_with("vramlab explain") || page.panels.len() == 1 {
                assert_eq!(
                    page.terminal, first,
                    "{}: the terminal line is not the first view's",
                    page.slug
                );
            }
        }
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
