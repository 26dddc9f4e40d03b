//! vramlab's command line, as a library: the `vramlab` binary (src/main.rs) and the Python
//! package's `vramlab` command (`python -m vramlab`) both run [`main`]. Here are the arguments
//! and which command runs; each command that prints much has a module of its own (list, replay
//! and tune, calibrate). The work lives in the crates.

#![forbid(unsafe_code)]

mod calibrate;
mod list;
mod progress;
mod replay;
mod teach;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use experiments::{Backend, Catalog, Experiment, Profile, DEFAULT_PROFILE};
use hw::HwBackend;
use sim::SimBackend;

use crate::progress::Progress;

#[derive(Parser)]
#[command(
    name = "vramlab",
    version,
    about = "A GPU memory testbed: one experiment definition, simulated and measured"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List suites, experiments, families and profiles.
    List,
    /// Run experiments and write records plus a report (default: every suite, in sim).
    Run {
        /// Suites, experiments, or paths to suite files (.toml); `all` or nothing runs every built-in suite.
        targets: Vec<String>,
        /// Where the numbers come from.
        #[arg(long, value_enum, default_value_t = BackendChoice::Sim)]
        backend: BackendChoice,
        /// The GPU whose model predicts: a built-in profile (h100, h200; see `vramlab list`) or a
        /// profile .toml file that `vramlab calibrate` wrote. (`--profile`, its former name, is
        /// still read.)
        #[arg(long = "gpu", alias = "profile", value_name = "NAME|FILE", default_value = DEFAULT_PROFILE)]
        profile: String,
        /// Output folder.
        #[arg(long, default_value = "vramlab-out")]
        out: PathBuf,
        /// Seed for data patterns (and any randomised workload); recorded in every record.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Render report.md, report.html and plots from the records in DIR.
    Report {
        /// A folder written by `vramlab run`.
        dir: PathBuf,
    },
    /// Show, for one case, what the model decides and why (a teaching view).
    Explain {
        /// What to explain (the families with a teaching view).
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(sim::explain_topics()))]
        topic: String,
        /// The case, as name=value pairs (e.g. threads=256 registers=64 dynamic_shared="40 KiB";
        /// width=4 stride=2; distinct=5 cache=cold).
        params: Vec<String>,
        /// The GPU whose model explains: a built-in profile (h100, h200; see `vramlab list`) or a
        /// profile .toml file that `vramlab calibrate` wrote. (`--profile`, its former name, is
        /// still read.)
        #[arg(long = "gpu", alias = "profile", value_name = "NAME|FILE", default_value = DEFAULT_PROFILE)]
        profile: String,
    },
    /// Write the teaching site: one self-contained HTML page per topic (banks, coalescing,
    /// constant, occupancy, latency, transfers, allocator) and an index, opened from disk.
    Teach {
        /// Output folder.
        #[arg(long, default_value = "vramlab-out/teach")]
        out: PathBuf,
        /// A PyTorch memory snapshot (.pickle) for the allocator page instead of the committed
        /// ResNet-18 trace.
        #[arg(long)]
        snapshot: Option<PathBuf>,
        /// The GPU whose models the pages draw: a built-in profile (h100, h200; see `vramlab list`) or a
        /// profile .toml file that `vramlab calibrate` wrote. (`--profile`, its former name, is
        /// still read.)
        #[arg(long = "gpu", alias = "profile", value_name = "NAME|FILE", default_value = DEFAULT_PROFILE)]
        profile: String,
    },
    /// Replay an allocation trace through allocator policies and report memory and speed.
    Replay {
        /// A PyTorch memory snapshot (.pickle), an RMM log (.csv), a vramlab trace (.json), or
        /// synthetic:GENERATOR[:key=value...] (see `vramlab list`).
        trace: String,
        /// Policies, comma-separated, each NAME[:key=value...]; `all` runs every policy. Default:
        /// a PyTorch snapshot's own settings (see --alloc-conf), else `all`.
        #[arg(long)]
        policy: Option<String>,
        /// PyTorch's allocator under this PYTORCH_ALLOC_CONF (repeatable; "" is PyTorch's
        /// defaults), e.g. --alloc-conf "expandable_segments:True" --alloc-conf "max_split_size_mb:128".
        #[arg(long = "alloc-conf", value_name = "SETTINGS", allow_hyphen_values = true)]
        alloc_conf: Vec<String>,
        /// Which device of a multi-GPU snapshot to replay (default: every device with events, each
        /// labelled).
        #[arg(long)]
        device: Option<usize>,
        /// Refuse device memory beyond this (e.g. "2 GiB", "80GB" read as GiB, bytes, or with
        /// --gpu a share of its memory: "90%", "0.9"); for PyTorch's allocator, what
        /// torch.cuda.set_per_process_memory_fraction sets (fraction x device memory).
        #[arg(long, allow_hyphen_values = true)]
        capacity: Option<String>,
        /// The GPU the job runs on (see `vramlab list`): what a share in --capacity is of.
        #[arg(long, value_name = "NAME")]
        gpu: Option<String>,
        /// The PyTorch release whose allocator rules to follow (e.g. 2.15), where the snapshot
        /// does not show it (default: what it shows, else 2.11); a key that release does not
        /// know is refused in PyTorch's words.
        #[arg(long, value_name = "RELEASE")]
        torch: Option<String>,
        /// Simulated bookkeeping, or the same policies over this GPU's memory.
        #[arg(long, value_enum, default_value_t = ReplayBackend::Sim)]
        backend: ReplayBackend,
        /// Print one JSON object with every policy's figures (timelines left out) on stdout.
        #[arg(long)]
        json: bool,
        /// Output folder for replay-<backend>.json, replay.md, replay.html and plots.
        #[arg(long, default_value = "vramlab-out/replay")]
        out: PathBuf,
        /// Seed for synthetic traces.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also write the trace as vramlab trace JSON to this file.
        #[arg(long)]
        save_trace: Option<PathBuf>,
        /// Export the replay for a viewer (repeatable): `perfetto FILE.json` (ui.perfetto.dev,
        /// chrome://tracing) or `snapshot FILE.pickle` (PyTorch's memory_viz; one file per policy,
        /// numbered when there are several).
        #[arg(long, num_args = 2, value_names = ["KIND", "FILE"])]
        export: Vec<String>,
    },
    /// PyTorch's allocator under many PYTORCH_ALLOC_CONF settings at once: which make the
    /// trace fit under --capacity, at what cost; ranked, with plots (sim, in parallel).
    Tune {
        /// A PyTorch memory snapshot (.pickle or .pickle.gz), an RMM log or a vramlab trace.
        trace: String,
        /// The cap to fit under: a size ("2 GiB"; "80GB" is read as GiB, as GPU memory is
        /// counted; or bytes), or with --gpu a share of its memory ("90%", "0.9"), as
        /// torch.cuda.set_per_process_memory_fraction sets it (fraction x device memory); default:
        /// the cap a recorded out-of-memory error implies. The CUDA context is outside it.
        #[arg(long, allow_hyphen_values = true)]
        capacity: Option<String>,
        /// The GPU the job runs on (see `vramlab list`): what a share in --capacity is of.
        #[arg(long, value_name = "NAME")]
        gpu: Option<String>,
        /// Settings to try (repeatable); replaces the default grid of 20 (see `vramlab list`).
        #[arg(long, value_name = "SETTINGS", allow_hyphen_values = true)]
        grid: Vec<String>,
        /// Which device of a multi-GPU snapshot.
        #[arg(long)]
        device: Option<usize>,
        /// The PyTorch release whose allocator rules to follow (e.g. 2.15), where the snapshot
        /// does not show it (default: what it shows, else 2.11); a key that release does not
        /// know is refused in PyTorch's words.
        #[arg(long, value_name = "RELEASE")]
        torch: Option<String>,
        /// Output folder for tune.json, tune.md, tune.html and plots.
        #[arg(long, default_value = "vramlab-out/tune")]
        out: PathBuf,
        /// Print the ranked results as one JSON object on stdout (timelines left out).
        #[arg(long)]
        json: bool,
    },
    /// Measure this GPU and write a device profile (needs a GPU).
    Calibrate {
        /// Profile file to write (default: --into, else profile.toml); the raw samples go
        /// beside it as <stem>.samples.json.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Which parts to measure; the others are kept from --into. `all` (every part but peer),
        /// `machine` (transfer, growth, migration: what a built-in profile cannot know about
        /// this host), or one part.
        #[arg(long, default_value = "all", value_parser = part_names())]
        part: String,
        /// An existing profile whose unmeasured parts the new one keeps (also the default --out).
        #[arg(long)]
        into: Option<PathBuf>,
        /// The profile's name (default: --into's, else "calibrated").
        #[arg(long)]
        name: Option<String>,
        /// Seed for the data patterns copied.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Fit the samples an earlier calibration wrote (its <stem>.samples.json) instead of
        /// measuring: no GPU needed, so a newer model can refit old measurements. --part is
        /// then ignored: the parts are those the samples hold.
        #[arg(long, value_name = "SAMPLES_JSON")]
        from_samples: Option<PathBuf>,
    },
}

/// `--part`'s choices, from the calibration parts' registry.
fn part_names() -> clap::builder::PossibleValuesParser {
    let former = |name: &'static str| experiments::Family::from_name(name).and_then(experiments::Family::former_name);
    let names = ["all", "machine"]
        .into_iter()
        .map(clap::builder::PossibleValue::new)
        .chain(
            experiments::CALIBRATION_PARTS
                .iter()
                .map(move |p| clap::builder::PossibleValue::new(p.name).aliases(former(p.name))),
        );
    clap::builder::PossibleValuesParser::new(names)
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReplayBackend {
    Sim,
    Hw,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    Sim,
    Hw,
    Both,
}

/// What `vramlab list` prints, as one JSON value: suites and their experiments, families,
/// profiles, GPUs, policies, synthetic traces, PyTorch's allocator keys and tune's grid.
pub fn catalogue() -> Result<serde_json::Value> {
    list::catalogue()
}

/// `vramlab teach --out DIR [--snapshot FILE] [--gpu NAME]`: writes the teaching site and
/// gives the pages written (the index first).
pub fn teach_site(out: &Path, snapshot: Option<&Path>, profile: &str) -> Result<Vec<PathBuf>> {
    teach::write_site(out, snapshot, profile)
}

/// `vramlab report DIR`: redraws report.md, report.html and the plots from the records under
/// `dir` (the `--out` folder of a run).
pub fn report_dir(dir: &Path) -> Result<reports::Rendered> {
    if !dir.is_dir() {
        bail!(
            "{}: not a folder (give the --out folder of a `vramlab run`)",
            dir.display()
        );
    }
    Ok(reports::render_report(dir)?)
}

/// Runs the command line `args` (the first is the program's name) and gives its exit status:
/// 0 done, 1 failed (the error said on stderr in one line), 2 bad arguments.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    use clap::error::ErrorKind;
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => err.exit(), // --help, --version
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::InvalidValue | ErrorKind::ValueValidation | ErrorKind::InvalidUtf8
            ) =>
        {
            // An error about a value given is one line, as vramlab's errors about input are.
            let text = err.render().to_string();
            let words: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            eprintln!("{}", experiments::error_line(&words.join(" ")));
            return 2;
        }
        Err(err) => {
            // A usage error (an unknown flag or command, a missing argument, bare `vramlab`):
            // as clap prints it, over several lines with the usage and a tip.
            let _ = err.print();
            return 2;
        }
    };
    let outcome = match cli.command {
        Command::List => list::list(),
        Command::Run {
            targets,
            backend,
            profile,
            out,
            seed,
        } => held(&out).and_then(|_held| run(&targets, backend, &profile, &out, seed)),
        Command::Report { dir } => report(&dir),
        Command::Explain { topic, params, profile } => explain(&topic, &params, &profile),
        Command::Teach { out, snapshot, profile } => {
            held(&out).and_then(|_held| teach::teach(&out, snapshot.as_deref(), &profile))
        }
        Command::Replay {
            trace,
            policy,
            alloc_conf,
            device,
            capacity,
            gpu,
            torch,
            backend,
            json,
            out,
            seed,
            save_trace,
            export,
        } => held(&out).and_then(|_held| {
            replay::replay(&replay::ReplayArgs {
                trace: &trace,
                policy: policy.as_deref(),
                alloc_conf: &alloc_conf,
                device,
                capacity: capacity.as_deref(),
                gpu: gpu.as_deref(),
                torch: torch.as_deref(),
                backend,
                json,
                out: &out,
                seed,
                save_trace: save_trace.as_deref(),
                export: &export,
            })
        }),
        Command::Tune {
            trace,
            capacity,
            gpu,
            grid,
            device,
            torch,
            out,
            json,
        } => held(&out).and_then(|_held| {
            replay::tune(&replay::TuneArgs {
                trace: &trace,
                capacity: capacity.as_deref(),
                gpu: gpu.as_deref(),
                grid: &grid,
                device,
                torch: torch.as_deref(),
                out: &out,
                json,
            })
        }),
        Command::Calibrate {
            out,
            part,
            into,
            name,
            seed,
            from_samples,
        } => match from_samples {
            Some(samples) => calibrate::refit(&samples, out.as_deref(), into.as_deref(), name.as_deref()),
            None => calibrate::calibrate(out.as_deref(), &part, into.as_deref(), name.as_deref(), seed),
        },
    };
    match outcome {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("error: {}", experiments::error_line(&format!("{err:#}")));
            1
        }
    }
}

/// Writes `text` to stdout; a reader that stopped reading (`vramlab list | head`) is not an
/// error, where `print!` would panic.
fn print_to_stdout(text: &str) -> Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

fn run(targets: &[String], choice: BackendChoice, profile: &str, out: &Path, seed: u64) -> Result<()> {
    let (catalog, names) = Catalog::for_targets(targets)?;
    let experiments = catalog.select(&names)?;
    let profile_name = profile;
    let profile = Profile::find(profile)?;
    let mut sim = matches!(choice, BackendChoice::Sim | BackendChoice::Both).then(|| SimBackend::new(profile));
    // Open the GPU before writing anything, so a machine without one fails cleanly.
    let mut hw = match choice {
        BackendChoice::Hw | BackendChoice::Both => Some(HwBackend::open()?),
        BackendChoice::Sim => None,
    };
    if choice == BackendChoice::Both && experiments.iter().any(|e| e.family.uses_machine_parts()) {
        if let Some(why) = sim.as_ref().and_then(|s| s.profile().machine_mismatch()) {
            eprintln!("warning: {why}");
        }
    }
    let backends = usize::from(sim.is_some()) + usize::from(hw.is_some());
    let total: usize = experiments.iter().map(|e| e.points.len()).sum::<usize>() * backends;
    let progress = Progress::new(total as u64, "points");
    for experiment in &experiments {
        progress.message(&experiment.name);
        if let Some(sim) = sim.as_mut() {
            run_one(sim, experiment, seed, out, &progress)?;
        }
        if let Some(hw) = hw.as_mut() {
            run_one(hw, experiment, seed, out, &progress)?;
        }
    }
    progress.finish();
    // The report is this run's: records other runs left in the folder stay out of it, and the
    // user is told (`vramlab report` renders the whole folder).
    let made: Vec<String> = experiments.iter().map(|e| e.name.clone()).collect();
    let others: Vec<String> = reports::Analysis::recorded_in(out)?
        .into_iter()
        .filter(|name| !made.contains(name))
        .collect();
    let rendered = reports::render_report_of(out, &made)?;
    println!(
        "{} experiments -> {} ({} plots); report: {}",
        experiments.len(),
        out.display(),
        rendered.plots.len(),
        rendered.markdown.display()
    );
    // The teaching site, from the same profile: the pages a class opens beside the report.
    let site = out.join("teach");
    // A by-product: a profile the pages cannot use (one without a [banks] section, say) costs
    // the site, not the run.
    match teach::write_site(&site, None, profile_name) {
        Ok(pages) => println!("teaching site: {} pages in {}", pages.len(), site.display()),
        Err(err) => eprintln!(
            "warning: teaching site not written: {}",
            experiments::error_line(&format!("{err:#}"))
        ),
    }
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(5).map(String::as_str).collect();
        eprintln!(
            "note: {} also holds the records of {} experiments this run did not make ({}{}); they are left out of this report (`vramlab report {}` renders them all)",
            out.display(),
            others.len(),
            shown.join(", "),
            if others.len() > shown.len() { ", ..." } else { "" },
            out.display()
        );
    }
    Ok(())
}

fn run_one<B: Backend>(
    backend: &mut B,
    experiment: &Experiment,
    seed: u64,
    out: &Path,
    progress: &Progress,
) -> Result<()> {
    let record = backend
        .run(experiment, seed, &|| progress.tick())
        .with_context(|| format!("experiment '{}' ({})", experiment.name, backend.kind().name()))?;
    record.save(out)?;
    Ok(())
}

fn report(dir: &Path) -> Result<()> {
    // Held only where it is a folder: report_dir refuses anything else, and holding would make one.
    let _held = if dir.is_dir() { Some(held(dir)?) } else { None };
    let rendered = report_dir(dir)?;
    println!(
        "report: {} and {} ({} plots)",
        rendered.markdown.display(),
        rendered.html.display(),
        rendered.plots.len()
    );
    Ok(())
}

/// The output folder `out` named and held for this command (see
/// [`experiments::hold_output_root`]): a second vramlab writing there at once is refused.
fn held(out: &Path) -> Result<experiments::OutputLock> {
    Ok(experiments::hold_output_root(out)?)
}

fn explain(topic: &str, params: &[String], profile: &str) -> Result<()> {
    let profile = Profile::find(profile)?;
    print_to_stdout(&sim::explain(topic, params, &profile)?)
}
