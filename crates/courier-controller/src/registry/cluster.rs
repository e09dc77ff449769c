//! The task of one worker cluster: resolve its kubeconfig Secret, apply the credential policy, build
//! clients with timeouts (again whenever the Secret's content changes: rotation needs no restart
//! and touches no other cluster), probe `/version` and the rights Courier needs, keep the mirror
//! watch running, and publish the `Ready` condition.
//!
//! Loop: one *cycle*, then sleep until the next check (healthy), the next backoff step (failing:
//! exponential, jittered, capped) or a wake-up (Secret or WorkerCluster changed, a call or the watch
//! failed, leadership gained, cache synced, a draining cluster lost a mirror).
//!
//! A healthy worker's cost scales with what changes, not with time: the *full probe* (`/version`,
//! every access review, the `kube-system` UID, the origin id claim, the admission policy) runs when
//! the cluster task starts or connects, after any failure, on any wake-up of a Ready worker (a call
//! or the watch failed, the Secret or the WorkerCluster changed, leadership) and otherwise every
//! `Tuning::rights_interval` (jittered: 1,000 workers do not probe in lockstep). In between, every
//! `Tuning::probe_interval` (jittered, then gathered into [`WAKE_SLOT`]s) a *check*: one access
//! review over the kept-alive connection of the full probe, for the next required right in turn,
//! and every [`CONNECT_EVERY`]-th check a TCP connect (the server still takes new connections). So
//! a dead or blackholed worker, or revoked credentials, are seen within one probe interval (plus
//! the request timeout), a worker refusing new connections within two (plus the connect timeout),
//! a revoked right within as many intervals as there are rights (at once when a call is refused),
//! and a check costs one request and no TLS handshake. A failed check runs the full probe at once,
//! which decides the condition.
//!
//! A worker that cannot be reached costs one probe per backoff period: its mirror watch is stopped
//! at the first failed probe and restarted by the next successful one, and a failure is logged when
//! the state or reason changes, then at most once per backoff cap.
//!
//! Each cycle also keeps the WorkerCluster's lifecycle ([`super::lifecycle`]): the drain finalizer,
//! the release of a drained one, and the duplicate check (before any probe, and again with the
//! `kube-system` namespace UID the probe reads); then it claims the origin id on the worker
//! ([`super::claim`]) before the watch starts.
//!
//! Becoming Ready (first connect or after an outage) waits for a fresh list of the worker's mirrors
//! and, on the leader, a garbage-collection sweep of that worker, so stale mirrors (from epochs
//! re-dispatched elsewhere while it was away) are deleted before anything new is placed there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use courier_api::LABEL_KUBECONFIG_SECRET;
use courier_api::reasons::{
    REASON_CONNECTED, REASON_DUPLICATE_CLUSTER, REASON_INVALID_KUBECONFIG, REASON_ORIGIN_ID_IN_USE,
    REASON_SECRET_NOT_FOUND, REASON_SECRET_NOT_LABELLED,
};
use courier_core::namespaces::{WatchScope, watch_scopes};
use courier_core::status::whole_seconds;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Ctx;
use super::claim::{self, ClaimError};
use super::lifecycle::{self, normalize_server};
use super::{Cluster, Connection, Health, ProbeState, mirrors, status};
use crate::backoff::Backoff;
use crate::credentials::probe::{Reviews, RightsScope, classify, fresh};
use crate::credentials::{self, ClientTimeouts};
use crate::errors::with_timeout;
use crate::locks::MutexExt as _;

/// Watches may stay silent up to their server-side timeout; the read timeout allows that plus this.
const WATCH_READ_MARGIN: Duration = Duration::from_secs(30);
/// Re-check interval while a connected cluster waits for its cache.
const SYNC_POLL: Duration = Duration::from_millis(200);
/// Every this many checks, the check also opens (and closes) a TCP connection: the server still
/// takes new ones. Each full probe does too. A server that stopped accepting is thus seen within
/// two probe intervals (plus the connect timeout when it drops the attempt silently), which stays
/// inside the detection time docs/operations.md promises; the connect was a quarter of an idle
/// controller's CPU at one per check (docs/benchmarks.md, "Idle workers"). A kube-apiserver counts
/// each such connect in `apiserver_tls_handshake_errors_total` (a handshake that got EOF; see
/// docs/operations.md, where operators alerting on that metric read it).
const CONNECT_EVERY: usize = 2;

struct TaskState {
    backoff: Backoff,
    /// When the next full probe is due; `None` until one succeeds on the current connection (and
    /// again after any failure).
    full_due: Option<Instant>,
    /// When a probe or check last succeeded.
    checked: Option<Instant>,
    /// Which required right the next check asks about (and whether it connects: every
    /// [`CONNECT_EVERY`]-th check does).
    turn: usize,
    /// The checks' access reviews, encoded once per rights scope ([`super::Registry::reviews`]).
    reviews: Option<Arc<Reviews>>,
    /// The running mirror watches, by scope; each token cancels one.
    watches: BTreeMap<WatchScope, CancellationToken>,
    /// The next successful probe restarts the watch (it may be deep in its own backoff).
    fresh_watch: bool,
    /// A GC sweep of this worker is due before it turns Ready.
    sweep: bool,
    /// When a failure was last logged (repeats are logged at most once per backoff cap).
    last_warn: Option<Instant>,
}

/// Runs the cluster's task until the cluster is removed or the controller stops.
pub async fn run(shared: Arc<Ctx>, cluster: Arc<Cluster>) {
    let mut st = TaskState {
        backoff: Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max),
        full_due: None,
        checked: None,
        turn: 0,
        reviews: None,
        watches: BTreeMap::new(),
        fresh_watch: true,
        sweep: true,
        last_warn: None,
    };
    let mut woken = true;
    loop {
        let delay = cycle(&shared, &cluster, &mut st, woken).await;
        woken = tokio::select! {
            _ = cluster.cancel.cancelled() => break,
            _ = cluster.wake.notified() => true,
            _ = tokio::time::sleep_until(wake_slot(Instant::now() + delay, delay)) => false,
        };
    }
    for (_, w) in std::mem::take(&mut st.watches) {
        w.cancel();
    }
    cluster.set_connection(None);
}

/// The checks of healthy workers wake at the end of a slot this long (the delays between them are
/// seconds): the controller's threads wake once per slot for every worker due in it rather than
/// once per worker (1,000 workers: ~100 checks a second, each waking a parked thread of its own
/// before). A check comes at most this much later.
const WAKE_SLOT: Duration = Duration::from_millis(250);

/// When a cluster task sleeping `delay` until `at` wakes: at the end of `at`'s [`WAKE_SLOT`]
/// (slots counted from the first call in this process) when the delay is that of a check, at
/// `at` for the short ones (a cache sync poll, a backoff's first steps, the tests' tuning).
fn wake_slot(at: Instant, delay: Duration) -> Instant {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    if delay < WAKE_SLOT * 20 {
        return at;
    }
    let origin = Instant::from_std(*ORIGIN.get_or_init(std::time::Instant::now));
    slot_end(origin, at, WAKE_SLOT)
}

/// The end of the `slot`-long slot (counted from `origin`) that `at` falls in; `at` itself on a
/// boundary or before `origin`.
fn slot_end(origin: Instant, at: Instant, slot: Duration) -> Instant {
    let into = at.saturating_duration_since(origin).as_nanos();
    let slot_ns = slot.as_nanos().max(1);
    let rest = into % slot_ns;
    if rest == 0 {
        return at;
    }
    let up = u64::try_from(slot_ns - rest).unwrap_or(0);
    at + Duration::from_nanos(up)
}

/// One pass (`woken`: by a wake-up rather than the timer); returns how long to sleep.
async fn cycle(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    woken: bool,
) -> Duration {
    if !shared.registry.secrets.is_synced() || !shared.registry.namespaces.is_synced() {
        // Woken when the Secret list and the namespace list sync.
        return shared.tuning.backoff_max;
    }
    lifecycle::ensure_finalizer(shared, cluster).await;
    if lifecycle::release_if_drained(shared, cluster).await {
        // The WorkerCluster goes now; its Delete event ends this task.
        return shared.tuning.backoff_max;
    }
    let source = secret_source(shared, cluster);
    let same_source = {
        let known = cluster.connection_source.lock_or_recover();
        match (known.as_ref(), source.as_ref()) {
            (Some((d, k)), Some((data, key))) => Arc::ptr_eq(d, data) && k == key,
            _ => false,
        }
    };
    if !same_source || cluster.connection().is_none() {
        let text = match kubeconfig_text(shared, cluster) {
            Ok(t) => t,
            Err((reason, message)) => {
                let (reason, message) = match unlabelled_secret(shared, cluster).await {
                    Some(m) => (REASON_SECRET_NOT_LABELLED, m),
                    None => (reason, message),
                };
                disconnect(cluster, st);
                return failed(shared, cluster, st, reason, message).await;
            }
        };
        let fingerprint = credentials::fingerprint(&text);
        if cluster.connection().map(|c| c.fingerprint) != Some(fingerprint) {
            match connect(shared, cluster, &text).await {
                Ok(conn) => install(cluster, st, conn),
                Err(message) => {
                    disconnect(cluster, st);
                    return failed(shared, cluster, st, REASON_INVALID_KUBECONFIG, message).await;
                }
            }
        }
        *cluster.connection_source.lock_or_recover() = source;
    }
    let Some(conn) = cluster.connection() else {
        return st.backoff.next_delay();
    };
    // Something failed or changed on a Ready worker: the full probe, not a check.
    if woken && cluster.is_ready() {
        st.full_due = None;
    }
    if st.full_due.is_some_and(|due| Instant::now() < due) {
        match check(shared, cluster, st, &conn).await {
            Ok(()) => return settle(shared, cluster, st, &conn, None).await,
            Err((reason, message)) => {
                debug!(cluster = %cluster.name, reason, message = %message, "worker check failed; full probe");
                st.full_due = None;
            }
        }
    }
    // The same server registered before under another name: known without a network call.
    if let Some((other, why)) = lifecycle::duplicate_of(shared, cluster) {
        return duplicate(shared, cluster, st, other, why).await;
    }
    let (version, namespace_uid) = match probe(shared, cluster, &conn).await {
        Ok(v) => v,
        Err((reason, message)) => {
            let message = credentials::probe::rotate_hint(&cluster.name, reason, message);
            return failed(shared, cluster, st, reason, message).await;
        }
    };
    cluster.set_identity(|i| i.namespace_uid = Some(namespace_uid));
    if let Some((other, why)) = lifecycle::duplicate_of(shared, cluster) {
        return duplicate(shared, cluster, st, other, why).await;
    }
    cluster.set_duplicate_of(None);
    lifecycle::claim_later_duplicates(shared, cluster);
    // Nothing acts on a worker before this management cluster holds its origin id there.
    match claim::ensure(shared, cluster, &conn).await {
        Ok(()) => {}
        Err(ClaimError::InUse(why)) => {
            return unusable(shared, cluster, st, REASON_ORIGIN_ID_IN_USE, why).await;
        }
        Err(ClaimError::Call(e)) => {
            let f = classify(&conn.server, None, &e);
            let message = format!("claiming the origin id on the worker: {}", f.message);
            return failed(shared, cluster, st, f.reason, message).await;
        }
    }
    st.full_due = Some(Instant::now() + crate::backoff::jitter(shared.tuning.rights_interval));
    st.checked = Some(Instant::now());
    settle(shared, cluster, st, &conn, Some(version)).await
}

/// Between full probes: nothing while a connected worker waits for its cache (checked within the
/// probe interval), else the check described in the module docs.
async fn check(
    shared: &Ctx,
    cluster: &Cluster,
    st: &mut TaskState,
    conn: &Connection,
) -> Result<(), (&'static str, String)> {
    let t = &shared.tuning;
    if !cluster.is_ready() && st.checked.is_some_and(|c| c.elapsed() < t.probe_interval) {
        return Ok(());
    }
    let wc = cluster.worker_cluster();
    let turn = st.turn;
    st.turn = st.turn.wrapping_add(1);
    let scope = rights_scope(shared, &wc);
    let reviews = match st.reviews.take() {
        Some(r) if r.fit(scope) => r,
        _ => shared.registry.reviews(scope).map_err(|e| {
            let f = classify(&conn.server, None, &e);
            (f.reason, f.message)
        })?,
    };
    // The request client: its pooled connection outlives the probe interval (see `connect`), so
    // the check rides the connection the full probe or the previous check left open.
    let answered = credentials::probe::check_one_right(
        &conn.request,
        &conn.server,
        &reviews,
        turn,
        t.request_timeout,
    )
    .await;
    st.reviews = Some(reviews);
    answered.map_err(|f| (f.reason, f.message))?;
    if turn % CONNECT_EVERY == CONNECT_EVERY - 1 {
        credentials::probe::accepts_connections(&conn.server, t.connect_timeout)
            .await
            .map_err(|e| {
                let f = classify(&conn.server, None, &e);
                (f.reason, f.message)
            })?;
    }
    st.checked = Some(Instant::now());
    Ok(())
}

/// A probe (`version`: it was the full one) or a check passed: the watch runs, the cache syncs, a
/// sweep before turning Ready, the condition and status. Returns the delay to the next check.
async fn settle(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    conn: &Connection,
    version: Option<String>,
) -> Duration {
    let full = version.is_some();
    cluster.close_circuit();
    st.backoff.reset();
    if st.fresh_watch {
        st.fresh_watch = false;
        restart_watch(shared, cluster, st);
    } else {
        // spec.namespaces may have changed, or a removed namespace's last mirror gone.
        follow_scopes(shared, cluster, st);
    }
    if !cluster.is_ready() {
        if !cluster.mirrors.is_synced() {
            let mut h = cluster.health();
            h.last_probe = Some(Timestamp::now());
            h.server_version = version.or(h.server_version);
            cluster.set_health(h);
            return SYNC_POLL;
        }
        if st.sweep && shared.is_leader() {
            let deleted = shared.hooks.sweep(cluster.clone()).await;
            if deleted > 0 {
                info!(cluster = %cluster.name, deleted, "removed stale and orphaned mirrors before turning Ready");
            }
        }
        st.sweep = false;
    }
    // A check on a worker that is Ready already changes nothing but the time of the last probe
    // (the same message, version and transition time): no message built, no health copied.
    if full || !cluster.still_connected(whole_seconds(Timestamp::now())) {
        let mut h = cluster.health();
        if full {
            h.policy =
                credentials::probe::policy_installed(&conn.request, shared.tuning.request_timeout)
                    .await;
            cluster.set_health(h.clone());
        }
        let version = version.or(h.server_version).unwrap_or_default();
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
    }
    // A check refreshes the stored lastProbeTime only along with a real change.
    status::publish(shared, cluster, full).await;
    let interval = shared.tuning.probe_interval;
    if full {
        // Spread over the whole interval: workers probed together drift apart at once.
        crate::backoff::jitter(interval)
    } else {
        interval - interval / 4 + crate::backoff::jitter(interval / 4)
    }
}

async fn failed(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    reason: &'static str,
    message: String,
) -> Duration {
    // Only the probe runs while the worker fails: the watch would retry (and log) on its own.
    stop_watch(cluster, st);
    st.sweep = true;
    let transition = set_health(
        shared,
        cluster,
        ProbeState::NotReady,
        reason,
        message.clone(),
        None,
    );
    let quiet = st
        .last_warn
        .is_some_and(|t| t.elapsed() < shared.tuning.backoff_max);
    if transition || !quiet {
        warn!(cluster = %cluster.name, reason, message = %message, "WorkerCluster not Ready");
        st.last_warn = Some(Instant::now());
    } else {
        debug!(cluster = %cluster.name, reason, message = %message, "WorkerCluster still not Ready");
    }
    status::publish(shared, cluster, true).await;
    st.backoff.next_delay()
}

/// Another, older registration has the same API server: this one is never used for placement or
/// garbage collection and has no watch of its own (Jobs placed through it before that was known
/// are followed through the older one's), and it looks again every backoff cap.
async fn duplicate(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    other: String,
    why: String,
) -> Duration {
    if cluster.duplicate_of().as_ref() != Some(&other) {
        cluster.set_duplicate_of(Some(other));
        // Origins placed through it are now followed through the other registration.
        shared.requeue_placed_on(&cluster.name);
    }
    unusable(shared, cluster, st, REASON_DUPLICATE_CLUSTER, why).await
}

/// The worker must not be used at all (a duplicate registration, or its origin id belongs to
/// another management cluster): no watch, so no mirror cache, hence no placement, no garbage
/// collection and no delete there; it looks again every backoff cap.
async fn unusable(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    st: &mut TaskState,
    reason: &'static str,
    why: String,
) -> Duration {
    stop_watch(cluster, st);
    st.sweep = true;
    if set_health(
        shared,
        cluster,
        ProbeState::NotReady,
        reason,
        why.clone(),
        None,
    ) {
        warn!(cluster = %cluster.name, reason, message = %why, "WorkerCluster not used");
    }
    status::publish(shared, cluster, true).await;
    crate::backoff::jitter(shared.tuning.backoff_max)
}

/// Stops the watches (the worker failed, is unusable or got a new client): the next probe is a
/// full one.
fn stop_watch(cluster: &Cluster, st: &mut TaskState) {
    st.full_due = None;
    for (_, w) in std::mem::take(&mut st.watches) {
        w.cancel();
    }
    cluster.mirrors.set_unsynced();
    st.fresh_watch = true;
}

/// Records the probe outcome; reports transitions (origins to re-examine, a log line when it turns
/// Ready). Returns whether the state or the reason changed.
fn set_health(
    shared: &Arc<Ctx>,
    cluster: &Arc<Cluster>,
    state: ProbeState,
    reason: &'static str,
    message: String,
    version: Option<String>,
) -> bool {
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
        policy: old.policy,
    };
    let transition = old.state != new.state || old.reason != new.reason;
    cluster.set_health(new.clone());
    if transition && new.ready() {
        info!(cluster = %cluster.name, version = ?new.server_version, "WorkerCluster Ready");
    }
    if old.state != new.state {
        shared.on_cluster_changed(&cluster.name);
    }
    transition
}

/// The cached data of the cluster's Secret and the key it names (None: no such Secret).
fn secret_source(shared: &Ctx, cluster: &Cluster) -> Option<(super::SecretData, String)> {
    let wc = cluster.worker_cluster();
    let r = &wc.spec.kubeconfig_secret_ref;
    let data = shared.registry.secrets.get(&r.name)?;
    Some((data, r.key.clone()))
}

/// The kubeconfig text from the cluster's Secret, or the condition reason and message.
pub(super) fn kubeconfig_text(
    shared: &Ctx,
    cluster: &Cluster,
) -> Result<String, (&'static str, String)> {
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

/// When the cluster's Secret is missing from the (labelled) cache: one GET by name tells whether it
/// exists without the label `courier.dev/kubeconfig=true`; then the message naming the fix. None
/// when it does not exist, or the GET fails (the plain "not found" stands).
async fn unlabelled_secret(shared: &Ctx, cluster: &Cluster) -> Option<String> {
    let name = cluster
        .worker_cluster()
        .spec
        .kubeconfig_secret_ref
        .name
        .clone();
    if shared.registry.secrets.get(&name).is_some() {
        return None;
    }
    let ns = &shared.cfg.namespace;
    let api: Api<Secret> = Api::namespaced(shared.mgmt.clone(), ns);
    let secret = with_timeout(shared.tuning.request_timeout, api.get_opt(&name))
        .await
        .ok()??;
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_KUBECONFIG_SECRET))
        .is_some_and(|v| v == "true");
    // Labelled: the watch has not delivered it yet and wakes this cluster when it does.
    (!labelled).then(|| {
        format!(
            "Secret {ns}/{name} exists but lacks the label {LABEL_KUBECONFIG_SECRET}=true, so \
             Courier does not read it: run `kubectl label secret -n {ns} {name} \
             {LABEL_KUBECONFIG_SECRET}=true`"
        )
    })
}

/// Parses the kubeconfig under the policy and builds the request and watch clients.
async fn connect(shared: &Ctx, cluster: &Cluster, text: &str) -> Result<Connection, String> {
    let wc = cluster.worker_cluster();
    let r = &wc.spec.kubeconfig_secret_ref;
    let place = format!(
        "Secret {}/{}, key {:?}",
        shared.cfg.namespace, r.name, r.key
    );
    let checked =
        credentials::check(text, shared.cfg.credentials).map_err(|p| format!("{place}: {p}"))?;
    let t = &shared.tuning;
    // Every request on it has its own deadline (`with_timeout`, the request timeout). The read
    // timeout also closes idle pooled connections: longer than the check interval, so the
    // connection of the full probe serves the checks after it, and each check the next, without a
    // TLS handshake (a worker that takes no new connections is caught by the checks' TCP connect).
    let request = checked
        .client(ClientTimeouts {
            connect: t.connect_timeout,
            read: t.probe_interval + t.request_timeout,
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

fn install(cluster: &Arc<Cluster>, st: &mut TaskState, conn: Connection) {
    let rotated = cluster.connection().is_some();
    let same_server = cluster
        .connection()
        .is_some_and(|c| c.server == conn.server);
    if !same_server {
        cluster.forget_namespaces();
    }
    info!(cluster = %cluster.name, server = %conn.server, rotated, "worker client built from the kubeconfig Secret");
    let server = normalize_server(&conn.server);
    cluster.set_identity(|i| {
        if i.server.as_ref() != Some(&server) {
            i.namespace_uid = None;
        }
        i.server = Some(server);
    });
    cluster.set_connection(Some(Arc::new(conn)));
    cluster.close_circuit();
    st.sweep = true;
    // The watch (re)starts once the new client's probe succeeds (and the worker is no duplicate).
    stop_watch(cluster, st);
}

fn disconnect(cluster: &Cluster, st: &mut TaskState) {
    stop_watch(cluster, st);
    if cluster.connection().is_some() {
        cluster.set_connection(None);
    }
    cluster.set_identity(|i| *i = lifecycle::Identity::default());
}

fn restart_watch(shared: &Arc<Ctx>, cluster: &Arc<Cluster>, st: &mut TaskState) {
    for (_, w) in std::mem::take(&mut st.watches) {
        w.cancel();
    }
    cluster.mirrors.set_unsynced();
    follow_scopes(shared, cluster, st);
}

/// Runs exactly the mirror watches the worker needs now ([`watch_scopes`]): stops those no longer
/// needed, starts the missing ones (each new one unsyncs the cache until it has listed).
fn follow_scopes(shared: &Arc<Ctx>, cluster: &Arc<Cluster>, st: &mut TaskState) {
    let Some(conn) = cluster.connection() else {
        return;
    };
    let wc = cluster.worker_cluster();
    let wanted = match wc.spec.namespaces.as_deref() {
        None => watch_scopes(None, []),
        Some(list) => {
            let mut in_use = cluster.mirrors.namespaces();
            in_use.extend(shared.hooks.namespaces_placed_on(&cluster.name));
            watch_scopes(Some(list), in_use.iter().map(String::as_str))
        }
    };
    st.watches.retain(|scope, token| {
        let keep = wanted.contains(scope);
        if !keep {
            debug!(cluster = %cluster.name, namespace = ?scope, "mirror watch no longer needed; stopped");
            token.cancel();
            cluster.mirrors.unwatched(scope);
        }
        keep
    });
    for scope in wanted {
        if st.watches.contains_key(&scope) {
            continue;
        }
        debug!(cluster = %cluster.name, namespace = ?scope, "mirror watch started");
        let token = cluster.cancel.child_token();
        cluster.mirrors.watching(scope.clone());
        shared.tasks.spawn(mirrors::watch(
            shared.clone(),
            cluster.clone(),
            scope.clone(),
            conn.watch.clone(),
            token.clone(),
        ));
        st.watches.insert(scope, token);
    }
}

/// The shared worker probe ([`credentials::probe`]: `/version`, the version gate, the rights), then
/// the `kube-system` namespace's UID (the worker's identity). Returns the version and the UID.
async fn probe(
    shared: &Ctx,
    cluster: &Cluster,
    conn: &Connection,
) -> Result<(String, String), (&'static str, String)> {
    let deadline = shared.tuning.request_timeout;
    let wc = cluster.worker_cluster();
    let fail = |e: &crate::errors::CallError| {
        let f = classify(&conn.server, None, e);
        (f.reason, f.message)
    };
    let scope = rights_scope(shared, &wc);
    let facts = credentials::probe::probe(&conn.request, &conn.server, None, scope, deadline)
        .await
        .map_err(|f| (f.reason, f.message))?;
    // A server that stopped accepting may still answer on a pooled connection (see `check`).
    // After the calls: a worker that does not answer costs one connection attempt per probe.
    credentials::probe::accepts_connections(&conn.server, shared.tuning.connect_timeout)
        .await
        .map_err(|e| fail(&e))?;
    let uid = fresh(|| lifecycle::kube_system_uid(conn, deadline))
        .await
        .map_err(|e| fail(&e))?;
    Ok((facts.server_version, uid))
}

/// Where the worker's rights must hold ([`credentials::probe::required_rights`]).
fn rights_scope<'a>(shared: &Ctx, wc: &'a courier_api::WorkerCluster) -> RightsScope<'a> {
    RightsScope {
        creating_namespaces: shared.cfg.worker_namespaces
            != courier_core::namespaces::WorkerNamespaces::MustExist,
        namespaces: wc.spec.namespaces.as_deref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wake-ups due within one slot all fall on its end; a boundary stays where it is.
    #[test]
    fn check_wake_ups_are_gathered_at_slot_ends() {
        let origin = Instant::now();
        let slot = Duration::from_millis(250);
        let end = origin + Duration::from_millis(10_250);
        for ms in [10_001, 10_100, 10_249, 10_250] {
            let at = origin + Duration::from_millis(ms);
            assert_eq!(slot_end(origin, at, slot), end, "{ms} ms");
        }
        let next = origin + Duration::from_millis(10_251);
        assert_eq!(
            slot_end(origin, next, slot),
            origin + Duration::from_millis(10_500)
        );
        // Short delays are not moved.
        let soon = Instant::now() + Duration::from_millis(200);
        assert_eq!(wake_slot(soon, Duration::from_millis(200)), soon);
        let later = Instant::now() + Duration::from_secs(9);
        let woken = wake_slot(later, Duration::from_secs(9));
        assert!(
            woken >= later && woken < later + WAKE_SLOT,
            "{woken:?} {later:?}"
        );
    }
}
