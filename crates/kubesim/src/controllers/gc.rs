//! The garbage collector's finalizer handling, which is what matters in a cluster without pods:
//! objects being deleted lose the `orphan` finalizer at once (kubesim keeps no dependents to orphan)
//! and `foregroundDeletion` once their dependents are gone. The only dependents kubesim models are
//! a Job's simulated pods: when the Job controller runs, it reports when a deleted Job's pods are
//! gone (`GcNote`); any other object has none, so its `foregroundDeletion` goes at once.
//!
//! Every served table is followed by a small forwarder task that passes on objects carrying one of
//! these finalizers while being deleted; new tables (custom resources) are picked up when a CRD
//! changes and on a periodic rescan of the registry.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{CONTROLLER_MANAGER, Change, Follower, decoded, obj_key, served_for_table, write_opts};
use crate::api::{Api, Part};
use crate::json::{finalizers, is_deleting, meta_str};
use crate::store::{EventType, Stored, TableKey};

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

const RESCAN_EVERY: Duration = Duration::from_secs(1);
const RETRY_AFTER: Duration = Duration::from_millis(200);
const CONFLICT_RETRIES: usize = 8;

/// From the Job controller: the simulated pods of a deleted Job are all gone.
#[derive(Debug, Clone)]
pub struct GcNote {
    pub ns: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    table: TableKey,
    ns: String,
    name: String,
}

struct Gc {
    api: Arc<Api>,
    /// Whether the Job controller runs (and so owns the knowledge of Jobs' pods).
    jobs_simulated: bool,
    jobs: TableKey,
    /// UIDs of deleted Jobs whose pods are gone.
    pods_gone: HashSet<String>,
    forwarders: HashMap<TableKey, JoinHandle<()>>,
    tx: UnboundedSender<Item>,
    retries: BTreeSet<(Instant, Item)>,
    shutdown: CancellationToken,
}

pub(super) async fn run(
    api: Arc<Api>,
    jobs_simulated: bool,
    mut notes: Option<UnboundedReceiver<GcNote>>,
    shutdown: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut crds = Follower::new(
        api.store.clone(),
        TableKey::new(crate::kinds::crd::GROUP, "customresourcedefinitions"),
        "gc",
    );
    let mut gc = Gc {
        api,
        jobs_simulated,
        jobs: TableKey::new("batch", "jobs"),
        pods_gone: HashSet::new(),
        forwarders: HashMap::new(),
        tx,
        retries: BTreeSet::new(),
        shutdown: shutdown.clone(),
    };
    gc.rescan();
    let mut rescan = tokio::time::interval(RESCAN_EVERY);
    loop {
        let next_retry = gc.retries.first().map(|(t, _)| *t);
        let sleep = tokio::time::sleep_until(next_retry.unwrap_or_else(Instant::now));
        let note = async {
            match &mut notes {
                Some(r) => r.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(item) = rx.recv() => gc.process(item),
            n = note => match n {
                Some(n) => {
                    gc.pods_gone.insert(n.uid);
                    let item = Item { table: gc.jobs.clone(), ns: n.ns, name: n.name };
                    gc.process(item);
                }
                None => notes = None,
            },
            _ = crds.next() => gc.rescan(),
            _ = rescan.tick() => gc.rescan(),
            _ = sleep, if next_retry.is_some() => gc.run_retries(),
        }
    }
    for (_, h) in gc.forwarders.drain() {
        h.abort();
    }
}

impl Gc {
    /// Starts a forwarder for every served table that has none yet.
    fn rescan(&mut self) {
        let mut tables: Vec<TableKey> = self
            .api
            .registry
            .all()
            .into_iter()
            .filter(|s| s.schema.is_some())
            .map(|s| s.table.clone())
            .collect();
        tables.dedup();
        for t in tables {
            if self.forwarders.contains_key(&t) {
                continue;
            }
            let h = tokio::spawn(forward(
                self.api.clone(),
                t.clone(),
                self.tx.clone(),
                self.shutdown.clone(),
            ));
            self.forwarders.insert(t, h);
        }
    }

    fn run_retries(&mut self) {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some((t, _)) = self.retries.first() {
            if *t > now {
                break;
            }
            if let Some((_, item)) = self.retries.pop_first() {
                due.push(item);
            }
        }
        for item in due {
            self.process(item);
        }
    }

    /// Whether a Job must keep `foregroundDeletion` because its simulated pods still exist.
    fn waits_for_pods(&self, table: &TableKey, obj: &Value) -> bool {
        *table == self.jobs
            && self.jobs_simulated
            && !crate::jobctl::is_managed_elsewhere(obj)
            && !self.pods_gone.contains(meta_str(obj, "uid"))
    }

    fn process(&mut self, item: Item) {
        let key = obj_key(&item.ns, &item.name);
        let Some(s) = served_for_table(&self.api, &item.table) else {
            return;
        };
        let opts = write_opts(CONTROLLER_MANAGER);
        for _ in 0..CONFLICT_RETRIES {
            let Some(cur) = self.api.store.get(&item.table, &item.ns, &item.name) else {
                return;
            };
            let mut obj = self.api.served_value(&s, &cur);
            let uid = meta_str(&obj, "uid").to_string();
            if !is_deleting(&obj) {
                return;
            }
            let had = finalizers(&obj);
            let mut keep: Vec<String> = had.iter().filter(|f| *f != ORPHAN).cloned().collect();
            if keep.iter().any(|f| f == FOREGROUND) && !self.waits_for_pods(&item.table, &obj) {
                keep.retain(|f| f != FOREGROUND);
            }
            if keep == had {
                return;
            }
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                if keep.is_empty() {
                    m.remove("finalizers");
                } else {
                    m.insert("finalizers".into(), Value::from(keep));
                }
            }
            let obj = match decoded(&s, obj) {
                Ok(o) => o,
                Err(e) => {
                    tracing::error!(controller = "gc", object = %key, resource = %item.table.plural, error = %e.message, "object does not decode");
                    return;
                }
            };
            match self
                .api
                .update(&s, &item.ns, &item.name, obj, Part::Main, &opts)
            {
                Ok(_) => {
                    self.pods_gone.remove(&uid);
                    return;
                }
                Err(e) if e.code == 409 => continue,
                Err(e) if e.code == 404 => return,
                Err(e) => {
                    tracing::warn!(controller = "gc", object = %key, resource = %item.table.plural, code = e.code, error = %e.message, "removing finalizers failed; retrying");
                    self.retries.insert((Instant::now() + RETRY_AFTER, item));
                    return;
                }
            }
        }
        tracing::warn!(controller = "gc", object = %key, resource = %item.table.plural, "finalizer removal kept conflicting; retrying");
        self.retries.insert((Instant::now() + RETRY_AFTER, item));
    }
}

/// [`wants`] of a stored object: only one being deleted is parsed (most events of a busy server are
/// status writes of live objects, which the stored metadata tells apart without a parse).
fn wants_stored(st: &Stored) -> bool {
    st.is_deleting() && wants(&st.value())
}

/// Whether the garbage collector has work on this object.
fn wants(obj: &Value) -> bool {
    is_deleting(obj)
        && obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|f| f == ORPHAN || f == FOREGROUND))
}

async fn forward(
    api: Arc<Api>,
    table: TableKey,
    tx: UnboundedSender<Item>,
    shutdown: CancellationToken,
) {
    let mut f = Follower::new(api.store.clone(), table.clone(), "gc");
    let item = |st: &Stored| Item {
        table: table.clone(),
        ns: st.namespace().to_string(),
        name: st.name().to_string(),
    };
    loop {
        let change = tokio::select! {
            _ = shutdown.cancelled() => return,
            c = f.next() => c,
        };
        let items: Vec<Item> = match change {
            Change::Resync(all) => all
                .iter()
                .filter(|st| wants_stored(st))
                .map(|st| item(st))
                .collect(),
            Change::Event(ev) if ev.kind != EventType::Deleted && wants_stored(&ev.obj) => {
                vec![item(&ev.obj)]
            }
            Change::Event(_) => Vec::new(),
        };
        for i in items {
            if tx.send(i).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Telling the garbage collector's work from the stored metadata first decides as parsing the
    /// whole object does, for objects live or being deleted, with and without its finalizers.
    #[test]
    fn the_stored_check_agrees_with_the_parsed_one() {
        let deleting = json!("2026-01-01T00:00:00Z");
        let mut seen = [0; 2];
        for deletion in [None, Some(Value::Null), Some(deleting)] {
            for fin in [
                json!(null),
                json!([]),
                json!(["other"]),
                json!([ORPHAN]),
                json!(["x", FOREGROUND]),
            ] {
                let mut meta = json!({"name": "a", "namespace": "ns", "finalizers": fin});
                if let Some(d) = &deletion {
                    meta["deletionTimestamp"] = d.clone();
                }
                let obj = json!({"metadata": meta});
                let st = Stored::new(5, obj.clone());
                assert_eq!(wants_stored(&st), wants(&obj), "{obj}");
                seen[usize::from(wants(&obj))] += 1;
            }
        }
        assert_eq!(seen, [13, 2], "both answers were compared");
    }
}
