//! Small accessors on decoded JSON objects, shared by every module (kinds, validation, the request
//! flow, controllers, the Job model).
//!
//! Two flavours: `get*` answer `None` when any step of the path is missing or has another type;
//! `str_at` / `meta_str` / `bool_at` answer Go's zero value instead (`""`, `false`), the way a
//! typed Go struct reads an absent field.

use serde_json::{Map, Value};

/// `obj[a][b]...`, `None` when any step is missing or not an object.
pub fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object()?.get(*p)?;
    }
    Some(cur)
}

/// A string field; `None` when missing, null or not a string.
pub fn get_str<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    get(v, path).and_then(Value::as_str)
}

/// An integer field; `None` when missing, null or not an integer.
pub fn get_i64(v: &Value, path: &[&str]) -> Option<i64> {
    get(v, path).and_then(Value::as_i64)
}

/// A bool field; `None` when missing, null or not a bool.
pub fn get_bool(v: &Value, path: &[&str]) -> Option<bool> {
    get(v, path).and_then(Value::as_bool)
}

/// An object field; `None` when missing, null or not an object.
pub fn get_obj<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    get(v, path).and_then(Value::as_object)
}

/// An array field; `None` when missing, null or not an array.
pub fn get_arr<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Vec<Value>> {
    get(v, path).and_then(Value::as_array)
}

/// The string at `obj[path...]`, or `""` (Go's zero value) when absent or not a string.
pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get_str(v, path).unwrap_or("")
}

/// The bool at `obj[path...]`, or `false` (Go's zero value) when absent or not a bool.
pub fn bool_at(v: &Value, path: &[&str]) -> bool {
    get_bool(v, path).unwrap_or(false)
}

/// `metadata.<key>` as a string, `""` when absent.
pub fn meta_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    str_at(obj, &["metadata", key])
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `metadata.finalizers` (the string entries).
pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(obj.pointer("/metadata/finalizers"))
}

/// The string entries of `list` when it is an array (none otherwise).
pub fn strings(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Mutable access to `obj[key]` as an object, creating it (or replacing a non-object) if needed;
/// `None` when `obj` itself is not an object.
pub fn ensure_obj<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    ensure_obj_in(obj.as_object_mut()?, key)
}

/// [`ensure_obj`] on a map.
pub fn ensure_obj_in<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let e = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut()
}

/// Whether `a` and `b` are the same JSON, serialised byte for byte alike: `==` with a float's sign
/// compared too (`==` holds `0.0 == -0.0`, which serialise differently). An integer and a float
/// of the same value are different here, as they are to `==`.
pub fn identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y && x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| identical(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, x), (ky, y))| kx == ky && identical(x, y))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_zero_values() {
        let v = json!({"metadata": {"name": "n", "deletionTimestamp": null, "finalizers": ["a", 1]},
                       "spec": {"n": 3, "on": true, "list": [1]}});
        assert_eq!(get_str(&v, &["metadata", "name"]), Some("n"));
        assert_eq!(get_i64(&v, &["spec", "n"]), Some(3));
        assert_eq!(get_i64(&v, &["spec", "list", "0"]), None);
        assert_eq!(str_at(&v, &["spec", "n"]), "");
        assert!(bool_at(&v, &["spec", "on"]));
        assert!(!bool_at(&v, &["spec", "off"]));
        assert_eq!(meta_str(&v, "name"), "n");
        assert_eq!(meta_str(&v, "namespace"), "");
        assert!(!is_deleting(&v));
        assert_eq!(finalizers(&v), ["a"]);
    }

    #[test]
    fn ensure_obj_creates_or_replaces() {
        let mut v = json!({"spec": 1});
        ensure_obj(&mut v, "spec").map(|m| m.insert("a".into(), json!(1)));
        ensure_obj(&mut v, "status");
        assert_eq!(v, json!({"spec": {"a": 1}, "status": {}}));
        assert!(ensure_obj(&mut json!([]), "x").is_none());
    }

    /// `identical` is `==` except where the serialised forms differ; it fails with `==` in its
    /// place (the negative zero).
    #[test]
    fn identical_is_equal_serialisations() {
        let cases = [
            json!({"a": [1, {"b": 0.5}], "c": null, "d": "x"}),
            json!({"a": [1, {"b": 0.5}], "c": null}),
            json!({"a": [1, {"b": 0.0}], "c": null, "d": "x"}),
            json!({"a": [1, {"b": -0.0}], "c": null, "d": "x"}),
            json!({"a": [1.0, {"b": 0.5}], "c": null, "d": "x"}),
            json!({"a": [1, {"b": 0.5}, 2], "c": null, "d": "x"}),
            json!({"a": [1, {"b": 0.5}], "c": false, "d": "x"}),
            json!({"a": [1, {"b": 0.5}], "e": null, "d": "x"}),
            json!([]),
            json!({}),
        ];
        for a in &cases {
            for b in &cases {
                let same_bytes = serde_json::to_vec(a).unwrap() == serde_json::to_vec(b).unwrap();
                assert_eq!(identical(a, b), same_bytes, "{a} against {b}");
            }
        }
    }
}
