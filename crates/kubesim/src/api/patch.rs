//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), with the API server's error answers.

use serde_json::Value;

use crate::errors::ApiError;

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The answer for any failing JSON patch operation (the real server hides the detail).
fn rejected() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(serde_json::json!({}))
}

/// Parses and applies an RFC 6902 patch document.
pub fn json_patch(target: &mut Value, raw: &[u8]) -> Result<(), ApiError> {
    if let Some(e) = crate::gojson::syntax_error(raw) {
        return Err(ApiError::bad_request(format!("error decoding patch: {e}")));
    }
    let doc: Value = serde_json::from_slice(raw)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let Value::Array(ops) = doc else {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            crate::gojson::json_kind(&doc)
        )));
    };
    // Work on a copy: a failing operation leaves the object untouched.
    let mut doc = target.clone();
    for op in &ops {
        apply_op(&mut doc, op).ok_or_else(rejected)?;
    }
    *target = doc;
    Ok(())
}

fn apply_op(doc: &mut Value, op: &Value) -> Option<()> {
    let path = op.get("path")?.as_str()?;
    match op.get("op")?.as_str()? {
        "add" => add(doc, path, op.get("value")?.clone()),
        "remove" => remove(doc, path).map(|_| ()),
        "replace" => {
            remove(doc, path)?;
            add(doc, path, op.get("value")?.clone())
        }
        "move" => {
            let v = remove(doc, op.get("from")?.as_str()?)?;
            add(doc, path, v)
        }
        "copy" => {
            let v = get(doc, op.get("from")?.as_str()?)?.clone();
            add(doc, path, v)
        }
        "test" => (get(doc, path)? == op.get("value")?).then_some(()),
        _ => None,
    }
}

fn tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    let rest = path.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = doc;
    for t in tokens(path)? {
        cur = match cur {
            Value::Object(m) => m.get(&t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn parent<'a>(doc: &'a mut Value, toks: &[String]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get_mut(t)?,
            Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Option<()> {
    let toks = tokens(path)?;
    let Some((last, init)) = toks.split_last() else {
        *doc = value;
        return Some(());
    };
    match parent(doc, init)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i = last.parse::<usize>().ok()?;
                if i > a.len() {
                    return None;
                }
                a.insert(i, value);
            }
        }
        _ => return None,
    }
    Some(())
}

fn remove(doc: &mut Value, path: &str) -> Option<Value> {
    let toks = tokens(path)?;
    let (last, init) = toks.split_last()?;
    match parent(doc, init)? {
        Value::Object(m) => m.remove(last),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_semantics() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(t, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops_and_errors() {
        let mut t = json!({"metadata": {"labels": {"app": "a"}, "finalizers": ["x", "y"]}});
        json_patch(&mut t, br#"[{"op":"add","path":"/metadata/labels/jp","value":"v"},{"op":"remove","path":"/metadata/finalizers/0"}]"#).unwrap();
        assert_eq!(t["metadata"]["labels"]["jp"], "v");
        assert_eq!(t["metadata"]["finalizers"], json!(["y"]));
        let before = t.clone();
        let e = json_patch(&mut t, br#"[{"op":"add","path":"/metadata/labels/n","value":"x"},{"op":"test","path":"/metadata/labels/app","value":"no"}]"#).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(t, before, "a failed patch changes nothing");
        assert_eq!(
            json_patch(
                &mut t,
                br#"[{"op":"remove","path":"/metadata/labels/nope"}]"#
            )
            .unwrap_err()
            .code,
            422
        );
        let e = json_patch(&mut t, br#"{"op":"add"}"#).unwrap_err();
        assert_eq!(
            e.message,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
        );
        json_patch(&mut t, br#"[{"op":"replace","path":"/metadata/labels/app","value":"b"},{"op":"add","path":"/a~1b","value":1}]"#).unwrap();
        assert_eq!(t["a/b"], 1);
        assert_eq!(t["metadata"]["labels"]["app"], "b");
    }
}
