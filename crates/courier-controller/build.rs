//! Sets `COURIER_BUILD_COMMIT` for `courier_build_info`: `$COURIER_COMMIT` when the build passes it
//! (the Dockerfile's build argument: its context has no .git), else the checkout's
//! `git rev-parse --short=12 HEAD`, else `unknown`.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=COURIER_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&dir);
    let passed = std::env::var("COURIER_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty());
    let commit = passed.or_else(|| {
        let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
        // Rebuild when HEAD moves: HEAD itself (checkout), the branch it points at (commit), and
        // packed-refs (gc). Only files that exist: a missing one would re-run this on every build.
        let branch = git(dir, &["symbolic-ref", "-q", "HEAD"]);
        for name in ["HEAD", "packed-refs"]
            .into_iter()
            .map(str::to_string)
            .chain(branch)
        {
            if let Some(path) = git(
                dir,
                &["rev-parse", "--path-format=absolute", "--git-path", &name],
            ) && Path::new(&path).exists()
            {
                println!("cargo:rerun-if-changed={path}");
            }
        }
        Some(commit)
    });
    let commit = commit.unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=COURIER_BUILD_COMMIT={commit}");
}
