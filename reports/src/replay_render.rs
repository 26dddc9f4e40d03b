//! Renders replay records (`replay-sim.json`, `replay-hw.json`) into replay.md, replay.html and plots.

use std::path::Path;

use experiments::{format_bytes, write_atomically, BackendKind, PolicyResult, ReplayRecord};

use crate::chart::render_both;
use crate::document::{to_html, to_markdown, Block, Table};
use crate::error::{ReportError, Result};
use crate::plot_peaks::PeaksChart;
use crate::plot_timeline::TimelineChart;
use crate::render::Rendered;
use crate::tune_render::self_check;

/// Reads every `replay-*.json` in `dir` and writes replay.md, replay.html and plots/.
pub fn render_replay(dir: &Path) -> Result<Rendered> {
    let mut records = Vec::new();
    for backend in ["sim", "hw"] {
        let path = dir.join(format!("replay-{backend}.json"));
        if path.exists() {
            records.push((backend, ReplayRecord::load(&path)?));
        }
    }
    if records.is_empty() {
        return Err(ReportError::Empty(dir.to_path_buf()));
    }
    let plot_dir = dir.join("plots");
    let mut plots = Vec::new();
    let mut blocks = vec![Block::Heading(1, "vramlab replay".into())];
    let several = records.len() > 1;
    for (backend, record) in &records {
        let devices = if record.devices.is_empty() {
            std::slice::from_ref(record)
        } else {
            &record.devices[..]
        };
        for device in devices.iter().filter(|d| !crate::terminal::is_blank(d)) {
            let label = Label {
                backend,
                device: (!record.devices.is_empty()).then_some(device.device_index),
                several_backends: several,
            };
            device_blocks(device, &label, &plot_dir, &mut plots, &mut blocks)?;
        }
        blocks.extend(crate::terminal::blank_devices(devices).map(Block::Paragraph));
    }
    let markdown = dir.join("replay.md");
    let html = dir.join("replay.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab replay", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
}

/// Whose replay a section shows: the backend, and the device where the snapshot has several.
struct Label<'a> {
    backend: &'a str,
    device: Option<usize>,
    several_backends: bool,
}

impl Label<'_> {
    /// A heading's words with what tells this section from the others on the page (so that
    /// their anchors differ too).
    fn titled(&self, what: &str) -> String {
        match (self.device, self.several_backends) {
            (Some(d), true) => format!("{what} (device {d}, {})", self.backend),
            (Some(d), false) => format!("{what} (device {d})"),
            (None, true) => format!("{what} ({})", self.backend),
            (None, false) => what.to_string(),
        }
    }

    /// The plots' file-name stem for `what`.
    fn stem(&self, what: &str) -> String {
        match self.device {
            Some(d) => format!("replay_{what}_{}_device{d}", self.backend),
            None => format!("replay_{what}_{}", self.backend),
        }
    }
}

/// One device's replay: what it is, the policies' table, the self-check and the plots.
fn device_blocks(
    record: &ReplayRecord,
    label: &Label<'_>,
    plot_dir: &Path,
    plots: &mut Vec<std::path::PathBuf>,
    blocks: &mut Vec<Block>,
) -> Result<()> {
    let backend = label.backend;
    let titled = |what: &str| label.titled(what);
    let heading = match label.device {
        Some(d) => format!("{} ({backend}), device {d}", record.trace),
        None => format!("{} ({backend})", record.trace),
    };
    blocks.push(Block::Heading(2, heading));
    let mut about = format!(
        "{} events, {} allocations, {} import warnings",
        record.events, record.allocations, record.warnings.count
    );
    if let Some(capacity) = record.capacity_bytes {
        about.push_str(&format!(", capacity {}", format_bytes(capacity)));
    } else {
        about.push_str(", no cap");
    }
    if !record.device.name.is_empty() {
        about.push_str(&format!(
            ", device {} (driver {})",
            record.device.name, record.device.driver_version
        ));
    }
    if record.recorded_segments > 0 {
        about.push_str(&format!(
            "; the recording allocator made {} segment allocations",
            record.recorded_segments
        ));
    }
    blocks.push(Block::Paragraph(about + "."));
    // What the terminal says beside its table (`replay_text`).
    let context = crate::terminal::context(record);
    if !context.is_empty() {
        blocks.push(Block::List(context));
    }
    blocks.push(Block::Heading(3, titled("Policies")));
    blocks.push(Block::Table(table(record)));
    blocks.push(Block::Paragraph(timing_note(record)));
    let failures: Vec<String> = record
        .results
        .iter()
        .filter_map(|r| failure_note(r, record.capacity_bytes))
        .collect();
    if !failures.is_empty() {
        blocks.push(Block::List(failures));
    }
    blocks.push(Block::Fold {
        summary: "What the columns mean".into(),
        open: false,
        blocks: vec![Block::Terms(
            columns(record).into_iter().map(|(h, m)| (h, m.to_string())).collect(),
        )],
    });
    let mut check = self_check(record);
    if let Some(Block::Heading(level, text)) = check.first_mut() {
        *level = 3;
        *text = titled(text);
    }
    blocks.extend(check);

    blocks.push(Block::Heading(3, titled("Plots")));
    let title = |what: &str| format!("{what}: {} ({backend})", short(&record.trace));
    let stem = label.stem("timeline");
    plots.extend(render_both(
        plot_dir,
        &stem,
        &TimelineChart::new(title("reserved and allocated"), &record.results),
    )?);
    blocks.push(image(&stem));
    let stem = label.stem("peaks");
    plots.extend(render_both(
        plot_dir,
        &stem,
        &PeaksChart::new(title("peak reserved"), &record.results),
    )?);
    blocks.push(image(&stem));
    let checks: Vec<String> = record
        .results
        .iter()
        .filter_map(|r| {
            r.device_check
                .as_ref()
                .map(|check| format!("{}: device check: {check}", r.policy))
        })
        .collect();
    if !checks.is_empty() {
        blocks.push(Block::Heading(3, titled("Device checks")));
        blocks.extend(checks.into_iter().map(Block::Paragraph));
    }
    Ok(())
}

fn short(trace: &str) -> &str {
    trace.rsplit('/').next().unwrap_or(trace)
}

fn image(stem: &str) -> Block {
    Block::Image {
        alt: stem.to_string(),
        png: format!("plots/{stem}.png"),
        svg: format!("plots/{stem}.svg"),
    }
}

/// Whether the record's timings are the simulator's (every result replayed in sim).
fn simulated(record: &ReplayRecord) -> bool {
    record.results.iter().all(|r| r.backend == BackendKind::Sim)
}

/// The timing column's name: whose time it is.
fn timing_header(record: &ReplayRecord) -> String {
    if simulated(record) {
        "simulator's alloc+free time p50 / p99 (ns)".into()
    } else {
        "alloc+free time p50 / p99 (ns)".into()
    }
}

fn timing_note(record: &ReplayRecord) -> String {
    if simulated(record) {
        let mut note = String::from(
            "Timings are the simulator's own: its bookkeeping time on this host for one allocation and its free, not a device's",
        );
        if record.results.iter().any(|r| r.policy.starts_with("cuda-malloc")) {
            note.push_str(" (`cuda-malloc`'s times no cudaMalloc call)");
        }
        note + ". `--backend hw` times the calls against a GPU's driver."
    } else {
        "Timings are host time for one allocation and its free, the GPU driver's calls included.".into()
    }
}

/// The columns of [`table`] and what each means.
fn columns(record: &ReplayRecord) -> Vec<(String, &'static str)> {
    vec![
        ("policy".into(), "the allocator policy, with its parameters; PYTORCH_ALLOC_CONF=... is PyTorch's caching allocator under that setting"),
        ("peak reserved".into(), "the most device memory the policy held at once"),
        ("peak allocated".into(), "the most the live blocks took at once, after the policy's rounding"),
        ("fragmentation at peak".into(), "at the peak of allocated bytes: 1 - largest free block / all free bytes held"),
        ("rounding waste".into(), "at the peak of allocated bytes: block sizes minus the sizes asked for"),
        ("device allocs".into(), "device allocations made (cudaMalloc calls, or pages mapped)"),
        ("retries".into(), "PyTorch's allocator: device allocations that failed and were retried after the cache was released (num_alloc_retries); - for other policies"),
        ("OOMs".into(), "PyTorch's allocator: requests that failed even then (num_ooms); - for other policies"),
        ("failed".into(), "requests the policy refused (their frees are skipped), and why in a few words; the list below the table says more"),
        ("min capacity".into(), "the smallest device capacity, on a 2 MiB grid, at which the trace replays with no failure (sim only)"),
        (timing_header(record), "the median and 99th percentile of the time one allocation and its free took"),
        ("segments matched".into(), "how many of the recording's segment sizes this replay also allocated"),
    ]
}

/// Why a policy's requests failed, in a few words, beside its count.
fn failure_reason(result: &PolicyResult, capacity: Option<u64>) -> &'static str {
    match (result.policy.split(':').next().unwrap_or_default(), capacity) {
        ("bump", _) => "its fixed arena refuses",
        (_, Some(_)) => "under the cap",
        (_, None) => "even with no cap",
    }
}

/// A failing policy's explanation and first failure, for the list below the table.
fn failure_note(result: &PolicyResult, capacity: Option<u64>) -> Option<String> {
    if result.failed_allocs == 0 {
        return None;
    }
    let mut text = format!(
        "`{}`: {} requests failed, {}",
        result.policy,
        result.failed_allocs,
        failure_reason(result, capacity)
    );
    if result.policy.split(':').next() == Some("bump") {
        text.push_str(
            ": bump hands out one arena of a fixed size (`bump:arena=...`) front to back and takes memory back only when every block is free, so a request past the arena's end fails whatever the device holds",
        );
    }
    if let Some(failure) = &result.first_failure {
        text.push_str(&format!("; the first at {failure}"));
    }
    Some(text + ".")
}

fn table(record: &ReplayRecord) -> Table {
    let header: Vec<String> = columns(record).into_iter().map(|(h, _)| h).collect();
    let titles = columns(record).into_iter().map(|(_, m)| m.to_string()).collect();
    let rows = record
        .results
        .iter()
        .map(|r| {
            let stats = r.pytorch_stats.as_ref();
            let failed = match r.failed_allocs {
                0 => "0".to_string(),
                n => format!("{n}: {}", failure_reason(r, record.capacity_bytes)),
            };
            vec![
                r.policy.clone(),
                format_bytes(r.peak_reserved_bytes),
                format_bytes(r.peak_allocated_bytes),
                format!("{:.1}%", r.fragmentation_at_peak * 100.0),
                format_bytes(r.rounding_waste_bytes),
                r.device_allocations.to_string(),
                stats.map_or("-".into(), |s| s.num_alloc_retries.to_string()),
                stats.map_or("-".into(), |s| s.num_ooms.to_string()),
                failed,
                r.min_capacity_bytes.map_or("-".into(), format_bytes),
                format!("{:.0} / {:.0}", r.alloc_free_ns_p50, r.alloc_free_ns_p99),
                r.segments_matched.map_or("-".into(), |m| m.to_string()),
            ]
        })
        .collect();
    let mut wrap = vec![0];
    if record.results.iter().any(|r| r.failed_allocs > 0) {
        wrap.push(8);
    }
    Table::new(header, rows).titles(titles).wrap(&wrap)
}
