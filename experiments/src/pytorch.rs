//! PyTorch's vocabulary that more than one crate speaks, defined once: the caching allocator's
//! sizes and the prefix a result of PyTorch's allocator is named by. Every other file takes
//! them from here.

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
