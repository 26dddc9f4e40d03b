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
mod migration;
mod occupancy;
mod overlap;
mod peer;
mod solve;
mod spills;
mod transfer;

pub use backend::{SimBackend, SimError};
pub use banks::{bank_access, bank_cycles, bank_wavefronts, explain_banks, fit_banks, BankAccess};
pub use coalescing::{
    explain_coalescing, fit_coalescing, pass_traffic, read_time, warp_footprint, CoalescingMachine, ReadTime,
    WarpFootprint,
};
pub use constant::{constant_cycles, explain_constant, fit_constant};
pub use explain::{explain, EXPLAIN_TOPICS};
pub use fit::{fit_profile, sm_params, FitError};
pub use growth::{fit_growth, predict_growth, GrowthPrediction};
pub use latency::{chase_cycles, fit_latency, level_shares};
pub use migration::{fit_migration, migration_us};
pub use occupancy::{explain_occupancy, occupancy, Limiter, Occupancy};
pub use overlap::{overlapped_us, serial_us};
pub use peer::{fit_peer, peer_us};
pub use spills::{compiled_spills, fit_spills, predict_spills, SpillPrediction};
pub use transfer::{copy_us, fit_link, fit_staged, pageable_copy_us, pinned_copy_us};
