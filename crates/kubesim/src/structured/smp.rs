//! Strategic merge patch (`application/strategic-merge-patch+json`), behaving like
//! k8s.io/apimachinery/pkg/util/strategicpatch as the API server applies it (MergeParallelList and
//! IgnoreUnmatchedNulls on): maps merge recursively and `null` deletes; a list whose field has
//! `patchStrategy: merge` merges by its `patchMergeKey` (or, for scalars, as a de-duplicated union) and any
//! other list is replaced; the directives `$patch` (replace/delete/merge), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are honoured; merged lists keep the
//! patch's order, with items only on the server interleaved by their original order.
//!
//! Custom resources have no patch strategies and are refused with 415, like the real server.

use serde_json::{Map, Value};

use crate::errors::ApiError;
use crate::schema::model::PatchMeta;
use crate::schema::model::TypeId;
use crate::schema::{Schema, TypeRef};

mod lists;
mod patcher;
mod sort;

use patcher::Patcher;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Why a strategic merge patch failed, classified like the API server answers it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 415: the resource does not support strategic merge patch (custom resources).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    UnsupportedMediaType,
    /// 400: a malformed patch (bad directive formats, not a JSON object).
    #[error("{0}")]
    BadRequest(String),
    /// 422: lists of lists, or content outside the `$retainKeys` list.
    #[error("{0}")]
    Unprocessable(String),
    /// 500: anything else the patch library rejects (missing merge keys, unknown `$patch` values...).
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// The `metav1.Status` the server answers with.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            PatchError::UnsupportedMediaType => ApiError::unsupported_media_type(self.to_string()),
            PatchError::BadRequest(m) => ApiError::bad_request(m.clone()),
            PatchError::Unprocessable(_) => ApiError::new(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            )
            .with_details(serde_json::json!({})),
            PatchError::Internal(m) => ApiError::bare(500, m.clone()),
        }
    }
}

const ERR_BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";

fn bad(m: &str) -> PatchError {
    PatchError::BadRequest(m.to_string())
}

/// Applies `patch` to `original` (the stored object of type `t`) and returns the patched object.
pub fn strategic_merge(t: &TypeRef, original: &Value, patch: &Value) -> Result<Value, PatchError> {
    if t.is_custom() {
        return Err(PatchError::UnsupportedMediaType);
    }
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            crate::gojson::json_kind(patch)
        )));
    };
    let original = match original {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let p = Patcher { schema: t.schema() };
    Ok(Value::Object(p.merge_map(
        original,
        patch.clone(),
        Some(t.root()),
    )?))
}

/// Go's `%v` of a decoded JSON value (`map[a:1 b:x]`, `[a b]`, `<nil>`), used in error texts.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_v(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

fn go_map_v(m: &Map<String, Value>) -> String {
    go_v(&Value::Object(m.clone()))
}

/// Go's reflect type name of a decoded JSON value (for `ErrBadArgType`).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError::Internal(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

fn no_merge_key(m: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::Internal(format!(
        "map: {} does not contain declared merge key: {key}",
        go_map_v(m)
    ))
}

/// The kind of a Go value decoded from JSON, for "same type" checks (ints and floats differ).
#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Map,
    }
}

/// `discardNullValuesFromPatch`.
fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            for x in m.values_mut() {
                discard_nulls(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// `removeDirectives`: strips `$patch`-marked maps (the value is dropped when it is one itself).
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            let out: Map<String, Value> = m
                .into_iter()
                .filter_map(|(k, x)| remove_directives(x).map(|x| (k, x)))
                .collect();
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(
            a.into_iter().filter_map(remove_directives).collect(),
        )),
        v => Some(v),
    }
}

fn extract_key<'a>(key: &'a str, prefix: &str, err: &str) -> Result<&'a str, PatchError> {
    match key.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest),
        _ => Err(bad(err)),
    }
}

/// `extractRetainKeysPatchStrategy`: (has retainKeys, the other strategy).
fn split_strategies(meta: &PatchMeta) -> Result<(bool, String), PatchError> {
    let s: Vec<&str> = meta.strategies.iter().map(|s| &**s).collect();
    match s.as_slice() {
        [] => Ok((false, String::new())),
        ["retainKeys"] => Ok((true, String::new())),
        [one] => Ok((false, (*one).to_string())),
        ["retainKeys", other] | [other, "retainKeys"] => Ok((true, (*other).to_string())),
        _ => Err(PatchError::Internal(format!(
            "unexpected patch strategy: {:?}",
            s
        ))),
    }
}
