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

    /// `trackJobStatusAndRemoveFinalizers` up to the first write.
    #[allow(clippy::too_many_arguments)]
    fn track(
        &mut self,
        mut ctx: Ctx,
        mut st: Status,
        finished: Option<Condition>,
        prev_succeeded_ix: IndexSet,
        unc_s: &HashSet<String>,
        unc_f: &HashSet<String>,
        mut needs_flush: bool,
        now: Timestamp,
    ) -> Option<StatusWrite> {
        let spec = &self.spec;
        let q_now = quantize(now, self.cfg.speed);
        let mut order: Vec<usize> = (0..ctx.snap.len()).collect();
        if spec.indexed {
            // Completed indexes are introduced in index order; uncounted UIDs follow it too.
            order.sort_by_key(|&i| ctx.snap[i].index.unwrap_or(-1));
        }
        let uids_with_finalizer: HashSet<String> = ctx
            .snap
            .iter()
            .filter(|p| p.finalizer)
            .map(|p| p.uid.clone())
            .collect();
        if clean_uncounted(&mut st, &uids_with_finalizer) {
            needs_flush = true;
        }
        let finishing = finished.is_some();
        let failing = finished
            .as_ref()
            .is_some_and(|f| f.kind != SUCCESS_CRITERIA_MET);
        let mut to_remove = Vec::new();
        let mut new_succeeded_ix = Vec::new();
        let mut reached_max_uncounted = false;
        for &i in &order {
            let p = &ctx.snap[i];
            if !p.finalizer {
                continue;
            }
            let considered_failed = is_pod_failed(spec, p);
            let can_remove = spec.deleting
                || finishing
                || p.phase == Phase::Succeeded
                || (considered_failed
                    && !(spec.per_index()
                        && Self::valid_index(spec, p)
                            .and_then(|ix| ctx.delayed.get(&ix))
                            .is_some_and(|&d| ctx.snap[d].uid == p.uid)));
            if !can_remove {
                continue;
            }
            to_remove.push(p.uid.clone());
            if p.phase == Phase::Succeeded && !unc_f.contains(&p.uid) {
                if spec.indexed {
                    if let Some(ix) = Self::valid_index(spec, p)
                        && !prev_succeeded_ix.contains(ix)
                    {
                        new_succeeded_ix.push(ix);
                        needs_flush = true;
                    }
                } else if !unc_s.contains(&p.uid) {
                    needs_flush = true;
                    st.unc_succeeded.push(p.uid.clone());
                }
            } else if (considered_failed || failing)
                && !unc_f.contains(&p.uid)
                && (!spec.indexed || Self::valid_index(spec, p).is_some())
                && failure_counts(spec, p)
            {
                // When the Job fails, every pod not yet terminated counts as failed.
                needs_flush = true;
                st.unc_failed.push(p.uid.clone());
            }
            if new_succeeded_ix.len() + st.unc_succeeded.len() + st.unc_failed.len()
                >= MAX_UNCOUNTED
            {
                // Keeps .status small; the next sync (status and pod events) carries on.
                reached_max_uncounted = true;
                break;
            }
        }
        if spec.indexed {
            for ix in new_succeeded_ix {
                ctx.succeeded_ix.insert(ix);
            }
            let s = ctx.succeeded_ix.to_string();
            if s != st.completed_indexes {
                needs_flush = true;
            }
            st.succeeded = i32::try_from(ctx.succeeded_ix.len()).unwrap_or(i32::MAX);
            st.completed_indexes = s;
            let fi = ctx.failed_ix.as_ref().map(IndexSet::to_string);
            if fi != st.failed_indexes {
                st.failed_indexes = fi;
                needs_flush = true;
            }
        }
        let terminal = match finished {
            Some(f) if f.kind == FAILURE_TARGET => {
                st.conditions.push(f.clone());
                needs_flush = true;
                Some(Condition::new(FAILED, true, &f.reason, &f.message, q_now))
            }
            Some(f) if f.kind == SUCCESS_CRITERIA_MET => {
                if !st.has_true(SUCCESS_CRITERIA_MET) {
                    st.conditions.push(f.clone());
                    needs_flush = true;
                }
                Some(Condition::new(COMPLETE, true, &f.reason, &f.message, q_now))
            }
            other => other,
        };
        let cont = Continuation {
            at: now,
            status: st.clone(),
            to_remove,
            uids_with_finalizer,
            terminal,
            terminating: ctx.terminating,
            reached_max_uncounted,
        };
        if needs_flush {
            st.written = true;
            let mut cont = cont;
            cont.status.written = true;
            let write = StatusWrite {
                at: now,
                status: st.to_json(),
            };
            self.awaiting = Some(Awaiting::First {
                at: now,
                status: st,
                cont: Box::new(cont),
                backoff: ctx.new_backoff,
            });
            return Some(write);
        }
        self.finish_sync(cont, now)
    }

    /// The rest of a sync: remove finalizers, count the pods that lost them, add the terminal
    /// condition once nothing is uncounted or terminating, and write again if anything changed.
    pub(crate) fn finish_sync(
        &mut self,
        cont: Continuation,
        now: Timestamp,
    ) -> Option<StatusWrite> {
        let speed = self.cfg.speed;
        let mut st = cont.status;
        let mut with_finalizer = cont.uids_with_finalizer;
        let mut touched = false;
        let pos = self.pod_positions();
        for uid in &cont.to_remove {
            if let Some(p) = pos.get(uid).and_then(|&i| self.pods.get_mut(i))
                && p.finalizer
            {
                p.remove_finalizer(now, speed);
                touched = true;
            }
            with_finalizer.remove(uid);
        }
        if touched {
            self.enqueue_batched(now);
        }
        let mut needs_flush = clean_uncounted(&mut st, &with_finalizer);
        if let Some(term) = cont.terminal
            && !cont.reached_max_uncounted
            && st.unc_succeeded.is_empty()
            && st.unc_failed.is_empty()
            && cont.terminating == 0
        {
            let t = quantize(now, speed);
            st.ensure_condition(&term.kind, true, &term.reason, &term.message, t);
            if term.kind == COMPLETE {
                st.completion_time = Some(t);
            }
            needs_flush = true;
        }
        if needs_flush {
            st.written = true;
            let write = StatusWrite {
                at: now,
                status: st.to_json(),
            };
            self.awaiting = Some(Awaiting::Second {
                at: now,
                status: st,
            });
            return Some(write);
        }
        self.api_failures = 0;
        None
    }

    /// `manageJob`: the number of active pods after creating / deleting what the spec asks for.
    fn manage_job(&mut self, ctx: &mut Ctx, now: Timestamp) -> i32 {
        let spec = self.spec.clone();
        let active = ctx.active.len() as i32;
        if spec.suspend {
            let victims = ctx.active.clone();
            let (n, n_ready) = self.delete_pods(ctx, &victims, now, true);
            ctx.terminating += n;
            ctx.ready -= n_ready;
            return active - n;
        }
        let want = match spec.completions {
            None if ctx.succeeded > 0 => active,
            None => spec.parallelism,
            Some(c) => (c.saturating_sub(ctx.succeeded))
                .min(spec.parallelism)
                .max(0),
        };
        let rm_at_least = (active - want).max(0) as usize;
        let mut victims = Self::active_pods_for_removal(&spec, ctx, rm_at_least);
        victims.truncate(MAX_PER_SYNC);
        if !victims.is_empty() {
            // Scale-down (or duplicate indexes): finalizer off first, so these pods are never counted.
            let (n, n_ready) = self.delete_pods(ctx, &victims, now, true);
            ctx.terminating += n;
            ctx.ready -= n_ready;
            return active - n;
        }
        let terminating = if spec.only_replace_failed {
            ctx.terminating
        } else {
            0
        };
        let diff = want - terminating - active;
        if diff <= 0 {
            return active;
        }
        // kubernetes/kubernetes#139428: the recorded build reports 0 active pods while a backoff is
        // pending (the API server then rejects the write when pods are Ready); the fix keeps `active`.
        let stalled = if self.cfg.issue_139428 { 0 } else { active };
        if !spec.per_index() {
            let rem = ctx.new_backoff.remaining(self.backoff_params(), now);
            if rem > 0 {
                self.enqueue_with_delay(now, rem);
                return stalled;
            }
        }
        let mut count = (diff as usize).min(MAX_PER_SYNC);
        let mut indexes: Vec<Option<i32>> = vec![None; count];
        if spec.indexed {
            let mut first = Self::first_pending_indexes(&spec, ctx, count);
            if spec.per_index() {
                let mut ready_now = Vec::new();
                let mut min_wait: Option<i64> = None;
                for ix in first {
                    let wait = ctx.delayed.get(&ix).map_or(0, |&d| {
                        let p = &ctx.snap[d];
                        remaining(
                            self.backoff_params(),
                            p.failure_count + p.ignored_failure_count + 1,
                            Some(finished_time(p, self.cfg.speed)),
                            now,
                        )
                    });
                    if wait == 0 {
                        ready_now.push(ix);
                    } else {
                        min_wait = Some(min_wait.map_or(wait, |m| m.min(wait)));
                    }
                }
                if ready_now.is_empty()
                    && let Some(w) = min_wait
                {
                    self.enqueue_with_delay(now, w);
                    return stalled;
                }
                first = ready_now;
            }
            count = first.len();
            indexes = first.into_iter().map(Some).collect();
        }
        for (k, ix) in indexes.into_iter().enumerate() {
            // Creations go out in slow-start batches of 1, 2, 4 ... each waiting for the previous one.
            let batch = (usize::BITS - (k + 1).leading_zeros() - 1) as f64;
            let created = shift(now, self.secs(batch * CREATE_BATCH_LATENCY));
            let (fc, ifc) = ix
                .and_then(|i| ctx.delayed.get(&i))
                .map_or((0, 0), |&d| self.next_failure_counts(&ctx.snap[d]));
            let pod = pods::create(
                NewPod {
                    job_uid: &spec.uid,
                    job_name: &spec.name,
                    ordinal: self.next_ordinal,
                    index: ix,
                    failure_count: fc,
                    ignored_failure_count: ifc,
                    behaviour: &spec.behaviour,
                    restart_on_failure: spec.restart_on_failure,
                },
                created,
                self.cfg.speed,
            );
            self.next_ordinal += 1;
            self.pods.push(pod);
        }
        if count > 0 {
            self.enqueue_batched(now);
        }
        active + count as i32
    }

    /// `getNewIndexFailureCounts`: the replacement inherits the failed pod's counts plus its failure.
    fn next_failure_counts(&self, replaced: &Pod) -> (i32, i32) {
        match &self.spec.pod_failure_policy {
            Some(rules) if !match_pod_failure_policy(&self.spec, rules, replaced).counts => {
                (replaced.failure_count, replaced.ignored_failure_count + 1)
            }
            _ => (replaced.failure_count + 1, replaced.ignored_failure_count),
        }
    }

    fn enqueue_with_delay(&mut self, now: Timestamp, delay: i64) {
        let d = delay.max(self.secs(BATCH));
        self.enqueue(shift(now, d));
    }

    /// DELETE calls for the pods at `victims` (positions in the snapshot); with `drop_finalizer` the
    /// tracking finalizer is removed first (suspend, scale-down). Returns (deleted, deleted ready).
    fn delete_pods(
        &mut self,
        ctx: &Ctx,
        victims: &[usize],
        now: Timestamp,
        drop_finalizer: bool,
    ) -> (i32, i32) {
        let speed = self.cfg.speed;
        let mut n_ready = 0;
        let pos = self.pod_positions();
        for &i in victims {
            let Some(snap) = ctx.snap.get(i) else {
                continue;
            };
            if snap.ready {
                n_ready += 1;
            }
            if let Some(p) = pos.get(&snap.uid).and_then(|&j| self.pods.get_mut(j)) {
                if drop_finalizer {
                    p.finalizer = false;
                }
                p.delete(now, speed);
            }
        }
        if !victims.is_empty() {
            self.enqueue_batched(now);
        }
        (victims.len() as i32, n_ready)
    }

    /// `activePodsForRemoval`: duplicate / invalid indexes first, then the pods least far along
    /// (`controller.ActivePods` order: pending before running, not ready before ready, ready for less
    /// time first, more restarts first, newest first).
    fn active_pods_for_removal(spec: &JobSpec, ctx: &Ctx, rm_at_least: usize) -> Vec<usize> {
        let speed_free_key = |i: &usize| {
            let p = &ctx.snap[*i];
            let phase = match p.phase {
                Phase::Pending => 0,
                _ => 2,
            };
            (
                phase,
                p.ready,
                Reverse(p.ready_since.map(|t| t.as_second())),
                Reverse(p.restarts),
                Reverse(p.created.as_second()),
                Reverse(p.ordinal),
            )
        };
        let mut rm = Vec::new();
        let mut left = Vec::new();
        if spec.indexed {
            let mut by_index: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            for &i in &ctx.active {
                match Self::valid_index(spec, &ctx.snap[i]) {
                    Some(ix) => by_index.entry(ix).or_default().push(i),
                    None => rm.push(i),
                }
            }
            for (_, mut group) in by_index {
                group.sort_by_key(speed_free_key);
                if let Some(keep) = group.pop() {
                    left.push(keep);
                }
                rm.extend(group);
            }
        } else {
            left = ctx.active.clone();
        }
        if rm.len() < rm_at_least {
            left.sort_by_key(speed_free_key);
            let need = rm_at_least - rm.len();
            rm.extend(left.into_iter().take(need));
        }
        rm
    }

    /// `firstPendingIndexes`: the lowest indexes not succeeded, failed, running (or, when only failed
    /// pods are replaced, still terminating).
    fn first_pending_indexes(spec: &JobSpec, ctx: &Ctx, count: usize) -> Vec<i32> {
        let mut busy = ctx.succeeded_ix.clone();
        for &i in &ctx.active {
            if let Some(ix) = ctx.snap[i].index.filter(|ix| *ix >= 0) {
                busy.insert(ix);
            }
        }
        if spec.only_replace_failed {
            for p in ctx.snap.iter().filter(|p| p.is_terminating()) {
                if let Some(ix) = p.index.filter(|ix| *ix >= 0) {
                    busy.insert(ix);
                }
            }
        }
        if let Some(fi) = &ctx.failed_ix {
            for ix in fi.iter() {
                busy.insert(ix);
            }
        }
        (0..spec.index_limit())
            .filter(|ix| !busy.contains(*ix))
            .take(count)
            .collect()
    }

    /// `getPodsWithDelayedDeletionPerIndex`.
    fn pods_with_delayed_deletion(&self, ctx: &Ctx) -> BTreeMap<i32, usize> {
        let spec = &self.spec;
        let speed = self.cfg.speed;
        let active_ix: HashSet<i32> = ctx
            .active
            .iter()
            .filter_map(|&i| ctx.snap[i].index)
            .collect();
        let mut out: BTreeMap<i32, usize> = BTreeMap::new();
        for (i, p) in ctx.snap.iter().enumerate() {
            let Some(ix) = Self::valid_index(spec, p) else {
                continue;
            };
            if !p.finalizer || !is_pod_failed(spec, p) {
                continue;
            }
            if ctx.succeeded_ix.contains(ix)
                || ctx.failed_ix.as_ref().is_some_and(|f| f.contains(ix))
                || active_ix.contains(&ix)
            {
                continue;
            }
            let abs = |q: &Pod| q.failure_count + q.ignored_failure_count;
            match out.get(&ix) {
                Some(&last) => {
                    let l = &ctx.snap[last];
                    if abs(l) <= abs(p) && finished_time(p, speed) >= finished_time(l, speed) {
                        out.insert(ix, i);
                    }
                }
                None => {
                    out.insert(ix, i);
                }
            }
        }
        out
    }

    /// `isIndexFailed`: FailIndex matched, or a counted failure that exhausted the per-index limit.
    fn is_index_failed(&self, p: &Pod) -> bool {
        let spec = &self.spec;
        if !is_pod_failed(spec, p) {
            return false;
        }
        let counted = match &spec.pod_failure_policy {
            Some(rules) => {
                let v = match_pod_failure_policy(spec, rules, p);
                if v.action == Some(PfpAction::FailIndex) {
                    return true;
                }
                v.counts
            }
            None => true,
        };
        counted
            && spec
                .backoff_limit_per_index
                .is_some_and(|l| p.failure_count >= l)
    }

    /// `getFailJobMessage`: the first failed pod matching a FailJob rule.
    fn fail_job_message(&self, snap: &[Pod]) -> Option<String> {
        let rules = self.spec.pod_failure_policy.as_deref()?;
        snap.iter()
            .filter(|p| is_pod_failed(&self.spec, p))
            .find_map(|p| match_pod_failure_policy(&self.spec, rules, p).fail_job)
    }

    /// `pastBackoffLimitOnFailure` (restartPolicy OnFailure: container restarts count as failures).
    fn past_backoff_limit_on_failure(&self, snap: &[Pod]) -> bool {
        if !self.spec.restart_on_failure {
            return false;
        }
        let restarts: i64 = snap
            .iter()
            .filter(|p| matches!(p.phase, Phase::Running | Phase::Pending))
            .map(|p| i64::from(p.restarts))
            .sum();
        if self.spec.backoff_limit == 0 {
            restarts > 0
        } else {
            restarts >= i64::from(self.spec.backoff_limit)
        }
    }
}

/// `cleanUncountedPodsWithoutFinalizers`: uncounted pods whose finalizer is gone move to the counters.
fn clean_uncounted(st: &mut Status, with_finalizer: &HashSet<String>) -> bool {
    let before = (st.unc_succeeded.len(), st.unc_failed.len());
    st.unc_succeeded.retain(|u| with_finalizer.contains(u));
    st.unc_failed.retain(|u| with_finalizer.contains(u));
    let ds = before.0 - st.unc_succeeded.len();
    let df = before.1 - st.unc_failed.len();
    st.succeeded += ds as i32;
    st.failed += df as i32;
    ds > 0 || df > 0
}
