//! Leader election on a coordination.k8s.io/v1 Lease in Courier's namespace, client-go style:
//! every `lease_retry_period` the replica reads the Lease and either renews it (holder), takes it
//! over (no holder, or the record has not changed for its `leaseDurationSeconds` as measured on this
//! replica's own clock, so clock skew between replicas does not matter), or stands by. Writes are
//! replace-with-resourceVersion (the chart grants get/create/update), so two candidates can never
//! both win the same record. On shutdown the leader releases the Lease so a standby takes over at
//! once.
//!
//! Only the leader writes (origin Jobs, mirrors, WorkerCluster status and finalizers, events, GC),
//! and leading is **time-bounded**: [`Leadership::is_leading`] is true only while the start of the
//! last successful renewal round is younger than `lease_renew_deadline` on the monotonic clock,
//! and every write checks it immediately before it is sent. The renew deadline is at most 2/3 of
//! the lease duration (checked at start), so a leader that cannot renew — or was paused (SIGSTOP,
//! a long GC pause, a frozen VM) past its lease — stops writing before anyone else can take over,
//! and writes nothing after it resumes until it renews. (A request checked just before such a
//! pause can still leave after it; origin writes carry resourceVersion preconditions and mirror
//! writes UID preconditions, so such a late write fails instead of acting on old data.)
//!
//! Every replica keeps its caches and worker connections warm, so a takeover starts reconciling
//! immediately.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::config::FIELD_MANAGER;
use crate::config::Tuning;
use crate::errors::{CallError, with_timeout};

/// What this replica knows about leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaderState {
    pub leading: bool,
    /// The election loop reached the API server on its last attempt (standby is healthy).
    pub healthy: bool,
}

pub struct Leadership {
    tx: watch::Sender<LeaderState>,
    /// With leader election: leading counts only this long after the last successful renewal.
    bound: Option<Duration>,
    /// Start of the round whose renewal last succeeded (monotonic clock).
    renewed: std::sync::Mutex<Option<Instant>>,
}

impl Default for Leadership {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Leadership {
    /// `bound`: the renew deadline when leadership comes from a Lease.
    pub fn new(bound: Option<Duration>) -> Self {
        Self {
            tx: watch::Sender::new(LeaderState::default()),
            bound,
            renewed: std::sync::Mutex::new(None),
        }
    }

    pub fn state(&self) -> LeaderState {
        *self.tx.borrow()
    }

    /// Leading, and (with a Lease) renewed within the renew deadline as of this instant.
    pub fn is_leading(&self) -> bool {
        if !self.state().leading {
            return false;
        }
        let Some(bound) = self.bound else {
            return true;
        };
        let renewed = *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        renewed.is_some_and(|r| r.elapsed() < bound)
    }

    /// Records a successful renewal by a round that started at `started`.
    fn renewed_at(&self, started: Instant) {
        *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
    }

    pub fn set(&self, s: LeaderState) {
        self.tx.send_if_modified(|cur| {
            let changed = *cur != s;
            *cur = s;
            changed
        });
    }

    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.tx.subscribe()
    }
}

/// What the election loop needs.
pub struct Election {
    pub mgmt: kube::Client,
    /// Where the Lease lives (Courier's namespace).
    pub namespace: String,
    /// This replica's holder identity.
    pub identity: String,
    /// The Lease's name and timings, the request timeout.
    pub tuning: Tuning,
    pub leader: Arc<Leadership>,
    /// Cancelled when the controller stops (the Lease is then released).
    pub token: tokio_util::sync::CancellationToken,
}

/// What one election round found.
enum Round {
    Leading,
    Standby { holder: Option<String> },
}

struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

/// Runs the election loop until the controller stops, then releases the Lease if held.
pub async fn run(shared: Election) {
    let api: Api<Lease> = Api::namespaced(shared.mgmt.clone(), &shared.namespace);
    let t = &shared.tuning;
    let mut observed: Option<Observed> = None;
    let mut last_renewal: Option<Instant> = None;
    let mut last_holder: Option<String> = None;
    loop {
        let started = Instant::now();
        let round = with_timeout_round(&shared, &api, &mut observed).await;
        let was_leading = shared.leader.state().leading;
        match round {
            Ok(Round::Leading) => {
                // Counted from before the request: the Lease the others see is at least as fresh.
                shared.leader.renewed_at(started);
                last_renewal = Some(started);
                if !was_leading {
                    info!(identity = %shared.identity, lease = %t.lease_name, "became the leader");
                }
                shared.leader.set(LeaderState {
                    leading: true,
                    healthy: true,
                });
            }
            Ok(Round::Standby { holder }) => {
                if was_leading {
                    warn!(identity = %shared.identity, holder = ?holder, "lost the leader Lease; standing by");
                } else if holder != last_holder {
                    info!(holder = ?holder, "standing by; another replica leads");
                }
                last_holder = holder;
                shared.leader.set(LeaderState {
                    leading: false,
                    healthy: true,
                });
            }
            Err(e) => {
                let expired = last_renewal.is_none_or(|r| r.elapsed() >= t.lease_renew_deadline);
                let leading = was_leading && !expired;
                if was_leading && !leading {
                    warn!(error = %e, "cannot renew the leader Lease within the renew deadline; stepping down");
                } else {
                    warn!(error = %e, "leader election round failed");
                }
                shared.leader.set(LeaderState {
                    leading,
                    healthy: false,
                });
            }
        }
        tokio::select! {
            _ = shared.token.cancelled() => break,
            _ = tokio::time::sleep(crate::backoff::jitter(t.lease_retry_period)) => {}
        }
    }
    let was_leading = shared.leader.state().leading;
    shared.leader.set(LeaderState::default());
    if was_leading {
        match with_timeout(t.request_timeout, release(&api, &shared)).await {
            Ok(()) => info!("released the leader Lease"),
            Err(e) => {
                warn!(error = %e, "cannot release the leader Lease; a standby takes over when it expires")
            }
        }
    }
}

async fn with_timeout_round(
    shared: &Election,
    api: &Api<Lease>,
    observed: &mut Option<Observed>,
) -> Result<Round, CallError> {
    match tokio::time::timeout(
        shared.tuning.request_timeout * 2,
        round(shared, api, observed),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(CallError::Timeout(shared.tuning.request_timeout * 2)),
    }
}

fn lease_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

async fn round(
    shared: &Election,
    api: &Api<Lease>,
    observed: &mut Option<Observed>,
) -> Result<Round, CallError> {
    let t = &shared.tuning;
    let me = shared.identity.as_str();
    let now = MicroTime(Timestamp::now());
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let Some(mut lease) = api
        .get_opt(&t.lease_name)
        .await
        .map_err(CallError::from_kube)?
    else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(t.lease_name.clone()),
                namespace: Some(shared.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(me.to_string()),
                lease_duration_seconds: Some(lease_seconds(t.lease_duration)),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&pp, &lease).await {
            Ok(_) => Ok(Round::Leading),
            Err(e) => match CallError::from_kube(e) {
                e if e.is_conflict() => Ok(Round::Standby { holder: None }),
                e => Err(e),
            },
        };
    };
    let rv = lease.metadata.resource_version.clone();
    if observed.as_ref().is_none_or(|o| o.resource_version != rv) {
        *observed = Some(Observed {
            resource_version: rv,
            at: Instant::now(),
        });
    }
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(t.lease_duration, Duration::from_secs);
    let expired = observed
        .as_ref()
        .is_some_and(|o| o.at.elapsed() >= duration);
    if holder.as_deref() == Some(me) {
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(lease_seconds(t.lease_duration));
    } else if holder.is_none() || expired {
        spec.holder_identity = Some(me.to_string());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(lease_seconds(t.lease_duration));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    } else {
        return Ok(Round::Standby { holder });
    }
    match api.replace(&t.lease_name, &pp, &lease).await {
        Ok(_) => Ok(Round::Leading),
        Err(e) => match CallError::from_kube(e) {
            // Someone else wrote first: re-read next round.
            e if e.is_conflict() => Ok(Round::Standby { holder }),
            e => Err(e),
        },
    }
}

/// Gives the Lease up (holder cleared, 1 s duration) so a standby takes over at once.
async fn release(api: &Api<Lease>, shared: &Election) -> Result<(), kube::Error> {
    let t = &shared.tuning;
    let Some(mut lease) = api.get_opt(&t.lease_name).await? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(shared.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.replace(&t.lease_name, &pp, &lease).await.map(|_| ())
}
