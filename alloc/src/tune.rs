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

/// The grid a tune runs: `grid`, or the default one, with the trace's own settings first when
/// it names some that the grid lacks (the baseline the others are weighed against).
pub fn tune_grid(trace: &Trace, grid: &[String]) -> Result<Vec<String>, experiments::Error> {
    let mut texts: Vec<String> = if grid.is_empty() {
        DEFAULT_TUNE_GRID.iter().map(|s| s.to_string()).collect()
    } else {
        grid.to_vec()
    };
    let confs = texts
        .iter()
        .map(|t| AllocConf::parse_for(t, trace.torch.release))
        .collect::<Result<Vec<_>, _>>()?;
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
    let (capacity, source) = super::choice::replay_capacity(trace, capacity);
    let mut results = tune(trace, &settings, capacity, device_bytes)?;
    // The baseline the others are weighed against: the trace's own settings, or the grid's first.
    let baseline = results.first().map(|r| r.setting().to_string()).unwrap_or_default();
    rank(&mut results);
    let mut record = experiments::ReplayRecord::new(trace, capacity, experiments::DeviceInfo::default(), results);
    record.capacity_source = source;
    let choices = settings
        .iter()
        .map(|text| PolicyChoice::pytorch_of(text, trace.torch.release))
        .collect::<Result<Vec<_>, _>>()?;
    super::choice::note_release(&mut record, trace, &choices, device_bytes);
    record.conclude_tune(&baseline);
    Ok(record)
}
