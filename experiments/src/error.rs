use std::path::PathBuf;

/// What can go wrong reading experiment files, profiles, traces and records.
///
/// Every variant renders as one line that names the file, the line or the value at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A TOML file that does not parse, or does not have the expected shape.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file (or built-in name) that was read.
        file: String,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
        /// What the parser said, on one line.
        message: String,
    },
    /// A parameter whose value the experiment family cannot run.
    #[error("{file}: experiment '{experiment}': {param} = {value}: {reason}")]
    InvalidParam {
        /// The suite file.
        file: String,
        /// The experiment's name.
        experiment: String,
        /// The parameter's name.
        param: String,
        /// The offending value, as written.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A name that matches no known item; lists the valid ones.
    #[error("unknown {kind} '{name}'{}; valid {}: {}", suggestion(name, valid), plural(kind), distinct(valid).join(", "))]
    Unknown {
        /// "experiment", "suite", "profile", ...
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist.
        valid: Vec<String>,
    },
    /// The caller asked the work to stop ([`cancel::Token::cancel`](crate::cancel::Token::cancel)).
    #[error("cancelled")]
    Cancelled,
    /// Reading or writing a file failed.
    #[error("{}: {reason}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The operating system's error (shown in the message, so not chained as a source).
        reason: std::io::Error,
    },
    /// A JSON record that does not parse.
    #[error("{}: {reason}", path.display())]
    Json {
        /// The file concerned.
        path: PathBuf,
        /// serde_json's error (it names line and column; shown in the message, not chained).
        reason: serde_json::Error,
    },
    /// A trace that cannot be read or replayed, already worded for the user (naming the file).
    #[error("{0}")]
    Trace(String),
    /// Allocator settings that do not parse or cannot run (a `PYTORCH_ALLOC_CONF`, a policy and
    /// its parameters, a cap), already worded for the user.
    #[error("{0}")]
    Settings(String),
    /// Anything else that is wrong with a value, already worded for the user.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, reason: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            reason,
        }
    }

    /// Turns a `toml` error into a one-line [`Error::Syntax`] naming line and column.
    pub fn from_toml(file: &str, text: &str, err: &toml::de::Error) -> Self {
        let offset = err.span().map(|span| span.start).unwrap_or(0);
        let (line, column) = line_column(text, offset);
        Error::Syntax {
            file: file.to_string(),
            line,
            column,
            message: err.message().replace('\n', " ").trim().to_string(),
        }
    }
}

/// The names, each once, in their order.
fn distinct(names: &[String]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for name in names {
        if !seen.contains(&name.as_str()) {
            seen.push(name);
        }
    }
    seen
}

/// " (did you mean 'x'?)" where one valid name is close to the one given: it starts with it or
/// with it less a last letter, or is within two edits of it.
fn suggestion(name: &str, valid: &[String]) -> String {
    let close = |candidate: &str| {
        let stem = name.strip_suffix('s').unwrap_or(name);
        (!name.is_empty() && candidate.starts_with(name))
            || (stem.len() >= 3 && candidate.starts_with(stem))
            || edits(name, candidate) <= 2
    };
    match distinct(valid).into_iter().find(|candidate| close(candidate)) {
        Some(candidate) if candidate != name => format!(" (did you mean '{candidate}'?)"),
        _ => String::new(),
    }
}

/// Levenshtein distance, for names of a few letters (quadratic, and capped at 64 letters).
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().take(64).collect(), b.chars().take(64).collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// "policy" -> "policies", "profile" -> "profiles".
fn plural(kind: &str) -> String {
    match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{kind}s"),
    }
}

/// 1-based line and column of a byte offset in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_name_is_suggested_and_each_name_listed_once() {
        let valid: Vec<String> = ["all", "transfers", "growth", "growth"].map(String::from).to_vec();
        let unknown = |name: &str| {
            Error::Unknown {
                kind: "suite or experiment",
                name: name.into(),
                valid: valid.clone(),
            }
            .to_string()
        };
        assert!(
            unknown("transfer").contains("(did you mean 'transfers'?)"),
            "{}",
            unknown("transfer")
        );
        assert!(unknown("grwoth").contains("(did you mean 'growth'?)"));
        assert!(!unknown("banks").contains("did you mean"));
        assert_eq!(unknown("x").matches("growth").count(), 1);
    }

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }
}
