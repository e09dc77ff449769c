//! The task of one worker cluster: resolve its kubeconfig Secret, apply the credential policy, build
//! clients with timeouts (again whenever the Secret's content changes: rotation needs no restart
//! and touches no other cluster), probe `/version` and the rights Courier needs, keep the mirror
//! watch running, and publish the `Ready` condition.
//!
//! Loop: one *cycle*, then sleep until the next probe (healthy), the next backoff step (failing:
//! exponential, jittered, capped) or a wake-up (Secret or WorkerCluster changed, a call or the watch
//! failed, leadership gained, cache synced).
//!
//! Becoming Ready (first connect or after an outage) waits for a fresh list of the worker's mirrors
//! and, on the leader, a garbage-collection sweep of that worker, so stale mirrors (from epochs
//! re-dispatched elsewhere while it was away) are deleted before anything new is placed there.

use std::sync::Arc;
use std::time::Duration;

use courier_api::reasons::{
    REASON_CONNECTED, REASON_FORBIDDEN, REASON_INVALID_KUBECONFIG, REASON_SECRET_NOT_FOUND,
    REASON_UNAUTHORIZED, REASON_UNREACHABLE,
};
use courier_core::status::whole_seconds;
use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Cluster, Connection, Health, ProbeState, mirrors, status};
use crate::backoff::Backoff;
use crate::credentials::{self, ClientTimeouts};
use crate::errors::{CallError, human, with_timeout};
use crate::shared::Shared;

/// Watches may stay silent up to their server-side timeout; the read timeout allows that plus this.
const WATCH_READ_MARGIN: Duration = Duration::from_secs(30);
/// Re-check interval while a connected cluster waits for its cache.
const SYNC_POLL: Duration = Duration::from_millis(200);

struct TaskState {
    backoff: Backoff,
    /// Cancels the running mirror watch.
    watch: Option<CancellationToken>,
    /// The next successful probe restarts the watch (it may be deep in its own backoff).
    fresh_watch: bool,
    /// A GC sweep of this worker is due before it turns Ready.
    sweep: bool,
}

/// Runs the cluster's task until the cluster is removed or the controller stops.
pub async fn run(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let mut st = TaskState {
        backoff: Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max),
        watch: None,
        fresh_watch: false,
        sweep: true,
    };
    loop {
        let delay = cycle(&shared, &cluster, &mut st).await;
        tokio::select! {
            _ = cluster.cancel.cancelled() => break,
            _ = cluster.wake.notified() => {}
            _ = tokio::time::sleep(delay) => {}
        }
    }
    if let Some(w) = st.watch.take() {
        w.cancel();
    }
    cluster.set_connection(None);
}

/// One pass; returns how long to sleep.
async fn cycle(shared: &Arc<Shared>, cluster: &Arc<Cluster>, st: &mut TaskState) -> Duration {
    if !shared.registry.secrets.is_synced() {
        // Woken when the Secret list syncs.
        return shared.tuning.backoff_max;
    }
    let text = match kubeconfig_text(shared, cluster) {
        Ok(t) => t,
        Err((reason, message)) => {
            disconnect(cluster, st);
            return failed(shared, cluster, st, reason, message).await;
        }
    };
    let fingerprint = credentials::fingerprint(&text);
    if cluster.connection().map(|c| c.fingerprint) != Some(fingerprint) {
        match connect(shared, cluster, &text).await {
            Ok(conn) => install(shared, cluster, st, conn),
            Err(message) => {
                disconnect(cluster, st);
                return failed(shared, cluster, st, REASON_INVALID_KUBECONFIG, message).await;
            }
        }
    }
    drop(text);
    let Some(conn) = cluster.connection() else {
        return st.backoff.next_delay();
    };
    let version = match probe(shared, &conn).await {
        Ok(v) => v,
        Err((reason, message)) => return failed(shared, cluster, st, reason, message).await,
    };
    cluster.close_circuit();
    st.backoff.reset();
    if st.fresh_watch {
        st.fresh_watch = false;
        restart_watch(shared, cluster, st);
    }
    if !cluster.is_ready() {
        if !cluster.mirrors.is_synced() {
            let mut h = cluster.health();
            h.last_probe = Some(Timestamp::now());
            h.server_version = Some(version);
            cluster.set_health(h);
            return SYNC_POLL;
        }
        if st.sweep && shared.is_leader() && shared.origins.is_synced() {
            let deleted = crate::gc::sweep_cluster(shared, cluster).await;
            if deleted > 0 {
                info!(cluster = %cluster.name, deleted, "removed stale and orphaned mirrors before turning Ready");
            }
        }
        st.sweep = false;
    }
    let message = format!(
        "connected to {} ({version}); the credentials have every right Courier needs",
        conn.server
    );
    set_health(
        shared,
        cluster,
        ProbeState::Ready,
        REASON_CONNECTED,
        message,
        Some(version),
    );
    status::publish(shared, cluster).await;
    shared.tuning.probe_interval
}

async fn failed(
    shared: &Arc<Shared>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    reason: &'static str,
    message: String,
) -> Duration {
    st.fresh_watch = true;
    st.sweep = true;
    set_health(shared, cluster, ProbeState::NotReady, reason, message, None);
    status::publish(shared, cluster).await;
    st.backoff.next_delay()
}

/// Records the probe outcome; reports transitions (logs, origins to re-examine).
fn set_health(
    shared: &Arc<Shared>,
    cluster: &Arc<Cluster>,
    state: ProbeState,
    reason: &'static str,
    message: String,
    version: Option<String>,
) {
    let old = cluster.health();
    let now = whole_seconds(Timestamp::now());
    let since = match (old.state, state) {
        (a, b) if a == b => old.since,
        // First verdict after start: a not-Ready time a previous leader recorded still counts.
        (ProbeState::Pending, ProbeState::NotReady) => old.since.or(Some(now)),
        _ => Some(now),
    };
    let new = Health {
        state,
        reason,
        message,
        since,
        server_version: version.or(old.server_version.clone()),
        last_probe: Some(now),
    };
    let changed = old.state != new.state || old.reason != new.reason || old.message != new.message;
    cluster.set_health(new.clone());
    if changed {
        if new.ready() {
            info!(cluster = %cluster.name, version = ?new.server_version, "WorkerCluster Ready");
        } else {
            warn!(cluster = %cluster.name, reason = new.reason, message = %new.message, "WorkerCluster not Ready");
        }
    }
    if old.state != new.state {
        shared.on_cluster_changed(&cluster.name);
    }
}

/// The kubeconfig text from the cluster's Secret, or the condition reason and message.
fn kubeconfig_text(shared: &Shared, cluster: &Cluster) -> Result<String, (&'static str, String)> {
    let wc = cluster.worker_cluster();
    let r = &wc.spec.kubeconfig_secret_ref;
    let ns = &shared.cfg.namespace;
    let Some(data) = shared.registry.secrets.get(&r.name) else {
        return Err((
            REASON_SECRET_NOT_FOUND,
            format!("Secret {ns}/{} not found", r.name),
        ));
    };
    let Some(bytes) = data.get(&r.key) else {
        return Err((
            REASON_SECRET_NOT_FOUND,
            format!("Secret {ns}/{} has no key {:?}", r.name, r.key),
        ));
    };
    String::from_utf8(bytes.clone()).map_err(|_| {
        (
            REASON_INVALID_KUBECONFIG,
            format!(
                "key {:?} of Secret {ns}/{} is not UTF-8 text",
                r.key, r.name
            ),
        )
    })
}

/// Parses the kubeconfig under the policy and builds the request and watch clients.
async fn connect(shared: &Shared, cluster: &Cluster, text: &str) -> Result<Connection, String> {
    let wc = cluster.worker_cluster();
    let r = &wc.spec.kubeconfig_secret_ref;
    let place = format!(
        "Secret {}/{}, key {:?}",
        shared.cfg.namespace, r.name, r.key
    );
    let checked =
        credentials::check(text, shared.cfg.credentials).map_err(|p| format!("{place}: {p}"))?;
    let t = &shared.tuning;
    let request = checked
        .client(ClientTimeouts {
            connect: t.connect_timeout,
            read: t.request_timeout,
            write: t.request_timeout,
        })
        .await
        .map_err(|p| format!("{place}: {p}"))?;
    let watch = checked
        .client(ClientTimeouts {
            connect: t.connect_timeout,
            read: t.watch_timeout + WATCH_READ_MARGIN,
            write: t.request_timeout,
        })
        .await
        .map_err(|p| format!("{place}: {p}"))?;
    Ok(Connection {
        request,
        watch,
        fingerprint: checked.fingerprint,
        server: checked.server,
    })
}

fn install(shared: &Arc<Shared>, cluster: &Arc<Cluster>, st: &mut TaskState, conn: Connection) {
    let rotated = cluster.connection().is_some();
    let same_server = cluster
        .connection()
        .is_some_and(|c| c.server == conn.server);
    if !same_server {
        cluster.forget_namespaces();
    }
    info!(cluster = %cluster.name, server = %conn.server, rotated, "worker client built from the kubeconfig Secret");
    cluster.set_connection(Some(Arc::new(conn)));
    cluster.close_circuit();
    st.sweep = true;
    st.fresh_watch = false;
    restart_watch(shared, cluster, st);
}

fn disconnect(cluster: &Cluster, st: &mut TaskState) {
    if let Some(w) = st.watch.take() {
        w.cancel();
    }
    if cluster.connection().is_some() {
        cluster.set_connection(None);
    }
    cluster.mirrors.set_unsynced();
}

fn restart_watch(shared: &Arc<Shared>, cluster: &Arc<Cluster>, st: &mut TaskState) {
    if let Some(w) = st.watch.take() {
        w.cancel();
    }
    cluster.mirrors.set_unsynced();
    let Some(conn) = cluster.connection() else {
        return;
    };
    let token = cluster.cancel.child_token();
    shared.tasks.spawn(mirrors::watch(
        shared.clone(),
        cluster.clone(),
        conn.watch.clone(),
        token.clone(),
    ));
    st.watch = Some(token);
}

/// `/version` (retrying server errors twice) and a SelfSubjectAccessReview per required right.
async fn probe(shared: &Shared, conn: &Connection) -> Result<String, (&'static str, String)> {
    let deadline = shared.tuning.request_timeout;
    let mut attempt: u64 = 0;
    let info = loop {
        match with_timeout(deadline, conn.request.apiserver_version()).await {
            Ok(v) => break v,
            Err(e) if attempt < 2 && matches!(e.code(), Some(c) if c >= 500 || c == 429) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(classify(&conn.server, &e)),
        }
    };
    // One review after the other, on the connection /version just used: concurrent requests over
    // HTTP/1.1 each open a TLS connection, and the pool's connections do not outlive the read
    // timeout (as long as the probe interval), so concurrent reviews cost up to seven TLS handshakes
    // per worker per probe (measured: most of an idle controller's CPU, docs/benchmarks.md).
    let mut missing = Vec::new();
    for (verb, group, resource) in crate::api_calls::worker_rights() {
        let r = allowed(conn, verb, group, resource, deadline).await;
        match r {
            Ok(true) => {}
            Ok(false) => missing.push(if group.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}.{group}")
            }),
            Err(e) => return Err(classify(&conn.server, &e)),
        }
    }
    if !missing.is_empty() {
        return Err((
            REASON_FORBIDDEN,
            format!(
                "the credentials for {} lack rights Courier needs: {} (cluster-wide)",
                conn.server,
                missing.join(", ")
            ),
        ));
    }
    Ok(info.git_version)
}

async fn allowed(
    conn: &Connection,
    verb: &str,
    group: &str,
    resource: &str,
    deadline: Duration,
) -> Result<bool, CallError> {
    let review = crate::api_calls::access_review(verb, group, resource);
    let api: Api<SelfSubjectAccessReview> = Api::all(conn.request.clone());
    let answer = with_timeout(deadline, api.create(&PostParams::default(), &review)).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The condition reason and message for a failed probe call.
fn classify(server: &str, e: &CallError) -> (&'static str, String) {
    match e {
        CallError::Api { code: 401, .. } => (
            REASON_UNAUTHORIZED,
            format!("the worker at {server} rejected the credentials (401 Unauthorized)"),
        ),
        CallError::Api {
            code: 403, message, ..
        } => (
            REASON_FORBIDDEN,
            format!("the worker at {server} refused: {message}"),
        ),
        CallError::Api {
            code,
            reason,
            message,
        } => (
            REASON_UNREACHABLE,
            format!("the worker at {server} answered {code} {reason}: {message}"),
        ),
        CallError::Timeout(d) => (
            REASON_UNREACHABLE,
            format!("the worker at {server} did not answer within {}", human(*d)),
        ),
        CallError::Transport(m) => (
            REASON_UNREACHABLE,
            format!("cannot reach the worker at {server}: {m}"),
        ),
        other => (REASON_UNREACHABLE, other.to_string()),
    }
}
