//! The TTL-after-finished controller: deletes a finished Job (managedBy ones too) at
//! `jobctl::ttl_expiry` with Foreground propagation and a UID precondition, as the real one does.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::slim::{Keep, view};
use super::{Change, Follower, instant_at, obj_key};
use crate::api::{Api, DeleteOpts, Served};
use crate::jobctl::{SimConfig, TTL_PROPAGATION, ttl_expiry};
use crate::json::meta_str;
use crate::store::{EventType, Stored};

type Key = (String, String);

/// What [`Ttl::observe_stored`] reads of a stored Job ([`key_of`], `ttl_expiry`): a Job's first event
/// (new to the controller, most have no TTL) is decided without building its managedFields, spec
/// and status (`slim_tests` compares both readers on the view and on the whole Job).
pub(super) const TTL_VIEW: &[(&str, Keep)] = &[
    (
        "metadata",
        Keep::Only(&[
            ("name", Keep::Whole),
            ("namespace", Keep::Whole),
            ("deletionTimestamp", Keep::Whole),
        ]),
    ),
    (
        "spec",
        Keep::Only(&[("ttlSecondsAfterFinished", Keep::Whole)]),
    ),
    ("status", Keep::Only(&[("conditions", Keep::Whole)])),
];

struct Ttl {
    api: Arc<Api>,
    served: Arc<Served>,
    cfg: SimConfig,
    due: BTreeSet<(Timestamp, Key)>,
    at: HashMap<Key, Timestamp>,
    /// UID → generation of the Jobs whose spec has no `ttlSecondsAfterFinished`. A spec change bumps
    /// the generation, so while it stays the Job still has none and its events (status writes,
    /// mostly) need no parse: they would unschedule a Job that is not scheduled.
    untimed: HashMap<String, i64>,
}

pub(super) async fn run(api: Arc<Api>, cfg: SimConfig, shutdown: CancellationToken) {
    let Some(served) = api.registry.get("batch", "v1", "jobs") else {
        tracing::error!(
            controller = "ttl",
            "batch/v1 jobs are not served; not starting"
        );
        return;
    };
    let mut follower = Follower::new(api.store.clone(), served.table.clone(), "ttl");
    let mut c = Ttl {
        api,
        served,
        cfg: cfg.normalized(),
        due: BTreeSet::new(),
        at: HashMap::new(),
        untimed: HashMap::new(),
    };
    loop {
        let next = c.due.first().map(|(t, _)| *t);
        let sleep =
            tokio::time::sleep_until(next.map_or_else(tokio::time::Instant::now, instant_at));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            change = follower.next() => c.apply(change),
            _ = sleep, if next.is_some() => c.run_due(),
        }
    }
}

pub(super) fn key_of(job: &Value) -> Key {
    (
        meta_str(job, "namespace").to_string(),
        meta_str(job, "name").to_string(),
    )
}

impl Ttl {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Resync(items) => {
                self.due.clear();
                self.at.clear();
                self.untimed.clear();
                for st in items {
                    self.observe_stored(&st);
                }
            }
            Change::Event(ev) if ev.kind == EventType::Deleted => {
                self.untimed.remove(ev.obj.uid());
                self.unschedule(&(ev.obj.namespace().to_string(), ev.obj.name().to_string()));
            }
            Change::Event(ev) => {
                if self.untimed.get(ev.obj.uid()) != Some(&ev.obj.generation()) {
                    self.observe_stored(&ev.obj);
                }
            }
        }
    }

    /// [`Ttl::observe`], remembering a Job without a TTL at this generation.
    fn observe_stored(&mut self, st: &Stored) {
        let job = view(st, TTL_VIEW);
        if job.pointer("/spec/ttlSecondsAfterFinished").is_none() {
            self.untimed.insert(st.uid().to_string(), st.generation());
        } else {
            self.untimed.remove(st.uid());
        }
        self.observe(&job);
    }

    fn observe(&mut self, job: &Value) {
        let key = key_of(job);
        match ttl_expiry(job, &self.cfg) {
            Some(t) => self.schedule(key, t),
            None => self.unschedule(&key),
        }
    }

    fn schedule(&mut self, key: Key, t: Timestamp) {
        if self.at.get(&key) == Some(&t) {
            return;
        }
        self.unschedule(&key);
        self.due.insert((t, key.clone()));
        self.at.insert(key, t);
    }

    fn unschedule(&mut self, key: &Key) {
        if let Some(t) = self.at.remove(key) {
            self.due.remove(&(t, key.clone()));
        }
    }

    fn run_due(&mut self) {
        let now = Timestamp::now();
        let mut due = Vec::new();
        while let Some((t, _)) = self.due.first() {
            if *t > now {
                break;
            }
            if let Some((_, key)) = self.due.pop_first() {
                self.at.remove(&key);
                due.push(key);
            }
        }
        for key in due {
            self.expire(key, now);
        }
    }

    /// Re-reads the Job (it may have changed since it was scheduled) and deletes it if it expired.
    fn expire(&mut self, key: Key, now: Timestamp) {
        let (ns, name) = (&key.0, &key.1);
        let Some(cur) = self.api.store.get(&self.served.table, ns, name) else {
            return;
        };
        let job = &cur.value();
        let Some(t) = ttl_expiry(job, &self.cfg) else {
            return;
        };
        if t > now {
            self.schedule(key, t);
            return;
        }
        let opts = DeleteOpts {
            propagation: Some(TTL_PROPAGATION.to_string()),
            precondition_uid: Some(meta_str(job, "uid").to_string()),
            ..DeleteOpts::default()
        };
        match self.api.delete(&self.served, ns, name, &opts) {
            Ok(_) => {}
            // Gone already, or replaced by another Job of the same name (UID precondition).
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(controller = "ttl", job = %obj_key(ns, name), code = e.code, error = %e.message, "deleting an expired Job failed; retrying");
                let retry = jiff::SignedDuration::from_secs_f64((1.0 / self.cfg.speed).max(0.005));
                self.schedule(key, now.saturating_add(retry).unwrap_or(now));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::controllers::tests::{
        JOBS, WAIT, create, eventually, get, has, job, merge_patch, wait_job, worker,
    };

    /// A finished Job without a TTL is passed over without a parse while its generation stays; a TTL
    /// added afterwards (a spec change, a new generation) is seen and the Job deleted.
    #[tokio::test]
    async fn a_ttl_added_to_a_finished_job_is_seen() {
        let c = worker(50.0);
        let api = &c.api;
        create(
            api,
            JOBS,
            "default",
            job("late", json!({}), json!({"sim/run-seconds": "1"})),
        )
        .unwrap();
        wait_job(api, "late", "Complete", |s| has(s, "Complete")).await;
        // Its status writes went by; it is still there.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(get(api, JOBS, "default", "late").is_some());
        let j = merge_patch(
            api,
            JOBS,
            "default",
            "late",
            json!({"spec": {"ttlSecondsAfterFinished": 0}}),
        );
        assert_eq!(j["metadata"]["generation"], 2);
        eventually("the Job deleted by its TTL", WAIT, || {
            get(api, JOBS, "default", "late").is_none().then_some(())
        })
        .await;
    }
}
