//! The decision being built: what the origin and the caches say, the chains of actions so far, and
//! the small steps every path uses (origin writes, mirror calls, events).

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use courier_api::reasons::{EVENT_DISPATCH_FAILED, EVENT_STATUS_SYNC_FAILED};
use courier_api::{ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, FINALIZER, LABEL_CLUSTER};

use super::{
    ActionOf, DecisionOf, DispatchConfig, EventType, InputOf, MirrorOf, ObservationOf, OriginOf,
    Wait,
};
use crate::hints::AvoidKind;
use crate::namespaces::{WorkerNamespaces, pod_security_labels};
use crate::ownership::{Intent, OriginIdentity, Ownership, classify, epoch_label};
use crate::placement::{ClusterView, Exclusions, Ineligibility};
use crate::workload::Workload;

pub(super) struct Plan<'a, W: Workload> {
    pub(super) input: &'a InputOf<'a, W>,
    pub(super) identity: OriginIdentity<'a>,
    /// The intent on the origin (metadata, or the Dispatched marker if the metadata was damaged).
    pub(super) intent: Option<Intent>,
    /// The intent metadata (or finalizer) must be rewritten.
    pub(super) intent_needs_repair: bool,
    pub(super) marker: Option<Intent>,
    pub(super) redispatches: u32,
    /// Our mirrors with their verdicts, by cluster (only clusters whose cache can be read).
    pub(super) ours: Vec<(&'a str, &'a MirrorOf<W>, Ownership)>,
    /// Clusters whose cache shows a Job with our name that is not ours.
    pub(super) foreign_seen: BTreeSet<String>,
    pub(super) next_epoch: u64,
    chains: Vec<Vec<ActionOf<W>>>,
    /// Index of the main chain (origin writes and what follows them), once it exists.
    main: Option<usize>,
    wait: Option<Wait>,
    origin_written: bool,
    /// Decide again after the origin write ([`DecisionOf::after_write`]).
    pub(super) after_write: bool,
    requeue: Option<Duration>,
    pub(super) needs_fresh: bool,
}

impl<'a, W: Workload> Plan<'a, W> {
    pub(super) fn new(input: &'a InputOf<'a, W>) -> Self {
        let origin = input.origin;
        let identity = OriginIdentity {
            origin_id: &input.config.origin_id,
            origin_uid: &origin.uid,
        };
        let marker = W::reported(&origin.status);
        // Placement is Courier's decision: intent metadata counts only if Courier wrote it. Courier
        // writes its finalizer in the same patch as its first intent, so intent on an origin without
        // the finalizer is someone else's (a user picking a paused cluster, or resetting the
        // re-dispatch budget) unless the status marker or our own mirror at that cluster and epoch
        // vouch for it (the finalizer was removed later: it is restored below).
        let metadata_intent = origin.intent();
        let vouched = |i: &Intent| {
            marker.as_ref() == Some(i)
                || matches!(
                    input.mirrors.get(i.cluster.as_str()),
                    Some(ObservationOf::Present(m))
                        if classify(&m.labels, &i.cluster, identity, Some(i)) == Ownership::Current
                )
        };
        let trusted = origin.has_finalizer() || metadata_intent.as_ref().is_some_and(vouched);
        let from_metadata = metadata_intent.filter(|_| trusted);
        let intent = from_metadata.clone().or_else(|| marker.clone());
        let intent_needs_repair =
            intent.is_some() && (from_metadata != intent || !origin.has_finalizer());
        let mut ours = Vec::new();
        let mut foreign_seen = BTreeSet::new();
        let mut highest_epoch = intent.as_ref().map_or(0, |i| i.epoch);
        highest_epoch = highest_epoch.max(marker.as_ref().map_or(0, |m| m.epoch));
        for (cluster, observation) in input.mirrors {
            if let ObservationOf::Present(m) = observation {
                let verdict = classify(&m.labels, cluster, identity, intent.as_ref());
                if verdict.is_ours() {
                    highest_epoch = highest_epoch.max(epoch_label(&m.labels).unwrap_or(0));
                    ours.push((&**cluster, m.as_ref(), verdict));
                } else {
                    foreign_seen.insert(cluster.to_string());
                }
            }
        }
        Self {
            input,
            identity,
            intent,
            intent_needs_repair,
            marker,
            redispatches: if trusted { origin.redispatches() } else { 0 },
            ours,
            foreign_seen,
            next_epoch: highest_epoch.saturating_add(1),
            chains: Vec::new(),
            main: None,
            wait: None,
            origin_written: false,
            after_write: false,
            requeue: None,
            needs_fresh: false,
        }
    }

    pub(super) fn finish(self) -> DecisionOf<W> {
        if self.needs_fresh {
            return DecisionOf {
                needs_fresh_origin: true,
                wait: self.wait,
                ..DecisionOf::default()
            };
        }
        DecisionOf {
            chains: self.chains.into_iter().filter(|c| !c.is_empty()).collect(),
            requeue: self.requeue,
            wait: self.wait,
            needs_fresh_origin: false,
            after_write: self.after_write,
        }
    }

    pub(super) fn origin(&self) -> &'a OriginOf<W> {
        self.input.origin
    }

    pub(super) fn config(&self) -> &'a DispatchConfig {
        self.input.config
    }

    pub(super) fn now(&self) -> Timestamp {
        self.input.now
    }

    /// The origin's JSON counts as a fresh read from the API server.
    pub(super) fn fresh(&self) -> bool {
        self.input.origin_json.is_some()
    }

    pub(super) fn observation(&self, cluster: &str) -> &'a ObservationOf<W> {
        self.input
            .mirrors
            .get(cluster)
            .unwrap_or(&ObservationOf::Unknown)
    }

    pub(super) fn cluster_view(&self, name: &str) -> Option<&'a ClusterView> {
        self.input.clusters.iter().find(|c| &*c.name == name)
    }

    pub(super) fn draining(&self, cluster: &str) -> bool {
        self.cluster_view(cluster).is_some_and(|c| c.draining)
    }

    pub(super) fn current_mirror(&self) -> Option<(&'a str, &'a MirrorOf<W>)> {
        self.ours
            .iter()
            .find(|(_, _, v)| *v == Ownership::Current)
            .map(|(c, m, _)| (*c, *m))
    }

    pub(super) fn requeue_after(&mut self, after: Duration) {
        let after = after.max(Duration::from_secs(1));
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    pub(super) fn wait(&mut self, wait: Wait) {
        if self.wait.is_none() {
            self.wait = Some(wait);
        }
    }

    /// Appends to the main chain (origin writes, and what depends on them).
    pub(super) fn push(&mut self, action: ActionOf<W>) {
        let i = match self.main {
            Some(i) => i,
            None => {
                self.chains.push(Vec::new());
                self.chains.len() - 1
            }
        };
        self.main = Some(i);
        self.chains[i].push(action);
    }

    /// Adds an independent chain.
    pub(super) fn side(&mut self, actions: Vec<ActionOf<W>>) {
        self.chains.push(actions);
    }

    pub(super) fn event(&mut self, reason: &'static str, type_: EventType, message: String) {
        self.push(ActionOf::Event {
            reason,
            type_,
            message,
        });
    }

    pub(super) fn job_ref(&self) -> String {
        format!("{}/{}", self.origin().namespace, self.origin().name)
    }

    /// Clusters excluded for this origin by what it learnt: someone else's Job holds the name there,
    /// or the worker refused (or did not answer) its mirror, for the backoff period.
    pub(super) fn exclusions(&self) -> Exclusions {
        let mut out: Exclusions = self
            .foreign_seen
            .iter()
            .map(|c| (c.clone(), Ineligibility::Conflict))
            .collect();
        for (cluster, a) in self.input.hints.in_force(self.now()) {
            let why = match a.kind {
                AvoidKind::Foreign => Ineligibility::Conflict,
                AvoidKind::Refused => Ineligibility::Refused,
                AvoidKind::NamespaceMissing => Ineligibility::NamespaceMissing,
                AvoidKind::Unanswered if self.unresponsive(cluster) => Ineligibility::Unanswered,
                AvoidKind::Unanswered => continue,
            };
            out.entry(cluster.clone()).or_insert(why);
        }
        out
    }

    /// The cluster does not answer: its probe failed (not Ready), its calls stall, or it is gone.
    /// An unanswered create counts only then (a dropped connection on a worker that answers again
    /// is just retried).
    pub(super) fn unresponsive(&self, cluster: &str) -> bool {
        self.cluster_view(cluster)
            .is_none_or(|c| !c.ready || c.degraded)
    }

    /// A name-conflict verdict about `cluster` is in force.
    pub(super) fn foreign_hint(&self, cluster: &str) -> bool {
        self.input
            .hints
            .avoided(cluster, self.now())
            .is_some_and(|a| a.kind == AvoidKind::Foreign)
    }

    // ---- origin writes (at most one per decision) ----

    fn claim_origin_write(&mut self) -> bool {
        if self.origin_written {
            self.after_write = true;
            self.wait(Wait::OriginWriteDeferred);
            self.requeue_after(Duration::from_secs(1));
            return false;
        }
        self.origin_written = true;
        true
    }

    fn precondition(&self) -> Map<String, Value> {
        let mut meta = Map::new();
        if let Some(rv) = &self.origin().resource_version {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        meta
    }

    pub(super) fn write_intent(&mut self, intent: &Intent, redispatches: u32) -> bool {
        if !self.claim_origin_write() {
            return false;
        }
        let add_finalizer = !self.origin().has_finalizer();
        let mut meta = self.precondition();
        meta.insert("labels".into(), json!({ LABEL_CLUSTER: intent.cluster }));
        meta.insert(
            "annotations".into(),
            json!({ ANNOTATION_EPOCH: intent.epoch.to_string(), ANNOTATION_REDISPATCHES: redispatches.to_string() }),
        );
        if add_finalizer {
            let mut finalizers = self.origin().finalizers.clone();
            finalizers.push(FINALIZER.to_string());
            meta.insert("finalizers".into(), json!(finalizers));
        }
        self.push(ActionOf::WriteIntent {
            cluster: intent.cluster.clone(),
            epoch: intent.epoch,
            redispatches,
            add_finalizer,
            patch: json!({ "metadata": meta }),
        });
        true
    }

    pub(super) fn write_status(&mut self, status: W::Status) -> bool {
        let status_patch = match W::status_patch(&self.origin().status, &status) {
            Ok(p) => p,
            Err(e) => {
                // Never a `null` patch: it would clear the origin's whole status.
                let message = format!(
                    "cannot encode the status of {} as JSON ({e}); it was not written",
                    self.job_ref()
                );
                self.event(EVENT_STATUS_SYNC_FAILED, EventType::Warning, message);
                self.requeue_after(self.config().retry_interval);
                return false;
            }
        };
        if !self.claim_origin_write() {
            return false;
        }
        if W::finished(&status).is_some() {
            self.after_finishing(&status);
        }
        let patch = json!({ "metadata": self.precondition(), "status": status_patch });
        self.push(ActionOf::WriteOriginStatus { status, patch });
        true
    }

    pub(super) fn remove_finalizer(&mut self) {
        if !self.claim_origin_write() {
            return;
        }
        let mut meta = self.precondition();
        let rest: Vec<&String> = self
            .origin()
            .finalizers
            .iter()
            .filter(|f| *f != FINALIZER)
            .collect();
        meta.insert("finalizers".into(), json!(rest));
        self.push(ActionOf::RemoveFinalizer {
            patch: json!({ "metadata": meta }),
        });
    }

    fn status_without(&self) -> Option<W::Status> {
        W::translate(self.origin(), None, self.redispatch_possible(), self.now())
    }

    /// Maintains the origin's own status when no current mirror is read: the Suspended condition,
    /// and no pods anybody could see.
    pub(super) fn status_without_mirror(&mut self) {
        if self.origin_written {
            self.after_write = true; // the next decision writes it
            return;
        }
        if let Some(status) = self.status_without() {
            self.write_status(status);
        }
    }

    /// [`Self::status_without_mirror`] plus `courier.dev/Placed=False` with `reason` and `message`.
    /// Returns whether the Placed condition changed (then the caller announces it).
    pub(super) fn not_placed(&mut self, reason: &str, message: &str) -> bool {
        if self.origin_written {
            self.after_write = true; // the next decision writes it
            return false;
        }
        let mut status = self
            .status_without()
            .unwrap_or_else(|| self.origin().status.clone());
        let changed = W::set_not_placed(&mut status, reason, message, self.now());
        if status != self.origin().status {
            self.write_status(status);
        }
        changed
    }

    pub(super) fn redispatch_possible(&self) -> bool {
        self.redispatches < self.config().max_redispatch
    }

    // ---- mirror calls ----

    pub(super) fn delete_action(cluster: &str, m: &MirrorOf<W>) -> ActionOf<W> {
        ActionOf::DeleteMirror {
            cluster: cluster.to_string(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
        }
    }

    /// Unfinished mirrors of ours, seen in a readable cache, that are not `target`: they must be
    /// gone before `target` is created (no two runs where Courier can see them).
    fn blockers(&self, target: &Intent) -> Vec<String> {
        let mut out: Vec<String> = self
            .ours
            .iter()
            .filter(|(c, m, _)| {
                !(*c == target.cluster && epoch_label(&m.labels) == Some(target.epoch))
            })
            .filter(|(_, m, _)| W::finished(&m.status).is_none())
            .map(|(c, _, _)| c.to_string())
            .collect();
        out.dedup();
        out
    }

    pub(super) fn create_mirror(&mut self, intent: &Intent) {
        // After the origin write (the intent, or a status) the next decision records the created
        // mirror on the origin (the Dispatched marker), or fences the stale ones in its way.
        self.after_write |= self.origin_written;
        let blockers = self.blockers(intent);
        if !blockers.is_empty() {
            self.wait(Wait::StaleMirrorsFirst {
                clusters: blockers,
                epoch: intent.epoch,
            });
            self.requeue_after(self.config().short_retry);
            return;
        }
        let Some(origin_json) = self.input.origin_json else {
            self.needs_fresh = true;
            return;
        };
        match W::build_mirror(origin_json, &self.config().origin_id, intent.epoch) {
            Ok(mirror) => {
                if let WorkerNamespaces::Create { pod_security } = self.config().worker_namespaces {
                    self.push(ActionOf::EnsureNamespace {
                        cluster: intent.cluster.clone(),
                        namespace: self.origin().namespace.clone(),
                        labels: pod_security_labels(pod_security),
                    });
                }
                self.push(ActionOf::CreateMirror {
                    cluster: intent.cluster.clone(),
                    epoch: intent.epoch,
                    mirror,
                });
            }
            Err(e) => {
                let message = e.to_string();
                self.event(
                    EVENT_DISPATCH_FAILED,
                    EventType::Warning,
                    format!("cannot build the mirror for {}: {message}", intent.cluster),
                );
                self.wait(Wait::MirrorUnbuildable { message });
                self.requeue_after(self.config().retry_interval);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::batch::v1::JobStatus;

    use super::*;
    use crate::merge_patch::status_patch;

    #[test]
    fn a_status_that_does_not_encode_is_an_error_not_a_null_patch() {
        // JSON object keys must be strings: this value has no JSON form.
        let bad: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        assert!(status_patch(&BTreeMap::new(), &bad).is_err());
        assert!(status_patch(&bad, &BTreeMap::new()).is_err());
        let old = JobStatus {
            active: Some(1),
            ..JobStatus::default()
        };
        let new = JobStatus {
            succeeded: Some(1),
            ..JobStatus::default()
        };
        let p = status_patch(&old, &new).ok();
        assert_eq!(p, Some(json!({"active": null, "succeeded": 1})));
        assert_eq!(status_patch(&old, &old).ok(), Some(json!({})));
    }
}
