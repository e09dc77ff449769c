//! Replays the recorded v1.36 request steps through the Job strategy's hooks (the way the generic
//! request flow calls them) and compares the outcome with the recorded responses: the whole `Status`
//! for 422s, and the spec, labels, generation and status for 200/201s.
//!
//! Steps whose answer comes from HTTP-level or generic machinery (decoding errors, wrong kind, a
//! namespace or name mismatch with the URL, resourceVersion preconditions and conflicts, reads, lists,
//! deletes, dry-run storage, server-side apply, 404s) are listed per scenario in `GENERIC_STEPS` and
//! skipped; every other step of these files must be handled, so a new recorded step fails the test
//! until it is covered or listed.

mod scenarios;
mod status_invalid;
mod traces;

use std::collections::HashMap;
use std::fs;

use serde_json::{Value, json};

use super::*;
use crate::errors::ApiError;
use crate::kinds::Strategy;
use crate::testdata::fixtures_dir;
use crate::validation::{NameRule, validate_object_meta_update};

const NS: &str = "test-ns";
const TIME: &str = "2026-01-01T00:00:00Z";
const GEN_SUFFIX: &str = "xk9qz";

fn uuid(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn load(sub: &str, file: &str) -> Value {
    let path = fixtures_dir(sub).join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Fills the recording's placeholders with concrete values kubesim can validate.
fn denorm(v: &Value) -> Value {
    let s = serde_json::to_string(v).unwrap();
    let uid = regex::Regex::new(r"<uid:(\d+)>").unwrap();
    let s = uid.replace_all(&s, |c: &regex::Captures| uuid(c[1].parse().unwrap()));
    let rv = regex::Regex::new(r"<rv:(\d+)>").unwrap();
    let s = rv.replace_all(&s, "$1");
    let ns = regex::Regex::new(r#""[a-z-]+-<run>""#).unwrap();
    let s = ns.replace_all(&s, format!("\"{NS}\"").as_str());
    let s = s
        .replace("${ns}", NS)
        .replace("<run>", "run1")
        .replace("<time>", TIME);
    let gen_re = regex::Regex::new(r"<gen:\d+>").unwrap();
    let s = gen_re.replace_all(&s, GEN_SUFFIX);
    serde_json::from_str(&s).unwrap()
}

/// Turns kubesim's concrete values back into the recording's placeholders.
fn norm(v: &Value, gen_placeholder: &str) -> Value {
    let s = serde_json::to_string(v).unwrap();
    let uid = regex::Regex::new(r"00000000-0000-4000-8000-(\d{12})").unwrap();
    let s = uid.replace_all(&s, |c: &regex::Captures| {
        format!("<uid:{}>", c[1].parse::<u64>().unwrap())
    });
    let s = s.replace(GEN_SUFFIX, gen_placeholder);
    serde_json::from_str(&s).unwrap()
}

/// The uid placeholder number the server gave the object a step created: from the response's
/// metadata, else the first `<uid:N>` in the response not already in the request.
fn uid_for(step: &Value, fallback: u64) -> u64 {
    let re = regex::Regex::new(r"<uid:(\d+)>").unwrap();
    if let Some(u) = step["response"]["body"]["metadata"]["uid"].as_str()
        && let Some(c) = re.captures(u)
    {
        return c[1].parse().unwrap();
    }
    let req = serde_json::to_string(&step["request"]).unwrap();
    let resp = serde_json::to_string(&step["response"]).unwrap();
    re.captures_iter(&resp)
        .find(|c| !req.contains(&c[0]))
        .map_or(fallback, |c| c[1].parse().unwrap())
}

fn strat() -> JobStrategy {
    JobStrategy::new()
}

fn invalid(obj: &Value, errs: &[crate::errors::FieldError]) -> ApiError {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    ApiError::invalid("batch", "Job", name, errs)
}

/// POST: defaulting, the metadata the flow fills in, `prepare_for_create`, generic ObjectMeta
/// validation with the Job name rule, `validate_create`.
fn create(body: &Value, generated_name: Option<&str>, uid: &str) -> Result<Value, ApiError> {
    let s = strat();
    let mut obj = body.clone();
    s.default(&mut obj);
    {
        let meta = obj
            .as_object_mut()
            .unwrap()
            .entry("metadata")
            .or_insert(json!({}))
            .as_object_mut()
            .unwrap();
        if let Some(n) = generated_name {
            meta.insert("name".into(), json!(n));
        }
        meta.insert("namespace".into(), json!(NS));
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(TIME));
    }
    s.prepare_for_create(&mut obj);
    let mut errs = crate::validation::validate_object_meta_create(
        &obj["metadata"],
        true,
        JobStrategy::NAME_RULE,
    );
    errs.extend(s.validate_create(&obj));
    if !errs.is_empty() {
        return Err(invalid(&obj, &errs));
    }
    obj["metadata"]["resourceVersion"] = json!("1");
    Ok(obj)
}

/// What the generic update flow does before the strategy: the stored object's system fields win.
fn generic_update_prep(new: &mut Value, old: &Value) {
    let meta = new
        .as_object_mut()
        .unwrap()
        .entry("metadata")
        .or_insert(json!({}))
        .as_object_mut()
        .unwrap();
    meta.remove("managedFields");
    for key in ["resourceVersion", "uid", "creationTimestamp"] {
        if meta
            .get(key)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            meta.insert(key.into(), old["metadata"][key].clone());
        }
    }
    for key in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old["metadata"].get(key) {
            Some(v) => meta.insert(key.into(), v.clone()),
            None => meta.remove(key),
        };
    }
}

/// PUT or PATCH of the main resource, `new` being the full new object.
fn update(mut new: Value, old: &Value) -> Result<Value, ApiError> {
    let s = strat();
    s.default(&mut new);
    generic_update_prep(&mut new, old);
    s.prepare_for_update(&mut new, old);
    let mut errs = validate_object_meta_update(&new["metadata"], &old["metadata"]);
    errs.extend(s.validate_update(&new, old));
    if errs.is_empty() {
        Ok(new)
    } else {
        Err(invalid(&new, &errs))
    }
}

/// PUT or PATCH of `/status`.
fn update_status(mut new: Value, old: &Value) -> Result<Value, ApiError> {
    let s = strat();
    s.default(&mut new);
    generic_update_prep(&mut new, old);
    s.prepare_for_status_update(&mut new, old);
    let mut errs = validate_object_meta_update(&new["metadata"], &old["metadata"]);
    errs.extend(s.validate_status_update(&new, old));
    if errs.is_empty() {
        Ok(new)
    } else {
        Err(invalid(&new, &errs))
    }
}

fn merge(old: &Value, patch: &Value) -> Value {
    let mut out = old.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// Compares what a 200/201 returns with kubesim's object.
fn assert_same_object(step: &str, ours: &Value, recorded: &Value, gen_placeholder: &str) {
    let ours = norm(ours, gen_placeholder);
    for path in [
        &["spec"][..],
        &["status"][..],
        &["metadata", "labels"][..],
        &["metadata", "annotations"][..],
        &["metadata", "generation"][..],
        &["metadata", "name"][..],
        &["metadata", "finalizers"][..],
    ] {
        let a = crate::json::get(&ours, path);
        let b = crate::json::get(recorded, path);
        assert_eq!(a, b, "{step}: {} differs", path.join("."));
    }
}

fn assert_same_status(step: &str, err: &ApiError, recorded: &Value, gen_placeholder: &str) {
    assert_eq!(
        err.code,
        recorded["code"].as_u64().unwrap() as u16,
        "{step}: code"
    );
    let ours = norm(&err.to_status(), gen_placeholder);
    assert_eq!(&ours, recorded, "{step}: Status body");
}

/// Checks one step's outcome against the recording.
fn check(step: &Value, outcome: &Result<Value, ApiError>, gen_placeholder: &str) {
    let name = step["name"].as_str().unwrap();
    let code = step["response"]["code"].as_u64().unwrap();
    let body = &step["response"]["body"];
    match outcome {
        Ok(obj) => {
            assert!(code < 300, "{name}: accepted, recorded {code}: {body}");
            assert_same_object(name, obj, body, gen_placeholder);
        }
        Err(e) => {
            assert_eq!(
                code, 422,
                "{name}: rejected ({}), recorded {code}",
                e.message
            );
            assert_same_status(name, e, body, gen_placeholder);
        }
    }
}

/// Steps answered by generic machinery, per fixture file.
const GENERIC_STEPS: &[(&str, &[&str])] = &[
    (
        "job_defaults.json",
        &[
            "get minimal job",
            "get dry-run job (not persisted)",
            "list jobs",
        ],
    ),
    (
        "job_validation_create.json",
        &[
            "create with resourceVersion set",
            "create with metadata.namespace mismatching URL",
            "create with wrong kind in body",
            "unknown field fieldValidation=Strict",
            "duplicate field fieldValidation=Strict (raw JSON)",
            "malformed JSON body",
            "get source job",
        ],
    ),
    (
        "job_validation_update.json",
        &[
            "get managed job",
            "get suspended job",
            "update: change name in body (mismatch with URL)",
        ],
    ),
    (
        "job_status_valid.json",
        &[
            "get via /status",
            "get after start",
            "get completed job",
            "get failed job",
        ],
    ),
    (
        "job_status_subresource.json",
        &[
            "get job",
            "PUT status with stale resourceVersion",
            "get job again",
            "get job after status PUT",
            "get job before main-resource status write",
            "GET /status of missing job",
            "PATCH /status of missing job",
        ],
    ),
];

fn generic(file: &str, step: &str) -> bool {
    GENERIC_STEPS
        .iter()
        .any(|(f, steps)| *f == file && steps.contains(&step))
}

/// Drives a scenario of creates, PUTs and merge patches on jobs and their `/status`.
fn replay(file: &str) -> usize {
    let fx = load("apiserver", file);
    let mut store: HashMap<String, Value> = HashMap::new();
    let mut handled = 0;
    let gen_re = regex::Regex::new(r"<gen:\d+>").unwrap();
    for (i, step) in fx["steps"].as_array().unwrap().iter().enumerate() {
        let name = step["name"].as_str().unwrap();
        if generic(file, name) {
            continue;
        }
        let req = &step["request"];
        let method = req["method"].as_str().unwrap();
        let path = req["path"].as_str().unwrap();
        let mut body = denorm(&req["body"]);
        if name == "unknown field (default validation)" {
            // Unknown fields are pruned by the generic decoder before any hook runs.
            body["spec"].as_object_mut().unwrap().remove("bogusField");
        }
        let recorded = &step["response"]["body"];
        let gen_placeholder = recorded["metadata"]["name"]
            .as_str()
            .and_then(|n| gen_re.find(n).map(|m| m.as_str().to_string()))
            .unwrap_or_else(|| "<gen:1>".to_string());
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        // .../jobs, .../jobs/<name>, .../jobs/<name>/status
        let jobs_at = segments.iter().position(|s| *s == "jobs").unwrap();
        let target = segments.get(jobs_at + 1).map(|s| s.to_string());
        let status = segments.get(jobs_at + 2) == Some(&"status");
        let ctype = req["headers"]["Content-Type"].as_str().unwrap_or("");
        let outcome = match (method, &target) {
            ("POST", None) if step["request"]["path"] == "/api/v1/namespaces" => continue,
            ("POST", None) => {
                let generated = body["metadata"]["generateName"].as_str().map(|g| {
                    // names.SimpleNameGenerator: at most 58 characters of prefix, 5 random ones.
                    let prefix: String = g.chars().take(58).collect();
                    format!("{prefix}{GEN_SUFFIX}")
                });
                let uid = uuid(uid_for(step, 1000 + i as u64));
                create(&body, generated.as_deref(), &uid)
            }
            ("PUT", Some(t)) => {
                let old = store.get(t).unwrap_or_else(|| panic!("{name}: no {t}"));
                if status {
                    update_status(body, old)
                } else {
                    update(body, old)
                }
            }
            ("PATCH", Some(t)) => {
                let old = store.get(t).unwrap_or_else(|| panic!("{name}: no {t}"));
                let new = if ctype == "application/merge-patch+json" {
                    merge(old, &body)
                } else {
                    // Strategic merge is the generic flow's; take the merged status from the recording.
                    let mut n = old.clone();
                    n["status"] = denorm(&recorded["status"]);
                    n
                };
                if status {
                    update_status(new, old)
                } else {
                    update(new, old)
                }
            }
            _ => panic!(
                "{file}: step {name:?} ({method} {path}) is neither handled nor listed as generic"
            ),
        };
        check(step, &outcome, &gen_placeholder);
        if let Ok(obj) = outcome {
            let dry = req["query"]["dryRun"].is_string();
            let key = obj["metadata"]["name"].as_str().unwrap().to_string();
            if !dry {
                store.insert(key, obj);
            }
        }
        handled += 1;
    }
    handled
}

#[test]
fn job_defaults_scenario() {
    assert_eq!(replay("job_defaults.json"), 9);
}

#[test]
fn job_validation_create_scenario() {
    // "unknown field (default validation)" is handled too: the unknown field is pruned generically,
    // and kubesim accepts the rest.
    assert_eq!(replay("job_validation_create.json"), 20);
}

#[test]
fn job_validation_update_scenario() {
    assert_eq!(replay("job_validation_update.json"), 16);
}

#[test]
fn job_status_valid_scenario() {
    assert_eq!(replay("job_status_valid.json"), 16);
}

#[test]
fn job_status_subresource_scenario() {
    assert_eq!(replay("job_status_subresource.json"), 7);
}
