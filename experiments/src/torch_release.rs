//! PyTorch's releases whose allocator rules vramlab knows (2.11 to 2.15), which settings keys
//! each accepts, and how a snapshot or a `--torch` option names the release to replay under.
//!
//! The keys of each release were read from that release itself: its wheel's headers (the
//! `getKeys()` list of `c10/cuda/CUDAAllocatorConfig.h`, and up to 2.12 the `getMutableKeys()`
//! list of `c10/core/AllocatorConfig.h`; from 2.13 that list moved into
//! `c10/core/AllocatorConfig.cpp`, whose keys were read from the wheel's `libc10.so`), at the
//! commit each wheel's `torch.version.git_version` names ([`TorchRelease::commit`]). The line of
//! each key in each release is [`key_source`]'s answer.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A PyTorch release whose allocator rules vramlab follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub enum TorchRelease {
    /// 2.11: the release vramlab's figures were first checked against (every committed
    /// recording); the rules a replay follows where nothing names another.
    #[default]
    #[serde(rename = "2.11")]
    V2_11,
    /// 2.12: adds `pinned_free_catch_all` and `throw_on_cudamalloc_oom`.
    #[serde(rename = "2.12")]
    V2_12,
    /// 2.13: adds `pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb` (host memory).
    #[serde(rename = "2.13")]
    V2_13,
    /// 2.14: the settings of 2.13; snapshots may carry `host_segments` and `host_traces`
    /// (`_record_memory_history(record_pinned_host_memory=True)`).
    #[serde(rename = "2.14")]
    V2_14,
    /// 2.15: adds `expandable_segments_reserve` and `expandable_segments_reserve_by_class`.
    #[serde(rename = "2.15")]
    V2_15,
}

/// What a settings key does to the device allocator a replay models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEffect {
    /// It changes what the device allocator does, and the replay follows it.
    Device,
    /// It changes host (pinned) memory, locking or graph capture only: accepted, recorded, and
    /// without effect on the device replay.
    HostOnly,
}

/// One key PyTorch accepts: since which release, and what it does to the replay.
#[derive(Debug, Clone, Copy)]
pub struct KeyInfo {
    /// The key as written in `PYTORCH_ALLOC_CONF`.
    pub key: &'static str,
    /// The first release (of those known) that accepts it.
    pub since: TorchRelease,
    /// Whether the device replay follows it.
    pub effect: KeyEffect,
}

use KeyEffect::{Device, HostOnly};
use TorchRelease::{V2_11, V2_12, V2_13, V2_15};

/// Every key of every known release, in the order `vramlab list` shows them.
pub const ALLOC_CONF_KEYS: &[KeyInfo] = &[
    KeyInfo {
        key: "backend",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "max_split_size_mb",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "max_non_split_rounding_mb",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "large_segment_size_mb",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "roundup_power2_divisions",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "garbage_collection_threshold",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "expandable_segments",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "per_process_memory_fraction",
        since: V2_11,
        effect: Device,
    },
    KeyInfo {
        key: "throw_on_cudamalloc_oom",
        since: V2_12,
        effect: Device,
    },
    KeyInfo {
        key: "expandable_segments_reserve",
        since: V2_15,
        effect: Device,
    },
    KeyInfo {
        key: "expandable_segments_reserve_by_class",
        since: V2_15,
        effect: Device,
    },
    KeyInfo {
        key: "release_lock_on_cudamalloc",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "release_lock_on_hipmalloc",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_use_cuda_host_register",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_use_hip_host_register",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_num_register_threads",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_reserve_segment_size_mb",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_use_background_threads",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "graph_capture_record_stream_reuse",
        since: V2_11,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_free_catch_all",
        since: V2_12,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_max_round_threshold_mb",
        since: V2_13,
        effect: HostOnly,
    },
    KeyInfo {
        key: "pinned_max_cached_size_mb",
        since: V2_13,
        effect: HostOnly,
    },
];

/// Where each release lists each key it accepts (file:line at the release's commit, read from
/// its wheel's headers). The generic keys of 2.13 and later are listed in
/// `c10/core/AllocatorConfig.cpp`, which wheels do not ship: those have no line here.
const KEY_LINES: &[(&str, &str, &str)] = &[
    ("2.11", "backend", "c10/cuda/CUDAAllocatorConfig.h:148"),
    (
        "2.11",
        "release_lock_on_cudamalloc",
        "c10/cuda/CUDAAllocatorConfig.h:152",
    ),
    (
        "2.11",
        "pinned_use_cuda_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:154",
    ),
    (
        "2.11",
        "release_lock_on_hipmalloc",
        "c10/cuda/CUDAAllocatorConfig.h:156",
    ),
    (
        "2.11",
        "pinned_use_hip_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:157",
    ),
    (
        "2.11",
        "graph_capture_record_stream_reuse",
        "c10/cuda/CUDAAllocatorConfig.h:158",
    ),
    (
        "2.11",
        "pinned_reserve_segment_size_mb",
        "c10/cuda/CUDAAllocatorConfig.h:159",
    ),
    (
        "2.11",
        "pinned_num_register_threads",
        "c10/cuda/CUDAAllocatorConfig.h:160",
    ),
    (
        "2.11",
        "per_process_memory_fraction",
        "c10/cuda/CUDAAllocatorConfig.h:161",
    ),
    ("2.11", "large_segment_size_mb", "c10/core/AllocatorConfig.h:240"),
    ("2.11", "max_split_size_mb", "c10/core/AllocatorConfig.h:241"),
    ("2.11", "max_non_split_rounding_mb", "c10/core/AllocatorConfig.h:242"),
    ("2.11", "garbage_collection_threshold", "c10/core/AllocatorConfig.h:243"),
    ("2.11", "roundup_power2_divisions", "c10/core/AllocatorConfig.h:244"),
    ("2.11", "expandable_segments", "c10/core/AllocatorConfig.h:245"),
    (
        "2.11",
        "pinned_use_background_threads",
        "c10/core/AllocatorConfig.h:246",
    ),
    ("2.12", "backend", "c10/cuda/CUDAAllocatorConfig.h:160"),
    (
        "2.12",
        "release_lock_on_cudamalloc",
        "c10/cuda/CUDAAllocatorConfig.h:164",
    ),
    (
        "2.12",
        "pinned_use_cuda_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:166",
    ),
    (
        "2.12",
        "release_lock_on_hipmalloc",
        "c10/cuda/CUDAAllocatorConfig.h:168",
    ),
    (
        "2.12",
        "pinned_use_hip_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:169",
    ),
    (
        "2.12",
        "graph_capture_record_stream_reuse",
        "c10/cuda/CUDAAllocatorConfig.h:170",
    ),
    (
        "2.12",
        "pinned_reserve_segment_size_mb",
        "c10/cuda/CUDAAllocatorConfig.h:171",
    ),
    (
        "2.12",
        "pinned_num_register_threads",
        "c10/cuda/CUDAAllocatorConfig.h:172",
    ),
    (
        "2.12",
        "per_process_memory_fraction",
        "c10/cuda/CUDAAllocatorConfig.h:173",
    ),
    ("2.12", "pinned_free_catch_all", "c10/cuda/CUDAAllocatorConfig.h:174"),
    ("2.12", "throw_on_cudamalloc_oom", "c10/cuda/CUDAAllocatorConfig.h:175"),
    ("2.12", "large_segment_size_mb", "c10/core/AllocatorConfig.h:240"),
    ("2.12", "max_split_size_mb", "c10/core/AllocatorConfig.h:241"),
    ("2.12", "max_non_split_rounding_mb", "c10/core/AllocatorConfig.h:242"),
    ("2.12", "garbage_collection_threshold", "c10/core/AllocatorConfig.h:243"),
    ("2.12", "roundup_power2_divisions", "c10/core/AllocatorConfig.h:244"),
    ("2.12", "expandable_segments", "c10/core/AllocatorConfig.h:245"),
    (
        "2.12",
        "pinned_use_background_threads",
        "c10/core/AllocatorConfig.h:246",
    ),
    ("2.13", "backend", "c10/cuda/CUDAAllocatorConfig.h:160"),
    (
        "2.13",
        "release_lock_on_cudamalloc",
        "c10/cuda/CUDAAllocatorConfig.h:164",
    ),
    (
        "2.13",
        "pinned_use_cuda_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:166",
    ),
    (
        "2.13",
        "release_lock_on_hipmalloc",
        "c10/cuda/CUDAAllocatorConfig.h:168",
    ),
    (
        "2.13",
        "pinned_use_hip_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:169",
    ),
    (
        "2.13",
        "graph_capture_record_stream_reuse",
        "c10/cuda/CUDAAllocatorConfig.h:170",
    ),
    (
        "2.13",
        "pinned_reserve_segment_size_mb",
        "c10/cuda/CUDAAllocatorConfig.h:171",
    ),
    (
        "2.13",
        "pinned_num_register_threads",
        "c10/cuda/CUDAAllocatorConfig.h:172",
    ),
    (
        "2.13",
        "per_process_memory_fraction",
        "c10/cuda/CUDAAllocatorConfig.h:173",
    ),
    ("2.13", "pinned_free_catch_all", "c10/cuda/CUDAAllocatorConfig.h:174"),
    ("2.13", "throw_on_cudamalloc_oom", "c10/cuda/CUDAAllocatorConfig.h:175"),
    ("2.14", "backend", "c10/cuda/CUDAAllocatorConfig.h:160"),
    (
        "2.14",
        "release_lock_on_cudamalloc",
        "c10/cuda/CUDAAllocatorConfig.h:164",
    ),
    (
        "2.14",
        "pinned_use_cuda_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:166",
    ),
    (
        "2.14",
        "release_lock_on_hipmalloc",
        "c10/cuda/CUDAAllocatorConfig.h:168",
    ),
    (
        "2.14",
        "pinned_use_hip_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:169",
    ),
    (
        "2.14",
        "graph_capture_record_stream_reuse",
        "c10/cuda/CUDAAllocatorConfig.h:170",
    ),
    (
        "2.14",
        "pinned_reserve_segment_size_mb",
        "c10/cuda/CUDAAllocatorConfig.h:171",
    ),
    (
        "2.14",
        "pinned_num_register_threads",
        "c10/cuda/CUDAAllocatorConfig.h:172",
    ),
    (
        "2.14",
        "per_process_memory_fraction",
        "c10/cuda/CUDAAllocatorConfig.h:173",
    ),
    ("2.14", "pinned_free_catch_all", "c10/cuda/CUDAAllocatorConfig.h:174"),
    ("2.14", "throw_on_cudamalloc_oom", "c10/cuda/CUDAAllocatorConfig.h:175"),
    ("2.15", "backend", "c10/cuda/CUDAAllocatorConfig.h:245"),
    (
        "2.15",
        "release_lock_on_cudamalloc",
        "c10/cuda/CUDAAllocatorConfig.h:249",
    ),
    (
        "2.15",
        "pinned_use_cuda_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:251",
    ),
    (
        "2.15",
        "release_lock_on_hipmalloc",
        "c10/cuda/CUDAAllocatorConfig.h:253",
    ),
    (
        "2.15",
        "pinned_use_hip_host_register",
        "c10/cuda/CUDAAllocatorConfig.h:254",
    ),
    (
        "2.15",
        "graph_capture_record_stream_reuse",
        "c10/cuda/CUDAAllocatorConfig.h:255",
    ),
    (
        "2.15",
        "pinned_reserve_segment_size_mb",
        "c10/cuda/CUDAAllocatorConfig.h:256",
    ),
    (
        "2.15",
        "pinned_num_register_threads",
        "c10/cuda/CUDAAllocatorConfig.h:257",
    ),
    (
        "2.15",
        "per_process_memory_fraction",
        "c10/cuda/CUDAAllocatorConfig.h:258",
    ),
    ("2.15", "pinned_free_catch_all", "c10/cuda/CUDAAllocatorConfig.h:259"),
    ("2.15", "throw_on_cudamalloc_oom", "c10/cuda/CUDAAllocatorConfig.h:260"),
    (
        "2.15",
        "expandable_segments_reserve",
        "c10/cuda/CUDAAllocatorConfig.h:261",
    ),
    (
        "2.15",
        "expandable_segments_reserve_by_class",
        "c10/cuda/CUDAAllocatorConfig.h:262",
    ),
];

impl TorchRelease {
    /// Every known release, oldest first.
    pub const ALL: [TorchRelease; 5] = [V2_11, V2_12, V2_13, TorchRelease::V2_14, V2_15];
    /// The newest known release.
    pub const NEWEST: TorchRelease = V2_15;

    /// `2.11` ... `2.15`.
    pub fn name(self) -> &'static str {
        match self {
            V2_11 => "2.11",
            V2_12 => "2.12",
            V2_13 => "2.13",
            TorchRelease::V2_14 => "2.14",
            V2_15 => "2.15",
        }
    }

    /// The commit its `.0` wheel was built from (the wheel's `torch.version.git_version`): the
    /// revision every source line vramlab cites for it is at.
    pub fn commit(self) -> &'static str {
        match self {
            V2_11 => "70d99e998b4955e0049d13a98d77ae1b14db1f45",
            V2_12 => "7661cd9c6b841b62b7f411aa52ec51f05457263b",
            V2_13 => "cf30153c4c131c8164ee7798e5022d810682e2cb",
            TorchRelease::V2_14 => "08187d9e0fba026dc8217405802ab5381dc88d90",
            V2_15 => "d0f2af8b66b20da4baa50644c0cd3f887a2eae2e",
        }
    }

    /// Whether this release accepts `key`.
    pub fn knows(self, key: &str) -> bool {
        ALLOC_CONF_KEYS.iter().any(|k| k.key == key && k.since <= self)
    }

    /// The keys this release accepts, in [`ALLOC_CONF_KEYS`]' order.
    pub fn keys(self) -> Vec<&'static str> {
        ALLOC_CONF_KEYS
            .iter()
            .filter(|k| k.since <= self)
            .map(|k| k.key)
            .collect()
    }

    /// Reads a release as a user or a snapshot writes it (`2.15`, `2.15.0`, `v2.15.1`,
    /// `2.15.0+cu130`), with a warning where it is newer than any known one (it is then
    /// replayed under the newest's rules). Older than 2.11, or not a version: an error.
    pub fn parse(text: &str) -> Result<(TorchRelease, Option<String>)> {
        let bad = || {
            Error::Settings(format!(
                "torch '{text}': not a PyTorch release (expected e.g. 2.15 or 2.15.0)"
            ))
        };
        let trimmed = text.trim().trim_start_matches('v');
        let version = trimmed.split(['+', '-']).next().unwrap_or("");
        let mut parts = version.split('.');
        let major: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let minor: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        if parts.any(|p| p.parse::<u32>().is_err()) {
            return Err(bad());
        }
        if let Some(release) = TorchRelease::ALL
            .iter()
            .find(|r| r.name() == format!("{major}.{minor}"))
        {
            return Ok((*release, None));
        }
        if (major, minor) < (2, 11) {
            return Err(Error::Settings(format!(
                "torch {text}: vramlab knows the allocator rules of PyTorch {} to {} only",
                V2_11.name(),
                TorchRelease::NEWEST.name()
            )));
        }
        Ok((
            TorchRelease::NEWEST,
            Some(format!(
                "torch {text} is newer than any release vramlab knows: replayed under PyTorch {}'s allocator rules",
                TorchRelease::NEWEST.name()
            )),
        ))
    }

    /// The oldest release that accepts every key of `text` (a settings string), or the key no
    /// known release accepts.
    pub fn oldest_knowing(text: &str) -> std::result::Result<TorchRelease, String> {
        let mut oldest = V2_11;
        for key in crate::alloc_conf::keys_of(text) {
            match ALLOC_CONF_KEYS.iter().find(|k| k.key == key) {
                Some(info) => oldest = oldest.max(info.since),
                None => return Err(key),
            }
        }
        Ok(oldest)
    }
}

impl fmt::Display for TorchRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where `release` lists `key` among the keys it accepts (`file:line` at
/// [`TorchRelease::commit`]); `None` where the release does not accept it or lists it in a
/// file its wheel does not ship.
pub fn key_source(release: TorchRelease, key: &str) -> Option<&'static str> {
    KEY_LINES
        .iter()
        .find(|(r, k, _)| *r == release.name() && *k == key)
        .map(|(_, _, line)| *line)
}

/// The release a replay follows and why: what the snapshot shows (the oldest release that
/// could have written it), what the user named, or the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ReleaseChoice {
    /// The release whose rules the replay follows.
    pub release: TorchRelease,
    /// Why that one, in plain words.
    pub why: String,
    /// A warning to show (a release newer than any known was named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl ReleaseChoice {
    /// The release for an input whose fields show it was written by `shown` or later (with the
    /// field that shows it), where the user named `named` (`--torch`, `torch=`).
    pub fn resolve(shown: Option<(TorchRelease, String)>, named: Option<&str>) -> Result<ReleaseChoice> {
        let named = named.map(TorchRelease::parse).transpose()?;
        match (shown, named) {
            (Some((at_least, field)), Some((release, _))) if release < at_least => Err(Error::Settings(format!(
                "torch {release}: the snapshot cannot be from it: {field}, which PyTorch {at_least} and later write"
            ))),
            (_, Some((release, warning))) => Ok(ReleaseChoice {
                release,
                why: "named with --torch / torch=".into(),
                warning,
            }),
            (Some((release, field)), None) => Ok(ReleaseChoice {
                release,
                why: format!("{field}, which PyTorch {release} and later write; the oldest such release is assumed (name another with --torch)"),
                warning: None,
            }),
            (None, None) => Ok(ReleaseChoice {
                release: TorchRelease::default(),
                why: format!(
                    "the input does not say which release wrote it: PyTorch {}'s rules, the default (name another with --torch)",
                    TorchRelease::default()
                ),
                warning: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_read_as_written_and_newer_ones_fall_back_with_a_warning() {
        assert_eq!(TorchRelease::parse("2.15").unwrap(), (V2_15, None));
        assert_eq!(TorchRelease::parse("2.12.1+cu130").unwrap(), (V2_12, None));
        assert_eq!(TorchRelease::parse("v2.13.0").unwrap(), (V2_13, None));
        let (release, warning) = TorchRelease::parse("2.16.0").unwrap();
        assert_eq!(release, TorchRelease::NEWEST);
        assert!(warning.unwrap().contains("torch 2.16.0 is newer"));
        assert!(TorchRelease::parse("2.10")
            .unwrap_err()
            .to_string()
            .contains("2.11 to 2.15"));
        assert!(TorchRelease::parse("two").is_err());
        assert!(TorchRelease::parse("2.15.x").is_err());
    }

    /// Every key each release lists in its shipped headers is a key vramlab says it knows,
    /// and no release knows a key before the release that first lists it.
    #[test]
    fn the_key_table_agrees_with_the_listed_lines() {
        for (release, key, _) in KEY_LINES {
            let (release, _) = TorchRelease::parse(release).unwrap();
            assert!(release.knows(key), "{release} lists {key}");
        }
        for info in ALLOC_CONF_KEYS {
            for release in TorchRelease::ALL {
                let listed = KEY_LINES.iter().any(|(r, k, _)| *r == release.name() && *k == info.key);
                // Generic keys of 2.13+ live in AllocatorConfig.cpp (not shipped): no line.
                let generic_unshipped =
                    release >= V2_13 && !KEY_LINES.iter().any(|(r, k, _)| *r == "2.15" && *k == info.key);
                if !generic_unshipped {
                    assert_eq!(listed, release.knows(info.key), "{release} {}", info.key);
                }
            }
        }
    }

    #[test]
    fn a_snapshot_shows_the_oldest_release_it_could_be_from() {
        let shown = Some((TorchRelease::V2_14, "it has host_segments".to_string()));
        let choice = ReleaseChoice::resolve(shown.clone(), None).unwrap();
        assert_eq!(choice.release, TorchRelease::V2_14);
        assert!(ReleaseChoice::resolve(shown.clone(), Some("2.15")).is_ok());
        let err = ReleaseChoice::resolve(shown, Some("2.12")).unwrap_err().to_string();
        assert!(err.contains("host_segments") && err.contains("2.14"), "{err}");
        assert_eq!(ReleaseChoice::resolve(None, None).unwrap().release, V2_11);
    }
}
