//! vramlab's models: predicts experiments from a device profile, with no GPU.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod explain;
mod fit;
mod link;
mod models;
mod solve;
mod teach;

/// Each family's model, fit and teaching view, in `sim/src/<family>.rs`, named as
/// [`experiments::for_each_family!`] lists them.
macro_rules! family_modules {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        // Each family's `pub` items are what other crates use of it (the rest is `pub(crate)`);
        // a family whose module has none re-exports nothing, which is no mistake.
        $( mod $module; #[allow(unused_imports, unreachable_pub)] pub use $module::*; )*
    };
}
experiments::for_each_family!(family_modules);

pub use backend::{SimBackend, SimError};
pub use explain::{explain, explain_topics};
pub use fit::{fit_profile, fit_profile_from, sm_params, FitError, SamplesFrom};
pub use link::{fit_link, pinned_copy_us};
pub use models::profile_summary;
pub use teach::{teach_pages, Measured};
