// The commit stamp both build scripts use (build.rs for the CLI, python/build.rs for the Python
// module), included whole: a build script cannot depend on a crate of its own workspace.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", file!());
    println!("cargo:rerun-if-env-changed=VRAMLAB_COMMIT");
    // `--git-path` finds the files wherever they are (worktrees, GIT_DIR); relative to this
    // package's folder, where build scripts run. A branch only in packed-refs moves there.
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let loose = git(&["rev-parse", "--git-path", &branch]);
        let packed = loose.as_ref().is_some_and(|p| !Path::new(p).exists());
        watch.push(loose);
        if packed {
            watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
        }
    }
    for path in watch.into_iter().flatten() {
        // A path that does not exist would rerun this on every build.
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("VRAMLAB_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=VRAMLAB_COMMIT={commit}");
}
