//! The spill model against its committed evidence: the compiler's SASS, and the calibration
//! samples the built-in profiles were fitted on.

use std::path::PathBuf;

use experiments::{Calibration, Profile, SpillPoint};
use sim::{compiled_spills, fit_profile};

fn reference(path: &str) -> serde_json::Value {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../reports/reference")
        .join(path);
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
}

#[test]
fn the_compiler_rule_matches_the_sass_wherever_the_cap_is_below_the_live_values_plus_one() {
    let profile = Profile::find("h100").unwrap();
    let params = profile.spills.as_ref().unwrap();
    let sass = reference("compiler/spills-sass.json");
    let mut checked = 0;
    for case in sass["cases"].as_array().unwrap() {
        let (live, cap) = (
            case["live"].as_u64().unwrap() as u32,
            case["cap"].as_u64().unwrap() as u32,
        );
        if i64::from(live) - i64::from(cap) < -1 {
            continue;
        }
        let (_, loads, _) = compiled_spills(params, &SpillPoint { live, registers: cap });
        assert_eq!(
            u64::from(loads),
            case["loop_ldl"].as_u64().unwrap(),
            "live {live}, cap {cap}"
        );
        assert_eq!(
            u64::from(loads.saturating_sub(1)),
            case["loop_stl"].as_u64().unwrap(),
            "live {live}, cap {cap}"
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} cases checked");
}

#[test]
fn refitting_the_committed_calibration_samples_gives_the_built_in_spill_parameters() {
    for (gpu, samples) in [
        ("h100", "h100/spills-v2/profile-h100.samples.json"),
        ("h200", "h200/spills-v2/profile-h200.samples.json"),
    ] {
        let calibration = Calibration::from_json(samples, &reference(samples).to_string()).unwrap();
        let builtin = Profile::find(gpu).unwrap();
        let refitted = fit_profile(gpu, &calibration, Some(&builtin)).unwrap();
        let (a, b) = (refitted.spills.unwrap(), builtin.spills.unwrap());
        assert_eq!(a.overhead_registers, b.overhead_registers, "{gpu}");
        assert_eq!(a.calibration_cases, b.calibration_cases, "{gpu}");
        for (name, x, y) in [
            ("instruction_ns", a.instruction_ns, b.instruction_ns),
            ("overlap_exponent", a.overlap_exponent, b.overlap_exponent),
            ("local_capacity_bytes", a.local_capacity_bytes, b.local_capacity_bytes),
            ("local_sharpness", a.local_sharpness, b.local_sharpness),
            (
                "frame_bytes_large_base",
                a.frame_bytes_large_base,
                b.frame_bytes_large_base,
            ),
        ] {
            assert!(
                (x - y).abs() <= 1e-9 * y.abs(),
                "{gpu} {name}: refitted {x}, built in {y}"
            );
        }
    }
}
