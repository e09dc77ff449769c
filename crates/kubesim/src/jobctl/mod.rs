//! A deterministic model of the Kubernetes v1.36 Job controller and of kubelet-like simulated pods,
//! driven by a virtual clock. Pure: no I/O, no tasks, no wall clock — the host passes `now` in.
//!
//! A kubesim worker runs one [`JobSim`] per Job the built-in controller owns (no `spec.managedBy`, or
//! the reserved `kubernetes.io/job-controller`; see [`JobSim::is_managed_elsewhere`]). The simulator
//! does no I/O: each Job's pods live inside its `JobSim` (the host projects them onto Pod objects from
//! [`JobSim::pods`], see `controllers::pods`), and their behaviour comes from the Job's pod-template
//! annotations below. When the Job object goes, [`JobSim::job_deleted`] lets its pods run on (orphaned)
//! or terminate (garbage-collected). What leaves the simulator are the `.status` writes
//! the real controller would make, in the same order, with the same field presence, conditions and
//! messages (held to the recordings in `testdata/job-traces/`).
//!
//! # Driving a `JobSim`
//!
//! ```text
//! let mut sim = JobSim::new(&job, now, &cfg);          // job as stored (defaulted, with metadata.uid)
//! loop {
//!     // on a Job watch event:                          sim.observe(&job, now);
//!     // at sim.next_wakeup() (or after observe):
//!     while let Some(w) = sim.advance(now) {            // w.status = the full .status to PUT
//!         if api.put_status(w.status).is_err() {        // e.g. 422 "cannot set more ready pods than active"
//!             sim.write_rejected();
//!         }
//!     }
//! }
//! ```
//!
//! `advance` pauses after every write so the host can report a rejection before anything else happens;
//! the next `advance` call accepts the write ([`JobSim::advance_all`] is the shortcut for hosts that
//! never reject). A write's `at` is the virtual instant the controller made it (<= `now`). After a rejection the controller keeps its previous view
//! and retries with the workqueue rate limit (1 s, 2 s, 4 s ... 60 s), exactly like the real one.
//! Spec changes (suspend, parallelism, activeDeadlineSeconds, backoffLimit, maxFailedIndexes,
//! deletion ...) go through [`JobSim::observe`]. When a Job gets a `deletionTimestamp` the simulated
//! garbage collector deletes its pods; with Foreground propagation the host may remove the Job once
//! [`JobSim::dependents_gone`]. TTL-after-finished is computed by [`ttl_expiry`] (it applies to
//! `managedBy` Jobs too) and deletes with [`TTL_PROPAGATION`].
//!
//! # Pod behaviour annotations (`spec.template.metadata.annotations`)
//!
//! | annotation | meaning | default |
//! |---|---|---|
//! | `sim/pending-seconds` | time a new pod stays Pending before it is Running and Ready | `0.5` |
//! | `sim/run-seconds` | time from Running to the pod's outcome | `2` |
//! | `sim/outcome` | `succeed` (exit 0), `fail:<exit code>` (`fail` = exit 1), `hang` (runs until deleted), `evict` (see below) | `succeed` |
//! | `sim/term-seconds` | time a deleted Running pod takes to stop (then Failed, exit 143); capped by `terminationGracePeriodSeconds` (past it: exit 137) | `1.5` |
//! | `sim/plan` | JSON object overriding the outcome per pod: key `i<N>` = every pod of completion index N, key `n<N>` = the N-th pod the Job creates (from 0); value `<outcome>` or `<outcome>@<seconds after Running>`, e.g. `{"i0": "succeed@3", "i1": "fail:1@1", "n2": "fail:42"}` | none |
//!
//! An index key wins over an ordinal key. A value without `@` happens at `sim/run-seconds`. All of a
//! pod's containers stop together with the outcome's exit code (so `onExitCodes` rules match any
//! container name of the template). `evict` calls the Eviction API at that time: the pod gets
//! `DisruptionTarget=True` and is deleted (it terminates like any deleted pod), which is what
//! `onPodConditions` rules see. With `restartPolicy: OnFailure` a failing container restarts in place
//! (kubelet crash-loop delay 10 s doubling, at most 300 s) and the restarts count against
//! `backoffLimit`. Malformed values fall back to the defaults. Pods are bound at once; the simulated
//! kubelet adds the latencies seen in the recordings (50 ms to start, 10 ms to report an exit, 20 ms
//! to report a kill, 30 ms to remove a finished deleted pod), and the controller's pod creations go
//! out in slow-start batches of 1, 2, 4 ... taking 15 ms each. Pod names are `<job>-<5 chars>`
//! (Indexed: `<job>-<index>-<5 chars>`) and UIDs are UUID-shaped, both derived deterministically from
//! the Job's UID and the pod's creation ordinal.
//!
//! # Controller model
//!
//! Syncs are triggered like the real workqueue: Job creation and spec changes (new generation) ~50 ms
//! later, pod events and the controller's own status writes with the 1 s batching period
//! (`syncJobBatchPeriod`; an entry already waiting keeps the earlier time), plus activeDeadlineSeconds
//! and pod-failure backoff timers. A sync makes up to two writes 20 ms apart (the two-phase
//! `uncountedTerminatedPods` protocol). Pod-failure backoff is 10 s doubling per failure since the
//! last success, capped at 10 min (`MaxJobPodFailureBackOff` in the v1.36 sources; the docs' "6
//! minutes" is stale), per index with `backoffLimitPerIndex`. Times written to `.status` have 1 s
//! resolution and deadlines / backoffs count from those truncated values, as in the real controller.
//!
//! [`SimConfig::speed`] divides every duration (pod timings, batching, backoffs, deadlines, the 1 s
//! timestamp resolution used for deadline/backoff arithmetic) so a run can go faster than real time.
//! Timestamps written to `.status` are still host times truncated to the second.
//!
//! [`SimConfig::issue_139428`] (default `true`) reproduces kubernetes/kubernetes#139428 as in the
//! recorded v1.36 build: while a pod-failure backoff is pending the controller writes `active: 0` with
//! the real `ready` count, which the API server rejects when pods are Ready (the status then freezes
//! until the backoff expires). Set it to `false` to model 1.36 patch releases carrying the fix.

mod clock;
mod controller;
mod pods;
mod policy;
mod sim;
mod spec;
mod status;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod traces;

use jiff::Timestamp;
use serde_json::Value;

#[cfg(test)]
pub(crate) use pods::pod_name;
pub use pods::{
    ANN_OUTCOME, ANN_PENDING, ANN_PLAN, ANN_RUN, ANN_TERM, DEFAULT_PENDING_SECONDS,
    DEFAULT_RUN_SECONDS, DEFAULT_TERM_SECONDS, EXIT_SIGKILL, EXIT_SIGTERM,
};
pub use sim::{JobSim, PodInfo, StatusWrite};
pub use spec::{BUILTIN_MANAGER, is_managed_elsewhere};

/// Propagation policy of the TTL-after-finished controller's delete call.
pub const TTL_PROPAGATION: &str = "Foreground";

/// Simulation parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// 1.0 = real time; 10.0 = everything 10x faster (pod timings, 1 s batching, backoffs,
    /// deadlines, TTLs). Values that are not finite and positive are treated as 1.0.
    pub speed: f64,
    /// Reproduce kubernetes/kubernetes#139428 as the recorded v1.36 build does (see module docs).
    pub issue_139428: bool,
    /// Pod-failure backoff base (`DefaultJobPodFailureBackOff`), seconds.
    pub pod_failure_backoff_seconds: f64,
    /// Pod-failure backoff cap (`MaxJobPodFailureBackOff`), seconds.
    pub max_pod_failure_backoff_seconds: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            speed: 1.0,
            issue_139428: true,
            pod_failure_backoff_seconds: 10.0,
            max_pod_failure_backoff_seconds: 600.0,
        }
    }
}

impl SimConfig {
    /// Real time (speed 1) with the recorded controller's behaviour.
    pub fn real_time() -> Self {
        Self::default()
    }

    pub fn with_speed(speed: f64) -> Self {
        Self {
            speed,
            ..Self::default()
        }
    }

    pub(crate) fn normalized(mut self) -> Self {
        if !(self.speed.is_finite() && self.speed > 0.0) {
            self.speed = 1.0;
        }
        self
    }
}

/// When the TTL-after-finished controller deletes `job`: the `lastTransitionTime` of its True
/// `Complete` or `Failed` condition plus `spec.ttlSecondsAfterFinished` (divided by `speed`), or
/// `None` when the Job has no TTL, is not finished, or is already being deleted. Works on any Job,
/// including `managedBy` ones. The deletion uses [`TTL_PROPAGATION`] (Foreground: the Job gets a
/// `deletionTimestamp`, the `foregroundDeletion` finalizer and a new generation, and disappears once
/// its pods are gone).
pub fn ttl_expiry(job: &Value, cfg: &SimConfig) -> Option<Timestamp> {
    if job
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return None;
    }
    let ttl = job.pointer("/spec/ttlSecondsAfterFinished")?.as_i64()?;
    let finished_at = job
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .filter(|c| {
            matches!(
                c.get("type").and_then(Value::as_str),
                Some("Complete" | "Failed")
            ) && c.get("status").and_then(Value::as_str) == Some("True")
        })
        .find_map(|c| {
            c.get("lastTransitionTime")?
                .as_str()?
                .parse::<Timestamp>()
                .ok()
        })?;
    let speed = cfg.clone().normalized().speed;
    Some(clock::shift(finished_at, clock::scaled(ttl as f64, speed)))
}
