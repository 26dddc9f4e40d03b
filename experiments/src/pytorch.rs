//! PyTorch's vocabulary that more than one crate speaks, defined once: the caching allocator's
//! sizes, the actions of a snapshot's `device_traces` ([`TraceAction`]) and the prefix a result
//! of PyTorch's allocator is named by. Every other file takes them from here.

/// "small" allocations are packed in 2 MiB blocks: the small pool's segment, and the page of
/// expandable segments (`kSmallBuffer`, c10/core/AllocatorConfig.h:17 at 2.11).
pub const SMALL_BUFFER: u64 = 2_097_152;
/// All sizes are rounded to at least 512 bytes (`kMinBlockSize`, c10/core/AllocatorConfig.h:19).
pub const MIN_BLOCK_SIZE: u64 = 512;
/// The largest "small" allocation, 1 MiB (`kSmallSize`, c10/core/AllocatorConfig.h:21).
pub const SMALL_SIZE: u64 = 1_048_576;
/// Allocations between 1 and 10 MiB may use `kLargeBuffer` (`kMinLargeAlloc`,
/// c10/core/AllocatorConfig.h:23).
pub const MIN_LARGE_ALLOC: u64 = 10_485_760;
/// Large allocations are rounded up to 2 MiB (`kRoundLarge`, c10/core/AllocatorConfig.h:25).
pub const ROUND_LARGE: u64 = 2_097_152;
/// The segment a 1-10 MiB request gets by default, and the least `max_split_size_mb` takes
/// (`kLargeBuffer`, 20 MiB, c10/cuda/CUDACachingAllocator.cpp at 2.11).
pub const LARGE_BUFFER: u64 = 20_971_520;

/// An action of a snapshot's `device_traces`, as PyTorch writes it (`TraceEntry::Action`,
/// c10/core/CachingDeviceAllocator.h:109 at 2.11, written as text by `_snapshot()`), and the few
/// vramlab adds. The reader ([`TraceAction::parse`]), the replay's record of what it did
/// (`ReplayedEvent`), the snapshot writer and the exports all speak it: the text is
/// [`TraceAction::name`], here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceAction {
    /// `alloc`: the program was given a block.
    Alloc,
    /// `free_requested`: the program let go of a block.
    FreeRequested,
    /// `free_completed`: the block is free to be used again (after the streams that used it).
    FreeCompleted,
    /// `segment_alloc`: cudaMalloc of a segment.
    SegmentAlloc,
    /// `segment_free`: cudaFree of a segment.
    SegmentFree,
    /// `segment_map`: pages mapped into an expandable segment.
    SegmentMap,
    /// `segment_unmap`: pages unmapped from an expandable segment.
    SegmentUnmap,
    /// `snapshot`: where `_snapshot()` was taken.
    Snapshot,
    /// `oom`: a request the allocator could not satisfy (its `device_free` the bytes the
    /// device had free).
    Oom,
    /// `user_defined`: the program's own mark (newer releases).
    UserDefined,
    /// `empty_cache`: vramlab's tracer, where the program called `torch.cuda.empty_cache()`.
    EmptyCache,
    /// `reset_peak`: vramlab's tracer, where the program reset the peak statistics.
    ResetPeak,
    /// `retry`: vramlab's mark of a synchronising retry in a replay (the Perfetto export shows
    /// it); never written into a snapshot, and read from one as an action nobody writes.
    Retry,
}

impl TraceAction {
    /// Every action, in the order above.
    pub const ALL: [TraceAction; 13] = [
        TraceAction::Alloc,
        TraceAction::FreeRequested,
        TraceAction::FreeCompleted,
        TraceAction::SegmentAlloc,
        TraceAction::SegmentFree,
        TraceAction::SegmentMap,
        TraceAction::SegmentUnmap,
        TraceAction::Snapshot,
        TraceAction::Oom,
        TraceAction::UserDefined,
        TraceAction::EmptyCache,
        TraceAction::ResetPeak,
        TraceAction::Retry,
    ];

    /// Its text in a snapshot's `device_traces` (PyTorch's, or vramlab's for its own).
    pub fn name(self) -> &'static str {
        match self {
            TraceAction::Alloc => "alloc",
            TraceAction::FreeRequested => "free_requested",
            TraceAction::FreeCompleted => "free_completed",
            TraceAction::SegmentAlloc => "segment_alloc",
            TraceAction::SegmentFree => "segment_free",
            TraceAction::SegmentMap => "segment_map",
            TraceAction::SegmentUnmap => "segment_unmap",
            TraceAction::Snapshot => "snapshot",
            TraceAction::Oom => "oom",
            TraceAction::UserDefined => "user_defined",
            TraceAction::EmptyCache => "empty_cache",
            TraceAction::ResetPeak => "reset_peak",
            TraceAction::Retry => "retry",
        }
    }

    /// The action a snapshot's text names; `None` for text no action has.
    pub fn parse(text: &str) -> Option<TraceAction> {
        Some(match text {
            "alloc" => TraceAction::Alloc,
            "free_requested" => TraceAction::FreeRequested,
            "free_completed" => TraceAction::FreeCompleted,
            "segment_alloc" => TraceAction::SegmentAlloc,
            "segment_free" => TraceAction::SegmentFree,
            "segment_map" => TraceAction::SegmentMap,
            "segment_unmap" => TraceAction::SegmentUnmap,
            "snapshot" => TraceAction::Snapshot,
            "oom" => TraceAction::Oom,
            "user_defined" => TraceAction::UserDefined,
            "empty_cache" => TraceAction::EmptyCache,
            "reset_peak" => TraceAction::ResetPeak,
            "retry" => TraceAction::Retry,
            _ => return None,
        })
    }

    /// A block handed to or taken back from the program (`alloc`, `free_requested`,
    /// `free_completed`), as opposed to the allocator's own dealings with the device and marks.
    pub fn is_block(self) -> bool {
        matches!(
            self,
            TraceAction::Alloc | TraceAction::FreeRequested | TraceAction::FreeCompleted
        )
    }
}

impl std::fmt::Display for TraceAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a replay names a result of PyTorch's allocator: this, then the settings string.
pub const ALLOC_CONF_PREFIX: &str = "PYTORCH_ALLOC_CONF=";

/// The name of a result of PyTorch's allocator under `settings`.
pub fn alloc_conf_policy(settings: &str) -> String {
    format!("{ALLOC_CONF_PREFIX}{settings}")
}

/// `text` quoted for a POSIX shell (sh, bash, zsh): inside single quotes, where no character is
/// special, each `'` written as `'\''`. A setting of the default grid such as
/// `roundup_power2_divisions:[64:8,256:4,1024:2,>:1]` would otherwise be cut at `>` (a
/// redirection) and its brackets globbed.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The line that sets `settings` for a job started from a shell, quoted so that it survives
/// being pasted: `PYTORCH_ALLOC_CONF='expandable_segments:True'` (put it before the command,
/// or after `export `).
pub fn alloc_conf_line(settings: &str) -> String {
    format!("{ALLOC_CONF_PREFIX}{}", shell_quote(settings))
}

/// The settings of a result named by [`alloc_conf_policy`]; `None` for another policy's name.
pub fn alloc_conf_of(policy: &str) -> Option<&str> {
    policy.strip_prefix(ALLOC_CONF_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_name_round_trips_its_settings() {
        let name = alloc_conf_policy("expandable_segments:True");
        assert_eq!(name, "PYTORCH_ALLOC_CONF=expandable_segments:True");
        assert_eq!(alloc_conf_of(&name), Some("expandable_segments:True"));
        assert_eq!(alloc_conf_of("best-fit"), None);
    }

    /// The line offered for each setting of the default grid, and for settings with every
    /// character a shell treats specially, run through `bash -c` reads back as the setting.
    #[test]
    fn the_line_to_paste_survives_a_shell() {
        let settings: Vec<String> = vec![
            "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]".into(),
            "expandable_segments:True,garbage_collection_threshold:0.8".into(),
            "a'b \"c\" $HOME `x` \\ * ? ; & | < > ( ) ! ~ #".into(),
            String::new(),
        ];
        let Ok(probe) = std::process::Command::new("bash").arg("-c").arg("true").status() else {
            eprintln!("skipped: no bash on this machine to paste the line into");
            return;
        };
        assert!(probe.success());
        for setting in settings {
            let line = alloc_conf_line(&setting);
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("{line} printenv PYTORCH_ALLOC_CONF; echo end"))
                .current_dir(std::env::temp_dir())
                .output()
                .unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            assert_eq!(text, format!("{setting}\nend\n"), "{line}");
        }
    }

    /// Each action's text reads back as the action, and no two share a text.
    #[test]
    fn every_action_round_trips_its_text() {
        for action in TraceAction::ALL {
            assert_eq!(TraceAction::parse(action.name()), Some(action), "{action}");
        }
        let names: std::collections::HashSet<_> = TraceAction::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names.len(), TraceAction::ALL.len());
        assert_eq!(TraceAction::parse("Alloc"), None);
        assert_eq!(TraceAction::parse(""), None);
    }

    #[test]
    fn the_sizes_are_pytorchs() {
        assert_eq!(
            (SMALL_BUFFER, SMALL_SIZE, MIN_LARGE_ALLOC),
            (2 << 20, 1 << 20, 10 << 20)
        );
        assert_eq!((ROUND_LARGE, LARGE_BUFFER, MIN_BLOCK_SIZE), (2 << 20, 20 << 20, 512));
    }

    /// No other Rust file of the workspace defines one of these sizes or strips the prefix
    /// itself: `grep` finds each once, here.
    #[test]
    fn each_is_defined_here_only() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let names = [
            "SMALL_BUFFER",
            "SMALL_SIZE",
            "MIN_BLOCK",
            "MIN_BLOCK_SIZE",
            "MIN_LARGE_ALLOC",
            "ROUND_LARGE",
            "LARGE_BUFFER",
            "SMALL_SEGMENT",
            "PYTORCH_SMALL_PAGE",
        ];
        let mut found = Vec::new();
        let mut stack: Vec<std::path::PathBuf> = ["experiments/src", "alloc/src", "reports/src", "src", "python/src"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("experiments/src/pytorch.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                let defines = names.iter().any(|name| {
                    line.strip_prefix("const ")
                        .or_else(|| line.strip_prefix("pub const "))
                        .is_some_and(|rest| rest.starts_with(&format!("{name}:")))
                });
                let ours = line.contains("pytorch::");
                let strips = line.contains(&format!("strip_prefix(\"{ALLOC_CONF_PREFIX}\")"));
                if (defines && !ours) || strips {
                    found.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
        assert!(found.is_empty(), "PyTorch's vocabulary defined again: {found:#?}");
    }
}
