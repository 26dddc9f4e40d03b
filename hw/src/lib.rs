//! vramlab's measurements: the same experiments as `sim`, on a CUDA GPU through cudarc.
//!
//! Kernels come from `kernels/*.cu` (compiled at run time with NVRTC). All raw CUDA calls
//! live in one private module; a machine without a GPU gets an error, never a panic.
#![deny(missing_docs)]

mod backend;
mod banks;
mod calibrate;
mod coalescing;
mod constant;
mod cuda;
mod error;
mod growth;
mod latency;
mod migration;
mod occupancy;
mod overlap;
mod peer;
mod replay;
mod spills;
mod timing;
mod transfer;

pub use backend::HwBackend;
pub use calibrate::{calibration_steps, measure_calibration, Parts};
pub use cuda::driver_present;
pub use error::{HwError, Result};
pub use replay::{replay_on_gpu, replay_policies_on_gpu};
