//! Performing a decision: its chains one after the other, each chain's actions in order. A failed
//! action stops its own chain only; the reconcile is retried with backoff if any chain failed.
//!
//! How answers become input for the next decision (`courier_core::reconcile` module docs):
//! - a create answered 404 (the namespace does not exist) or 403 NamespaceTerminating ->
//!   `AvoidKind::NamespaceMissing`, message naming the cluster, the namespace and the fix;
//! - a create (or the namespace before it) refused by the worker (400, 403, 422, an admission
//!   denial) -> `AvoidKind::Refused` with the server's message; no answer on a cluster that is then
//!   not answering (timeout, connection failure, open circuit, no client) -> `AvoidKind::Unanswered`.
//!   Both end the chain without an error and re-decide at once (the Job moves on);
//! - AlreadyExists -> the existing Job is classified (adopt, wait for a stale one, or
//!   `AvoidKind::Foreign`);
//! - a spec patch the worker refuses -> `OutOfSync` for that mirror and origin generation;
//! - only the leader writes, checked immediately before every write.

use std::sync::Arc;
use std::time::Duration;

use courier_api::reasons::{EVENT_MIRROR_OUT_OF_SYNC, EVENT_STATUS_SYNC_FAILED};
use courier_core::drift::template_patch;
use courier_core::namespaces::missing_message;
use courier_core::ownership::{Intent, OriginIdentity, Ownership, classify};
use courier_core::reconcile::{Action, AvoidKind, Decision, EventType, OriginView, OutOfSync};
use jiff::Timestamp;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::Ctx;
use super::answer::WriteAnswer;
use super::reconcile::{
    Inputs, patch_origin, publish_event, publish_event_later, write_through, write_through_status,
};
use crate::errors::{CallError, ReconcileError};
use crate::metrics::cluster_label;
use crate::queue::ObjectKey;
use crate::registry::Cluster;
use crate::watch::SlimJob;

/// How a chain ended without an error.
enum End {
    Done,
    /// Stopped on purpose (the next decision takes it from here); reconcile again after this long.
    Again(Duration),
}

fn step(what: impl Into<String>) -> impl FnOnce(CallError) -> ReconcileError {
    let step = what.into();
    move |error| ReconcileError::new(step, error)
}

fn cluster(shared: &Ctx, name: &str) -> Result<Arc<Cluster>, ReconcileError> {
    shared.registry.get(name).ok_or_else(|| {
        ReconcileError::new(
            format!("reach WorkerCluster {name}"),
            CallError::NotConnected(name.to_string()),
        )
        .on(name)
    })
}

fn leader_only(shared: &Ctx) -> Result<(), ReconcileError> {
    if shared.is_leader() {
        Ok(())
    } else {
        Err(ReconcileError::new(
            "write",
            CallError::Other("this replica is not the leader (or its lease is not renewed)".into()),
        ))
    }
}

/// The worker said no to this request (quota, RBAC or admission policy, validation there).
fn refused(e: &CallError) -> bool {
    matches!(e.code(), Some(400 | 403 | 422))
}

/// The worker gave no answer (whether it is not answering since is for the probe to tell, and for
/// `decide` to judge from the cluster's readiness).
fn unanswered(e: &CallError) -> bool {
    e.is_unreachable()
        || matches!(
            e,
            CallError::CircuitOpen(_) | CallError::NotConnected(_) | CallError::Busy(_)
        )
}

/// What the worker said when a create failed because the namespace does not exist (404: only the
/// namespace can be missing for a create) or is being deleted (403 from the NamespaceLifecycle
/// admission plugin, "unable to create new content in namespace X because it is being terminated";
/// the Status's NamespaceTerminating cause is not kept in [`CallError`], its message is).
fn namespace_missing(e: &CallError, ns: &str) -> Option<String> {
    match e {
        CallError::Api { code: 404, .. } => Some(server_message(e)),
        CallError::Api {
            code: 403, message, ..
        } if message.contains(&format!("namespace {ns} because it is being terminated")) => {
            Some(format!("it is being deleted: {message}"))
        }
        _ => None,
    }
}

/// The server's own words where it gave some.
fn server_message(e: &CallError) -> String {
    match e {
        CallError::Api { message, .. } if !message.is_empty() => message.clone(),
        other => other.to_string(),
    }
}

/// Performs `decision`; returns when to reconcile again, or the first error of a failed chain.
pub async fn execute(
    shared: &Arc<Ctx>,
    key: &ObjectKey,
    origin: &OriginView,
    inputs: &Inputs,
    decision: Decision,
) -> Result<Option<Duration>, ReconcileError> {
    let mut requeue = decision.requeue;
    let mut failed: Option<ReconcileError> = None;
    let again = decision.after_write;
    for chain in decision.chains {
        match run_chain(shared, key, origin, inputs, chain, again).await {
            Ok(End::Done) => {}
            Ok(End::Again(after)) => requeue = Some(requeue.map_or(after, |r| r.min(after))),
            Err(e) => match &failed {
                None => failed = Some(e),
                Some(_) => debug!(error = %e, "another chain failed too"),
            },
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(requeue),
    }
}

async fn run_chain(
    shared: &Arc<Ctx>,
    key: &ObjectKey,
    origin: &OriginView,
    inputs: &Inputs,
    chain: Vec<Action>,
    again: bool,
) -> Result<End, ReconcileError> {
    for action in chain {
        if !matches!(action, Action::Event { .. }) {
            leader_only(shared)?;
        }
        if let End::Again(after) = perform(shared, key, origin, inputs, action, again).await? {
            return Ok(End::Again(after));
        }
    }
    Ok(End::Done)
}

async fn perform(
    shared: &Arc<Ctx>,
    key: &ObjectKey,
    origin: &OriginView,
    inputs: &Inputs,
    action: Action,
    again: bool,
) -> Result<End, ReconcileError> {
    let ns = key.namespace.as_str();
    match action {
        Action::WriteIntent {
            cluster,
            epoch,
            patch,
            ..
        } => {
            // Counts for the cluster's load until the cache has it (`placing`).
            let placement = shared.placing.begin(&cluster);
            let obj: SlimJob = patch_origin(shared, key, &patch, false)
                .await
                .map_err(step(format!(
                    "write the placement intent ({cluster}, epoch {epoch})"
                )))?;
            write_through(shared, key, &patch, &obj);
            drop(placement);
            if again {
                shared.queue.add(key.clone());
            }
            debug!(cluster, epoch, "placement intent written");
        }
        Action::EnsureNamespace {
            cluster: c,
            namespace,
            labels,
        } => {
            let handle = cluster(shared, &c)?;
            if let Err(e) = handle.ensure_namespace(&namespace, &labels).await {
                return turned_down(shared, key, origin, &handle, e, || {
                    format!("create namespace {namespace} on {c}")
                });
            }
        }
        Action::CreateMirror {
            cluster: c,
            epoch,
            mirror,
        } => {
            let handle = cluster(shared, &c)?;
            match handle.create_job(ns, &mirror).await {
                Ok(created) => {
                    handle.mirrors.created(&created);
                    dispatched(shared, inputs, &c, "created", epoch);
                    info!(cluster = %c, epoch, "mirror created");
                }
                Err(e) if e.is_already_exists() => {
                    let intent = Intent {
                        cluster: c.clone(),
                        epoch,
                    };
                    return adopt(shared, key, origin, inputs, &handle, &intent).await;
                }
                Err(e) => {
                    let missing = namespace_missing(&e, ns);
                    let result = if refused(&e) || missing.is_some() {
                        "refused"
                    } else if unanswered(&e) {
                        "unanswered"
                    } else {
                        "error"
                    };
                    dispatched(shared, inputs, &c, result, epoch);
                    if let Some(detail) = missing {
                        // Created again next time if Courier creates namespaces; else skipped.
                        handle.forget_namespace(ns);
                        warn!(cluster = %c, namespace = ns, detail, "the Job's namespace is missing on the worker; trying elsewhere");
                        let message = missing_message(&c, ns, &detail);
                        shared.avoid(key, &origin.uid, &c, AvoidKind::NamespaceMissing, &message);
                        shared.queue.add(key.clone());
                        return Ok(End::Again(Duration::ZERO));
                    }
                    return turned_down(shared, key, origin, &handle, e, || {
                        format!("create the mirror on {c} (epoch {epoch})")
                    });
                }
            }
        }
        Action::PatchMirrorSpec {
            cluster: c,
            namespace,
            name,
            uid,
            mut patch,
            template,
        } => {
            let handle = cluster(shared, &c)?;
            if let Some(desired) = template {
                let live = handle
                    .get_job(&namespace, &name)
                    .await
                    .map_err(step(format!("read the mirror on {c}")))?;
                let Some(live) = live.filter(|j| j.metadata.uid.as_deref() == Some(uid.as_str()))
                else {
                    return Ok(End::Again(Duration::ZERO));
                };
                let current = live
                    .data
                    .pointer("/spec/template")
                    .cloned()
                    .unwrap_or(Value::Null);
                if let Some(t) = template_patch(&current, &desired)
                    && let Some(spec) = patch.get_mut("spec").and_then(Value::as_object_mut)
                {
                    spec.insert("template".into(), t);
                }
                leader_only(shared)?;
            }
            match handle.patch_job(&namespace, &name, &uid, &patch).await {
                Ok(_) => debug!(cluster = %c, patch = %patch, "mirror spec updated"),
                Err(e) if refused(&e) => {
                    let message = server_message(&e);
                    warn!(cluster = %c, error = %e, "the worker refused the change of the mirror");
                    shared.update_hints(key, &origin.uid, |h| {
                        h.out_of_sync = Some(OutOfSync {
                            mirror_uid: uid.clone(),
                            generation: origin.generation,
                            message,
                            announced: false,
                        });
                    });
                    shared.queue.add(key.clone());
                    return Ok(End::Again(Duration::ZERO));
                }
                // Gone or replaced meanwhile: the next decision sees it.
                Err(e) if e.is_not_found() || e.is_conflict() => {
                    return Ok(End::Again(Duration::ZERO));
                }
                Err(e) => return Err(step(format!("update the mirror on {c}"))(e).on(&c)),
            }
        }
        Action::DeleteMirror {
            cluster: c,
            namespace,
            name,
            uid,
            ..
        } => {
            cluster(shared, &c)?
                .delete_job(&namespace, &name, &uid)
                .await
                .map_err(|e| step(format!("delete the mirror on {c}"))(e).on(&c))?;
            info!(cluster = %c, uid, "mirror deleted");
        }
        Action::WriteOriginStatus { patch, .. } => {
            write_status(shared, key, origin, inputs, &patch, again).await?
        }
        Action::RemoveFinalizer { patch } => {
            // Not written through: the origin is going away and its Delete event may already
            // have been seen.
            patch_origin::<WriteAnswer>(shared, key, &patch, false)
                .await
                .map_err(step("remove the finalizer"))?;
            info!("mirror cleanup done; finalizer removed");
        }
        Action::Event {
            reason,
            type_,
            message,
        } => {
            info!(reason, message, "event");
            if type_ == EventType::Normal {
                publish_event_later(shared, origin, reason, type_, &message).await;
            } else {
                publish_event(shared, origin, reason, type_, &message).await;
            }
            if reason == EVENT_MIRROR_OUT_OF_SYNC {
                shared.update_hints(key, &origin.uid, |h| {
                    if let Some(o) = h.out_of_sync.as_mut() {
                        o.announced = true;
                    }
                });
            }
        }
    }
    Ok(End::Done)
}

/// A create (or its namespace) failed: a refusal or no answer becomes a hint and the next decision
/// moves the Job on at once; anything else is an error (retried with backoff).
fn turned_down(
    shared: &Ctx,
    key: &ObjectKey,
    origin: &OriginView,
    handle: &Cluster,
    e: CallError,
    what: impl FnOnce() -> String,
) -> Result<End, ReconcileError> {
    if refused(&e) {
        warn!(cluster = %handle.name, error = %e, "the worker refused the mirror; trying elsewhere");
        shared.avoid(
            key,
            &origin.uid,
            &handle.name,
            AvoidKind::Refused,
            &server_message(&e),
        );
        shared.queue.add(key.clone());
        return Ok(End::Again(Duration::ZERO));
    }
    if unanswered(&e) {
        // Moves the Job only once the worker counts as not answering (its probe failed, or its
        // calls stall); a dropped connection on a worker that answers again is simply retried.
        info!(cluster = %handle.name, error = %e, "no answer to the mirror's create");
        shared.avoid(
            key,
            &origin.uid,
            &handle.name,
            AvoidKind::Unanswered,
            &server_message(&e),
        );
        return Ok(End::Again(shared.tuning.short_retry));
    }
    Err(step(what())(e).on(&handle.name))
}

async fn write_status(
    shared: &Arc<Ctx>,
    key: &ObjectKey,
    origin: &OriginView,
    inputs: &Inputs,
    patch: &Value,
    again: bool,
) -> Result<(), ReconcileError> {
    let synced_from = origin.intent().map(|i| i.cluster);
    let named = synced_from.clone().unwrap_or_default();
    let label = cluster_label(&named, shared.registry.get(&named).is_some()).to_string();
    match patch_origin::<WriteAnswer>(shared, key, patch, true).await {
        Ok(answer) => {
            write_through_status(shared, key, patch, &answer);
            if again {
                shared.queue.add(key.clone());
            }
            shared
                .metrics
                .status_sync_total
                .with_label_values(&[&label, "ok"])
                .inc();
            if let Some(seen) = synced_from.and_then(|c| inputs.observed_at.get(&c)) {
                shared
                    .metrics
                    .status_sync_seconds
                    .with_label_values(&[&label])
                    .observe(seen.elapsed().as_secs_f64());
            }
            Ok(())
        }
        Err(e) => {
            shared
                .metrics
                .status_sync_total
                .with_label_values(&[&label, "error"])
                .inc();
            // A conflict only means the cache was behind; not worth a Warning event.
            if !e.is_conflict() {
                publish_event(
                    shared,
                    origin,
                    EVENT_STATUS_SYNC_FAILED,
                    EventType::Warning,
                    &format!("cannot write the status copied from the mirror: {e}"),
                )
                .await;
            }
            Err(step("write the origin status")(e))
        }
    }
}

/// A create answered AlreadyExists: whose Job holds the name?
async fn adopt(
    shared: &Ctx,
    key: &ObjectKey,
    origin: &OriginView,
    inputs: &Inputs,
    handle: &Cluster,
    intent: &Intent,
) -> Result<End, ReconcileError> {
    let existing = handle
        .get_job(&key.namespace, &key.name)
        .await
        .map_err(step(format!("read the existing Job on {}", intent.cluster)))?;
    let Some(existing) = existing else {
        // Deleted in between: the next decision creates it.
        return Ok(End::Again(shared.tuning.short_retry));
    };
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    let identity = OriginIdentity {
        origin_id: &shared.cfg.origin_id,
        origin_uid: &origin.uid,
    };
    Ok(
        match classify(&labels, &intent.cluster, identity, Some(intent)) {
            Ownership::Current => {
                debug!(cluster = %intent.cluster, epoch = intent.epoch, "mirror already existed; adopted");
                dispatched(shared, inputs, &intent.cluster, "adopted", intent.epoch);
                End::Done
            }
            Ownership::Stale { .. } => End::Again(shared.tuning.short_retry),
            Ownership::Foreign | Ownership::OtherOrigin { .. } => {
                info!(cluster = %intent.cluster, "a Job that is not this origin's mirror holds the name; trying elsewhere");
                dispatched(shared, inputs, &intent.cluster, "conflict", intent.epoch);
                shared.avoid(
                    key,
                    &origin.uid,
                    &intent.cluster,
                    AvoidKind::Foreign,
                    "a Job that is not Courier's holds the name",
                );
                shared.queue.add(key.clone());
                End::Again(Duration::ZERO)
            }
        },
    )
}

fn dispatched(shared: &Ctx, inputs: &Inputs, cluster: &str, result: &str, epoch: u64) {
    let m = &shared.metrics;
    let cluster = cluster_label(cluster, shared.registry.get(cluster).is_some());
    m.dispatch_total.with_label_values(&[cluster, result]).inc();
    if epoch > 1 && result == "created" {
        m.redispatches.with_label_values(&[cluster]).inc();
    }
    if epoch == 1
        && matches!(result, "created" | "adopted")
        && let Some(created) = inputs.entry.created
    {
        let secs = Timestamp::now()
            .duration_since(created)
            .as_secs_f64()
            .max(0.0);
        m.dispatch_seconds
            .with_label_values(&[cluster, result])
            .observe(secs);
    }
}
