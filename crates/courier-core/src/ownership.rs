//! Whose a Job on a worker cluster is, judged by its labels against the origin it would mirror.
//!
//! Only `Current` and `Stale` Jobs are Courier's to touch for this origin; `Foreign` and `OtherOrigin`
//! Jobs are never patched or deleted (DESIGN invariant 1). A mirror is current only on the cluster
//! named by the origin's intent and with the intent's epoch (invariant 2); any other mirror of this
//! origin is stale and fenced (invariant 3).

use courier_api::{LABEL_EPOCH, LABEL_ORIGIN, LABEL_ORIGIN_UID};

use crate::compact::Labels;

/// The placement intent written on the origin: which cluster, which epoch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Intent {
    pub cluster: String,
    pub epoch: u64,
}

/// Who the origin is, for judging remote Jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginIdentity<'a> {
    /// This management cluster's `--origin` id.
    pub origin_id: &'a str,
    /// The origin Job's UID.
    pub origin_uid: &'a str,
}

/// The verdict on one remote Job with the origin's namespace/name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// This origin's mirror for the current intent (cluster and epoch).
    Current,
    /// A mirror of this origin from another epoch (or on another cluster than the intent names);
    /// `epoch` is `None` when its epoch label is missing or malformed. Fenced: deleted, never read.
    Stale { epoch: Option<u64> },
    /// Not a mirror of this origin: no origin labels, or another origin UID (e.g. a deleted and
    /// re-created origin of the same name). Never touched.
    Foreign,
    /// Another management cluster's mirror (`courier.dev/origin` names a different origin id).
    /// Never touched.
    OtherOrigin { origin_id: String },
}

impl Ownership {
    /// Whether Courier may delete or patch this Job on behalf of the origin.
    pub fn is_ours(&self) -> bool {
        matches!(self, Ownership::Current | Ownership::Stale { .. })
    }
}

/// The epoch label of a remote Job, if present and well-formed.
pub fn epoch_label(labels: &impl Labels) -> Option<u64> {
    labels.label(LABEL_EPOCH).and_then(parse_epoch)
}

/// Parses a decimal epoch (`1`, `2`, ...); 0, signs, blanks and leading zeros are rejected.
pub fn parse_epoch(s: &str) -> Option<u64> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with('0');
    canonical.then(|| s.parse().ok()).flatten()
}

/// Classifies the remote Job with `labels` found on cluster `observed_on`.
pub fn classify(
    labels: &impl Labels,
    observed_on: &str,
    origin: OriginIdentity<'_>,
    intent: Option<&Intent>,
) -> Ownership {
    match labels.label(LABEL_ORIGIN) {
        None => return Ownership::Foreign,
        Some(id) if id != origin.origin_id => {
            return Ownership::OtherOrigin {
                origin_id: id.to_string(),
            };
        }
        Some(_) => {}
    }
    if labels.label(LABEL_ORIGIN_UID) != Some(origin.origin_uid) {
        return Ownership::Foreign;
    }
    let epoch = epoch_label(labels);
    match intent {
        Some(i) if i.cluster == observed_on && Some(i.epoch) == epoch => Ownership::Current,
        _ => Ownership::Stale { epoch },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const ME: OriginIdentity<'static> = OriginIdentity {
        origin_id: "mgmt",
        origin_uid: "uid-1",
    };

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn intent(cluster: &str, epoch: u64) -> Intent {
        Intent {
            cluster: cluster.into(),
            epoch,
        }
    }

    fn mirror_labels(epoch: &str) -> BTreeMap<String, String> {
        labels(&[
            ("courier.dev/origin", "mgmt"),
            ("courier.dev/origin-uid", "uid-1"),
            ("courier.dev/epoch", epoch),
        ])
    }

    #[test]
    fn current_needs_cluster_and_epoch() {
        let i = intent("eu", 2);
        assert_eq!(
            classify(&mirror_labels("2"), "eu", ME, Some(&i)),
            Ownership::Current
        );
        assert_eq!(
            classify(&mirror_labels("2"), "us", ME, Some(&i)),
            Ownership::Stale { epoch: Some(2) }
        );
        assert_eq!(
            classify(&mirror_labels("1"), "eu", ME, Some(&i)),
            Ownership::Stale { epoch: Some(1) }
        );
        assert_eq!(
            classify(&mirror_labels("3"), "eu", ME, Some(&i)),
            Ownership::Stale { epoch: Some(3) }
        );
        assert_eq!(
            classify(&mirror_labels("2"), "eu", ME, None),
            Ownership::Stale { epoch: Some(2) }
        );
        for bad in ["", "x", "02", "-1", "0"] {
            assert_eq!(
                classify(&mirror_labels(bad), "eu", ME, Some(&i)),
                Ownership::Stale { epoch: None },
                "{bad:?}"
            );
        }
    }

    #[test]
    fn not_ours() {
        let i = intent("eu", 1);
        assert_eq!(
            classify(&labels(&[]), "eu", ME, Some(&i)),
            Ownership::Foreign
        );
        assert_eq!(
            classify(
                &labels(&[("app", "x"), ("courier.dev/epoch", "1")]),
                "eu",
                ME,
                Some(&i)
            ),
            Ownership::Foreign
        );
        let mut other_uid = mirror_labels("1");
        other_uid.insert("courier.dev/origin-uid".into(), "uid-0".into());
        assert_eq!(classify(&other_uid, "eu", ME, Some(&i)), Ownership::Foreign);
        let mut no_uid = mirror_labels("1");
        no_uid.remove("courier.dev/origin-uid");
        assert_eq!(classify(&no_uid, "eu", ME, Some(&i)), Ownership::Foreign);
        let mut other_origin = mirror_labels("1");
        other_origin.insert("courier.dev/origin".into(), "mgmt-b".into());
        assert_eq!(
            classify(&other_origin, "eu", ME, Some(&i)),
            Ownership::OtherOrigin {
                origin_id: "mgmt-b".into()
            }
        );
        assert!(!Ownership::Foreign.is_ours());
        assert!(Ownership::Stale { epoch: None }.is_ours());
    }

    proptest! {
        /// At most one (cluster, labels) combination is Current for a given intent, and only ours are.
        #[test]
        fn current_is_unique_and_ours(
            origin in prop_oneof![Just("mgmt"), Just("other")],
            uid in prop_oneof![Just("uid-1"), Just("uid-2")],
            epoch in 1u64..4,
            cluster in prop_oneof![Just("eu"), Just("us")],
            intent_epoch in 1u64..4,
        ) {
            let l = labels(&[("courier.dev/origin", origin), ("courier.dev/origin-uid", uid),
                             ("courier.dev/epoch", &epoch.to_string())]);
            let i = Intent { cluster: "eu".into(), epoch: intent_epoch };
            let verdict = classify(&l, cluster, ME, Some(&i));
            let ours = origin == "mgmt" && uid == "uid-1";
            prop_assert_eq!(verdict.is_ours(), ours);
            prop_assert_eq!(verdict == Ownership::Current, ours && cluster == "eu" && epoch == intent_epoch);
        }
    }
}
