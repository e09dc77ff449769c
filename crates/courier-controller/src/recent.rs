//! The latest events Courier recorded about each origin, kept in memory so the web view and
//! `explain` show "why" without asking the API server. Bounded: at most [`PER_ORIGIN`] events per
//! origin and [`TOTAL`] in all (the oldest go first), whatever the number of Jobs. A repeat of the
//! last event of an origin (same type, reason and note) counts up instead of taking a slot, like an
//! event series.

use std::collections::VecDeque;
use std::sync::Mutex;

use jiff::Timestamp;
use serde::Serialize;

use crate::locks::MutexExt as _;
use crate::queue::{KeyMap, ObjectKey};

/// Events kept per origin.
pub const PER_ORIGIN: usize = 20;
/// Events kept in all.
pub const TOTAL: usize = 10_000;

/// One event as the web view shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSnapshot {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub note: String,
    /// How many times it happened in a row.
    pub count: u32,
    /// RFC 3339 times of the first and the latest occurrence.
    pub first: String,
    pub last: String,
}

/// One kept event, compact: the type as a flag and the times as timestamps (an
/// [`EventSnapshot`] is made of it when read). Three allocations and about 200 bytes fewer per
/// event than keeping the snapshot: at 10,000 events (the [`TOTAL`] a 10,000-Job run reaches) 2 MB.
#[derive(Debug)]
struct Kept {
    warning: bool,
    count: u32,
    reason: Box<str>,
    note: Box<str>,
    first: Timestamp,
    last: Timestamp,
}

impl Kept {
    fn snapshot(&self) -> EventSnapshot {
        EventSnapshot {
            type_: if self.warning { "Warning" } else { "Normal" }.to_string(),
            reason: self.reason.to_string(),
            note: self.note.to_string(),
            count: self.count,
            first: self.first.to_string(),
            last: self.last.to_string(),
        }
    }
}

struct Ring {
    uid: String,
    /// (sequence number, event), oldest first.
    events: VecDeque<(u64, Kept)>,
}

#[derive(Default)]
struct Inner {
    rings: KeyMap<Ring>,
    /// (sequence number, origin) of every kept event, oldest first; entries of events already
    /// dropped (per-origin cap, forgotten origins) are skipped and compacted away.
    order: VecDeque<(u64, ObjectKey)>,
    total: usize,
    next_seq: u64,
}

impl Inner {
    fn drop_oldest(&mut self) {
        while let Some((seq, key)) = self.order.pop_front() {
            let Some(ring) = self.rings.get_mut(&key) else {
                continue;
            };
            if ring.events.front().map(|(s, _)| *s) != Some(seq) {
                continue;
            }
            ring.events.pop_front();
            self.total -= 1;
            if ring.events.is_empty() {
                self.rings.remove(&key);
            }
            return;
        }
    }

    fn compact(&mut self) {
        let rings = &self.rings;
        self.order.retain(|(seq, key)| {
            rings
                .get(key)
                .is_some_and(|r| r.events.iter().any(|(s, _)| s == seq))
        });
    }
}

/// The bounded per-origin event memory.
#[derive(Default)]
pub struct RecentEvents {
    inner: Mutex<Inner>,
}

impl RecentEvents {
    /// Remembers an event about origin `key` with `uid` (a new UID starts a new history).
    pub fn record(&self, key: &ObjectKey, uid: &str, type_: &str, reason: &str, note: &str) {
        self.record_at(key, uid, type_, reason, note, Timestamp::now());
    }

    fn record_at(
        &self,
        key: &ObjectKey,
        uid: &str,
        type_: &str,
        reason: &str,
        note: &str,
        now: Timestamp,
    ) {
        let mut inner = self.inner.lock_or_recover();
        let inner = &mut *inner;
        let warning = type_ == "Warning";
        let ring = inner.rings.entry(key.clone()).or_insert_with(|| Ring {
            uid: uid.to_string(),
            // Most origins get one event (Dispatched); a VecDeque's first growth takes four
            // slots (about 600 bytes per origin here), so the first one is sized for one.
            events: VecDeque::with_capacity(1),
        });
        if ring.uid != uid {
            inner.total -= ring.events.len();
            ring.events.clear();
            ring.uid = uid.to_string();
        }
        if let Some((_, last)) = ring.events.back_mut()
            && last.warning == warning
            && *last.reason == *reason
            && *last.note == *note
        {
            last.count = last.count.saturating_add(1);
            last.last = now;
            return;
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        ring.events.push_back((
            seq,
            Kept {
                warning,
                count: 1,
                reason: reason.into(),
                note: note.into(),
                first: now,
                last: now,
            },
        ));
        inner.total += 1;
        if ring.events.len() > PER_ORIGIN {
            ring.events.pop_front();
            inner.total -= 1;
        }
        inner.order.push_back((seq, key.clone()));
        while inner.total > TOTAL {
            inner.drop_oldest();
        }
        if inner.order.len() > 2 * TOTAL {
            inner.compact();
        }
    }

    /// The events of origin `key` if they are about `uid`, oldest first.
    pub fn of(&self, key: &ObjectKey, uid: &str) -> Vec<EventSnapshot> {
        let inner = self.inner.lock_or_recover();
        match inner.rings.get(key) {
            Some(r) if r.uid == uid => r.events.iter().map(|(_, e)| e.snapshot()).collect(),
            _ => Vec::new(),
        }
    }

    /// Drops what is remembered about an origin that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        let mut inner = self.inner.lock_or_recover();
        if let Some(r) = inner.rings.remove(key) {
            inner.total -= r.events.len();
        }
    }

    #[cfg(test)]
    fn sizes(&self) -> (usize, usize, usize) {
        let inner = self.inner.lock_or_recover();
        let counted: usize = inner.rings.values().map(|r| r.events.len()).sum();
        assert_eq!(counted, inner.total, "total is the sum of the rings");
        (inner.rings.len(), inner.total, inner.order.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> ObjectKey {
        ObjectKey::new("team-a", format!("job-{i}"))
    }

    #[test]
    fn repeats_count_up_and_each_origin_keeps_its_latest() {
        let r = RecentEvents::default();
        let k = key(1);
        r.record(&k, "u1", "Normal", "Dispatched", "to worker-1");
        r.record(&k, "u1", "Normal", "Dispatched", "to worker-1");
        r.record(&k, "u1", "Warning", "MirrorRefused", "quota");
        let ev = r.of(&k, "u1");
        assert_eq!(ev.len(), 2);
        assert_eq!((ev[0].reason.as_str(), ev[0].count), ("Dispatched", 2));
        assert_eq!(ev[1].type_, "Warning");
        for i in 0..PER_ORIGIN + 5 {
            r.record(&k, "u1", "Normal", "Step", &format!("step {i}"));
        }
        let ev = r.of(&k, "u1");
        assert_eq!(ev.len(), PER_ORIGIN);
        assert_eq!(
            ev.last().map(|e| e.note.clone()),
            Some(format!("step {}", PER_ORIGIN + 4))
        );
        assert!(r.of(&k, "other-uid").is_empty(), "another origin's history");
        // A re-created origin (new UID) starts afresh.
        r.record(&k, "u2", "Normal", "Dispatched", "to worker-2");
        assert_eq!(r.of(&k, "u2").len(), 1);
        assert_eq!(r.sizes().1, 1);
        r.forget(&k);
        assert!(r.of(&k, "u2").is_empty());
        assert_eq!(r.sizes().1, 0);
    }

    /// An origin with one event (most have only `Dispatched`) holds one slot, not the four a
    /// `VecDeque`'s first growth takes (issue #15: memory per Job).
    #[test]
    fn an_origin_with_one_event_holds_one_slot() {
        let r = RecentEvents::default();
        r.record(&key(1), "u1", "Normal", "Dispatched", "to worker-1");
        let inner = r.inner.lock_or_recover();
        let slots = inner.rings.get(&key(1)).map(|ring| ring.events.capacity());
        assert_eq!(slots, Some(1));
    }

    /// Broken on purpose once (no global eviction): the total grew past `TOTAL` and this failed.
    #[test]
    fn memory_is_bounded_whatever_the_number_of_origins() {
        let r = RecentEvents::default();
        let t0 = Timestamp::now();
        for i in 0..TOTAL + 3_000 {
            r.record_at(&key(i), "u", "Normal", "Dispatched", "x", t0);
            // Every tenth origin gets a burst (per-origin evictions leave stale order entries).
            if i % 10 == 0 {
                for j in 0..PER_ORIGIN + 2 {
                    r.record_at(&key(i), "u", "Normal", "Step", &format!("{j}"), t0);
                }
            }
        }
        let (rings, total, order) = r.sizes();
        assert!(total <= TOTAL, "{total}");
        assert!(order <= 2 * TOTAL + 1, "{order}");
        assert!(rings <= TOTAL);
        // The newest survive, the oldest went first.
        assert_eq!(r.of(&key(TOTAL + 2_999), "u").len(), 1);
        assert!(r.of(&key(0), "u").is_empty());
    }
}
