//! List helpers of the patcher: merge-key lookup, directive lists, de-duplication, partitions
//! and element order.

use super::sort::{go_stable_sort, merge_sorted};
use super::*;

/// Equality of merge-key values and primitive items as Go's `==` on decoded JSON (scalars only).
pub(super) fn go_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.is_f64() == y.is_f64() && x == y,
        _ => a == b,
    }
}

pub(super) fn find_by_key(
    list: &[Value],
    key: &str,
    value: &Value,
) -> Result<Option<usize>, PatchError> {
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
pub(super) fn merge_special_elements(
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

pub(super) fn delete_from_slice(current: &[Value], to_delete: &[Value]) -> Vec<Value> {
    current
        .iter()
        .filter(|v| !to_delete.iter().any(|d| go_eq(d, v)))
        .cloned()
        .collect()
}

/// `deduplicateScalars` (keeps Go's in-place swap order).
pub(super) fn deduplicate_scalars(mut s: Vec<Value>) -> Vec<Value> {
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
pub(super) fn slice_element_kind(lists: &[&[Value]]) -> Result<Kind, PatchError> {
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

pub(super) fn partition_primitives(original: &[Value], by: &[Value]) -> (Vec<Value>, Vec<Value>) {
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

pub(super) fn partition_maps(
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
pub(super) fn validate_set_order(
    patch: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Result<(), PatchError> {
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
pub(super) fn index_of(l: &[Value], v: &Value, merge_key: &str, k: Kind) -> Option<usize> {
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
pub(super) fn normalize_element_order(
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

pub(super) fn normalize_slice_order(
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
