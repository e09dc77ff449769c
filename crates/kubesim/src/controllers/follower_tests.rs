//! The table follower the in-process controllers run on.

use std::sync::Arc;

use serde_json::json;

use super::{Change, Follower};
use crate::store::{Precondition, Retention, Store, TableKey};

/// A follower behind the broadcast buffer carries on from the retained events: every change once,
/// in order, and no re-list (a re-list of a busy worker's Jobs per burst would be the cost).
#[tokio::test]
async fn a_follower_behind_the_buffer_carries_on_without_a_relist() {
    let store = Arc::new(Store::new(Retention::default()));
    let table = TableKey::new("", "configmaps");
    let mut f = Follower::new(store.clone(), table.clone(), "test");
    assert!(matches!(f.next().await, Change::Resync(items) if items.is_empty()));
    const N: usize = 3_000;
    for i in 0..N {
        let name = format!("c{i}");
        store
            .put(
                &table,
                "ns",
                &name,
                json!({"metadata": {"name": name, "namespace": "ns"}}),
                Precondition::MustNotExist,
            )
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    for i in 0..N {
        match f.next().await {
            Change::Event(ev) => assert_eq!(ev.obj.name(), format!("c{i}")),
            Change::Resync(_) => panic!("listed again after {i} events"),
        }
    }
}
