//! `JobSim`: one Job's simulated pods plus its Job controller, driven by a virtual clock.

use std::collections::{HashMap, HashSet, VecDeque};

use jiff::Timestamp;
use serde_json::Value;

use super::SimConfig;
use super::clock::{Nanos, scaled, shift};
use super::pods::{Pod, Step};
use super::policy::BackoffRecord;
use super::spec::JobSpec;
use super::status::{Condition, Status};

// Controller cadence (model seconds; see point 2 of the job traces in `testdata/README.md`).
/// `syncJobBatchPeriod`: pod events and status-only Job updates are synced 1 s later.
pub(crate) const BATCH: f64 = 1.0;
/// Job add / spec change -> sync ("immediate": informer delivery plus worker pickup).
pub(crate) const REACT: f64 = 0.05;
/// First status write -> finalizer removals and the second write of the same sync.
pub(crate) const FLUSH_GAP: f64 = 0.02;
/// Workqueue rate limiter after a failed sync (`DefaultJobApiBackOff`, `MaxJobApiBackOff`).
const API_BACKOFF_BASE: f64 = 1.0;
const API_BACKOFF_MAX: f64 = 60.0;

/// A status write the controller makes: the full `.status` object, and when it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    pub at: Timestamp,
    pub status: Value,
}

/// A read-only view of one simulated pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub name: String,
    pub uid: String,
    /// Creation order within the Job, from 0 (the `nN` plan key).
    pub ordinal: u32,
    pub index: Option<i32>,
    pub phase: &'static str,
    pub ready: bool,
    pub deleting: bool,
    pub tracking_finalizer: bool,
    pub exit_code: Option<i32>,
    /// When the controller created it.
    pub created: Timestamp,
    /// When its current container started running (`None` while waiting).
    pub started_at: Option<Timestamp>,
    /// When it reached Succeeded or Failed.
    pub finished_at: Option<Timestamp>,
    /// When it was deleted.
    pub deleted_at: Option<Timestamp>,
    /// Container restarts (`restartPolicy: OnFailure`).
    pub restarts: i32,
    /// The previous container of a restarted pod: started, finished, exit code.
    pub last_run: Option<(Timestamp, Timestamp, i32)>,
    /// Whether the Eviction API marked it (`DisruptionTarget=True`).
    pub disruption_target: bool,
    /// `batch.kubernetes.io/job-index-failure-count` / `job-index-ignored-failure-count`.
    pub index_failure_count: i32,
    pub index_ignored_failure_count: i32,
}

/// The part of a sync that follows its first status write: finalizer removals, counting, and the
/// terminal condition (`flushUncountedAndRemoveFinalizers` + `enactJobFinished`).
#[derive(Debug, Clone)]
pub(crate) struct Continuation {
    pub at: Timestamp,
    pub status: Status,
    pub to_remove: Vec<String>,
    pub uids_with_finalizer: HashSet<String>,
    pub terminal: Option<Condition>,
    pub terminating: i32,
    /// `MaxUncountedPods` was reached: the Job cannot be declared finished in this sync.
    pub reached_max_uncounted: bool,
}

/// A write handed to the host whose fate is not known yet.
#[derive(Debug, Clone)]
pub(crate) enum Awaiting {
    First {
        at: Timestamp,
        status: Status,
        cont: Box<Continuation>,
        backoff: BackoffRecord,
    },
    Second {
        at: Timestamp,
        status: Status,
    },
}

/// One Job's simulation. See the `jobctl` module documentation for the driving protocol.
#[derive(Debug, Clone)]
pub struct JobSim {
    pub(crate) cfg: SimConfig,
    pub(crate) spec: JobSpec,
    /// The controller's view of `.status` (its last accepted write).
    pub(crate) status: Status,
    pub(crate) pods: Vec<Pod>,
    pub(crate) next_ordinal: u32,
    pub(crate) backoff: BackoffRecord,
    /// The workqueue entry for this Job: when the next sync is due.
    pub(crate) due: Option<Timestamp>,
    pub(crate) api_failures: u32,
    pub(crate) inputs: VecDeque<(Timestamp, JobSpec)>,
    pub(crate) clock: Timestamp,
    pub(crate) cont: Option<Continuation>,
    pub(crate) awaiting: Option<Awaiting>,
    pub(crate) rejected: u32,
    /// The Job object is gone: only the pods (the kubelet's part) go on.
    pub(crate) job_gone: bool,
}

impl JobSim {
    /// A simulation for `job` (as stored: defaulted, with `metadata.uid`) created at `now`. The
    /// controller reacts to the new Job right away (its first sync is ~50 ms later). The Job is
    /// expected to be new; one that is already Complete or Failed is left alone.
    pub fn new(job: &Value, now: Timestamp, cfg: &SimConfig) -> Self {
        let spec = JobSpec::parse(job);
        let mut status = Status::default();
        // A Job handed over already finished (e.g. re-registered with the host) is left alone.
        if let Some(conds) = job.pointer("/status/conditions").and_then(Value::as_array) {
            for c in conds {
                let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
                if c.get("status").and_then(Value::as_str) == Some("True")
                    && (kind == super::status::COMPLETE || kind == super::status::FAILED)
                {
                    status.written = true;
                    status
                        .conditions
                        .push(Condition::new(kind, true, "", "", now));
                }
            }
        }
        let mut sim = Self {
            cfg: cfg.clone().normalized(),
            spec,
            status,
            pods: Vec::new(),
            next_ordinal: 0,
            backoff: BackoffRecord::default(),
            due: None,
            api_failures: 0,
            inputs: VecDeque::new(),
            clock: now,
            cont: None,
            awaiting: None,
            rejected: 0,
            job_gone: false,
        };
        if !sim.spec.managed_elsewhere {
            sim.enqueue(shift(now, sim.secs(REACT)));
        }
        sim
    }

    /// Whether `job` is owned by another controller (`spec.managedBy` set to anything but
    /// `kubernetes.io/job-controller`): the built-in controller skips it entirely, so a host should not
    /// simulate it at all (a `JobSim` built for one stays idle).
    pub fn is_managed_elsewhere(job: &Value) -> bool {
        super::spec::is_managed_elsewhere(job)
    }

    /// The Job object changed at `now` (a spec patch, a new generation, deletion). Takes effect when
    /// `advance` reaches `now`: a new generation or a deletion is synced ~50 ms later, anything else
    /// with the 1 s batching. `.status` in `job` is ignored (the simulator owns it).
    pub fn observe(&mut self, job: &Value, now: Timestamp) {
        if self.spec.managed_elsewhere {
            return;
        }
        self.inputs.push_back((now, JobSpec::parse(job)));
    }

    /// When `advance` must next be called (`None`: nothing will happen until `observe`).
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        if let Some(a) = &self.awaiting {
            return Some(match a {
                Awaiting::First { at, .. } | Awaiting::Second { at, .. } => *at,
            });
        }
        [
            self.cont.as_ref().map(|c| c.at),
            self.pods
                .iter()
                .filter_map(|p| p.next.map(|(t, _)| t))
                .min(),
            self.inputs.front().map(|(t, _)| *t),
            self.sync_due(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the pods and the controller up to `now` and returns the next status write the controller
    /// makes, if one is due by then. The simulation pauses right after a write so that the host can
    /// report its outcome: call `write_rejected` if the API server refused it, otherwise just call
    /// `advance` again (which accepts it). Repeat until `None`.
    pub fn advance(&mut self, now: Timestamp) -> Option<StatusWrite> {
        self.settle();
        loop {
            let pod_next = self
                .pods
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.next.map(|(t, s)| (t, i, s)))
                .min_by_key(|(t, i, _)| (*t, *i));
            let input_next = self.inputs.front().map(|(t, _)| (*t).max(self.clock));
            let cont_next = self.cont.as_ref().map(|c| c.at);
            let sync_next = self.sync_due();
            // Same instant: kubelet first, then the API (Job changes), then the controller.
            let candidates = [
                pod_next.map(|(t, ..)| (t, 0u8)),
                input_next.map(|t| (t, 1)),
                cont_next.map(|t| (t, 2)),
                sync_next.map(|t| (t, 3)),
            ];
            let Some((t, which)) = candidates.into_iter().flatten().min() else {
                self.clock = self.clock.max(now);
                return None;
            };
            if t > now {
                self.clock = self.clock.max(now);
                return None;
            }
            self.clock = self.clock.max(t);
            let t = self.clock;
            let write = match which {
                0 => {
                    if let Some((_, i, step)) = pod_next {
                        self.pod_step(i, step, t);
                    }
                    None
                }
                1 => {
                    if let Some((_, spec)) = self.inputs.pop_front() {
                        self.apply_spec(spec, t);
                    }
                    None
                }
                2 => self.cont.take().and_then(|c| self.finish_sync(c, t)),
                _ => {
                    self.due = None;
                    self.sync(t)
                }
            };
            if write.is_some() {
                return write;
            }
        }
    }

    /// `advance` for hosts that never reject a write: every write due by `now`, in order.
    pub fn advance_all(&mut self, now: Timestamp) -> Vec<StatusWrite> {
        std::iter::from_fn(|| self.advance(now)).collect()
    }

    /// The API server refused the write `advance` just returned. The controller keeps its previous
    /// view of the status, abandons the rest of that sync and retries with the workqueue's rate
    /// limit (1 s, 2 s, 4 s ... up to 60 s, reset by a successful sync), as the real one does.
    pub fn write_rejected(&mut self) {
        let Some(a) = self.awaiting.take() else {
            return;
        };
        let at = match a {
            Awaiting::First { at, .. } | Awaiting::Second { at, .. } => at,
        };
        self.rejected += 1;
        let secs =
            (API_BACKOFF_BASE * 2f64.powi(self.api_failures.min(30) as i32)).min(API_BACKOFF_MAX);
        self.api_failures += 1;
        self.enqueue(shift(at, self.secs(secs)));
    }

    /// How many writes the host has rejected so far.
    pub fn rejected_writes(&self) -> u32 {
        self.rejected
    }

    /// The simulated pods (those whose objects still exist), in creation order.
    pub fn pods(&self) -> Vec<PodInfo> {
        self.pods
            .iter()
            .map(|p| PodInfo {
                name: p.name.clone(),
                uid: p.uid.clone(),
                ordinal: p.ordinal,
                index: p.index,
                phase: p.phase.as_str(),
                ready: p.ready,
                deleting: p.deletion.is_some(),
                tracking_finalizer: p.finalizer,
                exit_code: p.exit_code,
                created: p.created,
                started_at: p.started_at,
                finished_at: p.finished_at,
                deleted_at: p.deletion,
                restarts: p.restarts,
                last_run: p.last_run,
                disruption_target: p
                    .conditions
                    .iter()
                    .any(|(t, s)| t == "DisruptionTarget" && s == "True"),
                index_failure_count: p.failure_count,
                index_ignored_failure_count: p.ignored_failure_count,
            })
            .collect()
    }

    /// Whether every pod object is gone: a Foreground deletion of the Job may complete.
    pub fn dependents_gone(&self) -> bool {
        self.pods.is_empty()
    }

    /// The Job object was removed at `now` (Background propagation, or after its `orphan` /
    /// `foregroundDeletion` finalizer went). The controller stops; the pods lose their tracking
    /// finalizers (the real controller releases the pods of a Job that is gone) and, unless the Job
    /// was deleted with Orphan propagation, the garbage collector deletes them. Orphaned pods run on
    /// to their own end. Keep calling `advance` until [`JobSim::settled`].
    pub fn job_deleted(&mut self, now: Timestamp) {
        self.settle();
        self.job_gone = true;
        self.cont = None;
        self.awaiting = None;
        self.due = None;
        self.inputs.clear();
        let speed = self.cfg.speed;
        let orphan = self.spec.orphaning;
        for p in &mut self.pods {
            p.remove_finalizer(now, speed);
            if !orphan {
                p.delete(now, speed);
            }
        }
    }

    /// Whether nothing is left to simulate: every pod is gone or terminal (a pod hanging forever can
    /// still be deleted) and nothing is due.
    pub fn settled(&self) -> bool {
        self.next_wakeup().is_none() && self.pods.iter().all(|p| p.is_terminal())
    }

    /// A pod of this Job was deleted by someone else (a DELETE of its object) at `now`: it
    /// terminates like a pod the controller deletes. False when no such pod exists.
    pub fn delete_pod(&mut self, uid: &str, now: Timestamp) -> bool {
        let speed = self.cfg.speed;
        let Some(p) = self.pods.iter_mut().find(|p| p.uid == uid) else {
            return false;
        };
        p.delete(now, speed);
        if !self.job_gone {
            self.enqueue_batched(now);
        }
        true
    }

    /// The pod `old` is known by another UID from now on (the UID its API object was given), so the
    /// UIDs the controller writes into `uncountedTerminatedPods` are the objects' UIDs.
    pub fn set_pod_uid(&mut self, old: &str, new: &str) {
        for p in &mut self.pods {
            if p.uid == old {
                p.uid = new.to_string();
            }
        }
    }

    /// The `.status` as last accepted.
    pub fn status(&self) -> Value {
        self.status.to_json()
    }

    // ---- internals -------------------------------------------------------------------------

    pub(crate) fn secs(&self, s: f64) -> Nanos {
        scaled(s, self.cfg.speed)
    }

    /// `queue.AddAfter`: an entry already waiting keeps the earlier of the two times.
    pub(crate) fn enqueue(&mut self, at: Timestamp) {
        if self.spec.managed_elsewhere {
            return;
        }
        self.due = Some(self.due.map_or(at, |d| d.min(at)));
    }

    pub(crate) fn enqueue_batched(&mut self, now: Timestamp) {
        self.enqueue(shift(now, self.secs(BATCH)));
    }

    /// A sync cannot start while the previous one is still finishing (the queue never runs one key
    /// twice at once).
    fn sync_due(&self) -> Option<Timestamp> {
        if self.cont.is_some() || self.job_gone {
            None
        } else {
            self.due
        }
    }

    /// The host moved on without rejecting the pending write: it was accepted.
    fn settle(&mut self) {
        match self.awaiting.take() {
            Some(Awaiting::First {
                at,
                status,
                mut cont,
                backoff,
            }) => {
                self.status = status;
                self.backoff = backoff;
                self.enqueue_batched(at);
                cont.at = shift(at, self.secs(FLUSH_GAP));
                self.cont = Some(*cont);
            }
            Some(Awaiting::Second { at, status }) => {
                self.status = status;
                self.enqueue_batched(at);
                self.api_failures = 0;
            }
            None => {}
        }
    }

    fn pod_step(&mut self, i: usize, step: Step, now: Timestamp) {
        let speed = self.cfg.speed;
        if step == Step::Gone {
            self.pods.remove(i);
        } else if let Some(p) = self.pods.get_mut(i) {
            p.step(step, now, speed);
        }
        self.enqueue_batched(now);
    }

    fn apply_spec(&mut self, spec: JobSpec, now: Timestamp) {
        let new_generation = spec.generation != self.spec.generation;
        let newly_deleting = spec.deleting && !self.spec.deleting;
        self.spec = spec;
        if newly_deleting && !self.spec.orphaning {
            // The garbage collector deletes the Job's pods (Background or Foreground propagation).
            let speed = self.cfg.speed;
            for p in &mut self.pods {
                p.delete(now, speed);
            }
        }
        if new_generation || newly_deleting {
            self.enqueue(shift(now, self.secs(REACT)));
        } else {
            self.enqueue_batched(now);
        }
    }

    /// Positions of the pods by UID (one lookup table per batch of changes, not a scan per pod).
    pub(crate) fn pod_positions(&self) -> HashMap<String, usize> {
        self.pods
            .iter()
            .enumerate()
            .map(|(i, p)| (p.uid.clone(), i))
            .collect()
    }
}
