//! Allocator policies by name, with their parameters as data: `caching:max_split_size=64MiB`.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// One policy vramlab knows: its name, what it does, and its parameters with defaults.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInfo {
    /// The name `--policy` takes.
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// (parameter, default, meaning).
    pub params: &'static [(&'static str, &'static str, &'static str)],
}

/// Every policy, in the order `vramlab list` shows them.
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "cuda-malloc",
        summary: "every request straight to cuMemAlloc, every free to cuMemFree (the baseline)",
        params: &[("round", "256", "bytes each request is rounded up to (cuMemAlloc's alignment)")],
    },
    PolicyInfo {
        name: "cuda-malloc-async",
        summary: "every request to cuMemAllocAsync / cuMemFreeAsync (the driver's stream-ordered pool)",
        params: &[("round", "256", "bytes each request is rounded up to")],
    },
    PolicyInfo {
        name: "bump",
        summary: "one arena reserved up front, requests in order at aligned offsets; frees only count until everything is free, then it resets",
        params: &[
            ("arena", "4 GiB", "bytes reserved up front"),
            ("alignment", "256", "offset alignment"),
            ("reset_when_empty", "1", "1: release-all when the last live block is freed; 0: never reuse"),
        ],
    },
    PolicyInfo {
        name: "buckets",
        summary: "power-of-two size classes with free lists; a miss allocates one block of the class",
        params: &[("min", "512", "smallest class, bytes")],
    },
    PolicyInfo {
        name: "best-fit",
        summary: "a coalescing best-fit suballocator over one pool that grows by whole segments",
        params: &[
            ("grow_by", "2 MiB", "smallest segment the pool grows by (larger requests get their own size, rounded to 2 MiB)"),
            ("alignment", "256", "block alignment"),
        ],
    },
    PolicyInfo {
        name: "buddy",
        summary: "a binary buddy allocator over power-of-two arenas",
        params: &[
            ("arena", "1 GiB", "arena size, a power of two; larger requests fail"),
            ("min_block", "512", "smallest block, a power of two"),
        ],
    },
    PolicyInfo {
        name: "binning",
        summary: "fixed-size power-of-two bins carved from chunks for small requests, an upstream policy for large ones",
        params: &[
            ("min_bin", "256", "smallest bin"),
            ("max_bin", "1 MiB", "largest bin; larger requests go upstream"),
            ("chunk", "2 MiB", "bytes a bin takes from the device at a time"),
            ("large", "best-fit", "the policy for requests above max_bin"),
        ],
    },
    PolicyInfo {
        name: "caching",
        summary: "PyTorch's CUDA caching allocator: 512 B rounding, small (<=1 MiB, 2 MiB segments) and large pools, best fit per stream, split and merge",
        params: &[("max_split_size", "none", "blocks at least this large are never split (PYTORCH_CUDA_ALLOC_CONF max_split_size_mb)")],
    },
    PolicyInfo {
        name: "expandable",
        summary: "PyTorch's expandable segments: one virtual segment per stream and pool, mapped in 2 MiB (small) or 20 MiB (large) pages",
        params: &[
            ("small_page", "2 MiB", "mapping unit of the small pool"),
            ("large_page", "20 MiB", "mapping unit of the large pool"),
        ],
    },
];

/// A policy chosen by name, with parameter values as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySpec {
    /// One of [`POLICIES`].
    pub name: String,
    /// Parameters given; the others take their defaults.
    pub params: BTreeMap<String, String>,
}

impl PolicySpec {
    /// Parses `NAME[:key=value...]`, checking the name and parameter names.
    pub fn parse(text: &str) -> Result<PolicySpec> {
        let mut parts = text.trim().split(':');
        let name = parts.next().unwrap_or_default().to_string();
        let info = PolicySpec::info_of(&name)?;
        let mut params = BTreeMap::new();
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| Error::Settings(format!("policy '{text}': '{part}' is not key=value")))?;
            if !info.params.iter().any(|(k, _, _)| *k == key) {
                return Err(Error::Unknown {
                    kind: "parameter",
                    name: format!("{name}.{key}"),
                    valid: info.params.iter().map(|(k, _, _)| format!("{name}.{k}")).collect(),
                });
            }
            if params.insert(key.to_string(), value.to_string()).is_some() {
                return Err(Error::Settings(format!("policy '{text}': {key} is given twice")));
            }
        }
        Ok(PolicySpec { name, params })
    }

    /// Parses a comma-separated list of policies.
    pub fn parse_list(text: &str) -> Result<Vec<PolicySpec>> {
        text.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(PolicySpec::parse)
            .collect()
    }

    fn info_of(name: &str) -> Result<&'static PolicyInfo> {
        POLICIES.iter().find(|p| p.name == name).ok_or_else(|| Error::Unknown {
            kind: "policy",
            name: name.to_string(),
            valid: POLICIES.iter().map(|p| p.name.to_string()).collect(),
        })
    }

    /// The value of a parameter: as given, or its default.
    pub fn param(&self, key: &str) -> &str {
        if let Some(value) = self.params.get(key) {
            return value;
        }
        PolicySpec::info_of(&self.name)
            .ok()
            .and_then(|info| info.params.iter().find(|(k, _, _)| *k == key))
            .map_or("", |(_, default, _)| default)
    }

    /// A byte-valued parameter, or an error naming the policy, parameter and value.
    pub fn bytes(&self, key: &str) -> Result<u64> {
        let value = self.param(key);
        crate::units::parse_bytes(value)
            .map_err(|reason| Error::Settings(format!("policy {}: {key} = {value}: {reason}", self.name)))
    }

    /// How results name it: the name, with any parameters given.
    pub fn label(&self) -> String {
        let mut label = self.name.clone();
        for (key, value) in &self.params {
            label.push_str(&format!(":{key}={value}"));
        }
        label
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_parameters() {
        let list = PolicySpec::parse_list("caching,buddy:arena=256MiB").unwrap();
        assert_eq!(list[0].name, "caching");
        assert_eq!(list[1].bytes("arena").unwrap(), 256 << 20);
        assert_eq!(list[1].bytes("min_block").unwrap(), 512);
        assert_eq!(list[1].label(), "buddy:arena=256MiB");
        let err = PolicySpec::parse("slab").unwrap_err().to_string();
        assert!(
            err.contains("unknown policy 'slab'") && err.contains("caching"),
            "{err}"
        );
        let err = PolicySpec::parse("buddy:colour=1").unwrap_err().to_string();
        assert!(err.contains("buddy.colour"), "{err}");
        let err = PolicySpec::parse("buddy:arena=lots")
            .unwrap()
            .bytes("arena")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("policy buddy: arena = lots:"), "{err}");
    }
}
