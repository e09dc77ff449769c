//! Value helpers with structured-merge-diff semantics: equality and ordering (numbers compare numerically,
//! across int and float), the `value.ToString` rendering used in conflict paths, and path elements of
//! list items (`k:{"name":"main"}`, `v:"x"`) serialized exactly like FieldsV1 keys.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::errors::{go_json, go_quote};
use crate::schema::model::{ListDef, ListKind};

/// `value.Equals`: deep equality where an int and a float are equal when numerically equal.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.as_f64() == y.as_f64()
            } else {
                x.as_i64()
                    .zip(y.as_i64())
                    .map_or_else(|| x == y, |(p, q)| p == q)
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// Rank of a value's kind in `value.Compare`: numbers, strings, bools, lists, maps, null.
fn rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// `value.Compare`: a total order over values.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                let (p, q) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                p.partial_cmp(&q).unwrap_or(Ordering::Equal)
            } else {
                match (x.as_i64(), y.as_i64()) {
                    (Some(p), Some(q)) => p.cmp(&q),
                    _ => x
                        .as_u64()
                        .unwrap_or(u64::MAX)
                        .cmp(&y.as_u64().unwrap_or(u64::MAX)),
                }
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = compare(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => compare_maps(x, y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// `value.MapCompare`: maps as sorted (key, value) sequences.
fn compare_maps(x: &Map<String, Value>, y: &Map<String, Value>) -> Ordering {
    let mut xi = x.iter();
    let mut yi = y.iter();
    loop {
        match (xi.next(), yi.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let c = ka.cmp(kb).then_with(|| compare(va, vb));
                if c != Ordering::Equal {
                    return c;
                }
            }
        }
    }
}

/// `value.ToString`: strings quoted Go-style, lists `[a,b]`, maps `{k=v;...}`.
pub fn to_go_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(to_go_string).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}={}", to_go_string(v)))
                .collect::<Vec<_>>()
                .join(";")
        ),
    }
}

/// The FieldsV1 key of a struct field or map entry.
pub fn field_key(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push_str("f:");
    s.push_str(name);
    s
}

/// Why a list item has no path element (these become typed-conversion errors, worded as in
/// structured-merge-diff).
pub fn list_item_key(list: &ListDef, item: &Value) -> Result<String, String> {
    match list.kind {
        ListKind::Atomic => Err("invalid indexing of non-associative list".to_string()),
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".to_string())
            }
            Value::Array(_) => {
                Err("not supported: associative list with lists as elements".to_string())
            }
            Value::Null => Err(
                "associative list without keys has an element that's an explicit null".to_string(),
            ),
            v => Ok(format!("v:{}", go_json(v))),
        },
        ListKind::Map => {
            let m = match item {
                Value::Object(m) => m,
                Value::Null => {
                    return Err(
                        "associative list with keys may not have a null element".to_string()
                    );
                }
                _ => {
                    return Err(
                        "associative list with keys may not have non-map elements".to_string()
                    );
                }
            };
            let mut fields: Vec<(&str, &Value)> = Vec::with_capacity(list.keys.len());
            for k in list.keys.iter() {
                match m.get(&**k) {
                    Some(v) => fields.push((k, v)),
                    None => match list.key_defaults.iter().find(|(n, _)| n == k) {
                        Some((_, d)) => fields.push((k, d)),
                        None => {
                            return Err(format!(
                                "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                                go_quote(k)
                            ));
                        }
                    },
                }
            }
            fields.sort_by(|a, b| a.0.cmp(b.0));
            let mut s = String::from("k:{");
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&go_json(&Value::String((*k).to_string())));
                s.push(':');
                s.push_str(&go_json(v));
            }
            s.push('}');
            Ok(s)
        }
    }
}

/// A path element parsed back from its FieldsV1 key, for ordering and messages.
#[derive(Debug, Clone, PartialEq)]
pub enum PathElement {
    Field(String),
    Key(Vec<(String, Value)>),
    Value(Value),
    Index(i64),
    /// A key this version does not understand (kept verbatim, ordered last).
    Unknown(String),
}

impl PathElement {
    pub fn parse(key: &str) -> PathElement {
        let (kind, rest) = match key.split_at_checked(2) {
            Some((k, r)) if k.ends_with(':') => (&k[..1], r),
            _ => return PathElement::Unknown(key.to_string()),
        };
        match kind {
            "f" => PathElement::Field(rest.to_string()),
            "k" => match serde_json::from_str::<Map<String, Value>>(rest) {
                Ok(m) => {
                    let mut fields: Vec<(String, Value)> = m.into_iter().collect();
                    fields.sort_by(|a, b| a.0.cmp(&b.0));
                    PathElement::Key(fields)
                }
                Err(_) => PathElement::Unknown(key.to_string()),
            },
            "v" => match serde_json::from_str::<Value>(rest) {
                Ok(v) => PathElement::Value(v),
                Err(_) => PathElement::Unknown(key.to_string()),
            },
            "i" => match rest.parse() {
                Ok(i) => PathElement::Index(i),
                Err(_) => PathElement::Unknown(key.to_string()),
            },
            _ => PathElement::Unknown(key.to_string()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
            PathElement::Unknown(_) => 4,
        }
    }

    /// `PathElement.Compare`: fields, then keys, then values, then indexes.
    pub fn cmp(&self, other: &PathElement) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((na, va), (nb, vb)) in a.iter().zip(b) {
                    let c = na.cmp(nb).then_with(|| compare(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            (PathElement::Unknown(a), PathElement::Unknown(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl std::fmt::Display for PathElement {
    /// `PathElement.String`: `.name`, `[k=v,...]`, `[=v]`, `[i]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", to_go_string(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", to_go_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
            PathElement::Unknown(s) => write!(f, "{s}"),
        }
    }
}

/// A path of FieldsV1 keys rendered like `fieldpath.Path.String()` (`.spec.containers[name="main"]`).
pub fn path_string(path: &[String]) -> String {
    path.iter()
        .map(|k| PathElement::parse(k).to_string())
        .collect()
}
