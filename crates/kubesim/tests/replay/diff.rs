//! Compares a normalised replay with its recording, step by step (by name): status codes first, then
//! every differing path of the response, as `<step>:response.body.spec.backoffLimit: got 7, recorded 6`.

use std::collections::BTreeMap;

use serde_json::Value;

/// Differences of one scenario.
#[derive(Debug, Default)]
pub struct Differences {
    /// Status codes that differ, and steps missing on either side.
    pub codes: Vec<String>,
    /// Everything else in the responses.
    pub bodies: Vec<String>,
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty() && self.bodies.is_empty()
    }
}

pub fn compare(recorded: &Value, got: &Value) -> Differences {
    let by_name = |doc: &Value| -> BTreeMap<String, Value> {
        doc["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or_default().to_owned(),
                    s["response"].clone(),
                )
            })
            .collect()
    };
    let got_steps = by_name(got);
    let recorded_steps = by_name(recorded);
    let mut d = Differences::default();
    for step in recorded["steps"].as_array().into_iter().flatten() {
        let name = step["name"].as_str().unwrap_or_default();
        let want = &step["response"];
        let Some(have) = got_steps.get(name) else {
            d.codes.push(format!("{name}: step missing from the run"));
            continue;
        };
        if want["code"] != have["code"] {
            d.codes.push(format!(
                "{name}: code {}, recorded {}",
                have["code"], want["code"]
            ));
        }
        let mut lines = Vec::new();
        diff_values(want, have, "response", &mut lines);
        d.bodies.extend(
            lines
                .into_iter()
                .filter(|l| !l.starts_with("response.code:"))
                .map(|l| format!("{name}:{l}")),
        );
    }
    for name in got_steps
        .keys()
        .filter(|n| !recorded_steps.contains_key(*n))
    {
        d.codes.push(format!("{name}: step not in the recording"));
    }
    d
}

/// Appends to `out` every difference between `want` (recorded) and `have` (replayed) under `path`.
fn diff_values(want: &Value, have: &Value, path: &str, out: &mut Vec<String>) {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match h.get(k) {
                    None => out.push(format!("{p}: missing (recorded {})", short(wv))),
                    Some(hv) => diff_values(wv, hv, &p, out),
                }
            }
            for (k, hv) in h.iter().filter(|(k, _)| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: unexpected {}", short(hv)));
            }
        }
        (Value::Array(w), Value::Array(h)) => {
            if w.len() != h.len() {
                out.push(format!("{path}: length {}, recorded {}", h.len(), w.len()));
            }
            for (i, (wv, hv)) in w.iter().zip(h).enumerate() {
                diff_values(wv, hv, &format!("{path}[{i}]"), out);
            }
        }
        _ if want != have => out.push(format!(
            "{path}: got {}, recorded {}",
            short(have),
            short(want)
        )),
        _ => {}
    }
}

/// Compact JSON, cut to 100 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 100 {
        s
    } else {
        format!("{}...", s.chars().take(97).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codes_first_then_paths() {
        let recorded = json!({"steps": [
            {"name": "create", "response": {"code": 201, "body": {"spec": {"backoffLimit": 6, "x": [1, 2]}}}},
            {"name": "get", "response": {"code": 200, "body": {"a": 1}}},
            {"name": "gone", "response": {"code": 404}}
        ]});
        let got = json!({"steps": [
            {"name": "create", "response": {"code": 201, "body": {"spec": {"backoffLimit": 7, "x": [1], "y": true}}}},
            {"name": "get", "response": {"code": 500, "body": {}}},
            {"name": "extra", "response": {"code": 200}}
        ]});
        let d = compare(&recorded, &got);
        assert_eq!(
            d.codes,
            [
                "get: code 500, recorded 200",
                "gone: step missing from the run",
                "extra: step not in the recording"
            ]
        );
        assert_eq!(
            d.bodies,
            [
                "create:response.body.spec.backoffLimit: got 7, recorded 6",
                "create:response.body.spec.x: length 1, recorded 2",
                "create:response.body.spec.y: unexpected true",
                "get:response.body.a: missing (recorded 1)",
            ]
        );
        assert!(compare(&recorded, &recorded).is_empty());
    }
}
