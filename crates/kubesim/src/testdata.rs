//! Locating the recordings kubesim is held to: `crates/kubesim/testdata/` (see its README), inside the
//! repository, so a fresh clone tests itself with nothing beside it.

use std::path::PathBuf;

/// `crates/kubesim/testdata/<sub>` (`apiserver`, `job-traces`, `job-traces/unscheduled`, `replay`).
/// Panics when it is missing, so a test that depends on the recordings fails loudly instead of passing
/// vacuously.
pub fn fixtures_dir(sub: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(sub);
    assert!(
        dir.is_dir(),
        "the recordings were not found at {} (they are part of the repository: is the checkout complete?)",
        dir.display()
    );
    dir
}
