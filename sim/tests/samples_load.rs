//! Every committed samples file (`*.samples.json`, what `vramlab calibrate` wrote) loads and
//! refits (`vramlab calibrate --from-samples`), whatever calibration wrote it (issue 24): the
//! files are found in the repository, so new ones are covered without editing this test.
//! A part an earlier calibration measured in a way the current fits cannot use loads as not
//! measured and is kept from the base profile, and the refitted profile says so.

use std::path::{Path, PathBuf};

use experiments::{Calibration, Profile};
use sim::fit_profile;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The samples files git tracks, or, where there is no git (a source archive), every
/// `*.samples.json` under `reports/`.
fn samples_files() -> Vec<PathBuf> {
    let root = repository();
    let tracked = std::process::Command::new("git")
        .args(["ls-files", "-z", "--", "*.samples.json"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| {
            out.stdout
                .split(|&b| b == 0)
                .filter(|name| !name.is_empty())
                .map(|name| root.join(String::from_utf8_lossy(name).as_ref()))
                .collect::<Vec<_>>()
        });
    let mut files = match tracked {
        Some(files) if !files.is_empty() => files,
        _ => {
            let mut found = Vec::new();
            walk(&root.join("reports"), &mut found);
            found
        }
    };
    files.sort();
    files
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, found);
        } else if path.to_string_lossy().ends_with(".samples.json") {
            found.push(path);
        }
    }
}

/// The built-in profile of the GPU the samples were measured on.
fn builtin_for(calibration: &Calibration) -> Profile {
    Profile::builtin_names()
        .into_iter()
        .map(|name| Profile::find(name).unwrap())
        .find(|p| p.device.name == calibration.device.name)
        .unwrap_or_else(|| panic!("no built-in profile for {}", calibration.device.name))
}

#[test]
fn every_committed_samples_file_loads_and_refits_onto_its_built_in_profile() {
    let files = samples_files();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("reports/reference/h100/profile-h100.samples.json")),
        "the samples files were not found: {files:?}"
    );
    // The coalescing fit takes seconds in release and minutes in debug: a debug build fits the
    // first file that holds coalescing samples (refit_reference.rs fits more), a release build
    // (`cargo test --release`) or one with VRAMLAB_FULL_CHECKS set (CI) every one. Every file
    // loads either way.
    let thorough = !cfg!(debug_assertions) || std::env::var_os("VRAMLAB_FULL_CHECKS").is_some();
    let mut heavy_fitted = 0;
    let mut failures = Vec::new();
    for file in &files {
        let origin = file.strip_prefix(repository()).unwrap_or(file).display().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        let calibration = match Calibration::from_json(&origin, &text) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{origin}: does not load: {e}"));
                continue;
            }
        };
        let base = builtin_for(&calibration);
        if !calibration.coalescing.is_empty() {
            if !thorough && heavy_fitted > 0 {
                continue;
            }
            heavy_fitted += 1;
        }
        match fit_profile(&base.name, &calibration, Some(&base)) {
            Ok(profile) => {
                // Each part set aside is the base's, and the profile says it was not refitted.
                for note in &calibration.set_aside {
                    assert!(
                        profile.description.contains(note.as_str()),
                        "{origin}: {}",
                        profile.description
                    );
                    let part = note.split(':').next().unwrap();
                    let section = |p: &Profile| toml::Value::try_from(p).unwrap().get(part).cloned();
                    assert!(section(&base).is_some(), "{origin}: the base has no [{part}]");
                    assert_eq!(
                        section(&profile),
                        section(&base),
                        "{origin}: [{part}] is not the base's"
                    );
                }
            }
            Err(e) => failures.push(format!("{origin}: does not fit onto {}: {e}", base.name)),
        }
        // Without a base, a fit that cannot be made says why in one line, never as a dump of the
        // samples.
        if let Err(e) = fit_profile("refit", &calibration, None) {
            let message = e.to_string();
            assert!(
                !message.contains('\n') && !message.contains("Sample {"),
                "{origin}: {message}"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn samples_from_the_current_calibration_set_nothing_aside() {
    // Every part's format has been the current one since the fresh machines of 2026-11-23.
    for file in samples_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let calibration = Calibration::from_json(&file.display().to_string(), &text).unwrap();
        if calibration.date.as_str() >= "2026-11-23" {
            assert!(
                calibration.set_aside.is_empty(),
                "{}: {:?}",
                file.display(),
                calibration.set_aside
            );
            assert!(calibration.sm.is_some(), "{}", file.display());
        }
    }
}

#[test]
fn earlier_calibrations_keep_what_the_current_fits_can_use() {
    let load = |path: &str| {
        let file = repository().join(path);
        Calibration::from_json(path, &std::fs::read_to_string(file).unwrap()).unwrap()
    };
    let parts = |c: &Calibration| -> Vec<String> {
        c.set_aside
            .iter()
            .map(|note| note.split(':').next().unwrap().to_string())
            .collect()
    };
    // Transfers before the SM's limits were recorded: the transfers are refitted.
    let transfers = load("reports/reference/h100/profile-h100.samples.json");
    assert_eq!(parts(&transfers), ["sm"]);
    assert_eq!(transfers.h2d_pinned.len(), 10);
    let base = builtin_for(&transfers);
    let refitted = fit_profile("h100", &transfers, Some(&base)).unwrap();
    assert_ne!(refitted.transfer, base.transfer);
    assert_eq!(refitted.sm, base.sm);
    // Without a base the SM's limits are missing, and the message says so in one line.
    let message = fit_profile("refit", &transfers, None).unwrap_err().to_string();
    assert!(
        message.contains("2026-11-22") && message.contains("--into"),
        "{message}"
    );
    // The earlier ladders, case lists and spill experiment are set aside, and only those.
    assert_eq!(
        parts(&load("reports/reference/h100/latency/profile-h100.samples.json")),
        ["latency"]
    );
    assert_eq!(
        parts(&load("reports/reference/h200/latency-v2/profile-h200.samples.json")),
        ["latency"]
    );
    assert_eq!(
        parts(&load("reports/reference/h100/coalescing/profile-h100.samples.json")),
        ["coalescing"]
    );
    assert_eq!(
        parts(&load("reports/reference/h100/global-v3/global-h100.samples.json")),
        ["coalescing"]
    );
    assert_eq!(
        parts(&load("reports/reference/h200/spills/profile-h200.samples.json")),
        ["spills"]
    );
    // Nine coalescing cases (before the latency-bound L2 case of 2026-11-24) still fit.
    let nine = load("reports/reference/profiles-travel-2026-11-24/h100-h/coalescing-9cases.samples.json");
    assert!(nine.set_aside.is_empty() && nine.coalescing.len() == 9);
}
