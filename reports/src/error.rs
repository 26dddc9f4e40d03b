use std::path::PathBuf;

/// What can go wrong building a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A record or analysis file could not be read or written.
    #[error(transparent)]
    Files(#[from] experiments::Error),
    /// A run folder holds no records.
    #[error("{}: no records found (expected <experiment>/sim.json or hw.json); run `vramlab run` first", .0.display())]
    Empty(PathBuf),
    /// Drawing a plot failed.
    #[error("{}: could not draw plot: {message}", path.display())]
    Plot {
        /// The plot file.
        path: PathBuf,
        /// plotters' message.
        message: String,
    },
}

/// The result type of this crate.
pub type Result<T, E = ReportError> = std::result::Result<T, E>;
