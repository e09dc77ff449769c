//! Choosing the worker cluster for a Job, or saying exactly why none can take it.
//!
//! Eligible: matches the origin's cluster selector, takes Jobs from the origin's namespace (the
//! WorkerCluster's `spec.namespaceSelector` over the management namespace's labels), may use the
//! Job's namespace on the worker (its `spec.namespaces`, when set), not being removed, not excluded for this origin
//! (a foreign Job holds the name there, the Job was lost there, or the worker refused its mirror or
//! did not answer, for a backoff period), not paused, weight > 0, and Ready. Among the eligible,
//! the cluster with the lowest `(current mirrors + 1) / weight` wins — the load it would have after
//! taking the Job, per unit of weight — so placements spread in proportion to weight. Ties go to the
//! lexicographically smallest name, so the choice is deterministic.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use courier_api::WorkerCluster;
use jiff::Timestamp;

use crate::selector::{ClusterSelector, SelectorError};

/// What placement (and the reconciler) knows about one registered worker cluster.
///
/// The parts that change only with the WorkerCluster (name, labels, selectors) are shared
/// (`Arc`): the controller builds them once per WorkerCluster change, and a reconcile, which views
/// every registered cluster, only counts references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub name: Arc<str>,
    /// The WorkerCluster's labels (what cluster selectors match).
    pub labels: Arc<BTreeMap<String, String>>,
    /// Share of placements; 0 = never chosen.
    pub weight: u32,
    pub paused: bool,
    /// The WorkerCluster's `Ready` condition is True.
    pub ready: bool,
    /// When the cluster stopped being Ready (the `Ready` condition's lastTransitionTime), if it is not.
    pub not_ready_since: Option<Timestamp>,
    /// Current mirrors on the cluster (all origins).
    pub current_mirrors: u32,
    /// Calls to the cluster are pending without answers (hung or overloaded, not yet judged by a
    /// probe): chosen only when no other eligible cluster is left.
    pub degraded: bool,
    /// The WorkerCluster is being deleted: never chosen; Jobs there move elsewhere.
    pub draining: bool,
    /// A later registration of an API server another WorkerCluster registers: never chosen (Jobs
    /// placed through it before that was known keep running there).
    pub duplicate: bool,
    /// `spec.namespaceSelector`: which management namespaces it takes Jobs from (`None`: all); an
    /// invalid one (the message) takes none.
    pub namespace_selector: Option<Arc<Result<ClusterSelector, String>>>,
    /// `spec.namespaces`: the worker namespaces Courier may use there (`None`: all). A mirror
    /// lands in its origin's namespace, so a Job from any other namespace is not taken.
    pub namespaces: Option<Arc<[String]>>,
}

impl ClusterView {
    /// Whether Courier may use `namespace` on this worker (`spec.namespaces`).
    pub fn takes_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.iter().any(|n| n == namespace))
    }
}

/// Why WorkerCluster `wc` does not take a Job from `namespace` because of its `spec.namespaces`
/// (what `courier describe job` prints), or `None` when it may use that namespace.
pub fn namespaces_note(wc: &WorkerCluster, namespace: &str) -> Option<String> {
    let list = wc.spec.namespaces.as_ref()?;
    (!wc.spec.takes_namespace(namespace)).then(|| {
        format!(
            "cluster {} takes only namespaces {}",
            wc.metadata.name.as_deref().unwrap_or("?"),
            list.join(", ")
        )
    })
}

/// A WorkerCluster's `spec.namespaceSelector`, parsed ([`ClusterView::namespace_selector`]).
pub fn namespace_selector(wc: &WorkerCluster) -> Option<Arc<Result<ClusterSelector, String>>> {
    wc.spec.namespace_selector.as_ref().map(|ls| {
        Arc::new(
            ClusterSelector::from_label_selector(ls)
                .map_err(|e| format!("invalid spec.namespaceSelector: {e}")),
        )
    })
}

/// The labels a management namespace is matched with: what the cache holds, plus the
/// `kubernetes.io/metadata.name` label the API server gives every namespace (so a selector by name
/// works even before the cache has the namespace).
pub fn namespace_labels(
    namespace: &str,
    cached: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels = cached.cloned().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), namespace.to_string());
    labels
}

/// The label the API server sets on every namespace, to its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Why one cluster cannot take this Job. Checked in this order; the first that applies is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ineligibility {
    SelectorMismatch,
    /// Its `spec.namespaceSelector` does not take Jobs from the Job's namespace.
    NamespaceNotSelected,
    /// Its `spec.namespaces` does not list the Job's namespace (Courier may not use it there).
    NamespaceNotListed,
    /// The WorkerCluster is being deleted.
    Removing,
    /// Another WorkerCluster registers the same API server.
    Duplicate,
    /// Excluded for this Job: someone else's Job holds its name there.
    Conflict,
    /// Excluded for this Job: its mirror (or the worker) was lost there.
    Lost,
    /// Excluded for this Job for a while: the worker refused its mirror.
    Refused,
    /// Excluded for this Job for a while: the worker did not answer the create.
    Unanswered,
    /// Excluded for this Job for a while: the Job's namespace does not exist there.
    NamespaceMissing,
    Paused,
    ZeroWeight,
    NotReady,
}

impl Ineligibility {
    /// Rejections that are about this Job on that worker (not about the worker as a whole).
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Ineligibility::Refused | Ineligibility::Unanswered | Ineligibility::NamespaceMissing
        )
    }
}

impl fmt::Display for Ineligibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ineligibility::SelectorMismatch => "not matching the cluster selector",
            Ineligibility::NamespaceNotSelected => "not taking Jobs from this namespace",
            Ineligibility::NamespaceNotListed => "not listing this namespace in spec.namespaces",
            Ineligibility::Removing => "being removed",
            Ineligibility::Duplicate => "a duplicate registration",
            Ineligibility::Conflict => "holding another Job of that name",
            Ineligibility::Lost => "lost for this Job",
            Ineligibility::Refused => "refused the mirror",
            Ineligibility::Unanswered => "did not answer",
            Ineligibility::NamespaceMissing => "lacking the Job's namespace",
            Ineligibility::Paused => "paused",
            Ineligibility::ZeroWeight => "weight 0",
            Ineligibility::NotReady => "not Ready",
        })
    }
}

/// Clusters excluded for one Job, with why.
pub type Exclusions = BTreeMap<String, Ineligibility>;

/// Why no cluster was chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoEligibleCluster {
    #[error("no WorkerCluster is registered")]
    NoClusters,
    #[error("invalid courier.dev/cluster-selector {selector:?}: {error}")]
    InvalidSelector {
        selector: String,
        error: SelectorError,
    },
    /// The origin's selector annotation is longer than Courier reads: not guessed at.
    #[error(
        "the courier.dev/cluster-selector annotation is longer than {max} bytes, so Courier does not \
         read it: shorten it"
    )]
    SelectorTooLong { max: usize },
    #[error("{}", describe_rejections(selector.as_deref(), rejected))]
    NoneEligible {
        /// The selector as written, when the origin has one.
        selector: Option<String>,
        /// Every registered cluster with the reason it was rejected, by name.
        rejected: Vec<(String, Ineligibility)>,
    },
}

impl NoEligibleCluster {
    /// Whether every cluster was rejected for the same reason (e.g. "all paused").
    pub fn all_for(&self, reason: Ineligibility) -> bool {
        match self {
            NoEligibleCluster::NoneEligible { rejected, .. } => {
                !rejected.is_empty() && rejected.iter().all(|(_, r)| *r == reason)
            }
            _ => false,
        }
    }
}

fn describe_rejections(selector: Option<&str>, rejected: &[(String, Ineligibility)]) -> String {
    let total = rejected.len();
    if let Some(s) = selector
        && rejected
            .iter()
            .all(|(_, r)| *r == Ineligibility::SelectorMismatch)
    {
        return format!("cluster selector {s:?} matched none of the {total} WorkerClusters");
    }
    let mut by_reason: BTreeMap<Ineligibility, Vec<&str>> = BTreeMap::new();
    for (name, reason) in rejected {
        by_reason.entry(*reason).or_default().push(name);
    }
    let groups: Vec<String> = by_reason
        .iter()
        .map(|(reason, names)| match (reason, selector) {
            (Ineligibility::SelectorMismatch, Some(s)) => {
                format!("not matching selector {s:?}: {}", names.join(", "))
            }
            _ => format!("{reason}: {}", names.join(", ")),
        })
        .collect();
    let every = match by_reason.keys().next() {
        Some(Ineligibility::Paused) if by_reason.len() == 1 => " (all paused)",
        Some(Ineligibility::NotReady) if by_reason.len() == 1 => " (none Ready)",
        _ => "",
    };
    format!(
        "no eligible WorkerCluster among {total}{every}: {}",
        groups.join("; ")
    )
}

/// Why `cluster` cannot take the Job (whose namespace has `namespace_labels`, its name under
/// [`NAMESPACE_NAME_LABEL`]), or `None` when it can.
pub fn ineligibility(
    cluster: &ClusterView,
    selector: &ClusterSelector,
    namespace_labels: &BTreeMap<String, String>,
    excluded: &Exclusions,
) -> Option<Ineligibility> {
    let takes_namespace = match cluster.namespace_selector.as_deref() {
        None => true,
        Some(Ok(s)) => s.matches(namespace_labels),
        Some(Err(_)) => false,
    };
    if !selector.matches(&cluster.labels) {
        Some(Ineligibility::SelectorMismatch)
    } else if !takes_namespace {
        Some(Ineligibility::NamespaceNotSelected)
    } else if !match namespace_labels.get(NAMESPACE_NAME_LABEL) {
        Some(ns) => cluster.takes_namespace(ns),
        // A namespace of unknown name is on no list.
        None => cluster.namespaces.is_none(),
    } {
        Some(Ineligibility::NamespaceNotListed)
    } else if cluster.draining {
        Some(Ineligibility::Removing)
    } else if cluster.duplicate {
        Some(Ineligibility::Duplicate)
    } else if let Some(why) = excluded.get(&*cluster.name) {
        Some(*why)
    } else if cluster.paused {
        Some(Ineligibility::Paused)
    } else if cluster.weight == 0 {
        Some(Ineligibility::ZeroWeight)
    } else if !cluster.ready {
        Some(Ineligibility::NotReady)
    } else {
        None
    }
}

/// Picks the cluster for a Job whose `courier.dev/cluster-selector` is `selector` (None = any) and
/// whose namespace has `namespace_labels` ([`namespace_labels`]), never one in `excluded`.
pub fn choose_cluster<'a>(
    clusters: &'a [ClusterView],
    selector: Option<&str>,
    namespace_labels: &BTreeMap<String, String>,
    excluded: &Exclusions,
) -> Result<&'a ClusterView, NoEligibleCluster> {
    if clusters.is_empty() {
        return Err(NoEligibleCluster::NoClusters);
    }
    let parsed = match selector {
        Some(s) => {
            ClusterSelector::parse(s).map_err(|error| NoEligibleCluster::InvalidSelector {
                selector: s.to_string(),
                error,
            })?
        }
        None => ClusterSelector::everything(),
    };
    let mut rejected = Vec::new();
    let mut best: Option<&ClusterView> = None;
    for cluster in clusters {
        match ineligibility(cluster, &parsed, namespace_labels, excluded) {
            Some(reason) => rejected.push((cluster.name.to_string(), reason)),
            None => {
                if best.is_none_or(|b| better(cluster, b) == Ordering::Less) {
                    best = Some(cluster);
                }
            }
        }
    }
    best.ok_or_else(|| {
        rejected.sort();
        NoEligibleCluster::NoneEligible {
            selector: selector
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string),
            rejected,
        }
    })
}

/// Orders eligible clusters: responsive before degraded, then lower `(mirrors + 1) / weight`,
/// then by name.
fn better(a: &ClusterView, b: &ClusterView) -> Ordering {
    // Cross-multiplied to stay in integers: (a.m + 1) / a.w  vs  (b.m + 1) / b.w.
    let load_a = (u64::from(a.current_mirrors) + 1) * u64::from(b.weight);
    let load_b = (u64::from(b.current_mirrors) + 1) * u64::from(a.weight);
    a.degraded
        .cmp(&b.degraded)
        .then(load_a.cmp(&load_b))
        .then_with(|| a.name.cmp(&b.name))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A Ready, unpaused cluster of weight 1 with `labels` (also the reconcile tests' clusters).
    pub(crate) fn cluster(name: &str, labels: &[(&str, &str)]) -> ClusterView {
        ClusterView {
            name: name.into(),
            labels: Arc::new(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            weight: 1,
            paused: false,
            ready: true,
            not_ready_since: None,
            current_mirrors: 0,
            degraded: false,
            draining: false,
            duplicate: false,
            namespace_selector: None,
            namespaces: None,
        }
    }

    #[test]
    fn a_degraded_cluster_is_the_last_resort() {
        let mut hung = cluster("a", &[]);
        hung.degraded = true;
        let mut busy = cluster("b", &[]);
        busy.current_mirrors = 50;
        let clusters = [hung.clone(), busy];
        let chosen = choose_cluster(&clusters, None, &ns(), &Exclusions::new()).map(|c| &*c.name);
        assert_eq!(
            chosen,
            Ok("b"),
            "a responsive cluster wins even with more mirrors"
        );
        let only = [hung];
        let chosen = choose_cluster(&only, None, &ns(), &Exclusions::new()).map(|c| &*c.name);
        assert_eq!(
            chosen,
            Ok("a"),
            "degraded is still eligible when nothing else is"
        );
    }

    /// `spec.namespaces`: a cluster listing namespaces takes Jobs only from those (after the
    /// selectors, before everything else); one without a list takes every namespace.
    #[test]
    fn a_cluster_with_a_namespace_list_takes_only_those() {
        let mut w1 = cluster("w1", &[]);
        w1.namespaces = Some(vec!["team-a".into(), "team-b".into()].into());
        let mut w2 = cluster("w2", &[]);
        w2.current_mirrors = 9;
        let team = |ns: &str| namespace_labels(ns, None);
        let both = [w1.clone(), w2.clone()];
        let chosen =
            |ns: &str| choose_cluster(&both, None, &team(ns), &none()).map(|c| c.name.clone());
        assert_eq!(chosen("team-a"), Ok("w1".into()));
        assert_eq!(chosen("team-b"), Ok("w1".into()));
        assert_eq!(chosen("ml"), Ok("w2".into()), "w1 does not list ml");
        let err = choose_cluster(std::slice::from_ref(&w1), None, &team("ml"), &none())
            .expect_err("w1 does not list ml");
        assert!(err.all_for(Ineligibility::NamespaceNotListed), "{err}");
        assert!(
            err.to_string()
                .contains("not listing this namespace in spec.namespaces: w1"),
            "{err}"
        );
        // The list is checked before the cluster's state: a paused w1 still says why first.
        let mut paused = w1.clone();
        paused.paused = true;
        assert_eq!(
            ineligibility(
                &paused,
                &ClusterSelector::everything(),
                &team("ml"),
                &none()
            ),
            Some(Ineligibility::NamespaceNotListed)
        );
        assert_eq!(
            ineligibility(
                &paused,
                &ClusterSelector::everything(),
                &team("team-a"),
                &none()
            ),
            Some(Ineligibility::Paused)
        );
        // No name to check: on no list.
        assert_eq!(
            ineligibility(
                &w1,
                &ClusterSelector::everything(),
                &BTreeMap::new(),
                &none()
            ),
            Some(Ineligibility::NamespaceNotListed)
        );
        assert_eq!(
            ineligibility(
                &w2,
                &ClusterSelector::everything(),
                &BTreeMap::new(),
                &none()
            ),
            None
        );
    }

    fn none() -> Exclusions {
        Exclusions::new()
    }

    fn ns() -> BTreeMap<String, String> {
        namespace_labels("ml", None)
    }

    #[test]
    fn picks_least_loaded_relative_to_weight_then_name() {
        let mut a = cluster("a", &[]);
        let mut b = cluster("b", &[]);
        assert_eq!(
            choose_cluster(&[b.clone(), a.clone()], None, &ns(), &none()).map(|c| &*c.name),
            Ok("a")
        );
        a.current_mirrors = 1;
        assert_eq!(
            choose_cluster(&[a.clone(), b.clone()], None, &ns(), &none()).map(|c| &*c.name),
            Ok("b")
        );
        b.weight = 3;
        b.current_mirrors = 2; // (2+1)/3 = 1 < (1+1)/1 = 2
        assert_eq!(
            choose_cluster(&[a.clone(), b.clone()], None, &ns(), &none()).map(|c| &*c.name),
            Ok("b")
        );
        b.current_mirrors = 5; // 6/3 = 2 == 2/1: tie -> name
        assert_eq!(
            choose_cluster(&[b, a], None, &ns(), &none()).map(|c| &*c.name),
            Ok("a")
        );
    }

    #[test]
    fn weights_share_placements() {
        let mut clusters = vec![cluster("a", &[]), cluster("b", &[])];
        clusters[1].weight = 3;
        let mut count = BTreeMap::new();
        for _ in 0..40 {
            let name = choose_cluster(&clusters, None, &ns(), &none())
                .expect("eligible")
                .name
                .clone();
            *count.entry(name.clone()).or_insert(0) += 1;
            if let Some(c) = clusters.iter_mut().find(|c| c.name == name) {
                c.current_mirrors += 1;
            }
        }
        assert_eq!(count.get("a"), Some(&10));
        assert_eq!(count.get("b"), Some(&30));
    }

    #[test]
    fn filters_and_reasons() {
        let mut paused = cluster("p", &[("region", "eu")]);
        paused.paused = true;
        let mut down = cluster("d", &[("region", "eu")]);
        down.ready = false;
        let mut zero = cluster("z", &[("region", "eu")]);
        zero.weight = 0;
        let us = cluster("us", &[("region", "us")]);
        let conflicted = cluster("c", &[("region", "eu")]);
        let mut removing = cluster("r", &[("region", "eu")]);
        removing.draining = true;
        let mut twice = cluster("t", &[("region", "eu")]);
        twice.duplicate = true;
        let all = vec![paused, down, zero, us, conflicted, removing, twice];
        let excluded = Exclusions::from([("c".to_string(), Ineligibility::Conflict)]);
        let err =
            choose_cluster(&all, Some("region=eu"), &ns(), &excluded).expect_err("none eligible");
        assert_eq!(
            err,
            NoEligibleCluster::NoneEligible {
                selector: Some("region=eu".into()),
                rejected: vec![
                    ("c".into(), Ineligibility::Conflict),
                    ("d".into(), Ineligibility::NotReady),
                    ("p".into(), Ineligibility::Paused),
                    ("r".into(), Ineligibility::Removing),
                    ("t".into(), Ineligibility::Duplicate),
                    ("us".into(), Ineligibility::SelectorMismatch),
                    ("z".into(), Ineligibility::ZeroWeight),
                ]
            }
        );
        let text = err.to_string();
        for part in [
            "no eligible WorkerCluster among 7",
            "a duplicate registration: t",
            "not matching selector \"region=eu\": us",
            "holding another Job of that name: c",
            "being removed: r",
            "paused: p",
            "weight 0: z",
            "not Ready: d",
        ] {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
    }

    #[test]
    fn summary_messages() {
        assert_eq!(
            choose_cluster(&[], None, &ns(), &none())
                .expect_err("empty")
                .to_string(),
            "no WorkerCluster is registered"
        );
        let eu = cluster("eu", &[("region", "eu")]);
        let err = choose_cluster(std::slice::from_ref(&eu), Some("region=us"), &ns(), &none())
            .expect_err("mismatch");
        assert_eq!(
            err.to_string(),
            "cluster selector \"region=us\" matched none of the 1 WorkerClusters"
        );
        assert!(err.all_for(Ineligibility::SelectorMismatch));
        let err = choose_cluster(
            std::slice::from_ref(&eu),
            Some("region in (eu"),
            &ns(),
            &none(),
        )
        .expect_err("bad");
        assert!(matches!(err, NoEligibleCluster::InvalidSelector { .. }));
        assert!(
            err.to_string()
                .starts_with("invalid courier.dev/cluster-selector \"region in (eu\": ")
        );
        let mut p = eu.clone();
        p.paused = true;
        let err = choose_cluster(&[p], None, &ns(), &none()).expect_err("paused");
        assert!(err.all_for(Ineligibility::Paused));
        assert!(err.to_string().contains("(all paused)"), "{err}");
        let mut d = eu;
        d.ready = false;
        let err = choose_cluster(&[d], None, &ns(), &none()).expect_err("down");
        assert!(err.to_string().contains("(none Ready)"), "{err}");
    }

    /// The placement rule as the module docs and docs/architecture.md state it, written out here
    /// without `better` or `ineligibility`: the eligible clusters are those matching `region=eu`,
    /// not being removed, not a duplicate registration, not excluded, not paused, weight > 0 and
    /// Ready; among them responsive ones come before degraded ones, then the lowest
    /// `(mirrors + 1) / weight`, then the smallest name.
    fn documented_choice(clusters: &[ClusterView], excluded: &Exclusions) -> Option<String> {
        let eligible: Vec<&ClusterView> = clusters
            .iter()
            .filter(|c| {
                c.labels.get("region").map(String::as_str) == Some("eu")
                    && !c.draining
                    && !c.duplicate
                    && !excluded.contains_key(&*c.name)
                    && !c.paused
                    && c.weight > 0
                    && c.ready
            })
            .collect();
        let responsive: Vec<&ClusterView> =
            eligible.iter().copied().filter(|c| !c.degraded).collect();
        let pool = if responsive.is_empty() {
            eligible
        } else {
            responsive
        };
        let load = |c: &ClusterView| (f64::from(c.current_mirrors) + 1.0) / f64::from(c.weight);
        let least = pool.iter().map(|c| load(c)).fold(f64::INFINITY, f64::min);
        pool.iter()
            .filter(|c| load(c) == least)
            .map(|c| c.name.to_string())
            .min()
    }

    proptest! {
        /// The choice is the one the documented rule gives (`documented_choice`, independent of the
        /// code under test), and does not depend on the order clusters are listed in; when there is
        /// none, every cluster is listed with a reason.
        ///
        /// Seen failing: with `better` comparing `mirrors / weight` (without the + 1); the old
        /// property test, which reused `better`, passed with that break (its generator also rarely
        /// made two clusters eligible at once).
        #[test]
        fn choice_follows_the_documented_rule(
            // Weighted so that most cases have several eligible clusters to choose among.
            specs in proptest::collection::vec(
                (0u32..4, 0u32..10, proptest::bool::weighted(0.15), proptest::bool::weighted(0.85),
                 proptest::bool::weighted(0.8), proptest::bool::weighted(0.2),
                 any::<bool>(), any::<bool>()), 1..8),
            excluded_mask in proptest::collection::vec(proptest::bool::weighted(0.15), 8),
        ) {
            let clusters: Vec<ClusterView> = specs.iter().enumerate().map(
                |(i, &(w, m, paused, ready, eu, degraded, draining, duplicate))| {
                // Names not in list order, so ties by name are not ties by position.
                let mut c = cluster(&format!("c{}", (i * 5) % 8), &[("region", if eu { "eu" } else { "us" })]);
                c.weight = w; c.current_mirrors = m; c.paused = paused; c.ready = ready;
                c.degraded = degraded;
                // Rarer, so that most cases still have a choice to make.
                c.draining = draining && degraded; c.duplicate = duplicate && paused;
                c
            }).collect();
            let excluded: Exclusions = clusters.iter().zip(&excluded_mask)
                .filter(|(_, x)| **x).map(|(c, _)| (c.name.to_string(), Ineligibility::Refused)).collect();
            let forward = choose_cluster(&clusters, Some("region=eu"), &ns(), &excluded);
            let mut reversed = clusters.clone();
            reversed.reverse();
            let backward = choose_cluster(&reversed, Some("region=eu"), &ns(), &excluded);
            prop_assert_eq!(forward.clone().map(|c| c.name.clone()), backward.map(|c| c.name.clone()));
            let want = documented_choice(&clusters, &excluded);
            match forward {
                Ok(chosen) => prop_assert_eq!(Some(chosen.name.to_string()), want),
                Err(NoEligibleCluster::NoneEligible { rejected, .. }) => {
                    prop_assert_eq!(want, None);
                    prop_assert_eq!(rejected.len(), clusters.len());
                }
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
