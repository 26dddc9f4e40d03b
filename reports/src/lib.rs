//! vramlab's reports: join predicted and measured points, compute the model's error, draw
//! plots (PNG and SVG) and write report.md and report.html.
//!
//! Two stages that talk through a file, as criterion's do: [`Analysis::from_dir`] reads the
//! records and writes `analysis.json`; [`render`] draws from an analysis alone.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod analysis;
mod chart;
mod document;
mod error;
mod export_perfetto;
mod exports;
mod names;
mod plot_agreement;
mod plot_caps;
mod plot_error;
mod plot_peaks;
mod plot_sweep;
mod plot_timeline;
mod render;
mod replay_render;
mod teach;
mod terminal;
mod tune_render;

pub use analysis::{
    join, Analysis, ComparedPoint, ErrorStats, ExperimentAnalysis, GroupStats, HoldoutCommits, PointGroup,
};
pub use error::{ReportError, Result};
pub use export_perfetto::{perfetto_json, write_perfetto};
pub use exports::{file_name_of, Export, ExportKind};
pub use render::{render, render_report, render_report_of, Rendered};
pub use replay_render::render_replay;
pub use teach::{teach_index_html, teach_page_html, write_teach_site};
pub use terminal::{replay_text, tune_text};
pub use tune_render::{render_tune, setting_of, tune_row, TUNE_HEADER};
