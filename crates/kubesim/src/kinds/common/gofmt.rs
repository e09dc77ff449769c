//! JSON and values as Go writes them: typed-object field order, the text of a merge-patched
//! document, and `%v` of decoded values and floats.

use serde_json::Value;

use crate::errors::{WireOrder, write_go_json, write_go_string};

// ---------------------------------------------------------------------------------------------
// JSON as Go's encoder writes a typed object (`errors::write_go_json` with a `WireOrder`): struct
// fields in declaration order, map keys sorted.

/// `metav1.ObjectMeta` field order.
pub const OBJECT_META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const MANAGED_FIELDS_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];
const OWNER_REFERENCE_ORDER: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// The ObjectMeta part of a `WireOrder` (paths below `metadata`).
pub fn object_meta_order(path: &[&str]) -> Option<&'static [&'static str]> {
    match path {
        ["metadata"] => Some(OBJECT_META_ORDER),
        ["metadata", "managedFields", "*"] => Some(MANAGED_FIELDS_ORDER),
        ["metadata", "ownerReferences", "*"] => Some(OWNER_REFERENCE_ORDER),
        _ => None,
    }
}

/// The document a JSON merge patch (`application/merge-patch+json`) produces on the real server, as
/// text: `gopkg.in/evanphx/json-patch.v4` keeps every node it does not touch as the raw bytes of
/// the current object (Go field order) and re-encodes the objects it merges into as maps (sorted
/// keys). The server puts this text in its 422 when the patched document does not decode.
/// (New subtrees coming from the patch are written with sorted keys; Go keeps the client's order.)
pub fn merge_patch_text(current: &Value, patch: &Value, order: WireOrder) -> String {
    let mut out = String::new();
    let mut path = Vec::new();
    match (current, patch) {
        (Value::Object(_), Value::Object(_)) => {
            write_merged(current, patch, &mut path, order, &mut out)
        }
        // A patch that is not an object replaces the document.
        _ => write_go_json(&prune_nulls(patch), Some(order), &mut path, &mut out),
    }
    out
}

fn prune_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), prune_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(prune_nulls).collect()),
        other => other.clone(),
    }
}

fn write_merged(
    cur: &Value,
    patch: &Value,
    path: &mut Vec<String>,
    order: WireOrder,
    out: &mut String,
) {
    let (Some(c), Some(p)) = (cur.as_object(), patch.as_object()) else {
        return write_go_json(&prune_nulls(patch), Some(order), path, out);
    };
    let mut keys: Vec<&String> = c
        .keys()
        .filter(|k| !matches!(p.get(*k), Some(Value::Null)))
        .chain(
            p.iter()
                .filter(|(k, v)| !v.is_null() && !c.contains_key(*k))
                .map(|(k, _)| k),
        )
        .collect();
    // A merged node is re-encoded from a Go map: sorted keys.
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_string(k, out);
        out.push(':');
        path.push(k.clone());
        match (c.get(k), p.get(k)) {
            (Some(cv), Some(pv)) if !cv.is_null() && cv.is_object() && pv.is_object() => {
                write_merged(cv, pv, path, order, out)
            }
            (_, Some(pv)) => write_go_json(&prune_nulls(pv), Some(order), path, out),
            (Some(cv), None) => write_go_json(cv, Some(order), path, out),
            (None, None) => out.push_str("null"),
        }
        path.pop();
    }
    out.push('}');
}

/// Go's `%v` / `%+v` of a decoded JSON value (`map[string]interface{}` and friends): maps as
/// `map[k:v ...]` with sorted keys, slices as `[a b]`, nil as `<nil>`, numbers as float64.
pub fn go_print_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float_v(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_print_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print_v(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Go's `%v` of a float64: `strconv.FormatFloat(f, 'g', -1, 64)`, i.e. the shortest digits, in
// exponent form when the exponent is below -4 or at least 6 (`fmt.Println(1e6)` prints `1e+06`).

pub fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's shortest formatting does.
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if neg { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        // %e form with at least two exponent digits.
        let mut m = String::new();
        m.push_str(&digits[..1]);
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let es = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{es}{:02}", exp.abs());
    }
    // Plain decimal.
    let dp = exp + 1; // position of the decimal point relative to the digits
    let mut out = String::from(sign);
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if (dp as usize) >= digits.len() {
        out.push_str(&digits);
        for _ in 0..(dp as usize - digits.len()) {
            out.push('0');
        }
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_go_v() {
        assert_eq!(go_float_v(1.0), "1");
        assert_eq!(go_float_v(1.5), "1.5");
        assert_eq!(go_float_v(100000.0), "100000");
        assert_eq!(go_float_v(1e21), "1e+21");
        assert_eq!(go_float_v(1e6), "1e+06");
        assert_eq!(go_float_v(1234567.0), "1.234567e+06");
        assert_eq!(go_float_v(0.0001), "0.0001");
        assert_eq!(go_float_v(0.00001), "1e-05");
        assert_eq!(go_float_v(-2.25), "-2.25");
    }
}
