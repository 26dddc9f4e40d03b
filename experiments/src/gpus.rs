//! The GPUs a trace, a tune or a sweep may name (`--gpu a100-80gb`): the two built-in device
//! profiles, measured (`h100`, `h200`), and GPUs known from their datasheets alone, with what a
//! trace and a cap need of them (the total memory, the compute capability that PyTorch's choices
//! follow from, the multiprocessors). Each value names its source; what was not measured says so.
//!
//! Memory sizes: GPU makers count memory in binary units. An "80 GB" card has 80 GiB of DRAM
//! (81,920 MiB, as `nvidia-smi` shows it), of which the driver reports a little less as
//! `total_memory` (the H100 80GB: 81,079 MiB, measured). A datasheet's "N GB" is therefore taken
//! here as N GiB, and a `--capacity` in GB as GiB too ([`Capacity::parse`]).

use crate::error::{Error, Result};
use crate::{format_bytes, Profile};

/// A GPU known from its datasheet (no vramlab measurement of it exists).
struct DatasheetGpu {
    /// The name users give (`--gpu`).
    name: &'static str,
    /// As the driver names it (`torch.cuda.get_device_name()`).
    device_name: &'static str,
    /// "major.minor".
    compute_capability: &'static str,
    multiprocessors: u32,
    /// The datasheet's memory, in GiB (see the module's notes on units).
    memory_gib: u64,
    /// Where the memory and the multiprocessors come from.
    source: &'static str,
}

/// Compute capabilities: NVIDIA's table of CUDA GPUs and their compute capability.
const COMPUTE_CAPABILITY_SOURCE: &str = "compute capability: NVIDIA, CUDA GPUs (developer.nvidia.com/cuda-gpus)";

/// Every GPU known from its datasheet, in the order `vramlab list` and the did-you-mean give them.
const DATASHEET_GPUS: &[DatasheetGpu] = &[
    DatasheetGpu {
        name: "a100-80gb",
        device_name: "NVIDIA A100-SXM4-80GB",
        compute_capability: "8.0",
        multiprocessors: 108,
        memory_gib: 80,
        source: "NVIDIA A100 Tensor Core GPU datasheet (80GB HBM2e); 108 SMs: NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 1",
    },
    DatasheetGpu {
        name: "a100-40gb",
        device_name: "NVIDIA A100-SXM4-40GB",
        compute_capability: "8.0",
        multiprocessors: 108,
        memory_gib: 40,
        source: "NVIDIA A100 Tensor Core GPU datasheet (40GB HBM2); 108 SMs: NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 1",
    },
    DatasheetGpu {
        name: "h100-pcie",
        device_name: "NVIDIA H100 PCIe",
        compute_capability: "9.0",
        multiprocessors: 114,
        memory_gib: 80,
        source: "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe (80GB); 114 SMs: NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 'H100 PCIe'",
    },
    DatasheetGpu {
        name: "b200",
        device_name: "NVIDIA B200",
        compute_capability: "10.0",
        multiprocessors: 148,
        memory_gib: 180,
        source: "NVIDIA DGX B200 datasheet (1,440GB of GPU memory over 8 B200: 180GB each); 148 SMs as the driver reports them",
    },
    DatasheetGpu {
        name: "l40s",
        device_name: "NVIDIA L40S",
        compute_capability: "8.9",
        multiprocessors: 142,
        memory_gib: 48,
        source: "NVIDIA L40S datasheet (48GB GDDR6 with ECC; 18,176 CUDA cores, 128 per SM: 142 SMs)",
    },
    DatasheetGpu {
        name: "l4",
        device_name: "NVIDIA L4",
        compute_capability: "8.9",
        multiprocessors: 58,
        memory_gib: 24,
        source: "NVIDIA L4 Tensor Core GPU datasheet (24GB GDDR6; 7,424 CUDA cores, 128 per SM: 58 SMs)",
    },
    DatasheetGpu {
        name: "a10g",
        device_name: "NVIDIA A10G",
        compute_capability: "8.6",
        multiprocessors: 80,
        memory_gib: 24,
        source: "Amazon EC2 G5 instances (NVIDIA A10G, 24GB GDDR6); 80 SMs as the driver reports them",
    },
    DatasheetGpu {
        name: "rtx-4090",
        device_name: "NVIDIA GeForce RTX 4090",
        compute_capability: "8.9",
        multiprocessors: 128,
        memory_gib: 24,
        source: "NVIDIA Ada GPU Architecture whitepaper, table 'GeForce RTX 4090' (128 SMs, 24GB GDDR6X)",
    },
    DatasheetGpu {
        name: "rtx-3090",
        device_name: "NVIDIA GeForce RTX 3090",
        compute_capability: "8.6",
        multiprocessors: 82,
        memory_gib: 24,
        source: "NVIDIA Ampere GA102 GPU Architecture whitepaper, table 'GeForce RTX 3090' (82 SMs, 24GB GDDR6X)",
    },
];

/// The memory the CUDA context takes on a GPU before PyTorch's allocator holds anything, where
/// measured: the H100's, torch 2.11 and CUDA 13.0 (`meminfo.used_after_context` in
/// reports/reference/h100/distributed-x4/*/rank*.json: 554,565,632 bytes on every rank).
pub const CONTEXT_BYTES_MEASURED_H100: u64 = 554_565_632;

/// The L2 size the driver reported when the profile was calibrated: every part calibrated on the
/// GPU that depends on it records it as `l2_bytes` (read here by key, so that no family is named
/// outside its home); None where no such part was calibrated.
fn driver_l2_bytes(profile: &Profile) -> Option<u64> {
    let value = toml::Value::try_from(profile).ok()?;
    value
        .as_table()?
        .values()
        .find_map(|section| section.get("l2_bytes")?.as_integer())
        .and_then(|bytes| u64::try_from(bytes).ok())
}

/// A GPU as a trace, a cap and a sweep see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// The name it was asked by (`h100`, `a100-80gb`, or a profile file's path).
    pub name: String,
    /// As the driver names it.
    pub device_name: String,
    /// "major.minor".
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Total device memory, bytes: measured (`total_memory`) for a profile, the datasheet's
    /// otherwise.
    pub memory_bytes: u64,
    /// Whether vramlab measured this GPU (a device profile), or knows it from datasheets only.
    pub measured: bool,
    /// Where the figures come from.
    pub source: String,
    /// The L2 cache, bytes, as the driver reported it (`cuDeviceGetAttribute`) when the profile's
    /// latency or coalescing part was calibrated; None where it was not measured.
    pub l2_bytes: Option<u64>,
    /// The SM's limits as the driver reported them at calibration; None for a datasheet GPU.
    pub sm: Option<crate::SmParams>,
}

impl Gpu {
    /// The GPU `name` names: a built-in profile, a profile file, or a GPU known from its
    /// datasheet (case, `-`, `_` and spaces ignored: `RTX4090`, `rtx_4090`); an unknown name is
    /// one error line with the nearest names.
    pub fn find(name: &str) -> Result<Gpu> {
        let key = |s: &str| s.to_ascii_lowercase().replace(['-', '_', ' '], "");
        if !(name.contains('/') || name.ends_with(".toml")) {
            if let Some(spec) = DATASHEET_GPUS.iter().find(|g| key(g.name) == key(name)) {
                return Ok(Gpu {
                    name: spec.name.to_string(),
                    device_name: spec.device_name.to_string(),
                    compute_capability: spec.compute_capability.to_string(),
                    multiprocessors: spec.multiprocessors,
                    memory_bytes: spec.memory_gib << 30,
                    measured: false,
                    source: format!("{}; {COMPUTE_CAPABILITY_SOURCE}; not measured by vramlab", spec.source),
                    l2_bytes: None,
                    sm: None,
                });
            }
            if !Profile::builtin_names().iter().any(|p| key(p) == key(name)) {
                return Err(Error::Unknown {
                    kind: "GPU",
                    name: name.to_string(),
                    valid: Gpu::names(),
                });
            }
        }
        let builtin = Profile::builtin_names().into_iter().find(|p| key(p) == key(name));
        let profile = Profile::find(builtin.unwrap_or(name))?;
        Ok(Gpu {
            name: builtin.map_or_else(|| name.to_string(), str::to_string),
            device_name: profile.device.name.clone(),
            compute_capability: profile.device.compute_capability.clone(),
            multiprocessors: profile.device.multiprocessors,
            memory_bytes: profile.device.memory_bytes,
            measured: true,
            source: profile.description.clone(),
            l2_bytes: driver_l2_bytes(&profile),
            sm: Some(profile.sm.clone()),
        })
    }

    /// Every name [`Gpu::find`] knows, datasheet GPUs first where a built-in profile's name is
    /// one letter away (`a100` is nearer `a100-80gb` than `h100`).
    pub fn names() -> Vec<String> {
        let mut names: Vec<String> = DATASHEET_GPUS.iter().take(2).map(|g| g.name.to_string()).collect();
        names.extend(Profile::builtin_names().into_iter().map(str::to_string));
        names.extend(DATASHEET_GPUS.iter().skip(2).map(|g| g.name.to_string()));
        names
    }

    /// What the total memory is and how sure it is, in one sentence.
    pub fn memory_said(&self) -> String {
        if self.measured {
            format!(
                "{} ({}), as the driver reported it on the {}",
                crate::ReplayRecord::format_cap(self.memory_bytes),
                format_bytes(self.memory_bytes),
                self.device_name
            )
        } else {
            format!(
                "{} ({}), the datasheet's {} GB read as GiB; not measured: the driver reports somewhat less (the H100 80GB 81,079 of 81,920 MiB), and less again on GDDR cards with ECC on",
                crate::ReplayRecord::format_cap(self.memory_bytes),
                format_bytes(self.memory_bytes),
                self.memory_bytes >> 30
            )
        }
    }
}

/// A cap as given (`--capacity`): bytes, or a share of a named GPU's memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The cap, bytes.
    pub bytes: u64,
    /// How it was given and what it is, in both units, with what lies outside it: the line
    /// `tune` and `replay` print it back as.
    pub said: String,
}

impl Capacity {
    /// Reads a cap: a size (`"72 GiB"`, `"80GB"`, `"512 MiB"`, bytes), where GB, MB, TB and KB are
    /// read as binary units as GPU memory is counted (an "80 GB" card's memory is 80 GiB, of
    /// which the driver reports a little less); or a share of `gpu`'s total memory: a fraction
    /// (`0.9`) or a percentage (`90%`), as `torch.cuda.set_per_process_memory_fraction` takes it
    /// (`fraction * total_memory`, c10/cuda/CUDACachingAllocator.cpp `setMemoryFraction`).
    pub fn parse(text: &str, gpu: Option<&Gpu>) -> std::result::Result<Capacity, String> {
        let trimmed = text.trim();
        let share = if let Some(percent) = trimmed.strip_suffix('%') {
            let value: f64 = percent
                .trim()
                .parse()
                .map_err(|_| format!("'{text}' is not a percentage"))?;
            Some(value / 100.0)
        } else if trimmed.contains('.') && trimmed.parse::<f64>().is_ok() {
            Some(trimmed.parse::<f64>().unwrap_or(0.0))
        } else {
            None
        };
        if let Some(fraction) = share {
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(format!(
                    "'{text}': a share of the GPU's memory must be more than 0 and at most 1 (100%)"
                ));
            }
            let Some(gpu) = gpu else {
                return Err(format!(
                    "'{text}' is a share of a GPU's memory: name the GPU with --gpu (e.g. --gpu a100-80gb; see `vramlab list`), or give a size (\"72 GiB\")"
                ));
            };
            let bytes = (fraction * gpu.memory_bytes as f64) as u64;
            return Ok(Capacity {
                bytes,
                said: format!(
                    "{}: {} of the {}'s {}",
                    Capacity::both_units(bytes),
                    trimmed,
                    gpu.device_name,
                    gpu.memory_said()
                ) + &Capacity::outside(gpu),
            });
        }
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let binary = match unit.trim().to_ascii_lowercase().as_str() {
            "kb" => Some("KiB"),
            "mb" => Some("MiB"),
            "gb" => Some("GiB"),
            "tb" => Some("TiB"),
            _ => None,
        };
        // A message about the size read in binary units names the text as given.
        let bytes = match binary {
            Some(unit) => crate::parse_bytes(&format!("{number}{unit}"))
                .map_err(|e| e.replace(&format!("'{number}{unit}'"), &format!("'{trimmed}'"))),
            None => crate::parse_bytes(trimmed),
        }?;
        let mut said = format!("{}: as given ({trimmed}", Capacity::both_units(bytes));
        if binary.is_some() {
            said.push_str(", GB read as GiB, as GPU memory is counted");
        }
        said.push(')');
        if let Some(gpu) = gpu {
            if bytes > gpu.memory_bytes {
                said.push_str(&format!(
                    "; more than the {}'s {}: give 100% for all of it",
                    gpu.device_name,
                    gpu.memory_said()
                ));
            }
            said.push_str(&Capacity::outside(gpu));
        } else {
            said.push_str(&Capacity::outside_unnamed());
        }
        Ok(Capacity { bytes, said })
    }

    /// `bytes` in MiB and in GB (10^9 bytes).
    pub fn both_units(bytes: u64) -> String {
        format!(
            "{} = {:.2} GB",
            crate::ReplayRecord::format_cap(bytes),
            bytes as f64 / 1e9
        )
    }

    fn outside(gpu: &Gpu) -> String {
        let measured = if gpu.measured && gpu.device_name.starts_with("NVIDIA H100") {
            format!(
                "{} on this GPU, measured",
                crate::ReplayRecord::format_cap(CONTEXT_BYTES_MEASURED_H100)
            )
        } else {
            format!(
                "{} on an H100, measured; not measured on the {}",
                crate::ReplayRecord::format_cap(CONTEXT_BYTES_MEASURED_H100),
                gpu.device_name
            )
        };
        format!(
            ". The CUDA context ({measured}) and other processes' memory are outside the cap; the whole GPU less the context is --capacity \"{} MiB\"",
            gpu.memory_bytes.saturating_sub(CONTEXT_BYTES_MEASURED_H100) >> 20
        )
    }

    fn outside_unnamed() -> String {
        format!(
            ". The CUDA context ({} on an H100, measured) and other processes' memory are outside the cap: a cap meant as the whole GPU should leave room for them",
            crate::ReplayRecord::format_cap(CONTEXT_BYTES_MEASURED_H100)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gpu_is_found_by_its_name_and_its_loose_spellings() {
        for name in Gpu::names() {
            let gpu = Gpu::find(&name).unwrap();
            assert_eq!(gpu.name, name);
            assert!(gpu.memory_bytes >= 24 << 30, "{name}");
            let (major, _) = gpu.compute_capability.split_once('.').unwrap();
            assert!((8..=10).contains(&major.parse::<u32>().unwrap()), "{name}");
        }
        assert_eq!(Gpu::find("RTX4090").unwrap().name, "rtx-4090");
        assert_eq!(Gpu::find("A100_80GB").unwrap().device_name, "NVIDIA A100-SXM4-80GB");
        assert!(Gpu::find("h100").unwrap().measured);
        assert!(!Gpu::find("h100-pcie").unwrap().measured);
    }

    #[test]
    fn a_profiled_gpu_says_its_l2_and_sm_limits_and_a_datasheet_gpu_does_not() {
        for name in Profile::builtin_names() {
            let gpu = Gpu::find(name).unwrap();
            let profile = Profile::find(name).unwrap();
            // Every built-in profile was calibrated in full, so it says its L2.
            assert!(gpu.l2_bytes.is_some_and(|bytes| bytes > 0), "{name}");
            assert_eq!(gpu.sm.as_ref(), Some(&profile.sm), "{name}");
        }
        // experiments/profiles/h200.toml: cuDeviceGetAttribute's L2 size at calibration.
        assert_eq!(Gpu::find("h200").unwrap().l2_bytes, Some(62_914_560));
        let datasheet = Gpu::find("a100-80gb").unwrap();
        assert!(datasheet.l2_bytes.is_none() && datasheet.sm.is_none());
    }

    #[test]
    fn an_unknown_gpu_is_one_line_with_the_nearest_name() {
        let e = Gpu::find("a100").unwrap_err().to_string();
        assert!(e.starts_with("unknown GPU 'a100' (did you mean 'a100-80gb'?)"), "{e}");
        assert!(e.contains("rtx-4090") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_cap_is_a_size_in_gpu_units_or_a_share_of_a_named_gpu() {
        let a100 = Gpu::find("a100-80gb").unwrap();
        let gib = |n: u64| n << 30;
        assert_eq!(Capacity::parse("80GB", None).unwrap().bytes, gib(80));
        assert_eq!(Capacity::parse("80 GiB", None).unwrap().bytes, gib(80));
        assert_eq!(Capacity::parse("1500 MB", None).unwrap().bytes, 1500 << 20);
        assert_eq!(Capacity::parse("240947481", None).unwrap().bytes, 240_947_481);
        assert_eq!(
            Capacity::parse("90%", Some(&a100)).unwrap().bytes,
            (0.9 * gib(80) as f64) as u64
        );
        assert_eq!(Capacity::parse("0.5", Some(&a100)).unwrap().bytes, gib(40));
        let said = Capacity::parse("90%", Some(&a100)).unwrap().said;
        assert!(
            said.starts_with("73,728 MiB = 77.31 GB: 90% of the NVIDIA A100-SXM4-80GB's 81,920 MiB"),
            "{said}"
        );
        assert!(
            said.contains("CUDA context") && said.contains("outside the cap"),
            "{said}"
        );
        let e = Capacity::parse("0.9", None).unwrap_err();
        assert!(e.contains("--gpu"), "{e}");
        assert!(Capacity::parse("150%", Some(&a100)).is_err());
        assert!(Capacity::parse("0", Some(&a100)).is_ok_and(|c| c.bytes == 0));
        let over = Capacity::parse("80GB", Some(&Gpu::find("h100").unwrap())).unwrap().said;
        assert!(
            over.contains("more than the NVIDIA H100 80GB HBM3's 81,079 MiB"),
            "{over}"
        );
    }

    /// Issue 40: a size refused names the text as given: '-5' was "-5'-5--55-5'..." (the empty
    /// number before '-' replaced at every position) and '1e400' came back as '1e400e400'.
    #[test]
    fn a_refused_capacity_names_the_text_as_given() {
        for (text, said) in [
            ("-5", "'-5' is not a byte size (unknown unit '-5')"),
            ("1e400", "'1e400' is not a byte size (unknown unit 'e400')"),
            (
                "99999999999999999999 GB",
                "'99999999999999999999 GB' is not a byte size (too large)",
            ),
            ("1.5e3 MB", "'1.5e3 MB' is not a byte size (unknown unit 'e3 MB')"),
            ("20000000000 GB", "'20000000000 GB' is more bytes than fit in 64 bits"),
        ] {
            assert_eq!(Capacity::parse(text, None).unwrap_err(), said, "{text}");
        }
    }
}
