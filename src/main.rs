//! vramlab's command line: argument parsing and wiring only; the work lives in the crates.

#![forbid(unsafe_code)]

mod progress;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use experiments::{format_bytes, Backend, Catalog, Experiment, Family, Profile, ReplayRecord, Trace, DEFAULT_PROFILE};
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
        /// Device profile for the model: a built-in name or a profile .toml file.
        #[arg(long, default_value = DEFAULT_PROFILE)]
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
        /// Device profile: a built-in name or a profile .toml file.
        #[arg(long, default_value = DEFAULT_PROFILE)]
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
        /// Which device of a multi-GPU snapshot to replay (default: the first with events).
        #[arg(long)]
        device: Option<usize>,
        /// Refuse device memory beyond this many bytes (e.g. "2 GiB"); for PyTorch's allocator,
        /// what torch.cuda.set_per_process_memory_fraction sets (fraction x device memory).
        #[arg(long, allow_hyphen_values = true)]
        capacity: Option<String>,
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
        /// The cap to fit under, as torch.cuda.set_per_process_memory_fraction sets it (bytes).
        #[arg(long, allow_hyphen_values = true)]
        capacity: Option<String>,
        /// Settings to try (repeatable); replaces the default grid of 20 (see `vramlab list`).
        #[arg(long, value_name = "SETTINGS", allow_hyphen_values = true)]
        grid: Vec<String>,
        /// Which device of a multi-GPU snapshot.
        #[arg(long)]
        device: Option<usize>,
        /// Output folder for tune.json, tune.md, tune.html and plots.
        #[arg(long, default_value = "vramlab-out/tune")]
        out: PathBuf,
        /// Print the ranked results as one JSON object on stdout (timelines left out).
        #[arg(long)]
        json: bool,
    },
    /// Measure this GPU and write a device profile (needs a GPU).
    Calibrate {
        /// Profile file to write; the raw samples go beside it as <stem>.samples.json.
        #[arg(long, default_value = "profile.toml")]
        out: PathBuf,
        /// Which parts to measure; the others are kept from --into. `all` (every part but peer),
        /// `machine` (transfer, growth, migration: what a built-in profile cannot know about
        /// this host), or one part.
        #[arg(long, default_value = "all", value_parser = part_names())]
        part: String,
        /// An existing profile whose unmeasured parts the new one keeps (also the default --out).
        #[arg(long)]
        into: Option<PathBuf>,
        /// The profile's name.
        #[arg(long, default_value = "calibrated")]
        name: String,
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => err.exit(), // --help, --version
        Err(err) => {
            // clap words usage errors over several lines; vramlab's errors are one line.
            let text = err.render().to_string();
            let words: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            eprintln!("{}", words.join(" "));
            return ExitCode::from(2);
        }
    };
    let outcome = match cli.command {
        Command::List => list(),
        Command::Run {
            targets,
            backend,
            profile,
            out,
            seed,
        } => {
            experiments::set_output_root(&out);
            run(&targets, backend, &profile, &out, seed)
        }
        Command::Report { dir } => {
            experiments::set_output_root(&dir);
            report(&dir)
        }
        Command::Explain { topic, params, profile } => explain(&topic, &params, &profile),
        Command::Replay {
            trace,
            policy,
            alloc_conf,
            device,
            capacity,
            backend,
            json,
            out,
            seed,
            save_trace,
            export,
        } => {
            experiments::set_output_root(&out);
            replay(&ReplayArgs {
                trace: &trace,
                policy: policy.as_deref(),
                alloc_conf: &alloc_conf,
                device,
                capacity: capacity.as_deref(),
                backend,
                json,
                out: &out,
                seed,
                save_trace: save_trace.as_deref(),
                export: &export,
            })
        }
        Command::Tune {
            trace,
            capacity,
            grid,
            device,
            out,
            json,
        } => {
            experiments::set_output_root(&out);
            tune(&trace, capacity.as_deref(), &grid, device, &out, json)
        }
        Command::Calibrate {
            out,
            part,
            into,
            name,
            seed,
            from_samples,
        } => match from_samples {
            Some(samples) => refit(&samples, &out, into.as_deref(), &name),
            None => calibrate(&out, &part, into.as_deref(), &name, seed),
        },
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", format!("{err:#}").replace('\n', " "));
            ExitCode::FAILURE
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

fn list() -> Result<()> {
    let catalog = Catalog::builtin()?;
    let mut lines = Vec::new();
    lines.push("suites and experiments:".to_string());
    for suite in &catalog.suites {
        lines.push(format!("  {} - {}", suite.name, suite.description));
        for e in &suite.experiments {
            lines.push(format!(
                "    {:<16} {:<9} {:>4} points  {}",
                e.name,
                e.family.name(),
                e.points.len(),
                e.description
            ));
        }
    }
    lines.push(format!("families: {}", Family::ALL.map(|f| f.name()).join(", ")));
    lines.push(format!(
        "profiles: {} (default {DEFAULT_PROFILE}; or a path to a profile .toml)",
        Profile::builtin_names().join(", ")
    ));
    lines.push("backends: sim, hw, both".to_string());
    lines.push("allocator policies (vramlab replay --policy NAME[:key=value...]):".to_string());
    for policy in experiments::POLICIES {
        lines.push(format!("  {:<18} {}", policy.name, policy.summary));
        for (key, default, meaning) in policy.params {
            lines.push(format!("    {key} = {default}: {meaning}"));
        }
    }
    lines.push("synthetic traces (vramlab replay synthetic:NAME[:key=value...] --seed N):".to_string());
    for generator in experiments::SYNTHETIC_TRACES {
        let params: Vec<String> = generator.params.iter().map(|(k, v, _)| format!("{k}={v}")).collect();
        lines.push(format!(
            "  {:<18} {} ({})",
            generator.name,
            generator.summary,
            params.join(", ")
        ));
    }
    lines.push("PyTorch's allocator (vramlab replay --alloc-conf SETTINGS, vramlab tune --grid SETTINGS):".to_string());
    lines.push(format!("  keys: {}", experiments::ALLOC_CONF_KEYS.join(", ")));
    lines.push("  tune's default grid:".to_string());
    for settings in allocators::DEFAULT_TUNE_GRID {
        lines.push(format!(
            "    {}",
            if settings.is_empty() {
                "\"\" (PyTorch's defaults)"
            } else {
                settings
            }
        ));
    }
    lines.push(String::new());
    print_to_stdout(&lines.join("\n"))
}

struct ReplayArgs<'a> {
    trace: &'a str,
    policy: Option<&'a str>,
    alloc_conf: &'a [String],
    device: Option<usize>,
    capacity: Option<&'a str>,
    backend: ReplayBackend,
    json: bool,
    out: &'a Path,
    seed: u64,
    save_trace: Option<&'a Path>,
    export: &'a [String],
}

fn parse_capacity(text: Option<&str>) -> Result<Option<u64>> {
    let capacity = text
        .map(|text| experiments::parse_bytes(text).map_err(|e| anyhow::anyhow!("--capacity: {e}")))
        .transpose()?;
    if capacity == Some(0) {
        bail!("--capacity 0: must be positive");
    }
    Ok(capacity)
}

fn load_trace(text: &str, device: Option<usize>, seed: u64) -> Result<Trace> {
    Ok(if Trace::is_synthetic(text) {
        if device.is_some() {
            bail!("--device applies only to PyTorch snapshots");
        }
        Trace::synthetic(text, seed)?
    } else {
        Trace::load_device(Path::new(text), device).map_err(flag_device)?
    })
}

/// Every device a trace argument holds (one for anything but a multi-device snapshot).
fn load_traces(text: &str, device: Option<usize>, seed: u64) -> Result<Vec<Trace>> {
    if Trace::is_synthetic(text) || device.is_some() {
        return Ok(vec![load_trace(text, device, seed)?]);
    }
    Ok(Trace::load_all(Path::new(text), None)?)
}

/// The library names a device by its index; on the command line it is `--device`.
fn flag_device(e: experiments::Error) -> experiments::Error {
    match e {
        experiments::Error::Invalid(message) => {
            experiments::Error::Invalid(message.replace(": device ", ": --device "))
        }
        other => other,
    }
}

/// The exports asked for, as (kind, file) pairs, checked before any work.
fn parse_exports(export: &[String]) -> Result<Vec<(&str, &Path)>> {
    export
        .chunks(2)
        .map(|pair| match pair[0].as_str() {
            kind @ ("perfetto" | "snapshot") if file_name_of(&pair[1]).is_some() => Ok((kind, Path::new(&pair[1]))),
            kind @ ("perfetto" | "snapshot") => bail!("--export {kind} '{}': not a file name", pair[1]),
            other => bail!("--export {other}: the kinds are perfetto and snapshot"),
        })
        .collect()
}

/// The file name a path ends in, where it ends in one (not empty, `.`, `..` or a `/`).
fn file_name_of(path: &str) -> Option<&std::ffi::OsStr> {
    (!path.is_empty() && !path.ends_with('/'))
        .then(|| Path::new(path).file_name())
        .flatten()
}

/// The files an export writes: one, or for a snapshot of several results one per result,
/// numbered (`x.pickle` -> `x-1.pickle`, `x-2.pickle`).
fn export_files(kind: &str, path: &Path, results: usize) -> Vec<PathBuf> {
    if kind != "snapshot" || results <= 1 {
        return vec![path.to_path_buf()];
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (1..=results)
        .map(|k| path.with_file_name(format!("{stem}-{k}{ext}")))
        .collect()
}

/// Refuses, before anything runs, one path named for two outputs (one would silently
/// overwrite the other): `outputs` are (what, path) pairs.
fn refuse_shared_outputs(outputs: &[(String, PathBuf)]) -> Result<()> {
    let here = std::env::current_dir().unwrap_or_default();
    let normal = |path: &Path| -> PathBuf {
        let mut out = PathBuf::new();
        for part in here.join(path).components() {
            match part {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for (what, path) in outputs {
        let path_n = normal(path);
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == path_n) {
            bail!("{}: named for two outputs ({first} and {what})", path.display());
        }
        seen.push((path_n, what));
    }
    Ok(())
}

/// Writes the exports; what was written is said on stderr when stdout carries JSON.
fn write_exports(exports: &[(&str, &Path)], record: &ReplayRecord, json: bool) -> Result<()> {
    let say = |line: String| if json { eprintln!("{line}") } else { println!("{line}") };
    for &(kind, path) in exports {
        match kind {
            "perfetto" => {
                reports::write_perfetto(path, record)?;
                say(format!("perfetto: {} (open in ui.perfetto.dev)", path.display()));
            }
            _ => {
                let files = export_files(kind, path, record.results.len());
                for (result, file) in record.results.iter().zip(files) {
                    let Some(replayed) = &result.replayed else { continue };
                    let settings = result.policy.strip_prefix("PYTORCH_ALLOC_CONF=");
                    experiments::write_snapshot(&file, replayed, settings)?;
                    say(format!(
                        "snapshot of {}: {} (torch.cuda._memory_viz)",
                        result.policy,
                        file.display()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn replay(args: &ReplayArgs) -> Result<()> {
    let exports = parse_exports(args.export)?;
    let capacity = parse_capacity(args.capacity)?;
    let traces = load_traces(args.trace, args.device, args.seed)?;
    let trace = traces
        .iter()
        .find(|t| !t.is_empty())
        .context("the trace has no events to replay")?;
    let jobs = allocators::choose_policies(trace, args.policy, args.alloc_conf)?;
    let backend = match args.backend {
        ReplayBackend::Sim => "sim",
        ReplayBackend::Hw => "hw",
    };
    let mut outputs: Vec<(String, PathBuf)> = vec![
        ("the record".into(), args.out.join(format!("replay-{backend}.json"))),
        ("the report".into(), args.out.join("replay.md")),
        ("the report".into(), args.out.join("replay.html")),
    ];
    if let Some(path) = args.save_trace {
        if file_name_of(&path.to_string_lossy()).is_none() {
            bail!("--save-trace '{}': not a file name", path.display());
        }
        outputs.push(("--save-trace".into(), path.to_path_buf()));
    }
    for &(kind, path) in &exports {
        for file in export_files(kind, path, jobs.len()) {
            outputs.push((format!("--export {kind}"), file));
        }
    }
    refuse_shared_outputs(&outputs)?;
    if let Some(path) = args.save_trace {
        trace.save(path)?;
    }
    if trace.warnings.count > 0 && !args.json {
        eprintln!(
            "warning: {} events of {} skipped; first: {}",
            trace.warnings.count,
            trace.name,
            trace.warnings.examples.first().map_or("", String::as_str)
        );
        if let Some(lost) = trace.warnings.lost_start() {
            eprintln!("warning: {lost}");
        }
    }
    let progress = Progress::new(jobs.len() as u64, "policies");
    // The exports want every operation and a finer timeline; both backends replay alike.
    let options = allocators::ReplayOptions {
        capacity,
        record_events: !exports.is_empty(),
        timeline_points: if exports.is_empty() { 2000 } else { 20_000 },
        ..allocators::ReplayOptions::default()
    };
    let record = match args.backend {
        ReplayBackend::Sim => {
            // The built-in profile's device sizes the address range expandable segments reserve.
            let device_bytes = Profile::find(DEFAULT_PROFILE)?.device.memory_bytes;
            progress.message("replaying");
            let record =
                allocators::replay_devices(&traces, args.policy, args.alloc_conf, capacity, device_bytes, options)?;
            jobs.iter().for_each(|_| progress.tick());
            record
        }
        ReplayBackend::Hw => {
            let policies = jobs.iter().map(|job| (job.label(), job.build())).collect();
            hw::replay_policies_on_gpu(trace, policies, options, &|label| {
                progress.message(label);
                progress.tick();
            })?
        }
    };
    progress.finish();
    record.save(&args.out.join(format!("replay-{backend}.json")))?;
    write_exports(&exports, &record, args.json)?;
    let rendered = reports::render_replay(args.out)?;
    // To stderr, so --json stays one document; the trace is streamed, so this is what the
    // replay itself held.
    eprintln!(
        "replay: {} events; this process's peak memory {}",
        record.events,
        peak_memory()
    );
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&record.summary_json()).context("serialising the replay")?
        );
        return Ok(());
    }
    let devices = if record.devices.is_empty() {
        std::slice::from_ref(&record)
    } else {
        &record.devices[..]
    };
    for device in devices {
        print_replay(device, !record.devices.is_empty());
    }
    println!("replay: {}", rendered.markdown.display());
    Ok(())
}

/// One device's replay, as a table and the sentences that go with it.
fn print_replay(record: &ReplayRecord, label: bool) {
    if label {
        println!("\ndevice {}: {} events", record.device_index, record.events);
    }
    if let Some(start) = &record.start {
        println!(
            "window: began with {} reserved in {} segments, {} allocated in {} live blocks",
            format_bytes(start.reserved_bytes),
            start.segments,
            format_bytes(start.allocated_bytes),
            start.live_blocks
        );
    }
    if let (Some(cap), Some(source)) = (record.capacity_bytes, &record.capacity_source) {
        println!("cap {}: {source}", format_bytes(cap));
    }
    if !record.results.is_empty() {
        let width = record.results.iter().map(|r| r.policy.len()).max().unwrap_or(0).max(22);
        println!(
            "{:<width$} {:>14} {:>14} {:>8} {:>8} {:>14} {:>12}",
            "policy", "peak reserved", "peak alloc'd", "frag", "failed", "min capacity", "a+f p50 ns"
        );
    }
    for r in &record.results {
        let width = record.results.iter().map(|r| r.policy.len()).max().unwrap_or(0).max(22);
        println!(
            "{:<width$} {:>14} {:>14} {:>7.1}% {:>8} {:>14} {:>12.0}",
            r.policy,
            format_bytes(r.peak_reserved_bytes),
            format_bytes(r.peak_allocated_bytes),
            r.fragmentation_at_peak * 100.0,
            r.failed_allocs,
            r.min_capacity_bytes.map_or("-".to_string(), format_bytes),
            r.alloc_free_ns_p50
        );
    }
    for r in &record.results {
        if let Some(stats) = &r.pytorch_stats {
            println!(
                "{}: retries {}, out of memory {}, device allocations {}, frees {}",
                r.policy, stats.num_alloc_retries, stats.num_ooms, stats.num_device_alloc, stats.num_device_free
            );
        }
        if !r.recorded_check.is_what_if() {
            println!("{}: against the recording: {}", r.policy, r.recorded_check.summary);
        }
    }
    for note in &record.notes {
        println!("note: {note}");
    }
}

fn tune(
    trace_arg: &str,
    capacity: Option<&str>,
    grid: &[String],
    device: Option<usize>,
    out: &Path,
    json: bool,
) -> Result<()> {
    let capacity = parse_capacity(capacity)?;
    let trace = load_trace(trace_arg, device, 0)?;
    let device_bytes = Profile::find(DEFAULT_PROFILE)?.device.memory_bytes;
    let record = allocators::tune_record(&trace, grid, capacity, device_bytes)?;
    record.save(&out.join("tune.json"))?;
    let rendered = reports::render_tune(out)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&record.summary_json()).context("serialising the tune")?
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = record
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| reports::tune_row(i + 1, r, capacity))
        .collect();
    let widths: Vec<usize> = (0..reports::TUNE_HEADER.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([reports::TUNE_HEADER[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(reports::TUNE_HEADER.to_vec()));
    for row in &rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
    // The verdicts and the post-mortem, as tune.json, tune.md and tune.html hold them.
    println!();
    for line in record.tune_lines() {
        println!("{line}");
    }
    println!("tune: {}", rendered.markdown.display());
    eprintln!("tune: this process's peak memory {}", peak_memory());
    Ok(())
}

/// This process's peak resident memory (Linux's VmHWM), or "not known" where the kernel does not
/// say.
fn peak_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(experiments::format_bytes(kib * 1024))
        })
        .unwrap_or_else(|| "not known".to_string())
}

fn run(targets: &[String], choice: BackendChoice, profile: &str, out: &Path, seed: u64) -> Result<()> {
    let (catalog, names) = Catalog::for_targets(targets)?;
    let experiments = catalog.select(&names)?;
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
    let rendered = reports::render_report(out)?;
    println!(
        "{} experiments -> {} ({} plots); report: {}",
        experiments.len(),
        out.display(),
        rendered.plots.len(),
        rendered.markdown.display()
    );
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
    if !dir.is_dir() {
        bail!(
            "{}: not a folder (give the --out folder of a `vramlab run`)",
            dir.display()
        );
    }
    let rendered = reports::render_report(dir)?;
    println!(
        "report: {} and {} ({} plots)",
        rendered.markdown.display(),
        rendered.html.display(),
        rendered.plots.len()
    );
    Ok(())
}

fn explain(topic: &str, params: &[String], profile: &str) -> Result<()> {
    let profile = Profile::find(profile)?;
    print_to_stdout(&sim::explain(topic, params, &profile)?)
}

/// The profile `--into` names (if any), where the new one goes, and its name: `--out` defaults
/// to `--into`, the name to `--into`'s.
fn calibration_target<'a>(
    out: &'a Path,
    into: Option<&'a Path>,
    name: &'a str,
) -> Result<(Option<Profile>, &'a Path, String)> {
    let base = into.map(|p| Profile::find(&p.display().to_string())).transpose()?;
    let out = match into {
        Some(into) if out == Path::new("profile.toml") => into,
        _ => out,
    };
    let name = base
        .as_ref()
        .map(|b| b.name.clone())
        .filter(|_| name == "calibrated")
        .unwrap_or_else(|| name.to_string());
    Ok((base, out, name))
}

/// Writes the fitted profile and says what it holds.
fn write_profile(profile: &Profile, out: &Path) -> Result<()> {
    experiments::write_atomically(out, profile.to_toml().as_bytes())?;
    println!("{}: {}", out.display(), profile.description);
    for line in sim::profile_summary(profile) {
        println!("  {line}");
    }
    Ok(())
}

/// `calibrate --from-samples`: the fit alone, on samples measured before.
fn refit(samples: &Path, out: &Path, into: Option<&Path>, name: &str) -> Result<()> {
    let (base, out, name) = calibration_target(out, into, name)?;
    let text = experiments::read_input_text(samples)?;
    let calibration = experiments::Calibration::from_json(&samples.display().to_string(), &text)?;
    let mut profile = sim::fit_profile(&name, &calibration, base.as_ref())?;
    // Machine parts fitted from samples come from a host the samples do not name (older
    // samples do not say which parts they measured: assume they did).
    let measured = &calibration.part_seconds;
    if measured.is_empty()
        || experiments::machine_parts()
            .iter()
            .any(|part| measured.contains_key(*part))
    {
        profile.machine = None;
    }
    write_profile(&profile, out)?;
    println!("  fitted from {}", samples.display());
    Ok(())
}

fn calibrate(out: &Path, part: &str, into: Option<&Path>, name: &str, seed: u64) -> Result<()> {
    let (base, out, name) = calibration_target(out, into, name)?;
    let name = name.as_str();
    let parts = hw::Parts::select(part).with_context(|| format!("--part {part}: no such part"))?;
    let progress = Progress::new(hw::calibration_steps(&parts), "cases");
    // With VRAMLAB_CASE_SECONDS set, each case's wall time goes to stderr: where a calibration's
    // time goes, for deciding what a quicker one may measure less of.
    let trace_cases = std::env::var_os("VRAMLAB_CASE_SECONDS").is_some();
    let (case, case_started) = (
        std::cell::Cell::new(0u64),
        std::cell::Cell::new(std::time::Instant::now()),
    );
    let calibration = hw::measure_calibration(&parts, seed, &|| {
        progress.tick();
        if trace_cases {
            case.set(case.get() + 1);
            eprintln!(
                "case {} {:.3} s",
                case.get(),
                case_started.get().elapsed().as_secs_f64()
            );
            case_started.set(std::time::Instant::now());
        }
    })?;
    progress.finish();
    let samples = out.with_extension("samples.json");
    let json = serde_json::to_vec_pretty(&calibration).context("serialising the calibration samples")?;
    experiments::write_atomically(&samples, &json)?;
    let mut profile = sim::fit_profile(name, &calibration, base.as_ref())?;
    if experiments::machine_parts().iter().any(|name| parts.has(name)) {
        profile.machine = experiments::this_machine();
    }
    write_profile(&profile, out)?;
    println!("  samples in {}", samples.display());
    let timings: Vec<String> = calibration
        .part_seconds
        .iter()
        .map(|(part, seconds)| format!("{part} {seconds:.1} s"))
        .collect();
    println!("  measured in {}", timings.join(", "));
    Ok(())
}
