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
            /// The SM limits the driver reports (cuDeviceGetAttribute).
            pub sm: SmAttributes,
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
                    sm,
                    read_kernel_registers: 0,
                    l2_bytes,
                    free_bytes: 0,
                    $( $( $module: Vec::<$Sample>::new(), )? )*
                    part_seconds: BTreeMap::new(),
                }
            }
        }
    };
}
for_each_family!(calibration_new);

impl Calibration {
    /// Reads a calibration's JSON (`vramlab calibrate`'s samples file), also one written before
    /// each family had one name in every layer ([`crate::former_names`]).
    pub fn from_json(origin: &str, text: &str) -> crate::Result<Calibration> {
        let invalid = |e: serde_json::Error| crate::Error::Invalid(format!("{origin}: {e}"));
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(invalid)?;
        if let Some(fields) = value.as_object_mut() {
            for (old, new) in crate::former_names() {
                if let Some(samples) = fields.remove(old) {
                    fields.insert(new.to_string(), samples);
                }
            }
        }
        serde_json::from_value(value).map_err(invalid)
    }
}

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
