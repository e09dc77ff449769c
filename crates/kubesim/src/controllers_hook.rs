//! Where the in-process controllers (Job controller, TTL, GC, namespaces, CRDs) attach to a running
//! instance: the role's preset from `crate::controllers`, at the instance's speed.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::controllers::Controllers;
use crate::sim::Role;

/// Starts the role's controllers; they stop with `shutdown`.
pub fn spawn(
    api: Arc<Api>,
    role: Role,
    speed: f64,
    pod_objects: bool,
    shutdown: CancellationToken,
) {
    let mut c = Controllers::for_role(role).with_speed(speed);
    c.pod_objects &= pod_objects;
    // The tasks run detached; cancelling `shutdown` ends them.
    drop(crate::controllers::spawn(api, c, shutdown));
}
