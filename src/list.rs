//! `vramlab list`: what there is to run, replay and tune.

use anyhow::Result;
use experiments::{Catalog, Family, Profile, DEFAULT_PROFILE};

use crate::print_to_stdout;

pub(crate) fn list() -> Result<()> {
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
    lines.push(
        "GPUs (vramlab tune/replay --gpu NAME, python -m vramlab.trace --gpu NAME; h100 and h200 measured, the others from datasheets):"
            .to_string(),
    );
    for name in experiments::Gpu::names() {
        let gpu = experiments::Gpu::find(&name)?;
        lines.push(format!(
            "  {:<10} {:<24} compute capability {:<4} {:>7}{}",
            name,
            gpu.device_name,
            gpu.compute_capability,
            experiments::format_bytes(gpu.memory_bytes),
            if gpu.measured { "  (measured)" } else { "" }
        ));
    }
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
    lines.push(format!(
        "  keys: {}",
        experiments::TorchRelease::NEWEST.keys().join(", ")
    ));
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

/// What `vramlab list` prints, as one JSON value (`vramlab.list()` in Python).
pub(crate) fn catalogue() -> Result<serde_json::Value> {
    use serde_json::json;
    let catalog = Catalog::builtin()?;
    let suites: Vec<serde_json::Value> = catalog
        .suites
        .iter()
        .map(|suite| {
            let experiments: Vec<serde_json::Value> = suite
                .experiments
                .iter()
                .map(|e| {
                    json!({"name": e.name, "family": e.family.name(), "points": e.points.len(), "description": e.description})
                })
                .collect();
            json!({"name": suite.name, "description": suite.description, "experiments": experiments})
        })
        .collect();
    let mut gpus = Vec::new();
    for name in experiments::Gpu::names() {
        let gpu = experiments::Gpu::find(&name)?;
        gpus.push(json!({
            "name": name,
            "device_name": gpu.device_name,
            "compute_capability": gpu.compute_capability,
            "memory_bytes": gpu.memory_bytes,
            "measured": gpu.measured,
        }));
    }
    let policies: Vec<serde_json::Value> = experiments::POLICIES
        .iter()
        .map(|p| {
            let params: Vec<serde_json::Value> = p
                .params
                .iter()
                .map(|(key, default, meaning)| json!({"key": key, "default": default, "meaning": meaning}))
                .collect();
            json!({"name": p.name, "summary": p.summary, "params": params})
        })
        .collect();
    let synthetic: Vec<serde_json::Value> = experiments::SYNTHETIC_TRACES
        .iter()
        .map(|g| {
            let params: serde_json::Map<String, serde_json::Value> =
                g.params.iter().map(|(k, v, _)| (k.to_string(), json!(v))).collect();
            json!({"name": g.name, "summary": g.summary, "params": params})
        })
        .collect();
    Ok(json!({
        "suites": suites,
        "families": Family::ALL.map(|f| f.name()),
        "profiles": Profile::builtin_names(),
        "default_profile": DEFAULT_PROFILE,
        "gpus": gpus,
        "backends": ["sim", "hw", "both"],
        "policies": policies,
        "synthetic_traces": synthetic,
        "alloc_conf_keys": experiments::TorchRelease::NEWEST.keys(),
        "tune_grid": allocators::DEFAULT_TUNE_GRID,
    }))
}
