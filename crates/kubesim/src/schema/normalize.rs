//! The Go JSON round trip of a built-in object: what `json.Unmarshal` into the typed struct followed by
//! `json.Marshal` does to a request body. The real server stores and returns the typed object, so a
//! client-sent `active: 0` (value int with `omitempty`) disappears, a container without `resources` gets
//! `resources: {}` (a value struct is never omitted) and an Event gets `reportingComponent: ""`.
//! The structured-merge-diff comparisons see the same normalised values, so managedFields depend on it too.

use serde_json::{Map, Value};

use super::model::{Field, GoMode, ListKind, ScalarKind, Schema, TypeId};

/// Normalises `obj` (a value of type `ty`) in place like the Go JSON round trip. Custom resources are
/// unstructured in the real server and only their `metadata` is normalised (by the schema's own modes).
pub fn normalize(schema: &Schema, ty: TypeId, obj: &mut Value) {
    normalize_value(schema, ty, obj);
}

/// [`normalize`] passing over the top-level members of a struct `skip` names (by key and value:
/// members equal to a stored object's, which the round trip leaves as they are).
pub fn normalize_except(
    schema: &Schema,
    ty: TypeId,
    obj: &mut Value,
    skip: &dyn Fn(&str, &Value) -> bool,
) {
    match obj {
        Value::Object(m)
            if schema
                .get(ty)
                .map
                .as_ref()
                .is_some_and(|md| !md.fields.is_empty()) =>
        {
            normalize_struct(schema, ty, m, skip)
        }
        _ => normalize_value(schema, ty, obj),
    }
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
            normalize_struct(schema, ty, m, &|_, _| false);
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

/// `skip`: the present fields to leave as they are.
fn normalize_struct(
    schema: &Schema,
    ty: TypeId,
    m: &mut Map<String, Value>,
    skip: &dyn Fn(&str, &Value) -> bool,
) {
    let Some(md) = &schema.get(ty).map else {
        return;
    };
    // The declared fields and the object's keys are both sorted by name (the fields for binary search,
    // the keys as a BTreeMap's), so one merged walk pairs them: no search per declared field.
    let mut fields = md.fields.iter().peekable();
    let mut dropped: Vec<String> = Vec::new();
    let mut absent: Vec<&Field> = Vec::new();
    for (key, v) in m.iter_mut() {
        absent.extend(std::iter::from_fn(|| fields.next_if(|f| *f.name < **key)));
        let Some(f) = fields.next_if(|f| *f.name == **key) else {
            continue;
        };
        if skip(key, v) {
            continue;
        }
        if !normalize_present(schema, f, v) {
            dropped.push(key.clone());
        }
    }
    absent.extend(fields);
    for k in &dropped {
        m.remove(k);
    }
    for f in absent {
        let mut zero = match &f.go {
            GoMode::Never(zero) => zero.clone(),
            GoMode::ValueStruct => zero_struct(schema, f.ty),
            _ => continue,
        };
        normalize_value(schema, f.ty, &mut zero);
        m.insert(f.name.to_string(), zero);
    }
}

/// Normalises the value of the declared field `f`; `false` when the round trip omits it.
fn normalize_present(schema: &Schema, f: &Field, v: &mut Value) -> bool {
    let omitted = match &f.go {
        GoMode::Pointer | GoMode::OmitZero => v.is_null(),
        GoMode::Empty => match v {
            Value::Null => true,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            // A JSON string for a []byte field: empty base64 is an empty slice.
            Value::String(s) => s.is_empty(),
            _ => false,
        },
        GoMode::ValueScalar => is_zero_scalar(v),
        GoMode::Never(zero) => {
            if v.is_null() {
                *v = zero.clone();
            }
            false
        }
        GoMode::ValueStruct => {
            if v.is_null() {
                *v = zero_struct(schema, f.ty);
            }
            false
        }
        // Unstructured content is stored as sent.
        GoMode::Raw => return true,
    };
    if !omitted {
        normalize_value(schema, f.ty, v);
    }
    !omitted
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
