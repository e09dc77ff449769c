//! One reconcile of one origin: read the caches into a `ReconcileInput`, `decide`, and perform the
//! decision's chains ([`super::execute`]).
//!
//! The contract with `courier_core::reconcile` (see its module docs) is followed literally:
//! - decide runs only once the WorkerCluster list, the origin cache and the namespace list have
//!   synced;
//! - a cluster's view of the origin's name is `Unknown` unless the cluster is Ready and its mirror
//!   cache synced (so a silent or stale worker never reads as "the mirror is gone");
//! - origin writes are JSON merge patches carrying `metadata.resourceVersion` (a stale cache gets
//!   409, never a blind overwrite), status only through `/status`; decide plans at most one per
//!   decision, and each successful write is written through to the cache and re-queues the key
//!   when the decision asks (`Decision::after_write`: something follows the write);
//! - mirror creates are idempotent: AlreadyExists is classified (`Current` = adopt, `Stale` = wait
//!   for its deletion, someone else's = a `Foreign` hint for the cluster and re-decide); refusals
//!   and unanswered creates become hints too, so the next decision moves the Job on;
//! - mirror patches carry a UID precondition, deletes a UID precondition and Background
//!   propagation; 404 / 409 on delete count as done;
//! - when decide asks for the origin's JSON (`Decision::needs_fresh_origin`: a mirror to build or a
//!   template to patch, or a mirror ahead of the cached intent to judge), decide runs again on the
//!   cache entry's mirror source (the cached version's metadata and spec as it arrived); only a
//!   mirror ahead of the cached intent (or with no readable epoch) makes it read the origin fresh.
//!   A Job not placed yet (no intent, no mirror in sight, not suspended) is decided once, on the
//!   cached source at once: its decision builds the mirror;
//! - only the leader writes (checked immediately before every write, time-bounded by the lease).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use courier_api::LABEL_EPOCH;
use courier_core::ownership::parse_epoch;
use courier_core::placement::{ClusterView, namespace_labels};
use courier_core::reconcile::{
    Decision, EventType, Hints, MirrorObservation, OriginView, ReconcileInput, decide,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::NamespaceResourceScope;
use kube::runtime::events;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::Ctx;
use super::answer::{WriteAnswer, metadata_applied};
use super::echo::Writing;
use super::execute::execute;
use super::get_origin_json;
use super::request;
use super::store::{self, OriginEntry};
use crate::errors::{CallError, ReconcileError, with_timeout};
use crate::queue::ObjectKey;
use crate::watch::SlimJob;

/// What a reconcile reads, gathered from the caches in one pass.
pub struct Inputs {
    pub entry: Arc<OriginEntry>,
    pub mirrors: BTreeMap<Arc<str>, MirrorObservation>,
    /// When the present mirrors' current versions reached the cache, by cluster.
    pub observed_at: HashMap<String, Instant>,
    pub clusters: Vec<ClusterView>,
    /// The labels of the origin's namespace (WorkerClusters' `spec.namespaceSelector`).
    pub namespace_labels: BTreeMap<String, String>,
    pub hints: Hints,
}

/// Reads the caches for `key`; `None` when no managed origin has that name.
///
/// A duplicate registration (`DuplicateCluster`) is never eligible for placement, and shows the
/// health and the mirror of the registration it duplicates (the same API server) for a Job placed
/// through it before the duplicate was known, which is then followed, not fenced.
pub fn gather(shared: &Ctx, key: &ObjectKey) -> Option<Inputs> {
    let entry = shared.origins.get(key)?;
    let intent_cluster = entry.view.intent().map(|i| i.cluster);
    // The registration the Job was placed through duplicates this one (looked up once, not per
    // cluster).
    let intent_duplicates = intent_cluster
        .as_deref()
        .and_then(|i| shared.registry.get(i))
        .and_then(|i| i.duplicate_of());
    let all = shared.registry.all();
    let mut mirrors = BTreeMap::new();
    let mut observed_at = HashMap::new();
    let mut clusters = Vec::with_capacity(all.len());
    for c in all {
        let base = c.duplicate_of().and_then(|b| shared.registry.get(&b));
        let server = base.as_deref().unwrap_or(&c);
        let health = server.readiness();
        let reg = c.registered();
        let placed_here = intent_cluster.as_deref() == Some(c.name.as_str());
        let placed_on_alias = intent_duplicates.as_deref() == Some(c.name.as_str());
        let observation = if (base.is_some() && !placed_here) || placed_on_alias {
            // One Job under two names: read through the name it was placed with only.
            MirrorObservation::Unknown
        } else if health.ready && server.mirrors.is_synced_for(&key.namespace) {
            match server.mirrors.view(key) {
                Some((view, seen)) => {
                    observed_at.insert(c.name.clone(), seen);
                    MirrorObservation::Present(view)
                }
                None => MirrorObservation::Absent,
            }
        } else {
            MirrorObservation::Unknown
        };
        mirrors.insert(reg.name.clone(), observation);
        clusters.push(ClusterView {
            ready: health.ready,
            not_ready_since: health.not_ready_since,
            // Intents being written count too: the cache learns of them only from the answer.
            current_mirrors: shared
                .origins
                .placed_on(&c.name)
                .saturating_add(shared.placing.on(&c.name)),
            degraded: server.stalled(),
            duplicate: base.is_some(),
            ..reg
        });
    }
    let hints = shared.hints_for(key, &entry.view.uid);
    let cached = shared.registry.namespaces.get(&key.namespace);
    let namespace_labels = namespace_labels(&key.namespace, cached.as_deref());
    Some(Inputs {
        entry,
        mirrors,
        observed_at,
        clusters,
        namespace_labels,
        hints,
    })
}

/// What decide would do now, without doing it (for `explain`). A mirror body is built from the
/// cached (trimmed) origin, so the plan shows the create even though no template is at hand.
pub fn dry_run(shared: &Ctx, key: &ObjectKey) -> Option<(Inputs, Decision)> {
    let inputs = gather(shared, key)?;
    let v = &inputs.entry.view;
    let origin_json = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": v.name, "namespace": v.namespace, "uid": v.uid,
                     "labels": v.labels, "annotations": v.annotations},
        "spec": v.spec_fields,
    });
    let decision = decide(&ReconcileInput {
        origin: v,
        origin_json: Some(&origin_json),
        mirrors: &inputs.mirrors,
        clusters: &inputs.clusters,
        namespace_labels: &inputs.namespace_labels,
        config: &shared.dispatch,
        hints: &inputs.hints,
        now: Timestamp::now(),
    });
    Some((inputs, decision))
}

/// Reconciles `key` and schedules what follows (requeue, retry with backoff, or nothing).
pub async fn run(shared: &Arc<Ctx>, key: &ObjectKey) {
    match reconcile(shared, key).await {
        Ok(requeue) => {
            shared
                .metrics
                .reconcile_total
                .with_label_values(&["ok"])
                .inc();
            shared.queue.forget(key);
            if let Some(after) = requeue {
                shared.queue.add_after(key.clone(), after);
            }
        }
        Err(e) => {
            let reason = e.error.metric_reason();
            shared
                .metrics
                .reconcile_total
                .with_label_values(&["error"])
                .inc();
            shared
                .metrics
                .reconcile_errors
                .with_label_values(&[reason])
                .inc();
            // The one place an error becomes a requeue delay: the backoff, or the server's
            // `Retry-After` when longer (capped by the queue).
            let server_wait = e.error.retry_after();
            let delay = shared.queue.retry_no_sooner(key.clone(), server_wait);
            let cluster = e.cluster.as_deref().unwrap_or("management");
            if e.error.is_conflict() {
                // Optimistic concurrency: the cache was behind; the watch brings the new version.
                info!(origin = %key, error = %e, "reconcile hit a newer version; retrying");
            } else if let Some(asked) = server_wait {
                warn!(origin = %key, cluster = %cluster, error = %e, retry_after = ?asked, retry_in = ?delay,
                      "reconcile throttled; retrying no sooner than the server asked");
            } else {
                warn!(origin = %key, cluster = %cluster, error = %e, retry_in = ?delay, "reconcile failed");
            }
        }
    }
}

async fn reconcile(shared: &Arc<Ctx>, key: &ObjectKey) -> Result<Option<Duration>, ReconcileError> {
    if !shared.registry.is_synced()
        || !shared.origins.is_synced()
        || !shared.registry.namespaces.is_synced()
    {
        return Ok(Some(shared.tuning.short_retry));
    }
    let Some(inputs) = gather(shared, key) else {
        shared.forget_origin(key);
        return Ok(None);
    };
    let now = Timestamp::now();
    // The same inputs and moment for every decision of this pass; only the origin differs.
    let decide_on = |origin: &OriginView, origin_json: Option<&Value>| -> Decision {
        decide(&ReconcileInput {
            origin,
            origin_json,
            mirrors: &inputs.mirrors,
            clusters: &inputs.clusters,
            namespace_labels: &inputs.namespace_labels,
            config: &shared.dispatch,
            hints: &inputs.hints,
            now,
        })
    };
    // A Job not placed yet is placed and its mirror built in one decision, which reads the
    // origin's JSON: with no mirror in sight the cached source serves (as below), so it is read
    // at once rather than deciding twice. Without the JSON the decision would be the same, or
    // ask for it (`decide` reads it only to build a mirror, patch a template or judge a mirror).
    if inputs.entry.view.intent().is_none()
        && !inputs.entry.view.spec.suspend
        && !mirror_ahead(&inputs)
        && let Some(json) = inputs.entry.source.as_deref().and_then(parse_source)
    {
        let decision = decide_on(&inputs.entry.view, Some(&json));
        if !decision.needs_fresh_origin {
            shared.record_wait(key, decision.wait.as_ref());
            return execute(shared, key, &inputs.entry.view, &inputs, decision).await;
        }
    }
    let first = decide_on(&inputs.entry.view, None);
    if !first.needs_fresh_origin {
        if inputs.entry.source.is_some() && placed_mirror_seen(&inputs) {
            let rv = inputs.entry.view.resource_version.as_deref();
            shared.origins.release_source(key, rv);
        }
        shared.record_wait(key, first.wait.as_ref());
        return execute(shared, key, &inputs.entry.view, &inputs, first).await;
    }
    // A mirror to build or a template to patch: the cached source serves (it is the cached
    // version's own spec and metadata), unless a mirror is ahead of the cached intent, which only
    // a fresh read may judge, or the entry no longer keeps it (`store` module docs).
    if !mirror_ahead(&inputs)
        && let Some(json) = inputs.entry.source.as_deref().and_then(parse_source)
    {
        let decision = decide_on(&inputs.entry.view, Some(&json));
        shared.record_wait(key, decision.wait.as_ref());
        return execute(shared, key, &inputs.entry.view, &inputs, decision).await;
    }
    // Read the origin fresh and decide again on it.
    let read = |e| ReconcileError::new("read the origin Job", e);
    let Some(json) = get_origin_json(shared, key).await.map_err(read)? else {
        return Ok(None);
    };
    let view = OriginView::from_json(&json).map_err(|e| read(CallError::Other(e.to_string())))?;
    if let Ok(Some(entry)) = store::trim(&json) {
        shared.origins.upsert(key.clone(), entry);
    }
    let decision = decide_on(&view, Some(&json));
    shared.record_wait(key, decision.wait.as_ref());
    execute(shared, key, &view, &inputs, decision).await
}

/// The cached mirror source as JSON (`None` if it does not parse: then the origin is read fresh).
fn parse_source(source: &str) -> Option<Value> {
    serde_json::from_str(source).ok()
}

/// Whether the mirror of the cached intent (its cluster and epoch) is in that cluster's cache: no
/// mirror is built for this placement any more.
fn placed_mirror_seen(inputs: &Inputs) -> bool {
    let Some(intent) = inputs.entry.view.intent() else {
        return false;
    };
    matches!(
        inputs.mirrors.get(intent.cluster.as_str()),
        Some(MirrorObservation::Present(m))
            if m.labels.get(LABEL_EPOCH).and_then(|e| parse_epoch(e)) == Some(intent.epoch)
    )
}

/// Whether a mirror shows an epoch the cached intent does not explain (ahead of it, unreadable, or
/// no intent cached): the cache may lag a placement written elsewhere.
fn mirror_ahead(inputs: &Inputs) -> bool {
    let intent = inputs.entry.view.intent();
    inputs.mirrors.values().any(|m| match m {
        MirrorObservation::Present(m) => {
            let epoch = m.labels.get(LABEL_EPOCH).and_then(|e| parse_epoch(e));
            match (&intent, epoch) {
                (Some(i), Some(e)) => e > i.epoch,
                _ => true,
            }
        }
        _ => false,
    })
}

/// Merge-patches the origin (`status`: its status subresource), decoding the answer as `K`: a
/// [`SlimJob`] when the cache needs all of it (a metadata write), a [`WriteAnswer`] when only the
/// new version and status (a status write) or nothing (the finalizer's removal) is used.
pub async fn patch_origin<K>(
    shared: &Ctx,
    key: &ObjectKey,
    patch: &Value,
    status: bool,
) -> Result<K, CallError>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    // The request `kube::Api::patch` / `patch_status` send, without building an `Api` per write
    // (its type-erased resource and strings were about 1.5 % of the controller's CPU) or kube's
    // request builder's strings ([`request::merge_patch`]).
    let request = request::merge_patch::<K>(key, status, patch)
        .map_err(|e| CallError::from_kube(kube::Error::BuildRequest(e)))?;
    // Only a write made from a known version can tell its own echo on the watch (`echo`).
    let mut writing = sent_version(patch).and_then(|_| Writing::begin(shared, key));
    let answer = with_timeout(
        shared.tuning.request_timeout,
        shared.mgmt.request::<K>(request),
    )
    .await;
    if let (Some(w), Ok(obj)) = (writing.as_mut(), &answer) {
        w.answered(obj.meta().resource_version.clone());
    }
    answer
}

/// The resourceVersion a write was made from (its precondition). Two member lookups, not
/// `Value::pointer`, which allocates a `String` per path segment (about 1 % of the controller's
/// CPU, three calls per write).
fn sent_version(patch: &Value) -> Option<&str> {
    patch.get("metadata")?.get("resourceVersion")?.as_str()
}

/// Puts the server's answer to our own metadata write (`patch`, which carries the resourceVersion
/// it was made from as a precondition) into the cache, unless the watch has moved past that
/// version already (`OriginStore::write_through`): the cached entry of that version with the
/// answer's metadata when the cache still holds it ([`metadata_applied`]), else the answer trimmed
/// whole.
pub fn write_through(shared: &Ctx, key: &ObjectKey, patch: &Value, obj: &SlimJob) {
    let Some(sent) = sent_version(patch) else {
        return;
    };
    let cheap = shared
        .origins
        .get(key)
        .filter(|cached| cached.view.resource_version.as_deref() == Some(sent))
        .and_then(|cached| metadata_applied(&cached, obj));
    let entry = match cheap {
        Some(entry) => Some(entry),
        None => store::trim_job(obj).ok().flatten(),
    };
    if let Some(entry) = entry {
        shared.origins.write_through(key.clone(), sent, entry);
    }
}

/// [`write_through`] for a status write: the cached entry of the version the write was made from,
/// with the answer's version and status ([`WriteAnswer::apply_to`]); nothing when the cache holds
/// another version by now (the watch delivered this one or a later one).
pub fn write_through_status(shared: &Ctx, key: &ObjectKey, patch: &Value, answer: &WriteAnswer) {
    let Some(sent) = sent_version(patch) else {
        return;
    };
    let Some(cached) = shared.origins.get(key) else {
        return;
    };
    if cached.view.resource_version.as_deref() != Some(sent) {
        return;
    }
    if let Some(entry) = answer.apply_to(&cached) {
        shared.origins.write_through(key.clone(), sent, entry);
    }
}

/// Machine-readable `action` of an event, by reason.
fn action_for(reason: &str) -> &'static str {
    use courier_api::reasons::*;
    match reason {
        EVENT_DISPATCHED | EVENT_DISPATCH_FAILED => "Dispatch",
        EVENT_MIRROR_CONFLICT | EVENT_NO_ELIGIBLE_CLUSTER | EVENT_MIRROR_REJECTED => "Place",
        EVENT_REDISPATCHED | EVENT_MIRROR_RECREATED => "Redispatch",
        EVENT_MIRROR_OUT_OF_SYNC => "Update",
        EVENT_STATUS_SYNC_FAILED | EVENT_MIRROR_LOST => "SyncStatus",
        EVENT_MIRROR_ORPHANED => "Delete",
        _ => "Reconcile",
    }
}

/// Longest `note` events.k8s.io/v1 accepts.
const NOTE_LIMIT: usize = 1024;

fn truncate(s: &str, limit: usize) -> String {
    if s.len() <= limit {
        return s.to_string();
    }
    let mut end = limit.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Records an event on the origin (best effort: a failed event never stops a reconcile). The
/// reference carries the origin's resourceVersion, so repeats of one decision on an unchanged
/// origin aggregate into one event series while a new decision gets a new event.
pub async fn publish_event(
    shared: &Ctx,
    origin: &OriginView,
    reason: &str,
    type_: EventType,
    message: &str,
) {
    let (event, reference) = event_for(origin, reason, type_, message);
    publish(shared, event, reference).await;
}

/// [`publish_event`] in a task of its own, for the informational (`Normal`) events of the hot path
/// (`Dispatched` once per Job): the reconcile does not wait for the Event's round trip, so its
/// slot is free for the next status copy or dispatch at once. With every background slot taken
/// the event is published in line: the reconcile waits rather than piling up requests.
pub async fn publish_event_later(
    shared: &Arc<Ctx>,
    origin: &OriginView,
    reason: &str,
    type_: EventType,
    message: &str,
) {
    let (event, reference) = event_for(origin, reason, type_, message);
    let Some(slot) = shared.recorder.background_slot() else {
        publish(shared, event, reference).await;
        return;
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        if !shared.token.is_cancelled() {
            publish(&shared, event, reference).await;
        }
        drop(slot);
    });
}

fn event_for(
    origin: &OriginView,
    reason: &str,
    type_: EventType,
    message: &str,
) -> (events::Event, ObjectReference) {
    let reference = ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: Some(origin.name.clone()),
        namespace: Some(origin.namespace.clone()),
        uid: Some(origin.uid.clone()),
        resource_version: origin.resource_version.clone(),
        ..Default::default()
    };
    let event = events::Event {
        type_: match type_ {
            EventType::Normal => events::EventType::Normal,
            EventType::Warning => events::EventType::Warning,
        },
        reason: reason.to_string(),
        note: Some(truncate(message, NOTE_LIMIT)),
        action: action_for(reason).to_string(),
        secondary: None,
    };
    (event, reference)
}

async fn publish(shared: &Ctx, event: events::Event, reference: ObjectReference) {
    if !shared.is_leader() {
        return;
    }
    let reason = event.reason.as_str();
    match tokio::time::timeout(
        shared.tuning.request_timeout,
        shared.recorder.publish(&event, &reference),
    )
    .await
    {
        Ok(Ok(())) => debug!(reason, note = ?event.note, "event recorded"),
        Ok(Err(e)) => warn!(reason, error = %CallError::from_kube(e), "cannot record event"),
        Err(_) => warn!(reason, "cannot record event: timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A patch's `metadata` as decide writes it or damaged: absent, not an object, with or without
    /// a resourceVersion of any JSON kind, with other members (the intent's labels, annotations).
    fn patch() -> impl Strategy<Value = Value> {
        let rv = prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            any::<u64>().prop_map(|n| Some(json!(n))),
            "[0-9a-z/~]{0,6}".prop_map(|s| Some(json!(s))),
        ];
        let meta = prop_oneof![
            Just(None),
            Just(Some(json!("metadata"))),
            (rv, any::<bool>()).prop_map(|(rv, labels)| {
                let mut m = serde_json::Map::new();
                if labels {
                    m.insert("labels".into(), json!({"courier.dev/cluster": "a"}));
                }
                if let Some(rv) = rv {
                    m.insert("resourceVersion".into(), rv);
                }
                Some(Value::Object(m))
            }),
        ];
        (meta, any::<bool>()).prop_map(|(meta, status)| {
            let mut p = serde_json::Map::new();
            if let Some(meta) = meta {
                p.insert("metadata".into(), meta);
            }
            if status {
                p.insert("status".into(), json!({"active": 1}));
            }
            Value::Object(p)
        })
    }

    proptest! {
        /// `sent_version` reads what `Value::pointer` reads. Seen failing with the member name
        /// misspelt (`resourceversion`).
        #[test]
        fn sent_version_reads_what_the_pointer_reads(p in patch()) {
            let pointer = p.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            prop_assert_eq!(sent_version(&p), pointer);
        }
    }

    /// The Event is about this very Job: `kubectl describe job` and `kubectl events --for` match on
    /// kind, name, namespace and uid (mutants deleting any of these fields went unseen before).
    #[test]
    fn an_event_names_its_origin_by_kind_uid_and_version() {
        let origin = OriginView::from_json(&json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1", "resourceVersion": "42"},
            "spec": {"managedBy": "courier.dev/dispatcher", "template": {"spec": {"containers": []}}},
        }))
        .unwrap_or_else(|e| panic!("origin view: {e:?}"));
        let (event, reference) = event_for(&origin, "Dispatched", EventType::Normal, "to w1");
        assert_eq!(reference.api_version.as_deref(), Some("batch/v1"));
        assert_eq!(reference.kind.as_deref(), Some("Job"));
        assert_eq!(reference.name.as_deref(), Some("train"));
        assert_eq!(reference.namespace.as_deref(), Some("team-a"));
        assert_eq!(reference.uid.as_deref(), Some("u-1"));
        assert_eq!(reference.resource_version.as_deref(), Some("42"));
        assert_eq!(event.reason, "Dispatched");
        assert_eq!(event.note.as_deref(), Some("to w1"));
    }

    #[test]
    fn notes_are_cut_at_a_char_boundary() {
        let s = "é".repeat(600);
        let t = truncate(&s, NOTE_LIMIT);
        assert!(t.len() <= NOTE_LIMIT && t.ends_with("..."));
        assert_eq!(truncate("short", NOTE_LIMIT), "short");
    }
}
