//! Starts the controller's tasks and runs until shutdown: the leader election loop (or "always
//! leading"), the Secret and WorkerCluster watches (which start one task per cluster, each with its
//! own mirror watch), the origin Job watch, `concurrency` queue workers, the periodic resync, the
//! GC loop, the leadership and readiness reactors, the metrics endpoint and the web view.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::ControllerError;
use crate::leader::LeaderState;
use crate::shared::Shared;
use crate::{gc, http, leader, origin, registry, ui};

/// Queue workers beyond `concurrency`, for the urgent lane (status copies) only: as many again.
/// With one, status copies (about three per Job, each a round trip) waited for the shared workers
/// that dispatch held; with `concurrency` more they wait for none: in `courier bench` on a quiet
/// 2-core machine the status p50 fell by about a quarter and the p99 by about a sixth, for about
/// 8 % more controller CPU per Job and the same throughput (docs/benchmarks.md, "What limits each
/// figure").
fn urgent_only_workers(concurrency: usize) -> usize {
    concurrency
}

/// Reacts to leadership changes: a new leader re-examines every origin, writes every cluster's
/// status and sweeps for garbage.
async fn leadership_reactor(shared: Arc<Shared>) {
    let mut rx = shared.leader.subscribe();
    let mut was = rx.borrow_and_update().leading;
    loop {
        tokio::select! {
            _ = shared.token.cancelled() => return,
            r = rx.changed() => if r.is_err() { return },
        }
        let now = rx.borrow_and_update().leading;
        shared.metrics.leader.set(i64::from(now));
        shared.ready_changed();
        if now && !was {
            for k in shared.origin.origins.keys() {
                shared.origin.queue.add(k);
            }
            shared.origin.registry.wake_all();
            shared.gc_now.notify_one();
        }
        was = now;
    }
}

/// Recomputes readiness whenever a cache reports that it synced.
async fn readiness_reactor(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = shared.token.cancelled() => return,
            _ = shared.synced.notified() => shared.ready_changed(),
        }
    }
}

async fn bind(
    addr: Option<std::net::SocketAddr>,
    error: fn(std::net::SocketAddr, std::io::Error) -> ControllerError,
) -> Result<Option<TcpListener>, ControllerError> {
    match addr {
        Some(addr) => TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|source| error(addr, source)),
        None => Ok(None),
    }
}

/// Starts every task and runs until `shutdown` is cancelled.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) -> Result<(), ControllerError> {
    let listener = bind(shared.cfg.metrics_addr, |addr, source| {
        ControllerError::Bind { addr, source }
    })
    .await?;
    let ui_listener = bind(shared.cfg.ui_addr, |addr, source| ControllerError::BindUi {
        addr,
        source,
    })
    .await?;
    info!(
        origin = %shared.cfg.origin_id,
        namespace = %shared.cfg.namespace,
        identity = %shared.identity,
        concurrency = shared.cfg.concurrency,
        leader_elect = shared.cfg.leader_elect,
        metrics = ?listener.as_ref().and_then(|l| l.local_addr().ok()),
        ui = ?ui_listener.as_ref().and_then(|l| l.local_addr().ok()),
        "courier controller starting"
    );
    let t = &shared.tasks;
    t.spawn(leadership_reactor(shared.clone()));
    t.spawn(readiness_reactor(shared.clone()));
    if shared.cfg.leader_elect {
        t.spawn(leader::run(shared.election()));
    } else {
        shared.leader.set(LeaderState {
            leading: true,
            healthy: true,
        });
    }
    t.spawn(registry::watch_secrets(shared.registry.clone()));
    t.spawn(registry::watch_worker_clusters(shared.registry.clone()));
    t.spawn(registry::namespaces::watch(shared.registry.clone()));
    t.spawn(origin::watch_origins(shared.origin.clone()));
    // `concurrency` workers for every lane, and as many more that take urgent keys only: a status
    // copy never waits for a slot held by a dispatch (`WorkQueue::limit_normal`).
    shared.origin.queue.limit_normal(shared.cfg.concurrency);
    let workers = shared.cfg.concurrency + urgent_only_workers(shared.cfg.concurrency);
    for _ in 0..workers {
        t.spawn(origin::worker(shared.origin.clone()));
    }
    t.spawn(origin::resync(shared.origin.clone()));
    t.spawn(gc::run(shared.origin.clone(), shared.gc_now.clone()));
    if let Some(l) = listener {
        t.spawn(http::serve(l, shared.clone()));
    }
    if let Some(l) = ui_listener {
        t.spawn(ui::serve(l, shared.origin.clone()));
    }
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = shared.token.cancelled() => {}
    }
    info!("courier controller stopping");
    shared.token.cancel();
    shared.tasks.close();
    if tokio::time::timeout(Duration::from_secs(10), shared.tasks.wait())
        .await
        .is_err()
    {
        warn!("some controller tasks did not stop within 10s");
    }
    Ok(())
}
