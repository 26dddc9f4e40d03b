//! What-if over PyTorch's settings: one trace replayed under many `PYTORCH_ALLOC_CONF`
//! strings at once, each with the smallest cap it fits under.

use experiments::{AllocConf, BackendKind, PolicyResult, Trace};
use rayon::prelude::*;

use super::{build_pytorch_policy, min_capacity_of, replay_policy, ReplayOptions, SimDevice};

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

/// Replays `trace` under every setting in parallel, each labelled `PYTORCH_ALLOC_CONF=...`,
/// under `capacity` if given, with the smallest capacity it fits under. A setting equal to the
/// trace's own is replayed over the addresses its driver gave (see [`SimDevice::following`]).
pub fn tune(
    trace: &Trace,
    settings: &[(String, AllocConf)],
    capacity: Option<u64>,
    device_bytes: u64,
) -> Result<Vec<PolicyResult>, experiments::Error> {
    let recorded = trace
        .allocator_settings
        .as_deref()
        .and_then(|s| AllocConf::parse(s).ok());
    settings
        .par_iter()
        .map(|(text, conf)| {
            let own = recorded.as_ref() == Some(conf);
            let mut device = if own {
                SimDevice::following(device_bytes, trace)
            } else {
                SimDevice::new(device_bytes)
            };
            let options = ReplayOptions {
                capacity,
                check_recorded: own,
                time_ops: false,
                ..ReplayOptions::default()
            };
            let label = format!("PYTORCH_ALLOC_CONF={text}");
            let mut result = replay_policy(
                trace,
                &label,
                build_pytorch_policy(conf),
                &mut device,
                options,
                &mut (),
                BackendKind::Sim,
            )?;
            result.min_capacity_bytes = min_capacity_of(trace, &|| build_pytorch_policy(conf), device_bytes)?;
            Ok(result)
        })
        .collect()
}

/// Orders results as a user decides: those that fit first, then by peak reserved memory,
/// then by synchronising retries.
pub fn rank(results: &mut [PolicyResult]) {
    let retries = |r: &PolicyResult| r.pytorch_stats.map_or(0, |s| s.num_alloc_retries);
    results.sort_by(|a, b| {
        (a.failed_allocs > 0, a.peak_reserved_bytes, retries(a)).cmp(&(
            b.failed_allocs > 0,
            b.peak_reserved_bytes,
            retries(b),
        ))
    });
}
