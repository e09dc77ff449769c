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
pub mod status;
pub mod table;
pub mod validation;

#[cfg(test)]
mod fixture_tests;

use serde_json::{Map, Value, json};

use crate::errors::FieldErrors;
use crate::kinds::{ResourceInfo, Strategy, TableSpec};
use crate::validation::{
    NameRule, get, get_i64, get_obj, get_str, semantic_eq, validate_labels,
    validate_object_meta_create, validate_object_meta_update_core,
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
                verbs: strings(&[
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ]),
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

fn ensure_obj<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    map_at(v.as_object_mut()?, key)
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
    let labels = map_at(map_at(map_at(spec, "template")?, "metadata")?, "labels")?;
    for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
        labels.entry(key).or_insert_with(|| json!(name));
    }
    for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
        labels.entry(key).or_insert_with(|| json!(uid));
    }
    map_at(map_at(spec, "selector")?, "matchLabels")?
        .entry(CONTROLLER_UID_LABEL)
        .or_insert_with(|| json!(uid));
    Some(())
}

/// The object at `key` of a map, created (or replacing a non-object) when needed.
fn map_at<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let e = m.entry(key.to_string()).or_insert(Value::Null);
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut()
}

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

impl Strategy for JobStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        defaults::default_job(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // Decoding defaulted the Job's labels to the template's *map*, so when that happened the selector
        // generation below shows up in both; without template labels the copy only happens when the
        // stored object is decoded again, i.e. after validation.
        let aliased = labels_empty(obj)
            && get(obj, &["spec", "template", "metadata", "labels"]).is_some_and(Value::is_object);
        if crate::validation::get_bool(obj, &["spec", "manualSelector"]) != Some(true) {
            let _ = generate_selector(obj);
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
        if let Some(meta) = ensure_obj(obj, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
        if labels_empty(obj)
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
        if let Some(m) = new.as_object_mut() {
            match old.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        let old_gen = get_i64(old, &["metadata", "generation"]).unwrap_or(0);
        let spec_changed = !semantic_eq(new.get("spec"), old.get("spec"));
        if let Some(meta) = ensure_obj(new, "metadata") {
            meta.insert(
                "generation".into(),
                json!(if spec_changed { old_gen + 1 } else { old_gen }),
            );
        }
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
        if let Some(m) = new.as_object_mut() {
            match old.get("spec") {
                Some(s) => m.insert("spec".into(), s.clone()),
                None => m.remove("spec"),
            };
        }
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
