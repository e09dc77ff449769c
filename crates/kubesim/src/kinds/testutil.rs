//! Test helpers: reading the recorded steps and building the Status bodies the strategies' errors
//! turn into, for exact comparison with the recordings.

use serde_json::Value;

use crate::errors::{ApiError, FieldError};
use crate::testdata::fixtures_dir;

/// A recorded scenario (`testdata/apiserver/<name>`).
pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir("apiserver").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

/// The step of a scenario by name (panics, naming the step, when it is missing).
pub fn step<'a>(fixture: &'a Value, name: &str) -> &'a Value {
    fixture["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no step {name:?} in {}", fixture["scenario"]))
}

/// The 422 Status body the generic flow answers for `errs` on `obj` (`errors.NewInvalid`).
pub fn invalid_status(group: &str, kind: &str, obj: &Value, errs: &[FieldError]) -> Value {
    assert!(!errs.is_empty(), "expected validation errors");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    ApiError::invalid(group, kind, name, errs).to_status()
}

/// Replaces the recording's `${ns}`-style placeholders the way the normaliser wrote them, so request
/// bodies can be fed to the strategies: `${ns}` becomes the scenario's normalised namespace.
pub fn fill(body: &Value, ns: &str) -> Value {
    match body {
        Value::String(s) => Value::String(s.replace("${ns}", ns)),
        Value::Array(a) => Value::Array(a.iter().map(|x| fill(x, ns)).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), fill(v, ns))).collect())
        }
        other => other.clone(),
    }
}

/// Sets `metadata.namespace` (and name defaults) the way the request flow does before validation.
pub fn in_namespace(mut obj: Value, ns: &str) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    }
    obj
}
