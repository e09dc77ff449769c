//! core/v1 ResourceQuota (namespaced, with a status subresource). kubesim enforces object-count
//! quotas (`count/<resource>.<group>`, `count/<resource>` for the core group) on creates, and keeps
//! `status.hard`/`status.used` current itself (see `crate::admission::quota`); compute-resource
//! quotas (`cpu`, `memory`, `pods`, ...) are stored but not enforced.
//!
//! Validation from `pkg/apis/core/validation` (`ValidateResourceQuota`): each `spec.hard` value must be
//! a non-negative quantity; kubesim accepts plain integers (what object counts are) and strings of digits.

use serde_json::{Value, json};

use super::common::key;
use super::{ResourceInfo, Strategy};
use crate::errors::{BadValue, FieldError, FieldErrors};

pub struct ResourceQuotaStrategy {
    info: ResourceInfo,
}

impl Default for ResourceQuotaStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl ResourceQuotaStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "ResourceQuota".into(),
                plural: "resourcequotas".into(),
                singular: "resourcequota".into(),
                namespaced: true,
                short_names: vec!["quota".into()],
                categories: Vec::new(),
                verbs: super::common::standard_verbs(),
                status_subresource: true,
                storage_version_hash: Some("8uhSgffRX6w=".into()),
            },
        }
    }
}

/// A quantity as a whole number, when it is one (`"2"`, `2`).
pub fn whole_quantity(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn validate(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    if let Some(hard) = obj.pointer("/spec/hard").and_then(Value::as_object) {
        for (k, v) in hard {
            let field = key("spec.hard", k);
            match v {
                Value::Number(_) | Value::String(_) => {
                    if whole_quantity(v).is_some_and(|n| n < 0) {
                        errs.push(FieldError::invalid(
                            field,
                            BadValue::from_json(v),
                            "must be greater than or equal to 0",
                        ));
                    }
                }
                other => errs.push(FieldError::invalid(
                    field,
                    BadValue::from_json(other),
                    "quantities must match the regular expression \
                     '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )),
            }
        }
    }
    errs
}

impl Strategy for ResourceQuotaStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if let Some(m) = new.as_object_mut() {
            m.insert(
                "status".into(),
                old.get("status").cloned().unwrap_or(json!({})),
            );
        }
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate(new)
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        if let Some(m) = new.as_object_mut() {
            m.insert("spec".into(), old.get("spec").cloned().unwrap_or(json!({})));
        }
    }
}
