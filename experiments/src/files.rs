//! Writing results so that a crash or a bad input never leaves a half-written file behind.

use std::io::Write;
use std::path::{Path, PathBuf};

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

/// The most characters an error line keeps ([`error_line`]).
pub const ERROR_LINE_CHARS: usize = 2000;

/// Whether `c` would move or hide text on a terminal: a control character, a Unicode line or
/// paragraph separator, or a bidirectional control. Messages escape these as `\u{..}`.
pub(crate) fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text of several lines for a terminal, as it is: within each line what `unprintable` names
/// is escaped as `\u{..}` (a snapshot's note or a file name may carry an escape sequence or a
/// U+2028), the lines kept.
pub fn terminal_text(text: &str) -> String {
    if !text.chars().any(|c| c != '\n' && unprintable(c)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c if unprintable(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A message as one line a terminal shows as it is: line breaks become spaces; other control
/// characters, Unicode's line and paragraph separators and its bidirectional controls (which
/// would end the line, move the cursor or reorder what follows) are escaped as `\u{2028}`;
/// past [`ERROR_LINE_CHARS`] characters the rest is left out, and says how much (a
/// million-digit size once made a million-character error line).
pub fn error_line(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(ERROR_LINE_CHARS + 64));
    for (shown, (at, c)) in message.char_indices().enumerate() {
        if shown >= ERROR_LINE_CHARS {
            let left = message[at..].chars().count();
            line.push_str(&format!("... ({left} more characters left out)"));
            break;
        }
        match c {
            '\n' | '\t' => line.push(' '),
            c if unprintable(c) => line.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => line.push(c),
        }
    }
    line
}

/// The most bytes a profile, suite, samples file or record may hold, unless
/// `VRAMLAB_MAX_INPUT_BYTES` says otherwise (traces have their own, larger limit).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// What kind of thing a file system entry is, for a message, where it is not a regular file.
fn special_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Refuses, with one line, an input that is not a regular file: opening a FIFO waits for a
/// writer, a device never ends.
pub(crate) fn check_regular(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    match special_kind(&meta) {
        // A file-system error (the path names no file to read), not a bad value.
        Some(kind) => Err(Error::io(
            path,
            std::io::Error::new(
                if meta.is_dir() {
                    std::io::ErrorKind::IsADirectory
                } else {
                    std::io::ErrorKind::InvalidInput
                },
                format!("is {kind}; vramlab reads regular files"),
            ),
        )),
        None => Ok(()),
    }
}

/// A limit the user may set through the environment variable `name`: a whole number, or
/// `default` where it is unset.
pub(crate) fn env_limit(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::Invalid(format!("{name} = {text}: not a whole number"))),
        Err(_) => Ok(default),
    }
}

/// Reads an input file (profile, suite, samples, record) whole, refusing what is not a regular
/// file (a FIFO would hang, a device never end) and anything past the input limit, with one line
/// naming the file and the limit.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let limit = input_limit()?;
    check_regular(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::Invalid(format!(
            "{}: larger than {} (set VRAMLAB_MAX_INPUT_BYTES to read more)",
            path.display(),
            crate::units::format_bytes(limit)
        )));
    }
    Ok(bytes)
}

/// The input limit: `VRAMLAB_MAX_INPUT_BYTES`, or [`DEFAULT_MAX_INPUT_BYTES`].
fn input_limit() -> Result<u64> {
    match std::env::var("VRAMLAB_MAX_INPUT_BYTES") {
        Ok(text) => crate::units::parse_bytes(&text)
            .map_err(|reason| Error::Invalid(format!("VRAMLAB_MAX_INPUT_BYTES = {text}: {reason}"))),
        Err(_) => Ok(DEFAULT_MAX_INPUT_BYTES),
    }
}

/// An input file opened to be read as a stream (a record, parsed as it is read rather than
/// held whole), refused as [`read_input`] refuses: not a regular file, or past the input
/// limit; the reader stops at the limit.
pub(crate) fn open_input(path: &Path) -> Result<std::io::BufReader<std::io::Take<std::fs::File>>> {
    use std::io::Read;
    let limit = input_limit()?;
    check_regular(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size > limit {
        return Err(Error::Invalid(format!(
            "{}: larger than {} (set VRAMLAB_MAX_INPUT_BYTES to read more)",
            path.display(),
            crate::units::format_bytes(limit)
        )));
    }
    Ok(std::io::BufReader::with_capacity(1 << 16, file.take(limit)))
}

/// [`read_input`] as text.
pub fn read_input_text(path: &Path) -> Result<String> {
    String::from_utf8(read_input(path)?).map_err(|e| {
        Error::Invalid(format!(
            "{}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The output folder of this run (`--out`), once the command names it: what is written
/// inside it goes only through folders that are folders, never through a symbolic link that
/// could lead elsewhere.
static OUTPUT_ROOT: std::sync::RwLock<Option<std::path::PathBuf>> = std::sync::RwLock::new(None);

/// Names the output folder of this run (see [`write_atomically`]).
pub fn set_output_root(root: &Path) {
    *OUTPUT_ROOT.write().unwrap_or_else(|e| e.into_inner()) = Some(root.to_path_buf());
}

/// The file in an output folder that a command writing there holds locked.
pub const OUTPUT_LOCK: &str = ".vramlab.lock";

/// An output folder held by this command (see [`hold_output_root`]); let go when dropped. A
/// folder it made that holds nothing but the lock when let go (the command was refused before
/// it wrote) is removed again, so a refusal leaves nothing behind.
#[derive(Debug)]
pub struct OutputLock {
    file: Option<std::fs::File>,
    made: Option<PathBuf>,
    /// The folders above `made` that the command made too (`vramlab-out` of
    /// `vramlab-out/replay`), nearest first.
    made_above: Vec<PathBuf>,
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        let Some(root) = self.made.take() else { return };
        let only_the_lock = std::fs::read_dir(&root)
            .map(|entries| entries.flatten().all(|e| e.file_name() == OUTPUT_LOCK))
            .unwrap_or(false);
        if only_the_lock {
            let _ = std::fs::remove_file(root.join(OUTPUT_LOCK));
            drop(self.file.take());
            let _ = std::fs::remove_dir(&root);
            // Each stays where something else was put into it since (remove_dir refuses).
            for above in &self.made_above {
                if std::fs::remove_dir(above).is_err() {
                    break;
                }
            }
        }
    }
}

/// Names `root` the output folder of this command (as [`set_output_root`]) and holds it: the
/// folder is made, and its [`OUTPUT_LOCK`] file locked for as long as the returned value
/// lives. A second vramlab writing into the same folder at once (another process, or another
/// thread's `vramlab.main`) is refused in one line, where it would mix its record and report
/// with the first's. A file system without locks holds nothing.
pub fn hold_output_root(root: &Path) -> Result<OutputLock> {
    set_output_root(root);
    let made = !root.exists();
    let made_above: Vec<PathBuf> = root
        .ancestors()
        .skip(1)
        .take_while(|above| !above.as_os_str().is_empty() && !above.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    let made = made.then(|| root.to_path_buf());
    let path = root.join(OUTPUT_LOCK);
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        if !meta.file_type().is_file() {
            return Err(Error::Invalid(format!(
                "{}: not a regular file (vramlab's lock of the output folder); remove it",
                path.display()
            )));
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(OutputLock {
            file: Some(file),
            made,
            made_above,
        }),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Invalid(format!(
            "{}: another vramlab is writing into this folder now; wait for it to finish, or give another --out",
            root.display()
        ))),
        Err(std::fs::TryLockError::Error(_)) => Ok(OutputLock {
            file: None,
            made,
            made_above,
        }),
    }
}

/// Makes the folder `dir` ready to write into. Below the output folder each level is made one
/// at a time and must be a real folder: a symbolic link there (`out/plots -> /elsewhere`) is
/// refused with one line, since writing through it would write outside the output folder.
fn prepare_folder(dir: &Path) -> Result<()> {
    let root = OUTPUT_ROOT.read().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(inside) = root
        .as_deref()
        .and_then(|root| dir.strip_prefix(root).ok().map(|rest| (root, rest)))
    else {
        return std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e));
    };
    let (root, rest) = inside;
    if rest
        .components()
        .any(|part| !matches!(part, std::path::Component::Normal(_)))
    {
        return Err(Error::Invalid(format!(
            "{}: climbs out of the output folder {} ('..'); vramlab writes only inside it",
            dir.display(),
            root.display()
        )));
    }
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    let mut cursor = root.to_path_buf();
    for part in rest.components() {
        cursor.push(part);
        match std::fs::symlink_metadata(&cursor) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Error::Invalid(format!(
                    "{}: a symbolic link inside the output folder {}; vramlab writes only into folders inside it",
                    cursor.display(),
                    root.display()
                )))
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(Error::Invalid(format!(
                    "{}: not a folder, yet output goes inside it",
                    cursor.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&cursor).map_err(|e| Error::io(&cursor, e))?;
            }
            Err(e) => return Err(Error::io(&cursor, e)),
        }
    }
    Ok(())
}

/// Refuses, before anything runs, one path named for two outputs (one would silently
/// overwrite the other): `outputs` are (what, path) pairs, compared as absolute paths with `.`
/// and `..` resolved.
pub fn refuse_shared_outputs(outputs: &[(String, PathBuf)]) -> Result<()> {
    let here = std::env::current_dir().unwrap_or_default();
    let normal = |path: &Path| -> PathBuf {
        let mut out = PathBuf::new();
        for part in here.join(path).components() {
            match part {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for (what, path) in outputs {
        let path_n = normal(path);
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == path_n) {
            return Err(Error::Invalid(format!(
                "{}: named for two outputs ({first} and {what})",
                path.display()
            )));
        }
        seen.push((path_n, what));
    }
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename,
/// so a reader sees either the old file or the whole new one. Only a regular file is ever
/// replaced: a FIFO, a device or a folder at `path` is refused with one line (a rename would
/// put a regular file in its place, `/dev/full` included).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let file_name = path
        .file_name()
        .filter(|name| !name.is_empty())
        .ok_or_else(|| Error::Invalid(format!("'{}': not a file name", path.display())))?;
    if let Ok(meta) = std::fs::metadata(path) {
        if let Some(kind) = special_kind(&meta) {
            return Err(Error::Invalid(format!(
                "{}: is {kind}; vramlab replaces only regular files",
                path.display()
            )));
        }
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = dir {
        prepare_folder(dir)?;
    }
    // A name of this call's own: two threads of one process (two Python calls) writing one
    // path must not write into one temporary file; made new, so nothing planted there (a
    // symbolic link) is followed.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(
        ".{}.tmp{}-{call}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
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
    /// Issue 40: text for the terminal keeps its lines and escapes what would move or hide
    /// the rest.
    #[test]
    fn terminal_text_escapes_within_lines() {
        assert_eq!(terminal_text("a\nb"), "a\nb");
        assert_eq!(
            terminal_text("note: \u{1b}[2J\u{2028}x\r\nnext"),
            "note: \\u{1b}[2J\\u{2028}x\\u{d}\nnext"
        );
    }

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

    /// Issue 40: two threads of one process (two Python calls) writing one path shared one
    /// temporary file, named by the process alone: the file kept could mix both writes.
    #[test]
    fn two_threads_writing_one_path_leave_one_whole_file() {
        let dir = std::env::temp_dir().join(format!("vramlab-two-writers-{}", std::process::id()));
        let path = dir.join("x.json");
        let payloads: Vec<Vec<u8>> = (b'a'..=b'b').map(|c| vec![c; 1 << 20]).collect();
        for _ in 0..20 {
            std::thread::scope(|scope| {
                for payload in &payloads {
                    let path = &path;
                    scope.spawn(move || write_atomically(path, payload).unwrap());
                }
            });
            let kept = std::fs::read(&path).unwrap();
            assert!(payloads.contains(&kept), "the file mixes both writes");
        }
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary files left behind"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Issue 40: two vramlab commands writing one output folder at once: the second is refused
    /// in one line while the first holds it, and goes ahead once it is let go.
    #[test]
    fn a_held_output_folder_is_refused_to_a_second_writer() {
        let dir = std::env::temp_dir().join(format!("vramlab-held-{}", std::process::id()));
        let _one_root = ONE_ROOT.lock().unwrap_or_else(|e| e.into_inner());
        let first = hold_output_root(&dir).unwrap();
        let err = hold_output_root(&dir).unwrap_err().to_string();
        assert!(err.contains("another vramlab is writing into this folder"), "{err}");
        assert_eq!(error_line(&err), err, "one plain line");
        drop(first);
        // Made by it and left with nothing written: removed again when let go.
        assert!(!dir.exists(), "an empty output folder left behind");
        let again = hold_output_root(&dir).unwrap();
        std::fs::write(dir.join("kept"), b"x").unwrap();
        drop(again);
        assert!(dir.join("kept").is_file());
        *OUTPUT_ROOT.write().unwrap() = None;
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The output folder is the process's: tests that name one take turns.
    static ONE_ROOT: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Found by the `output_paths` fuzz target: `out/../x` passed the symbolic-link check, which
    /// looked only for links, and was written beside the output folder.
    #[test]
    fn a_path_that_climbs_out_of_the_output_is_refused() {
        let dir = std::env::temp_dir().join(format!("vramlab-climb-{}", std::process::id()));
        let out = dir.join("out");
        let _one_root = ONE_ROOT.lock().unwrap_or_else(|e| e.into_inner());
        set_output_root(&out);
        let err = write_atomically(&out.join("sub/../../x"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("climbs out of the output folder"), "{err}");
        assert!(!dir.join("x").exists());
        write_atomically(&out.join("sub/x"), b"x").unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_symlinked_folder_inside_the_output_is_refused() {
        let dir = std::env::temp_dir().join(format!("vramlab-links-{}", std::process::id()));
        let (out, elsewhere) = (dir.join("out"), dir.join("elsewhere"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("plots")).unwrap();
        let _one_root = ONE_ROOT.lock().unwrap_or_else(|e| e.into_inner());
        set_output_root(&out);
        let err = write_atomically(&out.join("plots/a.png"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a symbolic link inside the output folder"), "{err}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            0,
            "nothing written through the link"
        );
        write_atomically(&out.join("sub/deeper/b.json"), b"y").unwrap();
        assert_eq!(std::fs::read(out.join("sub/deeper/b.json")).unwrap(), b"y");
        *OUTPUT_ROOT.write().unwrap() = None;
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn special_files_are_neither_replaced_nor_read() {
        for special in ["/dev/null", "/dev/zero"] {
            let err = write_atomically(Path::new(special), b"x").unwrap_err().to_string();
            assert!(err.contains("is a device") && !err.contains('\n'), "{err}");
            let err = read_input(Path::new(special)).unwrap_err().to_string();
            assert!(err.contains("is a device"), "{err}");
        }
        let dir = std::env::temp_dir().join(format!("vramlab-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        assert!(write_atomically(&fifo, b"x")
            .unwrap_err()
            .to_string()
            .contains("is a FIFO"));
        assert!(read_input(&fifo).unwrap_err().to_string().contains("is a FIFO"));
        assert!(read_input(&dir).unwrap_err().to_string().contains("is a folder"));
        std::fs::remove_dir_all(dir).unwrap();
        let err = write_atomically(Path::new(""), b"x").unwrap_err().to_string();
        assert!(err.contains("not a file name"), "{err}");
    }

    /// Issue 40: U+2028, carriage returns and other control characters once reached an error
    /// line raw; a million-digit value made a million-character line.
    #[test]
    fn an_error_line_is_one_bounded_line_a_terminal_shows_as_it_is() {
        assert_eq!(error_line("a\nb\tc"), "a b c");
        assert_eq!(
            error_line("x\u{2028}y\rz\u{1b}[2J\u{85}\u{202e}w"),
            "x\\u{2028}y\\u{d}z\\u{1b}[2J\\u{85}\\u{202e}w"
        );
        assert_eq!(error_line("größe 5 µs"), "größe 5 µs");
        let long = format!("size '{}' is not a number", "9".repeat(1_000_000));
        let line = error_line(&long);
        assert!(line.chars().count() < ERROR_LINE_CHARS + 64, "{}", line.len());
        assert!(
            line.ends_with("... (998023 more characters left out)"),
            "{}",
            &line[line.len() - 60..]
        );
    }
}
