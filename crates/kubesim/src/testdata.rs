//! Locating the shared recordings (`shared/fixtures/...`) that kubesim is held to.

use std::path::PathBuf;

/// The project's shared directory (holding `DESIGN.md`, `fixtures/`, `tools/`): `$COURIER_SHARED` if set,
/// else the first ancestor of this crate that has a `shared/DESIGN.md` beside it.
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("COURIER_SHARED") {
        return Some(PathBuf::from(dir));
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|a| a.join("shared"))
        .find(|p| p.join("DESIGN.md").is_file())
}

/// `shared/fixtures/<sub>`; panics with a message naming the fix when the recordings are missing, so a
/// test that depends on them fails loudly instead of passing vacuously.
pub fn fixtures_dir(sub: &str) -> PathBuf {
    match shared_dir() {
        Some(d) => d.join("fixtures").join(sub),
        None => panic!(
            "the shared recordings were not found: set COURIER_SHARED to the directory holding fixtures/ \
             (normally ../shared next to the repository)"
        ),
    }
}
