//! The watch delivering our own origin write before its answer arrives.
//!
//! A write made with `resourceVersion: sent` as precondition creates the version right after
//! `sent`. When the watch delivers it before the server's answer is back (it often does: the
//! watch and the answer race), the origin cache takes it as a change like any other, and the key
//! used to be queued: a reconcile that then planned nothing (the decision already said whether
//! anything follows its write, `Decision::after_write`). So while a write of the key is in flight,
//! the watch's changes of that key are held back instead of queued, and when the write ends they
//! are queued unless the cache holds just the write's own answer (the key cannot be reconciled
//! before then anyway: it is in flight, and an add would only mark it for after). A write that
//! fails, or a cache at any other version (someone else's write after ours), queues the key.

use std::sync::Mutex;

use crate::locks::MutexExt as _;
use crate::queue::{KeyMap, ObjectKey};

use super::Ctx;

/// The origin writes in flight, by key: whether a change of the key arrived meanwhile.
#[derive(Default)]
pub struct Writes {
    in_flight: Mutex<KeyMap<bool>>,
}

impl Writes {
    /// The watch changed `key`'s cache entry: true if a write of `key` is in flight (the change is
    /// held back until it ends), false if the key is to be queued now.
    pub fn hold(&self, key: &ObjectKey) -> bool {
        match self.in_flight.lock_or_recover().get_mut(key) {
            Some(held) => {
                *held = true;
                true
            }
            None => false,
        }
    }

    /// A write of `key` starts; false if one is in flight already (then nothing is held for this
    /// one).
    fn begin(&self, key: &ObjectKey) -> bool {
        let mut in_flight = self.in_flight.lock_or_recover();
        if in_flight.contains_key(key) {
            return false;
        }
        in_flight.insert(key.clone(), false);
        true
    }

    /// The write of `key` ended; whether a change was held back meanwhile.
    fn end(&self, key: &ObjectKey) -> bool {
        self.in_flight
            .lock_or_recover()
            .remove(key)
            .unwrap_or(false)
    }
}

/// One origin write in flight: dropped when the write ends (answered, failed or cancelled), it
/// queues the key if a change was held back that is not the write's own answer.
pub struct Writing<'a> {
    shared: &'a Ctx,
    key: &'a ObjectKey,
    /// The answer's resourceVersion, once the server answered.
    answer: Option<String>,
}

impl<'a> Writing<'a> {
    pub fn begin(shared: &'a Ctx, key: &'a ObjectKey) -> Option<Self> {
        shared.writes.begin(key).then_some(Self {
            shared,
            key,
            answer: None,
        })
    }

    pub fn answered(&mut self, resource_version: Option<String>) {
        self.answer = resource_version;
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let held = self.shared.writes.end(self.key);
        let cached = || {
            let entry = self.shared.origins.get(self.key)?;
            entry.view.resource_version.clone()
        };
        if held && !only_ours(self.answer.as_deref(), cached().as_deref()) {
            self.shared.queue.add(self.key.clone());
        }
    }
}

/// Whether what the watch delivered during a write (the cache now holds `cached`) was only the
/// write's own version (`answer`; `None` when the write failed or was cancelled).
fn only_ours(answer: Option<&str>, cached: Option<&str>) -> bool {
    answer.is_some() && answer == cached
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_write_in_flight_holds_changes_back() {
        let w = Writes::default();
        let k = ObjectKey::new("ns", "a");
        assert!(!w.hold(&k), "no write in flight");
        assert!(w.begin(&k));
        assert!(!w.begin(&k), "one write per key");
        assert!(!w.end(&k), "nothing held");
        assert!(w.begin(&k));
        assert!(w.hold(&k));
        assert!(w.end(&k), "held");
        assert!(!w.hold(&k), "ended");
    }

    #[test]
    fn a_held_change_is_queued_unless_the_cache_holds_just_our_answer() {
        assert!(only_ours(Some("12"), Some("12")));
        assert!(!only_ours(Some("12"), Some("13")), "someone wrote after us");
        assert!(!only_ours(None, Some("12")), "the write failed");
        assert!(!only_ours(None, None));
        assert!(!only_ours(Some("12"), None), "gone");
    }
}
