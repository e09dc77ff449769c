//! One `syncJob` of the v1.36 Job controller over the simulated pods (ported in behaviour, not in
//! code, from pkg/controller/job). The controller evaluates a snapshot of the pods taken at the start
//! of the sync, as the real one works on its informer cache: its own deletions in this sync are not
//! visible to the counting later in the same sync.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;

use super::clock::{quantize, shift, since};
use super::pods::{self, NewPod, Phase, Pod};
use super::policy::{
    BackoffParams, BackoffRecord, failure_counts, finished_time, is_pod_failed,
    match_pod_failure_policy, match_success_policy, remaining,
};
use super::sim::{Awaiting, BATCH, Continuation, JobSim, StatusWrite};
use super::spec::{JobSpec, PfpAction, parse_indexes_like_controller};
use super::status::{
    COMPLETE, Condition, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED, Status,
};
use crate::kinds::job::indexes::IndexSet;

mod manage;
mod track;

/// `MaxPodCreateDeletePerSync`.
const MAX_PER_SYNC: usize = 500;
/// `MaxUncountedPods`: at most this many pods are added to `uncountedTerminatedPods` per sync.
const MAX_UNCOUNTED: usize = 500;
/// Time one slow-start batch of pod creations takes (API round trip), model seconds.
const CREATE_BATCH_LATENCY: f64 = 0.015;

pub(crate) const MSG_COMPLETIONS: &str = "Reached expected number of succeeded pods";
pub(crate) const MSG_BACKOFF: &str = "Job has reached the specified backoff limit";
pub(crate) const MSG_DEADLINE: &str = "Job was active longer than specified deadline";
pub(crate) const MSG_MAX_FAILED_INDEXES: &str =
    "Job has exceeded the specified maximal number of failed indexes";
pub(crate) const MSG_FAILED_INDEXES: &str = "Job has failed indexes";

/// Per-sync working state (`syncJobCtx`).
struct Ctx {
    snap: Vec<Pod>,
    /// Positions in `snap` of the active pods.
    active: Vec<usize>,
    ready: i32,
    terminating: i32,
    succeeded: i32,
    succeeded_ix: IndexSet,
    failed_ix: Option<IndexSet>,
    /// Per index, the failed pod whose finalizer stays until its replacement exists.
    delayed: BTreeMap<i32, usize>,
    new_backoff: BackoffRecord,
}

impl JobSim {
    fn backoff_params(&self) -> BackoffParams {
        BackoffParams {
            base: self.cfg.pod_failure_backoff_seconds,
            max: self.cfg.max_pod_failure_backoff_seconds,
            speed: self.cfg.speed,
        }
    }

    fn valid_index(spec: &JobSpec, p: &Pod) -> Option<i32> {
        p.index
            .filter(|i| spec.indexed && *i >= 0 && *i < spec.index_limit())
    }

    /// `syncJob`. Returns the sync's first status write, if it makes one (the rest of the sync then
    /// waits for the host's verdict); otherwise runs the sync to its end.
    pub(crate) fn sync(&mut self, now: Timestamp) -> Option<StatusWrite> {
        if self.spec.managed_elsewhere || self.status.is_finished() {
            self.api_failures = 0;
            return None;
        }
        let speed = self.cfg.speed;
        let q_now = quantize(now, speed);
        let spec = self.spec.clone();
        let mut st = self.status.clone();
        let unc_s: HashSet<String> = st.unc_succeeded.iter().cloned().collect();
        let unc_f: HashSet<String> = st.unc_failed.iter().cloned().collect();
        let snap = self.pods.clone();
        let countable =
            |p: &Pod| p.finalizer && (!spec.indexed || Self::valid_index(&spec, p).is_some());

        let active: Vec<usize> = (0..snap.len()).filter(|&i| snap[i].is_active()).collect();
        let new_succ: Vec<&Pod> = snap
            .iter()
            .filter(|p| countable(p) && !unc_s.contains(&p.uid) && p.phase == Phase::Succeeded)
            .collect();
        let new_fail: Vec<&Pod> = snap
            .iter()
            .filter(|p| countable(p) && !unc_f.contains(&p.uid) && is_pod_failed(&spec, p))
            .collect();
        let succeeded = st.succeeded as usize + new_succ.len() + unc_s.len();
        let failed = st.failed as usize
            + new_fail.iter().filter(|p| failure_counts(&spec, p)).count()
            + unc_f.len();
        if st.start_time.is_none() && !spec.suspend {
            st.start_time = Some(q_now);
        }
        let new_backoff = self.backoff.next(
            &new_succ
                .iter()
                .map(|p| finished_time(p, speed))
                .collect::<Vec<_>>(),
            &new_fail
                .iter()
                .map(|p| finished_time(p, speed))
                .collect::<Vec<_>>(),
        );

        let mut finished: Option<Condition> = st
            .condition(SUCCESS_CRITERIA_MET)
            .filter(|c| c.status)
            .cloned();
        if finished.is_none() {
            if let Some(ft) = st.condition(FAILURE_TARGET).filter(|c| c.status) {
                finished = Some(Condition::new(FAILED, true, &ft.reason, &ft.message, q_now));
            } else if let Some(msg) = self.fail_job_message(&snap) {
                finished = Some(Condition::new(
                    FAILURE_TARGET,
                    true,
                    "PodFailurePolicy",
                    &msg,
                    q_now,
                ));
            }
        }
        if finished.is_none() {
            let deadline = spec.active_deadline.map(|ads| self.secs(ads as f64));
            if failed > spec.backoff_limit.max(0) as usize
                || self.past_backoff_limit_on_failure(&snap)
            {
                finished = Some(Condition::new(
                    FAILURE_TARGET,
                    true,
                    "BackoffLimitExceeded",
                    MSG_BACKOFF,
                    q_now,
                ));
            } else if let (Some(d), Some(start), false) = (deadline, st.start_time, spec.suspend) {
                if since(now, start) >= d {
                    finished = Some(Condition::new(
                        FAILURE_TARGET,
                        true,
                        "DeadlineExceeded",
                        MSG_DEADLINE,
                        q_now,
                    ));
                } else {
                    self.enqueue(shift(start, d));
                }
            }
        }

        let mut ctx = Ctx {
            active,
            ready: 0,
            terminating: snap.iter().filter(|p| p.is_terminating()).count() as i32,
            succeeded: i32::try_from(succeeded).unwrap_or(i32::MAX),
            succeeded_ix: IndexSet::new(),
            failed_ix: None,
            delayed: BTreeMap::new(),
            new_backoff,
            snap,
        };
        ctx.ready = ctx.active.iter().filter(|&&i| ctx.snap[i].ready).count() as i32;
        let mut prev_succeeded_ix = IndexSet::new();
        if spec.indexed {
            let limit = spec.index_limit();
            prev_succeeded_ix = parse_indexes_like_controller(&st.completed_indexes, limit);
            ctx.succeeded_ix = prev_succeeded_ix.clone();
            for p in &ctx.snap {
                if let (Phase::Succeeded, true, Some(ix)) =
                    (p.phase, p.finalizer, Self::valid_index(&spec, p))
                {
                    ctx.succeeded_ix.insert(ix);
                }
            }
            ctx.succeeded = i32::try_from(ctx.succeeded_ix.len()).unwrap_or(i32::MAX);
            if spec.per_index() {
                let mut fi = st
                    .failed_indexes
                    .as_deref()
                    .map(|s| parse_indexes_like_controller(s, limit))
                    .unwrap_or_default();
                for p in &ctx.snap {
                    if let (true, Some(ix)) = (p.finalizer, Self::valid_index(&spec, p))
                        && self.is_index_failed(p)
                    {
                        fi.insert(ix);
                    }
                }
                if finished.is_none() {
                    let n_failed = fi.len();
                    if spec
                        .max_failed_indexes
                        .is_some_and(|m| n_failed > i64::from(m))
                    {
                        finished = Some(Condition::new(
                            FAILURE_TARGET,
                            true,
                            "MaxFailedIndexesExceeded",
                            MSG_MAX_FAILED_INDEXES,
                            q_now,
                        ));
                    } else if n_failed > 0 && n_failed + ctx.succeeded_ix.len() >= i64::from(limit)
                    {
                        finished = Some(Condition::new(
                            FAILURE_TARGET,
                            true,
                            "FailedIndexes",
                            MSG_FAILED_INDEXES,
                            q_now,
                        ));
                    }
                }
                ctx.failed_ix = Some(fi);
                ctx.delayed = self.pods_with_delayed_deletion(&ctx);
            }
            if finished.is_none()
                && let Some(rules) = &spec.success_policy
                && let Some(msg) = match_success_policy(rules, &ctx.succeeded_ix)
            {
                finished = Some(Condition::new(
                    SUCCESS_CRITERIA_MET,
                    true,
                    "SuccessPolicy",
                    &msg,
                    q_now,
                ));
            }
        }

        let mut active_n = ctx.active.len() as i32;
        let mut suspend_changed = false;
        if finished.is_some() {
            // Job finished: delete what still runs, keeping tracking finalizers (counted below).
            let victims = ctx.active.clone();
            let (n, n_ready) = self.delete_pods(&ctx, &victims, now, false);
            active_n -= n;
            ctx.terminating += n;
            ctx.ready -= n_ready;
        } else {
            let mut manage_called = false;
            if !spec.deleting {
                active_n = self.manage_job(&mut ctx, now);
                manage_called = true;
            }
            let complete = match spec.completions {
                None => ctx.succeeded > 0 && active_n == 0,
                Some(c) => ctx.succeeded >= c && active_n == 0,
            };
            if complete {
                finished = Some(Condition::new(
                    SUCCESS_CRITERIA_MET,
                    true,
                    "CompletionsReached",
                    MSG_COMPLETIONS,
                    q_now,
                ));
            } else if manage_called {
                if spec.suspend {
                    if st.ensure_condition(SUSPENDED, true, "JobSuspended", "Job suspended", q_now)
                    {
                        suspend_changed = true;
                        // 1.36 (MutableSchedulingDirectivesForSuspendedJobs): the deadline clock stops.
                        st.start_time = None;
                    }
                } else if st.ensure_condition(SUSPENDED, false, "JobResumed", "Job resumed", q_now)
                {
                    suspend_changed = true;
                    st.start_time = Some(q_now);
                }
            }
        }

        let needs_update = !st.written
            || suspend_changed
            || active_n != st.active
            || ctx.ready != st.ready
            || ctx.terminating != st.terminating;
        st.active = active_n;
        st.ready = ctx.ready;
        st.terminating = ctx.terminating;
        self.track(
            ctx,
            st,
            finished,
            prev_succeeded_ix,
            &unc_s,
            &unc_f,
            needs_update,
            now,
        )
    }
}
