//! The seam between dispatching and the kind of object dispatched.
//!
//! Placement, epochs, the finalizer, the ownership labels, fencing, garbage collection and the plan
//! [`decide`](crate::reconcile::decide) builds know nothing about what runs: they work on an origin
//! and its mirrors through a [`Workload`]. A workload kind supplies the only operations that depend
//! on it: reading the spec facts decisions need, building the mirror from the origin, the spec drift
//! that flows down to a running mirror, translating the mirror's status onto the origin (and keeping
//! Courier's own conditions there), and deciding that a run is over and how it ended.
//!
//! [`BatchJob`](crate::batch_job::BatchJob) (`batch/v1` Job) is the one implementation. A second
//! kind (e.g. JobSet, which accepts any `spec.managedBy` value) would be a second implementation of
//! this trait, with its own status type; nothing else in courier-core changes.

use std::fmt;

use jiff::Timestamp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::ownership::Intent;
use crate::reconcile::{MirrorOf, OriginOf};

/// How a run ended, from its terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Complete,
    Failed,
}

/// A run's point of no return: the outcome it has committed to before it is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interim {
    SuccessCriteriaMet,
    FailureTarget,
}

/// The spec changes that flow down to a running mirror, as judged by [`Workload::drift`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Drift {
    /// What changed, for events ("parallelism, the pod template").
    pub what: String,
    /// The mutable spec fields to patch, with their new values.
    pub fields: Map<String, Value>,
    /// The part of the spec the shell patches by diffing the live mirror (for a Job, its pod
    /// template) changed.
    pub template: bool,
}

/// An origin that committed to an outcome whose mirror is lost: what it had reached and what it is
/// finished as (for the event), and the finished status (`None` if there is nothing to write).
#[derive(Debug, Clone, PartialEq)]
pub struct Committed<S> {
    pub reached: &'static str,
    pub outcome: &'static str,
    pub status: Option<S>,
}

/// What status translation reads besides the origin.
#[derive(Debug)]
pub struct MirrorReport<'a, S> {
    /// The current mirror's status.
    pub status: &'a S,
    /// The cluster and epoch of the mirror this status was read from.
    pub placement: &'a Intent,
}

// By hand: two references are Copy whatever `S` is (a derive would ask `S: Copy`).
impl<S> Clone for MirrorReport<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for MirrorReport<'_, S> {}

/// One kind of workload Courier dispatches. A marker type: every operation is an associated
/// function, pure, with `now` as an input.
pub trait Workload: fmt::Debug + Clone + PartialEq + Default + 'static {
    /// The facts about an origin's spec that decisions read.
    type Spec: fmt::Debug + Clone + PartialEq + Default;
    /// The object's status (what flows up from the mirror to the origin), as the caches keep it:
    /// the same content in as little memory as it takes.
    type Status: fmt::Debug + Clone + PartialEq + Default + Serialize + DeserializeOwned;
    /// Why a mirror cannot be built.
    type BuildError: std::error::Error;
    /// The spec fields the views keep ([`OriginOf::spec_fields`], [`MirrorOf::spec`]): those
    /// that flow down as drift. The spec facts decisions read are [`Self::Spec`].
    const SPEC_FIELDS: &'static [&'static str];

    // ---- reading ----

    /// The spec facts, from the object's `spec` JSON (missing or mistyped fields read as unset).
    fn read_spec(spec: &Value) -> Self::Spec;
    /// The origin is suspended (then it is not dispatched, and losing its mirror is not counted).
    fn suspended(spec: &Self::Spec) -> bool;
    /// Hash of the part of the spec the shell patches by diff ([`Drift::template`]), from `spec`.
    fn template_hash(spec: &Value) -> Option<String>;

    // ---- building the mirror, and what flows down ----

    /// The mirror of `origin` (its full JSON, fresh from the API server) for placement `epoch`,
    /// labelled as `origin_id`'s.
    fn build_mirror(origin: &Value, origin_id: &str, epoch: u64)
    -> Result<Value, Self::BuildError>;
    /// The spec changes that must flow down to `mirror`, if any.
    fn drift(origin: &OriginOf<Self>, mirror: &MirrorOf<Self>) -> Option<Drift>;
    /// The JSON merge patch carrying `drift` to the mirror (with whatever records what was sent;
    /// `template_sent`: the shell sends the template in the same request).
    fn drift_patch(origin: &OriginOf<Self>, drift: &Drift, template_sent: bool) -> Value;
    /// The template part of the mirror, from the origin's fresh JSON.
    fn desired_template(origin: &Value) -> Option<Value>;
    /// Nothing runs under the mirror: recreating it loses no work.
    fn idle(mirror: &MirrorOf<Self>) -> bool;

    // ---- what flows up ----

    /// The origin's new status from the current mirror's (`mirror`; `None` when no current mirror
    /// is observed: only the origin's own state is maintained); `None` when nothing changes. Must
    /// be a transition the management API server accepts.
    fn translate(
        origin: &OriginOf<Self>,
        mirror: Option<MirrorReport<'_, Self::Status>>,
        redispatch_possible: bool,
        now: Timestamp,
    ) -> Option<Self::Status>;
    /// The origin failed by Courier (`reason`, `message`), or `None` if it can no longer fail.
    fn fail(
        status: &Self::Status,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Option<Self::Status>;
    /// The origin has committed to an outcome ([`Interim`]): how to finish it without its mirror.
    fn committed(status: &Self::Status, now: Timestamp) -> Option<Committed<Self::Status>>;

    /// The status shows pods that finished and are not counted yet (a Job's
    /// `uncountedTerminatedPods`): the worker counts them in its next write.
    fn uncounted(status: &Self::Status) -> bool;
    /// `new` differs from `old` in the gauges of running pods only (a Job's `active`, `ready`,
    /// `terminating`), nothing else.
    fn gauges_only(old: &Self::Status, new: &Self::Status) -> bool;
    /// Status translation writes the same from the mirror status `new` as from `old`, but for
    /// the gauges of running pods (when `gauges`: the worker counts finished pods next) and what
    /// is not copied while the origin may still be re-dispatched (when `redispatch_possible`: a
    /// Job's interim conditions, until the mirror finishes). See
    /// [`crate::reconcile::mirror_change_matters`].
    fn same_for_origin(
        old: &Self::Status,
        new: &Self::Status,
        gauges: bool,
        redispatch_possible: bool,
    ) -> bool;
    /// The JSON merge patch of the origin's `/status` from `old` to `new` (explicit nulls for
    /// cleared fields, `{}` when nothing changed); an error when either does not encode as JSON.
    /// By default both are encoded whole and diffed; a kind may skip encoding what it can tell is
    /// unchanged, as long as the patch is the same.
    fn status_patch(old: &Self::Status, new: &Self::Status) -> Result<Value, serde_json::Error> {
        crate::merge_patch::status_patch(old, new)
    }

    // ---- Courier's own records on the origin's status ----

    /// The placement whose mirror has reported (the `courier.dev/Dispatched` marker).
    fn reported(status: &Self::Status) -> Option<Intent>;
    /// Records that the origin cannot be placed (`courier.dev/Placed=False`); whether it changed.
    fn set_not_placed(
        status: &mut Self::Status,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> bool;
    /// The origin was moved off a WorkerCluster being removed.
    fn removed_from_cluster(status: &Self::Status) -> bool;

    // ---- is the run over ----

    /// How the run ended, if it is over.
    fn finished(status: &Self::Status) -> Option<Finished>;
    /// When the run ended (its terminal state's transition time), if known.
    fn finished_at(status: &Self::Status) -> Option<Timestamp>;
}

#[cfg(test)]
mod tests {
    /// The kind-neutral modules, as compiled (their test modules aside).
    const NEUTRAL: [(&str, &str); 7] = [
        ("reconcile.rs", include_str!("reconcile.rs")),
        ("reconcile/plan.rs", include_str!("reconcile/plan.rs")),
        ("reconcile/paths.rs", include_str!("reconcile/paths.rs")),
        ("reconcile/view.rs", include_str!("reconcile/view.rs")),
        ("placement.rs", include_str!("placement.rs")),
        ("ownership.rs", include_str!("ownership.rs")),
        ("workload.rs", include_str!("workload.rs")),
    ];

    /// What names a `batch/v1` Job in code: its types and the modules that implement it.
    const JOB_SPECIFIC: [&str; 11] = [
        "batch::v1",
        "JobStatus",
        "JobSpecEssentials",
        "JobCondition",
        "crate::job",
        "crate::status",
        "crate::mirror",
        "crate::drift",
        "crate::dispatched",
        "crate::placed",
        "mirror_for",
    ];

    #[test]
    fn placement_ownership_and_the_plan_do_not_name_the_job() {
        for (file, text) in NEUTRAL {
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for name in JOB_SPECIFIC {
                assert!(
                    !code.contains(name),
                    "{file} names {name}: what is specific to batch/v1 Job goes through the \
                     Workload trait (crate::batch_job)"
                );
            }
        }
    }
}
