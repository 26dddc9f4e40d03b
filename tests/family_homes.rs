//! One home per family: outside its own files, no source file names a family. A family's
//! files are its module in each layer
//! (`experiments/src/<family>.rs`, `sim/src/<family>.rs`, `hw/src/<family>.rs`), its kernel
//! (`kernels/<family>.cu`) and, for a family with a kernel, that kernel's launch contract in the
//! CUDA core (`hw/src/cuda/kernels.rs`), kept there so every kernel's memory bounds are reviewed
//! in the one module that may hold unsafe code. The registry of families is written at build
//! time from a line in each family's `experiments` module, so no file lists them.
//!
//! The one other file a family may share is the suite catalog (`experiments/src/catalog.rs`),
//! where a suite named like its family (growth) is listed. And a family's model may build on an
//! earlier family's: those uses sit in the later family's own files and are listed in
//! [`BUILDS_ON`], so adding a family never edits another's files, and a new use is declared.
//!
//! "Names" means in code, not in comments: an identifier that is the family's name (`constant`,
//! `Constant`), an item only the family's files define (`ConstantParams`, `fit_constant`), or a
//! string literal that is its name or its kernel's file. Tests, benches and scripts may name
//! families freely; they are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use experiments::Family;

/// Where one family's files use another's: (family used, file of the family using it, why).
const BUILDS_ON: &[(&str, &str, &str)] = &[
    (
        "coalescing",
        "sim/src/spills.rs",
        "spill traffic moves at the L2 and DRAM bandwidths",
    ),
    (
        "coalescing",
        "hw/src/peer.rs",
        "peer reads run the coalescing family's read kernel",
    ),
    (
        "occupancy",
        "sim/src/coalescing.rs",
        "the read kernel's resident blocks",
    ),
    ("occupancy", "sim/src/spills.rs", "the spill kernel's resident warps"),
    (
        "transfer",
        "sim/src/coalescing.rs",
        "the launch cost of the read kernel",
    ),
    (
        "transfer",
        "sim/src/overlap.rs",
        "overlap is the copies' model plus kernels",
    ),
    // The transfer section (the link and the launch cost) is the one every profile must have:
    // its type is a field of every profile, and it is fitted before the families that read it.
    (
        "transfer",
        "experiments/src/profile.rs",
        "the profile's required section",
    ),
    (
        "transfer",
        "sim/src/fit.rs",
        "the profile's required section, fitted first",
    ),
];

/// The source files counted: every crate's `src`, the CLI and the kernels.
fn source_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("rs" | "cu")) {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "src",
        "experiments/src",
        "alloc/src",
        "sim/src",
        "hw/src",
        "reports/src",
        "python/src",
        "kernels",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.sort();
    files
}

/// The file's code as identifiers and string literals, comments dropped.
fn tokens(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut idents, mut strings) = (Vec::new(), Vec::new());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&ch) = chars.get(i) {
                    s.push(ch);
                }
                i += 1;
            }
            strings.push(s);
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            idents.push(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    (idents, strings)
}

/// Names of the items a file defines.
fn defined_items(idents: &[String]) -> BTreeSet<String> {
    const KEYWORDS: [&str; 7] = ["fn", "struct", "enum", "const", "static", "type", "trait"];
    idents
        .windows(2)
        .filter(|w| KEYWORDS.contains(&w[0].as_str()))
        .map(|w| w[1].clone())
        .collect()
}

/// An identifier's words, lower case: `ConstantParams` and `CONSTANT_PARAMS` are both
/// `constant`, `params`.
fn words(ident: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut previous_lower = false;
    for c in ident.chars() {
        if c == '_' {
            words.push(String::new());
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(String::new());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        words.last_mut().unwrap().push(c.to_ascii_lowercase());
    }
    words.retain(|w| !w.is_empty());
    words
}

fn camel(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// For each family, the files outside its homes that name it.
fn strays(root: &Path) -> BTreeMap<&'static str, Vec<String>> {
    let files: Vec<(String, Vec<String>, Vec<String>)> = source_files(root)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests sit at a file's end, after `#[cfg(test)]`; like the tests directories,
            // they may name any family.
            let code = text.split("\n#[cfg(test)]\n").next().unwrap_or_default();
            let (idents, strings) = tokens(code);
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            (relative, idents, strings)
        })
        .collect();
    let homes = |family: &str| -> Vec<String> {
        let mut homes: Vec<String> = ["experiments/src", "sim/src", "hw/src"]
            .iter()
            .map(|crate_src| format!("{crate_src}/{family}.rs"))
            .collect();
        homes.push(format!("kernels/{family}.cu"));
        homes.push("experiments/src/catalog.rs".to_string());
        homes
    };
    // Items defined by exactly one family's homes are that family's own.
    let mut definers: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for family in Family::ALL {
        for (file, idents, _) in &files {
            if homes(family.name()).contains(file) {
                for item in defined_items(idents) {
                    definers.entry(item).or_default().insert(family.name());
                }
            }
        }
    }
    let mut strays = BTreeMap::new();
    for family in Family::ALL {
        let name = family.name();
        let kernel = format!("{name}.cu");
        let own: BTreeSet<&String> = definers
            .iter()
            .filter(|(item, by)| by.len() == 1 && by.contains(name) && words(item).iter().any(|w| w == name))
            .map(|(item, _)| item)
            .collect();
        let has_kernel = files.iter().any(|(file, _, _)| *file == format!("kernels/{kernel}"));
        let named_in: Vec<String> = files
            .iter()
            .filter(|(file, _, _)| !homes(name).contains(file))
            .filter(|(file, _, _)| !BUILDS_ON.iter().any(|(used, by, _)| *used == name && by == file))
            .filter(|(file, _, _)| !(has_kernel && file == "hw/src/cuda/kernels.rs"))
            .filter(|(_, idents, strings)| {
                idents.iter().any(|i| i == name || *i == camel(name) || own.contains(i))
                    || strings.iter().any(|s| s == name || s.contains(&kernel))
            })
            .map(|(file, _, _)| file.clone())
            .collect();
        strays.insert(name, named_in);
    }
    strays
}

#[test]
fn no_source_file_outside_a_familys_homes_names_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let strays = strays(root);
    let found: Vec<String> = strays
        .iter()
        .filter(|(_, files)| !files.is_empty())
        .map(|(family, files)| format!("{family}: {}", files.join(", ")))
        .collect();
    assert!(
        found.is_empty(),
        "families named outside their homes:\n{}",
        found.join("\n")
    );
}

/// For each family, the source files that name it: its own, then the later families' that
/// build on it.
fn files_naming(root: &Path) -> BTreeMap<&'static str, (Vec<String>, Vec<String>)> {
    let mut out = BTreeMap::new();
    for family in Family::ALL {
        let name = family.name();
        let kernel = format!("{name}.cu");
        let mut own: Vec<String> = source_files(root)
            .into_iter()
            .map(|path| path.strip_prefix(root).unwrap().display().to_string())
            .filter(|file| {
                let text = std::fs::read_to_string(root.join(file)).unwrap();
                let code = text.split("\n#[cfg(test)]\n").next().unwrap_or_default();
                let (idents, strings) = tokens(code);
                let home = file.ends_with(&format!("/{name}.rs")) || file.ends_with(&format!("/{kernel}"));
                home || idents.iter().any(|i| i == name || *i == camel(name))
                    || strings.iter().any(|s| s == name || s.contains(&kernel))
            })
            .collect();
        let dependents: Vec<String> = BUILDS_ON
            .iter()
            .filter(|(used, _, _)| *used == name)
            .map(|(_, by, _)| by.to_string())
            .collect();
        own.retain(|file| !dependents.contains(file));
        out.insert(name, (own, dependents));
    }
    out
}

#[test]
fn a_family_lives_in_at_most_five_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (family, (own, dependents)) in files_naming(root) {
        eprintln!(
            "{family}: {} own ({}); built on in {}",
            own.len(),
            own.join(", "),
            dependents.len()
        );
        assert!(
            own.len() <= 5,
            "{family} lives in {} files: {}",
            own.len(),
            own.join(", ")
        );
    }
}

#[test]
fn every_declared_use_of_another_family_is_still_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (used, by, why) in BUILDS_ON {
        let text = std::fs::read_to_string(root.join(by)).unwrap();
        let code = text.split("\n#[cfg(test)]\n").next().unwrap_or_default();
        let (idents, strings) = tokens(code);
        let named = idents.iter().any(|i| words(i).iter().any(|w| w == used))
            || strings.iter().any(|s| s.contains(&format!("{used}.cu")));
        assert!(named, "{by} no longer uses {used} ({why}): drop it from BUILDS_ON");
    }
}

#[test]
fn the_tokenizer_skips_comments_and_keeps_strings() {
    let (idents, strings) = tokens("// constant\nlet x = \"banks\"; /* peer */ fit_constant(y)");
    assert_eq!(idents, ["let", "x", "fit_constant", "y"]);
    assert_eq!(strings, ["banks"]);
    assert_eq!(words("ConstantParams"), ["constant", "params"]);
    assert_eq!(words("CONSTANT_PARAMS"), ["constant", "params"]);
}
