//! `vramlab replay` and `vramlab tune`: the front's calls (`allocators::Replay`), the outputs
//! checked before any work, and what is printed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use experiments::Trace;

use crate::progress::Progress;
use crate::ReplayBackend;

pub(crate) struct ReplayArgs<'a> {
    pub(crate) trace: &'a str,
    pub(crate) policy: Option<&'a str>,
    pub(crate) alloc_conf: &'a [String],
    pub(crate) device: Option<usize>,
    pub(crate) capacity: Option<&'a str>,
    pub(crate) gpu: Option<&'a str>,
    pub(crate) torch: Option<&'a str>,
    pub(crate) backend: ReplayBackend,
    pub(crate) json: bool,
    pub(crate) out: &'a Path,
    pub(crate) seed: u64,
    pub(crate) save_trace: Option<&'a Path>,
    pub(crate) export: &'a [String],
}

pub(crate) struct TuneArgs<'a> {
    pub(crate) trace: &'a str,
    pub(crate) capacity: Option<&'a str>,
    pub(crate) gpu: Option<&'a str>,
    pub(crate) grid: &'a [String],
    pub(crate) device: Option<usize>,
    pub(crate) torch: Option<&'a str>,
    pub(crate) out: &'a Path,
    pub(crate) json: bool,
}

/// `--capacity` with `--gpu`: the cap, and how it reads back (both units, what it is a share
/// of, what lies outside it).
fn parse_capacity(
    text: Option<&str>,
    gpu: Option<&str>,
) -> Result<(Option<experiments::Capacity>, Option<experiments::Gpu>)> {
    let gpu = gpu
        .map(|name| experiments::Gpu::find(name).map_err(|e| anyhow::anyhow!("--gpu: {e}")))
        .transpose()?;
    let capacity = text
        .map(|text| experiments::Capacity::parse(text, gpu.as_ref()).map_err(|e| anyhow::anyhow!("--capacity: {e}")))
        .transpose()?;
    Ok((capacity, gpu))
}

/// The replay front for a TRACE argument, its errors worded with the CLI's flags.
fn load_replay(
    text: &str,
    device: Option<usize>,
    seed: u64,
    capacity: Option<&experiments::Capacity>,
    gpu: Option<&experiments::Gpu>,
    torch: Option<&str>,
) -> Result<allocators::Replay> {
    let front = Trace::load_input(text, device, seed)
        .map_err(allocators::Error::from)
        .and_then(|traces| {
            allocators::Replay::new(traces, device)?
                .device_bytes(gpu.map(|g| g.memory_bytes))
                .capacity(capacity.map(|c| c.bytes))?
                .torch(torch)
        });
    front.map_err(|e| {
        // The library names a device by its index and the cap as such; here they are flags.
        let message = e
            .to_string()
            .replace(": device ", ": --device ")
            .replace("capacity 0", "--capacity 0");
        anyhow::anyhow!(message)
    })
}

pub(crate) fn replay(args: &ReplayArgs) -> Result<()> {
    let exports = args
        .export
        .chunks(2)
        .map(|pair| reports::Export::parse(&pair[0], &pair[1]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--{e}"))?;
    let (capacity, gpu) = parse_capacity(args.capacity, args.gpu)?;
    let front = load_replay(
        args.trace,
        args.device,
        args.seed,
        capacity.as_ref(),
        gpu.as_ref(),
        args.torch,
    )?
    .policies(args.policy, args.alloc_conf)
    .keep_events(!exports.is_empty());
    let trace = front.trace();
    let jobs = front.choices()?;
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
        if reports::file_name_of(&path.to_string_lossy()).is_none() {
            bail!("--save-trace '{}': not a file name", path.display());
        }
        outputs.push(("--save-trace".into(), path.to_path_buf()));
    }
    for export in &exports {
        let flag = format!("--export {}", export.kind.name());
        outputs.extend(export.files(jobs.len()).into_iter().map(|file| (flag.clone(), file)));
    }
    experiments::refuse_shared_outputs(&outputs)?;
    if let Some(path) = args.save_trace {
        trace.save(path)?;
    }
    if trace.warnings.count > 0 && !args.json {
        // The trace's name is the user's file name: escaped with the rest (an escape sequence
        // or a U+2028 in it would reach the terminal).
        eprintln!(
            "{}",
            experiments::error_line(&format!(
                "warning: {} events of {} skipped or contradicting the rest; first: {}",
                trace.warnings.count,
                trace.name,
                trace.warnings.examples.first().map_or("", String::as_str)
            ))
        );
        if let Some(lost) = trace.warnings.lost_start() {
            eprintln!("{}", experiments::error_line(&format!("warning: {lost}")));
        }
    }
    let progress = Progress::new(jobs.len() as u64, "policies");
    let record = match args.backend {
        ReplayBackend::Sim => {
            progress.message("replaying");
            let record = front.run()?;
            jobs.iter().for_each(|_| progress.tick());
            record
        }
        ReplayBackend::Hw => {
            let policies = jobs.iter().map(|job| (job.label(), job.build())).collect();
            hw::replay_policies_on_gpu(trace, policies, front.options(), &|label| {
                progress.message(label);
                progress.tick();
            })?
        }
    };
    progress.finish();
    let mut record = record;
    if let Some(capacity) = &capacity {
        record.capacity_source = Some(capacity.said.clone());
    }
    record.save(&args.out.join(format!("replay-{backend}.json")))?;
    for export in &exports {
        for line in export.write(&record)? {
            // On stderr when stdout carries JSON.
            if args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
    }
    let rendered = reports::render_replay(args.out)?;
    // To stderr, so --json stays one document; the trace is streamed, so this is what the
    // replay itself held.
    eprintln!("replay: {} events; {}", record.events, own_memory());
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&record.summary_json()).context("serialising the replay")?
        );
        return Ok(());
    }
    println!("{}", experiments::terminal_text(&reports::replay_text(&record)));
    println!("replay: {}", rendered.markdown.display());
    Ok(())
}

pub(crate) fn tune(args: &TuneArgs) -> Result<()> {
    let (out, json) = (args.out, args.json);
    let (capacity, gpu) = parse_capacity(args.capacity, args.gpu)?;
    let mut record =
        load_replay(args.trace, args.device, 0, capacity.as_ref(), gpu.as_ref(), args.torch)?.tune(args.grid)?;
    if let Some(capacity) = &capacity {
        record.capacity_source = Some(capacity.said.clone());
    }
    record.save(&out.join("tune.json"))?;
    let rendered = reports::render_tune(out)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&record.summary_json()).context("serialising the tune")?
        );
        return Ok(());
    }
    // The answer is the last line: what was written, and vramlab's own cost, come first.
    println!("tune: {} (and tune.html, plots/)", rendered.markdown.display());
    eprintln!("tune: {}", own_memory());
    println!();
    println!("{}", experiments::terminal_text(&reports::tune_text(&record)));
    Ok(())
}

/// What vramlab itself held in host memory, said so that it is not read as a figure of the job:
/// "vramlab's own host memory at its peak (RSS): 65.83 MiB, not the GPU's".
pub(crate) fn own_memory() -> String {
    format!(
        "vramlab's own host memory at its peak (resident set): {}; a cost of this command, not a figure of the job or the GPU",
        peak_memory()
    )
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
