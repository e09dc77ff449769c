//! core/v1 Pods, modelled on the real server's `podStrategy` / `podStatusStrategy`
//! (`pkg/registry/core/pod/strategy.go`) and the admission plugins every cluster runs on a pod create:
//!
//! | hook | real server |
//! |---|---|
//! | `decode` | quantities canonicalised by the codec (as for a Job's template) |
//! | `default` | `SetDefaults_Pod` (+ `SetDefaults_PodSpec`, `enableServiceLinks: true`) |
//! | `prepare_for_create` | `PrepareForCreate` (status `{phase: Pending, qosClass}`, generation 1, `SchedulingGated`) plus the mutating admission plugins `Priority` (priority 0, `PreemptLowerPriority`), `DefaultTolerationSeconds` (not-ready/unreachable for 300 s) and `ServiceAccount` (`default`) |
//! | `validate_create` | `ValidatePodCreate` minus ObjectMeta: `ValidatePodSpec`, no ephemeral containers |
//! | `prepare_for_update` / `validate_update` | status kept; generation +1 on a spec change; `ValidatePodUpdate`'s "pod updates may not change fields other than ..." |
//! | `prepare_for_status_update` | spec kept from the stored pod |
//! | `field_value` / `convert_field_label` | `PodToSelectableFields` and the v1 field-label conversion (`spec.host` = `spec.nodeName`) |
//! | `on_delete` / `pending_finalization` | `CheckGracefulDelete`: a scheduled, non-terminal pod is deleted gracefully (`deletionTimestamp` = now + grace, `deletionGracePeriodSeconds`) and stays until someone (the kubelet) deletes it with grace 0 |
//! | `table` | `printPod` |
//!
//! Not modelled: the `ServiceAccount` plugin's token volume and its "service account not found"
//! refusal (kubesim serves no ServiceAccounts), `ValidatePodStatusUpdate`, and the `cmp.Diff` of the
//! spec the real update refusal appends after its first line.

use serde_json::{Map, Value, json};

use super::common;
use super::job::defaults::default_pod_spec;
use super::job::podspec::validate_pod_spec;
use super::{DeleteAction, ResourceInfo, Strategy, TableSpec, Warnings};
use crate::errors::{ApiError, FieldError, FieldErrors};
use crate::json::{ensure_obj, get, get_arr, get_i64, get_str, meta_str};
use crate::validation::semantic_eq;

/// The Job controller's finalizer on the pods it tracks.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// Fields `ValidatePodUpdate` lets an update change, as its refusal lists them.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The selectable fields of a pod (`PodToSelectableFields`) besides `metadata.name`/`namespace`.
const SELECTABLE: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

pub struct PodStrategy {
    info: ResourceInfo,
}

impl Default for PodStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl PodStrategy {
    pub fn new() -> Self {
        Self {
            // As discovery lists it (discovery.json, GET /api/v1).
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "Pod".into(),
                plural: "pods".into(),
                singular: "pod".into(),
                namespaced: true,
                short_names: vec!["po".into()],
                categories: vec!["all".into()],
                verbs: common::standard_verbs(),
                status_subresource: true,
                storage_version_hash: Some("xPOwRZ+Yhw8=".into()),
            },
        }
    }
}

/// `qos.GetPodQOS`, for the common cases: no cpu/memory requests or limits anywhere = BestEffort;
/// every container with cpu and memory limits equal to its requests = Guaranteed; else Burstable.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| get_arr(spec, &[k]).into_iter().flatten())
        .collect();
    let res = |c: &Value, kind: &str, r: &str| -> Option<String> {
        get(c, &["resources", kind, r])
            .filter(|v| !v.is_null())
            .map(|v| v.to_string())
    };
    let any = containers.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|k| ["cpu", "memory"].iter().any(|r| res(c, k, r).is_some()))
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = res(c, "limits", r);
            let request = res(c, "requests", r).or_else(|| limit.clone());
            limit.is_some() && limit == request
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The admission plugins a pod create passes through (`Priority`, `DefaultTolerationSeconds`,
/// `ServiceAccount`), applied to `spec`.
fn admit_create(spec: &mut Map<String, Value>) {
    if spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec.entry("priority").or_insert(json!(0));
    }
    spec.entry("preemptionPolicy")
        .or_insert(json!("PreemptLowerPriority"));
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    if let Some(t) = tolerations {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let present = t.iter().any(|x| {
                x.get("key").and_then(Value::as_str) == Some(key)
                    || (x.get("operator").and_then(Value::as_str) == Some("Exists")
                        && x.get("key")
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty))
            });
            if !present {
                t.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
}

/// `ValidatePodUpdate`'s spec rule: everything but the updatable fields stays as it was.
fn validate_spec_update(new: &Value, old: &Value) -> FieldErrors {
    let (Some(new_spec), Some(old_spec)) = (new.get("spec"), old.get("spec")) else {
        return Vec::new();
    };
    let mut munged = new_spec.clone();
    for list in ["containers", "initContainers"] {
        let olds = get_arr(old_spec, &[list]).cloned().unwrap_or_default();
        if let Some(cs) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (i, c) in cs.iter_mut().enumerate() {
                if let (Some(o), Some(m)) = (olds.get(i), c.as_object_mut()) {
                    match o.get("image") {
                        Some(img) => m.insert("image".into(), img.clone()),
                        None => m.remove("image"),
                    };
                }
            }
        }
    }
    if let Some(m) = munged.as_object_mut() {
        for k in ["activeDeadlineSeconds", "terminationGracePeriodSeconds"] {
            match old_spec.get(k) {
                Some(v) => m.insert(k.into(), v.clone()),
                None => m.remove(k),
            };
        }
        // Additions to tolerations are allowed: every old toleration must still be there.
        let old_t = get_arr(old_spec, &["tolerations"])
            .cloned()
            .unwrap_or_default();
        let new_t = get_arr(new_spec, &["tolerations"])
            .cloned()
            .unwrap_or_default();
        if old_t.iter().all(|t| new_t.contains(t)) {
            match old_spec.get("tolerations") {
                Some(v) => m.insert("tolerations".into(), v.clone()),
                None => m.remove("tolerations"),
            };
        }
    }
    if semantic_eq(Some(&munged), Some(old_spec)) {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        "spec",
        format!("pod updates may not change fields other than {UPDATABLE}"),
    )]
}

impl Strategy for PodStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        if let Some(spec) = obj.get_mut("spec") {
            super::job::canonicalize_pod_spec_quantities(spec).map_err(|e| {
                ApiError::bad_request(format!(
                    "Pod in version \"v1\" cannot be handled as a Pod: {e}"
                ))
            })?;
        }
        Ok(Vec::new())
    }

    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            default_pod_spec(spec);
            spec.entry("enableServiceLinks").or_insert(json!(true));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let gated = get_arr(obj, &["spec", "schedulingGates"]).is_some_and(|g| !g.is_empty());
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            admit_create(spec);
        }
        let qos = obj.get("spec").map_or("BestEffort", qos_class);
        let mut status = json!({"phase": "Pending", "qosClass": qos});
        if gated {
            status["conditions"] = json!([{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                "lastTransitionTime": crate::time::now_string(), "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates"}]);
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), status);
        }
        if let Some(meta) = ensure_obj(obj, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = validate_pod_spec(spec, "spec");
        if get_arr(spec, &["ephemeralContainers"]).is_some_and(|a| !a.is_empty()) {
            errs.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            ));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        common::keep_stored(new, old, "status");
        let changed = !semantic_eq(new.get("spec"), old.get("spec"));
        common::next_generation(new, old, changed);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        let mut errs = validate_pod_spec(new.get("spec").unwrap_or(&Value::Null), "spec");
        errs.extend(validate_spec_update(new, old));
        errs
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        common::keep_stored(new, old, "spec");
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        if !SELECTABLE.contains(&field) {
            return None;
        }
        Some(match field {
            "spec.hostNetwork" => {
                if get(obj, &["spec", "hostNetwork"]).and_then(Value::as_bool) == Some(true) {
                    "true".into()
                } else {
                    "false".into()
                }
            }
            "status.podIPs" => get_arr(obj, &["status", "podIPs"])
                .map(|a| {
                    a.iter()
                        .filter_map(|i| i.get("ip").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            f => {
                let path: Vec<&str> = f.split('.').collect();
                get_str(obj, &path).unwrap_or("").to_string()
            }
        })
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "metadata.name" | "metadata.namespace" => Ok(label.to_string()),
            "spec.host" => Ok("spec.nodeName".into()),
            l if SELECTABLE.contains(&l) => Ok(l.to_string()),
            l => Err(format!("field label not supported: {l}")),
        }
    }

    fn extra_subresources(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[("log", &["get"])]
    }

    fn on_delete(&self, stored: &Value, options: &Value, now: &str) -> DeleteAction {
        let phase = get_str(stored, &["status", "phase"]).unwrap_or("");
        let mut period = options
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| get_i64(stored, &["spec", "terminationGracePeriodSeconds"]))
            .unwrap_or(0);
        if get_str(stored, &["spec", "nodeName"])
            .unwrap_or("")
            .is_empty()
            || matches!(phase, "Succeeded" | "Failed")
        {
            period = 0;
        }
        if period < 0 {
            period = 1;
        }
        let current = crate::json::is_deleting(stored)
            .then(|| get_i64(stored, &["metadata", "deletionGracePeriodSeconds"]).unwrap_or(0));
        let has_finalizers = !crate::json::finalizers(stored).is_empty();
        match current {
            // Already going, and no sooner than asked: nothing changes.
            Some(cur) if cur <= period => DeleteAction::Keep,
            // The kubelet's (or a user's) force delete of a gracefully deleted pod.
            Some(_) if period == 0 && !has_finalizers => DeleteAction::Default,
            _ if period == 0 && current.is_none() => DeleteAction::Default,
            _ => {
                let Some(at) = crate::time::parse(now) else {
                    return DeleteAction::Default;
                };
                let deadline = at
                    .checked_add(jiff::SignedDuration::from_secs(period))
                    .unwrap_or(at);
                let mut obj = stored.clone();
                if let Some(meta) = ensure_obj(&mut obj, "metadata") {
                    meta.insert(
                        "deletionTimestamp".into(),
                        json!(crate::time::format(deadline)),
                    );
                    meta.insert("deletionGracePeriodSeconds".into(), json!(period));
                    if current.is_none()
                        && let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g + 1));
                    }
                }
                DeleteAction::Update(obj)
            }
        }
    }

    fn pending_finalization(&self, obj: &Value) -> bool {
        // `ShouldDeleteDuringUpdate`: a gracefully deleted pod waits for its force delete.
        get_i64(obj, &["metadata", "deletionGracePeriodSeconds"]).is_some_and(|g| g > 0)
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&POD_TABLE)
    }
}

static POD_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", common::NAME_DESCRIPTION, 0),
        (
            "Ready",
            "string",
            "",
            "The aggregate readiness state of this pod for accepting traffic.",
            0,
        ),
        (
            "Status",
            "string",
            "",
            "The aggregate status of the containers in this pod.",
            0,
        ),
        (
            "Restarts",
            "string",
            "",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            0,
        ),
        ("Age", "string", "", common::AGE_DESCRIPTION, 0),
        (
            "IP",
            "string",
            "",
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            1,
        ),
        (
            "Node",
            "string",
            "",
            "NodeName indicates in which node this pod is scheduled.",
            1,
        ),
        (
            "Nominated Node",
            "string",
            "",
            "nominatedNodeName is set only when this pod preempts other pods on the node.",
            1,
        ),
        (
            "Readiness Gates",
            "string",
            "",
            "If specified, all readiness gates will be evaluated for pod readiness.",
            1,
        ),
    ],
    cells: pod_cells,
};

/// `printPod`'s STATUS column, for the states kubesim's pods go through.
pub fn pod_status_reason(pod: &Value) -> String {
    let mut reason = get_str(pod, &["status", "reason"])
        .filter(|r| !r.is_empty())
        .or_else(|| get_str(pod, &["status", "phase"]))
        .unwrap_or("")
        .to_string();
    for cs in get_arr(pod, &["status", "containerStatuses"])
        .into_iter()
        .flatten()
        .rev()
    {
        if let Some(r) = get_str(cs, &["state", "waiting", "reason"]).filter(|r| !r.is_empty()) {
            reason = r.to_string();
        } else if let Some(t) = get(cs, &["state", "terminated"]) {
            reason = match get_str(t, &["reason"]).filter(|r| !r.is_empty()) {
                Some(r) => r.to_string(),
                None => format!("ExitCode:{}", get_i64(t, &["exitCode"]).unwrap_or(0)),
            };
        }
    }
    if crate::json::is_deleting(pod) && !matches!(reason.as_str(), "Completed" | "Error") {
        reason = "Terminating".into();
    }
    reason
}

fn pod_cells(pod: &Value) -> Vec<Value> {
    let statuses = get_arr(pod, &["status", "containerStatuses"])
        .cloned()
        .unwrap_or_default();
    let total = get_arr(pod, &["spec", "containers"]).map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let or_none = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    vec![
        json!(meta_str(pod, "name")),
        json!(format!("{ready}/{total}")),
        json!(pod_status_reason(pod)),
        json!(restarts.to_string()),
        json!(common::creation_age(pod)),
        json!(or_none(get_str(pod, &["status", "podIP"]).unwrap_or(""))),
        json!(or_none(get_str(pod, &["spec", "nodeName"]).unwrap_or(""))),
        json!(or_none(
            get_str(pod, &["status", "nominatedNodeName"]).unwrap_or("")
        )),
        json!("<none>"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        let mut p = json!({"metadata": {"name": "p", "namespace": "d"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let s = PodStrategy::new();
        s.default(&mut p);
        s.prepare_for_create(&mut p);
        p
    }

    #[test]
    fn create_defaults_admission_and_validation() {
        let p = pod();
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        assert_eq!(p["spec"]["priority"], 0);
        assert_eq!(p["spec"]["enableServiceLinks"], true);
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert!(PodStrategy::new().validate_create(&p).is_empty());
        let mut bad = p.clone();
        bad["spec"]["containers"] = json!([]);
        let msgs: Vec<String> = PodStrategy::new()
            .validate_create(&bad)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(msgs, ["spec.containers: Required value"]);
    }

    #[test]
    fn updates_may_change_images_only() {
        let s = PodStrategy::new();
        let old = pod();
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("busybox:2");
        assert!(s.validate_update(&new, &old).is_empty());
        new["spec"]["restartPolicy"] = json!("Never");
        let e = s.validate_update(&new, &old);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].message()
                .starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
            "{}",
            e[0].message()
        );
    }

    #[test]
    fn field_labels_and_graceful_delete() {
        let s = PodStrategy::new();
        assert_eq!(s.convert_field_label("spec.host").unwrap(), "spec.nodeName");
        assert_eq!(
            s.convert_field_label("status.bogus").unwrap_err(),
            "field label not supported: status.bogus"
        );
        let mut p = pod();
        assert_eq!(
            s.field_value(&p, "status.phase").as_deref(),
            Some("Pending")
        );
        // Unscheduled: deleted at once.
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(s.on_delete(&p, &json!({}), now), DeleteAction::Default);
        p["spec"]["nodeName"] = json!("n");
        let DeleteAction::Update(d) = s.on_delete(&p, &json!({}), now) else {
            panic!("a scheduled pod is deleted gracefully")
        };
        assert_eq!(d["metadata"]["deletionTimestamp"], "2026-01-01T00:00:30Z");
        assert_eq!(d["metadata"]["deletionGracePeriodSeconds"], 30);
        assert!(s.pending_finalization(&d));
        assert_eq!(s.on_delete(&d, &json!({}), now), DeleteAction::Keep);
        assert_eq!(
            s.on_delete(&d, &json!({"gracePeriodSeconds": 0}), now),
            DeleteAction::Default
        );
    }
}
