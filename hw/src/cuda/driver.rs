//! The driver calls that make, map or move memory pass through [`call`]: one place where tests
//! inject a failure (without making the call) and where live allocations are counted, so a test
//! can walk every error path and check that nothing was left behind.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;

thread_local! {
    /// Guarded calls left before the injected failure (`None`: no injection).
    static FAIL_AFTER: Cell<Option<u32>> = const { Cell::new(None) };
    /// The error an injected failure returns.
    static FAIL_WITH: Cell<CUresult> = const { Cell::new(CUresult::CUDA_ERROR_UNKNOWN) };
}

/// Allocations, mappings and reservations made and not yet freed, in every thread.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Runs the driver call `make`, unless a failure was injected for this call: then it returns
/// the injected error and the call is never made.
pub(super) fn call<T>(make: impl FnOnce() -> Result<T, DriverError>) -> Result<T, DriverError> {
    let injected = FAIL_AFTER.with(|left| match left.get() {
        Some(0) => {
            left.set(None);
            true
        }
        Some(n) => {
            left.set(Some(n - 1));
            false
        }
        None => false,
    });
    if injected {
        return Err(DriverError(FAIL_WITH.with(Cell::get)));
    }
    make()
}

/// Counts one more live allocation (its owner's constructor calls this once it holds it).
pub(super) fn made() {
    LIVE.fetch_add(1, Ordering::Relaxed);
}

/// Counts one allocation fewer (its owner's drop calls this).
pub(super) fn freed() {
    LIVE.fetch_sub(1, Ordering::Relaxed);
}

/// Allocations, mappings and reservations alive now.
#[cfg(test)]
pub(crate) fn live_allocations() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Makes the guarded driver call after `calls` more succeed fail with `error` (on this thread).
#[cfg(test)]
pub(crate) fn fail_after(calls: u32, error: CUresult) {
    FAIL_WITH.with(|e| e.set(error));
    FAIL_AFTER.with(|left| left.set(Some(calls)));
}

/// Whether the injected failure is still waiting (the code ran out of guarded calls first).
#[cfg(test)]
pub(crate) fn injection_pending() -> bool {
    FAIL_AFTER.with(|left| left.take().is_some())
}

/// The driver's code decides what a failure is: running out of memory is an answer, not a fault.
pub(crate) fn is_out_of_memory(error: &DriverError) -> bool {
    error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY
}
