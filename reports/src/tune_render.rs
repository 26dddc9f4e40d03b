//! Renders a tune record (`tune.json`, ranked) into tune.md, tune.html and plots: peak reserved
//! per setting, and reserved over the trace for the best few.

use std::path::Path;

use experiments::{format_bytes, write_atomically, PolicyResult, ReplayRecord};

use crate::chart::render_both;
use crate::document::{to_html, to_markdown, Block};
use crate::error::Result;
use crate::plot_peaks::PeaksChart;
use crate::plot_timeline::TimelineChart;
use crate::render::Rendered;

/// How many of the best settings the timeline plot shows.
const BEST_SHOWN: usize = 4;

/// The setting a result was replayed under, ready to paste.
pub fn setting_of(result: &PolicyResult) -> &str {
    result.setting()
}

/// One row of the ranked table: rank, verdict, memory, work, the caps it fits under, and the
/// setting (`(defaults)` for PyTorch's defaults).
pub fn tune_row(rank: usize, r: &PolicyResult, capacity: Option<u64>) -> Vec<String> {
    let stats = r.pytorch_stats.unwrap_or_default();
    let fits = match (capacity, r.failed_allocs) {
        (_, 0) => "yes",
        (Some(_), _) => "NO",
        (None, _) => "fails",
    };
    let always = match (r.always_fits_bytes, r.always_fits_exact) {
        (Some(bytes), Some(false)) => format!("<= {}", ReplayRecord::format_cap(bytes)),
        (Some(bytes), _) => ReplayRecord::format_cap(bytes),
        (None, _) => "-".into(),
    };
    vec![
        rank.to_string(),
        fits.to_string(),
        format_bytes(r.peak_reserved_bytes),
        format_bytes(r.peak_reserved_bytes.saturating_sub(r.peak_allocated_bytes)),
        format!("{} / {}", stats.num_device_alloc, stats.num_device_free),
        stats.num_alloc_retries.to_string(),
        stats.num_ooms.to_string(),
        r.min_capacity_bytes.map_or("-".into(), ReplayRecord::format_cap),
        always,
        r.setting_label().to_string(),
    ]
}

/// The ranked table's header.
pub const TUNE_HEADER: [&str; 10] = [
    "rank",
    "fits",
    "peak reserved",
    "reserved - allocated",
    "device allocs / frees",
    "retries",
    "OOMs",
    "smallest cap that fits",
    "fits at every cap from",
    "PYTORCH_ALLOC_CONF",
];

/// Reads `dir/tune.json` and writes tune.md, tune.html and plots/.
pub fn render_tune(dir: &Path) -> Result<Rendered> {
    let record = ReplayRecord::load(&dir.join("tune.json"))?;
    let plot_dir = dir.join("plots");
    let mut plots = Vec::new();
    let mut blocks = vec![Block::Heading(1, "vramlab tune".into())];
    let mut about = format!(
        "{}: {} events, {} allocations",
        record.trace, record.events, record.allocations
    );
    match record.capacity_bytes {
        Some(capacity) => about.push_str(&format!(
            ", under a cap of {} ({}; torch.cuda.set_per_process_memory_fraction)",
            format_bytes(capacity),
            ReplayRecord::format_cap(capacity)
        )),
        None => about.push_str(", no cap"),
    }
    blocks.push(Block::Paragraph(
        about
            + ". Ranked: settings that fit first, then by the cap from which each fits at every larger cap \
               (2 MiB steps, each replayed; fitting need not be monotone in the cap), then by peak reserved \
               memory; the plots name each by its rank.",
    ));
    // Setting strings are too long for an axis: the bars carry their rank, "x" marking a misfit.
    let by_rank: Vec<PolicyResult> = record
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| PolicyResult {
            policy: format!("{}{}", i + 1, if r.failed_allocs > 0 { "x" } else { "" }),
            ..r.clone()
        })
        .collect();
    plots.extend(render_both(
        &plot_dir,
        "tune_peaks",
        &PeaksChart::new("peak reserved per setting (by rank; x: does not fit)".into(), &by_rank),
    )?);
    blocks.push(image("tune_peaks"));
    let best = &by_rank[..by_rank.len().min(BEST_SHOWN)];
    plots.extend(render_both(
        &plot_dir,
        "tune_best_timeline",
        &TimelineChart::new(format!("allocated and reserved, best {}", best.len()), best),
    )?);
    blocks.push(image("tune_best_timeline"));
    blocks.push(Block::Table {
        header: TUNE_HEADER.iter().map(|s| s.to_string()).collect(),
        rows: record
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| tune_row(i + 1, r, record.capacity_bytes))
            .collect(),
    });
    // The verdicts and the post-mortem, as the terminal prints them (`ReplayRecord::tune_lines`).
    if !record.verdicts.is_empty() {
        blocks.push(Block::Heading(2, "Each setting".into()));
        blocks.extend(record.verdicts.iter().map(|v| Block::Paragraph(v.text.clone())));
    }
    if let Some(postmortem) = &record.postmortem {
        blocks.push(Block::Heading(2, "Post-mortem".into()));
        blocks.extend(postmortem.text.iter().cloned().map(Block::Paragraph));
    }
    let failures = record.results.iter().filter(|r| r.first_failure.is_some());
    if failures.clone().next().is_some() {
        blocks.push(Block::Heading(2, "First failures".into()));
    }
    for r in failures {
        blocks.push(Block::Paragraph(format!(
            "{}: first failure at {}",
            r.setting_label(),
            r.first_failure.as_deref().unwrap_or_default()
        )));
    }
    let markdown = dir.join("tune.md");
    let html = dir.join("tune.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab tune", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
}

fn image(stem: &str) -> Block {
    Block::Image {
        alt: stem.to_string(),
        png: format!("plots/{stem}.png"),
        svg: format!("plots/{stem}.svg"),
    }
}
