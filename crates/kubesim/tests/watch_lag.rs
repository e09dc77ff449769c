//! A watcher that falls behind the per-table broadcast buffer is served on from the retained events
//! (what the real server's watch cache does), not cut off: the buffer is small so that an idle
//! server costs little (issue #13), and that must not turn bursts into re-lists.

use std::time::Duration;

use kubesim::api::WriteOpts;
use kubesim::api::watch::{WatchOpts, WatchStream, start};
use kubesim::{Role, Sim, SimOptions};
use serde_json::json;

/// Well beyond the broadcast buffer (1,024).
const EVENTS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_behind_the_buffer_gets_every_event_and_stays_open() {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..SimOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let api = sim.api().clone();
    let Some(cm) = api.registry.get("", "v1", "configmaps") else {
        panic!("configmaps are served")
    };
    let mut w = start(
        api.clone(),
        cm.clone(),
        WatchOpts {
            namespace: Some("default".into()),
            ..WatchOpts::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let opts = WriteOpts {
        manager: "test".into(),
        ..WriteOpts::default()
    };
    // Written while nobody reads the stream: the broadcast overtakes it.
    for i in 0..EVENTS {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "namespace": "default"}, "data": {"i": i.to_string()}});
        let mut warnings = Vec::new();
        let (obj, _) = cm
            .decode_object(obj, &mut warnings)
            .unwrap_or_else(|e| panic!("{e:?}"));
        api.create(&cm, "default", obj, &opts)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    let mut names = Vec::new();
    let mut lines = Lines::default();
    while names.len() < EVENTS {
        match tokio::time::timeout(Duration::from_secs(10), lines.next(&mut w)).await {
            Ok(Some(line)) => {
                let ev: serde_json::Value =
                    serde_json::from_slice(&line).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(ev["type"], "ADDED", "{ev}");
                names.push(
                    ev["object"]["metadata"]["name"]
                        .as_str()
                        .map(str::to_string),
                );
            }
            Ok(None) => panic!("the watch ended after {} of {EVENTS} events", names.len()),
            Err(_) => panic!("{} of {EVENTS} events, then nothing", names.len()),
        }
    }
    let expected: Vec<_> = (0..EVENTS).map(|i| Some(format!("c{i}"))).collect();
    assert_eq!(names, expected, "every event once, in order");
    // Still open: a later change arrives on the same stream.
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "after", "namespace": "default"}});
    let mut warnings = Vec::new();
    let (obj, _) = cm
        .decode_object(obj, &mut warnings)
        .unwrap_or_else(|e| panic!("{e:?}"));
    api.create(&cm, "default", obj, &opts)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let last = tokio::time::timeout(Duration::from_secs(10), lines.next(&mut w)).await;
    let Ok(Some(line)) = last else {
        panic!("the watch did not stay open: {last:?}")
    };
    let ev: serde_json::Value = serde_json::from_slice(&line).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ev["object"]["metadata"]["name"], "after");
    sim.shutdown();
}

/// The stream's lines, one at a time, from its chunks.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    async fn next(&mut self, w: &mut WatchStream) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(i + 1);
                return Some(std::mem::replace(&mut self.buf, rest));
            }
            self.buf.extend_from_slice(&w.next_chunk().await?);
        }
    }
}
