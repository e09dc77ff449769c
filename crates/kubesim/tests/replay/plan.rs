//! The replay plan: a recording's steps in the order to send them, completed by what
//! `testdata/replay/steps.yaml` says (setup requests, saved values, built bodies, `until`, pauses).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// `testdata/replay/steps.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Only there to hold YAML anchors.
    #[allow(dead_code)]
    conditions: Value,
    namespace: SetupRequest,
    job: Value,
    scenarios: BTreeMap<String, ScenarioPlan>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioPlan {
    #[serde(default)]
    namespace: Namespace,
    #[serde(default)]
    steps: BTreeMap<String, StepPlan>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Namespace {
    #[default]
    Create,
    Recorded,
    None,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepPlan {
    #[serde(default)]
    setup: Vec<Setup>,
    #[serde(default)]
    save: BTreeMap<String, String>,
    body: Option<BodyEdit>,
    until: Option<Until>,
    timeout: Option<f64>,
    sleep: Option<f64>,
}

/// An unrecorded request: written out, or one of the two shorthands.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Setup {
    Job { job: JobSetup },
    Status { status: String, merge: Value },
    Request(SetupRequest),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSetup {
    name: String,
    labels: Option<Value>,
    spec: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupRequest {
    method: String,
    path: String,
    body: Option<Value>,
    ctype: Option<String>,
    until: Option<Until>,
    timeout: Option<f64>,
}

/// A body built at run time: a copy of saved variable `from` (or of the recorded body) with changes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyEdit {
    pub from: Option<String>,
    #[serde(default)]
    pub set: BTreeMap<String, Value>,
    #[serde(default)]
    pub unset: Vec<String>,
}

/// When a polled read is done.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// The answer has this status code.
    Code(u16),
    /// `status.conditions` has an entry of this type with status "True".
    Condition(String),
}

impl Until {
    pub fn holds(&self, code: u16, body: &Value) -> bool {
        match self {
            Until::Code(c) => *c == code,
            Until::Condition(t) => body
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == *t && c["status"] == "True")),
        }
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    /// Compared with the recording (setup requests are not).
    pub recorded: bool,
    /// `{method, path, query?, headers?, body?}` as written: `${...}` not yet filled in.
    pub request: Value,
    pub built: Option<BodyEdit>,
    pub save: BTreeMap<String, String>,
    pub until: Option<Until>,
    /// Seconds `until` may poll.
    pub timeout: f64,
    /// Seconds to wait before sending.
    pub sleep: f64,
    /// `Some` for a watch: the steps sent while it is open.
    pub during: Option<Vec<Step>>,
}

const DEFAULT_TIMEOUT: f64 = 30.0;

pub fn load(dir: &Path) -> Plan {
    let path = dir.join("steps.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The skip list: scenario name -> reason.
pub fn skips(dir: &Path) -> BTreeMap<String, String> {
    let path = dir.join("skip.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, reason) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            assert!(!reason.trim().is_empty(), "skip.txt: {name} has no reason");
            (name.to_owned(), reason.trim().to_owned())
        })
        .collect()
}

impl Plan {
    pub fn scenario_names(&self) -> BTreeSet<&str> {
        self.scenarios.keys().map(String::as_str).collect()
    }

    /// The steps of `recording` in sending order, watches holding the steps sent during them.
    pub fn steps(&self, recording: &Value) -> Result<Vec<Step>, String> {
        let name = recording["scenario"].as_str().unwrap_or_default();
        let plan = self
            .scenarios
            .get(name)
            .ok_or_else(|| format!("steps.yaml has no scenario {name}"))?;
        let recorded = recording["steps"]
            .as_array()
            .ok_or("the recording has no steps")?;
        let mut out = Vec::new();
        if plan.namespace == Namespace::Create {
            out.push(self.setup_step("create namespace", &Setup::Request(self.namespace.clone())));
        }
        let mut used = BTreeSet::new();
        for rs in recorded {
            let step_name = rs["name"].as_str().ok_or("a recorded step has no name")?;
            let sp = plan.steps.get(step_name);
            if sp.is_some() {
                used.insert(step_name);
            }
            let default = StepPlan::default();
            let sp = sp.unwrap_or(&default);
            let mut batch: Vec<Step> = sp
                .setup
                .iter()
                .enumerate()
                .map(|(i, s)| self.setup_step(&format!("setup {i} of {step_name}"), s))
                .collect();
            let request = rs["request"].clone();
            let watch = request.pointer("/query/watch") == Some(&json!("true"));
            batch.push(Step {
                name: step_name.to_owned(),
                recorded: true,
                request,
                built: sp.body.clone(),
                save: sp.save.clone(),
                until: sp.until.clone(),
                timeout: sp.timeout.unwrap_or(DEFAULT_TIMEOUT),
                sleep: sp.sleep.unwrap_or(0.0),
                during: watch.then(Vec::new),
            });
            match rs.get("during_watch").and_then(Value::as_str) {
                None => out.extend(batch),
                Some(w) => out
                    .iter_mut()
                    .rev()
                    .find(|s| s.name == w)
                    .and_then(|s| s.during.as_mut())
                    .ok_or_else(|| format!("{step_name}: no watch {w:?} before it"))?
                    .extend(batch),
            }
        }
        if let Some(unknown) = plan.steps.keys().find(|k| !used.contains(k.as_str())) {
            return Err(format!(
                "steps.yaml names step {unknown:?}, which the recording does not have"
            ));
        }
        Ok(out)
    }

    fn setup_step(&self, name: &str, setup: &Setup) -> Step {
        let (request, until, timeout) = match setup {
            Setup::Job { job } => {
                let mut body = self.job.clone();
                body["metadata"]["name"] = json!(job.name);
                if let Some(labels) = &job.labels {
                    body["metadata"]["labels"] = labels.clone();
                }
                for (k, v) in job.spec.iter().flatten() {
                    body["spec"][k] = v.clone();
                }
                let path = "/apis/batch/v1/namespaces/${ns}/jobs";
                (
                    json!({"method": "POST", "path": path, "body": body}),
                    None,
                    None,
                )
            }
            Setup::Status { status, merge } => (
                json!({"method": "PATCH",
                       "path": format!("/apis/batch/v1/namespaces/${{ns}}/jobs/{status}/status"),
                       "headers": {"Content-Type": "application/merge-patch+json"},
                       "body": {"status": merge}}),
                None,
                None,
            ),
            Setup::Request(r) => {
                let mut req = json!({"method": r.method, "path": r.path});
                if let Some(b) = &r.body {
                    req["body"] = b.clone();
                }
                if let Some(c) = &r.ctype {
                    req["headers"] = json!({"Content-Type": c});
                }
                (req, r.until.clone(), r.timeout)
            }
        };
        Step {
            name: name.to_owned(),
            recorded: false,
            request,
            built: None,
            save: BTreeMap::new(),
            until,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
            sleep: 0.0,
            during: None,
        }
    }
}

/// The value at `dotted` (`""` = all of it; numbers index lists); `None` when absent.
pub fn get_path<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    if dotted.is_empty() {
        return Some(v);
    }
    dotted.split('.').try_fold(v, |cur, part| match cur {
        Value::Array(a) => a.get(part.parse::<usize>().ok()?),
        Value::Object(m) => m.get(part),
        _ => None,
    })
}

/// Sets `dotted` in `v` to `value`, creating missing objects on the way.
pub fn set_path(v: &mut Value, dotted: &str, value: Value) -> Result<(), String> {
    let mut cur = v;
    let parts: Vec<&str> = dotted.split('.').collect();
    let (last, inner) = parts.split_last().ok_or("empty path")?;
    for part in inner {
        cur = match cur {
            Value::Array(a) => part
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get_mut(i))
                .ok_or_else(|| format!("{dotted}: no element {part}"))?,
            Value::Object(m) => m.entry(*part).or_insert_with(|| json!({})),
            _ => return Err(format!("{dotted}: {part} is inside a scalar")),
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert((*last).to_owned(), value);
        }
        Value::Array(a) => {
            let slot = last
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get_mut(i))
                .ok_or_else(|| format!("{dotted}: no element {last}"))?;
            *slot = value;
        }
        _ => return Err(format!("{dotted}: the parent is a scalar")),
    }
    Ok(())
}

/// Removes `dotted` from `v` if it is there.
pub fn unset_path(v: &mut Value, dotted: &str) {
    let (parent, last) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let parent = if parent.is_empty() {
        Some(v)
    } else {
        parent.split('.').try_fold(v, |cur, part| match cur {
            Value::Array(a) => a.get_mut(part.parse::<usize>().ok()?),
            Value::Object(m) => m.get_mut(part),
            _ => None,
        })
    };
    if let Some(Value::Object(m)) = parent {
        m.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let mut v = json!({"spec": {"containers": [{"image": "a"}]}});
        assert_eq!(get_path(&v, "spec.containers.0.image"), Some(&json!("a")));
        assert_eq!(get_path(&v, "spec.nope.x"), None);
        assert_eq!(get_path(&v, ""), Some(&v.clone()));
        set_path(&mut v, "spec.containers.0.image", json!("b")).unwrap();
        set_path(&mut v, "metadata.labels.x", json!("y")).unwrap();
        assert_eq!(v["spec"]["containers"][0]["image"], "b");
        assert_eq!(v["metadata"]["labels"]["x"], "y");
        assert!(set_path(&mut v, "spec.containers.5.image", json!("c")).is_err());
        unset_path(&mut v, "metadata.labels.x");
        unset_path(&mut v, "metadata.missing.deeper");
        assert_eq!(v["metadata"]["labels"], json!({}));
    }

    #[test]
    fn until_conditions() {
        let est = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
        let not = json!({"status": {"conditions": [{"type": "Established", "status": "False"}]}});
        let u = Until::Condition("Established".into());
        assert!(u.holds(200, &est));
        assert!(!u.holds(200, &not));
        assert!(!u.holds(200, &json!("text")));
        assert!(Until::Code(404).holds(404, &json!({})));
        assert!(!Until::Code(404).holds(200, &json!({})));
    }
}
