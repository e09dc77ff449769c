//! The Pod objects of a simulated Job's pods, shaped like the real ones (pure functions):
//!
//! - the object the Job controller creates (`GetPodFromTemplate` + `job_controller.go`): the template's
//!   labels and annotations, `generateName` `<job>-` (Indexed: `<job>-<index>-`, shortened like
//!   `podGenerateNameWithIndex`), the completion index as annotation and label, hostname
//!   `<job>-<index>` and the `JOB_COMPLETION_INDEX` env var for Indexed Jobs, the per-index failure
//!   count annotations with `backoffLimitPerIndex`, the `batch.kubernetes.io/job-tracking` finalizer,
//!   and an ownerReference to the Job with `controller` and `blockOwnerDeletion`. The scheduler's
//!   binding is folded into the create (`spec.nodeName` is set at once: kubesim binds at once);
//! - the `.status` a kubelet reports over the simulated pod's life: Pending (ContainerCreating),
//!   Running and Ready, Succeeded (`Completed`) / Failed (`Error`, exit code), CrashLoopBackOff
//!   between restarts with the previous container in `lastState`, DisruptionTarget after an
//!   eviction. Container statuses are sorted by name, like the kubelet's.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::jobctl::PodInfo;
use crate::json::{get_arr, get_i64, get_obj, get_str, meta_str};
use crate::kinds::pod::{TRACKING_FINALIZER, qos_class};

/// The node every simulated pod is bound to.
pub const NODE_NAME: &str = "kubesim-node";
const HOST_IP: &str = "172.18.0.2";
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";
/// `names.MaxGeneratedNameLength`.
const MAX_GENERATED_NAME: usize = 58;

/// `metav1.Time` (whole seconds).
fn t(ts: Timestamp) -> String {
    crate::time::format(ts)
}

/// `podGenerateNameWithIndex` / `getPodsPrefix`.
fn generate_name(job: &str, index: Option<i32>) -> String {
    match index {
        Some(i) => {
            let append = format!("-{i}-");
            let prefix = format!("{job}{append}");
            if prefix.len() > MAX_GENERATED_NAME {
                let keep = MAX_GENERATED_NAME
                    .saturating_sub(append.len())
                    .min(job.len());
                format!("{}{append}", &job[..keep])
            } else {
                prefix
            }
        }
        None => format!("{job}-"),
    }
}

/// The Pod the Job controller creates for `pod` (a `v1` object body, before defaulting).
pub fn new_pod(job: &Value, pod: &PodInfo) -> Value {
    let job_name = meta_str(job, "name");
    // Read in place: only the parts the pod takes are copied, each once.
    let template = job.pointer("/spec/template").unwrap_or(&Value::Null);
    let mut labels = get_obj(template, &["metadata", "labels"])
        .cloned()
        .unwrap_or_default();
    let mut annotations = get_obj(template, &["metadata", "annotations"])
        .cloned()
        .unwrap_or_default();
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(i) = pod.index {
        annotations.insert(COMPLETION_INDEX.into(), json!(i.to_string()));
        labels.insert(COMPLETION_INDEX.into(), json!(i.to_string()));
        if let Some(s) = spec.as_object_mut() {
            if s.get("hostname")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                s.insert("hostname".into(), json!(format!("{job_name}-{i}")));
            }
            for list in ["initContainers", "containers"] {
                for c in s
                    .get_mut(list)
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    add_index_env(c);
                }
            }
        }
    }
    if job
        .pointer("/spec/backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null())
    {
        annotations.insert(
            INDEX_FAILURE_COUNT.into(),
            json!(pod.index_failure_count.to_string()),
        );
        if pod.index_ignored_failure_count > 0 {
            annotations.insert(
                INDEX_IGNORED_FAILURE_COUNT.into(),
                json!(pod.index_ignored_failure_count.to_string()),
            );
        }
    }
    if let Some(s) = spec.as_object_mut() {
        s.insert("nodeName".into(), json!(NODE_NAME));
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(pod.name));
    meta.insert(
        "generateName".into(),
        json!(generate_name(job_name, pod.index)),
    );
    meta.insert("namespace".into(), json!(meta_str(job, "namespace")));
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    meta.insert("finalizers".into(), json!([TRACKING_FINALIZER]));
    meta.insert(
        "ownerReferences".into(),
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
            "uid": meta_str(job, "uid"), "controller": true, "blockOwnerDeletion": true}]),
    );
    // Moved in: `json!` would copy them (it serialises an interpolated value).
    let mut obj = json!({"apiVersion": "v1", "kind": "Pod"});
    obj["metadata"] = Value::Object(meta);
    obj["spec"] = spec;
    obj
}

/// `{key: value}`, with `value` moved in (`json!` would copy it).
fn member(key: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.into(), value);
    Value::Object(m)
}

/// `addCompletionIndexEnvVariable` (PodIndexLabel on: the value comes from the label).
fn add_index_env(c: &mut Value) {
    let Some(c) = c.as_object_mut() else { return };
    let env = c.entry("env").or_insert_with(|| json!([]));
    if let Some(env) = env.as_array_mut()
        && !env
            .iter()
            .any(|e| e.get("name").and_then(Value::as_str) == Some("JOB_COMPLETION_INDEX"))
    {
        env.push(
            json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
            {"fieldPath": format!("metadata.labels['{COMPLETION_INDEX}']")}}}),
        );
    }
}

/// A short stable hex digest (container IDs, image digests, pod IPs).
fn digest(parts: &[&str]) -> String {
    let mut data = Vec::new();
    for p in parts {
        data.extend_from_slice(p.as_bytes());
        data.push(0);
    }
    // Hex by hand: a `format!` per byte was most of a kubelet status's cost.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in crate::kinds::common::sha256(&data) {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// The image reference as the container runtime reports it (`busybox` = `docker.io/library/busybox:latest`).
fn full_image(image: &str) -> String {
    let (name, tag) = match image.rsplit_once('@') {
        Some(_) => (image.to_string(), String::new()),
        None => {
            let last = image.rsplit('/').next().unwrap_or(image);
            if last.contains(':') {
                (image.to_string(), String::new())
            } else {
                (image.to_string(), ":latest".into())
            }
        }
    };
    let first = name.split('/').next().unwrap_or("");
    let with_registry = if !name.contains('/') {
        format!("docker.io/library/{name}")
    } else if first.contains('.') || first.contains(':') || first == "localhost" {
        name
    } else {
        format!("docker.io/{name}")
    };
    format!("{with_registry}{tag}")
}

fn image_id(image: &str) -> String {
    let full = full_image(image);
    let repo = full
        .split('@')
        .next()
        .map(|r| match r.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => repo,
            _ => r,
        })
        .unwrap_or(&full)
        .to_string();
    format!("{repo}@sha256:{}", digest(&[&full]))
}

/// The runtime's container ID of `container` in `pod` (`run` = which run of a restarting container).
pub fn container_id(pod_uid: &str, container: &str, run: i32) -> String {
    format!(
        "containerd://{}",
        digest(&[pod_uid, container, &run.to_string()])
    )
}

fn pod_ip(uid: &str) -> String {
    let d = digest(&[uid]);
    let b = |i: usize| u8::from_str_radix(&d[i..i + 2], 16).unwrap_or(1);
    format!("10.244.{}.{}", b(0), b(2).max(2))
}

fn terminated(code: i32, started: Option<Timestamp>, finished: Timestamp, id: &str) -> Value {
    let mut v = json!({"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
        "startedAt": started.map(t), "finishedAt": t(finished)});
    if !id.is_empty() {
        v["containerID"] = json!(id);
    }
    v
}

/// [`t`] of the few instants one status repeats (creation, readiness), each formatted once.
#[derive(Default)]
struct Times(Vec<(Timestamp, String)>);

impl Times {
    fn of(&mut self, ts: Timestamp) -> String {
        if let Some((_, s)) = self.0.iter().find(|(at, _)| *at == ts) {
            return s.clone();
        }
        let s = t(ts);
        self.0.push((ts, s.clone()));
        s
    }
}

fn condition(kind: &str, ok: bool, at: String, reason: Option<(&str, String)>) -> Value {
    let mut c = json!({"type": kind, "status": if ok { "True" } else { "False" },
        "lastProbeTime": null});
    c["lastTransitionTime"] = Value::String(at);
    if let Some((r, m)) = reason {
        c["reason"] = json!(r);
        if !m.is_empty() {
            c["message"] = json!(m);
        }
    }
    c
}

/// Whether [`pod_status`] of the same object gives the same status for `a` and `b`: they agree on
/// every field it reads (the controller's own bookkeeping, such as the tracking finalizer, the
/// ordinal or the index failure counts, is not read). Destructured whole, so a field added to
/// `PodInfo` has to be placed on one side or the other here.
pub fn same_status_inputs(a: &PodInfo, b: &PodInfo) -> bool {
    let PodInfo {
        name,
        uid,
        ordinal: _,
        index: _,
        phase,
        ready,
        deleting: _,
        tracking_finalizer: _,
        exit_code,
        created,
        started_at,
        finished_at,
        deleted_at,
        restarts,
        last_run,
        disruption_target,
        index_failure_count: _,
        index_ignored_failure_count: _,
    } = a;
    *name == b.name
        && *uid == b.uid
        && *phase == b.phase
        && *ready == b.ready
        && *exit_code == b.exit_code
        && *created == b.created
        && *started_at == b.started_at
        && *finished_at == b.finished_at
        && *deleted_at == b.deleted_at
        && *restarts == b.restarts
        && *last_run == b.last_run
        && *disruption_target == b.disruption_target
}

/// The `.status` the kubelet reports for `pod`, whose object is `obj`. Reads of `pod` only the
/// fields [`same_status_inputs`] compares, and of `obj` only its namespace, generation and spec.
pub fn pod_status(obj: &Value, pod: &PodInfo) -> Value {
    // Read in place: the spec is the larger part of a pod, and only its containers are read.
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let ns = meta_str(obj, "namespace");
    let terminal = matches!(pod.phase, "Succeeded" | "Failed");
    let mut containers: Vec<(String, String)> = get_arr(spec, &["containers"])
        .into_iter()
        .flatten()
        .map(|c| {
            (
                get_str(c, &["name"]).unwrap_or("").to_string(),
                get_str(c, &["image"]).unwrap_or("").to_string(),
            )
        })
        .collect();
    containers.sort();
    let run = pod.restarts;
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(name, image)| {
            let id = if pod.started_at.is_some() || (terminal && pod.exit_code.is_some()) {
                container_id(&pod.uid, name, run)
            } else {
                String::new()
            };
            let state = match (pod.phase, pod.started_at, pod.exit_code) {
                (_, _, Some(code)) if terminal => member(
                    "terminated",
                    terminated(
                        code,
                        pod.started_at,
                        pod.finished_at.unwrap_or(pod.created),
                        &id,
                    ),
                ),
                (_, _, None) if terminal => json!({"terminated": {"exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated",
                    "startedAt": null, "finishedAt": t(pod.finished_at.unwrap_or(pod.created))}}),
                (_, Some(s), _) => json!({"running": {"startedAt": t(s)}}),
                _ if pod.last_run.is_some() => json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": format!("back-off {}s restarting failed container={name} pod={}_{ns}({})",
                        (10i64 << (pod.restarts - 1).clamp(0, 5)).min(300), pod.name, pod.uid)}}),
                _ => json!({"waiting": {"reason": "ContainerCreating"}}),
            };
            let last_state = match pod.last_run {
                Some((s, f, code)) => member(
                    "terminated",
                    terminated(code, Some(s), f, &container_id(&pod.uid, name, run - 1)),
                ),
                None => json!({}),
            };
            let mut cs = json!({"name": name,
                "ready": pod.ready, "restartCount": pod.restarts,
                "image": full_image(image), "imageID": if id.is_empty() { String::new() } else { image_id(image) },
                "started": pod.started_at.is_some() && !terminal});
            cs["state"] = state;
            cs["lastState"] = last_state;
            if !id.is_empty() {
                cs["containerID"] = json!(id);
            }
            cs
        })
        .collect();
    let unready: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    let not_ready = if terminal {
        Some(("PodCompleted", String::new()))
    } else {
        Some((
            "ContainersNotReady",
            format!("containers with unready status: [{}]", unready.join(" ")),
        ))
    };
    let started_or_done = pod.started_at.or(pod.finished_at);
    let ready_at = if pod.ready {
        pod.started_at.unwrap_or(pod.created)
    } else {
        pod.finished_at
            .or(pod.last_run.map(|r| r.1))
            .unwrap_or(pod.created)
    };
    let mut times = Times::default();
    let mut conditions = Vec::new();
    if pod.disruption_target {
        conditions.push(condition(
            "DisruptionTarget",
            true,
            times.of(pod.deleted_at.unwrap_or(pod.created)),
            Some(("EvictionByEvictionAPI", "Eviction API: evicting".into())),
        ));
    }
    conditions.push(condition(
        "PodReadyToStartContainers",
        started_or_done.is_some() && !(terminal && pod.deleted_at.is_some()),
        times.of(started_or_done.unwrap_or(pod.created)),
        None,
    ));
    conditions.push(condition("Initialized", true, times.of(pod.created), None));
    for kind in ["Ready", "ContainersReady"] {
        conditions.push(condition(
            kind,
            pod.ready,
            times.of(ready_at),
            (!pod.ready).then(|| not_ready.clone()).flatten(),
        ));
    }
    conditions.push(condition("PodScheduled", true, times.of(pod.created), None));
    let mut status = json!({"phase": pod.phase,
        "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
        "startTime": times.of(pod.created), "qosClass": qos_class(spec)});
    status["conditions"] = Value::Array(conditions);
    status["containerStatuses"] = Value::Array(statuses);
    if started_or_done.is_some() {
        let ip = pod_ip(&pod.uid);
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(g) = get_i64(obj, &["metadata", "generation"]) {
        status["observedGeneration"] = json!(g);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_images() {
        assert_eq!(generate_name("job", Some(3)), "job-3-");
        assert_eq!(generate_name("job", None), "job-");
        let long = "x".repeat(60);
        assert_eq!(generate_name(&long, Some(12)).len(), MAX_GENERATED_NAME);
        assert_eq!(full_image("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(full_image("org/app:1"), "docker.io/org/app:1");
        assert_eq!(full_image("ghcr.io/o/a"), "ghcr.io/o/a:latest");
        assert!(image_id("busybox").starts_with("docker.io/library/busybox@sha256:"));
    }

    /// The hand-made hex is the formatted one.
    #[test]
    fn digests_are_lowercase_hex_of_the_sha256() {
        assert_eq!(
            digest(&[]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        for parts in [
            &["u-1"][..],
            &["u-1", "c", "0"],
            &["docker.io/library/busybox:latest"],
        ] {
            let mut data = Vec::new();
            for p in parts {
                data.extend_from_slice(p.as_bytes());
                data.push(0);
            }
            let formatted: String = crate::kinds::common::sha256(&data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(digest(parts), formatted);
        }
    }

    fn info() -> PodInfo {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        PodInfo {
            name: "j-abcde".into(),
            uid: "u-1".into(),
            ordinal: 0,
            index: Some(0),
            phase: "Running",
            ready: true,
            deleting: false,
            tracking_finalizer: true,
            exit_code: None,
            created: at(0),
            started_at: Some(at(1)),
            finished_at: None,
            deleted_at: None,
            restarts: 1,
            last_run: Some((at(0), at(1), 2)),
            disruption_target: false,
            index_failure_count: 0,
            index_ignored_failure_count: 0,
        }
    }

    /// Broken on purpose once: with `deleted_at` left out of `same_status_inputs` it fails.
    #[test]
    fn the_status_inputs_are_what_pod_status_reads() {
        let obj = json!({"metadata": {"namespace": "default", "generation": 1},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let base = info();
        let at = Timestamp::from_second(1_800_000_100).unwrap();
        let done = PodInfo {
            phase: "Failed",
            ready: false,
            exit_code: Some(1),
            finished_at: Some(at),
            ..info()
        };
        let backing_off = PodInfo {
            ready: false,
            started_at: None,
            ..info()
        };
        // Pairs that differ in the named field only: the status differs, and so do the inputs.
        let read: Vec<(&str, &PodInfo, PodInfo)> = vec![
            (
                "name",
                &backing_off,
                PodInfo {
                    name: "j-zzzzz".into(),
                    ..backing_off.clone()
                },
            ),
            (
                "uid",
                &base,
                PodInfo {
                    uid: "u-2".into(),
                    ..info()
                },
            ),
            (
                "phase",
                &base,
                PodInfo {
                    phase: "Pending",
                    ..info()
                },
            ),
            (
                "ready",
                &base,
                PodInfo {
                    ready: false,
                    ..info()
                },
            ),
            (
                "exit_code",
                &done,
                PodInfo {
                    exit_code: Some(2),
                    ..done.clone()
                },
            ),
            (
                "created",
                &base,
                PodInfo {
                    created: at,
                    ..info()
                },
            ),
            (
                "started_at",
                &base,
                PodInfo {
                    started_at: Some(at),
                    ..info()
                },
            ),
            (
                "finished_at",
                &done,
                PodInfo {
                    finished_at: Some(at + jiff::SignedDuration::from_secs(1)),
                    ..done.clone()
                },
            ),
            (
                "deleted_at",
                &done,
                PodInfo {
                    deleted_at: Some(at),
                    ..done.clone()
                },
            ),
            (
                "restarts",
                &base,
                PodInfo {
                    restarts: 3,
                    ..info()
                },
            ),
            (
                "last_run",
                &base,
                PodInfo {
                    last_run: None,
                    ..info()
                },
            ),
            (
                "disruption_target",
                &base,
                PodInfo {
                    disruption_target: true,
                    ..info()
                },
            ),
        ];
        for (field, one, other) in &read {
            assert_ne!(pod_status(&obj, other), pod_status(&obj, one), "{field}");
            assert!(!same_status_inputs(other, one), "{field}");
        }
        // The fields left out do not change it.
        let ignored = PodInfo {
            ordinal: 7,
            index: None,
            deleting: true,
            tracking_finalizer: false,
            index_failure_count: 2,
            index_ignored_failure_count: 1,
            ..info()
        };
        assert!(same_status_inputs(&ignored, &base));
        assert_eq!(pod_status(&obj, &ignored), pod_status(&obj, &base));
    }
}
