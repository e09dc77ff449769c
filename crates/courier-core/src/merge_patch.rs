//! JSON merge patches (RFC 7386): the diff of two JSON values and of two encodable values. The
//! status copy (`reconcile`), the cached status (`job_status`) and spec drift (`drift`) all write
//! their patches with these, so they live below all three.

use serde_json::{Map, Value};

/// The JSON merge patch from `old` to `new` (explicit nulls for cleared fields, `{}` when nothing
/// changed), both encoded whole; an error when either does not encode as JSON.
pub fn status_patch<T: serde::Serialize>(old: &T, new: &T) -> Result<Value, serde_json::Error> {
    let old = serde_json::to_value(old)?;
    let new = serde_json::to_value(new)?;
    Ok(merge_patch(&old, &new).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The RFC 7386 JSON merge patch turning `old` into `new` (`None` when equal): changed keys, removed
/// keys as `null`; arrays and scalars are replaced whole.
pub fn merge_patch(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (key, new_value) in n {
                match o.get(key) {
                    Some(old_value) => {
                        if let Some(d) = merge_patch(old_value, new_value) {
                            patch.insert(key.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), new_value.clone());
                    }
                }
            }
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}
