//! Every family has every part it needs: a suite that runs it, a model that predicts its primary
//! metric from a built-in profile (or names the profile section it lacks), and every calibration
//! part a profile section of its own. A family or part added halfway fails here.

use std::path::Path;

use experiments::{Backend, Catalog, Family, Profile, Suite, CALIBRATION_PARTS};
use sim::SimBackend;

/// The built-in suites and the suite files beside them (peer's needs two GPUs and is not built in).
fn every_experiment() -> Vec<experiments::Experiment> {
    let mut all: Vec<_> = Catalog::builtin().unwrap().experiments().cloned().collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/suites");
    for entry in std::fs::read_dir(dir).unwrap() {
        let suite = Suite::load(&entry.unwrap().path()).unwrap();
        for experiment in suite.experiments {
            if !all.iter().any(|e| e.name == experiment.name) {
                all.push(experiment);
            }
        }
    }
    all
}

#[test]
fn every_family_has_a_suite_and_a_model_for_its_primary_metric() {
    let experiments = every_experiment();
    for family in Family::ALL {
        let experiment = experiments
            .iter()
            .find(|e| e.family == family)
            .unwrap_or_else(|| panic!("family {} has no experiment in any suite", family.name()));
        let first = experiments::Experiment {
            points: experiment.points[..1].to_vec(),
            ..experiment.clone()
        };
        assert!(
            first.points[0].params.contains_key(family.x_param()),
            "{}: x parameter {} is not among its parameters",
            family.name(),
            family.x_param()
        );
        for profile in Profile::builtin_names() {
            let mut sim = SimBackend::new(Profile::find(profile).unwrap());
            match sim.run(&first, 0, &|| {}) {
                Ok(record) => assert!(
                    record.points[0].metrics.contains_key(family.primary_metric()),
                    "{} under {profile}: no {} among {:?}",
                    family.name(),
                    family.primary_metric(),
                    record.points[0].metrics.keys()
                ),
                // A profile may lack an optional section (peer needs two GPUs to calibrate);
                // then the error must say which.
                Err(e) => assert!(
                    e.to_string().contains(family.name()),
                    "{} under {profile}: {e}",
                    family.name()
                ),
            }
        }
    }
}

#[test]
fn every_calibration_part_writes_a_section_of_the_built_in_profiles() {
    for profile in Profile::builtin_names() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../experiments/profiles/{profile}.toml")),
        )
        .unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        for part in CALIBRATION_PARTS.iter().filter(|p| p.in_all) {
            assert!(table.contains_key(part.name), "{profile}: no [{}] section", part.name);
            assert!((part.cases)() > 0, "{}: no cases to measure", part.name);
        }
    }
}
