//! Placement intents being written, by cluster. Placement picks the cluster with the fewest
//! unfinished Jobs placed on it (`courier_core::placement`), counted from the origin cache, which
//! learns of an intent only when its write is answered. Meanwhile every other dispatch decided the
//! same cluster: in `courier bench` (16 dispatch slots, 4 workers) half of all mirror creates then
//! waited for one worker's call slots (`Tuning::cluster_inflight`) while the others had free ones.
//! So an intent counts for its cluster from the moment its write starts until the answer is in
//! the cache (or the write failed).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::locks::MutexExt as _;

/// Intents being written, by cluster.
#[derive(Default)]
pub struct Placing(Mutex<HashMap<String, u32>>);

impl Placing {
    /// Intents to `cluster` being written now.
    pub fn on(&self, cluster: &str) -> u32 {
        self.0.lock_or_recover().get(cluster).copied().unwrap_or(0)
    }

    /// Counts an intent to `cluster` until the returned guard is dropped: after its answer is
    /// written through to the cache, or when the write failed.
    pub fn begin(&self, cluster: &str) -> Placement<'_> {
        *self
            .0
            .lock_or_recover()
            .entry(cluster.to_string())
            .or_insert(0) += 1;
        Placement {
            placing: self,
            cluster: cluster.to_string(),
        }
    }
}

/// One intent being written ([`Placing::begin`]).
pub struct Placement<'a> {
    placing: &'a Placing,
    cluster: String,
}

impl Drop for Placement<'_> {
    fn drop(&mut self) {
        let mut counts = self.placing.0.lock_or_recover();
        if let Some(n) = counts.get_mut(&self.cluster) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.cluster);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_counts_for_its_cluster_while_it_is_written() {
        let placing = Placing::default();
        let a1 = placing.begin("a");
        let a2 = placing.begin("a");
        let b = placing.begin("b");
        assert_eq!(
            (placing.on("a"), placing.on("b"), placing.on("c")),
            (2, 1, 0)
        );
        drop(a1);
        assert_eq!(placing.on("a"), 1);
        drop((a2, b));
        assert_eq!((placing.on("a"), placing.on("b")), (0, 0));
        // Clusters come and go: nothing is kept for one with no write in flight.
        assert!(placing.0.lock_or_recover().is_empty());
    }

    #[test]
    fn a_failed_write_stops_counting() {
        fn write(placing: &Placing, ok: bool) -> Result<(), ()> {
            let _placement = placing.begin("a");
            if ok { Ok(()) } else { Err(()) }
        }
        let placing = Placing::default();
        assert!(write(&placing, false).is_err());
        assert!(write(&placing, true).is_ok());
        assert_eq!(placing.on("a"), 0);
    }
}
