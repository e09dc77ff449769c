//! "Never run a Job twice", observed over a whole run rather than on a snapshot: every worker kubesim
//! keeps every pod start of a mirror (origin UID, epoch label) and every object ever created, Jobs
//! long deleted included (`GET /runs`, `GET /creates`). A re-dispatch with epoch 2 while epoch 1
//! still ran is invisible once the garbage collector removed the old mirror; here it is a second
//! run of the same origin.
//!
//! - [`Ledger::collect`]: reads both logs from every worker of an [`Env`].
//! - [`Ledger::check_once`]: per origin, the mirrors created (one per epoch, one epoch unless it
//!   was re-placed with an Event saying why) and the pod starts (one run, as many starts as the Job
//!   needs).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail};
use courier_api::{LABEL_EPOCH, LABEL_ORIGIN_UID};
use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;

use crate::{Env, Kubesim};

/// The Event reasons that explain a mirror with epoch > 1 (the origin was moved on purpose).
pub const REPLACEMENT_REASONS: [&str; 3] = ["Redispatched", "MirrorRejected", "MirrorConflict"];

/// One simulated pod start on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub worker: String,
    pub origin_uid: String,
    pub epoch: String,
    pub job: String,
    pub pod: String,
}

/// One Job created on a worker (a mirror when it carries the origin-uid label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorCreate {
    pub worker: String,
    pub origin_uid: String,
    pub epoch: String,
    pub name: String,
    pub user: String,
}

/// Everything the workers saw started and created, per origin UID.
#[derive(Debug, Default)]
pub struct Ledger {
    pub starts: BTreeMap<String, Vec<Start>>,
    pub creates: BTreeMap<String, Vec<MirrorCreate>>,
}

fn text(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

impl Kubesim {
    /// Every pod start this instance recorded (`GET /runs`).
    pub async fn pod_starts(&self) -> anyhow::Result<Vec<Start>> {
        let v = self.admin("GET", "/runs", None).await?;
        let items = v["starts"]
            .as_array()
            .with_context(|| format!("{}: /runs has no starts: {v}", self.name))?;
        Ok(items
            .iter()
            .map(|s| Start {
                worker: self.name.clone(),
                origin_uid: text(s, "originUid"),
                epoch: text(s, "epoch"),
                job: text(s, "job"),
                pod: text(s, "pod"),
            })
            .collect())
    }

    /// Every Job this instance ever created that carries an origin UID (`GET /creates`).
    pub async fn mirror_creates(&self) -> anyhow::Result<Vec<MirrorCreate>> {
        let v = self.admin("GET", "/creates?resource=jobs", None).await?;
        let items = v["items"]
            .as_array()
            .with_context(|| format!("{}: /creates has no items: {v}", self.name))?;
        Ok(items
            .iter()
            .filter_map(|c| {
                let labels = c.get("labels")?;
                Some(MirrorCreate {
                    worker: self.name.clone(),
                    origin_uid: labels.get(LABEL_ORIGIN_UID)?.as_str()?.to_string(),
                    epoch: text(labels, LABEL_EPOCH),
                    name: text(c, "name"),
                    user: text(c, "user"),
                })
            })
            .collect())
    }

    /// The requests recorded since `POST /record/start` (`GET /record`).
    pub async fn recorded(&self) -> anyhow::Result<Vec<Value>> {
        let v = self.admin("GET", "/record", None).await?;
        v["items"]
            .as_array()
            .cloned()
            .with_context(|| format!("{}: /record has no items: {v}", self.name))
    }
}

impl Ledger {
    /// Reads the pod starts and mirror creates of every worker.
    pub async fn collect(env: &Env) -> anyhow::Result<Ledger> {
        let mut l = Ledger::default();
        for w in &env.workers {
            for s in w.pod_starts().await? {
                l.starts.entry(s.origin_uid.clone()).or_default().push(s);
            }
            for c in w.mirror_creates().await? {
                l.creates.entry(c.origin_uid.clone()).or_default().push(c);
            }
        }
        Ok(l)
    }

    /// The distinct runs of an origin: (worker, epoch) pairs that started at least one pod, with
    /// their start counts. A worker's own Job controller retrying a pod stays within one run.
    pub fn runs(&self, uid: &str) -> BTreeMap<(String, String), usize> {
        let mut out = BTreeMap::new();
        for s in self.starts.get(uid).into_iter().flatten() {
            *out.entry((s.worker.clone(), s.epoch.clone())).or_insert(0) += 1;
        }
        out
    }

    /// Every origin in `origins` ran exactly once:
    /// - each epoch's mirror was created once, on one worker; epochs other than `1` exist only
    ///   when the origin has an Event explaining the move ([`REPLACEMENT_REASONS`], `events`
    ///   gives each origin's reasons by UID);
    /// - its pods started in exactly one (worker, epoch) run, `expected_starts(origin)` times.
    ///
    /// Returns the number of origins checked.
    pub fn check_once(
        &self,
        origins: &[Job],
        events: &BTreeMap<String, Vec<String>>,
        expected_starts: &dyn Fn(&Job) -> usize,
    ) -> anyhow::Result<usize> {
        let mut problems = Vec::new();
        for o in origins {
            let name = o.metadata.name.clone().unwrap_or_default();
            let Some(uid) = o.metadata.uid.as_deref() else {
                bail!("origin {name} has no uid");
            };
            let creates = self.creates.get(uid).map(Vec::as_slice).unwrap_or(&[]);
            let mut epochs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for c in creates {
                epochs.entry(&c.epoch).or_default().push(&c.worker);
            }
            for (epoch, workers) in &epochs {
                if workers.len() != 1 {
                    problems.push(format!(
                        "{name}: mirror of epoch {epoch} created {} times ({workers:?})",
                        workers.len()
                    ));
                }
            }
            let moved: BTreeSet<&str> = epochs.keys().copied().filter(|e| *e != "1").collect();
            let explained = events
                .get(uid)
                .is_some_and(|rs| rs.iter().any(|r| REPLACEMENT_REASONS.contains(&r.as_str())));
            if !moved.is_empty() && !explained {
                problems.push(format!(
                    "{name}: mirrors of epochs {moved:?} without a {REPLACEMENT_REASONS:?} Event \
                     (events: {:?})",
                    events.get(uid)
                ));
            }
            let runs = self.runs(uid);
            let want = expected_starts(o);
            match runs.len() {
                1 => {
                    let (run, n) = runs
                        .iter()
                        .next()
                        .map(|(r, n)| (r.clone(), *n))
                        .unwrap_or_default();
                    if n != want {
                        problems.push(format!(
                            "{name}: {n} pod starts in its run {run:?}, the Job needs {want}"
                        ));
                    }
                }
                0 => problems.push(format!("{name}: no pod ever started (creates {creates:?})")),
                _ => problems.push(format!("{name}: ran {} times: {runs:?}", runs.len())),
            }
        }
        if !problems.is_empty() {
            let n = problems.len();
            problems.truncate(20);
            bail!("{n} origins broke \"run once\":\n{}", problems.join("\n"));
        }
        Ok(origins.len())
    }
}

/// The Event reasons on each origin of `ns`, by the origin's UID.
pub async fn event_reasons(env: &Env, ns: &str) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    use k8s_openapi::api::core::v1::Event;
    use kube::Api;
    let api: Api<Event> = Api::namespaced(env.mgmt_client.clone(), ns);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in api.list(&Default::default()).await?.items {
        if let (Some(uid), Some(reason)) = (e.involved_object.uid, e.reason) {
            out.entry(uid).or_default().push(reason);
        }
    }
    Ok(out)
}

/// Reads every worker's logs and checks that each origin of `ns` ran once (see
/// [`Ledger::check_once`]); returns the number checked.
pub async fn check_each_ran_once(
    env: &Env,
    ns: &str,
    expected_starts: &dyn Fn(&Job) -> usize,
) -> anyhow::Result<usize> {
    let origins = crate::origins(env, ns).await?;
    let events = event_reasons(env, ns).await?;
    Ledger::collect(env)
        .await?
        .check_once(&origins, &events, expected_starts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn origin(name: &str, uid: &str) -> Job {
        serde_json::from_value(json!({"metadata": {"name": name, "uid": uid}})).unwrap_or_default()
    }

    fn start(worker: &str, uid: &str, epoch: &str) -> Start {
        Start {
            worker: worker.into(),
            origin_uid: uid.into(),
            epoch: epoch.into(),
            job: "j".into(),
            pod: "p".into(),
        }
    }

    fn create(worker: &str, uid: &str, epoch: &str) -> MirrorCreate {
        MirrorCreate {
            worker: worker.into(),
            origin_uid: uid.into(),
            epoch: epoch.into(),
            name: "j".into(),
            user: "courier".into(),
        }
    }

    fn ledger(starts: Vec<Start>, creates: Vec<MirrorCreate>) -> Ledger {
        let mut l = Ledger::default();
        for s in starts {
            l.starts.entry(s.origin_uid.clone()).or_default().push(s);
        }
        for c in creates {
            l.creates.entry(c.origin_uid.clone()).or_default().push(c);
        }
        l
    }

    fn check(l: &Ledger, events: &[(&str, &str)]) -> Result<usize, String> {
        let mut ev: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (uid, reason) in events {
            ev.entry(uid.to_string())
                .or_default()
                .push(reason.to_string());
        }
        l.check_once(&[origin("a", "u1")], &ev, &|_| 1)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn one_run_passes() {
        let l = ledger(vec![start("w1", "u1", "1")], vec![create("w1", "u1", "1")]);
        assert_eq!(check(&l, &[]), Ok(1));
    }

    /// The break each e2e test guards against: a second run whose mirror was since collected.
    #[test]
    fn a_second_run_is_seen_although_its_mirror_is_gone() {
        let l = ledger(
            vec![start("w1", "u1", "1"), start("w2", "u1", "2")],
            vec![create("w1", "u1", "1"), create("w2", "u1", "2")],
        );
        let e = check(&l, &[("u1", "Redispatched")]).unwrap_err();
        assert!(e.contains("ran 2 times"), "{e}");
    }

    #[test]
    fn a_new_epoch_needs_an_event_saying_why() {
        let l = ledger(vec![start("w2", "u1", "2")], vec![create("w2", "u1", "2")]);
        let e = check(&l, &[]).unwrap_err();
        assert!(e.contains("without a"), "{e}");
        assert_eq!(check(&l, &[("u1", "Redispatched")]), Ok(1));
    }

    #[test]
    fn one_epoch_created_twice_or_pods_missing_or_extra() {
        let twice = ledger(
            vec![start("w1", "u1", "1")],
            vec![create("w1", "u1", "1"), create("w2", "u1", "1")],
        );
        assert!(check(&twice, &[]).unwrap_err().contains("created 2 times"));
        let none = ledger(vec![], vec![create("w1", "u1", "1")]);
        assert!(
            check(&none, &[])
                .unwrap_err()
                .contains("no pod ever started")
        );
        let extra = ledger(
            vec![start("w1", "u1", "1"), start("w1", "u1", "1")],
            vec![create("w1", "u1", "1")],
        );
        assert!(check(&extra, &[]).unwrap_err().contains("2 pod starts"));
    }
}
