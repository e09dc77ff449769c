//! The origin cache: every management-cluster Job with `spec.managedBy: courier.dev/dispatcher`,
//! trimmed to what `decide` reads.
//!
//! # Memory
//! An entry keeps the origin's `status` (needed whole: status writes are merge patches against
//! it), its finalizers, the labels and annotations decisions read (a fixed list: cluster, epoch,
//! re-dispatch count, cluster selector, Kueue's queue; each value at most 1 KiB, a longer one is
//! treated as absent: see `courier_core::reconcile::view`), and only the spec fields decisions read (managedBy, suspend, completions, parallelism,
//! completionMode, backoffLimitPerIndex, manualSelector and the fields that flow down;
//! `successPolicy` is reduced to `{}` since only its presence matters). The pod template is reduced
//! to its hash (template drift, see `courier_core::drift`); managedFields and user metadata are
//! dropped: ~1-2 KB per Job instead of the full object. The full JSON a mirror is built from is
//! fetched with one GET when a mirror must be created (once per placement), which costs a request
//! per dispatch instead of holding every template in memory.

use crate::locks::RwLockExt as _;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use courier_core::job::finished;
use courier_core::reconcile::view::{ORIGIN_ANNOTATION_KEYS, ORIGIN_LABEL_KEYS};
use courier_core::reconcile::{OriginView, ViewError};
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::queue::ObjectKey;

/// Spec fields an origin entry keeps.
const KEPT_SPEC_FIELDS: [&str; 12] = [
    "managedBy",
    "suspend",
    "completions",
    "parallelism",
    "completionMode",
    "backoffLimitPerIndex",
    "manualSelector",
    "activeDeadlineSeconds",
    "backoffLimit",
    "maxFailedIndexes",
    "podReplacementPolicy",
    "successPolicy",
];

/// One cached origin.
#[derive(Debug, Clone)]
pub struct OriginEntry {
    pub view: OriginView,
    pub created: Option<Timestamp>,
}

impl OriginEntry {
    /// The cluster this origin occupies for placement (intent set, not finished).
    fn placed_on(&self) -> Option<&str> {
        if finished(&self.view.status).is_some() {
            return None;
        }
        self.view
            .labels
            .get(courier_api::LABEL_CLUSTER)
            .map(String::as_str)
            .filter(|c| !c.is_empty())
    }
}

/// Trims a Job (as JSON) to what the origin cache keeps. `None` when it is not Courier's.
pub fn trim(job: &Value) -> Result<Option<OriginEntry>, ViewError> {
    let spec = job.get("spec").and_then(Value::as_object);
    let managed = spec
        .and_then(|s| s.get("managedBy"))
        .and_then(Value::as_str)
        == Some(courier_api::MANAGED_BY);
    if !managed {
        return Ok(None);
    }
    let meta = job
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(ViewError::MissingField { field: "metadata" })?;
    let mut m = Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "deletionTimestamp",
        "finalizers",
    ] {
        if let Some(v) = meta.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    // Only the keys decisions read; `OriginView::from_json` then drops over-long values.
    for (key, kept) in [
        ("labels", &ORIGIN_LABEL_KEYS[..]),
        ("annotations", &ORIGIN_ANNOTATION_KEYS[..]),
    ] {
        if let Some(map) = meta.get(key).and_then(Value::as_object) {
            let ours: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| kept.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            m.insert(key.into(), Value::Object(ours));
        }
    }
    let mut s = Map::new();
    if let Some(spec) = spec {
        for key in KEPT_SPEC_FIELDS {
            if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
                // Only the presence of a success policy matters to decisions.
                let v = if key == "successPolicy" {
                    json!({})
                } else {
                    v.clone()
                };
                s.insert(key.into(), v);
            }
        }
    }
    let trimmed = json!({
        "metadata": m,
        "spec": s,
        "status": job.get("status").cloned().unwrap_or(Value::Null),
    });
    let mut view = OriginView::from_json(&trimmed)?;
    view.template_hash =
        spec.and_then(|s| courier_core::drift::template_hash(&Value::Object(s.clone())));
    let created = meta
        .get("creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok());
    Ok(Some(OriginEntry { view, created }))
}

/// Whether resourceVersion `a` is newer than `b` (both numeric, as etcd and kubesim write them);
/// `None` when either is not a number (then the caller must not guess).
pub fn rv_newer(a: &str, b: &str) -> Option<bool> {
    Some(a.parse::<u64>().ok()? > b.parse::<u64>().ok()?)
}

#[derive(Default)]
struct Inner {
    map: HashMap<ObjectKey, Arc<OriginEntry>>,
    /// Unfinished origins per intent cluster (`currentMirrors`, placement load).
    placed: HashMap<String, u32>,
    /// Keys seen since the watcher's last `Init` (a re-list); `None` outside a re-list.
    relisting: Option<HashSet<ObjectKey>>,
}

impl Inner {
    fn count(&mut self, entry: &OriginEntry, delta: i64) {
        if let Some(cluster) = entry.placed_on() {
            let n = self.placed.entry(cluster.to_string()).or_insert(0);
            *n = u32::try_from((i64::from(*n) + delta).max(0)).unwrap_or(0);
            if *n == 0 {
                self.placed.remove(cluster);
            }
        }
    }
}

/// How an upsert went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsert {
    /// New key, or a newer version replaced the cached one.
    Changed,
    /// Same resourceVersion as cached.
    Unchanged,
    /// Older than the cached version (a write-through got ahead of the watch); ignored.
    Older,
}

#[derive(Default)]
pub struct OriginStore {
    inner: RwLock<Inner>,
    synced: AtomicBool,
}

impl OriginStore {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read_or_recover()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write_or_recover()
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<OriginEntry>> {
        self.read().map.get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.read().map.len()
    }

    /// Inserts or replaces `key`, unless the cached version is newer.
    pub fn upsert(&self, key: ObjectKey, entry: OriginEntry) -> Upsert {
        let mut inner = self.write();
        if let Some(seen) = inner.relisting.as_mut() {
            seen.insert(key.clone());
        }
        let verdict = match inner.map.get(&key) {
            None => Upsert::Changed,
            Some(old) => match (&old.view.resource_version, &entry.view.resource_version) {
                (Some(a), Some(b)) if a == b => Upsert::Unchanged,
                (Some(old_rv), Some(new_rv)) if rv_newer(old_rv, new_rv) == Some(true) => {
                    Upsert::Older
                }
                _ => Upsert::Changed,
            },
        };
        if verdict == Upsert::Changed {
            let entry = Arc::new(entry);
            inner.count(&entry, 1);
            if let Some(old) = inner.map.insert(key, entry) {
                inner.count(&old, -1);
            }
        }
        verdict
    }

    pub fn remove(&self, key: &ObjectKey) -> Option<Arc<OriginEntry>> {
        let mut inner = self.write();
        let old = inner.map.remove(key);
        if let Some(old) = &old {
            inner.count(old, -1);
        }
        old
    }

    /// A re-list started: keys not seen again before [`Self::relist_done`] are dropped then.
    pub fn relist_started(&self) {
        self.write().relisting = Some(HashSet::new());
    }

    /// A re-list ended: drops what it did not show and returns the dropped keys.
    pub fn relist_done(&self) -> Vec<ObjectKey> {
        let mut inner = self.write();
        let Some(seen) = inner.relisting.take() else {
            return Vec::new();
        };
        let gone: Vec<ObjectKey> = inner
            .map
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            if let Some(old) = inner.map.remove(key) {
                inner.count(&old, -1);
            }
        }
        drop(inner);
        self.synced.store(true, Ordering::Release);
        gone
    }

    /// Unfinished origins placed on `cluster`.
    pub fn placed_on(&self, cluster: &str) -> u32 {
        self.read().placed.get(cluster).copied().unwrap_or(0)
    }

    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().map.keys().cloned().collect()
    }

    /// Keys of the entries `pred` accepts.
    pub fn keys_where(&self, pred: impl Fn(&OriginEntry) -> bool) -> Vec<ObjectKey> {
        self.read()
            .map
            .iter()
            .filter(|(_, e)| pred(e))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every entry (for snapshots).
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<OriginEntry>)> {
        self.read()
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(rv: &str, cluster: Option<&str>, complete: bool) -> Value {
        let mut labels = json!({"app": "x"});
        if let Some(c) = cluster {
            labels["courier.dev/cluster"] = json!(c);
        }
        let status = if complete {
            json!({"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"}]})
        } else {
            json!({})
        };
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": rv,
                "labels": labels,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "courier.dev/epoch": "1"},
                "managedFields": [{"manager": "kubectl"}], "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"managedBy": "courier.dev/dispatcher", "parallelism": 2, "successPolicy": {"rules": [{"succeededCount": 1}]},
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
            "status": status
        })
    }

    #[test]
    fn trims_to_what_decisions_read() {
        let e = trim(&job("5", Some("w1"), false)).ok().flatten();
        let Some(e) = e else { panic!("ours") };
        assert_eq!(e.view.spec_json.get("template"), None);
        let full = job("5", Some("w1"), false);
        assert_eq!(
            e.view.template_hash,
            courier_core::drift::template_hash(&full["spec"]),
            "the template is kept as its hash"
        );
        assert!(e.view.template_hash.is_some());
        assert_eq!(e.view.spec_json["parallelism"], json!(2));
        assert!(e.view.spec.has_success_policy);
        assert_eq!(e.view.annotations.len(), 1);
        assert_eq!(e.view.labels.len(), 1);
        assert!(e.created.is_some());
        let mut other = job("5", None, false);
        other["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
        assert!(matches!(trim(&other), Ok(None)));
    }

    /// What an entry holds beyond its fixed-size fields (bytes, roughly).
    fn weight(e: &OriginEntry) -> usize {
        let v = &e.view;
        let maps: usize = [&v.labels, &v.annotations]
            .iter()
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.len())
            .sum();
        maps + v.oversized.iter().map(String::len).sum::<usize>()
            + v.finalizers.iter().map(String::len).sum::<usize>()
            + v.spec_json.to_string().len()
            + serde_json::to_string(&v.status).map_or(0, |s| s.len())
    }

    #[test]
    fn a_job_with_a_mebibyte_of_courier_annotations_costs_what_any_job_costs() {
        let Some(plain) = trim(&job("5", Some("w1"), false)).ok().flatten() else {
            panic!("ours")
        };
        let mut big = job("5", Some("w1"), false);
        let meta = &mut big["metadata"];
        for i in 0..1024 {
            meta["annotations"][format!("courier.dev/pad-{i}")] = json!("x".repeat(1024));
            meta["labels"][format!("courier.dev/l-{i}")] = json!("y".repeat(63));
        }
        meta["annotations"]["courier.dev/cluster-selector"] = json!("z".repeat(256 * 1024));
        let Some(e) = trim(&big).ok().flatten() else {
            panic!("ours")
        };
        assert!(
            weight(&e) <= weight(&plain) + 64,
            "{} bytes vs {} for a plain Job",
            weight(&e),
            weight(&plain)
        );
        assert_eq!(e.view.oversized, ["courier.dev/cluster-selector"]);
        assert_eq!(e.view.labels.len(), 1);
    }

    #[test]
    fn counts_unfinished_placements_and_ignores_older_versions() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let entry = |rv, c, done| trim(&job(rv, c, done)).ok().flatten();
        let Some(e5) = entry("5", Some("w1"), false) else {
            panic!()
        };
        assert_eq!(s.upsert(k.clone(), e5.clone()), Upsert::Changed);
        assert_eq!(s.placed_on("w1"), 1);
        assert_eq!(s.upsert(k.clone(), e5), Upsert::Unchanged);
        let Some(e7) = entry("7", Some("w2"), false) else {
            panic!()
        };
        assert_eq!(s.upsert(k.clone(), e7), Upsert::Changed);
        assert_eq!((s.placed_on("w1"), s.placed_on("w2")), (0, 1));
        let Some(e6) = entry("6", Some("w1"), false) else {
            panic!()
        };
        assert_eq!(s.upsert(k.clone(), e6), Upsert::Older);
        let Some(e8) = entry("8", Some("w2"), true) else {
            panic!()
        };
        s.upsert(k.clone(), e8);
        assert_eq!(s.placed_on("w2"), 0, "finished origins do not count");
        s.relist_started();
        assert_eq!(s.relist_done(), vec![k]);
        assert!(s.is_synced());
        assert_eq!(s.len(), 0);
    }
}
