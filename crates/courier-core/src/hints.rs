//! What the controller learnt about one origin from answers no cache shows: a worker that holds
//! someone else's Job under the origin's name, refused the mirror, or did not answer its create; and
//! a change of the origin's spec that the worker refused on the mirror. In memory only (a restart
//! forgets them and they are learnt again from the next answer).
//!
//! Every verdict about a cluster expires: the cluster is skipped for this origin until `until`, a
//! period that doubles with each new verdict (exponential backoff per origin and cluster, from
//! `DispatchConfig::refusal_backoff_min` up to `refusal_backoff_max`, or `foreign_backoff_max` for
//! name conflicts). After it the cluster may be chosen again and the create tells again.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use courier_api::reasons::{
    EVENT_MIRROR_REJECTED, EVENT_NAMESPACE_MISSING, REASON_MIRROR_REJECTED,
    REASON_NAMESPACE_MISSING,
};

use crate::reconcile::DispatchConfig;

/// What a cluster answered (or did not) to a create of this origin's mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvoidKind {
    /// AlreadyExists for a Job that is not ours (another owner's Job holds the name).
    Foreign,
    /// 400/403/422 or an admission denial: quota, policy, validation on that server.
    Refused,
    /// No answer (timeout, connection failure) and the cluster is not answering since.
    Unanswered,
    /// The Job's namespace does not exist on the worker (or is being deleted) and Courier does not
    /// create it there.
    NamespaceMissing,
}

/// A cluster to skip for this origin until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Avoid {
    pub kind: AvoidKind,
    /// The server's message (or the transport error), quoted in events and the Placed condition.
    pub message: String,
    pub until: Timestamp,
    /// Verdicts so far (the backoff exponent).
    pub strikes: u32,
}

/// A change of the origin's spec the worker refused on the current mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfSync {
    /// The mirror the patch was refused on.
    pub mirror_uid: String,
    /// The origin's `metadata.generation` the patch came from.
    pub generation: Option<i64>,
    pub message: String,
    /// The `MirrorOutOfSync` event was recorded (once per generation).
    pub announced: bool,
}

/// In-memory knowledge of the controller about one origin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hints {
    /// Clusters to skip for this origin, by name.
    pub avoid: BTreeMap<String, Avoid>,
    pub out_of_sync: Option<OutOfSync>,
}

impl Hints {
    /// Records a verdict about `cluster`: it is skipped from `now` for the next backoff period.
    pub fn avoid(
        &mut self,
        cluster: &str,
        kind: AvoidKind,
        message: &str,
        now: Timestamp,
        config: &DispatchConfig,
    ) {
        let strikes = self
            .avoid
            .get(cluster)
            .map_or(1, |a| a.strikes.saturating_add(1));
        let max = match kind {
            AvoidKind::Foreign => config.foreign_backoff_max,
            AvoidKind::Refused | AvoidKind::Unanswered | AvoidKind::NamespaceMissing => {
                config.refusal_backoff_max
            }
        };
        let delay = backoff(config.refusal_backoff_min, max, strikes);
        let until = SignedDuration::try_from(delay)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
            .unwrap_or(Timestamp::MAX);
        self.avoid.insert(
            cluster.to_string(),
            Avoid {
                kind,
                message: message.to_string(),
                until,
                strikes,
            },
        );
    }

    /// The verdict about `cluster` still in force at `now`.
    pub fn avoided(&self, cluster: &str, now: Timestamp) -> Option<&Avoid> {
        self.avoid.get(cluster).filter(|a| now < a.until)
    }

    /// Every verdict in force at `now`.
    pub fn in_force(&self, now: Timestamp) -> impl Iterator<Item = (&String, &Avoid)> {
        self.avoid.iter().filter(move |(_, a)| now < a.until)
    }

    /// When the first verdict in force at `now` expires.
    pub fn next_expiry(&self, now: Timestamp) -> Option<Timestamp> {
        self.in_force(now).map(|(_, a)| a.until).min()
    }
}

pub(crate) fn rejection(cluster: &str, kind: AvoidKind, message: &str) -> String {
    match kind {
        AvoidKind::Unanswered => {
            format!("WorkerCluster {cluster} did not answer the mirror's create ({message})")
        }
        // The controller's message names the cluster, the namespace and the fix.
        AvoidKind::NamespaceMissing => message.to_string(),
        _ => format!("WorkerCluster {cluster} refused the mirror: {message}"),
    }
}

/// The event and Placed reason for a worker's refusal of this kind.
pub(crate) fn refusal_reasons(kind: AvoidKind) -> (&'static str, &'static str) {
    match kind {
        AvoidKind::NamespaceMissing => (REASON_NAMESPACE_MISSING, EVENT_NAMESPACE_MISSING),
        _ => (REASON_MIRROR_REJECTED, EVENT_MIRROR_REJECTED),
    }
}

/// `min * 2^(strikes-1)`, capped at `max`.
fn backoff(min: Duration, max: Duration, strikes: u32) -> Duration {
    let factor = 1u32
        .checked_shl(strikes.saturating_sub(1).min(31))
        .unwrap_or(u32::MAX);
    min.saturating_mul(factor).min(max.max(min))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("ts")
    }

    #[test]
    fn verdicts_expire_and_back_off_per_cluster() {
        let config = DispatchConfig {
            refusal_backoff_min: Duration::from_secs(30),
            refusal_backoff_max: Duration::from_secs(600),
            foreign_backoff_max: Duration::from_secs(300),
            ..Default::default()
        };
        let mut h = Hints::default();
        h.avoid("w1", AvoidKind::Refused, "quota", t(0), &config);
        assert_eq!(
            h.avoided("w1", t(29)).map(|a| a.kind),
            Some(AvoidKind::Refused)
        );
        assert!(h.avoided("w1", t(30)).is_none(), "expired after 30 s");
        assert!(h.avoided("w2", t(0)).is_none());
        let mut last = t(30);
        let mut delays = Vec::new();
        for _ in 0..7 {
            h.avoid("w1", AvoidKind::Refused, "quota", last, &config);
            let until = h.avoid["w1"].until;
            delays.push(until.duration_since(last).as_secs());
            last = until;
        }
        assert_eq!(delays, [60, 120, 240, 480, 600, 600, 600]);
        h.avoid("w2", AvoidKind::Foreign, "theirs", t(0), &config);
        assert_eq!(h.next_expiry(t(0)), Some(t(30)));
        for _ in 0..5 {
            h.avoid("w2", AvoidKind::Foreign, "theirs", t(0), &config);
        }
        assert_eq!(h.avoid["w2"].until, t(300), "name conflicts cap lower");
        assert_eq!(h.in_force(t(301)).count(), 1);
        assert_eq!(
            backoff(Duration::from_secs(1), Duration::from_secs(4), u32::MAX),
            Duration::from_secs(4)
        );
    }
}
