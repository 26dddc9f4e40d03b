//! Renders replay records (`replay-sim.json`, `replay-hw.json`) into replay.md, replay.html and plots.

use std::path::Path;

use experiments::{format_bytes, write_atomically, PolicyResult, ReplayRecord};

use crate::chart::render_both;
use crate::document::{to_html, to_markdown, Block};
use crate::error::{ReportError, Result};
use crate::plot_peaks::PeaksChart;
use crate::plot_timeline::TimelineChart;
use crate::render::Rendered;

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
    for (backend, record) in &records {
        blocks.push(Block::Heading(2, format!("{} ({backend})", record.trace)));
        let mut about = format!(
            "{} events, {} allocations, {} import warnings",
            record.events, record.allocations, record.warnings.count
        );
        if let Some(capacity) = record.capacity_bytes {
            about.push_str(&format!(", capacity {}", format_bytes(capacity)));
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
        for example in &record.warnings.examples {
            blocks.push(Block::Paragraph(format!("warning: {example}")));
        }
        let title = |what: &str| format!("{what}: {} ({backend})", short(&record.trace));
        let stem = format!("replay_timeline_{backend}");
        plots.extend(render_both(
            &plot_dir,
            &stem,
            &TimelineChart::new(title("allocated and reserved"), &record.results),
        )?);
        blocks.push(image(&stem));
        let stem = format!("replay_peaks_{backend}");
        plots.extend(render_both(
            &plot_dir,
            &stem,
            &PeaksChart::new(title("peak reserved"), &record.results),
        )?);
        blocks.push(image(&stem));
        blocks.push(table(&record.results));
        for result in record
            .results
            .iter()
            .filter(|r| r.first_failure.is_some() || r.device_check.is_some())
        {
            if let Some(failure) = &result.first_failure {
                blocks.push(Block::Paragraph(format!(
                    "{}: first failure at {failure}",
                    result.policy
                )));
            }
            if let Some(check) = &result.device_check {
                blocks.push(Block::Paragraph(format!("{}: device check: {check}", result.policy)));
            }
        }
    }
    let markdown = dir.join("replay.md");
    let html = dir.join("replay.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab replay", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
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

fn table(results: &[PolicyResult]) -> Block {
    let header = [
        "policy",
        "peak reserved",
        "peak allocated",
        "fragmentation at peak",
        "rounding waste",
        "device allocs",
        "failed",
        "min capacity",
        "alloc+free p50 / p99 (ns)",
        "segments matched",
    ];
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.policy.clone(),
                format_bytes(r.peak_reserved_bytes),
                format_bytes(r.peak_allocated_bytes),
                format!("{:.1}%", r.fragmentation_at_peak * 100.0),
                format_bytes(r.rounding_waste_bytes),
                r.device_allocations.to_string(),
                r.failed_allocs.to_string(),
                r.min_capacity_bytes.map_or("-".into(), format_bytes),
                format!("{:.0} / {:.0}", r.alloc_free_ns_p50, r.alloc_free_ns_p99),
                r.segments_matched.map_or("-".into(), |m| m.to_string()),
            ]
        })
        .collect();
    Block::Table {
        header: header.iter().map(|s| s.to_string()).collect(),
        rows,
    }
}
