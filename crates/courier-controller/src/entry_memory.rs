//! What one cached Job costs: the heap an origin entry and a mirror entry of the benchmark's Job
//! hold once decoded from a watch event, counted by a global allocator that tracks the live bytes
//! of the allocating thread (malloc chunks: what RSS pays, not the bytes asked for). The bounds keep
//! `courier bench`'s RSS per tracked Job in reach of its target (#13: 4 KB at 100,000 Jobs, for the
//! origin, its mirror and everything else kept per Job).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::origin::store::trim_job;
use crate::registry::mirrors;
use crate::watch::SlimJob;

/// Counts, per thread, the bytes of the malloc chunks held (glibc: 8 bytes of header, 16-byte
/// granules, 32 bytes at least), so parallel tests do not disturb each other's figures.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn chunk(size: usize) -> isize {
    isize::try_from((size + 8).div_ceil(16) * 16).map_or(isize::MAX, |c| c.max(32))
}

fn track(delta: isize) {
    // During thread teardown the slot may be gone: that thread's figure is not read any more.
    let _ = HELD.try_with(|h| h.set(h.get() + delta));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counting touches only a
// thread-local `Cell` (no allocation, no lock).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(chunk(layout.size()));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-chunk(layout.size()));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        track(chunk(layout.size()));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(chunk(new_size) - chunk(layout.size()));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn held() -> isize {
    HELD.with(Cell::get)
}

/// The heap `make` leaves held by what it returns (its transient allocations are freed by then).
fn held_by<T>(make: impl FnOnce() -> T) -> (T, isize) {
    let before = held();
    let value = make();
    (value, held() - before)
}

/// A finished origin of `courier bench` as the management cluster's watch delivers it: defaulted
/// spec, managedFields of three writers, Courier's metadata and the status it copied up.
const ORIGIN: &str = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bench-004711","namespace":"courier-bench","uid":"0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711","resourceVersion":"208811","generation":1,"creationTimestamp":"2026-11-27T01:00:00Z","labels":{"app":"courier-bench","courier.dev/cluster":"w3"},"annotations":{"courier.dev/epoch":"1"},"finalizers":["courier.dev/mirror-cleanup"],"managedFields":[{"manager":"courier-bench","operation":"Update","apiVersion":"batch/v1","time":"2026-11-27T01:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:backoffLimit":{},"f:managedBy":{},"f:template":{}}}},{"manager":"courier","operation":"Update","apiVersion":"batch/v1","time":"2026-11-27T01:00:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:courier.dev/epoch":{}},"f:finalizers":{},"f:labels":{"f:courier.dev/cluster":{}}}}},{"manager":"courier","operation":"Update","apiVersion":"batch/v1","time":"2026-11-27T01:00:04Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},"f:startTime":{},"f:succeeded":{}}},"subresource":"status"}]},"spec":{"parallelism":1,"completions":1,"backoffLimit":0,"completionMode":"NonIndexed","suspend":false,"podReplacementPolicy":"TerminatingOrFailed","managedBy":"courier.dev/dispatcher","selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711"}},"manualSelector":false,"template":{"metadata":{"labels":{"batch.kubernetes.io/controller-uid":"0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711","batch.kubernetes.io/job-name":"bench-004711","controller-uid":"0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711","job-name":"bench-004711"},"annotations":{"sim/run-seconds":"0"}},"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["true"],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}},"status":{"conditions":[{"type":"courier.dev/Dispatched","status":"True","lastProbeTime":"2026-11-27T01:00:02Z","lastTransitionTime":"2026-11-27T01:00:02Z","reason":"MirrorCreated","message":"dispatched to w3 (epoch 1)"},{"type":"SuccessCriteriaMet","status":"True","lastProbeTime":"2026-11-27T01:00:04Z","lastTransitionTime":"2026-11-27T01:00:04Z","reason":"CompletionsReached","message":"Reached expected number of succeeded pods"},{"type":"Complete","status":"True","lastProbeTime":"2026-11-27T01:00:04Z","lastTransitionTime":"2026-11-27T01:00:04Z","reason":"CompletionsReached","message":"Reached expected number of succeeded pods"}],"startTime":"2026-11-27T01:00:02Z","completionTime":"2026-11-27T01:00:04Z","succeeded":1,"terminating":0,"ready":0,"uncountedTerminatedPods":{}}}"#;

/// Its finished mirror as the worker's watch delivers it.
const MIRROR: &str = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bench-004711","namespace":"courier-bench","uid":"7d1e2a90-51b4-4c1e-8f0b-2a9c6e3b4711","resourceVersion":"90412","generation":1,"creationTimestamp":"2026-11-27T01:00:02Z","labels":{"app":"courier-bench","courier.dev/origin":"courier","courier.dev/origin-uid":"0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711","courier.dev/epoch":"1"},"annotations":{"courier.dev/spec-hash":"5f0c2b1e9a7d4c3b","courier.dev/template-hash":"9e8d7c6b5a493827"},"managedFields":[{"manager":"courier","operation":"Update","apiVersion":"batch/v1","time":"2026-11-27T01:00:02Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{},"f:labels":{}},"f:spec":{"f:backoffLimit":{},"f:template":{}}}},{"manager":"kube-controller-manager","operation":"Update","apiVersion":"batch/v1","time":"2026-11-27T01:00:04Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},"f:succeeded":{}}},"subresource":"status"}]},"spec":{"parallelism":1,"completions":1,"backoffLimit":0,"completionMode":"NonIndexed","suspend":false,"podReplacementPolicy":"TerminatingOrFailed","selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"7d1e2a90-51b4-4c1e-8f0b-2a9c6e3b4711"}},"manualSelector":false,"template":{"metadata":{"labels":{"batch.kubernetes.io/controller-uid":"7d1e2a90-51b4-4c1e-8f0b-2a9c6e3b4711","batch.kubernetes.io/job-name":"bench-004711","controller-uid":"7d1e2a90-51b4-4c1e-8f0b-2a9c6e3b4711","job-name":"bench-004711"},"annotations":{"sim/run-seconds":"0"}},"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["true"],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}},"status":{"conditions":[{"type":"SuccessCriteriaMet","status":"True","lastProbeTime":"2026-11-27T01:00:04Z","lastTransitionTime":"2026-11-27T01:00:04Z","reason":"CompletionsReached","message":"Reached expected number of succeeded pods"},{"type":"Complete","status":"True","lastProbeTime":"2026-11-27T01:00:04Z","lastTransitionTime":"2026-11-27T01:00:04Z","reason":"CompletionsReached","message":"Reached expected number of succeeded pods"}],"startTime":"2026-11-27T01:00:02Z","completionTime":"2026-11-27T01:00:04Z","succeeded":1,"terminating":0,"ready":0,"uncountedTerminatedPods":{}}}"#;

/// Heap bytes (malloc chunks) one origin entry of the finished benchmark Job may hold. It held
/// 3,520 B with the labels and annotations as `BTreeMap`s and the spec as a JSON object, 1,648 B
/// with the status as a `k8s_openapi` `JobStatus`, 1,136 B with it as a `CachedStatus`
/// (conditions' texts static where the Job API fixes them, times as seconds).
const ORIGIN_ENTRY_BOUND: isize = 1200;
/// Heap bytes one mirror entry of it may hold (3,536 B, then 1,936 B, now 1,456 B).
const MIRROR_ENTRY_BOUND: isize = 1500;

#[test]
fn a_finished_bench_job_costs_little_in_both_caches() {
    let (origin, origin_bytes) = held_by(|| {
        let job: SlimJob = serde_json::from_str(ORIGIN).unwrap_or_else(|e| panic!("{e}"));
        trim_job(&job)
    });
    let (mirror, mirror_bytes) = held_by(|| {
        let job: SlimJob = serde_json::from_str(MIRROR).unwrap_or_else(|e| panic!("{e}"));
        mirrors::trim(&job)
    });
    let Ok(Some(origin)) = origin else {
        panic!("the origin is Courier's and readable")
    };
    let Some((_, mirror)) = mirror else {
        panic!("the mirror is readable")
    };
    // What the entries must still tell decisions.
    assert!(origin.source.is_none(), "a finished Job keeps no source");
    assert_eq!(origin.view.intent().map(|i| i.epoch), Some(1));
    assert_eq!(origin.view.status.succeeded, Some(1));
    assert_eq!(mirror.view.labels.len(), 3);
    assert_eq!(mirror.view.status.condition_count(), 2);
    eprintln!(
        "origin entry {origin_bytes} B of heap + {} B inline, mirror entry {mirror_bytes} B + {} B \
         inline (status {} B inline)",
        std::mem::size_of::<crate::origin::store::OriginEntry>(),
        std::mem::size_of::<courier_core::reconcile::MirrorView>(),
        std::mem::size_of::<courier_core::job_status::CachedStatus>(),
    );
    assert!(
        origin_bytes <= ORIGIN_ENTRY_BOUND,
        "an origin entry holds {origin_bytes} B of heap (bound {ORIGIN_ENTRY_BOUND})"
    );
    assert!(
        mirror_bytes <= MIRROR_ENTRY_BOUND,
        "a mirror entry holds {mirror_bytes} B of heap (bound {MIRROR_ENTRY_BOUND})"
    );
}

/// Keys in one burst through the work queue (`courier bench --jobs 20000`).
const BURST: usize = 20_000;
/// Heap bytes the queue may keep once a burst of [`BURST`] keys, each in both lanes, has drained.
/// Kept at their largest, its lanes and their maps held about 7 MB after such a burst (about 350
/// bytes per Job at rest in `courier bench`, issue #13).
const DRAINED_QUEUE_BOUND: isize = 64 * 1024;

#[tokio::test]
async fn a_drained_queue_gives_back_what_a_burst_took() {
    use std::time::Duration;

    use crate::queue::{ObjectKey, WorkQueue};

    let keys: Vec<ObjectKey> = (0..BURST)
        .map(|i| ObjectKey::new("courier-bench", format!("bench-{i:06}")))
        .collect();
    let q = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(1));
    let before = held();
    for k in &keys {
        q.add(k.clone());
        q.add_urgent(k.clone());
    }
    let mut handed = 0;
    while q.len() > 0 {
        let h = q.next_handed().await;
        q.done(&h.key);
        handed += 1;
    }
    let kept = held() - before;
    assert_eq!(handed, BURST, "each key is handed out once");
    eprintln!("the drained queue keeps {kept} B of heap");
    assert!(
        kept <= DRAINED_QUEUE_BOUND,
        "the drained queue keeps {kept} B of heap (bound {DRAINED_QUEUE_BOUND})"
    );
}

/// Heap bytes the event history may hold per origin with one event (`Dispatched`, most Jobs'
/// only one). A 10,000-Job run keeps one for every Job (`recent::TOTAL`). It held 800 B with the
/// event kept as its `EventSnapshot` (five strings), 624 B kept compact (hash-map slots and the
/// origin's key, kept twice, are most of the rest).
const HISTORY_PER_ORIGIN_BOUND: isize = 660;

#[test]
fn the_event_history_of_a_dispatched_job_costs_little() {
    use crate::queue::ObjectKey;
    use crate::recent::RecentEvents;

    const ORIGINS: usize = 1_000;
    let keys: Vec<ObjectKey> = (0..ORIGINS)
        .map(|i| ObjectKey::new("courier-bench", format!("bench-{i:06}")))
        .collect();
    let (history, bytes) = held_by(|| {
        let history = RecentEvents::default();
        for k in &keys {
            history.record(
                k,
                "0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711",
                "Normal",
                "Dispatched",
                "dispatched to w3 (epoch 1)",
            );
        }
        history
    });
    assert_eq!(
        history.of(&keys[0], "0b8f1f7c-3c0e-4a52-9d8e-5f1f3f0a4711")[0].reason,
        "Dispatched"
    );
    let per_origin = bytes / ORIGINS as isize;
    eprintln!("the event history holds {per_origin} B of heap per origin");
    assert!(
        per_origin <= HISTORY_PER_ORIGIN_BOUND,
        "the event history holds {per_origin} B per origin (bound {HISTORY_PER_ORIGIN_BOUND})"
    );
}
