//! vramlab's measurements: the same experiments as `sim`, on a CUDA GPU through cudarc.
//!
//! Kernels come from `kernels/*.cu` (compiled at run time with NVRTC). All raw CUDA calls
//! live in one private module; a machine without a GPU gets an error, never a panic.
#![deny(missing_docs)]
// `unsafe` only in the CUDA core (`cuda`), where each block says why it is sound.
#![deny(unsafe_code)]

mod backend;
mod calibrate;
// The one module that calls the driver's raw API (cudarc's `result`/`sys` layers).
#[allow(unsafe_code)]
mod cuda;
mod error;
mod probes;
mod replay;
mod spin;
mod timing;

/// Each family's measurements (its probe, kernels and calibration part), in `hw/src/<family>.rs`,
/// named as [`experiments::for_each_family!`] lists them.
macro_rules! family_modules {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        $( mod $module; )*
    };
}
experiments::for_each_family!(family_modules);

pub use backend::HwBackend;
pub use calibrate::{calibration_steps, measure_calibration, Parts};
pub use cuda::driver_present;
pub use error::{HwError, Result};
pub use replay::{replay_on_gpu, replay_policies_on_gpu};
