//! In-memory storage with etcd-like semantics: one cluster-wide resourceVersion counter, compare-and-swap
//! writes, and per-resource event windows that watches resume from (older versions answer 410).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

mod members;

pub use members::Basis;

/// Which storage a resource lives in: `(group, plural)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableKey {
    pub group: String,
    pub plural: String,
}

impl TableKey {
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }
}

/// A scratch buffer stays at most this large between writes (a stored object is a few KB).
const SCRATCH_KEPT: usize = 1 << 20;

thread_local! {
    /// Where this thread serialises stored objects before copying them out at their exact size.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `value`'s stored bytes, unchanged members copied from `basis` (empty if it cannot be serialised).
/// Serialised into this thread's scratch buffer, then copied into an allocation of exactly their
/// size: growing a fresh buffer reallocated and copied it several times per write (new objects and
/// growing statuses outgrow any guess), each time on pages the kernel had to zero, and left up to
/// half of it unused for the object's life.
fn serialised(value: &Value, basis: Option<Basis<'_>>) -> (Bytes, members::Members) {
    let write = |buf: &mut Vec<u8>| match members::serialise(buf, value, basis) {
        Ok(members) => (Bytes::copy_from_slice(buf), members),
        Err(_) => (Bytes::new(), Default::default()),
    };
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            let out = write(&mut buf);
            if buf.capacity() > SCRATCH_KEPT {
                *buf = Vec::new();
            }
            out
        }
        // Not reentrant in practice; a fresh buffer keeps it correct if it ever is.
        Err(_) => write(&mut Vec::new()),
    })
}

/// One stored object, kept only as its serialised storage form (without `kind`/`apiVersion`: lists omit
/// them and single reads splice them in) plus what lists and watches filter on. Writers parse it back
/// with `value()`; reads serve the bytes as they are. This keeps a stored Job at a few KB.
#[derive(Debug)]
pub struct Stored {
    pub rv: u64,
    pub json: Bytes,
    namespace: Box<str>,
    name: Box<str>,
    uid: Box<str>,
    /// `metadata.generation` (0 when absent).
    generation: i64,
    /// Whether `metadata.deletionTimestamp` is set.
    deleting: bool,
    labels: Box<[(Box<str>, Box<str>)]>,
    /// Where the first top-level members are in `json`, for the next version to copy.
    members: members::Members,
}

impl Stored {
    /// Builds the stored form of `value` at `rv` (the resourceVersion is written into it).
    pub fn new(rv: u64, value: Value) -> Arc<Self> {
        Self::over(rv, value, None)
    }

    /// [`Stored::new`] with the members `basis` has unchanged copied from its bytes.
    fn over(rv: u64, mut value: Value, basis: Option<Basis<'_>>) -> Arc<Self> {
        if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let (json, members) = serialised(&value, basis);
        let meta = value.get("metadata");
        let text = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .into()
        };
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str().into(), v.into())))
                    .collect()
            })
            .unwrap_or_default();
        Arc::new(Self {
            rv,
            json,
            namespace: text("namespace"),
            name: text("name"),
            uid: text("uid"),
            generation: meta
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0),
            deleting: meta
                .and_then(|m| m.get("deletionTimestamp"))
                .is_some_and(|v| !v.is_null()),
            labels,
            members,
        })
    }

    /// The object, parsed from its stored bytes. They are checked as UTF-8 once, as a whole: parsing
    /// them as bytes checks every string on its own, about a fifth slower for a stored Job (measured
    /// with serde_json 1.0.154, release build).
    pub fn value(&self) -> Value {
        std::str::from_utf8(&self.json)
            .ok()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null)
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.uid` (`""` when absent), read without parsing the object.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// `metadata.generation` (0 when absent), read without parsing the object.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Whether `metadata.deletionTimestamp` is set, read without parsing the object.
    pub fn is_deleting(&self) -> bool {
        self.deleting
    }

    /// `metadata.labels` (those with string values), read without parsing the object.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A change, with the previous state so selector-filtered watches can tell "started/stopped matching".
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub obj: Arc<Stored>,
    pub prev: Option<Arc<Stored>>,
    /// When the write was committed (taken under the store's lock), for in-process observers that
    /// time a change from the server's side (`courier bench`'s status propagation); no watch sends it.
    pub committed: std::time::Instant,
}

/// Why a write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    AlreadyExists,
    NotFound,
    /// The object's resourceVersion is not the expected one.
    Conflict,
}

/// What must hold for a write to go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    MustNotExist,
    /// Must exist; if `Some`, with exactly this resourceVersion.
    Exists(Option<u64>),
}

type ObjKey = (String, String);

struct Table {
    objects: BTreeMap<ObjKey, Arc<Stored>>,
    log: VecDeque<Arc<Event>>,
    /// Watches may resume from any version >= this one.
    floor: u64,
    tx: broadcast::Sender<Arc<Event>>,
}

impl Table {
    fn new(floor: u64) -> Self {
        let (tx, _) = broadcast::channel(WATCH_BUFFER);
        Self {
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            floor,
            tx,
        }
    }
}

/// Per-table broadcast buffer. A watcher further behind carries on from the retained events (see
/// [`Store::watch`]); only one behind those too is closed and must re-list, as the real server does
/// with watchers that cannot keep up. Every slot is allocated up front, for every table of every
/// server: 65,536 slots cost about 2.5 MB per table, 17 MB per idle worker (issue #13).
const WATCH_BUFFER: usize = 1 << 10;

/// Events kept per resource for watch resumption.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub max_events: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_events: 200_000,
        }
    }
}

struct Inner {
    rv: u64,
    tables: HashMap<TableKey, Table>,
}

/// The store. Cheap to share (`Arc<Store>`); every write takes one short lock.
pub struct Store {
    inner: Mutex<Inner>,
    retention: Retention,
}

/// A consistent read of a table.
pub struct Snapshot {
    pub rv: u64,
    pub items: Vec<Arc<Stored>>,
}

/// Where a new watch starts.
pub struct WatchStart {
    /// Events after the requested version that are still retained, oldest first.
    pub backlog: Vec<Arc<Event>>,
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// The store's version when the watch was registered.
    pub rv: u64,
}

impl Store {
    pub fn new(retention: Retention) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                tables: HashMap::new(),
            }),
            retention,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a table half-written (every write is a single
        // insert/remove), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, t: &TableKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let g = self.lock();
        g.tables
            .get(t)?
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Every object of the table in key order (namespace, name), optionally in one namespace, starting
    /// after `after` (a `(namespace, name)` key, exclusive).
    pub fn list(&self, t: &TableKey, ns: Option<&str>, after: Option<&ObjKey>) -> Snapshot {
        let g = self.lock();
        let rv = g.rv;
        let Some(table) = g.tables.get(t) else {
            return Snapshot {
                rv,
                items: Vec::new(),
            };
        };
        let items = match (ns, after) {
            (Some(ns), after) => {
                let lo = after
                    .cloned()
                    .unwrap_or_else(|| (ns.to_string(), String::new()));
                table
                    .objects
                    .range(lo..)
                    .filter(|(k, _)| Some(*k) != after)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect()
            }
            (None, Some(after)) => table
                .objects
                .range(after.clone()..)
                .filter(|(k, _)| *k != after)
                .map(|(_, v)| v.clone())
                .collect(),
            (None, None) => table.objects.values().cloned().collect(),
        };
        Snapshot { rv, items }
    }

    /// Number of objects across every table (for stats).
    pub fn count(&self) -> usize {
        self.lock().tables.values().map(|t| t.objects.len()).sum()
    }

    /// Writes `value` at `(ns, name)` if `pre` holds, assigning the next resourceVersion.
    pub fn put(
        &self,
        t: &TableKey,
        ns: &str,
        name: &str,
        value: Value,
        pre: Precondition,
    ) -> Result<Arc<Stored>, StoreError> {
        self.put_over(t, ns, name, value, pre, None)
    }

    /// [`Store::put`] of a version made from `basis`: when that is still the stored version, the
    /// members `value` leaves unchanged are copied from its bytes.
    pub fn put_over(
        &self,
        t: &TableKey,
        ns: &str,
        name: &str,
        value: Value,
        pre: Precondition,
        basis: Option<Basis<'_>>,
    ) -> Result<Arc<Stored>, StoreError> {
        let mut g = self.lock();
        let floor = g.rv;
        let key = (ns.to_string(), name.to_string());
        let prev = g.tables.get(t).and_then(|tb| tb.objects.get(&key).cloned());
        match (pre, &prev) {
            (Precondition::MustNotExist, Some(_)) => return Err(StoreError::AlreadyExists),
            (Precondition::Exists(_), None) => return Err(StoreError::NotFound),
            (Precondition::Exists(Some(rv)), Some(p)) if p.rv != rv => {
                return Err(StoreError::Conflict);
            }
            _ => {}
        }
        g.rv += 1;
        let rv = g.rv;
        let basis = basis.filter(|b| prev.as_ref().is_some_and(|p| std::ptr::eq(&**p, b.stored)));
        let stored = Stored::over(rv, value, basis);
        let retention = self.retention;
        let table = g
            .tables
            .entry(t.clone())
            .or_insert_with(|| Table::new(floor));
        table.objects.insert(key, stored.clone());
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        publish(
            table,
            retention,
            Event {
                rv,
                kind,
                obj: stored.clone(),
                prev,
                committed: std::time::Instant::now(),
            },
        );
        Ok(stored)
    }

    /// Removes `(ns, name)` if it exists with the expected version; the DELETED event carries the last
    /// state under a new resourceVersion, as etcd-backed watches do.
    pub fn remove(
        &self,
        t: &TableKey,
        ns: &str,
        name: &str,
        expect_rv: Option<u64>,
    ) -> Result<Arc<Stored>, StoreError> {
        let mut g = self.lock();
        let key = (ns.to_string(), name.to_string());
        let Some(prev) = g.tables.get(t).and_then(|tb| tb.objects.get(&key).cloned()) else {
            return Err(StoreError::NotFound);
        };
        if expect_rv.is_some_and(|rv| rv != prev.rv) {
            return Err(StoreError::Conflict);
        }
        g.rv += 1;
        let rv = g.rv;
        let gone = Stored::new(rv, prev.value());
        let retention = self.retention;
        if let Some(table) = g.tables.get_mut(t) {
            table.objects.remove(&key);
            publish(
                table,
                retention,
                Event {
                    rv,
                    kind: EventType::Deleted,
                    obj: gone.clone(),
                    prev: Some(prev),
                    committed: std::time::Instant::now(),
                },
            );
        }
        Ok(gone)
    }

    /// Registers a watch on a table resuming after `from` (`None` = from now). `Err(oldest)` when
    /// `from` is older than the retained window.
    pub fn watch(&self, t: &TableKey, from: Option<u64>) -> Result<WatchStart, u64> {
        let mut g = self.lock();
        let rv = g.rv;
        let table = g.tables.entry(t.clone()).or_insert_with(|| Table::new(rv));
        let backlog = match from {
            None => Vec::new(),
            Some(from) => {
                if from < table.floor {
                    return Err(table.floor);
                }
                // The log is ordered by rv: skip what the client already has.
                let start = table.log.partition_point(|e| e.rv <= from);
                table.log.iter().skip(start).cloned().collect()
            }
        };
        Ok(WatchStart {
            backlog,
            rx: table.tx.subscribe(),
            rv,
        })
    }

    /// Current objects (optionally one namespace) and a subscription starting right after them, taken
    /// atomically: a watch without a resourceVersion sends these as ADDED and then follows the stream.
    pub fn snapshot_and_watch(
        &self,
        t: &TableKey,
        ns: Option<&str>,
    ) -> (Snapshot, broadcast::Receiver<Arc<Event>>) {
        let mut g = self.lock();
        let rv = g.rv;
        let table = g.tables.entry(t.clone()).or_insert_with(|| Table::new(rv));
        let items = match ns {
            Some(ns) => table
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => table.objects.values().cloned().collect(),
        };
        (Snapshot { rv, items }, table.tx.subscribe())
    }

    /// "Compaction": forget every retained event so any older resourceVersion answers 410.
    pub fn compact(&self) {
        let mut g = self.lock();
        let rv = g.rv;
        for t in g.tables.values_mut() {
            t.log.clear();
            t.floor = rv;
        }
    }

    /// Replaces every table's broadcast channel, which ends every open watch stream.
    pub fn drop_watches(&self) {
        let mut g = self.lock();
        for t in g.tables.values_mut() {
            let (tx, _) = broadcast::channel(WATCH_BUFFER);
            t.tx = tx;
        }
    }

    /// Receivers for every table (used by in-process controllers that follow all changes).
    pub fn subscribe(&self, t: &TableKey) -> broadcast::Receiver<Arc<Event>> {
        let mut g = self.lock();
        let rv = g.rv;
        g.tables
            .entry(t.clone())
            .or_insert_with(|| Table::new(rv))
            .tx
            .subscribe()
    }
}

fn publish(table: &mut Table, retention: Retention, ev: Event) {
    let ev = Arc::new(ev);
    table.log.push_back(ev.clone());
    while table.log.len() > retention.max_events {
        if let Some(old) = table.log.pop_front() {
            table.floor = old.rv;
        }
    }
    // No receivers is fine: nobody is watching this table.
    let _ = table.tx.send(ev);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}})
    }

    /// The scratch buffer is kept between writes (its capacity reused) unless a write grew it past
    /// `SCRATCH_KEPT`, which is then given back; the bytes are the serialisation either way.
    #[test]
    fn the_scratch_buffer_is_kept_unless_a_write_outgrew_the_bound() {
        let capacity = || SCRATCH.with(|c| c.borrow().capacity());
        let small = obj("small");
        let (bytes, _) = serialised(&small, None);
        assert_eq!(&bytes[..], &serde_json::to_vec(&small).unwrap()[..]);
        assert!(
            capacity() > 0,
            "a small write leaves the buffer for the next"
        );
        let big = json!({"metadata": {"name": "big"}, "data": {"x": "y".repeat(SCRATCH_KEPT)}});
        let (bytes, _) = serialised(&big, None);
        assert_eq!(bytes.len(), serde_json::to_vec(&big).unwrap().len());
        assert_eq!(capacity(), 0, "a buffer grown past the bound is given back");
    }

    #[test]
    fn versions_are_global_and_cas_is_enforced() {
        let s = Store::new(Retention::default());
        let jobs = TableKey::new("batch", "jobs");
        let secrets = TableKey::new("", "secrets");
        let a = s
            .put(&jobs, "ns", "a", obj("a"), Precondition::MustNotExist)
            .unwrap();
        let b = s
            .put(&secrets, "ns", "b", obj("b"), Precondition::MustNotExist)
            .unwrap();
        assert_eq!(b.rv, a.rv + 1);
        assert_eq!(
            a.value()["metadata"]["resourceVersion"],
            json!(a.rv.to_string())
        );
        assert_eq!(
            s.put(&jobs, "ns", "a", obj("a"), Precondition::MustNotExist)
                .unwrap_err(),
            StoreError::AlreadyExists
        );
        assert_eq!(
            s.put(
                &jobs,
                "ns",
                "a",
                obj("a"),
                Precondition::Exists(Some(a.rv - 1))
            )
            .unwrap_err(),
            StoreError::Conflict
        );
        let a2 = s
            .put(&jobs, "ns", "a", obj("a"), Precondition::Exists(Some(a.rv)))
            .unwrap();
        assert!(a2.rv > b.rv);
        assert_eq!(
            s.put(&jobs, "ns", "zz", obj("zz"), Precondition::Exists(None))
                .unwrap_err(),
            StoreError::NotFound
        );
    }

    #[test]
    fn watch_resumes_from_the_window_and_expires_below_it() {
        let s = Store::new(Retention { max_events: 3 });
        let t = TableKey::new("batch", "jobs");
        let first = s
            .put(&t, "ns", "a", obj("a"), Precondition::MustNotExist)
            .unwrap();
        for n in ["b", "c", "d"] {
            s.put(&t, "ns", n, obj(n), Precondition::MustNotExist)
                .unwrap();
        }
        // Only the last three events are kept: a client that has not seen `first` cannot resume, one that
        // has can.
        assert!(s.watch(&t, Some(first.rv - 1)).is_err());
        assert_eq!(s.watch(&t, Some(first.rv)).unwrap().backlog.len(), 3);
        let w = s.watch(&t, Some(first.rv + 1)).unwrap();
        assert_eq!(
            w.backlog
                .iter()
                .map(|e| e.obj.name().to_string())
                .collect::<Vec<_>>(),
            vec!["c", "d"]
        );
        s.compact();
        assert!(s.watch(&t, Some(s.current_rv() - 1)).is_err());
        assert!(s.watch(&t, Some(s.current_rv())).is_ok());
    }

    #[test]
    fn delete_emits_the_last_state_under_a_new_version() {
        let s = Store::new(Retention::default());
        let t = TableKey::new("", "secrets");
        let a = s
            .put(&t, "ns", "a", obj("a"), Precondition::MustNotExist)
            .unwrap();
        let mut w = s.watch(&t, None).unwrap();
        let gone = s.remove(&t, "ns", "a", Some(a.rv)).unwrap();
        assert!(gone.rv > a.rv);
        let ev = w.rx.try_recv().unwrap();
        assert_eq!(ev.kind, EventType::Deleted);
        assert_eq!(ev.obj.rv, gone.rv);
        assert!(s.get(&t, "ns", "a").is_none());
    }

    #[test]
    fn stored_metadata_is_what_the_object_says() {
        let full = Stored::new(
            7,
            json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u-1", "generation": 3,
                "deletionTimestamp": "2026-01-01T00:00:00Z", "labels": {"k": "v"}}}),
        );
        assert_eq!(
            (full.name(), full.namespace(), full.uid(), full.generation()),
            ("a", "ns", "u-1", 3)
        );
        assert!(full.is_deleting());
        assert_eq!(full.label("k"), Some("v"));
        let bare = Stored::new(8, json!({"metadata": {"deletionTimestamp": null}}));
        assert_eq!((bare.uid(), bare.generation()), ("", 0));
        assert!(!bare.is_deleting());
    }

    #[test]
    fn list_pages_by_key() {
        let s = Store::new(Retention::default());
        let t = TableKey::new("batch", "jobs");
        for (ns, n) in [("a", "1"), ("a", "2"), ("b", "1")] {
            s.put(
                &t,
                ns,
                n,
                json!({"metadata": {"name": n, "namespace": ns}}),
                Precondition::MustNotExist,
            )
            .unwrap();
        }
        assert_eq!(s.list(&t, Some("a"), None).items.len(), 2);
        let after = ("a".to_string(), "1".to_string());
        assert_eq!(s.list(&t, Some("a"), Some(&after)).items.len(), 1);
        assert_eq!(s.list(&t, None, Some(&after)).items.len(), 2);
    }
}
