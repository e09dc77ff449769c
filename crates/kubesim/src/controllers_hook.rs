//! Where the in-process controllers (Job controller, TTL, GC, namespaces, CRDs) attach to a running
//! instance. The controllers land in `crate::controllers`; until then no controller runs.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::sim::Role;

pub fn spawn(_api: Arc<Api>, _role: Role, _speed: f64, _shutdown: CancellationToken) {}
