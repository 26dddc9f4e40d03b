//! Device profiles: the model's parameters, immutable, each saying where it came from.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A profile section of one family: how its numbers are checked beyond "finite and not
/// negative" (which [`Profile::parse`] checks of every number).
pub(crate) trait Section {
    /// Upper bounds on counts that size what a model allocates or loops over, by key.
    const UPPER_BOUNDS: &'static [(&'static str, f64)] = &[];

    /// Refuses values that make no sense together; the error names `origin` and the key.
    fn validate(&self, _origin: &str) -> Result<()> {
        Ok(())
    }
}

macro_rules! profile_struct {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// A device profile: what `sim` needs to predict one GPU, and where each number came from.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Profile {
            /// Short name (`--gpu NAME`).
            pub name: String,
            /// One sentence: which machine, which date.
            pub description: String,
            /// The host whose machine parts ([`machine_parts`]) were measured, as `vramlab calibrate`
            /// wrote it; absent in built-in profiles, which come from other machines.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub machine: Option<String>,
            /// The GPU the parameters describe.
            pub device: ProfileDevice,
            /// Host <-> device copies and launch overhead.
            pub transfer: crate::TransferParams,
            /// The SM's resource limits and allocation rules, for the occupancy calculator.
            pub sm: SmParams,
            $( $(
                #[doc = concat!("The `", stringify!($module), "` family's parameters; absent until calibrated (`vramlab calibrate --part ", stringify!($module), " --into FILE` adds it).")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $module: Option<$Section>,
            )? )*
            /// How much measurements of the same point differ between runs and machines of this GPU, per
            /// family: the band within which a prediction is as good as a measurement can tell.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub uncertainty: Option<Uncertainty>,
        }

        impl Profile {
            /// A profile of its base alone (the GPU, the link, the SM's limits), with every family
            /// section absent: what a calibration's fits start from when no profile is given.
            pub fn new(name: &str, device: ProfileDevice, transfer: crate::TransferParams, sm: SmParams) -> Profile {
                Profile {
                    name: name.to_string(),
                    description: String::new(),
                    machine: None,
                    device,
                    transfer,
                    sm,
                    $( $( $module: None::<$Section>, )? )*
                    uncertainty: None,
                }
            }

            /// Every family section's own checks.
            fn validate_sections(&self, origin: &str) -> Result<()> {
                $( $( if let Some(section) = &self.$module {
                    <$Section as Section>::validate(section, origin)?;
                } )? )*
                Ok(())
            }
        }

        /// The upper bounds of the family section `name`.
        fn section_bounds(name: &str) -> &'static [(&'static str, f64)] {
            $( $( if name == stringify!($module) {
                return <$Section as Section>::UPPER_BOUNDS;
            } )? )*
            &[]
        }
    };
}
for_each_family!(profile_struct);

/// The spread of repeated measurements, per family (a fraction: 0.03 is 3%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uncertainty {
    /// How it was found.
    pub source: String,
    /// Family name -> relative spread.
    pub spread: std::collections::BTreeMap<String, f64>,
}

impl Profile {
    /// The measured spread of `family`'s primary metric, if the profile has one.
    pub fn spread_of(&self, family: crate::Family) -> Option<f64> {
        self.uncertainty.as_ref()?.spread.get(family.name()).copied()
    }
}

/// What one SM has and how it hands it out: the occupancy calculator's inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmParams {
    /// Where these numbers came from.
    pub source: String,
    /// Threads per warp.
    pub warp_size: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    /// Registers one thread may use.
    pub max_registers_per_thread: u32,
    /// Registers are handed to a warp in multiples of this.
    pub register_allocation_unit: u32,
    /// Warp schedulers (each with its own register file slice).
    pub sub_partitions: u32,
    /// Shared memory per SM at the largest carveout, bytes.
    pub shared_bytes_per_sm: u32,
    /// Shared memory per block without opting in, bytes.
    pub shared_bytes_per_block: u32,
    /// Shared memory per block after opting in (cuFuncSetAttribute), bytes.
    pub shared_bytes_per_block_optin: u32,
    /// Shared memory the driver reserves for each resident block, bytes.
    pub reserved_shared_bytes_per_block: u32,
    /// Shared memory is handed to a block in multiples of this, bytes.
    pub shared_allocation_unit: u32,
}

/// The GPU a profile describes, as the driver reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDevice {
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// "major.minor".
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub memory_bytes: u64,
    /// Copy engines that run concurrently with kernels (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT).
    pub copy_engines: u32,
}

/// A copy that the copy engine does straight from or to pinned memory:
/// `time = latency_us + bytes / gb_per_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Fixed cost per copy, microseconds (issue, DMA setup, completion).
    pub latency_us: f64,
    /// Sustained bandwidth, 10^9 bytes per second.
    pub gb_per_s: f64,
}

struct BuiltinProfile {
    name: &'static str,
    text: &'static str,
}

const BUILTIN_PROFILES: &[BuiltinProfile] = &[
    BuiltinProfile {
        name: "h100",
        text: include_str!("../profiles/h100.toml"),
    },
    BuiltinProfile {
        name: "h200",
        text: include_str!("../profiles/h200.toml"),
    },
];

/// Keys whose value may be zero: fixed costs and latencies that a device may not have, and the
/// driver's shared-memory reservation. Every other number in a profile sizes, divides or
/// scales something, and must be positive.
const ZERO_ALLOWED: &[&str] = &[
    "latency_us",
    "kernel_launch_us",
    "launch_us",
    "fixed_us",
    "reserved_shared_bytes_per_block",
    "overhead_registers",
    "wavefront_cycles",
    "warm_per_extra",
    "cold_per_extra",
];

/// Upper bounds on counts in the sections that belong to no family.
const UPPER_BOUNDS: &[(&str, &str, f64)] = &[
    ("sm", "warp_size", 1024.0),
    ("sm", "sub_partitions", 1024.0),
    ("device", "multiprocessors", 65_536.0),
    ("device", "copy_engines", 1024.0),
];

/// Every number in a profile, in every section: finite, not negative, positive unless its key
/// may be zero, and within the bounds above; the error names the file, section, key and value.
fn check_numbers(origin: &str, section: &str, value: &toml::Value) -> Result<()> {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                let inner = if section.is_empty() {
                    key.clone()
                } else {
                    format!("{section}.{key}")
                };
                match value {
                    toml::Value::Table(_) | toml::Value::Array(_) => check_numbers(origin, &inner, value)?,
                    _ => check_number(origin, section, key, value)?,
                }
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    // Arrays of tables (growth costs): each table's keys, named by index.
                    toml::Value::Table(_) | toml::Value::Array(_) => {
                        check_numbers(origin, &format!("{section}[{i}]"), item)?
                    }
                    // Calibration cases and sizes: finite and not negative; 0 is a case (stride 0).
                    toml::Value::Float(x) if !(x.is_finite() && *x >= 0.0) => {
                        return Err(Error::Invalid(format!(
                            "{origin}: {section}[{i}] = {x}: must be >= 0 (and finite)"
                        )))
                    }
                    toml::Value::Integer(x) if *x < 0 => {
                        return Err(Error::Invalid(format!("{origin}: {section}[{i}] = {x}: must be >= 0")))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn check_number(origin: &str, section: &str, key: &str, value: &toml::Value) -> Result<()> {
    let x = match value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        _ => return Ok(()),
    };
    let place = if section.is_empty() {
        key.to_string()
    } else {
        format!("[{section}] {key}")
    };
    // A spread of 0 is a measurement (every repeat agreed), not a missing value.
    let zero_ok = ZERO_ALLOWED.contains(&key) || section == "uncertainty.spread";
    if !x.is_finite() || x < 0.0 || (x == 0.0 && !zero_ok) {
        let want = if zero_ok {
            ">= 0 (and finite)"
        } else {
            "positive (and finite)"
        };
        return Err(Error::Invalid(format!("{origin}: {place} = {value}: must be {want}")));
    }
    let top = section.split(['.', '[']).next().unwrap_or_default();
    let family_bound = section_bounds(top).iter().find(|(k, _)| *k == key).map(|(_, max)| max);
    let other_bound = UPPER_BOUNDS
        .iter()
        .find(|(s, k, _)| *s == top && *k == key)
        .map(|(_, _, max)| max);
    if let Some(max) = family_bound.or(other_bound) {
        if x > *max {
            return Err(Error::Invalid(format!(
                "{origin}: {place} = {value}: must be at most {max}"
            )));
        }
    }
    Ok(())
}

/// `text` with the old section headers (`[shared]`, `[global]`) under the families' names, line
/// for line, so that old profiles read, and are checked, as new ones.
fn with_family_section_names(text: &str) -> String {
    let renamed = |line: &str| -> Option<String> {
        let header = line.trim_start().strip_prefix('[')?;
        crate::former_names().into_iter().find_map(|(old, new)| {
            let rest = header.strip_prefix(old)?;
            (rest.starts_with(']') || rest.starts_with('.')).then(|| format!("[{new}{rest}"))
        })
    };
    let mut out: String = text
        .lines()
        .map(|line| renamed(line).unwrap_or_else(|| line.to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The profile `vramlab run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "h100";

/// The parts of a profile that belong to the machine a GPU sits in rather than to the GPU model:
/// host memory and the PCIe link (copies; pageable ones go through host memory), and the driver
/// (growing buffers, managed-memory migration); the [`crate::CALIBRATION_PARTS`] marked
/// `machine`. The others, and the SM's limits, are the GPU model's own and travel with it. Measured on freshly started machines (issue 13), built-in
/// profiles held to a few percent for the GPU's parts and missed by 6-26% median for these.
pub fn machine_parts() -> Vec<&'static str> {
    crate::CALIBRATION_PARTS
        .iter()
        .filter(|p| p.machine)
        .map(|p| p.name)
        .collect()
}

/// The host this process runs on (Linux's hostname; `None` where it cannot be read).
pub fn this_machine() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
}

impl Profile {
    /// Why measurements on this machine may not match the profile's machine parts: the profile
    /// was measured elsewhere (or is built in). `None` when it was calibrated here.
    pub fn machine_mismatch(&self) -> Option<String> {
        let here = this_machine();
        if self.machine.is_some() && self.machine == here {
            return None;
        }
        let origin = match &self.machine {
            Some(machine) => format!("was calibrated on {machine}"),
            None => "is built in (calibrated on another machine)".to_string(),
        };
        Some(format!(
            "profile '{}' {origin}, not on {}: its machine parts ({}) describe that machine's host, PCIe link and driver; `vramlab calibrate --part machine --into PROFILE` re-measures them here",
            self.name,
            here.as_deref().unwrap_or("this machine"),
            machine_parts().join(", ")
        ))
    }

    /// Parses a profile's TOML; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Profile> {
        let text = &with_family_section_names(text);
        let profile: Profile = toml::from_str(text).map_err(|e| Error::from_toml(origin, text, &e))?;
        let table: toml::Table = toml::from_str(text).map_err(|e| Error::from_toml(origin, text, &e))?;
        check_numbers(origin, "", &toml::Value::Table(table))?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// A built-in profile by name, or a profile file by path (anything with a '/' or ending in .toml).
    pub fn find(name_or_path: &str) -> Result<Profile> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let path = Path::new(name_or_path);
            let text = crate::files::read_input_text(path)?;
            return Profile::parse(name_or_path, &text);
        }
        let builtin = BUILTIN_PROFILES
            .iter()
            .find(|p| p.name == name_or_path)
            .ok_or_else(|| Error::Unknown {
                kind: "profile",
                name: name_or_path.to_string(),
                valid: Profile::builtin_names().into_iter().map(String::from).collect(),
            })?;
        Profile::parse(&format!("builtin:{}", builtin.name), builtin.text)
    }

    /// Names of the profiles compiled into vramlab.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN_PROFILES.iter().map(|p| p.name).collect()
    }

    /// The profile as TOML, as `vramlab calibrate` writes it.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a profile always serializes")
    }

    fn validate(&self, origin: &str) -> Result<()> {
        if let Some(u) = &self.uncertainty {
            for (family, &spread) in &u.spread {
                if crate::Family::from_name(family).is_none() {
                    return Err(Error::Invalid(format!(
                        "{origin}: [uncertainty.spread] {family}: no such family"
                    )));
                }
                if !(0.0..=10.0).contains(&spread) {
                    return Err(Error::Invalid(format!(
                        "{origin}: [uncertainty.spread] {family} = {spread}: expected a fraction from 0 to 10"
                    )));
                }
            }
        }
        let t = &self.transfer;
        let positive = [
            ("transfer.h2d_pinned.gb_per_s", t.h2d_pinned.gb_per_s),
            ("transfer.d2h_pinned.gb_per_s", t.d2h_pinned.gb_per_s),
            ("transfer.h2d_pageable.host_gb_per_s", t.h2d_pageable.host_gb_per_s),
            ("transfer.d2h_pageable.host_gb_per_s", t.d2h_pageable.host_gb_per_s),
            (
                "transfer.h2d_pageable.staging_bytes",
                t.h2d_pageable.staging_bytes as f64,
            ),
            (
                "transfer.d2h_pageable.staging_bytes",
                t.d2h_pageable.staging_bytes as f64,
            ),
        ];
        let non_negative = [
            ("transfer.kernel_launch_us", t.kernel_launch_us),
            ("transfer.h2d_pinned.latency_us", t.h2d_pinned.latency_us),
            ("transfer.d2h_pinned.latency_us", t.d2h_pinned.latency_us),
            ("transfer.h2d_pageable.latency_us", t.h2d_pageable.latency_us),
            ("transfer.d2h_pageable.latency_us", t.d2h_pageable.latency_us),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::Invalid(format!("{origin}: {name} = {value}: must be positive")));
            }
        }
        for (name, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::Invalid(format!("{origin}: {name} = {value}: must be >= 0")));
            }
        }
        let sm = &self.sm;
        for (name, value) in [
            ("sm.warp_size", sm.warp_size),
            ("sm.max_threads_per_sm", sm.max_threads_per_sm),
            ("sm.max_threads_per_block", sm.max_threads_per_block),
            ("sm.max_blocks_per_sm", sm.max_blocks_per_sm),
            ("sm.registers_per_sm", sm.registers_per_sm),
            ("sm.registers_per_block", sm.registers_per_block),
            ("sm.max_registers_per_thread", sm.max_registers_per_thread),
            ("sm.register_allocation_unit", sm.register_allocation_unit),
            ("sm.sub_partitions", sm.sub_partitions),
            ("sm.shared_bytes_per_sm", sm.shared_bytes_per_sm),
            ("sm.shared_bytes_per_block", sm.shared_bytes_per_block),
            ("sm.shared_allocation_unit", sm.shared_allocation_unit),
        ] {
            if value == 0 {
                return Err(Error::Invalid(format!("{origin}: {name} = 0: must be positive")));
            }
        }
        self.validate_sections(origin)?;
        if self.device.copy_engines == 0 {
            return Err(Error::Invalid(format!(
                "{origin}: device.copy_engines = 0: must be at least 1"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_written_before_the_rename_reads_as_the_same_profile() {
        let text = BUILTIN_PROFILES.iter().find(|p| p.name == "h100").unwrap().text;
        // Section headers only: a source string may name a section too.
        let old = text
            .replace("\n[banks]\n", "\n[shared]\n")
            .replace("\n[coalescing]\n", "\n[global]\n");
        assert_ne!(old, text);
        let builtin = Profile::parse("new", text).unwrap();
        assert_eq!(Profile::parse("old", &old).unwrap().to_toml(), builtin.to_toml());
        assert!(builtin.to_toml().contains("[banks]") && !builtin.to_toml().contains("[shared]"));
        // Old names are checked as the new ones are, and named by their new names.
        let too_many = old.replacen("banks = 32", "banks = 4294967295", 1);
        let err = Profile::parse("old", &too_many).unwrap_err().to_string();
        assert!(
            err.contains("[banks] banks = 4294967295: must be at most 1024"),
            "{err}"
        );
        let parts = crate::calibration_parts("global").unwrap();
        assert_eq!(parts.iter().map(|p| p.name).collect::<Vec<_>>(), ["coalescing"]);
    }

    #[test]
    fn a_profile_from_another_machine_says_so() {
        let builtin = Profile::find("h100").unwrap();
        let why = builtin
            .machine_mismatch()
            .expect("a built-in profile comes from elsewhere");
        assert!(
            why.contains("built in") && why.contains("transfer, growth, migration"),
            "{why}"
        );
        let elsewhere = Profile {
            machine: Some("some-other-host".into()),
            ..builtin.clone()
        };
        assert!(elsewhere
            .machine_mismatch()
            .unwrap()
            .contains("calibrated on some-other-host"));
        if let Some(here) = this_machine() {
            let local = Profile {
                machine: Some(here),
                ..builtin
            };
            assert_eq!(local.machine_mismatch(), None);
        }
    }

    /// Every section, every kind of bad number: one line naming the file, section, key and value.
    #[test]
    fn bad_numbers_anywhere_are_refused_by_name() {
        let text = BUILTIN_PROFILES.iter().find(|p| p.name == "h100").unwrap().text;
        let replace_line = |prefix: &str, new: &str| -> String {
            let mut done = false;
            text.lines()
                .map(|line| {
                    if !done && line.starts_with(prefix) {
                        done = true;
                        new.to_string()
                    } else {
                        line.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        for (prefix, bad, needle) in [
            (
                "sector_bytes =",
                "sector_bytes = 0",
                "[coalescing] sector_bytes = 0: must be positive (and finite)",
            ),
            ("sector_bytes =", "sector_bytes = -0", "[coalescing] sector_bytes = 0"),
            (
                "banks =",
                "banks = 4294967295",
                "[banks] banks = 4294967295: must be at most 1024",
            ),
            (
                "multiprocessors =",
                "multiprocessors = 0",
                "[device] multiprocessors = 0",
            ),
            ("warm_cycles =", "warm_cycles = nan", "[constant] warm_cycles = nan"),
            ("dram_cycles =", "dram_cycles = -8e21", "[latency] dram_cycles = -8"),
            (
                "instruction_ns =",
                "instruction_ns = inf",
                "[spills] instruction_ns = inf",
            ),
            (
                "us_per_gib =",
                "us_per_gib = -1.0",
                "[growth.costs[0]] us_per_gib = -1.0",
            ),
            (
                "gb_per_s = 6.5",
                "gb_per_s = 0.0",
                "[migration.on_demand] gb_per_s = 0.0",
            ),
        ] {
            let broken = replace_line(prefix, bad);
            assert_ne!(broken, text, "{prefix} found");
            let err = Profile::parse("p.toml", &broken).unwrap_err().to_string();
            assert!(
                err.starts_with("p.toml: ") && err.contains(needle) && !err.contains('\n'),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn builtin_profiles_parse_and_round_trip() {
        for name in Profile::builtin_names() {
            let profile = Profile::find(name).unwrap();
            assert_eq!(profile.name, name);
            let again = Profile::parse("again", &profile.to_toml()).unwrap();
            assert_eq!(again, profile);
        }
    }

    #[test]
    fn every_profile_file_is_built_in_and_fully_measured() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let profile = Profile::find(&stem).unwrap_or_else(|e| panic!("{} is not built in: {e}", path.display()));
            assert!(
                profile.banks.is_some()
                    && profile.coalescing.is_some()
                    && profile.latency.is_some()
                    && profile.constant.is_some()
                    && profile.growth.is_some()
                    && profile.spills.is_some()
                    && profile.migration.is_some(),
                "{stem}: a part is missing"
            );
        }
    }

    #[test]
    fn unknown_profile_lists_valid_names() {
        let err = Profile::find("a100").unwrap_err().to_string();
        assert!(err.contains("a100") && err.contains("h100"), "{err}");
    }

    #[test]
    fn rejects_non_physical_parameters() {
        let text = Profile::find("h100").unwrap().to_toml();
        let bad = text.replacen("gb_per_s = ", "gb_per_s = -", 1);
        let err = Profile::parse("bad.toml", &bad).unwrap_err().to_string();
        assert!(err.contains("bad.toml") && err.contains("must be positive"), "{err}");
    }
}
