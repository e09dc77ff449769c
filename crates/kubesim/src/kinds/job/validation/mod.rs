//! Job spec validation on create and update (`pkg/apis/batch/validation/validation.go` and the options
//! `pkg/registry/batch/job/strategy.go` passes), in the real server's order and wording.

use serde_json::{Map, Value};

use super::goprint;
use super::podspec::validate_pod_template_spec;
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_bool, get_i64, get_obj, get_str};
use crate::validation::names::{is_dns1123_label, is_domain_prefixed_path};
use crate::validation::path::Path;
use crate::validation::selector::{self, validate_label_selector};
use crate::validation::{is_unset, semantic_eq, validate_object_meta_update_core};

pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;

const NON_NEGATIVE: &str = "must be greater than or equal to 0";

/// `JobValidationOptions` as the strategy computes them.
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    /// Check the `batch.kubernetes.io/` template labels too (always on create; on update only when the
    /// old template had them).
    pub require_prefixed_labels: bool,
    /// The template's scheduling directives (and, 1.36, container resources) may change.
    pub allow_mutable_scheduling_directives: bool,
    /// The old selector already had invalid label values.
    pub allow_invalid_label_value_in_selector: bool,
}

impl Opts {
    /// `validationOptionsForJob(new, old)`.
    pub fn for_job(old: Option<&Value>) -> Self {
        let Some(old) = old else {
            return Self {
                require_prefixed_labels: true,
                allow_mutable_scheduling_directives: false,
                allow_invalid_label_value_in_selector: false,
            };
        };
        let suspended = get_bool(old, &["spec", "suspend"]) == Some(true);
        let not_started = is_unset(get(old, &["status", "startTime"]));
        // 1.36 (MutableSchedulingDirectivesForSuspendedJobs): a Job suspended again after running, with
        // its pods gone, may be edited too.
        let suspended_idle = super::status::condition_true(old, "Suspended")
            && get_i64(old, &["status", "active"]).unwrap_or(0) == 0;
        let tl = get_obj(old, &["spec", "template", "metadata", "labels"]);
        let had = |k: &str| tl.is_some_and(|l| l.contains_key(k));
        Self {
            require_prefixed_labels: had(JOB_NAME_LABEL) && had(CONTROLLER_UID_LABEL),
            allow_mutable_scheduling_directives: suspended && (not_started || suspended_idle),
            allow_invalid_label_value_in_selector: selector_has_invalid_label_value(get(
                old,
                &["spec", "selector"],
            )),
        }
    }
}

/// `LabelSelectorHasInvalidLabelValue`.
fn selector_has_invalid_label_value(sel: Option<&Value>) -> bool {
    let Some(sel) = sel else {
        return false;
    };
    let bad = |v: &Value| {
        !crate::validation::names::is_valid_label_value(v.as_str().unwrap_or("")).is_empty()
    };
    get_obj(sel, &["matchLabels"]).is_some_and(|m| m.values().any(bad))
        || get_arr(sel, &["matchExpressions"]).is_some_and(|e| {
            e.iter()
                .any(|x| get_arr(x, &["values"]).is_some_and(|vs| vs.iter().any(bad)))
        })
}

fn nonnegative(errs: &mut FieldErrors, spec: &Value, key: &str) {
    if let Some(v) = get_i64(spec, &[key])
        && v < 0
    {
        errs.push(FieldError::invalid(
            format!("spec.{key}"),
            BadValue::Int(v),
            NON_NEGATIVE,
        ));
    }
}

/// `ValidateJob` without its `ValidateObjectMeta` (the generic request flow runs that first):
/// generated-selector checks, the spec, and the Indexed pod hostname rule.
pub fn validate_job(job: &Value, opts: Opts) -> FieldErrors {
    let null = Value::Null;
    let mut errs = validate_generated_selector(job, opts.require_prefixed_labels);
    let spec = get(job, &["spec"]).unwrap_or(&null);
    errs.extend(validate_job_spec(spec, opts));
    let completions = get_i64(spec, &["completions"]);
    if get_str(spec, &["completionMode"]) == Some("Indexed")
        && let Some(c) = completions
        && c > 0
    {
        let name = get_str(job, &["metadata", "name"]).unwrap_or("");
        let hostname = format!("{name}-{}", c - 1);
        if !is_dns1123_label(&hostname).is_empty() {
            errs.push(FieldError::invalid(
                "metadata.name",
                BadValue::Str(name.to_string()),
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
    errs
}

/// `ValidateHasLabel`.
fn has_label(
    errs: &mut FieldErrors,
    labels: Option<&Map<String, Value>>,
    key: &str,
    expected: &str,
) {
    let labels_path = Path::new("spec.template.metadata.labels");
    let field = labels_path.key(key);
    match labels.and_then(|l| l.get(key)) {
        None => errs.push(FieldError::required(field, format!("must be '{expected}'"))),
        Some(v) if v.as_str() != Some(expected) => errs.push(FieldError::invalid(
            field,
            labels_value(labels),
            format!("must be '{expected}'"),
        )),
        Some(_) => {}
    }
}

/// A label map as Go prints it (`null` when nil).
fn labels_value(labels: Option<&Map<String, Value>>) -> BadValue {
    match labels {
        Some(l) => BadValue::Raw(crate::errors::go_json(&Value::Object(l.clone()))),
        None => BadValue::Null,
    }
}

/// `validateGeneratedSelector`.
fn validate_generated_selector(job: &Value, prefixed: bool) -> FieldErrors {
    let mut errs = Vec::new();
    if get_bool(job, &["spec", "manualSelector"]) == Some(true) {
        return errs;
    }
    let sel = get(job, &["spec", "selector"]).filter(|v| !v.is_null());
    let Some(sel) = sel else {
        return errs;
    };
    let uid = get_str(job, &["metadata", "uid"]).unwrap_or("");
    let name = get_str(job, &["metadata", "name"]).unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let labels = get_obj(job, &["spec", "template", "metadata", "labels"]);
    has_label(&mut errs, labels, LEGACY_CONTROLLER_UID_LABEL, uid);
    has_label(&mut errs, labels, LEGACY_JOB_NAME_LABEL, name);
    let mut expected = Map::new();
    if prefixed {
        has_label(&mut errs, labels, CONTROLLER_UID_LABEL, uid);
        has_label(&mut errs, labels, JOB_NAME_LABEL, name);
        expected.insert(CONTROLLER_UID_LABEL.into(), Value::String(uid.into()));
        expected.insert(JOB_NAME_LABEL.into(), Value::String(name.into()));
    }
    expected.insert(
        LEGACY_CONTROLLER_UID_LABEL.into(),
        Value::String(uid.into()),
    );
    expected.insert(LEGACY_JOB_NAME_LABEL.into(), Value::String(name.into()));
    if let Ok(s) = selector::parse(Some(sel))
        && !s.matches(Some(&expected))
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            BadValue::Raw(goprint::label_selector(Some(sel))),
            "`selector` not auto-generated",
        ));
    }
    errs
}

/// `ValidateJobSpec`: `validateJobSpec`, then the selector and its match with the template labels.
pub fn validate_job_spec(spec: &Value, opts: Opts) -> FieldErrors {
    let mut errs = validate_job_spec_inner(spec);
    let sel = get(spec, &["selector"]).filter(|v| !v.is_null());
    if sel.is_none() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        errs.extend(validate_label_selector(
            sel,
            opts.allow_invalid_label_value_in_selector,
            "spec.selector",
        ));
    }
    if let Ok(s) = selector::parse(sel) {
        let labels = get_obj(spec, &["template", "metadata", "labels"]);
        if !s.matches(labels) {
            errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                labels_value(labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    errs
}

/// `validateJobSpec`.
fn validate_job_spec_inner(spec: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        nonnegative(&mut errs, spec, key);
        if key == "maxFailedIndexes"
            && get_i64(spec, &[key]).is_some()
            && is_unset(get(spec, &["backoffLimitPerIndex"]))
        {
            errs.push(FieldError::required(
                "spec.backoffLimitPerIndex",
                "when maxFailedIndexes is specified",
            ));
        }
    }
    if let Some(mb) = get_str(spec, &["managedBy"]) {
        errs.extend(is_domain_prefixed_path("spec.managedBy", mb));
        if mb.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(
                "spec.managedBy",
                MAX_MANAGED_BY_LENGTH,
            ));
        }
    }
    let parallelism = get_i64(spec, &["parallelism"]);
    let completions = get_i64(spec, &["completions"]);
    let max_failed = get_i64(spec, &["maxFailedIndexes"]);
    let per_index = get_i64(spec, &["backoffLimitPerIndex"]);
    let mode = get_str(spec, &["completionMode"]);
    if let Some(mode) = mode {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(
                "spec.completionMode",
                BadValue::Str(mode.to_string()),
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            if completions.is_none() {
                errs.push(FieldError::required(
                    "spec.completions",
                    "when completion mode is Indexed",
                ));
            }
            if let Some(p) = parallelism
                && p > MAX_PARALLELISM_FOR_INDEXED_JOB
            {
                errs.push(FieldError::invalid(
                    "spec.parallelism",
                    BadValue::Int(p),
                    format!(
                        "must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed"
                    ),
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                errs.push(FieldError::invalid(
                    "spec.maxFailedIndexes",
                    BadValue::Int(m),
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed
                && m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB
            {
                errs.push(FieldError::invalid(
                    "spec.maxFailedIndexes",
                    BadValue::Int(m),
                    format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
                ));
            }
            if let Some(c) = completions
                && c > COMPLETIONS_SOFT_LIMIT
                && per_index.is_some()
            {
                if max_failed.is_none() {
                    errs.push(FieldError::required(
                        "spec.maxFailedIndexes",
                        format!(
                            "must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"
                        ),
                    ));
                }
                if let Some(p) = parallelism
                    && p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS
                {
                    errs.push(FieldError::invalid(
                        "spec.parallelism",
                        BadValue::Int(p),
                        format!(
                            "must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                        ),
                    ));
                }
                if let Some(m) = max_failed
                    && m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS
                {
                    errs.push(FieldError::invalid(
                        "spec.maxFailedIndexes",
                        BadValue::Int(m),
                        format!(
                            "must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                        ),
                    ));
                }
            }
        }
    }
    let indexed = mode == Some("Indexed");
    if mode.is_none() || mode == Some("NonIndexed") {
        if let Some(b) = per_index {
            errs.push(FieldError::invalid(
                "spec.backoffLimitPerIndex",
                BadValue::Int(b),
                "requires indexed completion mode",
            ));
        }
        if let Some(m) = max_failed {
            errs.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                BadValue::Int(m),
                "requires indexed completion mode",
            ));
        }
    }
    let pfp = get(spec, &["podFailurePolicy"]).filter(|v| !v.is_null());
    if let Some(pfp) = pfp {
        errs.extend(validate_pod_failure_policy(spec, pfp));
    }
    if let Some(sp) = get(spec, &["successPolicy"]).filter(|v| !v.is_null()) {
        if !indexed {
            errs.push(FieldError::invalid(
                "spec.successPolicy",
                BadValue::Raw(goprint::success_policy(Some(sp))),
                "requires indexed completion mode",
            ));
        } else {
            errs.extend(validate_success_policy(sp, completions));
        }
    }
    if let Some(prp) = get_str(spec, &["podReplacementPolicy"]) {
        if pfp.is_some() {
            if prp != "Failed" {
                errs.push(FieldError::not_supported(
                    "spec.podReplacementPolicy",
                    BadValue::Str(prp.to_string()),
                    &["Failed"],
                ));
            }
        } else if prp != "Failed" && prp != "TerminatingOrFailed" {
            errs.push(FieldError::not_supported(
                "spec.podReplacementPolicy",
                BadValue::Str(prp.to_string()),
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    errs.extend(validate_pod_template_spec(
        get(spec, &["template"]),
        "spec.template",
    ));
    // An unset restartPolicy is defaulted to Always, so both mean "not set to a Job-compatible value".
    let rp = get_str(spec, &["template", "spec", "restartPolicy"]).unwrap_or("");
    let field = "spec.template.spec.restartPolicy";
    if rp == "Always" || rp.is_empty() {
        errs.push(FieldError::required(
            field,
            "valid values: \"OnFailure\", \"Never\"",
        ));
    } else if rp != "OnFailure" && rp != "Never" {
        errs.push(FieldError::not_supported(
            field,
            BadValue::Str(rp.to_string()),
            &["OnFailure", "Never"],
        ));
    } else if pfp.is_some() && rp != "Never" {
        errs.push(FieldError::invalid(
            field,
            BadValue::Str(rp.to_string()),
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    errs
}

mod policies;
#[cfg(test)]
mod tests;

use policies::{validate_pod_failure_policy, validate_success_policy};

/// `ValidateJobUpdate`: core's ObjectMeta update rules, then `ValidateJobSpecUpdate` (which validates
/// the new spec again, then the immutability rules).
pub fn validate_job_update(new: &Value, old: &Value, opts: Opts) -> FieldErrors {
    let null = Value::Null;
    let mut errs = validate_object_meta_update_core(
        get(new, &["metadata"]).unwrap_or(&null),
        get(old, &["metadata"]).unwrap_or(&null),
    );
    let spec = get(new, &["spec"]).unwrap_or(&null);
    let old_spec = get(old, &["spec"]).unwrap_or(&null);
    errs.extend(validate_job_spec(spec, opts));
    errs.extend(validate_completions_update(spec, old_spec));
    immutable(&mut errs, spec, old_spec, "selector", |v| {
        BadValue::Raw(goprint::label_selector(v))
    });
    errs.extend(validate_pod_template_update(spec, old_spec, opts));
    immutable(&mut errs, spec, old_spec, "completionMode", opt_str);
    immutable(&mut errs, spec, old_spec, "podFailurePolicy", |v| {
        BadValue::Raw(goprint::pod_failure_policy(v))
    });
    immutable(&mut errs, spec, old_spec, "backoffLimitPerIndex", opt_int);
    immutable(&mut errs, spec, old_spec, "managedBy", opt_str);
    immutable(&mut errs, spec, old_spec, "successPolicy", |v| {
        BadValue::Raw(goprint::success_policy(v))
    });
    errs
}

fn opt_str(v: Option<&Value>) -> BadValue {
    match v.and_then(Value::as_str) {
        Some(s) => BadValue::Str(s.to_string()),
        None => BadValue::Null,
    }
}

fn opt_int(v: Option<&Value>) -> BadValue {
    match v.and_then(Value::as_i64) {
        Some(i) => BadValue::Int(i),
        None => BadValue::Null,
    }
}

/// `ValidateImmutableField` on `spec.<key>`.
fn immutable(
    errs: &mut FieldErrors,
    spec: &Value,
    old_spec: &Value,
    key: &str,
    render: impl Fn(Option<&Value>) -> BadValue,
) {
    let new = get(spec, &[key]).filter(|v| !v.is_null());
    if !semantic_eq(new, get(old_spec, &[key])) {
        errs.push(FieldError::invalid(
            format!("spec.{key}"),
            render(new),
            "field is immutable",
        ));
    }
}

/// `validateCompletions`: immutable, except that an Indexed Job may change it together with an equal
/// parallelism (elastic Indexed Jobs).
fn validate_completions_update(spec: &Value, old_spec: &Value) -> FieldErrors {
    let new = get_i64(spec, &["completions"]);
    if get_str(spec, &["completionMode"]) != Some("Indexed") {
        let mut errs = Vec::new();
        immutable(&mut errs, spec, old_spec, "completions", opt_int);
        return errs;
    }
    if new == get_i64(old_spec, &["completions"]) {
        return Vec::new();
    }
    match new {
        Some(c) if Some(c) != get_i64(spec, &["parallelism"]) => vec![FieldError::invalid(
            "spec.completions",
            BadValue::Int(c),
            "can only be modified in tandem with spec.parallelism",
        )],
        _ => Vec::new(),
    }
}

/// `validatePodTemplateUpdate`. While scheduling directives are mutable, the old template takes the new
/// template's labels, annotations, nodeSelector, tolerations, schedulingGates, node affinity and
/// (1.36) container resources before comparing, and the comparison is reported on
/// `spec.template.spec` as the recording shows; otherwise the whole template must be unchanged.
fn validate_pod_template_update(spec: &Value, old_spec: &Value, opts: Opts) -> FieldErrors {
    let new_t = get(spec, &["template"]);
    let old_t = get(old_spec, &["template"]);
    if !opts.allow_mutable_scheduling_directives {
        if semantic_eq(new_t, old_t) {
            return Vec::new();
        }
        return vec![FieldError::invalid(
            "spec.template",
            BadValue::Raw(goprint::pod_template_spec(new_t)),
            "field is immutable",
        )];
    }
    let new_spec = new_t.and_then(|t| t.get("spec"));
    let mut old_pod = old_t
        .and_then(|t| t.get("spec"))
        .cloned()
        .unwrap_or(Value::Null);
    if let (Some(old_pod), Some(new_pod)) =
        (old_pod.as_object_mut(), new_spec.and_then(Value::as_object))
    {
        for key in ["nodeSelector", "tolerations", "schedulingGates"] {
            match new_pod.get(key) {
                Some(v) => old_pod.insert(key.to_string(), v.clone()),
                None => old_pod.remove(key),
            };
        }
        let new_na = new_pod
            .get("affinity")
            .and_then(|a| a.get("nodeAffinity"))
            .cloned();
        match (
            new_pod.get("affinity").filter(|v| !v.is_null()),
            old_pod.get_mut("affinity"),
        ) {
            (None, Some(old_aff)) => {
                if let Some(o) = old_aff.as_object_mut() {
                    o.remove("nodeAffinity");
                    if o.values().all(Value::is_null) {
                        old_pod.remove("affinity");
                    }
                }
            }
            (Some(_), old_aff) => {
                let is_some = old_aff.as_ref().is_some_and(|v| v.is_object());
                if is_some {
                    if let Some(o) = old_pod.get_mut("affinity").and_then(Value::as_object_mut) {
                        match new_na {
                            Some(na) => o.insert("nodeAffinity".into(), na),
                            None => o.remove("nodeAffinity"),
                        };
                    }
                } else {
                    let mut o = Map::new();
                    if let Some(na) = new_na {
                        o.insert("nodeAffinity".into(), na);
                    }
                    old_pod.insert("affinity".into(), Value::Object(o));
                }
            }
            (None, None) => {}
        }
        for list in ["containers", "initContainers"] {
            let new_list = new_pod.get(list).and_then(Value::as_array);
            if let (Some(old_list), Some(new_list)) = (
                old_pod.get_mut(list).and_then(Value::as_array_mut),
                new_list,
            ) {
                for (o, n) in old_list.iter_mut().zip(new_list) {
                    if let (Some(o), Some(n)) = (o.as_object_mut(), n.as_object()) {
                        match n.get("resources") {
                            Some(r) => o.insert("resources".into(), r.clone()),
                            None => o.remove("resources"),
                        };
                    }
                }
            }
        }
    }
    if semantic_eq(new_spec, Some(&old_pod)) {
        return Vec::new();
    }
    vec![FieldError::invalid(
        "spec.template.spec",
        BadValue::Raw(goprint::pod_spec(new_spec)),
        "field is immutable",
    )]
}
