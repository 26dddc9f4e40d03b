//! Stamps the commit this Python module is built from as `VRAMLAB_COMMIT`
//! (`env!("VRAMLAB_COMMIT")`, handed to `experiments::set_code_commit` first thing in the
//! module's init), the way ripgrep stamps its revision: `VRAMLAB_COMMIT` from the environment if
//! set, else git's HEAD, else `unknown`.
//!
//! It reruns only when HEAD moves (the HEAD file on checkout, the branch it names on commit) or
//! `VRAMLAB_COMMIT` changes, and then only this package rebuilds. It does not watch the index
//! (every `git add` would rebuild) and so does not say `-dirty`: a build from uncommitted edits
//! names the commit they sit on. The root package's build.rs is the same for the CLI: both include commit_stamp.rs.

include!("../commit_stamp.rs");
