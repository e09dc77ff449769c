//! Which new versions of a mirror can change a decision: the watch queues the origin only for
//! those (a reconcile that gathers, decides and plans nothing is about 3 % of the controller).

use super::{DispatchConfig, MirrorOf, OriginOf};
use crate::workload::Workload;

/// Whether `decide` may decide differently on the mirror version `new` than on `old`, the version
/// it replaces in the cache, for `origin` (the cached one). `false` only when every decision that
/// plans nothing on `old` is the same decision on `new` (whatever the other inputs), so a
/// reconcile after `new` would plan nothing either: the watch need not queue the origin. Nothing
/// is lost by not queueing it: a reconcile still pending or retried reads the cache (`new`); one
/// that planned a write on `old` leaves an origin on which `old`, hence `new`, plans nothing; a
/// change of the origin queues it by itself.
///
/// Two changes do not matter (`tests/quiet.rs` checks this against `decide`):
/// - of the gauges of running pods (a Job's `active`, `ready`, `terminating`) while the worker has
///   finished pods to count (`counting`): the origin does not get such a change on its own
///   (`Plan::follow_current`), unless it turns whether the mirror idles ([`Workload::idle`]: a
///   refused spec change is applied by recreating an idle mirror);
/// - of what status translation does not copy while the origin may be re-dispatched (a Job's
///   interim conditions: `SuccessCriteriaMet` arrives with the uncounted pod).
///
/// Everything else (another uid, labels, annotations, spec, deletion, any other status field, a
/// count no longer pending) matters.
pub fn mirror_change_matters<W: Workload>(
    old: &MirrorOf<W>,
    new: &MirrorOf<W>,
    origin: &OriginOf<W>,
    config: &DispatchConfig,
) -> bool {
    // Every field named, so that a new one must be placed here.
    let MirrorOf {
        namespace,
        name,
        uid,
        labels,
        annotations,
        spec,
        status,
        deleting,
        counting,
    } = new;
    let same_object = *namespace == old.namespace
        && *name == old.name
        && *uid == old.uid
        && *labels == old.labels
        && *annotations == old.annotations
        && *spec == old.spec
        && *deleting == old.deleting;
    if !same_object {
        return true;
    }
    if *status == old.status && *counting == old.counting {
        return false;
    }
    // A count no longer pending lets a change of the gauges through (`counting` only holds back).
    if old.counting && !*counting {
        return true;
    }
    // The decision counts at most the re-dispatches the origin records (none when it does not
    // trust them): fewer than the limit here means a re-dispatch is possible there.
    let redispatch_possible = origin.redispatches() < config.max_redispatch;
    let same = W::same_for_origin(&old.status, status, *counting, redispatch_possible);
    !(same && W::idle(old) == W::idle(new))
}
