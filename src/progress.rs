//! A progress bar that appears only once a run has taken more than a second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const SHOW_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: AtomicBool,
}

impl Progress {
    pub(crate) fn new(total: u64, unit: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        let template = format!("{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {unit} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        Progress {
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        }
    }

    pub(crate) fn message(&self, text: &str) {
        self.bar.set_message(text.to_string());
        self.reveal_if_slow();
    }

    pub(crate) fn tick(&self) {
        self.bar.inc(1);
        self.reveal_if_slow();
    }

    fn reveal_if_slow(&self) {
        if self.started.elapsed() > SHOW_AFTER && !self.shown.swap(true, Ordering::Relaxed) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
