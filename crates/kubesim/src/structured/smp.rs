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

struct Patcher<'a> {
    schema: &'a Schema,
}

impl Patcher<'_> {
    fn struct_name(&self, ty: Option<TypeId>) -> String {
        ty.and_then(|t| self.schema.get(t).name.as_deref())
            .unwrap_or("")
            .to_string()
    }

    /// `LookupPatchMetadataForStruct`: the type and patch metadata of field `key` of `ty`.
    fn lookup_struct(
        &self,
        ty: Option<TypeId>,
        key: &str,
    ) -> Result<(Option<TypeId>, PatchMeta), PatchError> {
        let Some(t) = ty else {
            return Ok((None, PatchMeta::default()));
        };
        let def = self.schema.get(t);
        match &def.map {
            Some(m) => match m.field(key) {
                Some(f) => Ok((Some(f.ty), f.patch.clone())),
                None => match m.elem {
                    Some(e) => Ok((Some(e), PatchMeta::default())),
                    None => Err(PatchError::Internal(format!(
                        "unable to find api field in struct {} for the json field {}",
                        self.struct_name(ty),
                        crate::errors::go_quote(key)
                    ))),
                },
            },
            None if def.scalar.is_some() || def.list.is_some() => Err(PatchError::Internal(
                "merging an object in json but data type is not map or struct".to_string(),
            )),
            None => Ok((None, PatchMeta::default())),
        }
    }

    /// `LookupPatchMetadataForSlice`: the element type of list field `key`.
    fn lookup_slice(
        &self,
        ty: Option<TypeId>,
        key: &str,
    ) -> Result<(Option<TypeId>, PatchMeta), PatchError> {
        let (sub, meta) = self.lookup_struct(ty, key)?;
        let elem = sub.and_then(|s| self.schema.get(s).list.as_ref().map(|l| l.elem));
        Ok((elem, meta))
    }

    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        ty: Option<TypeId>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(d) = patch.get(DIRECTIVE) {
            return match d.as_str() {
                Some("replace") => {
                    patch.remove(DIRECTIVE);
                    Ok(patch)
                }
                Some("delete") => Ok(Map::new()),
                _ => Err(PatchError::Internal(format!(
                    "unknown patch type: {} in map: {}",
                    go_v(d),
                    go_map_v(&patch)
                ))),
            };
        }
        self.apply_retain_keys(&mut original, &mut patch)?;
        self.merge_set_element_order(&mut original, &mut patch, ty)?;
        for (k, patch_v) in patch {
            let (key, is_delete) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                (
                    extract_key(&k, DELETE_FROM_PRIMITIVE_LIST, ERR_BAD_PRIMITIVE_LIST)?
                        .to_string(),
                    true,
                )
            } else {
                (k, false)
            };
            if patch_v.is_null() {
                original.remove(&key);
                continue;
            }
            let same_kind = original.get(&key).map(|o| kind(o) == kind(&patch_v));
            match same_kind {
                None | Some(false) => {
                    // Not in the original, or a different type: take the patch value (minus directives
                    // and nulls). A deletion list for a missing list does nothing.
                    if !is_delete {
                        let mut v = patch_v;
                        discard_nulls(&mut v);
                        match remove_directives(v) {
                            Some(v) => {
                                original.insert(key, v);
                            }
                            None => {
                                original.remove(&key);
                            }
                        }
                    }
                }
                Some(true) => {
                    let orig_v = original.remove(&key).unwrap_or(Value::Null);
                    let merged = match (orig_v, patch_v) {
                        (Value::Object(o), Value::Object(p)) => {
                            let (sub, meta) = self.lookup_struct(ty, &key)?;
                            let (_, strategy) = split_strategies(&meta)?;
                            if strategy == "replace" {
                                Some(Value::Object(p))
                            } else {
                                Some(Value::Object(self.merge_map(o, p, sub)?))
                            }
                        }
                        (Value::Array(o), Value::Array(p)) => {
                            let (elem, meta) = self.lookup_slice(ty, &key)?;
                            let (_, strategy) = split_strategies(&meta)?;
                            let merge_key = meta.merge_key.as_deref().unwrap_or("");
                            if strategy == "merge" || is_delete {
                                Some(Value::Array(
                                    self.merge_slice(o, p, elem, merge_key, is_delete)?,
                                ))
                            } else {
                                Some(Value::Array(p))
                            }
                        }
                        (_, p) => remove_directives(p),
                    };
                    if let Some(v) = merged {
                        original.insert(key, v);
                    }
                }
            }
        }
        Ok(original)
    }

    /// `applyRetainKeysDirective`.
    fn apply_retain_keys(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<(), PatchError> {
        let Some(retain) = patch.remove(RETAIN_KEYS) else {
            return Ok(());
        };
        let Value::Array(list) = retain else {
            return Err(bad(ERR_BAD_RETAIN_KEYS));
        };
        let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        for (k, v) in patch.iter() {
            if v.is_null()
                || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                || k.starts_with(SET_ELEMENT_ORDER)
            {
                continue;
            }
            if !keep.contains(&k.as_str()) {
                return Err(bad(ERR_BAD_RETAIN_KEYS));
            }
        }
        original.retain(|k, _| keep.contains(&k.as_str()));
        Ok(())
    }

    /// `mergePatchIntoOriginal`: lists with a `$setElementOrder/<field>` directive are merged here and
    /// ordered by it.
    fn merge_set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        ty: Option<TypeId>,
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for key in keys {
            let Some(order_v) = patch.remove(&key) else {
                continue;
            };
            let Value::Array(order) = order_v else {
                return Err(bad_arg_type("[]interface {}", &order_v));
            };
            let original_key =
                extract_key(&key, SET_ELEMENT_ORDER, ERR_BAD_SET_ELEMENT_ORDER)?.to_string();
            let original_list = match original.get(&original_key) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            };
            let patch_list = match patch.get(&original_key) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            };
            let (elem, meta) = self.lookup_slice(ty, &original_key)?;
            let (_, strategy) = split_strategies(&meta)?;
            let merge_key = meta.merge_key.as_deref().unwrap_or("");
            validate_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
            let merged = match (&original_list, &patch_list) {
                (Some(o), None) => o.clone(),
                (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                    Some(Value::Array(a)) => a,
                    _ => continue,
                },
                (Some(o), Some(p)) => {
                    if strategy == "merge" {
                        self.merge_slice(o.clone(), p.clone(), elem, merge_key, false)?
                    } else {
                        p.clone()
                    }
                }
                (None, None) => continue,
            };
            let (patch_items, server_only) = if merge_key.is_empty() {
                partition_primitives(&merged, &order)
            } else {
                partition_maps(&merged, &order, merge_key)?
            };
            let elem_kind = slice_element_kind(&[
                original_list.as_deref().unwrap_or(&[]),
                patch_list.as_deref().unwrap_or(&[]),
            ])?;
            let both = normalize_element_order(
                patch_items,
                server_only,
                &order,
                original_list.as_deref().unwrap_or(&[]),
                merge_key,
                elem_kind,
            )?;
            original.insert(original_key.clone(), Value::Array(both));
            patch.remove(&original_key);
        }
        Ok(())
    }

    fn merge_slice(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        elem: Option<TypeId>,
        merge_key: &str,
        is_delete: bool,
    ) -> Result<Vec<Value>, PatchError> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let k = slice_element_kind(&[&original, &patch])?;
        let (original, patch, merged) = if k != Kind::Map {
            if is_delete {
                return Ok(delete_from_slice(&original, &patch));
            }
            let mut both = original.clone();
            both.extend(patch.iter().cloned());
            let merged = deduplicate_scalars(both);
            (original, patch, merged)
        } else {
            if merge_key.is_empty() {
                return Err(PatchError::Internal(format!(
                    "cannot merge lists without merge key for {}",
                    self.struct_name(elem)
                )));
            }
            let (original, patch) = merge_special_elements(original, patch, merge_key)?;
            let merged = self.merge_without_special(original.clone(), &patch, merge_key, elem)?;
            (original, patch, merged)
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(&merged, &patch)
        } else {
            partition_maps(&merged, &patch, merge_key)?
        };
        normalize_element_order(patch_items, server_only, &patch, &original, merge_key, k)
    }

    /// `mergeSliceWithoutSpecialElements`.
    fn merge_without_special(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        elem: Option<TypeId>,
    ) -> Result<Vec<Value>, PatchError> {
        for v in patch {
            let Value::Object(pm) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            let Some(mv) = pm.get(merge_key) else {
                return Err(no_merge_key(pm, merge_key));
            };
            match find_by_key(&original, merge_key, mv)? {
                Some(i) => {
                    let om = match std::mem::take(&mut original[i]) {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    original[i] = Value::Object(self.merge_map(om, pm.clone(), elem)?);
                }
                None => original.push(v.clone()),
            }
        }
        Ok(original)
    }
}

/// Equality of merge-key values and primitive items as Go's `==` on decoded JSON (scalars only).
fn go_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.is_f64() == y.is_f64() && x == y,
        _ => a == b,
    }
}

fn find_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>, PatchError> {
    for (i, v) in list.iter().enumerate() {
        let Value::Object(m) = v else {
            return Err(PatchError::Internal(format!(
                "value for key {i} is not a map"
            )));
        };
        if m.get(key).is_some_and(|x| go_eq(x, value)) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// `mergeSliceWithSpecialElements`: `$patch: delete` items remove their key from the original,
/// `$patch: replace` makes the patch (without directive items) the whole list.
fn merge_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut rest = Vec::new();
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = &v else {
            rest.push(v);
            continue;
        };
        match m.get(DIRECTIVE) {
            None => rest.push(v),
            Some(d) => match d.as_str() {
                Some("delete") => match m.get(merge_key) {
                    Some(mv) => {
                        while let Some(i) = find_by_key(&original, merge_key, mv)? {
                            original.remove(i);
                        }
                    }
                    None => return Err(no_merge_key(m, merge_key)),
                },
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(PatchError::Internal(
                        "merging lists cannot yet be specified in the patch".to_string(),
                    ));
                }
                _ => {
                    return Err(PatchError::Internal(format!(
                        "unknown patch type: {} in map: {}",
                        go_v(d),
                        go_map_v(m)
                    )));
                }
            },
        }
    }
    if replace {
        return Ok((rest, Vec::new()));
    }
    Ok((original, rest))
}

fn delete_from_slice(current: &[Value], to_delete: &[Value]) -> Vec<Value> {
    current
        .iter()
        .filter(|v| !to_delete.iter().any(|d| go_eq(d, v)))
        .cloned()
        .collect()
}

/// `deduplicateScalars` (keeps Go's in-place swap order).
fn deduplicate_scalars(mut s: Vec<Value>) -> Vec<Value> {
    if s.is_empty() {
        return s;
    }
    let mut length = s.len() - 1;
    let mut i = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if go_eq(&s[i], &s[j]) {
                s[j] = s[length].clone();
                s.truncate(length);
                length -= 1;
                continue;
            }
            j += 1;
        }
        i += 1;
    }
    s
}

/// `sliceElementType`: every item of every list has the same kind, which is not a list.
fn slice_element_kind(lists: &[&[Value]]) -> Result<Kind, PatchError> {
    let mut prev: Option<Kind> = None;
    for l in lists {
        for v in l.iter() {
            let k = kind(v);
            match prev {
                None => {
                    if k == Kind::List {
                        return Err(PatchError::Unprocessable(ERR_NO_LIST_OF_LISTS.to_string()));
                    }
                    prev = Some(k);
                }
                Some(p) if p != k => {
                    let all: Vec<String> = lists
                        .iter()
                        .map(|l| go_v(&Value::Array(l.to_vec())))
                        .collect();
                    return Err(PatchError::Internal(format!(
                        "list element types are not identical: {}",
                        all.join(" ")
                    )));
                }
                Some(_) => {}
            }
        }
    }
    prev.ok_or_else(|| PatchError::Internal("no elements in any of the given slices".to_string()))
}

fn partition_primitives(original: &[Value], by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let mut patch = Vec::new();
    let mut server = Vec::new();
    for v in original {
        if by.iter().any(|b| go_eq(b, v)) {
            patch.push(v.clone());
        } else {
            server.push(v.clone());
        }
    }
    (patch, server)
}

fn partition_maps(
    original: &[Value],
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut patch = Vec::new();
    let mut server = Vec::new();
    for v in original {
        let Value::Object(m) = v else {
            return Err(bad_arg_type("map[string]interface {}", v));
        };
        let Some(mv) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        if find_by_key(by, merge_key, mv)?.is_some() {
            patch.push(v.clone());
        } else {
            server.push(v.clone());
        }
    }
    Ok((patch, server))
}

/// `validatePatchWithSetOrderList`: the patch list's items appear in the `$setElementOrder` list, in
/// the same relative order.
fn validate_set_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<(), PatchError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        let mut v = Vec::new();
        for item in patch {
            let Value::Object(m) = item else {
                return Err(bad_arg_type("map[string]interface {}", item));
            };
            if m.get(DIRECTIVE).and_then(Value::as_str) != Some("delete") {
                v.push(item);
            }
        }
        v
    };
    let (mut pi, mut oi) = (0, 0);
    while pi < non_delete.len() && oi < order.len() {
        if matches!(non_delete[pi], Value::Object(m) if m.contains_key(DIRECTIVE)) {
            pi += 1;
            continue;
        }
        let equal = if merge_key.is_empty() {
            go_eq(non_delete[pi], &order[oi])
        } else {
            let (Value::Object(l), Value::Object(r)) = (non_delete[pi], &order[oi]) else {
                return Err(bad_arg_type("map[string]interface {}", &order[oi]));
            };
            let lv = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
            let rv = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
            go_eq(lv, rv)
        };
        if equal {
            pi += 1;
        }
        oi += 1;
    }
    if pi < non_delete.len() && oi >= order.len() {
        return Err(PatchError::Internal(format!(
            "the order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}",
            go_v(&Value::Array(patch.to_vec())),
            go_v(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

/// `index`: position of `v` in `l`, by merge key for maps.
fn index_of(l: &[Value], v: &Value, merge_key: &str, k: Kind) -> Option<usize> {
    let key_of = |x: &Value| -> Value {
        if k == Kind::Map {
            x.get(merge_key).cloned().unwrap_or(Value::Null)
        } else {
            x.clone()
        }
    };
    let want = key_of(v);
    l.iter().position(|x| go_eq(&key_of(x), &want))
}

/// `normalizeElementOrder`: patch items in patch order, server-only items in server order, merged.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    k: Kind,
) -> Result<Vec<Value>, PatchError> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, k)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, k)?;
    Ok(merge_sorted(server_only, patch, server_order, merge_key, k))
}

fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    k: Kind,
) -> Result<Vec<Value>, PatchError> {
    let (mut items, to_delete) = if k == Kind::Map {
        for l in [&to_sort[..], order] {
            for item in l {
                let Value::Object(m) = item else {
                    return Err(bad_arg_type("map[string]interface {}", item));
                };
                if !m.contains_key(merge_key) {
                    return Err(no_merge_key(m, merge_key));
                }
            }
        }
        let (del, keep): (Vec<Value>, Vec<Value>) = to_sort
            .into_iter()
            .partition(|v| v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete"));
        (keep, del)
    } else {
        (to_sort, Vec::new())
    };
    let less = |items: &[Value], i: usize, j: usize| -> bool {
        match index_of(order, &items[i], merge_key, k) {
            Some(ii) => match index_of(order, &items[j], merge_key, k) {
                Some(ij) => ii < ij,
                None => true,
            },
            None => true,
        }
    };
    go_stable_sort(&mut items, &less);
    items.extend(to_delete);
    Ok(items)
}

/// `mergeSortedSlice`: interleaves server-only items (left) into the patch items (right) where the
/// original order puts them.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    k: Kind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        let li = index_of(server_order, &left[i], merge_key, k);
        let ri = index_of(server_order, &right[j], merge_key, k);
        match (li, ri) {
            (Some(a), Some(b)) if a < b => {
                out.push(left[i].clone());
                i += 1;
            }
            _ => {
                out.push(right[j].clone());
                j += 1;
            }
        }
    }
    out.extend(left[i..].iter().cloned());
    out.extend(right[j..].iter().cloned());
    out
}

/// Go's `sort.SliceStable` (insertion sort on blocks of 20, then SymMerge). The comparator used by
/// strategic merge patch is not a strict weak order when items are missing from the order list, so the
/// exact algorithm matters for the result.
fn go_stable_sort<F>(data: &mut [Value], less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, less);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b, less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, less);
        }
        block *= 2;
    }
}

fn insertion_sort<F>(data: &mut [Value], a: usize, b: usize, less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(data, j, j - 1) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge<F>(data: &mut [Value], a: usize, m: usize, b: usize, less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(data, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = a;
        while k + 1 < i {
            data.swap(k, k + 1);
            k += 1;
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(data, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(data, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

fn rotate(data: &mut [Value], a: usize, m: usize, b: usize) {
    let mut i = m - a;
    let mut j = b - m;
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

fn swap_range(data: &mut [Value], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}
