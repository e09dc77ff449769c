//! Schema defaulting and null pruning of custom resources (`apiserver/schema/defaulting`).

use serde_json::Value;

pub fn spec_has_defaults(versions: &[Value]) -> bool {
    fn has(s: &Value) -> bool {
        let Some(m) = s.as_object() else {
            return false;
        };
        m.contains_key("default")
            || m.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(has))
            || ["items", "additionalProperties", "not"]
                .iter()
                .any(|k| m.get(*k).is_some_and(has))
            || ["allOf", "anyOf", "oneOf"].iter().any(|k| {
                m.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(has))
            })
    }
    versions
        .iter()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .any(has)
}

// ---------------------------------------------------------------------------------------------
// Defaulting (`structuraldefaulting`): nulls of non-nullable fields without default are dropped,
// then missing (or null non-nullable) fields with a default get it, recursively.

fn prop_schema<'a>(schema: &'a Value, k: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(k))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

pub(super) fn is_nullable(s: &Value) -> bool {
    s.get("nullable").and_then(Value::as_bool).unwrap_or(false)
}

pub fn prune_non_nullable_nulls(data: &mut Value, schema: &Value) {
    match data {
        Value::Object(m) => {
            m.retain(|k, v| match prop_schema(schema, k) {
                Some(s) => !(v.is_null() && !is_nullable(s) && s.get("default").is_none()),
                None => true,
            });
            for (k, v) in m.iter_mut() {
                if let Some(s) = prop_schema(schema, k) {
                    prune_non_nullable_nulls(v, s);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    prune_non_nullable_nulls(v, items);
                }
            }
        }
        _ => {}
    }
}

pub fn apply_defaults(data: &mut Value, schema: &Value) {
    match data {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, p) in props {
                    if let Some(d) = p.get("default") {
                        let missing = match m.get(k) {
                            None => true,
                            Some(Value::Null) => !is_nullable(p),
                            Some(_) => false,
                        };
                        if missing {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                }
            }
            let ap = schema.get("additionalProperties").filter(|a| a.is_object());
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, v) in m.iter_mut() {
                if let Some(p) = props.and_then(|p| p.get(k)) {
                    apply_defaults(v, p);
                } else if let Some(ap) = ap {
                    if v.is_null()
                        && !is_nullable(ap)
                        && let Some(d) = ap.get("default")
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    if v.is_null()
                        && !is_nullable(items)
                        && let Some(d) = items.get("default")
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}
