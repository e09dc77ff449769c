//! [`NamedValues`]: the bookkeeping of a watched cache keyed by object name (store when changed,
//! drop, list the keys, synced flag), shared by the caches whose value is one projection per name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::locks::RwLockExt as _;

/// Name -> projected value, and whether a complete list has been stored.
pub struct NamedValues<V> {
    map: RwLock<HashMap<String, Arc<V>>>,
    synced: AtomicBool,
}

impl<V> Default for NamedValues<V> {
    fn default() -> Self {
        Self {
            map: RwLock::new(HashMap::new()),
            synced: AtomicBool::new(false),
        }
    }
}

impl<V: PartialEq> NamedValues<V> {
    /// The value cached under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<V>> {
        self.map.read_or_recover().get(name).cloned()
    }

    /// A complete list has been stored at least once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Stores `value` under `name`; true if it is new or changed.
    pub fn put(&self, name: &str, value: V) -> bool {
        let mut map = self.map.write_or_recover();
        if map.get(name).is_some_and(|old| **old == value) {
            return false;
        }
        map.insert(name.to_owned(), Arc::new(value));
        true
    }

    /// Drops `name`; true if it was cached.
    pub fn remove(&self, name: &str) -> bool {
        self.map.write_or_recover().remove(name).is_some()
    }

    /// Every cached name.
    pub fn names(&self) -> Vec<String> {
        self.map.read_or_recover().keys().cloned().collect()
    }

    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}
