//! The end-to-end harness: the real `kubesim` and `courier` binaries as separate processes (a
//! management and worker clusters, the controller), driven by kube clients.
//!
//! - [`bin`]: where the binaries are (next to the test executable in the cargo target dir).
//! - [`Proc`]: a child process with its log file; `kill9`, `terminate`, killed on drop.
//! - [`Kubesim`]: one `kubesim serve` process, its URL, kubeconfig and admin endpoint (fault knobs).
//! - [`Env`]: management + workers (registered with `courier cluster add`) + `courier run`.
//! - [`wait_for`]: polling with a timeout that reports the last state seen.
//! - [`job`]: Job manifests with kubesim's `sim/*` pod behaviour annotations.
//! - [`runs`]: "run once" over a whole run, from every worker's pod-start and create logs.

mod cli;
mod env;
mod jobs;
mod process;
pub mod runs;

pub use cli::*;
pub use env::*;
pub use jobs::*;
pub use process::*;
pub use runs::{Ledger, check_each_ran_once};
