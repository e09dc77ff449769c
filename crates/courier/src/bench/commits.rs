//! The servers' side of status propagation: the kubesim clusters run in the bench process, so the
//! bench follows each server's Job table in process (`kubesim::store::Store::watch`) and records
//! every version of an origin or a mirror at the instant the server committed it
//! (`kubesim::store::Event::committed`). Nothing here goes through HTTP or waits for the bench's
//! own watch tasks, so a status change is timed from when the worker stored it to when the
//! management server stored the origin showing it, whatever the bench process is busy with.

use std::sync::Arc;

use courier_api::{DEFAULT_ORIGIN_ID, LABEL_ORIGIN};
use kubesim::store::{Event, EventType, Store, TableKey};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::measure::{Recorder, Side, Signature};

/// Follows the Jobs of `namespace` in `store` (on a worker, only Courier's mirrors) from now on and
/// records each version's commit instant on `recorder`. A follower that falls behind the store's
/// broadcast buffer carries on from the store's retained events (every version is kept in order);
/// one behind those too records nothing more and says so in the log.
pub fn follow(
    store: Arc<Store>,
    namespace: &'static str,
    side: Side,
    recorder: Arc<Recorder>,
) -> JoinHandle<()> {
    let table = TableKey::new("batch", "jobs");
    let start = store.watch(&table, None);
    tokio::spawn(async move {
        let Ok(start) = start else { return };
        let (mut rx, mut seen) = (start.rx, start.rv);
        loop {
            match rx.recv().await {
                Ok(ev) => record(&ev, &mut seen, namespace, side, &recorder),
                Err(RecvError::Lagged(_)) => match store.watch(&table, Some(seen)) {
                    Ok(resumed) => {
                        for ev in &resumed.backlog {
                            record(ev, &mut seen, namespace, side, &recorder);
                        }
                        rx = resumed.rx;
                    }
                    Err(oldest) => {
                        tracing::warn!(
                            seen,
                            oldest,
                            "bench: the in-process Job follower fell behind the retained events; \
                             status commit times after this are missing"
                        );
                        return;
                    }
                },
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// Records `ev` unless it is not newer than `seen` (already recorded) or not a Job of the run.
fn record(ev: &Event, seen: &mut u64, namespace: &str, side: Side, recorder: &Recorder) {
    if ev.rv <= *seen {
        return;
    }
    *seen = ev.rv;
    let obj = &ev.obj;
    if ev.kind == EventType::Deleted || obj.namespace() != namespace {
        return;
    }
    if side == Side::Mirror && obj.label(LABEL_ORIGIN) != Some(DEFAULT_ORIGIN_ID) {
        return;
    }
    if side == Side::Origin && ev.kind == EventType::Modified {
        recorder.origin_written();
    }
    let sig = Signature::of_job_json(&obj.json);
    let created = ev.kind == EventType::Added;
    recorder.committed(side, obj.name(), created, sig, ev.committed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesim::store::{Precondition, Retention};
    use serde_json::{Value, json};

    fn job(name: &str, mirror: bool, active: i32) -> Value {
        let labels = if mirror {
            json!({ LABEL_ORIGIN: DEFAULT_ORIGIN_ID })
        } else {
            json!({})
        };
        json!({"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"parallelism": 1}, "status": {"active": active}})
    }

    fn put(store: &Store, name: &str, mirror: bool, active: i32) {
        let t = TableKey::new("batch", "jobs");
        let pre = match store.get(&t, "default", name) {
            Some(_) => Precondition::Exists(None),
            None => Precondition::MustNotExist,
        };
        store
            .put(&t, "default", name, job(name, mirror, active), pre)
            .expect("stored");
    }

    /// Each status change is timed from the commits, and a follower far behind the broadcast
    /// buffer (more versions than it holds, written before the follower ran once) still records
    /// every one of them from the retained events. Seen failing with the `Lagged` arm returning
    /// instead of resuming: 0 of the 1,500 changes matched.
    #[tokio::test(flavor = "current_thread")]
    async fn every_committed_version_is_recorded_even_after_a_lag() {
        let (origins, mirrors) = (
            Arc::new(Store::new(Retention::default())),
            Arc::new(Store::new(Retention::default())),
        );
        let recorder = Arc::new(Recorder::default());
        let tasks = [
            follow(origins.clone(), "default", Side::Origin, recorder.clone()),
            follow(mirrors.clone(), "default", Side::Mirror, recorder.clone()),
        ];
        // Not a mirror of ours (no origin label): not recorded, or its status would count as
        // unmatched (its origin exists).
        put(&origins, "foreign", false, 0);
        put(&mirrors, "foreign", false, 1);
        for active in 1..=1500 {
            put(&mirrors, "j", true, active);
            put(&origins, "j", false, active);
        }
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while recorder.summarize().status_latency.count < 1500 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .ok();
        let t = recorder.summarize();
        assert_eq!(
            (t.status_latency.count, t.status_unmatched),
            (1500, 0),
            "{t:?}"
        );
        // Both origins' creates and the one mirror's, from the commits.
        assert_eq!((t.created, t.dispatched), (2, 1), "{t:?}");
        // The commits are microseconds apart, whenever the follower read them.
        assert!(t.status_latency.max_ms < 1000.0, "{t:?}");
        // 1,499 writes after the create, over the two Jobs created.
        assert_eq!(t.origin_writes_per_job, 1499.0 / 2.0, "{t:?}");
        for task in tasks {
            task.abort();
        }
    }
}
