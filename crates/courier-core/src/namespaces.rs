//! Namespaces on workers: whether Courier may create a Job's namespace on a worker, and with which
//! Pod Security Admission labels.
//!
//! By default it may not ([`WorkerNamespaces::MustExist`]): "may create Jobs in namespace X of the
//! management cluster" must not become "may create namespace X, with no pod security, on every
//! worker". A worker where the namespace is missing (or being deleted) is skipped for that Job like
//! a refusal ([`crate::hints::AvoidKind::NamespaceMissing`]). With `--create-worker-namespaces` the
//! namespace is created, labelled with the configured Pod Security level for `enforce`, `audit` and
//! `warn` (version `latest`). An existing namespace is the operator's: its labels are never changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// A Pod Security Standards level (`pod-security.kubernetes.io/<mode>` label value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodSecurityLevel {
    Privileged,
    Baseline,
    #[default]
    Restricted,
}

impl PodSecurityLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PodSecurityLevel::Privileged => "privileged",
            PodSecurityLevel::Baseline => "baseline",
            PodSecurityLevel::Restricted => "restricted",
        }
    }
}

impl fmt::Display for PodSecurityLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A level that is not one of the three Pod Security Standards.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Pod Security level {0:?}: use restricted, baseline or privileged")]
pub struct UnknownLevel(pub String);

impl FromStr for PodSecurityLevel {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "privileged" => Ok(PodSecurityLevel::Privileged),
            "baseline" => Ok(PodSecurityLevel::Baseline),
            "restricted" => Ok(PodSecurityLevel::Restricted),
            other => Err(UnknownLevel(other.to_string())),
        }
    }
}

/// What Courier does about a Job's namespace on a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerNamespaces {
    /// Never create it: a worker without it is skipped for the Job.
    #[default]
    MustExist,
    /// Create it when missing, with these Pod Security labels (`--create-worker-namespaces`).
    Create { pod_security: PodSecurityLevel },
}

/// The labels a namespace Courier creates gets: the level for `enforce`, `audit` and `warn`, each at
/// version `latest`.
pub fn pod_security_labels(level: PodSecurityLevel) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for mode in ["enforce", "audit", "warn"] {
        let key = format!("pod-security.kubernetes.io/{mode}");
        out.insert(format!("{key}-version"), "latest".to_string());
        out.insert(key, level.as_str().to_string());
    }
    out
}

/// What the origin is told when `cluster` has no usable namespace `namespace` (`detail`: what the
/// worker said).
pub fn missing_message(cluster: &str, namespace: &str, detail: &str) -> String {
    format!(
        "namespace {namespace} does not exist on WorkerCluster {cluster} ({detail}); create it \
         there, or run the controller with --create-worker-namespaces"
    )
}

/// Where a worker's mirror watch runs: cluster-wide, or in one namespace.
pub type WatchScope = Option<String>;

/// The mirror watches a worker needs. Without `spec.namespaces` (`listed` is `None`): one
/// cluster-wide watch. With it: one watch per listed namespace, plus one per namespace that is no
/// longer listed but still holds Courier's work there (`in_use`: namespaces of mirrors in the
/// cache and of unfinished origins placed on the worker), so that a Job already running in a
/// namespace removed from the list is still followed until it finishes and its mirror is gone.
/// Nothing is watched cluster-wide then.
pub fn watch_scopes<'a>(
    listed: Option<&[String]>,
    in_use: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<WatchScope> {
    match listed {
        None => BTreeSet::from([None]),
        Some(list) => list
            .iter()
            .cloned()
            .chain(in_use.into_iter().map(str::to_string))
            .map(Some)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_follow_the_list_and_the_work_still_in_unlisted_namespaces() {
        let some = |v: &[&str]| -> BTreeSet<WatchScope> {
            v.iter().map(|s| Some(s.to_string())).collect()
        };
        // No list: one cluster-wide watch, whatever is in use.
        assert_eq!(watch_scopes(None, ["team-a"]), BTreeSet::from([None]));
        let list = ["team-a".to_string(), "team-b".to_string()];
        assert_eq!(watch_scopes(Some(&list), []), some(&["team-a", "team-b"]));
        // team-c was removed from the list while a Job ran there: still watched, never cluster-wide.
        let scopes = watch_scopes(Some(&list), ["team-a", "team-c", "team-c"]);
        assert_eq!(scopes, some(&["team-a", "team-b", "team-c"]));
        assert!(!scopes.contains(&None));
    }

    #[test]
    fn levels_parse_and_print_as_the_pod_security_standards_name_them() {
        for l in ["privileged", "baseline", "restricted"] {
            assert_eq!(l.parse::<PodSecurityLevel>().map(|p| p.as_str()), Ok(l));
        }
        let e = "Restricted".parse::<PodSecurityLevel>().unwrap_err();
        assert!(e.to_string().contains("restricted, baseline or privileged"));
        assert_eq!(PodSecurityLevel::default(), PodSecurityLevel::Restricted);
    }

    #[test]
    fn created_namespaces_enforce_audit_and_warn_at_the_level() {
        let labels = pod_security_labels(PodSecurityLevel::Baseline);
        assert_eq!(labels.len(), 6);
        for mode in ["enforce", "audit", "warn"] {
            let key = format!("pod-security.kubernetes.io/{mode}");
            assert_eq!(labels.get(&key).map(String::as_str), Some("baseline"));
            assert_eq!(
                labels.get(&format!("{key}-version")).map(String::as_str),
                Some("latest")
            );
        }
    }
}
