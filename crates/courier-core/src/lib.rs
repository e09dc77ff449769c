//! courier-core: Courier's decisions as pure functions. Values in, decisions out: no I/O, no async, no
//! clocks (`now` is always an input), so every rule is unit- and property-testable.
//!
//! - [`claim`]: claiming this management cluster's origin id on a worker.
//! - [`selector`]: `courier.dev/cluster-selector` strings, matched against WorkerCluster labels.
//! - [`indexes`]: Job index lists (`completedIndexes`, `failedIndexes`).
//! - [`job`]: the few facts about a Job spec/status the decisions need, read from JSON or typed values.
//! - [`job_status`]: a Job's status as the caches keep it (compact, lossless).
//! - [`mirror`]: building a mirror Job from an origin's JSON.
//! - [`namespaces`]: whether a Job's namespace may be created on a worker, and its Pod Security labels.
//! - [`drift`]: spec changes that flow down to the mirror, judged against what was last sent.
//! - [`hints`]: what the controller learnt from workers' answers (refusals, name conflicts), with
//!   per-cluster backoff.
//! - [`placed`]: the `courier.dev/Placed` condition saying why a Job cannot be placed.
//! - [`ownership`]: whose a remote Job is (current mirror, stale mirror, someone else's).
//! - [`placement`]: which worker cluster gets a Job, or why none can.
//! - [`dispatched`]: the `courier.dev/Dispatched` condition recording which epoch has reported.
//! - [`status`]: translating a mirror's status into the origin's, always a legal transition.
//! - [`reconcile`]: `decide`, the whole controller brain for one origin Job.
//! - [`workload`]: the seam for what is specific to the kind dispatched (building the mirror, spec
//!   drift, status translation, whether a run is over); [`batch_job`] implements it for `batch/v1`
//!   Jobs, and `decide` is generic over it.
//! - [`phase`]: the one vocabulary for where a Job is in its life (CLI, web view, metrics).

pub mod batch_job;
pub mod claim;
pub mod compact;
pub mod dispatched;
pub mod drift;
pub mod hints;
pub mod indexes;
pub mod job;
pub mod job_status;
pub mod merge_patch;
pub mod mirror;
pub mod namespaces;
pub mod ownership;
pub mod phase;
pub mod placed;
pub mod placement;
pub mod reconcile;
pub mod selector;
pub mod status;
pub mod workload;
