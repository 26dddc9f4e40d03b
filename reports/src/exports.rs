//! Exports of a replay for viewers: Perfetto's JSON and PyTorch's memory_viz snapshots, named
//! and checked before any work, and written after.

use std::path::{Path, PathBuf};

use experiments::ReplayRecord;

use crate::{write_perfetto, ReportError, Result};

/// What a viewer export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// Chrome trace JSON for ui.perfetto.dev and chrome://tracing.
    Perfetto,
    /// A PyTorch memory snapshot pickle for `torch.cuda._memory_viz`, one per result.
    Snapshot,
}

impl ExportKind {
    /// Its name, as `--export KIND FILE` takes it.
    pub fn name(self) -> &'static str {
        match self {
            ExportKind::Perfetto => "perfetto",
            ExportKind::Snapshot => "snapshot",
        }
    }
}

/// One export asked for: its kind and file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// What it holds.
    pub kind: ExportKind,
    /// Where it goes (a snapshot of several results: numbered files beside it).
    pub path: PathBuf,
}

impl Export {
    /// An export from its kind's name (`perfetto` or `snapshot`) and a file name; refused with
    /// one line where either is not one.
    pub fn parse(kind: &str, file: &str) -> Result<Export> {
        let parsed = match kind {
            "perfetto" => ExportKind::Perfetto,
            "snapshot" => ExportKind::Snapshot,
            other => return Err(invalid(format!("export {other}: the kinds are perfetto and snapshot"))),
        };
        if file_name_of(file).is_none() {
            return Err(invalid(format!("export {kind} '{file}': not a file name")));
        }
        let kind = parsed;
        Ok(Export {
            kind,
            path: PathBuf::from(file),
        })
    }

    /// The files it writes for `results` results: one, or for a snapshot of several results one
    /// per result, numbered (`x.pickle` -> `x-1.pickle`, `x-2.pickle`).
    pub fn files(&self, results: usize) -> Vec<PathBuf> {
        if self.kind != ExportKind::Snapshot || results <= 1 {
            return vec![self.path.clone()];
        }
        let stem = self.path.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        (1..=results)
            .map(|k| self.path.with_file_name(format!("{stem}-{k}{ext}")))
            .collect()
    }

    /// Writes it; the sentences saying what was written.
    pub fn write(&self, record: &ReplayRecord) -> Result<Vec<String>> {
        match self.kind {
            ExportKind::Perfetto => {
                write_perfetto(&self.path, record)?;
                Ok(vec![format!(
                    "perfetto: {} (open in ui.perfetto.dev)",
                    self.path.display()
                )])
            }
            ExportKind::Snapshot => {
                let mut said = Vec::new();
                for (result, file) in record.results.iter().zip(self.files(record.results.len())) {
                    let Some(replayed) = &result.replayed else { continue };
                    let settings = experiments::pytorch::alloc_conf_of(&result.policy);
                    experiments::write_snapshot(&file, replayed, settings)?;
                    said.push(format!(
                        "snapshot of {}: {} (torch.cuda._memory_viz)",
                        result.policy,
                        file.display()
                    ));
                }
                Ok(said)
            }
        }
    }
}

fn invalid(message: String) -> ReportError {
    ReportError::Files(experiments::Error::Invalid(message))
}

/// The file name a path ends in, where it ends in one (not empty, `.`, `..` or a `/`). A path
/// ending in `/.` names its folder, whose name `Path::file_name` gives: numbered exports made
/// beside it (`out/.` -> `out-1.pickle`, outside `out`), so it is no file name either.
pub fn file_name_of(path: &str) -> Option<&std::ffi::OsStr> {
    let last = path.rsplit('/').next().unwrap_or(path);
    (!last.is_empty() && last != "." && last != "..")
        .then(|| Path::new(path).file_name())
        .flatten()
        .filter(|name| *name == std::ffi::OsStr::new(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 40: `--export snapshot out/.` numbered its files beside `out`, not in it.
    #[test]
    fn numbered_exports_stay_in_the_folder_named() {
        for file in ["out/.", ".", "out/..", "out/", "", "a/./."] {
            assert!(Export::parse("snapshot", file).is_err(), "{file}");
        }
        let export = Export::parse("snapshot", "out/what.if.pickle").unwrap();
        let files = export.files(3);
        assert_eq!(files.len(), 3);
        for (k, file) in files.iter().enumerate() {
            assert_eq!(file.parent(), Some(Path::new("out")), "{file:?}");
            assert_eq!(file.file_name().unwrap(), format!("what.if-{}.pickle", k + 1).as_str());
        }
        assert_eq!(file_name_of("./x"), Some(std::ffi::OsStr::new("x")));
    }
}
