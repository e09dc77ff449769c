//! `manageJob` and its helpers: creating and deleting pods, backoff delays, pods picked for
//! removal, failed indexes and failure limits.

use super::*;

impl JobSim {
    /// `manageJob`: the number of active pods after creating / deleting what the spec asks for.
    pub(super) fn manage_job(&mut self, ctx: &mut Ctx, now: Timestamp) -> i32 {
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
    pub(super) fn next_failure_counts(&self, replaced: &Pod) -> (i32, i32) {
        match &self.spec.pod_failure_policy {
            Some(rules) if !match_pod_failure_policy(&self.spec, rules, replaced).counts => {
                (replaced.failure_count, replaced.ignored_failure_count + 1)
            }
            _ => (replaced.failure_count + 1, replaced.ignored_failure_count),
        }
    }

    pub(super) fn enqueue_with_delay(&mut self, now: Timestamp, delay: i64) {
        let d = delay.max(self.secs(BATCH));
        self.enqueue(shift(now, d));
    }

    /// DELETE calls for the pods at `victims` (positions in the snapshot); with `drop_finalizer` the
    /// tracking finalizer is removed first (suspend, scale-down). Returns (deleted, deleted ready).
    pub(super) fn delete_pods(
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
    pub(super) fn active_pods_for_removal(
        spec: &JobSpec,
        ctx: &Ctx,
        rm_at_least: usize,
    ) -> Vec<usize> {
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
    pub(super) fn first_pending_indexes(spec: &JobSpec, ctx: &Ctx, count: usize) -> Vec<i32> {
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
    pub(super) fn pods_with_delayed_deletion(&self, ctx: &Ctx) -> BTreeMap<i32, usize> {
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
    pub(super) fn is_index_failed(&self, p: &Pod) -> bool {
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
    pub(super) fn fail_job_message(&self, snap: &[Pod]) -> Option<String> {
        let rules = self.spec.pod_failure_policy.as_deref()?;
        snap.iter()
            .filter(|p| is_pod_failed(&self.spec, p))
            .find_map(|p| match_pod_failure_policy(&self.spec, rules, p).fail_job)
    }

    /// `pastBackoffLimitOnFailure` (restartPolicy OnFailure: container restarts count as failures).
    pub(super) fn past_backoff_limit_on_failure(&self, snap: &[Pod]) -> bool {
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
