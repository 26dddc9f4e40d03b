//! What `vramlab calibrate` measured, before any fitting: the file between the two stages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::DeviceInfo;
use crate::{Family, Sample};

macro_rules! calibration_struct {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// The raw measurements a profile is fitted on.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct Calibration {
            /// The GPU measured.
            pub device: DeviceInfo,
            /// When, as an ISO date (UTC).
            pub date: String,
            /// Pinned uploads (every transfer list is empty when transfers were not measured).
            pub h2d_pinned: Vec<Sample>,
            /// Pinned downloads.
            pub d2h_pinned: Vec<Sample>,
            /// Pageable uploads.
            pub h2d_pageable: Vec<Sample>,
            /// Pageable downloads.
            pub d2h_pageable: Vec<Sample>,
            /// Median time per kernel of a run of back-to-back zero-length kernels, microseconds.
            pub kernel_launch_us: f64,
            /// The SM limits the driver reports (cuDeviceGetAttribute); `None` in samples written
            /// before calibrations recorded them (the transfer-only samples of 2026-11-22, before
            /// the occupancy calculator): a refit then keeps the base profile's (`--into`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub sm: Option<SmAttributes>,
            /// Registers per thread of the global read kernel (its occupancy); 0 when not measured.
            #[serde(default)]
            pub read_kernel_registers: u32,
            /// L2 capacity, bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).
            #[serde(default)]
            pub l2_bytes: u64,
            /// Device memory free when the growth calibration began, bytes; 0 when not measured.
            #[serde(default)]
            pub free_bytes: u64,
            $( $(
                #[doc = concat!("The `", stringify!($module), "` part's samples; empty when not measured.")]
                #[serde(default)]
                pub $module: Vec<$Sample>,
            )? )*
            /// Wall seconds each measured part took, by part name (how long `--part machine` is, and
            /// which part to shorten).
            #[serde(default)]
            pub part_seconds: BTreeMap<String, f64>,
            /// What [`Calibration::from_json`] could not take from samples an earlier calibration
            /// wrote, one line per part, `part: what`: a value not recorded then, or measurements
            /// the current fits cannot use (another experiment's, or lacking cases a fit needs).
            /// Those parts load as not measured, so a refit keeps them from its base (`--into`);
            /// the fitted profile's description lists these lines. Never written.
            #[serde(skip)]
            pub set_aside: Vec<String>,
        }
    };
}
for_each_family!(calibration_struct);

macro_rules! calibration_new {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        impl Calibration {
            /// A calibration of `device` on `date` with nothing measured yet but the device's
            /// attributes.
            pub fn new(device: DeviceInfo, date: String, sm: SmAttributes, l2_bytes: u64) -> Calibration {
                Calibration {
                    device,
                    date,
                    h2d_pinned: Vec::new(),
                    d2h_pinned: Vec::new(),
                    h2d_pageable: Vec::new(),
                    d2h_pageable: Vec::new(),
                    kernel_launch_us: 0.0,
                    sm: Some(sm),
                    read_kernel_registers: 0,
                    l2_bytes,
                    free_bytes: 0,
                    $( $( $module: Vec::<$Sample>::new(), )? )*
                    part_seconds: BTreeMap::new(),
                    set_aside: Vec::new(),
                }
            }
        }
    };
}
for_each_family!(calibration_new);

impl Calibration {
    /// Reads a calibration's JSON (`vramlab calibrate`'s samples file), also one written by an
    /// earlier calibration: the families' former names ([`crate::former_names`]), fields added
    /// since (defaults that mean "not measured"), and parts whose samples the current fits cannot
    /// use, which load as not measured and are named in [`Calibration::set_aside`]. Nothing is
    /// invented: a part is refitted from what the file measured or not at all.
    ///
    /// The earlier samples it reads, and what it makes of them (from the code history of this
    /// file and the families' modules):
    ///
    /// - no `sm` (the transfer-only samples of 2026-11-22, before the occupancy calculator of
    ///   af6e886 recorded the driver's SM attributes): `sm` is `None`, and a refit takes the SM's
    ///   limits from its base.
    /// - no `read_kernel_registers`, `l2_bytes`, `free_bytes`, later parts' lists or `part_seconds`:
    ///   each was added with its part and defaults to "not measured".
    /// - `shared` and `global` lists: the banks and coalescing parts' former names.
    /// - spill samples of `cycles` per iteration (the first spill calibration: one warp, until
    ///   f712bfb of 2026-11-22 made the kernel fill the GPU and timed it in ns per iteration with
    ///   the resident warps counted): another experiment than the model's, set aside.
    /// - latency samples without every footprint of [`crate::latency_calibration_bytes`] (the
    ///   three-footprint ladder of 69946a9 and the six of d6ec550, both 2026-11-22; eight since
    ///   6729823 that day): the fit places each footprint on the ladder, so they are set aside.
    /// - coalescing samples without the read kernel's registers or a case of
    ///   [`crate::coalescing_calibration_cases`] other than those added later as optional (the three
    ///   4-byte cases of 5abb136 and the eight cases of `reports/reference/h100/global-v3/`, both
    ///   2026-11-22, before c97d9c0's nine): set aside.
    pub fn from_json(origin: &str, text: &str) -> crate::Result<Calibration> {
        let invalid = |e: serde_json::Error| crate::Error::Invalid(format!("{origin}: {e}"));
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(invalid)?;
        let mut set_aside = Vec::new();
        if let Some(fields) = value.as_object_mut() {
            for (old, new) in crate::former_names() {
                if let Some(samples) = fields.remove(old) {
                    fields.insert(new.to_string(), samples);
                }
            }
            set_aside.extend(set_aside_raw(fields));
            if !fields.contains_key("sm") {
                set_aside.push("sm: the SM's limits, which calibrations recorded only from the occupancy calculator on (2026-11-22)".to_string());
            }
        }
        let mut calibration: Calibration = serde_json::from_value(value).map_err(invalid)?;
        set_aside.extend(calibration.set_aside_earlier_cases());
        calibration.set_aside = set_aside;
        Ok(calibration)
    }
}

/// What a family's samples, written by an earlier calibration, need before the current fit can
/// use them. Each family's samples type answers in the family's own module; only those whose
/// calibration changed say anything. A part whose samples are set aside loads as not measured.
pub(crate) trait EarlierSamples: Sized {
    /// Takes out, before they are parsed, samples of another experiment than the current one
    /// (leaving an empty list), saying what they were.
    fn set_aside_raw(_samples: &mut serde_json::Value) -> Option<String> {
        None
    }

    /// Empties samples that lack cases the current fit needs (`read_kernel_registers` as the
    /// file recorded it), saying what they lack.
    fn set_aside_parsed(_samples: &mut Vec<Self>, _read_kernel_registers: u32) -> Option<String> {
        None
    }
}

macro_rules! set_aside_earlier {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// Every family's [`EarlierSamples::set_aside_raw`] on the samples file's fields.
        fn set_aside_raw(fields: &mut serde_json::Map<String, serde_json::Value>) -> Vec<String> {
            let mut notes = Vec::new();
            $( $(
                if let Some(samples) = fields.get_mut(stringify!($module)) {
                    notes.extend(<$Sample as EarlierSamples>::set_aside_raw(samples));
                }
            )? )*
            notes
        }

        impl Calibration {
            /// Every family's [`EarlierSamples::set_aside_parsed`].
            fn set_aside_earlier_cases(&mut self) -> Vec<String> {
                let mut notes = Vec::new();
                let registers = self.read_kernel_registers;
                $( $(
                    notes.extend(<$Sample as EarlierSamples>::set_aside_parsed(&mut self.$module, registers));
                )? )*
                notes
            }
        }
    };
}
for_each_family!(set_aside_earlier);

/// SM limits as device attributes; the occupancy rules that are not attributes come from the
/// compute capability (see `sim::fit_profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmAttributes {
    /// CU_DEVICE_ATTRIBUTE_WARP_SIZE
    pub warp_size: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
    pub max_threads_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    pub max_threads_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR
    pub max_blocks_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
    pub registers_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK
    pub registers_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    pub shared_bytes_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
    pub shared_bytes_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    pub shared_bytes_per_block_optin: u32,
    /// CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK
    pub reserved_shared_bytes_per_block: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of `date` holding `fields` besides the device and transfers.
    fn samples(date: &str, fields: &str) -> String {
        let device = r#"{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_bytes": 85017493504,
            "multiprocessors": 132, "copy_engines": 3, "driver_version": "13.0", "clock_mhz": 1980,
            "memory_clock_mhz": 2619, "pci_bus_id": "0000:00:06.0", "stream_ordered_pool": true}"#;
        format!(
            r#"{{"device": {device}, "date": "{date}", "h2d_pinned": [], "d2h_pinned": [], "h2d_pageable": [],
            "d2h_pageable": [], "kernel_launch_us": 0.0{fields}}}"#
        )
    }

    const SM: &str = r#", "sm": {"warp_size": 32, "max_threads_per_sm": 2048, "max_threads_per_block": 1024,
        "max_blocks_per_sm": 32, "registers_per_sm": 65536, "registers_per_block": 65536,
        "shared_bytes_per_sm": 233472, "shared_bytes_per_block": 49152,
        "shared_bytes_per_block_optin": 232448, "reserved_shared_bytes_per_block": 1024}"#;

    #[test]
    fn samples_without_the_sms_limits_load_without_them() {
        let c = Calibration::from_json("old", &samples("2026-11-22", "")).unwrap();
        assert_eq!(c.sm, None);
        assert_eq!(c.set_aside.len(), 1);
        assert!(c.set_aside[0].starts_with("sm: "), "{:?}", c.set_aside);
        // Written again, the file has no `sm` either, and reads back the same.
        let again = Calibration::from_json("again", &serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(again.sm, None);
    }

    #[test]
    fn samples_of_earlier_experiments_and_case_lists_are_set_aside() {
        let first_spills =
            r#", "spills": [{"live": 48, "registers": 255, "registers_used": 62, "local_bytes": 0, "cycles": 51.5}]"#;
        let c = Calibration::from_json("old", &samples("2026-11-22", &format!("{SM}{first_spills}"))).unwrap();
        assert!(c.spills.is_empty() && c.sm.is_some());
        assert!(
            c.set_aside.len() == 1 && c.set_aside[0].starts_with("spills: 1 case"),
            "{:?}",
            c.set_aside
        );

        let ladder = r#", "latency": [{"bytes": 12288, "cycles": 45.9}, {"bytes": 6291456, "cycles": 297.7},
            {"bytes": 805306368, "cycles": 707.6}]"#;
        let c = Calibration::from_json("old", &samples("2026-11-22", &format!("{SM}{ladder}"))).unwrap();
        assert!(c.latency.is_empty());
        assert_eq!(
            c.set_aside,
            ["latency: 3 footprints of an earlier ladder (12 KiB, 6 MiB, 768 MiB), lacking 384 KiB, 28 MiB, 40 MiB, 56 MiB, 80 MiB of the 8 the fit needs"]
        );

        // The nine coalescing cases before the latency-bound L2 case are kept, and the old name
        // of the part read; without the registers they are set aside.
        let cases: Vec<String> = crate::coalescing_calibration_cases()
            .into_iter()
            .filter(|case| !crate::coalescing::CASES_ADDED_LATER.contains(case))
            .map(|(w, s, b)| format!(r#"{{"width": {w}, "stride": {s}, "bytes": {b}, "time_us": 400.0}}"#))
            .collect();
        let nine = format!(r#", "global": [{}]"#, cases.join(", "));
        let kept = Calibration::from_json(
            "nine",
            &samples("2026-11-23", &format!("{SM}, \"read_kernel_registers\": 26{nine}")),
        )
        .unwrap();
        assert!(kept.set_aside.is_empty() && kept.coalescing.len() == 9);
        let unknown_registers = Calibration::from_json("nine", &samples("2026-11-23", &format!("{SM}{nine}"))).unwrap();
        assert!(unknown_registers.coalescing.is_empty());
        assert!(unknown_registers.set_aside[0].ends_with("lacking the read kernel's registers, which the fit needs"));
    }

    #[test]
    fn a_file_that_is_no_calibration_is_one_line_naming_it() {
        let e = Calibration::from_json("x.samples.json", r#"{"date": "2026-11-22"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.samples.json: ") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn part_selections_name_their_parts() {
        let names = |selection: &str| -> Vec<&str> {
            calibration_parts(selection)
                .unwrap_or_default()
                .iter()
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(names("machine"), ["transfer", "growth", "migration"]);
        let all = names("all");
        assert!(all.contains(&"latency") && !all.contains(&"peer"), "{all:?}");
        assert_eq!(names("peer"), ["peer"]);
        assert!(calibration_parts("bogus").is_none());
        // Progress counts every case of every part, not only the copies and banks.
        let cases: usize = calibration_parts("all").unwrap().iter().map(|p| (p.cases)()).sum();
        assert!(cases > 4 * crate::calibration_sizes().len() + crate::bank_calibration_cases().len());
    }
}

/// One part of a profile that `vramlab calibrate --part NAME` measures: the one list the CLI's
/// choices, the progress count and the machine/GPU split are made from.
#[derive(Debug, Clone, Copy)]
pub struct CalibrationPart {
    /// Its name (`--part NAME`) and the profile section it writes.
    pub name: &'static str,
    /// What it measures, for `--help`.
    pub measures: &'static str,
    /// Whether it describes the machine the GPU sits in (host memory, PCIe link, driver) rather
    /// than the GPU model: `--part machine` re-measures these.
    pub machine: bool,
    /// Whether `--part all` measures it (peer needs two GPUs and is asked for by name).
    pub in_all: bool,
    /// How many cases it measures (for progress).
    pub cases: fn() -> usize,
}

/// Every part, in the order `vramlab calibrate` measures them: the families that have one.
pub const CALIBRATION_PARTS: [CalibrationPart; part_count()] = {
    let placeholder = CalibrationPart {
        name: "",
        measures: "",
        machine: false,
        in_all: false,
        cases: || 0,
    };
    let mut parts = [placeholder; part_count()];
    let (mut i, mut n) = (0, 0);
    while i < Family::ALL.len() {
        let row = Family::ALL[i].info();
        if let Some(c) = row.calibration {
            parts[n] = CalibrationPart {
                name: row.name,
                measures: c.measures,
                machine: c.machine,
                in_all: c.in_all,
                cases: c.cases,
            };
            n += 1;
        }
        i += 1;
    }
    parts
};

const fn part_count() -> usize {
    let (mut i, mut n) = (0, 0);
    while i < Family::ALL.len() {
        if Family::ALL[i].info().calibration.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The parts `--part SELECTION` names: `all`, `machine`, or one part's name.
pub fn calibration_parts(selection: &str) -> Option<Vec<&'static CalibrationPart>> {
    let parts: Vec<&CalibrationPart> = match selection {
        "all" => CALIBRATION_PARTS.iter().filter(|p| p.in_all).collect(),
        "machine" => CALIBRATION_PARTS.iter().filter(|p| p.machine).collect(),
        name => {
            // The parts' names before each family had one name in every layer.
            let renamed = Family::ALL.into_iter().find(|f| f.former_name() == Some(name));
            let name: &str = renamed.map_or(name, |f| f.name());
            CALIBRATION_PARTS.iter().filter(|p| p.name == name).collect()
        }
    };
    (!parts.is_empty()).then_some(parts)
}
