//! batch/v1 Jobs: the `Strategy` the generic request flow drives, modelled on the real server's
//! `jobStrategy` / `jobStatusStrategy` (`pkg/registry/batch/job/strategy.go`):
//!
//! | hook                        | real server                                                            |
//! |-----------------------------|------------------------------------------------------------------------|
//! | `default`                   | `SetDefaults_Job` + pod template defaults (decode)                     |
//! | `prepare_for_create`        | `PrepareForCreate`: generated selector + labels, status `{}`, gen 1    |
//! | `validate_create`           | `Validate` = `ValidateJob` minus its ObjectMeta part (the flow runs it)|
//! | `prepare_for_update`        | `PrepareForUpdate`: status from old, generation +1 on spec change      |
//! | `validate_update`           | `ValidateUpdate` = `ValidateJob` + `ValidateJobUpdate`                 |
//! | `prepare_for_status_update` | status strategy `PrepareForUpdate`: spec from old                      |
//! | `validate_status_update`    | status strategy `ValidateUpdate` = `ValidateJobUpdateStatus`           |
//! | `field_value`               | `JobToSelectableFields` (`status.successful`)                          |
//! | `table`                     | `printJob`                                                             |

pub mod defaults;
pub mod goprint;
pub mod indexes;
pub mod podspec;
pub mod quantity;
pub mod status;
pub mod table;
pub mod validation;

#[cfg(test)]
mod fixture_tests;

use serde_json::{Map, Value, json};

use crate::errors::{ApiError, FieldErrors};
use crate::json::{ensure_obj, ensure_obj_in, get, get_bool, get_i64, get_obj, get_str};
use crate::kinds::{ResourceInfo, Strategy, TableSpec, Warnings, common};
use crate::validation::{
    NameRule, semantic_eq, validate_labels, validate_object_meta_create,
    validate_object_meta_update_core,
};

pub use status::validate_job_status_transition;
pub use validation::{
    CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL, Opts,
};

/// The batch/v1 `jobs` resource.
pub struct JobStrategy {
    info: ResourceInfo,
}

impl Default for JobStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl JobStrategy {
    pub fn new() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect();
        Self {
            // As discovery lists it (discovery.json, GET /apis/batch/v1).
            info: ResourceInfo {
                group: "batch".into(),
                version: "v1".into(),
                kind: "Job".into(),
                plural: "jobs".into(),
                singular: "job".into(),
                namespaced: true,
                short_names: Vec::new(),
                categories: strings(&["all"]),
                verbs: common::standard_verbs(),
                status_subresource: true,
                storage_version_hash: Some("mudhfqk/qZY=".into()),
            },
        }
    }

    /// The name rule the generic flow applies to Job names (`ValidateReplicationControllerName`).
    pub const NAME_RULE: NameRule = NameRule::DnsSubdomain;
}

fn labels_empty(job: &Value) -> bool {
    get_obj(job, &["metadata", "labels"]).is_none_or(Map::is_empty)
}

fn set_labels(job: &mut Value, labels: Map<String, Value>) {
    if let Some(meta) = ensure_obj(job, "metadata") {
        meta.insert("labels".into(), Value::Object(labels));
    }
}

/// The decode-time default "a Job without labels takes its template's labels" (`SetDefaults_Job`), for
/// updates: the copy happens before validation.
fn copy_template_labels(job: &mut Value) {
    if labels_empty(job)
        && let Some(tl) = get_obj(job, &["spec", "template", "metadata", "labels"])
        && !tl.is_empty()
    {
        let tl = tl.clone();
        set_labels(job, tl);
    }
}

/// `generateSelector`: the template gets `job-name`/`controller-uid` labels (legacy and
/// `batch.kubernetes.io/`), unless set; the selector matches the prefixed controller-uid.
fn generate_selector(job: &mut Value) -> Option<()> {
    let name = get_str(job, &["metadata", "name"])
        .unwrap_or("")
        .to_string();
    let uid = get_str(job, &["metadata", "uid"]).unwrap_or("").to_string();
    let spec = ensure_obj(job, "spec")?;
    let labels = ensure_obj_in(
        ensure_obj_in(ensure_obj_in(spec, "template")?, "metadata")?,
        "labels",
    )?;
    for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
        labels.entry(key).or_insert_with(|| json!(name));
    }
    for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
        labels.entry(key).or_insert_with(|| json!(uid));
    }
    ensure_obj_in(ensure_obj_in(spec, "selector")?, "matchLabels")?
        .entry(CONTROLLER_UID_LABEL)
        .or_insert_with(|| json!(uid));
    Some(())
}

/// The object at `key` of a map, created (or replacing a non-object) when needed.
/// Drops the status fields Go's encoder omits when zero (`omitempty` on value fields and lists), so a
/// status written through JSON reads back like the real server's.
fn normalize_status(job: &mut Value) {
    let Some(st) = job.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    st.retain(|k, v| match (k.as_str(), &*v) {
        (_, Value::Null) => false,
        ("active" | "succeeded" | "failed", v) => v.as_i64() != Some(0),
        ("completedIndexes", Value::String(s)) => !s.is_empty(),
        ("conditions", Value::Array(a)) => !a.is_empty(),
        _ => true,
    });
    if let Some(u) = st
        .get_mut("uncountedTerminatedPods")
        .and_then(Value::as_object_mut)
    {
        u.retain(|_, v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
    }
}

/// Canonicalises one quantity field in place (`resource_list`: also round up to a milli-unit).
fn canonicalize_quantity(
    v: &mut Value,
    resource_list: bool,
) -> Result<(), quantity::QuantityError> {
    if let Some(q) = quantity::canonicalize_json(v, resource_list)? {
        *v = q;
    }
    Ok(())
}

fn canonicalize_resource_list(list: Option<&mut Value>) -> Result<(), quantity::QuantityError> {
    if let Some(m) = list.and_then(Value::as_object_mut) {
        for v in m.values_mut() {
            canonicalize_quantity(v, true)?;
        }
    }
    Ok(())
}

fn canonicalize_divisor(holder: Option<&mut Value>) -> Result<(), quantity::QuantityError> {
    if let Some(d) = holder
        .and_then(|h| h.get_mut("resourceFieldRef"))
        .and_then(|r| r.get_mut("divisor"))
    {
        canonicalize_quantity(d, false)?;
    }
    Ok(())
}

fn each_mut(v: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    v.and_then(Value::as_array_mut).into_iter().flatten()
}

/// Every `resource.Quantity` in a Job's pod template, decoded the way the codec does.
fn canonicalize_quantities(job: &mut Value) -> Result<(), quantity::QuantityError> {
    match job
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("spec"))
    {
        Some(pod) => canonicalize_pod_spec_quantities(pod),
        None => Ok(()),
    }
}

/// Every `resource.Quantity` in a pod spec (a Job's template or a Pod), decoded the way the codec does.
pub fn canonicalize_pod_spec_quantities(pod: &mut Value) -> Result<(), quantity::QuantityError> {
    for list in ["initContainers", "containers"] {
        for c in each_mut(pod.get_mut(list)) {
            if let Some(r) = c.get_mut("resources") {
                canonicalize_resource_list(r.get_mut("limits"))?;
                canonicalize_resource_list(r.get_mut("requests"))?;
            }
            for e in each_mut(c.get_mut("env")) {
                canonicalize_divisor(e.get_mut("valueFrom"))?;
            }
        }
    }
    canonicalize_resource_list(pod.get_mut("overhead"))?;
    if let Some(r) = pod.get_mut("resources") {
        canonicalize_resource_list(r.get_mut("limits"))?;
        canonicalize_resource_list(r.get_mut("requests"))?;
    }
    for vol in each_mut(pod.get_mut("volumes")) {
        if let Some(sl) = vol.get_mut("emptyDir").and_then(|e| e.get_mut("sizeLimit"))
            && !sl.is_null()
        {
            canonicalize_quantity(sl, false)?;
        }
        for item in each_mut(vol.get_mut("downwardAPI").and_then(|d| d.get_mut("items"))) {
            canonicalize_divisor(Some(item))?;
        }
        for src in each_mut(vol.get_mut("projected").and_then(|p| p.get_mut("sources"))) {
            for item in each_mut(src.get_mut("downwardAPI").and_then(|d| d.get_mut("items"))) {
                canonicalize_divisor(Some(item))?;
            }
        }
        if let Some(r) = vol
            .get_mut("ephemeral")
            .and_then(|e| e.get_mut("volumeClaimTemplate"))
            .and_then(|t| t.get_mut("spec"))
            .and_then(|s| s.get_mut("resources"))
        {
            canonicalize_resource_list(r.get_mut("limits"))?;
            canonicalize_resource_list(r.get_mut("requests"))?;
        }
    }
    Ok(())
}

impl Strategy for JobStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    /// Quantities are parsed by the codec: a malformed one is a 400 before anything else, and the
    /// stored form is canonical.
    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        canonicalize_quantities(obj).map_err(|e| {
            ApiError::bad_request(format!(
                "Job in version \"v1\" cannot be handled as a Job: {e}"
            ))
        })?;
        Ok(Vec::new())
    }

    fn default(&self, obj: &mut Value) {
        defaults::default_job(obj);
        // SetDefaults_Job: a Job without labels takes its template's (the same map in Go, which
        // `prepare_for_create` honours). Done here so the field manager attributes them to the writer.
        copy_template_labels(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // Decoding defaulted the Job's labels to the template's *map*, so when that happened the selector
        // generation below shows up in both; without template labels the copy only happens when the
        // stored object is decoded again, i.e. after validation.
        let template_labels = get(obj, &["spec", "template", "metadata", "labels"]);
        let aliased = (labels_empty(obj) && template_labels.is_some_and(Value::is_object))
            || (template_labels
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
                && get(obj, &["metadata", "labels"]) == template_labels);
        if get_bool(obj, &["spec", "manualSelector"]) != Some(true) {
            let _ = generate_selector(obj);
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
        if let Some(meta) = ensure_obj(obj, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
        if aliased
            && let Some(tl) = get_obj(obj, &["spec", "template", "metadata", "labels"])
            && !tl.is_empty()
        {
            let tl = tl.clone();
            set_labels(obj, tl);
        } else if labels_empty(obj)
            && let Some(tl) = get_obj(obj, &["spec", "template", "metadata", "labels"])
            && !tl.is_empty()
            // A copy made after validation can only matter for an object that passes validation,
            // whose template labels (the same values) are then valid too.
            && (aliased || validate_labels(Some(tl), "").is_empty())
        {
            let tl = tl.clone();
            set_labels(obj, tl);
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validation::validate_job(obj, Opts::for_job(None))
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        copy_template_labels(new);
        common::keep_stored(new, old, "status");
        let spec_changed = !semantic_eq(new.get("spec"), old.get("spec"));
        common::next_generation(new, old, spec_changed);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        let opts = Opts::for_job(Some(old));
        // ValidateJob (core ObjectMeta first) then ValidateJobUpdate.
        let mut errs = validate_object_meta_create(
            get(new, &["metadata"]).unwrap_or(&Value::Null),
            true,
            Self::NAME_RULE,
        );
        errs.extend(validation::validate_job(new, opts));
        errs.extend(validation::validate_job_update(new, old, opts));
        errs
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        common::keep_stored(new, old, "spec");
        copy_template_labels(new);
        normalize_status(new);
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> FieldErrors {
        let mut errs = validate_object_meta_update_core(
            get(new, &["metadata"]).unwrap_or(&Value::Null),
            get(old, &["metadata"]).unwrap_or(&Value::Null),
        );
        errs.extend(validate_job_status_transition(old, new));
        errs
    }

    fn delete_warnings(&self, options: &Value) -> crate::kinds::Warnings {
        if options.get("propagationPolicy").is_none() && options.get("orphanDependents").is_none() {
            vec!["child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning".into()]
        } else {
            Vec::new()
        }
    }

    fn default_propagation(&self) -> &'static str {
        // batch/v1 keeps orphaning pods by default for backwards compatibility.
        "Orphan"
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.successful" => Some(
                get_i64(obj, &["status", "succeeded"])
                    .unwrap_or(0)
                    .to_string(),
            ),
            _ => None,
        }
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&table::JOB_TABLE)
    }
}

/// A Job as a create would store it (defaulted, selector generated), for unit tests.
#[cfg(test)]
pub(crate) fn test_job(name: &str, spec: Value) -> Value {
    let mut sp = json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.k8s.io/busybox:1.36"}]}}});
    if let (Some(dst), Some(src)) = (sp.as_object_mut(), spec.as_object()) {
        for (k, v) in src {
            dst.insert(k.clone(), v.clone());
        }
    }
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": "00000000-0000-4000-8000-000000000001",
                     "resourceVersion": "1", "creationTimestamp": "2025-06-01T09:00:00Z"},
        "spec": sp});
    let s = JobStrategy::new();
    s.default(&mut job);
    s.prepare_for_create(&mut job);
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_for_create_generates_selector_labels_and_resets_status() {
        let mut job = json!({"metadata": {"name": "j", "uid": "u"},
            "spec": {"template": {"metadata": {"labels": {"app": "x", "job-name": "custom"}},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
            "status": {"active": 3}});
        let s = JobStrategy::new();
        s.default(&mut job);
        s.prepare_for_create(&mut job);
        assert_eq!(job["status"], json!({}));
        assert_eq!(job["metadata"]["generation"], 1);
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({"app": "x", "job-name": "custom", "batch.kubernetes.io/job-name": "j",
                   "controller-uid": "u", "batch.kubernetes.io/controller-uid": "u"})
        );
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}})
        );
        // The Job had no labels, so it shares the template's (generated ones included).
        assert_eq!(
            job["metadata"]["labels"],
            job["spec"]["template"]["metadata"]["labels"]
        );
        // The user's conflicting job-name label is reported by validation, not overwritten.
        let errs = s.validate_create(&job);
        assert_eq!(
            errs.iter().map(|e| e.message()).collect::<Vec<_>>(),
            [
                "spec.template.metadata.labels[job-name]: Invalid value: {\"app\":\"x\",\"batch.kubernetes.io/controller-uid\":\"u\",\"batch.kubernetes.io/job-name\":\"j\",\"controller-uid\":\"u\",\"job-name\":\"custom\"}: must be 'j'"
            ]
        );
    }

    #[test]
    fn explicit_job_labels_are_kept_and_manual_selectors_untouched() {
        let job = test_job("j", json!({}));
        assert_eq!(job["metadata"]["labels"]["job-name"], "j");
        let mut labelled = json!({"metadata": {"name": "k", "uid": "u", "labels": {"app": "a"}},
            "spec": {"manualSelector": true, "selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}}}}});
        let s = JobStrategy::new();
        s.default(&mut labelled);
        s.prepare_for_create(&mut labelled);
        assert_eq!(labelled["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(
            labelled["spec"]["template"]["metadata"]["labels"],
            json!({"app": "a"})
        );
        assert_eq!(
            labelled["spec"]["selector"],
            json!({"matchLabels": {"app": "a"}})
        );
    }

    #[test]
    fn a_long_name_does_not_leak_invalid_labels_onto_the_job() {
        let name = "n".repeat(64);
        let job = test_job(&name, json!({}));
        assert!(job["metadata"].get("labels").is_none());
        assert_eq!(JobStrategy::new().validate_create(&job).len(), 2);
    }

    #[test]
    fn updates_keep_status_and_bump_generation_on_spec_change() {
        let s = JobStrategy::new();
        let mut old = test_job("j", json!({}));
        old["status"] = json!({"active": 1});
        let mut same = old.clone();
        same["status"] = json!({"active": 9});
        s.prepare_for_update(&mut same, &old);
        assert_eq!(same["status"], json!({"active": 1}));
        assert_eq!(same["metadata"]["generation"], 1);
        let mut changed = old.clone();
        changed["spec"]["parallelism"] = json!(4);
        s.prepare_for_update(&mut changed, &old);
        assert_eq!(changed["metadata"]["generation"], 2);
        // Labels removed on update come back from the template (decode-time default).
        let mut unlabelled = old.clone();
        unlabelled["metadata"]["labels"] = json!({});
        s.prepare_for_update(&mut unlabelled, &old);
        assert_eq!(unlabelled["metadata"]["labels"], old["metadata"]["labels"]);
    }

    #[test]
    fn status_writes_ignore_spec_and_drop_zero_counters() {
        let s = JobStrategy::new();
        let old = test_job("j", json!({}));
        let mut new = old.clone();
        new["spec"]["parallelism"] = json!(7);
        new["metadata"]["labels"]["extra"] = json!("yes");
        new["status"] = json!({"active": 0, "succeeded": 0, "failed": 0, "ready": 0, "terminating": 0,
                               "completedIndexes": "", "conditions": [], "startTime": null,
                               "uncountedTerminatedPods": {"succeeded": [], "failed": null}});
        s.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(new["metadata"]["labels"]["extra"], "yes");
        assert_eq!(
            new["status"],
            json!({"ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
        );
        assert!(s.validate_status_update(&new, &old).is_empty());
    }

    #[test]
    fn decode_canonicalises_quantities() {
        let s = JobStrategy::new();
        let mut job = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "resources": {"limits": {"cpu": 1, "memory": "1024Mi"}, "requests": {"cpu": "0.5"}},
                            "env": [{"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1000m"}}}]}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "2048Ki"}}],
            "overhead": {"cpu": "0.0001"}}}}});
        assert!(s.decode(&mut job).unwrap().is_empty());
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["resources"],
            json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}})
        );
        assert_eq!(
            pod["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"],
            "1"
        );
        assert_eq!(pod["volumes"][0]["emptyDir"]["sizeLimit"], "2Mi");
        assert_eq!(pod["overhead"]["cpu"], "1m");
        let mut bad = json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"memory": "1 GB"}}}]}}}});
        let e = s.decode(&mut bad).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Job in version \"v1\" cannot be handled as a Job: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn info_field_values_and_table() {
        let s = JobStrategy::new();
        assert_eq!(s.info().api_version(), "batch/v1");
        assert_eq!(
            s.info().storage_version_hash.as_deref(),
            Some("mudhfqk/qZY=")
        );
        assert_eq!(s.info().categories, ["all"]);
        assert!(s.info().short_names.is_empty());
        assert_eq!(
            s.field_value(&json!({"status": {"succeeded": 3}}), "status.successful")
                .as_deref(),
            Some("3")
        );
        assert_eq!(s.field_value(&json!({}), "status.active"), None);
        assert_eq!(s.table().map(|t| t.columns.len()), Some(8));
    }
}
