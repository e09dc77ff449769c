//! A WorkerCluster's own lifecycle (DESIGN invariants 8 and 9).
//!
//! - **One registration per API server.** A worker's identity is its normalised server URL (from
//!   the kubeconfig: known without any network call, so `cluster add` with the wrong kubeconfig is
//!   caught before a probe) and the UID of its `kube-system` namespace (read by the probe: the same
//!   server under another address). The later registration (creationTimestamp, then name) of two
//!   that match is `Ready=False`, `DuplicateCluster`, naming the other: never Ready, so placement
//!   and garbage collection never use it, its mirror watch does not run, and nothing is deleted
//!   because of it. An older registration that turns usable marks the later ones at once, before
//!   it sweeps: a Job placed through a later one before it was known to be a duplicate is the same
//!   Job, followed through the older one's cache (`origin::reconcile::gather`) and not fenced
//!   (`gc::verdict`'s aliases). Once the older one is gone the later one may turn Ready.
//! - **Removal drains.** The leader adds the finalizer `courier.dev/drain-mirrors` to every
//!   WorkerCluster it sees. A deleted one stays registered, *draining*: not eligible for placement;
//!   `decide` moves its Jobs elsewhere and deletes their mirrors there, garbage collection the rest.
//!   The finalizer is removed once the worker's synced mirror cache holds no mirror of this origin
//!   id, or once the worker has been unreachable for the worker-lost timeout since the deletion
//!   started (its mirrors, if any, are then left behind: logged and counted).

use std::sync::Arc;

use courier_api::{FINALIZER_DRAIN, WorkerCluster};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tracing::{info, warn};

use super::Ctx;
use super::{Cluster, Connection, ProbeState};
use crate::config::FIELD_MANAGER;
use crate::errors::{CallError, with_timeout};
use crate::locks::{MutexExt as _, RwLockExt as _};

/// What identifies the API server behind a registration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The kubeconfig's server URL, normalised ([`normalize_server`]).
    pub server: Option<String>,
    /// The UID of the worker's `kube-system` namespace.
    pub namespace_uid: Option<String>,
}

/// `scheme://host[:port]/path` lower-cased where case does not matter, the scheme's default port
/// and a trailing slash dropped: two spellings of one URL compare equal. Host names are not
/// resolved (the namespace UID catches the same server under another name).
pub fn normalize_server(url: &str) -> String {
    let trimmed = url.trim();
    let Ok(uri) = trimmed.parse::<http::Uri>() else {
        return trimmed.trim_end_matches('/').to_ascii_lowercase();
    };
    let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
    let host = uri.host().unwrap_or_default().to_ascii_lowercase();
    let port = match (uri.port_u16(), scheme.as_str()) {
        (Some(443), "https") | (Some(80), "http") | (None, _) => String::new(),
        (Some(p), _) => format!(":{p}"),
    };
    let path = uri.path().trim_end_matches('/');
    format!("{scheme}://{host}{port}{path}")
}

/// Orders registrations: the older (creationTimestamp, then name) is the one that counts.
fn age_key(c: &Cluster) -> (Option<Timestamp>, String) {
    let wc = c.worker_cluster();
    (
        wc.metadata.creation_timestamp.as_ref().map(|t| t.0),
        c.name.clone(),
    )
}

/// The server URL of another registration: from its connection, else from its Secret (parsed
/// once per version of the Secret's data: at start every registration compares with every older
/// one before they connect, and a kubeconfig parse per pair made that quadratic in YAML parses).
fn server_of(shared: &Ctx, other: &Cluster) -> Option<String> {
    if let Some(s) = other.identity.read_or_recover().server.clone() {
        return Some(s);
    }
    let wc = other.worker_cluster();
    let r = &wc.spec.kubeconfig_secret_ref;
    let data = shared.registry.secrets.get(&r.name)?;
    let mut cached = other.kubeconfig_server.lock_or_recover();
    if let Some((d, key, server)) = cached.as_ref()
        && Arc::ptr_eq(d, &data)
        && *key == r.key
    {
        return server.clone();
    }
    let server = super::cluster::kubeconfig_text(shared, other)
        .ok()
        .and_then(|text| crate::credentials::check(&text, shared.cfg.credentials).ok())
        .map(|checked| normalize_server(&checked.server));
    *cached = Some((data, r.key.clone(), server.clone()));
    server
}

/// The older registration `me` duplicates and why, or `None`.
pub fn duplicate_of(shared: &Ctx, me: &Cluster) -> Option<(String, String)> {
    let mine = me.identity();
    let my_age = age_key(me);
    for other in shared.registry.all() {
        if other.name == me.name || age_key(&other) >= my_age {
            continue;
        }
        if let Some(server) = &mine.server
            && server_of(shared, &other).as_ref() == Some(server)
        {
            return Some((
                other.name.clone(),
                format!(
                    "WorkerCluster {} already registers the API server {server}; this later registration is not used",
                    other.name
                ),
            ));
        }
        if let Some(uid) = &mine.namespace_uid
            && other.identity.read_or_recover().namespace_uid.as_ref() == Some(uid)
        {
            return Some((
                other.name.clone(),
                format!(
                    "WorkerCluster {} already registers this API server (same kube-system namespace UID {uid}); this later registration is not used",
                    other.name
                ),
            ));
        }
    }
    None
}

/// Marks the later registrations of `me`'s API server as its duplicates at once (before `me`
/// turns Ready and sweeps its mirrors: a Job placed through a later one is the same Job, not a
/// stale one), and wakes them so their condition says so.
pub fn claim_later_duplicates(shared: &Ctx, me: &Cluster) {
    let mine = me.identity();
    let my_age = age_key(me);
    for other in shared.registry.all() {
        if other.name == me.name || age_key(&other) <= my_age {
            continue;
        }
        let same_server = mine.server.is_some() && server_of(shared, &other) == mine.server;
        let same_uid = mine.namespace_uid.is_some()
            && other.identity.read_or_recover().namespace_uid == mine.namespace_uid;
        if (same_server || same_uid) && other.duplicate_of().as_deref() != Some(me.name.as_str()) {
            other.set_duplicate_of(Some(me.name.clone()));
            other.wake.notify_one();
            shared.requeue_placed_on(&other.name);
        }
    }
}

/// The UID of the worker's `kube-system` namespace.
pub async fn kube_system_uid(
    conn: &Connection,
    deadline: std::time::Duration,
) -> Result<String, CallError> {
    let api: Api<Namespace> = Api::all(conn.request.clone());
    let ns = with_timeout(deadline, api.get("kube-system")).await?;
    ns.metadata
        .uid
        .ok_or_else(|| CallError::Other("the kube-system namespace has no uid".into()))
}

fn has_finalizer(wc: &WorkerCluster) -> bool {
    wc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER_DRAIN))
}

async fn set_finalizers(
    shared: &Ctx,
    wc: &WorkerCluster,
    finalizers: impl Fn(&WorkerCluster) -> Vec<String>,
) -> Result<WorkerCluster, CallError> {
    let api: Api<WorkerCluster> = Api::all(shared.mgmt.clone());
    let name = wc.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let patch = |wc: &WorkerCluster| {
        json!({"metadata": {
            "resourceVersion": wc.metadata.resource_version,
            "finalizers": finalizers(wc),
        }})
    };
    let first = with_timeout(
        shared.tuning.request_timeout,
        api.patch(&name, &pp, &Patch::Merge(&patch(wc))),
    )
    .await;
    match first {
        // The cached object lags (the WorkerCluster's own status writes move its resourceVersion
        // every probe): once more against the object as it is now.
        Err(e) if e.is_conflict() => {
            let fresh = with_timeout(shared.tuning.request_timeout, api.get(&name)).await?;
            with_timeout(
                shared.tuning.request_timeout,
                api.patch(&name, &pp, &Patch::Merge(&patch(&fresh))),
            )
            .await
        }
        other => other,
    }
}

/// Adds the drain finalizer to a WorkerCluster that is not being deleted (leader only).
pub async fn ensure_finalizer(shared: &Ctx, cluster: &Cluster) {
    let wc = cluster.worker_cluster();
    if wc.metadata.deletion_timestamp.is_some() || has_finalizer(&wc) || !shared.is_leader() {
        return;
    }
    let with_drain = |wc: &WorkerCluster| {
        let mut finalizers = wc.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER_DRAIN) {
            finalizers.push(FINALIZER_DRAIN.to_string());
        }
        finalizers
    };
    match set_finalizers(shared, &wc, with_drain).await {
        Ok(updated) => {
            info!(cluster = %cluster.name, "drain finalizer added");
            cluster.set_worker_cluster(updated);
        }
        // Changed meanwhile (the watch brings it) or gone: the next cycle looks again.
        Err(e) if e.is_conflict() || e.is_not_found() => {}
        Err(e) => warn!(cluster = %cluster.name, error = %e, "cannot add the drain finalizer"),
    }
}

/// A deleted WorkerCluster: releases its finalizer once drained, or once it stayed unreachable for
/// the worker-lost timeout since the deletion started (leader only). Returns whether it released.
pub async fn release_if_drained(shared: &Ctx, cluster: &Cluster) -> bool {
    let wc = cluster.worker_cluster();
    let Some(deleted) = wc.metadata.deletion_timestamp.as_ref().map(|t| t.0) else {
        return false;
    };
    if !has_finalizer(&wc) || !shared.is_leader() {
        return false;
    }
    let health = cluster.health();
    let outcome = if health.ready() && cluster.mirrors.is_synced() && cluster.mirrors.len() == 0 {
        "drained"
    } else if health.state == ProbeState::NotReady {
        let since = health.since.map_or(deleted, |s| s.max(deleted));
        let lost = SignedDuration::try_from(shared.cfg.worker_lost_timeout)
            .ok()
            .and_then(|d| since.checked_add(d).ok())
            .unwrap_or(Timestamp::MAX);
        if Timestamp::now() < lost {
            return false;
        }
        "unreachable"
    } else {
        return false;
    };
    let without_drain = |wc: &WorkerCluster| -> Vec<String> {
        wc.metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER_DRAIN)
            .collect()
    };
    match set_finalizers(shared, &wc, without_drain).await {
        Ok(_) => {
            shared
                .metrics
                .cluster_drains
                .with_label_values(&[&cluster.name, outcome])
                .inc();
            if outcome == "drained" {
                info!(cluster = %cluster.name, "WorkerCluster drained: no mirror left; finalizer removed");
            } else {
                warn!(
                    cluster = %cluster.name,
                    timeout = ?shared.cfg.worker_lost_timeout,
                    mirrors = cluster.mirrors.len(),
                    "WorkerCluster being removed stayed unreachable for the worker-lost timeout; finalizer removed, mirrors left there (if any) are no longer managed"
                );
            }
            true
        }
        Err(e) if e.is_conflict() || e.is_not_found() => false,
        Err(e) => {
            warn!(cluster = %cluster.name, error = %e, "cannot remove the drain finalizer");
            false
        }
    }
}

/// Wakes the task of a draining cluster when its last mirrors go (the release is checked at once).
pub fn mirror_gone(cluster: &Arc<Cluster>) {
    if cluster.draining() {
        cluster.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_compare_by_meaning() {
        for (a, b) in [
            ("https://API.example.com:443/", "https://api.example.com"),
            ("https://10.0.0.1:6443", "HTTPS://10.0.0.1:6443/"),
            ("https://h/prefix/", "https://h/prefix"),
        ] {
            assert_eq!(normalize_server(a), normalize_server(b), "{a} vs {b}");
        }
        for (a, b) in [
            ("https://h:6443", "https://h:6444"),
            ("https://localhost:6443", "https://127.0.0.1:6443"),
            ("https://h/a", "https://h/b"),
        ] {
            assert_ne!(normalize_server(a), normalize_server(b), "{a} vs {b}");
        }
    }
}
