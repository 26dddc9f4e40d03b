//! Renders a tune record (`tune.json`, ranked) into tune.md, tune.html and plots: the cap each
//! setting needs, and reserved over the trace for the best few.

use std::path::Path;

use experiments::{format_bytes, write_atomically, PolicyResult, ReplayRecord, Verdict};

use crate::chart::render_both;
use crate::document::{to_html, to_markdown, Block, Table, FOLD_ROWS};
use crate::error::Result;
use crate::plot_caps::CapsChart;
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
        r.quoted_label(),
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

/// What each column of the ranked table means, in [`TUNE_HEADER`]'s order.
const TUNE_COLUMNS: [&str; 10] = [
    "tune's order: settings that fit first, then by the cap from which each fits at every larger cap, then by peak reserved memory",
    "yes: no request failed under the cap; NO: some request failed under it; fails: some request fails under every cap, even with all of the device's memory",
    "the most device memory the allocator held at once under the cap (memory_stats' reserved_bytes.all.peak of the capped replay; vramlab replay without --capacity gives the peak with no cap)",
    "peak reserved minus peak allocated: memory held beyond the most the live blocks ever took (cached, split, rounded)",
    "device allocations (cudaMalloc calls, or pages mapped for expandable segments) and frees",
    "times a device allocation failed, the cache was released and the allocation retried (num_alloc_retries)",
    "requests that failed even after that (num_ooms): the job's out-of-memory errors",
    "the smallest cap, on a 2 MiB grid, under which the trace replays with no failure",
    "the cap from which every larger cap fits too, each replayed (fitting need not be monotone in the cap); <= marks a bound where the search stopped early",
    "the setting, quoted for a shell: PYTORCH_ALLOC_CONF=<this> before the job's command; (defaults) is PyTorch's defaults",
];

/// The one-line answer as a sentence of the page: without its `answer: `, capitalised.
fn sentence(answer: &str) -> String {
    let text = answer.trim_start_matches("answer: ");
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect::<String>() + "."
    })
}

/// The answer, first: the setting to paste and why; that the current settings already fit; or,
/// in the colour of a failure, that nothing does and what would.
fn answer(record: &ReplayRecord) -> Vec<Block> {
    let Some(best) = record.results.first() else {
        return vec![Block::Paragraph("No setting was replayed.".into())];
    };
    let cap = record.capacity_bytes.map(ReplayRecord::format_cap);
    let verdict = record.verdicts.first().map(|v| v.text.clone()).unwrap_or_default();
    let line = best.paste_line().unwrap_or_else(|| best.policy.clone());
    let mut blocks = Vec::new();
    if best.failed_allocs > 0 {
        blocks.push(Block::Heading(
            2,
            match &cap {
                Some(cap) => format!("Nothing fits under the cap of {cap}"),
                None => format!("Nothing fits, even with {}", record.whole_device()),
            },
        ));
        if let Some(answer) = &record.answer {
            blocks.push(Block::Paragraph(sentence(answer)));
        }
        if best.always_fits_bytes.is_some() || best.min_capacity_bytes.is_some() {
            blocks.push(Block::Paragraph(format!(
                "None of the {} settings makes the job fit: setting one alone will not do. The one that needs the smallest cap:",
                record.results.len()
            )));
            blocks.push(Block::Code(line));
            blocks.push(Block::Paragraph(verdict));
        }
        return vec![Block::Failure(blocks)];
    }
    let own = own_setting(record);
    let current_fits = record.capacity_bytes.is_some()
        && record.postmortem.is_none()
        && record.answer.as_deref().is_some_and(|a| a.contains("already fit"));
    if current_fits {
        blocks.push(Block::Heading(2, "Your current settings already fit".into()));
        if let Some(answer) = &record.answer {
            blocks.push(Block::Paragraph(sentence(answer)));
        }
        if own.is_some_and(|own| own.setting() != best.setting()) || own.is_none() && !best.setting().is_empty() {
            blocks.push(Block::Paragraph(format!(
                "Ranked first of {}, should the job grow (it needs less memory):",
                record.results.len()
            )));
            blocks.push(Block::Code(line));
            blocks.push(Block::Paragraph(verdict));
        }
        return vec![Block::Answer(blocks)];
    }
    blocks.push(Block::Heading(2, "Recommended setting".into()));
    blocks.push(Block::Paragraph(match &cap {
        Some(cap) => format!(
            "Ranked first of {} settings under the cap of {cap}:",
            record.results.len()
        ),
        None => format!("Ranked first of {} settings:", record.results.len()),
    }));
    blocks.push(Block::Code(line));
    let mut why = format!(
        "{verdict} Peak reserved {}, {} more than the live blocks' peak.",
        format_bytes(best.peak_reserved_bytes),
        format_bytes(best.peak_reserved_bytes.saturating_sub(best.peak_allocated_bytes))
    );
    if best.setting().is_empty() {
        why.push_str(" These are PyTorch's defaults: leaving PYTORCH_ALLOC_CONF unset does the same.");
    }
    blocks.push(Block::Paragraph(why));
    blocks.push(Block::Paragraph(
        "Set it in the job's environment before the job starts: the line is quoted for a shell, to go before the job's command or after `export `.".into(),
    ));
    if let Some(own) = own {
        let rank = record.results.iter().position(|r| std::ptr::eq(r, own)).unwrap_or(0) + 1;
        if rank != 1 {
            blocks.push(Block::Paragraph(format!(
                "The trace's own setting, `{}`, ranks {rank} of {}{}.",
                own.setting_label(),
                record.results.len(),
                if own.failed_allocs > 0 {
                    ": it does not fit (see the [post-mortem](#post-mortem))"
                } else {
                    ""
                }
            )));
        }
    }
    vec![Block::Answer(blocks)]
}

/// The result replayed under the recording's own setting: the one checked against it.
fn own_setting(record: &ReplayRecord) -> Option<&PolicyResult> {
    record.results.iter().find(|r| !r.recorded_check.is_what_if())
}

/// The self-check: the replay under the recording's own setting against what the recording
/// allocator did.
pub(crate) fn self_check(record: &ReplayRecord) -> Vec<Block> {
    let mut blocks = vec![Block::Heading(2, "Self-check against the recording".into())];
    let checked: Vec<&PolicyResult> = record
        .results
        .iter()
        .filter(|r| !r.recorded_check.is_what_if())
        .collect();
    if checked.is_empty() {
        blocks.push(Block::Paragraph(
            "Nothing to check: every setting here is a what-if, and the recording ran under none of them.".into(),
        ));
        return blocks;
    }
    for r in &checked {
        let check = &r.recorded_check;
        let verdict = match check.verdict {
            Verdict::Match => "**match**",
            Verdict::Differs => "**differs**",
            Verdict::Unchecked => "**not checked**",
        };
        blocks.push(Block::Paragraph(format!(
            "`{}`, the recording's own setting: {verdict}: {}.",
            r.setting_label(),
            check.summary
        )));
        // The reason in full where the replay parts from the recording or was not checked.
        if check.verdict != Verdict::Match && check.why != check.summary && !check.why.is_empty() {
            blocks.push(Block::Paragraph(format!("Why: {}.", check.why)));
        }
    }
    match record.results.len() - checked.len() {
        0 => {}
        1 => blocks.push(Block::Paragraph(
            "The other setting is a what-if: the recording did not run under it, so there is nothing to compare it with.".into(),
        )),
        n => blocks.push(Block::Paragraph(format!(
            "The other {n} are what-ifs: the recording ran under none of them, so there is nothing to compare them with."
        ))),
    }
    if record.capacity_bytes.is_some() && checked.iter().any(|r| r.recorded_check.verdict == Verdict::Differs) {
        blocks.push(Block::Paragraph(
            "The check replays under the cap given here; `vramlab replay TRACE` without `--capacity` checks the recording's own setting with no cap.".into(),
        ));
    }
    blocks
}

/// Reads `dir/tune.json` and writes tune.md, tune.html and plots/.
pub fn render_tune(dir: &Path) -> Result<Rendered> {
    let record = ReplayRecord::load(&dir.join("tune.json"))?;
    let plot_dir = dir.join("plots");
    let mut plots = Vec::new();
    let mut blocks = vec![Block::Heading(1, "vramlab tune".into())];
    let mut about = format!(
        "`{}`: {} events, {} allocations",
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
    blocks.push(Block::Paragraph(about + "."));
    // What the figures are of (a window that began mid-run, say), before the answer.
    let context = crate::terminal::context(&record);
    if !context.is_empty() {
        blocks.push(Block::List(context));
    }
    blocks.extend(answer(&record));

    blocks.push(Block::Heading(2, "Verdicts".into()));
    blocks.push(Block::Paragraph(
        "Ranked: settings that fit first, then by the cap from which each fits at every larger cap \
         (2 MiB steps, each replayed; fitting need not be monotone in the cap), then by peak reserved \
         memory; the plots name each by its rank. Rest the pointer on a column's name for what it means, or see below the table."
            .into(),
    ));
    blocks.push(Block::Table(
        Table::new(
            TUNE_HEADER.iter().map(|s| s.to_string()).collect(),
            record
                .results
                .iter()
                .enumerate()
                .map(|(i, r)| tune_row(i + 1, r, record.capacity_bytes))
                .collect(),
        )
        .titles(TUNE_COLUMNS.iter().map(|s| s.to_string()).collect())
        .wrap(&[TUNE_HEADER.len() - 1]),
    ));
    blocks.push(Block::Fold {
        summary: "What the columns mean".into(),
        open: false,
        blocks: vec![Block::Terms(
            TUNE_HEADER
                .iter()
                .zip(TUNE_COLUMNS)
                .map(|(h, m)| (h.to_string(), m.to_string()))
                .collect(),
        )],
    });
    // The verdicts and the post-mortem, as the terminal prints them (`ReplayRecord::tune_lines`).
    if !record.verdicts.is_empty() {
        let lines = Block::List(record.verdicts.iter().map(|v| v.text.clone()).collect());
        blocks.push(if record.verdicts.len() > FOLD_ROWS {
            Block::Fold {
                summary: format!("Each setting's verdict ({} lines)", record.verdicts.len()),
                open: false,
                blocks: vec![lines],
            }
        } else {
            lines
        });
    }
    blocks.push(Block::Heading(2, "Post-mortem".into()));
    match &record.postmortem {
        Some(postmortem) => blocks.extend(postmortem.text.iter().cloned().map(Block::Paragraph)),
        None => blocks.push(Block::Paragraph(match own_setting(&record) {
            Some(own) => format!(
                "Not needed: the trace's own setting, `{}`, fits{}.",
                own.setting_label(),
                if record.capacity_bytes.is_some() {
                    " under the cap"
                } else {
                    ""
                }
            ),
            None => "Not needed: the baseline setting fits.".into(),
        })),
    }
    blocks.extend(self_check(&record));
    blocks.push(Block::Heading(2, "Plots".into()));
    // The figure users need: the cap from which each setting fits, beside the cap given.
    plots.extend(render_both(
        &plot_dir,
        "tune_caps",
        &CapsChart::new(
            match record.capacity_bytes {
                Some(cap) => format!(
                    "the cap each setting needs (fits at every cap from), against the cap of {}",
                    ReplayRecord::format_cap(cap)
                ),
                None => "the cap each setting needs (fits at every cap from)".into(),
            },
            &record,
        ),
    )?);
    blocks.push(image("tune_caps"));
    // The timeline's legend names each by its setting, in rank order.
    let best = &record.results[..record.results.len().min(BEST_SHOWN)];
    plots.extend(render_both(
        &plot_dir,
        "tune_best_timeline",
        &TimelineChart::new(format!("reserved and allocated, best {}", best.len()), best),
    )?);
    blocks.push(image("tune_best_timeline"));
    let groups = failure_groups(&record.results);
    if !groups.is_empty() {
        blocks.push(Block::Heading(2, "First failures".into()));
        blocks.push(Block::Paragraph(
            "Where each setting that fails first fails, settings that fail alike together (the program's line is named where the snapshot's frames give it).".into(),
        ));
    }
    for (failure, settings) in groups {
        let names: Vec<String> = settings.iter().map(|r| r.quoted_label()).collect();
        blocks.push(Block::Paragraph(match names.len() {
            1 => format!("{}: first failure at {failure}", names[0]),
            n => format!("{} ({n} settings, alike): first failure at {failure}", names.join(", ")),
        }));
    }
    let markdown = dir.join("tune.md");
    let html = dir.join("tune.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab tune", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
}

/// The first failures of `results`, each with the settings that fail exactly so, in rank order
/// of each failure's first setting.
fn failure_groups(results: &[PolicyResult]) -> Vec<(&str, Vec<&PolicyResult>)> {
    let mut groups: Vec<(&str, Vec<&PolicyResult>)> = Vec::new();
    for r in results {
        let Some(failure) = r.first_failure.as_deref() else {
            continue;
        };
        match groups.iter_mut().find(|(f, _)| *f == failure) {
            Some((_, settings)) => settings.push(r),
            None => groups.push((failure, vec![r])),
        }
    }
    groups
}

fn image(stem: &str) -> Block {
    Block::Image {
        alt: stem.to_string(),
        png: format!("plots/{stem}.png"),
        svg: format!("plots/{stem}.svg"),
    }
}
