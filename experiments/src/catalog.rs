//! The suites vramlab ships, and selecting experiments from them by name.

use crate::error::{Error, Result};
use crate::suite::{Experiment, Suite};

const BUILTIN_SUITES: &[(&str, &str)] = &[
    ("transfers", include_str!("../suites/transfers.toml")),
    ("hierarchy", include_str!("../suites/hierarchy.toml")),
    ("growth", include_str!("../suites/growth.toml")),
];

/// A set of suites loaded together, whose experiment names are unique.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// The suites, in load order.
    pub suites: Vec<Suite>,
}

impl Catalog {
    /// The suites compiled into vramlab.
    pub fn builtin() -> Result<Catalog> {
        let mut catalog = Catalog { suites: Vec::new() };
        for (name, text) in BUILTIN_SUITES {
            catalog.add(Suite::parse(&format!("experiments/suites/{name}.toml"), text)?)?;
        }
        Ok(catalog)
    }

    /// The built-in catalog plus any suite files named among `targets` (a `.toml` or a path),
    /// and the names to select from it (suites and experiments as given; files by suite name).
    pub fn for_targets(targets: &[String]) -> Result<(Catalog, Vec<String>)> {
        let mut catalog = Catalog::builtin()?;
        let mut names = Vec::new();
        for target in targets {
            if target.ends_with(".toml") || target.contains('/') {
                let suite = Suite::load(std::path::Path::new(target))?;
                names.push(suite.name.clone());
                catalog.add(suite)?;
            } else {
                names.push(target.clone());
            }
        }
        Ok((catalog, names))
    }

    /// Adds a suite, refusing experiment names that are already taken.
    pub fn add(&mut self, suite: Suite) -> Result<()> {
        for exp in &suite.experiments {
            if let Some(other) = self.experiments().find(|e| e.name == exp.name) {
                return Err(Error::Invalid(format!(
                    "{}: experiment '{}' is already defined in suite '{}'",
                    suite.origin, exp.name, other.suite
                )));
            }
        }
        self.suites.retain(|s| s.name != suite.name);
        self.suites.push(suite);
        Ok(())
    }

    /// Every experiment of every suite.
    pub fn experiments(&self) -> impl Iterator<Item = &Experiment> {
        self.suites.iter().flat_map(|s| s.experiments.iter())
    }

    /// The experiments named by suite or experiment names; `all` or no names means everything.
    /// Unknown names are an error listing the valid ones.
    pub fn select(&self, names: &[String]) -> Result<Vec<&Experiment>> {
        if names.is_empty() || names.iter().any(|n| n == "all") {
            return Ok(self.experiments().collect());
        }
        let mut chosen: Vec<&Experiment> = Vec::new();
        for name in names {
            let found: Vec<&Experiment> = match self.suites.iter().find(|s| &s.name == name) {
                Some(suite) => suite.experiments.iter().collect(),
                None => self.experiments().filter(|e| &e.name == name).collect(),
            };
            if found.is_empty() {
                let valid = std::iter::once("all".to_string())
                    .chain(self.suites.iter().map(|s| s.name.clone()))
                    .chain(self.experiments().map(|e| e.name.clone()))
                    .collect();
                return Err(Error::Unknown {
                    kind: "suite or experiment",
                    name: name.clone(),
                    valid,
                });
            }
            for exp in found {
                if !chosen.iter().any(|c| c.name == exp.name) {
                    chosen.push(exp);
                }
            }
        }
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_suites_parse() {
        let catalog = Catalog::builtin().unwrap();
        assert!(catalog.experiments().count() >= 5);
        assert!(catalog.experiments().all(|e| !e.points.is_empty()));
    }

    #[test]
    fn selects_by_suite_and_experiment() {
        let catalog = Catalog::builtin().unwrap();
        let all = catalog.select(&[]).unwrap().len();
        let suites: usize = catalog
            .suites
            .iter()
            .map(|s| catalog.select(std::slice::from_ref(&s.name)).unwrap().len())
            .sum();
        assert_eq!(suites, all);
        assert_eq!(catalog.select(&["h2d_pinned".into()]).unwrap().len(), 1);
        let err = catalog.select(&["nope".into()]).unwrap_err().to_string();
        assert!(
            err.contains("'nope'") && err.contains("transfers") && err.contains("h2d_pinned"),
            "{err}"
        );
    }
}
