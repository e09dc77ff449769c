//! [`BatchJob`]: the `batch/v1` Job as a [`Workload`]. Each operation is one of the Job modules:
//! [`crate::mirror`] builds the mirror, [`crate::drift`] judges what flows down, [`crate::status`]
//! translates what flows up, [`crate::dispatched`] and [`crate::placed`] keep Courier's conditions
//! and [`crate::job`] tells whether the run is over.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Value, json};

use courier_api::{ANNOTATION_SPEC_HASH, ANNOTATION_TEMPLATE_HASH};

use crate::drift::{
    DRIFTING_SPEC_FIELDS, kueue_managed, mirror_template, spec_drift, spec_hash, template_drifts,
};
use crate::job::{JobSpecEssentials, condition, interim};
use crate::job_status::CachedStatus;
use crate::mirror::{MirrorError, mirror_for};
use crate::ownership::Intent;
use crate::reconcile::{MirrorOf, OriginOf};
use crate::status::{
    TranslateInput, fail_origin, finish_from_interim, translate_status, whole_seconds,
};
use crate::workload::{Committed, Drift, Finished, MirrorReport, Workload};

/// A `batch/v1` Job with `spec.managedBy: courier.dev/dispatcher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchJob;

impl Workload for BatchJob {
    type Spec = JobSpecEssentials;
    /// Cached compact; the Job modules work on the full `JobStatus` it expands to.
    type Status = CachedStatus;
    type BuildError = MirrorError;
    const SPEC_FIELDS: &'static [&'static str] = &DRIFTING_SPEC_FIELDS;

    fn read_spec(spec: &Value) -> JobSpecEssentials {
        JobSpecEssentials::from_spec_json(spec)
    }

    fn suspended(spec: &JobSpecEssentials) -> bool {
        spec.suspend
    }

    fn template_hash(spec: &Value) -> Option<String> {
        crate::drift::template_hash(spec)
    }

    fn build_mirror(origin: &Value, origin_id: &str, epoch: u64) -> Result<Value, MirrorError> {
        mirror_for(origin, origin_id, epoch)
    }

    fn drift(origin: &OriginOf<Self>, mirror: &MirrorOf<Self>) -> Option<Drift> {
        let kueue = kueue_managed(&origin.labels);
        let fields = spec_drift(
            &origin.spec_fields,
            kueue,
            &mirror.spec,
            &mirror.annotations,
        );
        let template = template_drifts(origin.template_hash.as_deref(), &mirror.annotations);
        if fields.is_none() && !template {
            return None;
        }
        let fields = fields.unwrap_or_default();
        let mut what: Vec<&str> = fields.keys().map(String::as_str).collect();
        if template {
            what.push("the pod template");
        }
        Some(Drift {
            what: what.join(", "),
            fields,
            template,
        })
    }

    fn drift_patch(origin: &OriginOf<Self>, drift: &Drift, template_sent: bool) -> Value {
        let kueue = kueue_managed(&origin.labels);
        let mut annotations = serde_json::Map::new();
        annotations.insert(
            ANNOTATION_SPEC_HASH.into(),
            json!(spec_hash(&origin.spec_fields, kueue)),
        );
        if template_sent && let Some(h) = &origin.template_hash {
            annotations.insert(ANNOTATION_TEMPLATE_HASH.into(), json!(h));
        }
        json!({"metadata": {"annotations": annotations}, "spec": drift.fields})
    }

    fn desired_template(origin: &Value) -> Option<Value> {
        origin.get("spec").and_then(mirror_template)
    }

    fn idle(mirror: &MirrorOf<Self>) -> bool {
        mirror.spec.get("suspend").and_then(Value::as_bool) == Some(true)
            && mirror.status.active.unwrap_or(0) == 0
    }

    fn status_patch(old: &CachedStatus, new: &CachedStatus) -> Result<Value, serde_json::Error> {
        new.patch_from(old)
    }

    fn translate(
        origin: &OriginOf<Self>,
        mirror: Option<MirrorReport<'_, CachedStatus>>,
        redispatch_possible: bool,
        now: Timestamp,
    ) -> Option<CachedStatus> {
        let mirror_status = mirror.map(|m| m.status.expand());
        translate_status(&TranslateInput {
            origin_spec: &origin.spec,
            origin_status: &origin.status.expand(),
            mirror: mirror
                .zip(mirror_status.as_ref())
                .map(|(m, status)| MirrorReport {
                    status,
                    placement: m.placement,
                }),
            redispatch_possible,
            now,
        })
        .map(CachedStatus::from)
    }

    fn fail(
        status: &CachedStatus,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Option<CachedStatus> {
        fail_origin(&status.expand(), reason, message, now).map(CachedStatus::from)
    }

    fn committed(status: &CachedStatus, now: Timestamp) -> Option<Committed<CachedStatus>> {
        let committed = interim(status)?;
        Some(Committed {
            reached: committed.condition_type(),
            outcome: committed.finished().condition_type(),
            status: finish_from_interim(&status.expand(), now).map(CachedStatus::from),
        })
    }

    fn uncounted(status: &CachedStatus) -> bool {
        status.uncounted_pods()
    }

    fn gauges_only(old: &CachedStatus, new: &CachedStatus) -> bool {
        let mut same_gauges = new.clone();
        same_gauges.active = old.active;
        same_gauges.ready = old.ready;
        same_gauges.terminating = old.terminating;
        same_gauges == *old
    }

    fn same_for_origin(
        old: &CachedStatus,
        new: &CachedStatus,
        gauges: bool,
        redispatch_possible: bool,
    ) -> bool {
        // Interim conditions are copied when the mirror finishes (`translate_status`); the
        // terminal ones are compared, so both are finished or neither.
        let interim = redispatch_possible && crate::job::finished(new).is_none();
        old.equal_but(new, gauges, interim)
    }

    fn reported(status: &CachedStatus) -> Option<Intent> {
        crate::dispatched::recorded(&status.expand())
    }

    fn set_not_placed(
        status: &mut CachedStatus,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> bool {
        let mut full = status.expand();
        let mut conditions = full.conditions.take().unwrap_or_default();
        let changed =
            crate::placed::set_not_placed(&mut conditions, reason, message, whole_seconds(now));
        full.conditions = Some(conditions);
        *status = full.into();
        changed
    }

    fn removed_from_cluster(status: &CachedStatus) -> bool {
        crate::placed::removed_from_cluster(&status.expand())
    }

    fn finished(status: &CachedStatus) -> Option<Finished> {
        crate::job::finished(status)
    }

    fn finished_at(status: &CachedStatus) -> Option<Timestamp> {
        finished_at(&status.expand())
    }
}

/// When the run ended: the transition time of its True terminal condition.
fn finished_at(status: &JobStatus) -> Option<Timestamp> {
    [condition::COMPLETE, condition::FAILED]
        .iter()
        .filter_map(|t| crate::job::find_condition(status, t))
        .filter(|c| c.status == "True")
        .find_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}
