//! Writing results so that a crash or a bad input never leaves a half-written file behind.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Why `name` cannot name a file or folder under an output folder, if it cannot: it must be one
/// plain path component (letters, digits, `_`, `-`, `.`; not starting with `.`; at most 100
/// characters), so nothing a suite or a record names is written outside `--out`.
pub fn unsafe_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("an empty name".into());
    }
    if name.len() > 100 {
        let start: String = name.chars().take(40).collect();
        return Some(format!("'{start}...' is longer than 100 characters"));
    }
    if name.starts_with('.') {
        return Some(format!("'{name}' starts with '.'"));
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map(|c| format!("'{name}' holds {c:?}; names are letters, digits, '_', '-' and '.'"))
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename,
/// so a reader sees either the old file or the whole new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{}: not a file path", path.display())))?;
    let tmp = path.with_file_name(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file() {
        let dir = std::env::temp_dir().join(format!("vramlab-files-{}", std::process::id()));
        let path = dir.join("sub").join("x.json");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1, "temporary file left behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
