//! What `vramlab replay` and `vramlab tune` print on a terminal: the tables and the sentences
//! that go with them, as text, so that every front shows the same.

use experiments::{format_bytes, ReplayRecord};

use crate::{tune_row, TUNE_HEADER};

/// Every device's replay, as a table and the sentences that go with it (devices labelled where
/// the snapshot has several).
pub fn replay_text(record: &ReplayRecord) -> String {
    let devices = if record.devices.is_empty() {
        std::slice::from_ref(record)
    } else {
        &record.devices[..]
    };
    let mut lines = Vec::new();
    for device in devices.iter().filter(|d| !is_blank(d)) {
        device_lines(device, !record.devices.is_empty(), &mut lines);
    }
    lines.extend(blank_devices(devices));
    lines.join("\n")
}

/// Whether a device of a snapshot shows nothing: no events, no results, no state at the end,
/// no note but that (a snapshot may list many such; they are said together, in one line, not
/// one each).
pub(crate) fn is_blank(record: &ReplayRecord) -> bool {
    record.events == 0 && record.results.is_empty() && record.final_state.is_empty() && record.notes.len() <= 1
}

/// The devices that show nothing ([`is_blank`]), in one line of ranges; none where there are
/// none.
pub(crate) fn blank_devices(devices: &[ReplayRecord]) -> Option<String> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for d in devices.iter().filter(|d| is_blank(d)).map(|d| d.device_index) {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == d => *last = d,
            _ => ranges.push((d, d)),
        }
    }
    let count: usize = ranges.iter().map(|(a, b)| b - a + 1).sum();
    let shown: Vec<String> = ranges
        .iter()
        .take(20)
        .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect();
    let more = if ranges.len() > 20 { ", ..." } else { "" };
    match count {
        0 => None,
        1 => Some(format!(
            "device {} has no events in the snapshot: nothing to replay",
            shown[0]
        )),
        n => Some(format!(
            "devices {}{more} ({n}) have no events in the snapshot: nothing to replay",
            shown.join(", ")
        )),
    }
}

/// The state a snapshot's window began in and where the cap came from, as the terminal and
/// replay.html both say them.
pub(crate) fn window_and_cap(record: &ReplayRecord) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(start) = &record.start {
        lines.push(format!(
            "window: began with {} reserved in {} segments, {} allocated in {} live blocks",
            format_bytes(start.reserved_bytes),
            start.segments,
            format_bytes(start.allocated_bytes),
            start.live_blocks
        ));
    }
    if let (Some(cap), Some(source)) = (record.capacity_bytes, &record.capacity_source) {
        lines.push(format!("cap {}: {source}", format_bytes(cap)));
    }
    lines.extend(final_state(record));
    lines
}

/// The state the snapshot ends with, per pool and stream (where it has no trace, and pinned
/// host memory wherever it has it), as a table.
fn final_state(record: &ReplayRecord) -> Vec<String> {
    if record.final_state.is_empty() {
        return Vec::new();
    }
    let width = record
        .final_state
        .iter()
        .map(|p| p.pool.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut lines = vec![
        "state at the end, per pool and stream:".to_string(),
        format!(
            "  {:<width$} {:>8} {:>8} {:>12} {:>12} {:>12} {:>14} {:>7}",
            "pool", "stream", "segments", "reserved", "allocated", "free", "largest free", "frag"
        ),
    ];
    for p in &record.final_state {
        lines.push(format!(
            "  {:<width$} {:>8} {:>8} {:>12} {:>12} {:>12} {:>14} {:>6.1}%",
            p.pool,
            format!("{:#x}", p.stream),
            p.segments,
            format_bytes(p.reserved_bytes),
            format_bytes(p.allocated_bytes),
            format_bytes(p.free_bytes),
            format_bytes(p.largest_free_bytes),
            p.fragmentation * 100.0
        ));
    }
    lines
}

/// What a report says beside its table: the window and cap ([`window_and_cap`]), the record's
/// notes (a start lost before the snapshot, a cap's source) and the import's warnings.
pub(crate) fn context(record: &ReplayRecord) -> Vec<String> {
    let mut lines = window_and_cap(record);
    lines.extend(record.notes.iter().map(|note| format!("note: {note}")));
    lines.extend(record.warnings.examples.iter().map(|w| format!("warning: {w}")));
    lines
}

fn device_lines(record: &ReplayRecord, label: bool, lines: &mut Vec<String>) {
    if label {
        lines.push(format!("\ndevice {}: {} events", record.device_index, record.events));
    }
    lines.extend(window_and_cap(record));
    let width = record
        .results
        .iter()
        .map(|r| r.display_name().len())
        .max()
        .unwrap_or(0)
        .max(22);
    if !record.results.is_empty() {
        lines.push(format!(
            "{:<width$} {:>14} {:>14} {:>8} {:>8} {:>14} {:>12}",
            "policy", "peak reserved", "peak alloc'd", "frag", "failed", "min capacity", "a+f p50 ns"
        ));
    }
    for r in &record.results {
        lines.push(format!(
            "{:<width$} {:>14} {:>14} {:>7.1}% {:>8} {:>14} {:>12.0}",
            r.display_name(),
            format_bytes(r.peak_reserved_bytes),
            format_bytes(r.peak_allocated_bytes),
            r.fragmentation_at_peak * 100.0,
            r.failed_allocs,
            r.min_capacity_bytes.map_or("-".to_string(), format_bytes),
            r.alloc_free_ns_p50
        ));
    }
    if !record.results.is_empty() {
        // The two columns PyTorch has no figure for, said once.
        lines.push(
            "(frag: the share of the cached free memory outside the largest free block, at the peak allocated; it reads high where little is free at all, as with expandable segments, so compare peak reserved first. a+f p50 ns: this replay's median time per allocation and free, vramlab's bookkeeping, not PyTorch's)"
                .to_string(),
        );
    }
    for r in &record.results {
        if let Some(stats) = &r.pytorch_stats {
            lines.push(format!(
                "{}: retries {}, out of memory {}, device allocations {}, frees {}",
                r.display_name(),
                stats.num_alloc_retries,
                stats.num_ooms,
                stats.num_device_alloc,
                stats.num_device_free
            ));
        }
        if !r.recorded_check.is_what_if() {
            lines.push(format!(
                "{}: against the recording: {}",
                r.display_name(),
                r.recorded_check.summary
            ));
        }
    }
    for note in &record.notes {
        lines.push(format!("note: {note}"));
    }
}

/// A tune's ranked table, then its verdicts and post-mortem (as tune.json, tune.md and
/// tune.html hold them).
pub fn tune_text(record: &ReplayRecord) -> String {
    let rows: Vec<Vec<String>> = record
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| tune_row(i + 1, r, record.capacity_bytes))
        .collect();
    let widths: Vec<usize> = (0..TUNE_HEADER.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([TUNE_HEADER[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut lines = vec![line(TUNE_HEADER.to_vec())];
    lines.extend(rows.iter().map(|row| line(row.iter().map(String::as_str).collect())));
    // What the figures are of (a window that began mid-run, say), before what they conclude.
    let context = context(record);
    if !context.is_empty() {
        lines.push(String::new());
        lines.extend(context);
    }
    lines.push(String::new());
    lines.extend(record.tune_lines());
    lines.join("\n")
}
