//! vramlab's models: predicts experiments from a device profile, with no GPU.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod banks;
mod coalescing;
mod constant;
mod explain;
mod fit;
mod growth;
mod latency;
mod occupancy;
mod overlap;
mod pcie;
mod spills;

pub use backend::{SimBackend, SimError};
pub use banks::{bank_access, bank_cycles, bank_wavefronts, BankAccess};
pub use coalescing::{pass_traffic, read_time, warp_footprint, ReadTime, WarpFootprint};
pub use constant::constant_cycles;
pub use explain::{explain, explain_banks, explain_coalescing, explain_constant, explain_occupancy, EXPLAIN_TOPICS};
pub use fit::{
    fit_constant, fit_global, fit_growth, fit_latency, fit_link, fit_profile, fit_shared, fit_spills, fit_staged,
    sm_params, FitError, GlobalMachine,
};
pub use growth::{predict_growth, GrowthPrediction};
pub use latency::{chase_cycles, level_shares};
pub use occupancy::{occupancy, Limiter, Occupancy};
pub use overlap::{overlapped_us, serial_us};
pub use pcie::{copy_us, pageable_copy_us, pinned_copy_us};
pub use spills::{compiled_spills, predict_spills, SpillPrediction};
