//! `vramlab calibrate`: measuring (`hw`), fitting (`sim`), and saying what the profile holds.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use experiments::Profile;

use crate::progress::Progress;

/// The profile `--into` names (if any), where the new one goes, and its name: `--out`
/// defaults to `--into`, then to `profile.toml`; the name to `--into`'s, then to `calibrated`.
fn calibration_target(
    out: Option<&Path>,
    into: Option<&Path>,
    name: Option<&str>,
) -> Result<(Option<Profile>, PathBuf, String)> {
    let base = into.map(|p| Profile::find(&p.display().to_string())).transpose()?;
    let out = out.or(into).unwrap_or(Path::new("profile.toml")).to_path_buf();
    let name = name
        .map(str::to_string)
        .or_else(|| base.as_ref().map(|b| b.name.clone()))
        .unwrap_or_else(|| "calibrated".to_string());
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
pub(crate) fn refit(samples: &Path, out: Option<&Path>, into: Option<&Path>, name: Option<&str>) -> Result<()> {
    let (base, out, name) = calibration_target(out, into, name)?;
    let text = experiments::read_input_text(samples)?;
    let calibration = experiments::Calibration::from_json(&samples.display().to_string(), &text)?;
    let profile = sim::fit_profile_from(&name, &calibration, base.as_ref(), sim::SamplesFrom::Earlier)?;
    write_profile(&profile, &out)?;
    println!("  fitted from {}", samples.display());
    Ok(())
}

pub(crate) fn calibrate(
    out: Option<&Path>,
    part: &str,
    into: Option<&Path>,
    name: Option<&str>,
    seed: u64,
) -> Result<()> {
    let (base, out, name) = calibration_target(out, into, name)?;
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
    let profile = sim::fit_profile_from(&name, &calibration, base.as_ref(), sim::SamplesFrom::ThisMachine)?;
    write_profile(&profile, &out)?;
    println!("  samples in {}", samples.display());
    let timings: Vec<String> = calibration
        .part_seconds
        .iter()
        .map(|(part, seconds)| format!("{part} {seconds:.1} s"))
        .collect();
    println!("  measured in {}", timings.join(", "));
    Ok(())
}
