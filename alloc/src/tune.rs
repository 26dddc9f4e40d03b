//! What-if over PyTorch's settings: one trace replayed under many `PYTORCH_ALLOC_CONF`
//! strings at once, each with the smallest cap it fits under.

use experiments::{AllocConf, PolicyResult, Trace};

use super::choice::replay_each;
use super::{Error, PolicyChoice, ReplayOptions};

/// The settings `vramlab tune` tries by default: each key alone at the values people reach
/// for after an out-of-memory error, and the combinations that address different causes
/// (rounding waste, oversize splits, cached memory under a cap).
pub const DEFAULT_TUNE_GRID: &[&str] = &[
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "max_split_size_mb:128,max_non_split_rounding_mb:64",
    "roundup_power2_divisions:2",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.8",
    "expandable_segments:True,roundup_power2_divisions:4",
    "expandable_segments:True,garbage_collection_threshold:0.8",
    "max_split_size_mb:128,garbage_collection_threshold:0.6",
    "max_split_size_mb:256,garbage_collection_threshold:0.8",
    "max_split_size_mb:128,roundup_power2_divisions:4",
    "max_split_size_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.8",
    "roundup_power2_divisions:4,garbage_collection_threshold:0.6",
];

/// Replays `trace` under every setting in parallel (see [`crate::replay_choices`]), under
/// `capacity` if given, each with the smallest capacity it fits under and the one from which
/// it fits under every larger cap.
pub fn tune(
    trace: &Trace,
    settings: &[String],
    capacity: Option<u64>,
    device_bytes: u64,
) -> Result<Vec<PolicyResult>, Error> {
    let choices = settings
        .iter()
        .map(|text| PolicyChoice::pytorch_of(text, trace.torch.release))
        .collect::<Result<Vec<_>, _>>()?;
    let options = ReplayOptions {
        capacity,
        time_ops: false,
        ..ReplayOptions::default()
    };
    replay_each(trace, &choices, device_bytes, options, true)
}

/// The grid a tune runs: `grid`, or the default one, each setting once (the first of those
/// equal), with the trace's own settings first when it names some that the grid lacks (the
/// baseline the others are weighed against).
pub fn tune_grid(trace: &Trace, grid: &[String]) -> Result<Vec<String>, experiments::Error> {
    let texts: Vec<String> = if grid.is_empty() {
        DEFAULT_TUNE_GRID.iter().map(|s| s.to_string()).collect()
    } else {
        grid.to_vec()
    };
    // A setting given again (the same text, or settings equal to an earlier one's) is tried
    // once, where it first stands: each replay costs the same whatever its spelling.
    let mut confs: Vec<AllocConf> = Vec::with_capacity(texts.len());
    let mut kept = Vec::with_capacity(texts.len());
    let mut seen = std::collections::HashSet::new();
    for text in texts {
        if !seen.insert(text.clone()) {
            continue;
        }
        let conf = AllocConf::parse_for(&text, trace.torch.release)?;
        if !confs.contains(&conf) {
            confs.push(conf);
            kept.push(text);
        }
    }
    let mut texts = kept;
    if let Some(own) = &trace.allocator_settings {
        let own_conf = AllocConf::parse_for(own, trace.torch.release)?;
        if !confs.contains(&own_conf) {
            texts.insert(0, own.clone());
        }
    }
    Ok(texts)
}

/// Orders results as a user decides: those that fit under the cap first, then by the cap from
/// which each fits at every larger one (smaller first; never, last), then by peak reserved
/// memory, then by synchronising retries. A setting that does not fit is thus ranked by the cap
/// it would need, not by a peak the cap clipped.
pub fn rank(results: &mut [PolicyResult]) {
    let key = |r: &PolicyResult| {
        (
            r.failed_allocs > 0,
            r.always_fits_bytes.is_none(),
            r.always_fits_bytes,
            r.peak_reserved_bytes,
            r.pytorch_stats.map_or(0, |s| s.num_alloc_retries),
        )
    };
    results.sort_by_key(key);
}

/// `vramlab tune` as a library call: `trace` under every setting of `grid` (the default grid
/// when empty, the trace's own settings first), under `capacity` or the cap a recorded
/// out-of-memory error implies, ranked, with the verdicts and the post-mortem.
pub fn tune_record(
    trace: &Trace,
    grid: &[String],
    capacity: Option<u64>,
    device_bytes: u64,
) -> Result<experiments::ReplayRecord, Error> {
    let settings = tune_grid(trace, grid)?;
    let given: std::collections::HashSet<&String> = grid.iter().collect();
    let repeated = grid.len() - settings.iter().filter(|s| given.contains(s)).count();
    let (capacity, source) = super::choice::replay_capacity(trace, capacity);
    let mut results = tune(trace, &settings, capacity, device_bytes)?;
    // The baseline the others are weighed against: the trace's own settings, or the grid's first.
    let baseline = results.first().map(|r| r.setting().to_string()).unwrap_or_default();
    rank(&mut results);
    let mut record = experiments::ReplayRecord::new(trace, capacity, experiments::DeviceInfo::default(), results);
    record.capacity_source = source;
    record.device_bytes = Some(device_bytes);
    let choices = settings
        .iter()
        .map(|text| PolicyChoice::pytorch_of(text, trace.torch.release))
        .collect::<Result<Vec<_>, _>>()?;
    super::choice::note_release(&mut record, trace, &choices, device_bytes);
    if repeated > 0 {
        record.notes.push(format!(
            "{repeated} settings of the grid repeat earlier ones (the same text, or equal settings): each was tried once"
        ));
    }
    record.conclude_tune(&baseline);
    Ok(record)
}

#[cfg(test)]
mod tests {
    use experiments::{TraceEvent, TraceSource};

    use super::*;

    /// Issue 40: a grid that repeats one setting a thousand times tried it a thousand times
    /// (over a minute, where 100 different settings take 2 s); each is tried once, where it
    /// first stands, and the record says how many repeated.
    #[test]
    fn a_grid_tries_each_setting_once_in_its_order() {
        let events = (0..8)
            .flat_map(|id| {
                [
                    TraceEvent::Alloc {
                        id,
                        size: 3 << 20,
                        stream: 0,
                    },
                    TraceEvent::Free { id },
                ]
            })
            .collect();
        let trace = Trace::new("t", TraceSource::Synthetic, events);
        let mut grid = vec!["max_split_size_mb:128".to_string(), String::new()];
        grid.extend(std::iter::repeat_n("max_split_size_mb:128".to_string(), 1000));
        grid.push("expandable_segments:False".to_string());
        grid.push("expandable_segments:True".to_string());
        assert_eq!(
            tune_grid(&trace, &grid).unwrap(),
            ["max_split_size_mb:128", "", "expandable_segments:True"]
        );
        let record = tune_record(&trace, &grid, None, 80 << 30).unwrap();
        assert_eq!(record.results.len(), 3);
        assert!(
            record
                .notes
                .iter()
                .any(|n| n.starts_with("1001 settings of the grid repeat earlier ones")),
            "{:?}",
            record.notes
        );
    }
}
