//! Origin Jobs as a user sees them: `submit`, `jobs`, `describe job` (alias `explain`) and `logs`.
//! One file per command; what they share (a Job's facts, names on the command line, finding the
//! mirror on its worker) is here and in `mirror`.

mod describe;
mod list;
mod logs;
mod mirror;
mod submit;

use anyhow::{anyhow, bail};
use courier_api::{ANNOTATION_EPOCH, LABEL_CLUSTER, MANAGED_BY};
use courier_core::phase::{JobPhase, PhaseFacts};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use kube::{Api, Client};

#[cfg(feature = "sandbox")]
pub use describe::explain_ref;
pub use describe::{DescribeArgs, ExplainArgs, describe, explain};
pub use list::{JobsArgs, jobs};
pub use logs::{LogsArgs, logs};
#[cfg(feature = "sandbox")]
pub use submit::prepare_job;
pub use submit::{SubmitArgs, submit};

use crate::util::api_message;

/// Whether a Job has a true Complete or Failed condition.
pub fn is_finished(job: &Job) -> bool {
    finished_as(job).is_some()
}

/// `Complete` or `Failed` (with the condition's reason), if the Job finished.
pub fn finished_as(job: &Job) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find_map(|c| {
            ((c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
                .then(|| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
        })
}

/// When the Job finished: its Complete or Failed condition's transition time.
pub fn finished_at(job: &Job) -> Option<jiff::Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// The one-word state of an origin Job, in the vocabulary every Courier view shares.
pub fn phase(job: &Job) -> JobPhase {
    phase_of(job, cluster_of(job).is_some())
}

/// The phase of any Job; `placed` is whether it runs somewhere (a mirror always does).
pub fn phase_of(job: &Job, placed: bool) -> JobPhase {
    let default = JobStatus::default();
    JobPhase::of(PhaseFacts {
        deleting: job.metadata.deletion_timestamp.is_some(),
        suspend: job.spec.as_ref().and_then(|s| s.suspend) == Some(true),
        status: job.status.as_ref().unwrap_or(&default),
        placed,
    })
}

pub fn cluster_of(job: &Job) -> Option<String> {
    job.metadata.labels.as_ref()?.get(LABEL_CLUSTER).cloned()
}

pub fn epoch_of(job: &Job) -> Option<String> {
    job.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_EPOCH)
        .cloned()
}

pub fn is_managed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY)
}

/// `succeeded/completions`, as kubectl shows it.
pub fn completions(job: &Job) -> String {
    let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    match job.spec.as_ref().and_then(|s| s.completions) {
        Some(c) => format!("{succeeded}/{c}"),
        None => format!("{succeeded}/1"),
    }
}

/// A Job named on the command line: `NAME` (in `namespace`, from -n or the context),
/// `NAMESPACE/NAME`, or kubectl's `job/NAME` (also `jobs/`, `job.batch/`).
pub fn parse_ref(
    s: &str,
    flag: Option<&str>,
    default_ns: &str,
) -> anyhow::Result<(String, String)> {
    let s = ["job/", "jobs/", "job.batch/", "jobs.batch/"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .unwrap_or(s);
    let ns = flag.unwrap_or(default_ns);
    match s.split_once('/') {
        Some((n, name)) if !n.is_empty() && !name.is_empty() && !name.contains('/') => match flag {
            Some(f) if f != n => {
                bail!("{s:?} names namespace {n} but --namespace is {f}; drop one of them")
            }
            _ => Ok((n.to_string(), name.to_string())),
        },
        None if !s.is_empty() => Ok((ns.to_string(), s.to_string())),
        _ => bail!("expected a Job as NAME, NAMESPACE/NAME or job/NAME (e.g. hello), got {s:?}"),
    }
}

/// The origin Job `ns/name` in the management cluster; not found says how to list them.
pub async fn get_origin(client: &Client, ns: &str, name: &str) -> anyhow::Result<Job> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    match jobs.get_opt(name).await {
        Ok(Some(j)) => Ok(j),
        Ok(None) => bail!(
            "Job {ns}/{name} not found in the management cluster; `courier jobs -n {ns}` (or -A) \
             lists the Jobs Courier manages"
        ),
        Err(e) => {
            Err(anyhow!(api_message(&e))).map_err(|e| e.context(format!("reading Job {ns}/{name}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs() {
        let ok = |s: &str, flag: Option<&str>| parse_ref(s, flag, "team").expect("parses");
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(ok("a/b", None), pair("a", "b"));
        assert_eq!(ok("b", Some("x")), pair("x", "b"));
        assert_eq!(ok("b", None), pair("team", "b"), "the context's namespace");
        assert_eq!(ok("job/b", None), pair("team", "b"));
        assert_eq!(ok("job.batch/a/b", None), pair("a", "b"));
        assert_eq!(ok("a/b", Some("a")), pair("a", "b"));
        let bad = |s: &str, flag: Option<&str>| parse_ref(s, flag, "team").is_err();
        assert!(bad("a/", None));
        assert!(bad("a/b/c", None));
        assert!(bad("", None));
        assert!(bad("a/b", Some("z")));
    }

    #[test]
    fn phases() {
        let at = |status: serde_json::Value| -> String {
            let j: Job = serde_json::from_value(json!({
                "metadata": {"name": "a", "labels": {"courier.dev/cluster": "w1"}},
                "spec": {"template": {}},
                "status": status,
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            phase(&j).to_string()
        };
        assert_eq!(at(json!({})), "Dispatched");
        assert_eq!(at(json!({"active": 1})), "Running");
        // The last index done, the terminal condition not yet written.
        assert_eq!(at(json!({"active": 0, "succeeded": 1})), "Running");
        assert_eq!(
            at(json!({"succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"}]})),
            "Finishing"
        );
        assert_eq!(
            at(json!({"succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]})),
            "Complete"
        );
    }
}
