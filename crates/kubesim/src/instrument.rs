//! What tests observe Courier's promises with ("never run a Job twice, lose nothing"): every pod start
//! of a Job carrying `courier.dev/origin-uid`, counted per origin UID across the whole run (Jobs long
//! deleted included), and every object ever created. Both are always on and cheap (one short lock
//! per create, one per pod start of a labelled Job). Read through `Sim::pod_starts`,
//! `Sim::pod_start_details`, `Sim::creates`, or the admin endpoint (`GET /runs`, `GET /creates`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::Timestamp;
use serde::Serialize;

use crate::store::Stored;

/// The label naming a mirror's origin Job.
pub const ORIGIN_UID_LABEL: &str = "courier.dev/origin-uid";
/// The label naming a mirror's placement epoch.
pub const EPOCH_LABEL: &str = "courier.dev/epoch";

/// One simulated pod start of a Job labelled with an origin UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStart {
    pub origin_uid: String,
    /// The Job's `courier.dev/epoch` label ("" when absent).
    pub epoch: String,
    pub namespace: String,
    pub job: String,
    pub pod: String,
    /// The completion index (Indexed Jobs).
    pub index: Option<i32>,
    /// When its containers started (RFC 3339, nanoseconds).
    pub time: String,
}

/// One object created through the API (by a client or an in-process controller).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    /// `jobs`, `pods`, ... (`<plural>.<group>` outside the core and batch groups).
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// The authenticated user (in-process controllers have their component's identity).
    pub user: String,
    pub time: String,
}

#[derive(Default)]
pub struct Instruments {
    starts: Mutex<Vec<PodStart>>,
    creates: Mutex<Vec<Created>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a resource is named in the create log: the plural, qualified by the group unless it is the
/// core group or `batch` (so `jobs`, `pods`, `leases.coordination.k8s.io`).
pub fn resource_name(group: &str, plural: &str) -> String {
    if group.is_empty() || group == "batch" {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl Instruments {
    pub fn record_start(&self, s: PodStart) {
        lock(&self.starts).push(s);
    }

    /// Pod starts per origin UID.
    pub fn pod_starts(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for s in lock(&self.starts).iter() {
            *out.entry(s.origin_uid.clone()).or_insert(0) += 1;
        }
        out
    }

    /// Every pod start, in order.
    pub fn pod_start_details(&self) -> Vec<PodStart> {
        lock(&self.starts).clone()
    }

    /// Notes a created object, from what its stored form keeps outside the JSON (not parsed again).
    pub fn record_create(&self, group: &str, plural: &str, obj: &Stored, user: &str) {
        lock(&self.creates).push(Created {
            resource: resource_name(group, plural),
            namespace: obj.namespace().to_string(),
            name: obj.name().to_string(),
            uid: obj.uid().to_string(),
            labels: obj
                .labels()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            user: user.to_string(),
            time: crate::time::format_nano(Timestamp::now()),
        });
    }

    /// Every object created, in order; only those of `resource` when given (`jobs`).
    pub fn creates(&self, resource: Option<&str>) -> Vec<Created> {
        lock(&self.creates)
            .iter()
            .filter(|c| resource.is_none_or(|r| c.resource == r))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_and_filters() {
        let i = Instruments::default();
        let start = |uid: &str, pod: &str| PodStart {
            origin_uid: uid.into(),
            epoch: "1".into(),
            namespace: "d".into(),
            job: "j".into(),
            pod: pod.into(),
            index: None,
            time: String::new(),
        };
        i.record_start(start("a", "p1"));
        i.record_start(start("a", "p2"));
        i.record_start(start("b", "p3"));
        assert_eq!(
            i.pod_starts(),
            BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)])
        );
        i.record_create(
            "batch",
            "jobs",
            &Stored::new(2, json!({"metadata": {"name": "j", "labels": {"x": "y"}}})),
            "alice",
        );
        i.record_create(
            "coordination.k8s.io",
            "leases",
            &Stored::new(3, json!({"metadata": {"name": "l"}})),
            "bob",
        );
        let jobs = i.creates(Some("jobs"));
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            (jobs[0].user.as_str(), jobs[0].labels["x"].as_str()),
            ("alice", "y")
        );
        assert_eq!(i.creates(None)[1].resource, "leases.coordination.k8s.io");
    }
}
