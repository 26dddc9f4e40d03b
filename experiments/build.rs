//! Embeds the commit of the code being built (`VRAMLAB_COMMIT` if set, else git's HEAD, with
//! `-dirty` when the tree has uncommitted changes), so every record says what code made it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=VRAMLAB_COMMIT");
    // HEAD moves on commit and checkout; the index changes with every staged edit.
    for path in ["../.git/HEAD", "../.git/index"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("VRAMLAB_COMMIT").ok().or_else(|| {
        let head = git(&["rev-parse", "--short=12", "HEAD"])?;
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        Some(if dirty { format!("{head}-dirty") } else { head })
    });
    println!(
        "cargo:rustc-env=VRAMLAB_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
