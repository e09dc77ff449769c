//! The Go JSON round trip of a built-in object: what `json.Unmarshal` into the typed struct followed by
//! `json.Marshal` does to a request body. The real server stores and returns the typed object, so a
//! client-sent `active: 0` (value int with `omitempty`) disappears, a container without `resources` gets
//! `resources: {}` (a value struct is never omitted) and an Event gets `reportingComponent: ""`.
//! The structured-merge-diff comparisons see the same normalised values, so managedFields depend on it too.

use serde_json::{Map, Value};

use super::model::{GoMode, ListKind, ScalarKind, Schema, TypeId};

/// Normalises `obj` (a value of type `ty`) in place like the Go JSON round trip. Custom resources are
/// unstructured in the real server and only their `metadata` is normalised (by the schema's own modes).
pub fn normalize(schema: &Schema, ty: TypeId, obj: &mut Value) {
    normalize_value(schema, ty, obj);
}

fn normalize_value(schema: &Schema, ty: TypeId, v: &mut Value) {
    let def = schema.get(ty);
    match v {
        Value::Object(m) => {
            let Some(md) = &def.map else { return };
            if md.fields.is_empty() {
                // A map (or arbitrary object): normalise its values by the element type.
                if let Some(elem) = md.elem {
                    for val in m.values_mut() {
                        normalize_element(schema, elem, val);
                    }
                }
                return;
            }
            normalize_struct(schema, ty, m);
        }
        Value::Array(a) => {
            let Some(l) = &def.list else { return };
            for item in a.iter_mut() {
                normalize_element(schema, l.elem, item);
            }
        }
        _ => {}
    }
}

/// A list item or map value: Go decodes `null` into the element's zero value.
fn normalize_element(schema: &Schema, ty: TypeId, v: &mut Value) {
    if v.is_null() {
        let def = schema.get(ty);
        match (&def.map, def.scalar, &def.list) {
            (Some(m), None, None) if !m.fields.is_empty() => *v = zero_struct(schema, ty),
            (None, Some(ScalarKind::String), None) => *v = Value::String(String::new()),
            (None, Some(ScalarKind::Numeric), None) => *v = Value::from(0),
            (None, Some(ScalarKind::Boolean), None) => *v = Value::Bool(false),
            _ => {}
        }
        return;
    }
    normalize_value(schema, ty, v);
}

fn normalize_struct(schema: &Schema, ty: TypeId, m: &mut Map<String, Value>) {
    let Some(md) = &schema.get(ty).map else {
        return;
    };
    for f in md.fields.iter() {
        let key: &str = &f.name;
        match &f.go {
            GoMode::Pointer | GoMode::OmitZero => {
                if matches!(m.get(key), Some(Value::Null)) {
                    m.remove(key);
                }
            }
            GoMode::Empty => {
                let drop = match m.get(key) {
                    Some(Value::Null) => true,
                    Some(Value::Array(a)) => a.is_empty(),
                    Some(Value::Object(o)) => o.is_empty(),
                    // A JSON string for a []byte field: empty base64 is an empty slice.
                    Some(Value::String(s)) => s.is_empty(),
                    _ => false,
                };
                if drop {
                    m.remove(key);
                }
            }
            GoMode::ValueScalar => {
                if m.get(key).is_some_and(is_zero_scalar) {
                    m.remove(key);
                }
            }
            GoMode::Never(zero) => match m.get(key) {
                None | Some(Value::Null) => {
                    m.insert(key.to_string(), zero.clone());
                }
                _ => {}
            },
            GoMode::ValueStruct => match m.get(key) {
                None | Some(Value::Null) => {
                    m.insert(key.to_string(), zero_struct(schema, f.ty));
                }
                _ => {}
            },
            // Unstructured content is stored as sent.
            GoMode::Raw => continue,
        }
        if let Some(v) = m.get_mut(key) {
            normalize_value(schema, f.ty, v);
        }
    }
}

fn is_zero_scalar(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// The Go zero value of a struct type: its never-omitted fields with their zero values.
fn zero_struct(schema: &Schema, ty: TypeId) -> Value {
    let mut out = Map::new();
    if let Some(md) = &schema.get(ty).map {
        for f in md.fields.iter() {
            match &f.go {
                GoMode::Never(z) => {
                    out.insert(f.name.to_string(), z.clone());
                }
                GoMode::ValueStruct => {
                    out.insert(f.name.to_string(), zero_struct(schema, f.ty));
                }
                _ => {}
            }
        }
    }
    Value::Object(out)
}

/// The Go zero value of a type (`{}` plus never-omitted fields for structs, null otherwise).
pub fn zero_value_of(schema: &Schema, ty: TypeId) -> Value {
    let def = schema.get(ty);
    match (&def.map, &def.list) {
        (Some(_), _) => zero_struct(schema, ty),
        (None, Some(l)) if l.kind == ListKind::Atomic => Value::Null,
        _ => Value::Null,
    }
}
