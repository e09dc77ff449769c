//! The origin cache: every management-cluster Job with `spec.managedBy: courier.dev/dispatcher`,
//! trimmed to what `decide` reads.
//!
//! # Memory
//! An entry keeps the origin's `status` (needed whole: status writes are merge patches against
//! it; decoded straight from the event's text into its compact lossless form,
//! `courier_core::job_status::CachedStatus`), its finalizers, the labels and annotations
//! decisions read as a short sorted list (`courier_core::compact::SmallMap`; a fixed list of keys:
//! cluster, epoch, re-dispatch count, cluster selector, Kueue's queue; each value at most 1 KiB, a
//! longer one is treated as absent: see `courier_core::reconcile::view`), the spec facts decisions
//! read (`JobSpecEssentials`, read from `READ_SPEC_FIELDS`; of `successPolicy` only its presence)
//! and, as `SpecFields`, only the spec fields that flow down. The pod template is reduced to its
//! hash (template drift, see `courier_core::drift`); managedFields and user metadata are dropped.
//! A finished bench Job's entry holds about 1.1 KB of heap (`entry_memory.rs` bounds it). Beside the view, the entry keeps the mirror source: name, namespace, uid, labels,
//! annotations and the spec as the JSON text it arrived in (see [`OriginEntry::source`]), so
//! building a mirror needs no GET of the origin; it is parsed only when a mirror is built or its
//! template patched. The watch decodes a Job as a [`SlimJob`] (no managedFields).
//!
//! The source is the largest part of an entry (about a quarter of it for a small Job) and is kept
//! only while a mirror may have to be built from it: a finished origin never has one, and once the
//! mirror of the current placement is seen ([`OriginStore::release_source`]) the later versions of
//! the same placement and generation do without it ([`OriginStore::upsert`]). A new placement
//! (re-dispatch: another epoch in the intent) or a new generation (a template change) brings it
//! back with the version that carries it. A mirror to build without a source (a mirror lost and
//! created again under the same intent) costs one GET of the origin.

use crate::locks::RwLockExt as _;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use courier_core::job::finished;
use courier_core::reconcile::view::OriginMeta;
use courier_core::reconcile::{OriginView, ViewError};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tracing::warn;

use crate::queue::{KeyMap, ObjectKey};
use crate::watch::{Cache, SlimJob};

/// The spec fields an origin's view is read from (the spec facts decisions read,
/// `JobSpecEssentials`; the fields that flow down, `Workload::SPEC_FIELDS`; `managedBy`) and the
/// template with `manualSelector` for the template hash. Nothing else of the spec is decoded.
const READ_SPEC_FIELDS: [&str; 13] = [
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
    "template",
];

/// One cached origin.
#[derive(Debug, Clone)]
pub struct OriginEntry {
    pub view: OriginView,
    pub created: Option<Timestamp>,
    /// What a mirror is built from, as JSON text: name, namespace, uid, every label and
    /// annotation, and the spec as the text it arrived in (parsed only when a mirror is built or its
    /// template patched). Saves the GET of the full origin per dispatch. `None` once it cannot be
    /// needed any more (see the module docs).
    pub source: Option<Arc<str>>,
}

impl OriginEntry {
    fn new(view: OriginView, created: Option<Timestamp>, source: String) -> Self {
        // A finished Job gets no mirror any more.
        let source = finished(&view.status).is_none().then(|| source.into());
        Self {
            view,
            created,
            source,
        }
    }

    /// Whether `newer` (a later version of the same key) belongs to the same placement of the same
    /// Job at the same generation: then it needs no source if this one did without.
    fn same_placement(&self, newer: &OriginEntry) -> bool {
        let (a, b) = (&self.view, &newer.view);
        a.uid == b.uid && a.generation == b.generation && a.intent() == b.intent()
    }

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

/// Whether a Job's spec says Courier manages it.
fn is_ours(spec: &Value) -> bool {
    spec.get("managedBy").and_then(Value::as_str) == Some(courier_api::MANAGED_BY)
}

/// Trims a Job (as JSON) to what the origin cache keeps. `None` when it is not Courier's.
pub fn trim(job: &Value) -> Result<Option<OriginEntry>, ViewError> {
    if !job.get("spec").is_some_and(is_ours) {
        return Ok(None);
    }
    let view = OriginView::from_json(job)?;
    let meta = job.get("metadata");
    let created = meta
        .and_then(|m| m.get("creationTimestamp"))
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok());
    let source = json!({
        "metadata": {
            "name": view.name, "namespace": view.namespace, "uid": view.uid,
            "labels": meta.and_then(|m| m.get("labels")),
            "annotations": meta.and_then(|m| m.get("annotations")),
        },
        "spec": job.get("spec"),
    })
    .to_string();
    Ok(Some(OriginEntry::new(view, created, source)))
}

/// [`trim`] of a Job's slim decode: the view is built from its typed metadata through the same
/// constructor ([`OriginView::from_parts`]), of the spec only [`READ_SPEC_FIELDS`] are decoded,
/// the status straight into its cached form, and the mirror source carries the spec as the text
/// it arrived in.
pub fn trim_job(job: &SlimJob) -> Result<Option<OriginEntry>, ViewError> {
    let spec = job.spec_fields(&READ_SPEC_FIELDS);
    if !is_ours(&spec) {
        return Ok(None);
    }
    let m = &job.metadata;
    let meta = OriginMeta {
        name: m.name.as_deref(),
        namespace: m.namespace.as_deref(),
        uid: m.uid.as_deref(),
        resource_version: m.resource_version.as_deref(),
        generation: m.generation,
        deletion_timestamp: m.deletion_timestamp.as_ref().map(|t| t.0),
        finalizers: m.finalizers.as_deref().unwrap_or_default(),
        labels: m.labels.as_ref(),
        annotations: m.annotations.as_ref(),
    };
    let view = OriginView::from_parts(meta, &spec, || {
        job.status_as().map_err(|e| ViewError::Malformed {
            field: "status",
            reason: e.to_string(),
        })
    })?;
    let source = Source {
        metadata: SourceMeta {
            name: &view.name,
            namespace: &view.namespace,
            uid: &view.uid,
            labels: m.labels.as_ref(),
            annotations: m.annotations.as_ref(),
        },
        spec: job.spec.as_deref(),
    };
    let source = serde_json::to_string(&source).map_err(|e| ViewError::Malformed {
        field: "spec",
        reason: e.to_string(),
    })?;
    let created = m.creation_timestamp.as_ref().map(|t| t.0);
    Ok(Some(OriginEntry::new(view, created, source)))
}

#[derive(Serialize)]
struct Source<'a> {
    metadata: SourceMeta<'a>,
    spec: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct SourceMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    uid: &'a str,
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: Option<&'a BTreeMap<String, String>>,
}

#[derive(Default)]
struct Inner {
    map: KeyMap<Arc<OriginEntry>>,
    /// Unfinished origins per intent cluster (`currentMirrors`, placement load).
    placed: HashMap<String, u32>,
    /// A re-list is under way (it replaces whatever it lists).
    relisting: bool,
    /// Versions our own writes put into the cache before the watch delivered them. resourceVersions
    /// are opaque (never compared as numbers): the watch delivers one object's versions in order,
    /// so until it delivers this one, what it delivers for the key is older.
    ahead: KeyMap<String>,
}

impl Inner {
    /// Replaces `key`'s entry with `entry` (a later version), keeping the placement counts and
    /// leaving out the source where the version it replaces did without it.
    fn replace(&mut self, key: ObjectKey, mut entry: OriginEntry) {
        if let Some(old) = self.map.get(&key)
            && old.source.is_none()
            && old.same_placement(&entry)
        {
            entry.source = None;
        }
        let entry = Arc::new(entry);
        self.count(&entry, 1);
        if let Some(old) = self.map.insert(key, entry) {
            self.count(&old, -1);
        }
    }

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
    /// Delivered by the watch before a version our own write already put into the cache; ignored.
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

    /// Stores what the watch delivered (or a re-list listed): the watch's order decides, except
    /// that a version our own write put here first (see [`Self::write_through`]) is kept until
    /// the watch delivers it. A re-list replaces whatever it lists.
    pub fn upsert(&self, key: ObjectKey, entry: OriginEntry) -> Upsert {
        let mut inner = self.write();
        let relisting = inner.relisting;
        if let Some(ours) = inner.ahead.get(&key) {
            if !relisting && entry.view.resource_version.as_ref() != Some(ours) {
                return Upsert::Older;
            }
            inner.ahead.remove(&key);
        }
        let verdict = match inner.map.get(&key) {
            Some(old)
                if old.view.resource_version.is_some()
                    && old.view.resource_version == entry.view.resource_version =>
            {
                Upsert::Unchanged
            }
            _ => Upsert::Changed,
        };
        if verdict == Upsert::Changed {
            inner.replace(key, entry);
        }
        verdict
    }

    /// Stores the server's answer to our own write, made with the precondition
    /// `resourceVersion: sent`. The answer is the version right after `sent`, so it is newer than
    /// the cache exactly when the cache still holds `sent`; otherwise the watch has delivered it
    /// already (or more) and the cache is left alone.
    pub fn write_through(&self, key: ObjectKey, sent: &str, entry: OriginEntry) -> Upsert {
        let mut inner = self.write();
        let cached = inner
            .map
            .get(&key)
            .and_then(|e| e.view.resource_version.as_deref());
        if cached != Some(sent) {
            return Upsert::Older;
        }
        let Some(rv) = entry.view.resource_version.clone() else {
            return Upsert::Older;
        };
        inner.replace(key.clone(), entry);
        inner.ahead.insert(key, rv);
        Upsert::Changed
    }

    /// Whether the watch's `resource_version` of `key` needs decoding: not when the cache holds it
    /// (how most of our own writes come back after [`Self::write_through`]; their hold is released
    /// here, as [`Self::upsert`] would), nor when a write of ours holds a later version outside a
    /// re-list ([`Self::upsert`] would ignore it as older).
    pub fn needs_decoding(&self, key: &ObjectKey, resource_version: &str) -> bool {
        let mut inner = self.write();
        let held = inner
            .map
            .get(key)
            .is_some_and(|e| e.view.resource_version.as_deref() == Some(resource_version));
        match inner.ahead.get(key).map(String::as_str) {
            Some(ours) if ours == resource_version => {
                if held {
                    inner.ahead.remove(key);
                }
                !held
            }
            Some(_) if !inner.relisting => false,
            _ => !held,
        }
    }

    /// Drops the mirror source of `key`'s entry if it is still the version `resource_version`: the
    /// mirror of its placement exists, so no mirror is built from this version or from later ones
    /// of the same placement and generation.
    pub fn release_source(&self, key: &ObjectKey, resource_version: Option<&str>) {
        let mut inner = self.write();
        let Some(entry) = inner.map.get_mut(key) else {
            return;
        };
        if entry.source.is_none() || entry.view.resource_version.as_deref() != resource_version {
            return;
        }
        // The placement counts do not change: same view.
        Arc::make_mut(entry).source = None;
    }

    pub fn remove(&self, key: &ObjectKey) -> Option<Arc<OriginEntry>> {
        let mut inner = self.write();
        inner.ahead.remove(key);
        let old = inner.map.remove(key);
        if let Some(old) = &old {
            inner.count(old, -1);
        }
        old
    }

    /// A re-list started (`true`) or ended.
    pub fn set_relisting(&self, on: bool) {
        self.write().relisting = on;
    }

    /// The cache reflects a complete list.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
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

impl Cache<SlimJob> for OriginStore {
    type Key = ObjectKey;

    fn key_of(&self, obj: &SlimJob) -> Option<ObjectKey> {
        Some(ObjectKey::new(
            obj.metadata.namespace.clone()?,
            obj.metadata.name.clone()?,
        ))
    }

    /// Stores a managed origin; true when it is new or a newer version (see [`OriginStore::upsert`]).
    fn store(&self, key: &ObjectKey, obj: SlimJob) -> bool {
        // The answers to our own writes are cached already, and what the watch delivers before
        // the last of them is older: neither is trimmed.
        if let Some(rv) = obj.metadata.resource_version.as_deref()
            && !self.needs_decoding(key, rv)
        {
            return false;
        }
        match trim_job(&obj) {
            Ok(Some(entry)) => self.upsert(key.clone(), entry) == Upsert::Changed,
            // Not Courier's (managedBy is immutable, so it never was).
            Ok(None) => false,
            Err(e) => {
                warn!(origin = %key, error = %e, "managed Job is malformed; ignored");
                false
            }
        }
    }

    fn drop_key(&self, key: &ObjectKey) -> bool {
        self.remove(key).is_some()
    }

    fn cached_keys(&self) -> Vec<ObjectKey> {
        self.keys()
    }

    fn relisting(&self, on: bool) {
        self.set_relisting(on);
    }

    fn mark_synced(&self) {
        OriginStore::mark_synced(self);
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
        assert_eq!(e.view.spec_fields.get("template"), None);
        let full = job("5", Some("w1"), false);
        assert_eq!(
            e.view.template_hash,
            courier_core::drift::template_hash(&full["spec"]),
            "the template is kept as its hash"
        );
        assert!(e.view.template_hash.is_some());
        assert_eq!(e.view.spec_fields.get("parallelism"), Some(&json!(2)));
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
            + serde_json::to_string(&v.spec_fields).map_or(0, |s| s.len())
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
        let Some(e8) = entry("8", Some("w2"), true) else {
            panic!()
        };
        s.upsert(k.clone(), e8);
        assert_eq!(s.placed_on("w2"), 0, "finished origins do not count");
        assert!(s.remove(&k).is_some());
        assert_eq!(s.len(), 0);
    }

    /// The mirror source is kept while a mirror may be built from it: not for a finished Job, and
    /// not once the mirror of the placement was seen, until the placement or the generation
    /// changes (a re-dispatch or a template change needs it again).
    #[test]
    fn the_mirror_source_lives_as_long_as_a_mirror_may_be_built_from_it() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let source = |s: &OriginStore| s.get(&k).is_some_and(|e| e.source.is_some());
        let version = |rv: &str, epoch: &str, generation: i64| {
            let mut j = job(rv, Some("w1"), false);
            j["metadata"]["annotations"]["courier.dev/epoch"] = json!(epoch);
            j["metadata"]["generation"] = json!(generation);
            let Ok(Some(e)) = trim(&j) else {
                panic!("ours")
            };
            e
        };
        s.upsert(k.clone(), version("1", "1", 1));
        assert!(source(&s), "not dispatched yet");
        s.release_source(&k, Some("0"));
        assert!(source(&s), "released for another version only");
        s.release_source(&k, Some("1"));
        assert!(!source(&s));
        s.upsert(k.clone(), version("2", "1", 1));
        assert!(!source(&s), "a status change of the same placement");
        assert_eq!(s.placed_on("w1"), 1);
        s.write_through(k.clone(), "2", version("3", "1", 1));
        assert!(!source(&s), "our own write of the same placement");
        assert_eq!(s.upsert(k.clone(), version("3", "1", 1)), Upsert::Unchanged);
        s.upsert(k.clone(), version("4", "1", 2));
        assert!(source(&s), "a new generation (a template change)");
        s.release_source(&k, Some("4"));
        s.upsert(k.clone(), version("5", "2", 2));
        assert!(source(&s), "a re-dispatch (another epoch)");
        let Ok(Some(done)) = trim(&job("6", Some("w1"), true)) else {
            panic!("ours")
        };
        assert!(done.source.is_none(), "a finished Job gets no mirror");
        assert_eq!(s.upsert(k.clone(), done), Upsert::Changed);
        assert_eq!(s.placed_on("w1"), 0);
    }

    /// resourceVersions are opaque: the watch's order says which version is newer, never their
    /// text (here a later version that reads as a smaller number, then ones that are not numbers).
    #[test]
    fn the_watch_order_decides_not_the_resource_version_text() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let entry = |rv| trim(&job(rv, Some("w1"), false)).ok().flatten();
        let (Some(e100), Some(e20), Some(ex)) = (entry("100"), entry("20"), entry("x9")) else {
            panic!()
        };
        assert_eq!(s.upsert(k.clone(), e100), Upsert::Changed);
        assert_eq!(s.upsert(k.clone(), e20), Upsert::Changed, "delivered later");
        assert_eq!(
            s.get(&k)
                .and_then(|e| e.view.resource_version.clone())
                .as_deref(),
            Some("20")
        );
        assert_eq!(s.upsert(k.clone(), ex), Upsert::Changed);
        assert_eq!(
            s.get(&k)
                .and_then(|e| e.view.resource_version.clone())
                .as_deref(),
            Some("x9")
        );
    }

    /// Our own writes get ahead of the watch: the versions the watch delivers before the last of
    /// them are older and ignored, whatever their text; then the watch decides again.
    #[test]
    fn a_write_through_holds_until_the_watch_delivers_it() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let entry = |rv| trim(&job(rv, Some("w1"), false)).ok().flatten();
        let (Some(a), Some(c), Some(e), Some(c2), Some(e2), Some(f)) = (
            entry("a"),
            entry("c"),
            entry("e"),
            entry("c"),
            entry("e"),
            entry("f"),
        ) else {
            panic!()
        };
        let rv = |s: &OriginStore| s.get(&k).and_then(|e| e.view.resource_version.clone());
        assert_eq!(s.upsert(k.clone(), a), Upsert::Changed);
        // Two writes in a row (preconditions "a", then "c") before the watch shows either.
        assert_eq!(s.write_through(k.clone(), "a", c), Upsert::Changed);
        assert_eq!(s.write_through(k.clone(), "c", e), Upsert::Changed);
        assert_eq!(s.upsert(k.clone(), c2), Upsert::Older, "the watch lags");
        assert_eq!(rv(&s).as_deref(), Some("e"));
        assert_eq!(s.upsert(k.clone(), e2), Upsert::Unchanged);
        assert_eq!(
            s.upsert(k.clone(), f),
            Upsert::Changed,
            "then the watch decides"
        );
        // The answer to a write made from a version the watch has already replaced is dropped.
        let Some(g) = entry("g") else { panic!() };
        assert_eq!(s.write_through(k.clone(), "e", g), Upsert::Older);
        assert_eq!(rv(&s).as_deref(), Some("f"));
        // A re-list lists what is there, whatever a write put here first.
        let (Some(h), Some(x)) = (entry("h"), entry("x")) else {
            panic!()
        };
        assert_eq!(s.write_through(k.clone(), "f", h), Upsert::Changed);
        s.set_relisting(true);
        assert_eq!(s.upsert(k.clone(), x), Upsert::Changed);
        assert_eq!(rv(&s).as_deref(), Some("x"));
    }

    /// What the watch delivers while a write of ours holds a later version is older: not decoded
    /// (outside a re-list); the held version itself neither, and it releases the hold.
    #[test]
    fn versions_behind_our_own_write_are_not_decoded() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let entry = |rv| trim(&job(rv, Some("w1"), false)).ok().flatten();
        let (Some(a), Some(c)) = (entry("a"), entry("c")) else {
            panic!("ours")
        };
        s.upsert(k.clone(), a);
        assert!(s.needs_decoding(&k, "b"), "nothing of ours is ahead");
        assert_eq!(s.write_through(k.clone(), "a", c), Upsert::Changed);
        assert!(!s.needs_decoding(&k, "b"), "behind our write");
        s.set_relisting(true);
        assert!(s.needs_decoding(&k, "b"), "a re-list decodes what it lists");
        s.set_relisting(false);
        assert!(!s.needs_decoding(&k, "c"), "held already");
        assert!(s.needs_decoding(&k, "b"), "released by its version");
    }

    /// The watch delivering the version our write put here first is not decoded again, and it
    /// releases the write's hold: the next version counts.
    #[test]
    fn the_watch_delivering_our_own_write_releases_its_hold() {
        let s = OriginStore::default();
        let k = ObjectKey::new("ns", "a");
        let slim = |rv| serde_json::from_value::<SlimJob>(job(rv, Some("w1"), false)).ok();
        let (Some(a), Some(c), Some(d)) = (slim("a"), slim("c"), slim("d")) else {
            panic!("SlimJob")
        };
        assert!(Cache::store(&s, &k, a), "new");
        let Some(ours) = trim(&job("c", Some("w1"), false)).ok().flatten() else {
            panic!("ours")
        };
        assert_eq!(s.write_through(k.clone(), "a", ours), Upsert::Changed);
        assert!(!Cache::store(&s, &k, c), "already held");
        assert!(Cache::store(&s, &k, d), "the watch decides again");
        assert_eq!(
            s.get(&k)
                .and_then(|e| e.view.resource_version.clone())
                .as_deref(),
            Some("d")
        );
    }
}
