//! Stopping long work from outside: the Python layer asks for it when the user presses Ctrl-C
//! (the work runs without the interpreter's lock, so Python cannot interrupt it itself). Long
//! loops (reading a snapshot, replaying, probing caps) look at the flag every few thousand
//! steps, a few milliseconds apart, and stop with [`Error::Cancelled`](crate::Error::Cancelled).

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every running piece of work to stop.
pub fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Forgets an earlier request (before new work starts).
pub fn clear() {
    REQUESTED.store(false, Ordering::Relaxed);
}

/// `Err(Cancelled)` once a stop was asked for.
pub fn check() -> crate::Result<()> {
    if requested() {
        Err(crate::Error::Cancelled)
    } else {
        Ok(())
    }
}
