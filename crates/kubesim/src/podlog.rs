//! `GET /api/v1/namespaces/<ns>/pods/<name>/log`: the logs of simulated containers, answered like the
//! real API server (`pkg/registry/core/pod/rest/log.go`, `pod.LogLocation`) and kubelet
//! (`validateContainerLogStatus`, `kuberuntime` log reading) answer them.
//!
//! A simulated container's log is derived from its Pod object (so any reader sees the same lines):
//! a line when it starts, the lines of the pod annotation `sim/log` (one per line, `${pod}`,
//! `${index}` and `${container}` expanded; `${index}` is the completion index or empty), and a line
//! when it exits:
//!
//! ```text
//! [kubesim] job-0-x7k2p/c started
//! hello from index 0 in job-0-x7k2p
//! [kubesim] job-0-x7k2p/c exited with code 0
//! ```
//!
//! The start line and `sim/log` lines carry the container's `startedAt`, the exit line its
//! `finishedAt` (whole seconds, as the Pod status has them). Options: `container`, `follow` (streams
//! until the container ends), `previous` (the container before the last restart), `timestamps`
//! (`2026-01-01T10:00:07.000000000Z ` prefix, the kubelet's fixed-width format), `tailLines`,
//! `sinceSeconds`, `sinceTime`, `limitBytes`. Errors, in the real order: option validation (422
//! `PodLogOptions "p" is invalid: ...`), 404 for a missing pod, 400 for a missing or unknown
//! container name, then the kubelet's 400s (`... is waiting to start: ContainerCreating`,
//! `previous terminated container "c" in pod "p" not found`, ...). A pod with no node answers an
//! empty 200, like the real server.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use crate::api::{Api, Served};
use crate::errors::{ApiError, BadValue, FieldError};
use crate::json::{get, get_arr, get_str, meta_str};

/// The annotation holding the lines a simulated container prints while running.
pub const ANN_LOG: &str = "sim/log";

/// `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
    pub since_time: Option<Timestamp>,
    pub limit_bytes: Option<i64>,
}

fn flag(q: &HashMap<String, String>, k: &str) -> Result<bool, ApiError> {
    match q.get(k).map(String::as_str) {
        None | Some("") | Some("false") | Some("0") | Some("f") | Some("F") | Some("FALSE")
        | Some("False") => Ok(false),
        Some("true") | Some("1") | Some("t") | Some("T") | Some("TRUE") | Some("True") => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            crate::errors::go_quote(v)
        ))),
    }
}

fn int(q: &HashMap<String, String>, k: &str) -> Result<Option<i64>, ApiError> {
    q.get(k)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    crate::errors::go_quote(v)
                ))
            })
        })
        .transpose()
}

impl LogOptions {
    /// The query parameters of a log request.
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let since_time = match q.get("sinceTime") {
            Some(v) => Some(crate::time::parse(v).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                    crate::errors::go_quote(v),
                    crate::errors::go_quote(v)
                ))
            })?),
            None => None,
        };
        Ok(Self {
            container: q.get("container").filter(|c| !c.is_empty()).cloned(),
            follow: flag(q, "follow")?,
            previous: flag(q, "previous")?,
            timestamps: flag(q, "timestamps")?,
            tail_lines: int(q, "tailLines")?,
            since_seconds: int(q, "sinceSeconds")?,
            since_time,
            limit_bytes: int(q, "limitBytes")?,
        })
    }

    /// `ValidatePodLogOptions` (422 `PodLogOptions "<pod>" is invalid`).
    pub fn validate(&self, pod: &str) -> Result<(), ApiError> {
        let mut errs = Vec::new();
        if let Some(t) = self.tail_lines.filter(|t| *t < 0) {
            errs.push(FieldError::invalid(
                "tailLines",
                BadValue::Int(t),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(l) = self.limit_bytes.filter(|l| *l < 1) {
            errs.push(FieldError::invalid(
                "limitBytes",
                BadValue::Int(l),
                "must be greater than 0",
            ));
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => errs.push(FieldError::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(s), None) if s < 1 => errs.push(FieldError::invalid(
                "sinceSeconds",
                BadValue::Int(s),
                "must be greater than 0",
            )),
            _ => {}
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid("", "PodLogOptions", pod, &errs))
        }
    }
}

/// One log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub at: Timestamp,
    pub text: String,
}

/// `validateContainer`: the container the request is about; `None` when the pod has no node yet
/// (the real server then answers an empty log).
pub fn resolve_container(pod: &Value, opts: &LogOptions) -> Result<Option<String>, ApiError> {
    let name = meta_str(pod, "name");
    let names = |list: &str| -> Vec<String> {
        get_arr(pod, &["spec", list])
            .into_iter()
            .flatten()
            .filter_map(|c| get_str(c, &["name"]).map(str::to_string))
            .collect()
    };
    let containers = names("containers");
    let container = match &opts.container {
        None => match containers.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}"
                )));
            }
            _ => {
                let mut all = names("initContainers");
                all.extend(containers);
                all.extend(names("ephemeralContainers"));
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    all.join(" ")
                )));
            }
        },
        Some(c) => {
            let known = ["initContainers", "containers", "ephemeralContainers"]
                .iter()
                .any(|l| names(l).contains(c));
            if !known {
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )));
            }
            c.clone()
        }
    };
    if get_str(pod, &["spec", "nodeName"]).unwrap_or("").is_empty() {
        return Ok(None);
    }
    Ok(Some(container))
}

/// One run of a container: its ID, when it started, and how it ended (`finishedAt`, exit code).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: String,
    pub started: Option<Timestamp>,
    pub ended: Option<(Timestamp, i64)>,
}

fn ts(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str).and_then(crate::time::parse)
}

fn status_of<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ]
    .iter()
    .flat_map(|l| get_arr(pod, &["status", l]).into_iter().flatten())
    .find(|s| get_str(s, &["name"]) == Some(container))
}

fn terminated_run(t: &Value, id: &str) -> Run {
    Run {
        id: id.to_string(),
        started: ts(t.get("startedAt")),
        ended: ts(t.get("finishedAt"))
            .map(|f| (f, t.get("exitCode").and_then(Value::as_i64).unwrap_or(0))),
    }
}

/// `validateContainerLogStatus`: the run whose log is read, or the kubelet's refusal (400).
pub fn select_run(pod: &Value, container: &str, previous: bool) -> Result<Run, ApiError> {
    let pod_name = meta_str(pod, "name");
    let err = |what: String| {
        Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{pod_name}\" {what}"
        )))
    };
    let Some(cs) = status_of(pod, container) else {
        return err("is not available".into());
    };
    let id = get_str(cs, &["containerID"]).unwrap_or("");
    let last = get(cs, &["lastState", "terminated"]);
    let last_id = last
        .and_then(|l| get_str(l, &["containerID"]))
        .unwrap_or("");
    let state = cs.get("state");
    if previous {
        return match last {
            Some(l) if !last_id.is_empty() => Ok(terminated_run(l, last_id)),
            _ => Err(ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{pod_name}\" not found"
            ))),
        };
    }
    if let Some(r) = state.and_then(|s| s.get("running")) {
        return Ok(Run {
            id: id.to_string(),
            started: ts(r.get("startedAt")),
            ended: None,
        });
    }
    if let Some(t) = state.and_then(|s| s.get("terminated")) {
        let tid = get_str(t, &["containerID"]).unwrap_or(id);
        if !tid.is_empty() {
            return Ok(terminated_run(t, tid));
        }
        return match last {
            Some(l) if !last_id.is_empty() => Ok(terminated_run(l, last_id)),
            _ => err("is terminated".into()),
        };
    }
    if let Some(l) = last {
        if last_id.is_empty() {
            return err("is terminated".into());
        }
        return Ok(terminated_run(l, last_id));
    }
    match state
        .and_then(|s| s.get("waiting"))
        .map(|w| get_str(w, &["reason"]).unwrap_or(""))
    {
        Some("ErrImagePull") => err("is waiting to start: image can't be pulled".into()),
        Some("ImagePullBackOff") => {
            err("is waiting to start: trying and failing to pull image".into())
        }
        Some(reason) => err(format!("is waiting to start: {reason}")),
        None => err("is waiting to start - no logs yet".into()),
    }
}

/// The lines `run` of `container` printed (see the module documentation).
pub fn lines_of(pod: &Value, container: &str, run: &Run) -> Vec<Line> {
    let name = meta_str(pod, "name");
    let mut out = Vec::new();
    let Some(start) = run.started else {
        return out;
    };
    out.push(Line {
        at: start,
        text: format!("[kubesim] {name}/{container} started"),
    });
    let index = get(
        pod,
        &[
            "metadata",
            "annotations",
            crate::controllers::COMPLETION_INDEX,
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or("");
    if let Some(text) = get(pod, &["metadata", "annotations", ANN_LOG]).and_then(Value::as_str) {
        for l in text.lines() {
            out.push(Line {
                at: start,
                text: l
                    .replace("${pod}", name)
                    .replace("${index}", index)
                    .replace("${container}", container),
            });
        }
    }
    if let Some((at, code)) = run.ended {
        out.push(Line {
            at,
            text: format!("[kubesim] {name}/{container} exited with code {code}"),
        });
    }
    out
}

/// The kubelet's timestamp prefix format (fixed nine fractional digits).
pub fn format_timestamp(t: Timestamp) -> String {
    let secs = t.as_second();
    let nanos = t.subsec_nanosecond().max(0);
    let base = Timestamp::from_second(secs).unwrap_or(t);
    format!("{}.{nanos:09}Z", base.strftime("%Y-%m-%dT%H:%M:%S"))
}

/// The first answer: `lines` filtered by tail and since, formatted, capped by `limitBytes`.
pub fn render(lines: &[Line], opts: &LogOptions, now: Timestamp) -> String {
    let tail = opts.tail_lines.map_or(lines.len(), |t| {
        usize::try_from(t).unwrap_or(0).min(lines.len())
    });
    let since = opts.since_time.or_else(|| {
        opts.since_seconds
            .and_then(|s| now.checked_sub(jiff::SignedDuration::from_secs(s)).ok())
    });
    let mut out = String::new();
    for l in &lines[lines.len() - tail..] {
        if since.is_some_and(|s| l.at < s) {
            continue;
        }
        push_line(&mut out, l, opts.timestamps);
    }
    out
}

pub fn push_line(out: &mut String, l: &Line, timestamps: bool) {
    if timestamps {
        out.push_str(&format_timestamp(l.at));
        out.push(' ');
    }
    out.push_str(&l.text);
    out.push('\n');
}

/// A log request as far as it can be answered at once: the container's run and the first chunk, or
/// the error. `Ok(None)` = the pod has no node (empty answer).
pub fn start(
    api: &Api,
    served: &Served,
    ns: &str,
    name: &str,
    opts: &LogOptions,
) -> Result<Option<(String, Run, Vec<Line>)>, ApiError> {
    opts.validate(name)?;
    let pod = api.served_value(served, &*api.get(served, ns, name)?);
    let Some(container) = resolve_container(&pod, opts)? else {
        return Ok(None);
    };
    let run = select_run(&pod, &container, opts.previous)?;
    let lines = lines_of(&pod, &container, &run);
    Ok(Some((container, run, lines)))
}

/// A `follow=true` request after its first answer.
pub struct Follow {
    pub api: Arc<Api>,
    pub served: Arc<Served>,
    pub ns: String,
    pub name: String,
    pub container: String,
    pub run: Run,
    /// Lines already sent.
    pub sent: usize,
    /// The options, `limit_bytes` being what is left of the budget.
    pub opts: LogOptions,
}

/// Follows the run until it ends or the pod goes: every new line, formatted, is sent on `tx`. Lines
/// change only when the pod's status does, so it waits for the pods table's events.
pub async fn follow(f: Follow, tx: tokio::sync::mpsc::Sender<bytes::Bytes>) {
    let Follow {
        api,
        served,
        ns,
        name,
        container,
        run,
        mut sent,
        opts,
    } = f;
    let mut events = api.store.subscribe(&served.table);
    let mut budget = opts
        .limit_bytes
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    loop {
        let Some(st) = api.store.get(&served.table, &ns, &name) else {
            return;
        };
        let pod = api.served_value(&served, &st);
        // The run being followed, wherever it is now (current state or, after a restart, lastState).
        let now_run = match select_run(&pod, &container, false) {
            Ok(r) if r.id == run.id => Some(r),
            _ => select_run(&pod, &container, true)
                .ok()
                .filter(|r| r.id == run.id),
        };
        let Some(now_run) = now_run else { return };
        let lines = lines_of(&pod, &container, &now_run);
        let mut chunk = String::new();
        for l in lines.iter().skip(sent) {
            push_line(&mut chunk, l, opts.timestamps);
        }
        sent = sent.max(lines.len());
        if !chunk.is_empty() {
            let mut bytes = chunk.into_bytes();
            bytes.truncate(budget);
            budget -= bytes.len();
            if tx.send(bytes::Bytes::from(bytes)).await.is_err() || budget == 0 {
                return;
            }
        }
        if now_run.ended.is_some() {
            return;
        }
        tokio::select! {
            r = events.recv() => if matches!(r, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                events = api.store.subscribe(&served.table);
            },
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(statuses: Value) -> Value {
        json!({"metadata": {"name": "p", "annotations": {"sim/log": "hi ${pod} #${index}\nbye",
            "batch.kubernetes.io/job-completion-index": "3"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
            "status": {"containerStatuses": statuses}})
    }

    #[test]
    fn option_errors_are_worded_like_the_server() {
        let o = LogOptions {
            tail_lines: Some(-1),
            ..Default::default()
        };
        assert_eq!(
            o.validate("p").unwrap_err().message,
            "PodLogOptions \"p\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        let o = LogOptions {
            since_seconds: Some(1),
            since_time: Some(Timestamp::UNIX_EPOCH),
            ..Default::default()
        };
        assert!(
            o.validate("p")
                .unwrap_err()
                .message
                .contains("at most one of `sinceTime` or `sinceSeconds` may be specified")
        );
    }

    #[test]
    fn containers_are_chosen_like_the_server() {
        let mut p = pod(json!([]));
        p["spec"]["containers"] = json!([{"name": "a"}, {"name": "b"}]);
        p["spec"]["initContainers"] = json!([{"name": "i"}]);
        let e = resolve_container(&p, &LogOptions::default()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "a container name must be specified for pod p, choose one of: [i a b]"
            )
        );
        let o = LogOptions {
            container: Some("z".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve_container(&p, &o).unwrap_err().message,
            "container z is not valid for pod p"
        );
        p["spec"]["nodeName"] = json!("");
        let o = LogOptions {
            container: Some("a".into()),
            ..Default::default()
        };
        assert_eq!(resolve_container(&p, &o).unwrap(), None);
    }

    #[test]
    fn runs_lines_and_kubelet_errors() {
        let waiting = pod(
            json!([{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}]),
        );
        assert_eq!(
            select_run(&waiting, "c", false).unwrap_err().message,
            "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"
        );
        assert_eq!(
            select_run(&waiting, "c", true).unwrap_err().message,
            "previous terminated container \"c\" in pod \"p\" not found"
        );
        let done = pod(json!([{"name": "c", "containerID": "containerd://1",
            "state": {"terminated": {"exitCode": 3, "startedAt": "2026-01-01T00:00:01Z",
                "finishedAt": "2026-01-01T00:00:04Z", "containerID": "containerd://1"}}, "lastState": {}}]));
        let run = select_run(&done, "c", false).unwrap();
        let lines = lines_of(&done, "c", &run);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "[kubesim] p/c started",
                "hi p #3",
                "bye",
                "[kubesim] p/c exited with code 3"
            ]
        );
        let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
        let tail = LogOptions {
            tail_lines: Some(1),
            timestamps: true,
            ..Default::default()
        };
        assert_eq!(
            render(&lines, &tail, now),
            "2026-01-01T00:00:04.000000000Z [kubesim] p/c exited with code 3\n"
        );
        let since = LogOptions {
            since_seconds: Some(2),
            ..Default::default()
        };
        assert_eq!(
            render(&lines, &since, now),
            "[kubesim] p/c exited with code 3\n"
        );
    }
}
