//! `trackJobStatusAndRemoveFinalizers` and the rest of a sync: counting pods that lost their
//! finalizers, terminal conditions and the status writes.

use super::*;

impl JobSim {
    /// `trackJobStatusAndRemoveFinalizers` up to the first write.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn track(
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
