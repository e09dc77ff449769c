//! Job spec validation on create and update (`pkg/apis/batch/validation/validation.go` and the options
//! `pkg/registry/batch/job/strategy.go` passes), in the real server's order and wording.

use serde_json::{Map, Value};

use super::goprint;
use super::indexes::IndexSet;
use super::podspec::validate_pod_template_spec;
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_bool, get_i64, get_obj, get_str};
use crate::validation::names::{is_dns1123_label, is_domain_prefixed_path};
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
    let field = format!("spec.template.metadata.labels[{key}]");
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

const PFP_ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quote_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| crate::errors::go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

/// `validatePodFailurePolicy`.
fn validate_pod_failure_policy(spec: &Value, pfp: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let rules = get_arr(pfp, &["rules"])
        .map(Vec::as_slice)
        .unwrap_or_default();
    let rules_path = "spec.podFailurePolicy.rules";
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(too_many(
            rules_path,
            rules.len(),
            MAX_POD_FAILURE_POLICY_RULES,
        ));
    }
    let container_names: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| {
            get_arr(spec, &["template", "spec", k])
                .map(Vec::as_slice)
                .unwrap_or_default()
        })
        .map(|c| get_str(c, &["name"]).unwrap_or(""))
        .collect();
    let per_index = get(spec, &["backoffLimitPerIndex"]).is_some_and(|v| !v.is_null());
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("{rules_path}[{i}]");
        let action = get_str(rule, &["action"]).unwrap_or("");
        if action.is_empty() {
            errs.push(FieldError::required(
                format!("{rp}.action"),
                format!("valid values: {}", go_quote_list(&PFP_ACTIONS)),
            ));
        } else if action == "FailIndex" {
            if !per_index {
                errs.push(FieldError::invalid(
                    format!("{rp}.action"),
                    BadValue::Str(action.to_string()),
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
        } else if !PFP_ACTIONS.contains(&action) {
            errs.push(FieldError::not_supported(
                format!("{rp}.action"),
                BadValue::Str(action.to_string()),
                &PFP_ACTIONS,
            ));
        }
        let on_exit = get(rule, &["onExitCodes"]).filter(|v| !v.is_null());
        let on_conds = get_arr(rule, &["onPodConditions"])
            .map(Vec::as_slice)
            .unwrap_or_default();
        if let Some(oe) = on_exit {
            errs.extend(validate_on_exit_codes(
                oe,
                &format!("{rp}.onExitCodes"),
                &container_names,
            ));
        }
        if !on_conds.is_empty() {
            let cp = format!("{rp}.onPodConditions");
            if on_conds.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
                errs.push(too_many(
                    &cp,
                    on_conds.len(),
                    MAX_ON_POD_CONDITIONS_PATTERNS,
                ));
            }
            for (j, pattern) in on_conds.iter().enumerate() {
                let pp = format!("{cp}[{j}]");
                let t = get_str(pattern, &["type"]).unwrap_or("");
                for m in crate::validation::names::is_qualified_name(t) {
                    errs.push(FieldError::invalid(
                        format!("{pp}.type"),
                        BadValue::Str(t.to_string()),
                        m,
                    ));
                }
                let st = get_str(pattern, &["status"]).unwrap_or("");
                let statuses = ["False", "True", "Unknown"];
                if st.is_empty() {
                    errs.push(FieldError::required(
                        format!("{pp}.status"),
                        format!("valid values: {}", go_quote_list(&statuses)),
                    ));
                } else if !statuses.contains(&st) {
                    errs.push(FieldError::not_supported(
                        format!("{pp}.status"),
                        BadValue::Str(st.to_string()),
                        &statuses,
                    ));
                }
            }
        }
        if on_exit.is_some() && !on_conds.is_empty() {
            errs.push(FieldError::invalid(
                rp.clone(),
                BadValue::Omit,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            ));
        }
        if on_exit.is_none() && on_conds.is_empty() {
            errs.push(FieldError::invalid(
                rp,
                BadValue::Omit,
                "specifying one of OnExitCodes and OnPodConditions is required",
            ));
        }
    }
    errs
}

fn too_many(field: &str, actual: usize, max: usize) -> FieldError {
    FieldError::new(
        crate::errors::FieldErrorKind::TooMany,
        field,
        BadValue::Int(actual as i64),
        format!("must have at most {max} items"),
    )
}

/// `validatePodFailurePolicyRuleOnExitCodes`.
fn validate_on_exit_codes(oe: &Value, path: &str, container_names: &[&str]) -> FieldErrors {
    let mut errs = Vec::new();
    let op = get_str(oe, &["operator"]).unwrap_or("");
    let ops = ["In", "NotIn"];
    if op.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.operator"),
            format!("valid values: {}", go_quote_list(&ops)),
        ));
    } else if !ops.contains(&op) {
        errs.push(FieldError::not_supported(
            format!("{path}.operator"),
            BadValue::Str(op.to_string()),
            &ops,
        ));
    }
    if let Some(cn) = get_str(oe, &["containerName"])
        && !container_names.contains(&cn)
    {
        errs.push(FieldError::invalid(
            format!("{path}.containerName"),
            BadValue::Str(cn.to_string()),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values: Vec<i64> = get_arr(oe, &["values"])
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let vp = format!("{path}.values");
    let values_json = || {
        BadValue::Raw(match get(oe, &["values"]).filter(|v| !v.is_null()) {
            Some(v) => crate::errors::go_json(v),
            None => "null".to_string(),
        })
    };
    if values.is_empty() {
        errs.push(FieldError::invalid(
            vp.clone(),
            values_json(),
            "at least one value is required",
        ));
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        errs.push(too_many(&vp, values.len(), MAX_ON_EXIT_CODES_VALUES));
    }
    let mut ordered = true;
    let mut seen = std::collections::HashSet::new();
    for (j, v) in values.iter().enumerate() {
        let ip = format!("{vp}[{j}]");
        if op == "In" && *v == 0 {
            errs.push(FieldError::invalid(
                ip.clone(),
                BadValue::Int(*v),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(ip, BadValue::Int(*v)));
        }
        if j > 0 && values[j - 1] > *v {
            ordered = false;
        }
    }
    if !ordered {
        errs.push(FieldError::invalid(vp, values_json(), "must be ordered"));
    }
    errs
}

/// `validateSuccessPolicy` (only reached for Indexed Jobs).
fn validate_success_policy(sp: &Value, completions: Option<i64>) -> FieldErrors {
    let mut errs = Vec::new();
    let rules = get_arr(sp, &["rules"])
        .map(Vec::as_slice)
        .unwrap_or_default();
    let rules_path = "spec.successPolicy.rules";
    if rules.is_empty() {
        errs.push(FieldError::required(
            rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(too_many(rules_path, rules.len(), MAX_SUCCESS_POLICY_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("{rules_path}[{i}]");
        let indexes = get_str(rule, &["succeededIndexes"]);
        let count = get_i64(rule, &["succeededCount"]);
        if indexes.is_none() && count.is_none() {
            errs.push(FieldError::required(
                rp.clone(),
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        // Go dereferences spec.completions here; a missing value (already reported as Required) would
        // crash the real server, so the checks that need it are skipped instead.
        let mut total = 0i64;
        if let Some(ix) = indexes {
            let ip = format!("{rp}.succeededIndexes");
            if ix.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(
                    ip.clone(),
                    MAX_SUCCEEDED_INDEXES_LENGTH,
                ));
            }
            if let Some(c) = completions {
                match IndexSet::parse_checked(ix, i32::try_from(c).unwrap_or(i32::MAX)) {
                    Ok(set) => total = set.len(),
                    Err(e) => errs.push(FieldError::invalid(
                        ip,
                        BadValue::Str(ix.to_string()),
                        format!("error parsing succeededIndexes: {e}"),
                    )),
                }
            }
        }
        if let Some(n) = count {
            let cp = format!("{rp}.succeededCount");
            if n < 0 {
                errs.push(FieldError::invalid(
                    cp.clone(),
                    BadValue::Int(n),
                    NON_NEGATIVE,
                ));
            }
            if let Some(c) = completions
                && n > c
            {
                errs.push(FieldError::invalid(
                    cp.clone(),
                    BadValue::Int(n),
                    format!(
                        "must be less than or equal to {c} (the number of specified completions)"
                    ),
                ));
            }
            if indexes.is_some() && n > total {
                errs.push(FieldError::invalid(
                    cp,
                    BadValue::Int(n),
                    format!(
                        "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                    ),
                ));
            }
        }
    }
    errs
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::job::test_job;
    use serde_json::json;

    fn create_msgs(spec: Value) -> Vec<String> {
        let job = test_job("j", spec);
        validate_job(&job, Opts::for_job(None))
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn a_defaulted_job_is_valid() {
        assert!(create_msgs(json!({})).is_empty());
    }

    #[test]
    fn counters_must_not_be_negative() {
        assert_eq!(
            create_msgs(
                json!({"completions": -1, "activeDeadlineSeconds": -2, "backoffLimit": -3, "ttlSecondsAfterFinished": -4})
            ),
            [
                "spec.completions: Invalid value: -1: must be greater than or equal to 0",
                "spec.activeDeadlineSeconds: Invalid value: -2: must be greater than or equal to 0",
                "spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0",
                "spec.ttlSecondsAfterFinished: Invalid value: -4: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn per_index_backoff_rules() {
        assert_eq!(
            create_msgs(json!({"maxFailedIndexes": 1})),
            [
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
            ]
        );
        assert_eq!(
            create_msgs(json!({"backoffLimitPerIndex": 1})),
            ["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
        );
        assert_eq!(
            create_msgs(
                json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1, "maxFailedIndexes": 3})
            ),
            ["spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"]
        );
        assert_eq!(
            create_msgs(
                json!({"completionMode": "Indexed", "completions": 200000, "parallelism": 20000, "backoffLimitPerIndex": 1})
            ),
            [
                "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
                "spec.parallelism: Invalid value: 20000: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
            ]
        );
    }

    #[test]
    fn completion_mode_rules() {
        assert_eq!(
            create_msgs(json!({"completionMode": "Sometimes"})),
            [
                "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
            ]
        );
        assert_eq!(
            create_msgs(json!({"completionMode": "Indexed", "parallelism": 2})),
            ["spec.completions: Required value: when completion mode is Indexed"]
        );
        // The Indexed pod hostname `<name>-<completions-1>` must be a DNS label.
        let name = "n".repeat(62);
        let job = test_job(
            &name,
            json!({"completionMode": "Indexed", "completions": 10, "parallelism": 1}),
        );
        let m: Vec<String> = validate_job(&job, Opts::for_job(None))
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            m,
            [format!(
                "metadata.name: Invalid value: \"{name}\": will not able to create pod with invalid DNS label: {name}-9"
            )]
        );
    }

    #[test]
    fn managed_by_rules() {
        assert_eq!(
            create_msgs(json!({"managedBy": "kubernetes.io/job-controller"})).len(),
            0
        );
        assert_eq!(
            create_msgs(json!({"managedBy": "example.io/"})),
            [
                "spec.managedBy: Invalid value: \"example.io/\": must be a domain-prefixed path (such as \"acme.io/foo\")"
            ]
        );
        assert_eq!(
            create_msgs(json!({"managedBy": format!("courier.dev/{}", "d".repeat(52))})),
            ["spec.managedBy: Too long: may not be more than 63 bytes"]
        );
        assert_eq!(
            create_msgs(json!({"managedBy": ""})),
            ["spec.managedBy: Required value"]
        );
    }

    #[test]
    fn success_policy_rules() {
        let idx = |sp: Value| json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "successPolicy": sp});
        assert_eq!(
            create_msgs(idx(json!({"rules": []}))),
            [
                "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified"
            ]
        );
        assert_eq!(
            create_msgs(idx(
                json!({"rules": [{"succeededIndexes": "0,1", "succeededCount": 3}]})
            )),
            [
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)"
            ]
        );
        assert_eq!(
            create_msgs(idx(json!({"rules": [{"succeededCount": -1}]}))),
            [
                "spec.successPolicy.rules[0].succeededCount: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        let rules: Vec<Value> = (0..21).map(|_| json!({"succeededCount": 1})).collect();
        assert_eq!(
            create_msgs(idx(json!({"rules": rules}))),
            ["spec.successPolicy.rules: Too many: 21: must have at most 20 items"]
        );
    }

    #[test]
    fn pod_failure_policy_rules() {
        let pfp = |rules: Value| json!({"podFailurePolicy": {"rules": rules}});
        assert_eq!(
            create_msgs(pfp(
                json!([{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}])
            )),
            [
                "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
            ]
        );
        assert_eq!(
            create_msgs(pfp(
                json!([{"action": "", "onExitCodes": {"operator": "In", "values": [0, 2, 2, 1], "containerName": "other"}}])
            )),
            [
                "spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
                "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"other\": must be one of the container or initContainer names in the pod template",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 2",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,2,2,1]: must be ordered",
            ]
        );
        assert_eq!(
            create_msgs(pfp(
                json!([{"action": "Ignore"}, {"action": "Bogus", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}],
                                      "onExitCodes": {"operator": "Sometimes", "values": []}}])
            )),
            [
                "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Bogus\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[1].onExitCodes.operator: Unsupported value: \"Sometimes\": supported values: \"In\", \"NotIn\"",
                "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []: at least one value is required",
                "spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "spec.podFailurePolicy.rules[1]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
            ]
        );
        let mut spec =
            pfp(json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]));
        spec["template"] = json!({"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}});
        spec["podReplacementPolicy"] = json!("TerminatingOrFailed");
        assert_eq!(
            create_msgs(spec),
            [
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
            ]
        );
    }

    #[test]
    fn restart_policy_and_replacement_policy() {
        let mut spec = json!({"template": {"spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "i"}]}}});
        spec["podReplacementPolicy"] = json!("Whenever");
        assert_eq!(
            create_msgs(spec),
            [
                "spec.podReplacementPolicy: Unsupported value: \"Whenever\": supported values: \"Failed\", \"TerminatingOrFailed\"",
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"",
            ]
        );
    }

    #[test]
    fn generated_selector_needs_the_generated_labels() {
        let mut job = test_job("j", json!({}));
        let labels = job["spec"]["template"]["metadata"]["labels"]
            .as_object_mut()
            .unwrap();
        labels.remove("job-name");
        labels.remove(CONTROLLER_UID_LABEL);
        let m: Vec<String> = validate_job(&job, Opts::for_job(None))
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            m,
            [
                "spec.template.metadata.labels[job-name]: Required value: must be 'j'",
                "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]: Required value: must be '00000000-0000-4000-8000-000000000001'",
                "spec.template.metadata.labels: Invalid value: {\"batch.kubernetes.io/job-name\":\"j\",\"controller-uid\":\"00000000-0000-4000-8000-000000000001\"}: `selector` does not match template `labels`",
            ]
        );
        // Without the prefixed labels on the old object (a Job from before 1.27) only the legacy ones
        // are required.
        let mut old = test_job("j", json!({}));
        old["spec"]["template"]["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove(JOB_NAME_LABEL);
        assert!(!Opts::for_job(Some(&old)).require_prefixed_labels);
        job["spec"]["manualSelector"] = json!(true);
        job["spec"]["selector"] = Value::Null;
        let m: Vec<String> = validate_job(&job, Opts::for_job(None))
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            m,
            [
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: {\"batch.kubernetes.io/job-name\":\"j\",\"controller-uid\":\"00000000-0000-4000-8000-000000000001\"}: `selector` does not match template `labels`",
            ]
        );
    }

    fn update_msgs(old: &Value, edit: impl Fn(&mut Value)) -> Vec<String> {
        let mut new = old.clone();
        edit(&mut new);
        let opts = Opts::for_job(Some(old));
        validate_job_update(&new, old, opts)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn immutable_fields() {
        let old = test_job(
            "j",
            json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 1,
                                       "successPolicy": {"rules": [{"succeededCount": 1}]}}),
        );
        assert_eq!(
            update_msgs(&old, |n| {
                n["spec"]["backoffLimitPerIndex"] = json!(2);
                n["spec"]["successPolicy"] = json!({"rules": [{"succeededCount": 2}]});
                n["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]});
                n["spec"]["podReplacementPolicy"] = json!("Failed");
            }),
            [
                "spec.podFailurePolicy: Invalid value: {\"Rules\":[{\"Action\":\"Ignore\",\"OnExitCodes\":{\"ContainerName\":null,\"Operator\":\"In\",\"Values\":[1]},\"OnPodConditions\":null}]}: field is immutable",
                "spec.backoffLimitPerIndex: Invalid value: 2: field is immutable",
                "spec.successPolicy: Invalid value: {\"Rules\":[{\"SucceededIndexes\":null,\"SucceededCount\":2}]}: field is immutable",
            ]
        );
        // Mutable: parallelism, suspend, activeDeadlineSeconds, backoffLimit, maxFailedIndexes, podReplacementPolicy.
        assert!(
            update_msgs(&old, |n| {
                n["spec"]["parallelism"] = json!(1);
                n["spec"]["suspend"] = json!(true);
                n["spec"]["activeDeadlineSeconds"] = json!(100);
                n["spec"]["backoffLimit"] = json!(1);
                n["spec"]["maxFailedIndexes"] = json!(1);
                n["spec"]["podReplacementPolicy"] = json!("Failed");
            })
            .is_empty()
        );
        assert!(
            update_msgs(&old, |n| {
                n["spec"]["completions"] = json!(4);
                n["spec"]["parallelism"] = json!(4);
            })
            .is_empty()
        );
    }

    #[test]
    fn scheduling_directives_are_mutable_only_while_suspended_and_idle() {
        let directives = |n: &mut Value| {
            let pod = &mut n["spec"]["template"]["spec"];
            pod["nodeSelector"] = json!({"zone": "a"});
            pod["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
            pod["schedulingGates"] = json!([{"name": "example.com/gate"}]);
            pod["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}});
            pod["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
            n["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
            n["spec"]["template"]["metadata"]["labels"]["extra"] = json!("x");
        };
        let suspended = test_job("j", json!({"suspend": true}));
        assert!(update_msgs(&suspended, directives).is_empty());
        let m = update_msgs(&suspended, |n| {
            n["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other")
        });
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with("spec.template.spec: Invalid value: {\"Volumes\":null,"),
            "{}",
            m[0]
        );
        // Started while suspended: only with Suspended=True and no active pods (1.36).
        let mut started = suspended.clone();
        started["status"] = json!({"startTime": "2025-06-01T10:00:00Z", "active": 1});
        assert_eq!(update_msgs(&started, directives).len(), 1);
        started["status"] = json!({"startTime": "2025-06-01T10:00:00Z",
                                   "conditions": [{"type": "Suspended", "status": "True"}]});
        assert!(update_msgs(&started, directives).is_empty());
        let running = test_job("j", json!({}));
        let m = update_msgs(&running, directives);
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with("spec.template: Invalid value: {\"labels\":{"),
            "{}",
            m[0]
        );
    }
}
