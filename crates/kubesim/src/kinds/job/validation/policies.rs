//! The Job's failure and success policies (`validatePodFailurePolicy`, `validateSuccessPolicy` in
//! `pkg/apis/batch/validation/validation.go`).

use serde_json::Value;

use super::super::indexes::IndexSet;
use super::{
    MAX_ON_EXIT_CODES_VALUES, MAX_ON_POD_CONDITIONS_PATTERNS, MAX_POD_FAILURE_POLICY_RULES,
    MAX_SUCCEEDED_INDEXES_LENGTH, MAX_SUCCESS_POLICY_RULES, NON_NEGATIVE,
};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_i64, get_str};

const PFP_ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quote_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| crate::errors::go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

/// `validatePodFailurePolicy`.
pub(super) fn validate_pod_failure_policy(spec: &Value, pfp: &Value) -> FieldErrors {
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
pub(super) fn validate_success_policy(sp: &Value, completions: Option<i64>) -> FieldErrors {
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
