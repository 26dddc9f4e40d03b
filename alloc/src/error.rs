//! What can go wrong replaying a trace, sorted by whose fault it is.

/// A backend's own failure around an operation (for `hw`: a CUDA call, a kernel launch, the
/// check that blocks never overlap), kept as the backend's error so that its caller can tell it
/// apart from a bad trace.
pub type BackendError = Box<dyn std::error::Error + Send + Sync>;

/// What can go wrong replaying a trace.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The trace, a policy's settings or a file, as `experiments` words it; also a cancel.
    #[error(transparent)]
    Input(#[from] experiments::Error),
    /// The backend failed around an operation.
    #[error("{policy}: event {event}: {source}")]
    Backend {
        /// The policy, as results name it.
        policy: String,
        /// The trace event being replayed (the number of events: after the last).
        event: usize,
        /// The backend's error.
        source: BackendError,
    },
}

impl Error {
    /// Whether the work stopped because the caller asked it to.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Input(experiments::Error::Cancelled))
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
