//! vramlab's models: predicts experiments from a device profile, with no GPU.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod explain;
mod fit;
mod link;
mod models;
mod solve;

/// Each family's model, fit and teaching view, in `sim/src/<family>.rs`, named as
/// [`experiments::for_each_family!`] lists them.
macro_rules! family_modules {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        $( mod $module; )*
    };
}
experiments::for_each_family!(family_modules);

// What other crates use of the families' models; the rest stays inside.
pub use banks::bank_cycles;
pub use coalescing::{warp_footprint, WarpFootprint};
pub use constant::fit_constant;
pub use occupancy::{occupancy, Limiter, Occupancy};
pub use overlap::{overlapped_us, serial_us};
pub use spills::compiled_spills;

pub use backend::{SimBackend, SimError};
pub use explain::{explain, explain_topics};
pub use fit::{fit_profile, fit_profile_from, sm_params, FitError, SamplesFrom};
pub use link::{fit_link, pinned_copy_us};
pub use models::profile_summary;
