//! Shared by the property tests: the API server's Job status rules (kubesim's implementation, not a
//! copy), the recorded worker traces, and a random walk of plausible worker Job statuses.
#![allow(dead_code)]

pub mod actions;

use std::path::PathBuf;
use std::sync::Arc;

use courier_core::placement::ClusterView;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Value, json};

/// The recorded worker traces, `crates/kubesim/testdata/job-traces` (inside the repository); panics when
/// they are missing, so the tests never pass vacuously.
pub fn traces_dir() -> PathBuf {
    let dir = kubesim::testdata::fixtures_dir("job-traces");
    assert!(
        dir.join("01-nonindexed-all-succeed.inputs.json").is_file(),
        "job traces not found at {}",
        dir.display()
    );
    dir
}

/// One recorded scenario: the Job as the worker stored it and every status its controller wrote.
pub struct Trace {
    pub name: String,
    /// `jobAsCreated.spec` (defaulted by a real API server).
    pub spec: Value,
    /// Per watch event: (seconds after create, spec.suspend, status).
    pub events: Vec<(f64, bool, Value)>,
}

pub fn traces() -> Vec<Trace> {
    let dir = traces_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.ends_with(".json") && !n.ends_with(".inputs.json") && n.as_bytes()[0].is_ascii_digit()
        })
        .collect();
    names.sort();
    let read = |name: &str| -> Value {
        let path = dir.join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let traces: Vec<Trace> = names
        .iter()
        .map(|file| {
            let name = file.trim_end_matches(".json").to_string();
            let inputs = read(&format!("{name}.inputs.json"));
            let events = read(file)
                .as_array()
                .expect("a trace is an array of events")
                .iter()
                .filter(|e| e["type"] != "DELETED")
                .map(|e| {
                    (
                        e["t"].as_f64().unwrap_or(0.0),
                        e["suspend"].as_bool().unwrap_or(false),
                        e["status"].clone(),
                    )
                })
                .collect();
            Trace {
                name,
                spec: inputs["jobAsCreated"]["spec"].clone(),
                events,
            }
        })
        .collect();
    assert!(
        traces.len() >= 14,
        "expected the 15 recorded traces, found {}",
        traces.len()
    );
    traces
}

/// A whole Job around `spec` and `status`, as the validator wants it.
pub fn job(spec: &Value, status: &Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job", "namespace": "default", "uid": "origin-uid"},
        "spec": spec, "status": status,
    })
}

/// The API server's verdict on replacing `old`'s status with `new`'s (empty = accepted).
pub fn status_errors(old_job: &Value, new_job: &Value) -> Vec<String> {
    kubesim::kinds::job::validate_job_status_transition(old_job, new_job)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A Ready WorkerCluster of weight 1 with `labels`, no mirrors and no namespace selector.
pub fn cluster_view(name: &str, labels: &[(&str, &str)]) -> ClusterView {
    ClusterView {
        name: name.into(),
        labels: Arc::new(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        weight: 1,
        paused: false,
        ready: true,
        not_ready_since: None,
        current_mirrors: 0,
        degraded: false,
        draining: false,
        duplicate: false,
        namespace_selector: None,
        namespaces: None,
    }
}

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

/// A Job spec of the given shape as a server would have defaulted it.
pub fn spec(
    indexed: bool,
    per_index: bool,
    completions: i32,
    parallelism: i32,
    suspend: bool,
) -> Value {
    let mut spec = json!({
        "parallelism": parallelism, "completions": completions, "backoffLimit": 6,
        "completionMode": if indexed { "Indexed" } else { "NonIndexed" },
        "suspend": suspend, "manualSelector": false, "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "origin-uid"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "origin-uid"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
    });
    if indexed && per_index {
        spec["backoffLimitPerIndex"] = json!(1);
        spec["backoffLimit"] = json!(i32::MAX);
    }
    spec
}

/// A worker's Job: a random walk of statuses its controller could write. Every step is checked
/// against the API server's rules as a worker-side write (except the deliberate pre-1.31 shape), and
/// dropped if the worker's own API server would have rejected it.
pub struct Walker {
    pub job: Value,
    /// Writes `Complete`/`Failed` without the interim condition, like a pre-1.31 worker.
    pub legacy: bool,
    pod: u32,
}

fn cond(type_: &str, status: &str, reason: &str, now: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": format!("{type_} {reason}"),
           "lastProbeTime": now, "lastTransitionTime": now})
}

impl Walker {
    pub fn new(spec: Value, legacy: bool) -> Self {
        Self {
            job: job(&spec, &json!({})),
            legacy,
            pod: 0,
        }
    }

    pub fn status(&self) -> JobStatus {
        serde_json::from_value(self.job["status"].clone()).expect("walker status is a JobStatus")
    }

    pub fn finished(&self) -> bool {
        has_true(&self.job["status"], "Complete") || has_true(&self.job["status"], "Failed")
    }

    pub fn suspended(&self) -> bool {
        self.job["spec"]["suspend"] == json!(true)
    }

    /// Sets the worker Job's `spec.suspend` (drift from the origin, or a worker-side suspend) and
    /// writes the status its controller would.
    pub fn set_suspend(&mut self, suspend: bool, now: Timestamp) {
        if self.suspended() == suspend || self.finished() {
            return;
        }
        self.job["spec"]["suspend"] = json!(suspend);
        let now = now.to_string();
        let mut s = self.job["status"].clone();
        if suspend {
            s.as_object_mut().expect("status").remove("startTime");
            s["active"] = json!(0);
            s["ready"] = json!(0);
            set_cond(&mut s, cond("Suspended", "True", "JobSuspended", &now));
        } else {
            s["startTime"] = json!(now);
            s["active"] = json!(self.parallelism());
            set_cond(&mut s, cond("Suspended", "False", "JobResumed", &now));
        }
        self.try_write(s, false);
    }

    fn parallelism(&self) -> i64 {
        self.job["spec"]["parallelism"].as_i64().unwrap_or(1)
    }

    fn completions(&self) -> i64 {
        self.job["spec"]["completions"].as_i64().unwrap_or(1)
    }

    fn indexed(&self) -> bool {
        self.job["spec"]["completionMode"] == json!("Indexed")
    }

    fn per_index(&self) -> bool {
        self.job["spec"].get("backoffLimitPerIndex").is_some()
    }

    /// Applies walk step `op` (with `arg` as its random parameter) at time `now`; returns whether the
    /// status changed.
    pub fn step(&mut self, op: u8, arg: u8, now: Timestamp) -> bool {
        if self.finished() {
            return false;
        }
        let now_s = now.to_string();
        let mut s = self.job["status"].clone();
        let int = |s: &Value, k: &str| s[k].as_i64().unwrap_or(0);
        let arg = i64::from(arg);
        let mut unchecked = false;
        match op % 10 {
            0 => {
                if self.suspended() {
                    return false;
                }
                if s.get("startTime").is_none() {
                    s["startTime"] = json!(now_s);
                }
                s["active"] = json!(1 + arg % self.parallelism());
                s["ready"] = json!(0);
                s["terminating"] = json!(0);
                s["uncountedTerminatedPods"] = json!({});
                if self.per_index() && s.get("failedIndexes").is_none() {
                    s["failedIndexes"] = json!("");
                }
            }
            1 => s["ready"] = json!(arg % (int(&s, "active") + 1)),
            2 => {
                if self.indexed() {
                    let Some(i) = self.free_index(&s) else {
                        return false;
                    };
                    s["completedIndexes"] =
                        json!(add_index(s["completedIndexes"].as_str().unwrap_or(""), i));
                }
                s["succeeded"] = json!(int(&s, "succeeded") + 1);
                s["active"] = json!((int(&s, "active") - 1).max(0));
                s["ready"] = json!(int(&s, "ready").min(int(&s, "active")));
            }
            3 => {
                if self.per_index() && arg % 2 == 0 {
                    let Some(i) = self.free_index(&s) else {
                        return false;
                    };
                    s["failedIndexes"] =
                        json!(add_index(s["failedIndexes"].as_str().unwrap_or(""), i));
                }
                s["failed"] = json!(int(&s, "failed") + 1 + arg % 2);
            }
            4 => {
                self.pod += 1;
                let key = if arg % 2 == 0 { "succeeded" } else { "failed" };
                if arg % 3 == 0 {
                    s["uncountedTerminatedPods"] = json!({});
                } else {
                    s["uncountedTerminatedPods"] =
                        json!({ key: [format!("pod-uid-{}", self.pod)] });
                }
            }
            5 => {
                if has_true(&s, "FailureTarget") || has_true(&s, "SuccessCriteriaMet") {
                    return false;
                }
                set_cond(
                    &mut s,
                    cond("SuccessCriteriaMet", "True", "CompletionsReached", &now_s),
                );
                s["active"] = json!(0);
                s["ready"] = json!(0);
                s["terminating"] = json!(arg % 2);
            }
            6 => {
                s["active"] = json!(0);
                s["ready"] = json!(0);
                s["terminating"] = json!(0);
                s["uncountedTerminatedPods"] = json!({});
                if s.get("startTime").is_none() {
                    s["startTime"] = json!(now_s);
                }
                if has_true(&s, "SuccessCriteriaMet") {
                    set_cond(
                        &mut s,
                        cond("Complete", "True", "CompletionsReached", &now_s),
                    );
                    s["completionTime"] = json!(now_s);
                } else if has_true(&s, "FailureTarget") {
                    set_cond(
                        &mut s,
                        cond("Failed", "True", "BackoffLimitExceeded", &now_s),
                    );
                } else if self.legacy {
                    // A pre-1.31 worker: terminal condition without the interim one.
                    unchecked = true;
                    if arg % 2 == 0 {
                        let mut c = cond("Complete", "True", "", &now_s);
                        c.as_object_mut().expect("condition").remove("reason");
                        set_cond(&mut s, c);
                        s["completionTime"] = json!(now_s);
                    } else {
                        set_cond(
                            &mut s,
                            cond("Failed", "True", "BackoffLimitExceeded", &now_s),
                        );
                    }
                } else {
                    return false;
                }
            }
            7 => {
                if has_true(&s, "FailureTarget") || has_true(&s, "SuccessCriteriaMet") {
                    return false;
                }
                let reason = [
                    "BackoffLimitExceeded",
                    "DeadlineExceeded",
                    "PodFailurePolicy",
                ][(arg % 3) as usize];
                set_cond(&mut s, cond("FailureTarget", "True", reason, &now_s));
                s["active"] = json!(0);
                s["ready"] = json!(0);
                s["terminating"] = json!(arg % 3);
            }
            8 => {
                let suspend = !self.suspended();
                self.set_suspend(suspend, now);
                return true;
            }
            _ => {
                let status = if arg % 2 == 0 { "True" } else { "False" };
                set_cond(
                    &mut s,
                    cond("example.com/Custom", status, "Because", &now_s),
                );
            }
        }
        self.try_write(s, unchecked)
    }

    fn free_index(&self, s: &Value) -> Option<i64> {
        let used = |k: &str| {
            kubesim::kinds::job::indexes::IndexSet::parse_lenient(s[k].as_str().unwrap_or(""))
        };
        let (ci, fi) = (used("completedIndexes")?, used("failedIndexes")?);
        (0..self.completions()).find(|&i| {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            !ci.contains(i) && !fi.contains(i)
        })
    }

    fn try_write(&mut self, status: Value, unchecked: bool) -> bool {
        if status == self.job["status"] {
            return false;
        }
        let mut next = self.job.clone();
        next["status"] = status;
        if !unchecked && !status_errors(&self.job, &next).is_empty() {
            return false;
        }
        self.job = next;
        true
    }
}

fn add_index(list: &str, i: i64) -> String {
    let mut set = kubesim::kinds::job::indexes::IndexSet::parse_lenient(list).unwrap_or_default();
    let i = i32::try_from(i).unwrap_or(i32::MAX);
    set.insert_range(i, i);
    set.to_string()
}

pub fn has_true(status: &Value, type_: &str) -> bool {
    status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

fn set_cond(status: &mut Value, c: Value) {
    let conditions = status
        .as_object_mut()
        .expect("status object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    let list = conditions.as_array_mut().expect("conditions array");
    match list.iter_mut().find(|e| e["type"] == c["type"]) {
        Some(existing) => *existing = c,
        None => list.push(c),
    }
}
