//! The recorded Job traces (`jobctl::traces`) replayed through the Api and the controllers.

use super::*;

const REPLAY_SPEED: f64 = 10.0;

/// Pod names -> the recorder's labels (`p1`, `p2[i0]`...), for condition messages.
fn pod_labels(job: &Value) -> HashMap<String, String> {
    let name = job["metadata"]["name"].as_str().unwrap();
    let uid = job["metadata"]["uid"].as_str().unwrap();
    let mut out = HashMap::new();
    for ordinal in 0..64u32 {
        out.insert(
            crate::jobctl::pod_name(name, uid, ordinal, None),
            format!("p{}", ordinal + 1),
        );
        for i in 0..8 {
            out.insert(
                crate::jobctl::pod_name(name, uid, ordinal, Some(i)),
                format!("p{}[i{i}]", ordinal + 1),
            );
        }
    }
    out
}

/// Waits until the wall clock sits at fraction `phase` of the simulator's 1/speed timestamp grid,
/// the creation phase the recording's timestamps allow (see `jobctl::traces`).
async fn align_to_phase(phase: f64, speed: f64) {
    let grid = 1e9 / speed;
    let now = jiff::Timestamp::now().as_nanosecond() as f64;
    let at = (now / grid).fract();
    let wait = (phase - at).rem_euclid(1.0) * grid;
    tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
}

/// One scenario's Job events as they arrive, stamped with the model time of their arrival.
struct Stamped {
    rx: broadcast::Receiver<Arc<Event>>,
    start: tokio::time::Instant,
    t0: f64,
    seen: Vec<(f64, Arc<Event>)>,
}

impl Stamped {
    fn poll(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            let t = self.t0 + self.start.elapsed().as_secs_f64() * REPLAY_SPEED;
            self.seen.push((t, ev));
        }
    }

    /// Distinct normalized states so far (DELETED left out, as in the recordings).
    fn states(&self, names: &HashMap<String, String>) -> Vec<crate::jobctl::traces::State> {
        crate::jobctl::traces::fold(
            self.seen
                .iter()
                .filter(|(_, e)| e.kind != EventType::Deleted)
                .map(|(t, e)| {
                    let status = e.obj.value().get("status").cloned().unwrap_or(json!({}));
                    crate::jobctl::traces::State {
                        t: *t,
                        state: crate::jobctl::traces::normalize(&status, names),
                        raw: status,
                    }
                }),
        )
    }

    /// Polls until `n` distinct states were seen; the model time the `n`-th arrived.
    async fn until_states(
        &mut self,
        n: usize,
        names: &HashMap<String, String>,
        deadline: tokio::time::Instant,
    ) -> Option<f64> {
        loop {
            self.poll();
            if let Some(s) = self.states(names).get(n.saturating_sub(1)) {
                return Some(s.t);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Replays one recorded scenario: the Job as submitted, created through the Api on a worker; each
/// recorded test action (a spec patch) applied at its recorded offset from the state the recording
/// showed just before it (anchoring to the simulation's progress rather than to the wall clock, so a
/// scheduler hiccup on a loaded machine cannot move an action across a state change).
async fn replay(sc: &crate::jobctl::traces::Scenario) -> Result<(), String> {
    use crate::jobctl::traces::{describe, phase_bounds, recorded};
    let c = worker(REPLAY_SPEED);
    let api = &c.api;
    let want = recorded(sc);
    let t0 = sc.events[0]["t"].as_f64().unwrap();
    let model = |secs: f64| Duration::from_secs_f64(secs.max(0.0) / REPLAY_SPEED);
    let (lo, hi) = phase_bounds(sc);
    let rx = api.store.subscribe(&served(api, JOBS).table);
    align_to_phase((lo + hi) / 2.0 + t0, REPLAY_SPEED).await;
    let start = tokio::time::Instant::now();
    let mut log = Stamped {
        rx,
        start,
        t0,
        seen: Vec::new(),
    };
    let created = create(api, JOBS, "default", sc.inputs["job"].clone())
        .map_err(|e| format!("{}: create: {}", sc.name, e.message))?;
    let names = pod_labels(&created);
    let deadline = start + model(want.last().unwrap().t - t0) + WAIT;
    let differ = |log: &Stamped, why: &str| {
        format!(
            "{}: {why}\nrecorded:\n{}through the Api:\n{}",
            sc.name,
            describe(&want),
            describe(&log.states(&names))
        )
    };
    for a in sc.inputs["actions"].as_array().unwrap() {
        let at = a["t"].as_f64().unwrap();
        let anchor = want.iter().rposition(|s| s.t <= at).unwrap_or(0);
        let Some(seen_at) = log.until_states(anchor + 1, &names, deadline).await else {
            return Err(differ(&log, "the state before a test action never came"));
        };
        let due = start + model(seen_at - t0 + (at - want[anchor].t));
        tokio::time::sleep_until(due).await;
        merge_patch(api, JOBS, "default", "job", a["patch"].clone());
    }
    if log
        .until_states(want.len(), &names, deadline)
        .await
        .is_none()
    {
        return Err(differ(&log, "states missing"));
    }
    // A little longer, for states the recording does not have.
    tokio::time::sleep(model(3.0)).await;
    let ttl = sc.events.iter().any(|e| e["type"] == "DELETED");
    if ttl {
        eventually(&format!("{}: TTL deletion", sc.name), WAIT, || {
            get(api, JOBS, "default", "job").is_none().then_some(())
        })
        .await;
    }
    log.poll();
    let got = log.states(&names);
    let same = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a.state == b.state);
    if !same {
        return Err(differ(&log, "states differ"));
    }
    if ttl {
        let deleting = log
            .seen
            .iter()
            .map(|(_, e)| e)
            .find(|e| is_deleting(&e.obj.value()))
            .ok_or_else(|| format!("{}: no deletionTimestamp", sc.name))?;
        let m = &deleting.obj.value()["metadata"];
        if m["finalizers"] != json!(["foregroundDeletion"]) || m["generation"] != 2 {
            return Err(format!("{}: TTL deletion shape: {m}", sc.name));
        }
        if log.seen.last().map(|(_, e)| e.kind) != Some(EventType::Deleted) {
            return Err(format!("{}: not DELETED at the end", sc.name));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_trace_is_reproduced_through_the_api() {
    let all = crate::jobctl::traces::scenarios();
    assert!(all.len() >= 15, "found {} scenarios", all.len());
    // Each scenario on its own cluster, all at once.
    let results = futures::future::join_all(all.iter().map(replay)).await;
    // Simulated time is the wall clock: on a machine shared with other builds a thread can stall
    // for longer than the margin (0.5 model s = 50 ms) between a test action and the state before
    // it. A scenario that differs is run once more, alone; a real difference fails both times.
    let mut failures = Vec::new();
    for (sc, r) in all.iter().zip(results) {
        if let Err(first) = r {
            eprintln!("retrying {} after:\n{first}", sc.name);
            if let Err(e) = replay(sc).await {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
