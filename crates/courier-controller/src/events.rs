//! Kubernetes Events (events.k8s.io/v1) about origins, with kube's series aggregation (the same
//! event about the same object within 6 minutes patches `series.count` instead of creating another
//! object) but a bounded cache with O(1) expiry.
//!
//! Why not `kube::runtime::events::Recorder`: it keeps every event it published for 6 minutes and
//! scans all of them, under a write lock, on every publish. With a `Dispatched` event per Job that is
//! O(Jobs dispatched in the last 6 minutes) per Job, and a full Event object kept per Job: at 10,000
//! Jobs `courier bench` measured 7% of the controller's CPU in that scan (docs/benchmarks.md).

use crate::locks::MutexExt as _;
use crate::queue::KeyHasher;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Error, Resource as _};
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a repeated event joins the series of the first one (kube's and client-go's value).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// At most this many series are remembered; the oldest are forgotten first (a repeat then starts
/// a new Event object, which is only less compact).
const MAX_SERIES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
    uid: String,
    reason: String,
    action: String,
    warning: bool,
}

struct Series {
    event_name: String,
    count: i32,
    /// Which entry of `Cache::order` is this series' latest.
    seq: u64,
}

#[derive(Default)]
struct Cache {
    /// With the queue's hasher (see [`KeyHasher`]): one lookup per Event, keyed by user-chosen
    /// names, so the same reasoning holds.
    series: HashMap<Key, Series, KeyHasher>,
    /// (recorded at, seq, key), oldest first; entries superseded by a later publish are skipped.
    order: VecDeque<(Instant, u64, Key)>,
    next_seq: u64,
}

impl Cache {
    fn expire(&mut self, now: Instant) {
        while let Some((at, seq, _)) = self.order.front() {
            let expired = now.saturating_duration_since(*at) >= SERIES_WINDOW;
            if !expired && self.order.len() <= MAX_SERIES {
                break;
            }
            let seq = *seq;
            if let Some((_, _, key)) = self.order.pop_front()
                && self.series.get(&key).is_some_and(|s| s.seq == seq)
            {
                self.series.remove(&key);
            }
        }
    }

    fn record(&mut self, key: Key, event_name: String, count: i32, now: Instant) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((now, seq, key.clone()));
        self.series.insert(
            key,
            Series {
                event_name,
                count,
                seq,
            },
        );
        self.expire(now);
    }
}

pub struct EventRecorder {
    client: Client,
    controller: String,
    instance: String,
    cache: Mutex<Cache>,
    /// The latest events per origin, for the web view and `explain` (bounded, in memory).
    pub log: crate::recent::RecentEvents,
    /// Slots for events published off the reconcile path ([`Self::background_slot`]).
    background: Arc<Semaphore>,
}

/// Events in flight off the reconcile path at most: a burst of dispatches must not open a
/// connection per Event to the management cluster.
const BACKGROUND_EVENTS: usize = 16;

impl EventRecorder {
    pub fn new(client: Client, controller: String, instance: String) -> Self {
        Self {
            client,
            controller,
            instance,
            cache: Mutex::new(Cache::default()),
            log: Default::default(),
            background: Arc::new(Semaphore::new(BACKGROUND_EVENTS)),
        }
    }

    /// A slot to publish one event in a task of its own, if one is free (held until it is done).
    pub fn background_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.background.clone().try_acquire_owned().ok()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock_or_recover()
    }

    /// Publishes `ev` about `regarding` (in its namespace, `default` for cluster-scoped objects).
    pub async fn publish(&self, ev: &Event, regarding: &ObjectReference) -> Result<(), Error> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = Key {
            namespace: namespace.clone(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            reason: ev.reason.clone(),
            action: ev.action.clone(),
            warning: matches!(ev.type_, EventType::Warning),
        };
        let (type_, note) = (
            if key.warning { "Warning" } else { "Normal" },
            ev.note.as_deref(),
        );
        let origin = crate::queue::ObjectKey::new(&namespace, &key.name);
        self.log
            .record(&origin, &key.uid, type_, &ev.reason, note.unwrap_or(""));
        let repeat = {
            let mut cache = self.cache();
            cache.expire(Instant::now());
            cache
                .series
                .get(&key)
                .map(|s| (s.event_name.clone(), s.count + 1))
        };
        let now = Timestamp::now();
        if let Some((event_name, count)) = repeat {
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
            let patch = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            match api
                .patch(&event_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.cache().record(key, event_name, count, Instant::now());
                    return Ok(());
                }
                // Deleted (events have a TTL on the server): start a new one.
                Err(Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        // The path `Api::resource_url` gives, without building an `Api` per Event.
        let url = K8sEvent::url_path(&(), Some(&namespace));
        let event_name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: ev.note.clone(),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(event_name.clone()),
                ..Default::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            related: ev.secondary.clone(),
            ..Default::default()
        };
        // Nothing of the answer (the created Event) is read: it is not decoded.
        let body = serde_json::to_vec(&event).map_err(Error::SerdeError)?;
        let request = kube::core::Request::new(url)
            .create(&PostParams::default(), body)
            .map_err(Error::BuildRequest)?;
        self.client.request_text(request).await?;
        self.cache().record(key, event_name, 1, Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> Key {
        Key {
            namespace: "default".into(),
            name: format!("job-{i}"),
            uid: format!("uid-{i}"),
            reason: "Dispatched".into(),
            action: "Dispatch".into(),
            warning: false,
        }
    }

    #[test]
    fn the_cache_is_bounded_and_keeps_the_newest() {
        let mut c = Cache::default();
        let now = Instant::now();
        for i in 0..MAX_SERIES + 100 {
            c.record(key(i), format!("e{i}"), 1, now);
        }
        assert_eq!(c.series.len(), MAX_SERIES);
        assert!(c.order.len() <= MAX_SERIES);
        assert!(!c.series.contains_key(&key(0)));
        assert!(c.series.contains_key(&key(MAX_SERIES + 99)));
    }

    #[test]
    fn series_expire_after_the_window_unless_repeated() {
        let mut c = Cache::default();
        let t0 = Instant::now();
        c.record(key(1), "a".into(), 1, t0);
        c.record(key(2), "b".into(), 1, t0);
        // key 1 repeats later: its older entry must not evict the refreshed series.
        c.record(key(1), "a".into(), 2, t0 + SERIES_WINDOW / 2);
        c.expire(t0 + SERIES_WINDOW);
        assert!(!c.series.contains_key(&key(2)));
        assert_eq!(c.series.get(&key(1)).map(|s| s.count), Some(2));
        c.expire(t0 + SERIES_WINDOW * 2);
        assert!(c.series.is_empty() && c.order.is_empty());
    }

    /// Events published off the reconcile path are bounded: with every slot held the next one is
    /// published in line; a slot comes back when its event is done.
    #[tokio::test]
    async fn background_events_are_bounded() {
        let Ok(url) = "http://127.0.0.1:9".parse() else {
            panic!("url")
        };
        let Ok(client) = Client::try_from(kube::Config::new(url)) else {
            panic!("client")
        };
        let recorder = EventRecorder::new(client, "courier".into(), "test".into());
        let held: Vec<_> = (0..BACKGROUND_EVENTS)
            .map_while(|_| recorder.background_slot())
            .collect();
        assert_eq!(held.len(), BACKGROUND_EVENTS);
        assert!(recorder.background_slot().is_none(), "all slots held");
        drop(held);
        assert!(recorder.background_slot().is_some(), "slots come back");
    }
}
