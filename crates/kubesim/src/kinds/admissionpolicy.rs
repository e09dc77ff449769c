//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! (cluster-scoped). kubesim stores them like the real server and evaluates them on writes (see
//! `crate::admission::policy`).
//!
//! Defaulting follows `pkg/apis/admissionregistration/v1/defaults.go` (failurePolicy `Fail`,
//! matchPolicy `Equivalent`, empty namespace/object selectors, rule scope `*`). Validation is the
//! part of `pkg/apis/admissionregistration/validation` a policy author trips over: required fields,
//! enum values, and expressions that must compile (the real server type-checks them; kubesim only
//! parses, with the `cel` crate). One deliberate difference: a policy with `spec.paramKind` is
//! refused (422 naming the field), because kubesim cannot resolve parameters and a policy silently
//! evaluated without them would prove nothing.

use serde_json::{Value, json};

use super::common::{self, child, index};
use super::{ResourceInfo, Strategy};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::ensure_obj;

const GROUP: &str = "admissionregistration.k8s.io";

fn info(kind: &str, plural: &str, status: bool) -> ResourceInfo {
    ResourceInfo {
        group: GROUP.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced: false,
        short_names: Vec::new(),
        categories: vec!["api-extensions".into()],
        verbs: super::common::standard_verbs(),
        status_subresource: status,
        storage_version_hash: None,
    }
}

pub struct PolicyStrategy {
    info: ResourceInfo,
}

impl Default for PolicyStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicyStrategy {
    pub fn new() -> Self {
        Self {
            info: info(
                "ValidatingAdmissionPolicy",
                "validatingadmissionpolicies",
                true,
            ),
        }
    }
}

pub struct BindingStrategy {
    info: ResourceInfo,
}

impl Default for BindingStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl BindingStrategy {
    pub fn new() -> Self {
        Self {
            info: info(
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
                false,
            ),
        }
    }
}

/// `SetDefaults_MatchResources` and `SetDefaults_NamedRuleWithOperations`.
fn default_match_resources(m: &mut Value) {
    let Some(o) = m.as_object_mut() else { return };
    o.entry("matchPolicy").or_insert(json!("Equivalent"));
    o.entry("namespaceSelector").or_insert(json!({}));
    o.entry("objectSelector").or_insert(json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        if let Some(Value::Array(rules)) = o.get_mut(key) {
            for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                r.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

fn set_generation(new: &mut Value, old: Option<&Value>) {
    let generation = match old {
        None => 1,
        Some(old) => {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if new.get("spec") != old.get("spec") {
                g + 1
            } else {
                g
            }
        }
    };
    if let Some(meta) = ensure_obj(new, "metadata") {
        meta.insert("generation".into(), json!(generation));
    }
}

fn required(errs: &mut FieldErrors, obj: &Value, path: &[&str]) -> bool {
    let present = path
        .iter()
        .try_fold(obj, |v, k| v.get(*k))
        .is_some_and(|v| !v.is_null() && v != &json!([]) && v != &json!(""));
    if !present {
        errs.push(FieldError::required(path.join("."), ""));
    }
    present
}

fn one_of(errs: &mut FieldErrors, field: &str, v: Option<&Value>, allowed: &[&str]) {
    if let Some(v) = v
        && !allowed.iter().any(|a| v == &json!(a))
    {
        errs.push(FieldError::not_supported(
            field,
            BadValue::from_json(v),
            allowed,
        ));
    }
}

/// A CEL expression at `field` that must parse.
fn expression(errs: &mut FieldErrors, field: &str, expr: Option<&Value>) {
    match expr.and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(field, "")),
        Some(e) => {
            if let Err(why) = crate::admission::cel::compile(e) {
                errs.push(FieldError::invalid(
                    field,
                    BadValue::Str(e.to_string()),
                    format!("compilation failed: {why}"),
                ));
            }
        }
    }
}

fn validate_rules(errs: &mut FieldErrors, parent: &str, m: &Value, need_rules: bool) {
    let rules = m.get("resourceRules").and_then(Value::as_array);
    if need_rules && rules.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(child(parent, "resourceRules"), ""));
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in m
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = index(&child(parent, key), i);
            for list in ["apiGroups", "apiVersions", "operations", "resources"] {
                if r.get(list)
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                {
                    errs.push(FieldError::required(child(&at, list), ""));
                }
            }
            for (j, op) in r
                .get("operations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                one_of(
                    errs,
                    &index(&child(&at, "operations"), j),
                    Some(op),
                    &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
                );
            }
            one_of(
                errs,
                &child(&at, "scope"),
                r.get("scope"),
                &["*", "Cluster", "Namespaced"],
            );
        }
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = m.get(sel)
            && crate::validation::selector::parse(Some(s)).is_err()
        {
            errs.push(FieldError::invalid(
                child(parent, sel),
                BadValue::Omit,
                "not a valid label selector",
            ));
        }
    }
}

fn validate_policy(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
        errs.push(FieldError::forbidden(
            "spec.paramKind",
            "kubesim does not evaluate policies with parameters (paramKind/paramRef); write the \
             values into the policy's expressions instead",
        ));
    }
    if required(&mut errs, obj, &["spec", "matchConstraints"]) {
        validate_rules(
            &mut errs,
            "spec.matchConstraints",
            &spec["matchConstraints"],
            true,
        );
    }
    one_of(
        &mut errs,
        "spec.failurePolicy",
        spec.get("failurePolicy"),
        &["Fail", "Ignore"],
    );
    let validations = spec.get("validations").and_then(Value::as_array);
    let audits = spec.get("auditAnnotations").and_then(Value::as_array);
    if validations.is_none_or(Vec::is_empty) && audits.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in validations.into_iter().flatten().enumerate() {
        let at = index("spec.validations", i);
        expression(&mut errs, &child(&at, "expression"), v.get("expression"));
        if let Some(m) = v.get("messageExpression").filter(|m| !m.is_null()) {
            expression(&mut errs, &child(&at, "messageExpression"), Some(m));
        }
        one_of(
            &mut errs,
            &child(&at, "reason"),
            v.get("reason"),
            &[
                "Unauthorized",
                "Forbidden",
                "Invalid",
                "RequestEntityTooLarge",
            ],
        );
    }
    for key in ["matchConditions", "variables"] {
        for (i, v) in spec
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = index(&format!("spec.{key}"), i);
            if v.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::required(child(&at, "name"), ""));
            }
            expression(&mut errs, &child(&at, "expression"), v.get("expression"));
        }
    }
    errs
}

fn validate_binding(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    required(&mut errs, obj, &["spec", "policyName"]);
    if required(&mut errs, obj, &["spec", "validationActions"]) {
        let actions: Vec<&Value> = spec["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        for (i, a) in actions.iter().enumerate() {
            one_of(
                &mut errs,
                &index("spec.validationActions", i),
                Some(a),
                &["Audit", "Deny", "Warn"],
            );
            if actions[..i].contains(a) {
                errs.push(FieldError::duplicate(
                    index("spec.validationActions", i),
                    BadValue::from_json(a),
                ));
            }
        }
        if actions.contains(&&json!("Deny")) && actions.contains(&&json!("Warn")) {
            errs.push(FieldError::invalid(
                "spec.validationActions",
                BadValue::Omit,
                "must not contain both Deny and Warn (repeating the same validation failure \
                 information in the API response and headers serves no purpose)",
            ));
        }
    }
    if let Some(m) = spec.get("matchResources").filter(|m| !m.is_null()) {
        validate_rules(&mut errs, "spec.matchResources", m, false);
    }
    errs
}

impl Strategy for PolicyStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        spec.entry("failurePolicy").or_insert(json!("Fail"));
        if let Some(m) = spec.get_mut("matchConstraints") {
            default_match_resources(m);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
        set_generation(obj, None);
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_policy(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        common::keep_stored(new, old, "status");
        set_generation(new, Some(old));
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate_policy(new)
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        if let Some(m) = new.as_object_mut() {
            m.insert(
                "spec".into(),
                old.get("spec").cloned().unwrap_or(Value::Null),
            );
        }
    }
}

impl Strategy for BindingStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        if let Some(m) = obj.pointer_mut("/spec/matchResources") {
            default_match_resources(m);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_generation(obj, None);
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_binding(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_generation(new, Some(old));
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate_binding(new)
    }
}
