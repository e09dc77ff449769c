//! Generic validation shared by every kind: name formats, labels, annotations, finalizers, owner
//! references and the `ObjectMeta` rules the real API server applies on create and update, with
//! apimachinery's exact wording (`k8s.io/apimachinery/pkg/util/validation`,
//! `.../api/validation/objectmeta.go`, `.../apis/meta/v1/validation`).

pub mod meta;
pub mod names;
pub mod path;
pub mod selector;

pub use meta::{
    MetaOptions, NameRule, validate_annotations, validate_finalizers, validate_labels,
    validate_object_meta_create, validate_object_meta_create_with, validate_object_meta_update,
    validate_object_meta_update_core, validate_owner_references,
};

use serde_json::{Map, Value};

/// Whether a field is absent or JSON null (both decode to a Go nil / zero value).
pub fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// The keys of a map in sorted order (Go iterates maps randomly; sorted keeps kubesim deterministic).
pub fn sorted_keys(m: &Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys
}

/// How Go prints a `metav1.Time` inside a field error: its JSON form, RFC 3339 in UTC at second
/// precision (`"2025-06-01T10:00:00Z"`). An unparsable value is shown as the string it was.
pub fn time_bad_value(raw: &str) -> crate::errors::BadValue {
    match crate::time::parse(raw) {
        Some(t) => crate::errors::BadValue::Raw(format!("\"{}\"", crate::time::format(t))),
        None => crate::errors::BadValue::Str(raw.to_string()),
    }
}

/// Whether two optional `metav1.Time` values are equal the way Go compares them (same instant).
pub fn times_equal(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => match (crate::time::parse(x), crate::time::parse(y)) {
            (Some(tx), Some(ty)) => tx == ty,
            _ => x == y,
        },
        _ => false,
    }
}

/// `apiequality.Semantic.DeepEqual` on decoded JSON: an absent field equals null (both decode to a Go
/// zero value), and an empty list equals an absent one (apimachinery's DeepEqual treats nil and empty
/// slices alike). Objects are compared key by key with the same rule.
pub fn semantic_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn unset(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        }
    }
    match (a, b) {
        _ if unset(a) && unset(b) => true,
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.iter().all(|(k, v)| semantic_eq(Some(v), y.get(k)))
                && y.iter()
                    .filter(|(k, _)| !x.contains_key(*k))
                    .all(|(_, v)| unset(Some(v)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(Some(p), Some(q)))
        }
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}
