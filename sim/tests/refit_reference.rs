//! Refitting committed calibration samples gives back the profile the GPU machine wrote from
//! them, section for section: whatever moves between files or changes names, the fits stay the
//! fits. The fresh machines of issue 13 wrote a full profile (every part but peer) with the
//! release binary of e4a34c0, before the banks and coalescing sections had those names.

use std::path::PathBuf;

use experiments::{Calibration, Profile};
use sim::fit_profile;

fn reference(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../reports/reference/profiles-travel-2026-11-23")
        .join(path)
}

#[test]
fn refitting_the_fresh_machines_full_calibrations_gives_the_profiles_they_wrote() {
    for machine in ["h100-c", "h200-b"] {
        let samples = std::fs::read_to_string(reference(&format!("{machine}/full.samples.json"))).unwrap();
        let calibration = Calibration::from_json(machine, &samples).unwrap();
        let quick = Profile::find(&reference(&format!("{machine}/quick.toml")).display().to_string()).unwrap();
        let written = Profile::find(&reference(&format!("{machine}/full.toml")).display().to_string()).unwrap();
        assert!(written.banks.is_some() && written.coalescing.is_some() && written.migration.is_some());
        let mut refitted = fit_profile(&written.name, &calibration, Some(&quick)).unwrap();
        // The CLI stamps the host after fitting; the fit itself does not know it.
        refitted.machine = written.machine.clone();
        let mut ours: toml::Value = toml::from_str(&refitted.to_toml()).unwrap();
        // The one wording that changed since: the spill fit names the section it reads.
        let mut theirs: toml::Value =
            toml::from_str(&written.to_toml().replace("from [global]", "from [coalescing]")).unwrap();
        // The one fit that changed since: spilled traffic moves at DRAM's dense-read bandwidth
        // (fetches and page openings, 2026-11-24), where these profiles' spill fits read the
        // fetch rate alone. spills_reference.rs checks the built-in spill sections' refits.
        for profile in [&mut ours, &mut theirs] {
            profile.as_table_mut().unwrap().remove("spills");
        }
        same(machine, "", &ours, &theirs);
    }
}

/// `a` and `b` hold the same keys and values; floating-point numbers may differ in their last
/// bits (the GPU host's maths library is not this machine's).
fn same(machine: &str, at: &str, a: &toml::Value, b: &toml::Value) {
    match (a, b) {
        (toml::Value::Table(x), toml::Value::Table(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{machine}: {at}"
            );
            for (key, value) in x {
                same(machine, &format!("{at}.{key}"), value, &y[key]);
            }
        }
        (toml::Value::Array(x), toml::Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{machine}: {at}");
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                same(machine, &format!("{at}[{i}]"), p, q);
            }
        }
        (toml::Value::Float(x), toml::Value::Float(y)) => {
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{machine}: {at} = {x}, written {y}"
            );
        }
        _ => assert_eq!(a, b, "{machine}: {at}"),
    }
}

#[test]
fn the_built_in_coalescing_sections_are_the_fits_of_their_committed_samples() {
    // Calibrated with the latency-bound L2 case on the fresh machines of 2026-11-24.
    for (gpu, samples) in [("h100", "h100-h"), ("h200", "h200-d")] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../reports/reference/profiles-travel-2026-11-24")
            .join(samples)
            .join("coalescing.samples.json");
        let calibration = Calibration::from_json(gpu, &std::fs::read_to_string(path).unwrap()).unwrap();
        let builtin = Profile::find(gpu).unwrap();
        let refitted = fit_profile(gpu, &calibration, Some(&builtin)).unwrap();
        let section = |p: &Profile| toml::Value::try_from(p.coalescing.as_ref().unwrap()).unwrap();
        assert!(
            builtin.coalescing.as_ref().unwrap().l2_overlap_exponent.is_some(),
            "{gpu}"
        );
        same(gpu, "coalescing", &section(&refitted), &section(&builtin));
    }
}
