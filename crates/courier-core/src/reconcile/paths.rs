//! The paths of `decide`: deletion, fencing, terminal origins, first placement, following the
//! intent (status up, spec down), losing a mirror or a worker, refusals and removals.

use courier_api::ANNOTATION_CLUSTER_SELECTOR;
use courier_api::reasons::{
    EVENT_DISPATCH_FAILED, EVENT_DISPATCHED, EVENT_MIRROR_CONFLICT, EVENT_MIRROR_LOST,
    EVENT_MIRROR_ORPHANED, EVENT_MIRROR_OUT_OF_SYNC, EVENT_MIRROR_RECREATED,
    EVENT_NO_ELIGIBLE_CLUSTER, EVENT_REDISPATCHED, JOB_REASON_DISPATCH_FAILED,
    REASON_CLUSTER_REMOVED, REASON_MIRROR_REJECTED, REASON_NAMESPACE_MISSING,
    REASON_NO_ELIGIBLE_CLUSTER,
};

use super::plan::Plan;
use super::{ActionOf, EventType, MirrorOf, ObservationOf, Wait, add, human, until_duration};
use crate::hints::{AvoidKind, refusal_reasons, rejection};
use crate::ownership::{Intent, Ownership, classify};
use crate::placement::{Exclusions, Ineligibility, NoEligibleCluster, choose_cluster};
use crate::workload::{MirrorReport, Workload};

/// How the intent cluster is doing.
pub(super) enum Health {
    Ready,
    /// Not Ready; lost at the deadline (if the transition time is known).
    NotReady {
        lost_at: Option<jiff::Timestamp>,
    },
    /// Gone for good as far as this origin is concerned.
    Lost {
        why: String,
    },
}

/// Whether losing a mirror uses the re-dispatch budget, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tally {
    Counted,
    /// The mirror had not reported: nothing had run.
    NotReported,
    /// The origin is suspended: suspending is the user's choice.
    Suspended,
    /// The Job's WorkerCluster was removed under it.
    Removed,
}

impl Tally {
    fn counted(self) -> bool {
        self == Tally::Counted
    }

    fn note(self) -> &'static str {
        match self {
            Tally::Counted => "",
            Tally::NotReported => "not counted: the mirror had not reported",
            Tally::Suspended => "not counted: the Job is suspended",
            Tally::Removed => "not counted: its WorkerCluster was removed",
        }
    }
}

/// Why a new placement is made.
pub(super) enum Cause {
    First,
    /// The intent cluster has someone else's Job with our name; nothing of ours ran there.
    ConflictBeforeStart {
        cluster: String,
    },
    /// The current mirror or its worker was lost.
    Lost {
        what: String,
        tally: Tally,
    },
    /// The intent cluster refused the mirror or did not answer its create; nothing ran there.
    Rejected {
        cluster: String,
        kind: AvoidKind,
        message: String,
    },
    /// The intent cluster's WorkerCluster is being deleted.
    Removed {
        cluster: String,
    },
}

impl<'a, W: Workload> Plan<'a, W> {
    /// How losing the current mirror counts (`reported`: it had reported).
    fn tally(&self, reported: bool) -> Tally {
        if !reported {
            Tally::NotReported
        } else if W::suspended(&self.origin().spec) {
            Tally::Suspended
        } else if W::removed_from_cluster(&self.origin().status) {
            Tally::Removed
        } else {
            Tally::Counted
        }
    }

    // ---- deletion, fencing, terminal ----

    pub(super) fn delete_everything(&mut self) {
        for (cluster, m, verdict) in self.ours.clone() {
            if m.deleting {
                continue;
            }
            let delete = Self::delete_action(cluster, m);
            // The current mirror's delete precedes the finalizer removal; stale ones stand alone
            // (garbage collection deletes them if they cannot be deleted now).
            if verdict == Ownership::Current {
                self.push(delete);
            } else {
                self.side(vec![delete]);
            }
        }
        if !self.origin().has_finalizer() {
            return;
        }
        if let Some(intent) = self.intent.clone()
            && matches!(self.observation(&intent.cluster), ObservationOf::Unknown)
            && self.cluster_view(&intent.cluster).is_some()
        {
            let started = self.origin().deletion_timestamp.unwrap_or(self.now());
            let until = add(started, self.config().worker_lost_timeout);
            if self.now() < until {
                self.wait(Wait::DeletionBlocked {
                    cluster: intent.cluster.clone(),
                    until,
                });
                self.requeue_after(
                    until_duration(self.now(), until).min(self.config().retry_interval),
                );
                return;
            }
            self.event(
                EVENT_MIRROR_ORPHANED,
                EventType::Warning,
                format!(
                    "WorkerCluster {} stayed unreachable for {} after deletion started; its mirror (epoch {}), if any, is left to garbage collection",
                    intent.cluster,
                    human(self.config().worker_lost_timeout),
                    intent.epoch
                ),
            );
        }
        self.remove_finalizer();
    }

    pub(super) fn fence_stale(&mut self) {
        for (cluster, m, verdict) in self.ours.clone() {
            let Ownership::Stale { epoch } = verdict else {
                continue;
            };
            if m.deleting {
                continue;
            }
            // A mirror ahead of the cached intent may be current for an origin the cache has not
            // caught up with (a placement written elsewhere): only a fresh read may condemn it.
            let ahead = match (&self.intent, epoch) {
                (Some(i), Some(e)) => e > i.epoch,
                _ => true,
            };
            if ahead && !self.fresh() {
                self.needs_fresh = true;
                continue;
            }
            self.side(vec![Self::delete_action(cluster, m)]);
        }
    }

    pub(super) fn keep_terminal(&mut self) {
        if let Some((cluster, m, at)) = self.cleanup(&self.origin().status) {
            let now = self.now();
            if now >= at {
                self.side(vec![Self::delete_action(cluster, m)]);
            } else {
                self.requeue_after(until_duration(now, at));
            }
        }
        self.repair_intent();
    }

    /// The origin is written `status`, which finishes it: the decision after the write would keep
    /// it terminal ([`Self::keep_terminal`]). Its finished mirror's TTL is scheduled here; a delete
    /// must follow the write, so that decision is asked for.
    pub(super) fn after_finishing(&mut self, status: &W::Status) {
        if let Some((_, _, at)) = self.cleanup(status) {
            let now = self.now();
            if now >= at {
                self.after_write = true;
            } else {
                self.requeue_after(until_duration(now, at));
            }
        }
    }

    /// When the current mirror goes once the origin's status is the terminal `status`: at once if it
    /// still runs or its cluster is being removed, else `finished_mirror_ttl` after the origin
    /// finished; `None` if it stays (or is going already).
    fn cleanup(&self, status: &W::Status) -> Option<(&'a str, &'a MirrorOf<W>, jiff::Timestamp)> {
        let (cluster, m) = self.current_mirror().filter(|(_, m)| !m.deleting)?;
        let now = self.now();
        if W::finished(&m.status).is_none() || self.draining(cluster) {
            return Some((cluster, m, now));
        }
        let ttl = self.config().finished_mirror_ttl?;
        // When the origin finished (its terminal state), on the management cluster's clock.
        let since = W::finished_at(status).map_or(now, |t| t.min(now));
        Some((cluster, m, add(since, ttl)))
    }

    fn repair_intent(&mut self) -> bool {
        match self.intent.clone() {
            Some(intent) if self.intent_needs_repair => {
                self.write_intent(&intent, self.redispatches)
            }
            _ => false,
        }
    }

    // ---- placement ----

    pub(super) fn first_placement(&mut self) {
        if W::suspended(&self.origin().spec) {
            self.status_without_mirror();
            self.wait(Wait::Suspended);
            return;
        }
        self.place(Cause::First, Exclusions::new());
    }

    pub(super) fn place(&mut self, cause: Cause, mut exclude: Exclusions) {
        for (cluster, why) in self.exclusions() {
            exclude.entry(cluster).or_insert(why);
        }
        let selector = self.origin().cluster_selector();
        let too_long = self
            .origin()
            .oversized
            .iter()
            .any(|k| k == ANNOTATION_CLUSTER_SELECTOR);
        let chosen = if too_long {
            Err(NoEligibleCluster::SelectorTooLong {
                max: super::view::MAX_ORIGIN_VALUE,
            })
        } else {
            choose_cluster(
                self.input.clusters,
                selector,
                self.input.namespace_labels,
                &exclude,
            )
            .map(|c| c.name.to_string())
        };
        let cluster = match chosen {
            Ok(cluster) => cluster,
            Err(e) => return self.unplaceable(&cause, &e),
        };
        let counted = matches!(cause, Cause::Lost { tally, .. } if tally.counted());
        let redispatches = self.redispatches + u32::from(counted);
        let intent = Intent {
            cluster,
            epoch: self.next_epoch,
        };
        if !self.write_intent(&intent, redispatches) {
            return;
        }
        self.announce(cause, &intent, redispatches);
        self.create_mirror(&intent);
    }

    fn announce(&mut self, cause: Cause, intent: &Intent, redispatches: u32) {
        let to = format!("{} as epoch {}", intent.cluster, intent.epoch);
        match cause {
            Cause::First => {}
            Cause::ConflictBeforeStart { cluster } => self.event(
                EVENT_MIRROR_CONFLICT,
                EventType::Normal,
                format!(
                    "moved from {cluster} to {} (epoch {}) because of the name conflict",
                    intent.cluster, intent.epoch
                ),
            ),
            Cause::Lost { what, tally } => {
                let note = if tally.counted() {
                    format!(
                        "re-dispatch {redispatches} of {}",
                        self.config().max_redispatch
                    )
                } else {
                    tally.note().to_string()
                };
                self.event(
                    EVENT_REDISPATCHED,
                    EventType::Warning,
                    format!("{what}: re-dispatched to {to} ({note})"),
                );
            }
            Cause::Rejected {
                cluster,
                kind,
                message,
            } => {
                let tail = if kind == AvoidKind::Unanswered {
                    "; a mirror it may have created there is deleted once it answers"
                } else {
                    ""
                };
                self.event(
                    refusal_reasons(kind).1,
                    EventType::Warning,
                    format!(
                        "{}; placed on {to}{tail}",
                        rejection(&cluster, kind, &message)
                    ),
                );
            }
            Cause::Removed { cluster } => self.event(
                EVENT_REDISPATCHED,
                EventType::Warning,
                format!(
                    "WorkerCluster {cluster} is being removed: re-dispatched to {to} ({})",
                    Tally::Removed.note()
                ),
            ),
        }
    }

    /// No cluster can take the Job: the origin says why (`courier.dev/Placed=False`), announced
    /// once per change; retried when clusters change, at the next refusal's expiry, or after the
    /// retry interval.
    fn unplaceable(&mut self, cause: &Cause, e: &NoEligibleCluster) {
        let (mut only_refusals, mut only_missing) = (false, false);
        if let NoEligibleCluster::NoneEligible { rejected, .. } = e {
            let relevant: Vec<_> = rejected
                .iter()
                .filter(|(_, r)| {
                    !matches!(
                        r,
                        Ineligibility::SelectorMismatch
                            | Ineligibility::NamespaceNotSelected
                            | Ineligibility::NamespaceNotListed
                    )
                })
                .collect();
            only_refusals = !relevant.is_empty() && relevant.iter().all(|(_, r)| r.is_refusal());
            only_missing = only_refusals
                && (relevant.iter()).all(|(_, r)| *r == Ineligibility::NamespaceMissing);
        }
        let (reason, event, mut message) = match cause {
            Cause::Removed { cluster } => (
                REASON_CLUSTER_REMOVED,
                EVENT_NO_ELIGIBLE_CLUSTER,
                format!(
                    "WorkerCluster {cluster} is being removed and no other can take the Job: {e}"
                ),
            ),
            Cause::Rejected {
                cluster,
                kind,
                message,
            } => (
                refusal_reasons(*kind).0,
                refusal_reasons(*kind).1,
                format!(
                    "{}; no other WorkerCluster can take the Job: {e}",
                    rejection(cluster, *kind, message)
                ),
            ),
            Cause::First => (
                REASON_NO_ELIGIBLE_CLUSTER,
                EVENT_NO_ELIGIBLE_CLUSTER,
                e.to_string(),
            ),
            Cause::ConflictBeforeStart { cluster } => (
                REASON_NO_ELIGIBLE_CLUSTER,
                EVENT_NO_ELIGIBLE_CLUSTER,
                format!("cannot move away from {cluster}: {e}"),
            ),
            // Its WorkerCluster went away under it: still the reason (and what keeps the loss
            // uncounted once the WorkerCluster is gone).
            Cause::Lost {
                what,
                tally: Tally::Removed,
            } => (
                REASON_CLUSTER_REMOVED,
                EVENT_NO_ELIGIBLE_CLUSTER,
                format!("{what}; cannot re-dispatch: {e}"),
            ),
            Cause::Lost { what, .. } => (
                REASON_NO_ELIGIBLE_CLUSTER,
                EVENT_NO_ELIGIBLE_CLUSTER,
                format!("{what}; cannot re-dispatch: {e}"),
            ),
        };
        let reason = match reason {
            REASON_NO_ELIGIBLE_CLUSTER if only_missing => REASON_NAMESPACE_MISSING,
            REASON_NO_ELIGIBLE_CLUSTER if only_refusals => REASON_MIRROR_REJECTED,
            other => other,
        };
        let rejected_by = match cause {
            Cause::Rejected { cluster, .. } => Some(cluster.as_str()),
            _ => None,
        };
        for (cluster, a) in self.input.hints.in_force(self.now()) {
            if a.kind != AvoidKind::Foreign && Some(cluster.as_str()) != rejected_by {
                message.push_str(&format!("; {}", rejection(cluster, a.kind, &a.message)));
            }
        }
        if let Cause::Removed { cluster } = cause
            && let Some((c, m)) = self.current_mirror()
            && c == cluster
            && !m.deleting
        {
            // The Job cannot move, but the WorkerCluster is going: its mirror goes now.
            self.side(vec![Self::delete_action(c, m)]);
        }
        if self.not_placed(reason, &message) {
            self.event(event, EventType::Warning, message.clone());
        }
        self.wait(Wait::NoEligibleCluster { message });
        let mut after = self.config().retry_interval;
        if let Some(t) = self.input.hints.next_expiry(self.now()) {
            after = after.min(until_duration(self.now(), t));
        }
        self.requeue_after(after);
    }

    // ---- following the intent ----

    pub(super) fn health(&self, cluster: &str) -> Health {
        let Some(view) = self.cluster_view(cluster) else {
            return Health::Lost {
                why: format!("WorkerCluster {cluster} is no longer registered"),
            };
        };
        if view.ready {
            return Health::Ready;
        }
        let Some(since) = view.not_ready_since else {
            return Health::NotReady { lost_at: None };
        };
        let lost_at = add(since, self.config().worker_lost_timeout);
        if self.now() >= lost_at {
            Health::Lost {
                why: format!(
                    "WorkerCluster {cluster} has not been Ready since {since} (worker-lost timeout {})",
                    human(self.config().worker_lost_timeout)
                ),
            }
        } else {
            Health::NotReady {
                lost_at: Some(lost_at),
            }
        }
    }

    pub(super) fn follow(&mut self, intent: &Intent) {
        self.repair_intent();
        let existed = self.marker.as_ref() == Some(intent);
        if self.draining(&intent.cluster) {
            return self.removed(intent);
        }
        let health = self.health(&intent.cluster);
        let conflict_hint = self.foreign_hint(&intent.cluster);
        let refused = (!existed)
            .then(|| self.input.hints.avoided(&intent.cluster, self.now()))
            .flatten()
            .filter(|a| match a.kind {
                AvoidKind::Foreign => false,
                AvoidKind::Refused | AvoidKind::NamespaceMissing => true,
                AvoidKind::Unanswered => self.unresponsive(&intent.cluster),
            })
            .cloned();
        match self.observation(&intent.cluster) {
            ObservationOf::Present(m) => {
                match classify(&m.labels, &intent.cluster, self.identity, Some(intent)) {
                    Ownership::Current => self.follow_current(intent, m.as_ref(), health),
                    Ownership::Stale { .. } => {
                        // Deleted by fence_stale; the new epoch's mirror is created once it is gone.
                        self.status_without_mirror();
                        self.wait(Wait::StaleMirrorInTheWay {
                            cluster: intent.cluster.clone(),
                        });
                        self.requeue_after(self.config().short_retry);
                    }
                    Ownership::Foreign | Ownership::OtherOrigin { .. } => {
                        self.conflict_on_intent(intent, existed);
                    }
                }
            }
            // The worker itself answered our create with someone else's Job (caches only show ours).
            _ if conflict_hint => self.conflict_on_intent(intent, existed),
            // It refused the create, or did not answer it: nothing of this epoch ran there.
            _ if refused.is_some() => {
                if let Some(a) = refused {
                    let why = match a.kind {
                        AvoidKind::Unanswered => Ineligibility::Unanswered,
                        AvoidKind::NamespaceMissing => Ineligibility::NamespaceMissing,
                        _ => Ineligibility::Refused,
                    };
                    self.place(
                        Cause::Rejected {
                            cluster: intent.cluster.clone(),
                            kind: a.kind,
                            message: a.message,
                        },
                        Exclusions::from([(intent.cluster.clone(), why)]),
                    );
                }
            }
            ObservationOf::Absent if existed => {
                let tally = self.tally(true);
                self.mirror_lost(
                    format!(
                        "the mirror on {} (epoch {}) was deleted before the Job finished",
                        intent.cluster, intent.epoch
                    ),
                    tally,
                    Exclusions::new(),
                );
            }
            ObservationOf::Absent => {
                // Intent written but the mirror never reported: create it (idempotent).
                self.status_without_mirror();
                self.create_mirror(intent);
            }
            ObservationOf::Unknown => self.intent_cluster_unknown(intent, existed, health),
        }
    }

    fn follow_current(&mut self, intent: &Intent, m: &'a MirrorOf<W>, health: Health) {
        let mirror_finished = W::finished(&m.status).is_some();
        if let Health::Lost { why } = &health
            && !mirror_finished
            && self.config().redispatch_on_worker_loss
        {
            let tally = self.tally(true);
            self.mirror_lost(
                why.clone(),
                tally,
                Exclusions::from([(intent.cluster.clone(), Ineligibility::Lost)]),
            );
            return;
        }
        let translated = W::translate(
            self.origin(),
            Some(MirrorReport {
                status: &m.status,
                placement: intent,
            }),
            self.redispatch_possible(),
            self.now(),
        );
        // A worker that took finished pods out of its gauges and has not counted them yet
        // writes the count next: a change of the gauges alone waits for that write, so the
        // origin gets one write where it would get two (and never shows a finished pod as
        // neither running nor counted). Any other change is copied at once.
        let in_transition =
            |status: &W::Status| m.counting && W::gauges_only(&self.origin().status, status);
        if let Some(status) = translated.filter(|s| !in_transition(s)) {
            let first_report = self.marker.as_ref() != Some(intent)
                && W::reported(&status).as_ref() == Some(intent);
            if self.write_status(status) && first_report {
                self.event(
                    EVENT_DISPATCHED,
                    EventType::Normal,
                    format!(
                        "mirror {} created on {} (epoch {})",
                        self.job_ref(),
                        intent.cluster,
                        intent.epoch
                    ),
                );
            }
        }
        if !mirror_finished && !m.deleting {
            self.drift(intent, m);
        }
        if m.deleting && !mirror_finished {
            self.wait(Wait::MirrorDeleting {
                cluster: intent.cluster.clone(),
            });
            self.requeue_after(self.config().short_retry);
        }
        match health {
            Health::NotReady {
                lost_at: Some(lost_at),
            } => self.requeue_after(until_duration(self.now(), lost_at)),
            Health::Lost { .. } if !mirror_finished => self.wait(Wait::WorkerLost {
                cluster: intent.cluster.clone(),
            }),
            _ => {}
        }
    }

    /// Spec changes flow down (one patch with the hashes of what is sent). A change the worker
    /// refused for this origin generation is applied by recreating the mirror when nothing runs,
    /// otherwise announced once.
    fn drift(&mut self, intent: &Intent, m: &'a MirrorOf<W>) {
        let origin = self.origin();
        let Some(drift) = W::drift(origin, m) else {
            return;
        };
        let what = drift.what.as_str();
        let refused = self
            .input
            .hints
            .out_of_sync
            .as_ref()
            .filter(|o| o.mirror_uid == m.uid && o.generation == origin.generation);
        if let Some(oos) = refused {
            if W::idle(m) {
                self.recreate(intent, what, &oos.message.clone());
            } else if !oos.announced {
                self.event(
                    EVENT_MIRROR_OUT_OF_SYNC,
                    EventType::Warning,
                    format!(
                        "WorkerCluster {} refused the change of {what} on the running mirror (epoch {}): {}; it runs with the previous spec",
                        intent.cluster, intent.epoch, oos.message
                    ),
                );
            }
            return;
        }
        let desired_template = if drift.template {
            let Some(json) = self.input.origin_json else {
                self.needs_fresh = true;
                return;
            };
            W::desired_template(json)
        } else {
            None
        };
        self.side(vec![ActionOf::PatchMirrorSpec {
            cluster: intent.cluster.clone(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            patch: W::drift_patch(origin, &drift, desired_template.is_some()),
            template: desired_template,
        }]);
    }

    /// Applies a refused change by creating the mirror again (nothing runs: it is suspended with
    /// no active pods): a new epoch on the same cluster, not counted.
    fn recreate(&mut self, intent: &Intent, what: &str, message: &str) {
        let next = Intent {
            cluster: intent.cluster.clone(),
            epoch: self.next_epoch,
        };
        if !self.write_intent(&next, self.redispatches) {
            return;
        }
        self.event(
            EVENT_MIRROR_RECREATED,
            EventType::Normal,
            format!(
                "WorkerCluster {} refused the change of {what} on the mirror (epoch {}): {message}; nothing was running, so the mirror is created again as epoch {}",
                intent.cluster, intent.epoch, next.epoch
            ),
        );
        self.create_mirror(&next);
    }

    fn conflict_on_intent(&mut self, intent: &Intent, existed: bool) {
        self.event(
            EVENT_MIRROR_CONFLICT,
            EventType::Warning,
            format!(
                "WorkerCluster {} has a Job {} that is not this Job's mirror; it is left alone",
                intent.cluster,
                self.job_ref()
            ),
        );
        let exclude = Exclusions::from([(intent.cluster.clone(), Ineligibility::Conflict)]);
        if existed {
            let what = format!(
                "the mirror on {} (epoch {}) was replaced by a Job that is not Courier's",
                intent.cluster, intent.epoch
            );
            let tally = self.tally(true);
            self.mirror_lost(what, tally, exclude);
        } else {
            self.place(
                Cause::ConflictBeforeStart {
                    cluster: intent.cluster.clone(),
                },
                exclude,
            );
        }
    }

    fn intent_cluster_unknown(&mut self, intent: &Intent, existed: bool, health: Health) {
        match health {
            Health::Lost { why } if self.config().redispatch_on_worker_loss => {
                let tally = self.tally(existed);
                self.mirror_lost(
                    why,
                    tally,
                    Exclusions::from([(intent.cluster.clone(), Ineligibility::Lost)]),
                );
            }
            Health::Lost { .. } => {
                self.status_without_mirror();
                self.wait(Wait::WorkerLost {
                    cluster: intent.cluster.clone(),
                });
                self.requeue_after(self.config().retry_interval);
            }
            Health::NotReady { lost_at } => {
                self.status_without_mirror();
                self.wait(Wait::ClusterNotReady {
                    cluster: intent.cluster.clone(),
                    lost_at,
                });
                let after = lost_at.map_or(self.config().retry_interval, |t| {
                    until_duration(self.now(), t)
                });
                self.requeue_after(after);
            }
            Health::Ready => {
                self.status_without_mirror();
                self.wait(Wait::ClusterSyncing {
                    cluster: intent.cluster.clone(),
                });
                self.requeue_after(self.config().short_retry);
            }
        }
    }

    /// The intent cluster is being removed: the Job moves (not counted) or, with nowhere to go,
    /// waits while its mirror there is deleted.
    fn removed(&mut self, intent: &Intent) {
        if self.finish_committed(&format!(
            "WorkerCluster {} is being removed",
            intent.cluster
        )) {
            return;
        }
        self.place(
            Cause::Removed {
                cluster: intent.cluster.clone(),
            },
            Exclusions::from([(intent.cluster.clone(), Ineligibility::Removing)]),
        );
    }

    /// An origin already committed to its outcome (interim condition) whose mirror is lost is
    /// finished from that condition. Returns whether it was committed.
    fn finish_committed(&mut self, what: &str) -> bool {
        let Some(committed) = W::committed(&self.origin().status, self.now()) else {
            return false;
        };
        if let Some(done) = committed.status
            && self.write_status(done)
        {
            let (condition, outcome) = (committed.reached, committed.outcome);
            self.event(
                EVENT_MIRROR_LOST,
                EventType::Warning,
                format!("{what}; the Job had already reached {condition}, so it is finished as {outcome}"),
            );
        }
        true
    }

    /// The current mirror (or its worker) is gone.
    fn mirror_lost(&mut self, what: String, tally: Tally, exclude: Exclusions) {
        if self.finish_committed(&what) {
            return;
        }
        if tally.counted() && !self.redispatch_possible() {
            let max = self.config().max_redispatch;
            let message = if max == 0 {
                format!("{what}; re-dispatch is disabled (max-redispatch 0)")
            } else {
                format!("{what}; not re-dispatched: the limit of {max} re-dispatches is reached")
            };
            if let Some(failed) = W::fail(
                &self.origin().status,
                JOB_REASON_DISPATCH_FAILED,
                &message,
                self.now(),
            ) && self.write_status(failed)
            {
                self.event(EVENT_DISPATCH_FAILED, EventType::Warning, message);
            }
            return;
        }
        self.place(Cause::Lost { what, tally }, exclude);
    }
}
