//! The namespace controller (`pkg/controller/namespace/deletion`): a Terminating namespace that still
//! has the `kubernetes` spec finalizer gets every namespaced object in it deleted (a Background
//! delete-collection per resource), its deletion conditions written to `.status`, and, once nothing is
//! left, the `kubernetes` finalizer removed through `/finalize` (`Api::finalize_namespace`, the same
//! path as a client's `PUT .../finalize`) — after which the namespace goes (if no metadata finalizer
//! holds it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{CONTROLLER_MANAGER, Change, Follower, backoff_cap, decoded, next_backoff, write_opts};
use crate::api::{Api, DeleteOpts, ListOpts, Part, Served};
use crate::json::{finalizers, is_deleting, meta_str};
use crate::kinds::namespace::FINALIZER_KUBERNETES;
use crate::store::EventType;

/// The conditions the namespace deleter maintains, in its order, with their "ok" reason and message.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

struct Pending {
    due: Instant,
    backoff: Option<Duration>,
}

struct NamespaceController {
    api: Arc<Api>,
    served: Arc<Served>,
    cap: Duration,
    pending: HashMap<String, Pending>,
}

pub(super) async fn run(api: Arc<Api>, speed: f64, shutdown: CancellationToken) {
    let Some(served) = api.registry.get("", "v1", "namespaces") else {
        tracing::error!(
            controller = "namespace",
            "v1 namespaces are not served; not starting"
        );
        return;
    };
    let mut follower = Follower::new(api.store.clone(), served.table.clone(), "namespace");
    let mut c = NamespaceController {
        api,
        served,
        cap: backoff_cap(speed),
        pending: HashMap::new(),
    };
    loop {
        let next = c.pending.values().map(|p| p.due).min();
        let sleep = tokio::time::sleep_until(next.unwrap_or_else(Instant::now));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            change = follower.next() => c.apply(change),
            _ = sleep, if next.is_some() => c.run_due(),
        }
    }
}

fn needs_work(ns: &Value) -> bool {
    is_deleting(ns)
        && ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|f| f == FINALIZER_KUBERNETES))
}

impl NamespaceController {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Resync(items) => {
                for st in items {
                    self.observe(&st.value());
                }
            }
            Change::Event(ev) if ev.kind == EventType::Deleted => {
                self.pending.remove(meta_str(&ev.obj.value(), "name"));
            }
            Change::Event(ev) => self.observe(&ev.obj.value()),
        }
    }

    fn observe(&mut self, ns: &Value) {
        let name = meta_str(ns, "name");
        if !needs_work(ns) {
            self.pending.remove(name);
            return;
        }
        // A change of the namespace is worked on at once; the retry delay is kept.
        let now = Instant::now();
        self.pending
            .entry(name.to_string())
            .and_modify(|p| p.due = now)
            .or_insert(Pending {
                due: now,
                backoff: None,
            });
    }

    fn run_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            if self.sync(&name) {
                self.pending.remove(&name);
            } else if let Some(p) = self.pending.get_mut(&name) {
                let d = next_backoff(p.backoff, self.cap);
                p.backoff = Some(d);
                p.due = Instant::now() + d;
            }
        }
    }

    /// One pass of the deleter. `true` when there is nothing more to do for this namespace.
    fn sync(&mut self, name: &str) -> bool {
        let Some(cur) = self.api.store.get(&self.served.table, "", name) else {
            return true;
        };
        let ns = self.api.served_value(&self.served, &cur);
        if !needs_work(&ns) {
            return true;
        }
        // Every namespaced resource that can be listed and deleted, once per storage.
        let mut tables = HashSet::new();
        let mut resources: Vec<Arc<Served>> = Vec::new();
        for s in self.api.registry.all() {
            let i = s.info();
            if !i.namespaced
                || s.schema.is_none()
                || !i.verbs.iter().any(|v| v == "list")
                || !i.verbs.iter().any(|v| v == "delete")
            {
                continue;
            }
            if tables.insert(s.table.clone()) {
                resources.push(s);
            }
        }
        let background = DeleteOpts {
            propagation: Some("Background".into()),
            ..DeleteOpts::default()
        };
        let mut failures: Vec<String> = Vec::new();
        let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
        let mut held: BTreeMap<String, usize> = BTreeMap::new();
        for s in &resources {
            let i = s.info();
            let resource = format!("{}.{}", i.plural, i.group);
            if let Err(e) =
                self.api
                    .delete_collection(s, Some(name), &ListOpts::default(), &background)
            {
                tracing::warn!(controller = "namespace", namespace = %name, resource = %resource, code = e.code, error = %e.message, "deleting content failed");
                failures.push(format!("{resource}: {}", e.message));
            }
            match self.api.list(s, Some(name), &ListOpts::default()) {
                Ok(page) => {
                    if !page.items.is_empty() {
                        remaining.insert(resource.clone(), page.items.len());
                    }
                    for st in &page.items {
                        for f in finalizers(&st.value()) {
                            *held.entry(f).or_default() += 1;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(controller = "namespace", namespace = %name, resource = %resource, code = e.code, error = %e.message, "listing content failed");
                    failures.push(format!("{resource}: {}", e.message));
                }
            }
        }
        let mut problems: HashMap<&str, (String, String)> = HashMap::new();
        if !failures.is_empty() {
            failures.sort();
            problems.insert(
                "NamespaceDeletionContentFailure",
                (
                    "ContentDeletionFailed".into(),
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        failures.len(),
                        failures.join(", ")
                    ),
                ),
            );
        }
        if !remaining.is_empty() {
            let list: Vec<String> = remaining
                .iter()
                .map(|(r, n)| format!("{r} has {n} resource instances"))
                .collect();
            problems.insert(
                "NamespaceContentRemaining",
                (
                    "SomeResourcesRemain".into(),
                    format!("Some resources are remaining: {}", list.join(", ")),
                ),
            );
        }
        if !held.is_empty() {
            let list: Vec<String> = held
                .iter()
                .map(|(f, n)| format!("{f} in {n} resource instances"))
                .collect();
            problems.insert(
                "NamespaceFinalizersRemaining",
                (
                    "SomeFinalizersRemain".into(),
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        list.join(", ")
                    ),
                ),
            );
        }
        if !self.write_conditions(name, &problems) {
            return false;
        }
        if !failures.is_empty() || !remaining.is_empty() {
            return false;
        }
        self.finalize(name)
    }

    /// Writes the deletion conditions when they changed (`namespaceConditionUpdater`). `false` when
    /// the write failed (retried later).
    fn write_conditions(&self, name: &str, problems: &HashMap<&str, (String, String)>) -> bool {
        let opts = write_opts(CONTROLLER_MANAGER);
        for _ in 0..8 {
            let Some(cur) = self.api.store.get(&self.served.table, "", name) else {
                return false;
            };
            let mut ns = self.api.served_value(&self.served, &cur);
            let old: Vec<Value> = ns
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let now = crate::time::now_string();
            let mut new = Vec::new();
            for (ctype, ok_reason, ok_message) in CONDITIONS {
                let (status, reason, message) = match problems.get(ctype) {
                    Some((r, m)) => ("True", r.as_str(), m.as_str()),
                    None => ("False", ok_reason, ok_message),
                };
                let prev = old
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype));
                let field = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(String::from);
                let time = match prev {
                    Some(p) if field(p, "status").as_deref() == Some(status) => {
                        p.get("lastTransitionTime").cloned().unwrap_or(json!(now))
                    }
                    _ => json!(now),
                };
                new.push(json!({
                    "type": ctype,
                    "status": status,
                    "lastTransitionTime": time,
                    "reason": reason,
                    "message": message,
                }));
            }
            if new == old {
                return true;
            }
            if let Some(st) = ns.get_mut("status").and_then(Value::as_object_mut) {
                st.insert("conditions".into(), Value::Array(new));
            }
            let ns = match decoded(&self.served, ns) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(controller = "namespace", namespace = %name, error = %e.message, "status does not decode");
                    return false;
                }
            };
            match self
                .api
                .update(&self.served, "", name, ns, Part::Status, &opts)
            {
                Ok(_) => return true,
                Err(e) if e.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(controller = "namespace", namespace = %name, code = e.code, error = %e.message, "writing deletion conditions failed");
                    return false;
                }
            }
        }
        false
    }

    /// Removes the `kubernetes` spec finalizer through `/finalize`.
    fn finalize(&self, name: &str) -> bool {
        for _ in 0..8 {
            let Some(cur) = self.api.store.get(&self.served.table, "", name) else {
                return true;
            };
            let mut ns = self.api.served_value(&self.served, &cur);
            if let Some(Value::Array(f)) = ns.pointer_mut("/spec/finalizers") {
                f.retain(|x| x != FINALIZER_KUBERNETES);
            }
            match self.api.finalize_namespace(&self.served, name, ns) {
                Ok(_) => return true,
                Err(e) if e.code == 409 => continue,
                Err(e) if e.code == 404 => return true,
                Err(e) => {
                    tracing::warn!(controller = "namespace", namespace = %name, code = e.code, error = %e.message, "finalizing failed");
                    return false;
                }
            }
        }
        false
    }
}
