//! Fault injection, switchable at run time (library API and the admin endpoint): added latency, a share
//! of 500s, 429s with Retry-After, a blackhole (connections accepted, never answered), refused
//! connections, dropping every open watch, a restart that loses connections and watches but keeps data,
//! and a compaction that makes older resourceVersions answer 410. Besides the random shares, a
//! deterministic throttle: the next N creates of one resource are answered 429, so a test can count
//! on a throttled create happening.

use std::sync::RwLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Whether `path` is the collection of `resource` (its last segment: a list, watch or create of
/// it), the one test the per-resource faults (`latencyOf`, `throttleCreatesOf`) apply.
fn is_collection_of(path: &str, resource: &str) -> bool {
    path.rsplit('/').next() == Some(resource)
}

/// The request-level fault settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultConfig {
    /// Added to every request before it is handled (to those of `latencyOf` only, when set).
    pub latency_ms: u64,
    /// The resource (plural, e.g. `jobs`) whose collection requests alone (list, watch, create: the
    /// path ends with it) get `latencyMs`; empty: every request.
    pub latency_of: String,
    /// Share (0..=1) of requests answered 500 InternalError.
    pub error_rate: f64,
    /// Share (0..=1) of requests answered 429 TooManyRequests with `Retry-After`.
    pub throttle_rate: f64,
    /// The `Retry-After` seconds of throttled answers (default 1).
    pub retry_after_seconds: u64,
    /// The body of a throttled answer: kube-apiserver's priority-and-fairness filter (the usual
    /// source of a 429) writes plain text with only the `Retry-After` header; its storage and
    /// admission paths write a Status carrying `details.retryAfterSeconds` as well.
    pub throttle_body: ThrottleBody,
    /// The next this many creates (POST to the collection) of `throttleCreatesOf` are answered 429
    /// with `Retry-After`, whatever the shares draw; counts down as they are answered.
    pub throttle_creates: u64,
    /// The resource (plural, e.g. `jobs`) whose creates `throttleCreates` throttles.
    pub throttle_creates_of: String,
    /// Connections are accepted and requests read, but nothing is ever answered.
    pub blackhole: bool,
    /// The listening socket is closed: connections are refused.
    pub refuse: bool,
}

/// The form of a 429 answer (see `FaultConfig::throttle_body`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ThrottleBody {
    /// `Too many requests, please try again later.` as `text/plain`, the `Retry-After` header the
    /// only place the wait is given (kube-apiserver's `tooManyRequests` in
    /// `k8s.io/apiserver/pkg/server/filters/maxinflight.go`, used by the priority-and-fairness
    /// filter).
    #[default]
    Text,
    /// A `TooManyRequests` Status with `details.retryAfterSeconds`, and the same seconds in
    /// `Retry-After` (`apierrors.NewTooManyRequests` written by `responsewriters.ErrorNegotiated`).
    Status,
}

/// What a request should suffer, decided once per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    None,
    Error,
    /// 429 with this many `Retry-After` seconds, in this form.
    Throttle(u64, ThrottleBody),
}

/// Live fault state shared by the server's tasks.
pub struct Faults {
    cfg: RwLock<FaultConfig>,
    /// Broadcasts every configuration change (the accept loop follows `refuse`, held requests follow
    /// `blackhole`).
    changed: watch::Sender<FaultConfig>,
    /// Cancelled (and replaced) by a restart: every open connection ends.
    connections: RwLock<CancellationToken>,
}

impl Default for Faults {
    fn default() -> Self {
        Self::new()
    }
}

impl Faults {
    pub fn new() -> Self {
        let (changed, _) = watch::channel(FaultConfig::default());
        Self {
            cfg: RwLock::new(FaultConfig::default()),
            changed,
            connections: RwLock::new(CancellationToken::new()),
        }
    }

    pub fn get(&self) -> FaultConfig {
        self.cfg.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, cfg: FaultConfig) {
        *self.cfg.write().unwrap_or_else(|p| p.into_inner()) = cfg.clone();
        self.changed.send_replace(cfg);
    }

    /// Clears every fault.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
    }

    pub fn subscribe(&self) -> watch::Receiver<FaultConfig> {
        self.changed.subscribe()
    }

    /// The token a new connection watches; cancelled by `restart_connections`.
    pub fn connection_token(&self) -> CancellationToken {
        self.connections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .child_token()
    }

    /// Ends every open connection (a restart of the server process, as clients see it).
    pub fn restart_connections(&self) {
        let mut g = self.connections.write().unwrap_or_else(|p| p.into_inner());
        g.cancel();
        *g = CancellationToken::new();
    }

    /// The latency added to a request to `path`.
    pub fn latency(&self, path: &str) -> Option<Duration> {
        let c = self.cfg.read().unwrap_or_else(|p| p.into_inner());
        let applies = c.latency_of.is_empty() || is_collection_of(path, &c.latency_of);
        (c.latency_ms > 0 && applies).then(|| Duration::from_millis(c.latency_ms))
    }

    pub fn blackholed(&self) -> bool {
        self.cfg.read().unwrap_or_else(|p| p.into_inner()).blackhole
    }

    /// Decides this request's fate: a counted create throttle first, else drawn from the rates.
    /// `method` and `path` are the request's (a create is a POST whose last path segment is the
    /// resource, i.e. to the collection).
    pub fn draw(&self, method: &str, path: &str) -> Injected {
        if let Some(throttled) = self.take_create_throttle(method, path) {
            return throttled;
        }
        let c = self.cfg.read().unwrap_or_else(|p| p.into_inner());
        if c.error_rate <= 0.0 && c.throttle_rate <= 0.0 {
            return Injected::None;
        }
        let x: f64 = rand::random();
        if x < c.error_rate {
            Injected::Error
        } else if x < c.error_rate + c.throttle_rate {
            Injected::Throttle(c.retry_after_seconds.max(1), c.throttle_body)
        } else {
            Injected::None
        }
    }

    /// Counts down `throttle_creates` when this request is one of the creates it throttles.
    fn take_create_throttle(&self, method: &str, path: &str) -> Option<Injected> {
        let is_create_of = |c: &FaultConfig| {
            c.throttle_creates > 0
                && method == "POST"
                && !c.throttle_creates_of.is_empty()
                && is_collection_of(path, &c.throttle_creates_of)
        };
        if !is_create_of(&self.cfg.read().unwrap_or_else(|p| p.into_inner())) {
            return None;
        }
        let mut c = self.cfg.write().unwrap_or_else(|p| p.into_inner());
        // Checked again: another request may have taken the last one meanwhile.
        if !is_create_of(&c) {
            return None;
        }
        c.throttle_creates -= 1;
        Some(Injected::Throttle(
            c.retry_after_seconds.max(1),
            c.throttle_body,
        ))
    }

    /// Waits until the blackhole is lifted.
    pub async fn wait_unblackholed(&self) {
        let mut rx = self.subscribe();
        while rx.borrow_and_update().blackhole {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_resource_fault_names_the_collection_only() {
        assert!(is_collection_of("/apis/batch/v1/jobs", "jobs"));
        assert!(is_collection_of("/apis/batch/v1/namespaces/a/jobs", "jobs"));
        assert!(!is_collection_of(
            "/apis/batch/v1/namespaces/a/jobs/j1",
            "jobs"
        ));
        assert!(!is_collection_of(
            "/apis/batch/v1/namespaces/a/jobs/jobs/status",
            "jobs"
        ));
        assert!(!is_collection_of("/api/v1/pods", "jobs"));
    }

    #[test]
    fn rates_are_respected() {
        let f = Faults::new();
        assert_eq!(f.draw("GET", "/api/v1/pods"), Injected::None);
        f.set(FaultConfig {
            error_rate: 1.0,
            ..Default::default()
        });
        assert_eq!(f.draw("GET", "/api/v1/pods"), Injected::Error);
        f.set(FaultConfig {
            throttle_rate: 1.0,
            retry_after_seconds: 3,
            ..Default::default()
        });
        assert_eq!(
            f.draw("GET", "/api/v1/pods"),
            Injected::Throttle(3, ThrottleBody::Text)
        );
        f.set(FaultConfig {
            error_rate: 0.5,
            ..Default::default()
        });
        let errors = (0..2000)
            .filter(|_| f.draw("GET", "/api/v1/pods") == Injected::Error)
            .count();
        assert!((800..1200).contains(&errors), "{errors}");
    }

    /// The counted throttle answers exactly the next N creates of its resource, and nothing else.
    #[test]
    fn counted_create_throttle_takes_only_creates_of_its_resource() {
        let f = Faults::new();
        f.set(FaultConfig {
            throttle_creates: 2,
            throttle_creates_of: "jobs".into(),
            retry_after_seconds: 2,
            ..Default::default()
        });
        let jobs = "/apis/batch/v1/namespaces/default/jobs";
        assert_eq!(f.draw("GET", jobs), Injected::None, "a list");
        assert_eq!(f.draw("PATCH", &format!("{jobs}/a")), Injected::None);
        assert_eq!(
            f.draw("POST", "/api/v1/namespaces/default/pods"),
            Injected::None,
            "another resource"
        );
        assert_eq!(
            f.draw("POST", "/apis/batch/v1/namespaces/default/jobs/a/status"),
            Injected::None,
            "not the collection"
        );
        assert_eq!(
            f.draw("POST", jobs),
            Injected::Throttle(2, ThrottleBody::Text)
        );
        assert_eq!(f.get().throttle_creates, 1);
        assert_eq!(
            f.draw("POST", jobs),
            Injected::Throttle(2, ThrottleBody::Text)
        );
        assert_eq!(f.draw("POST", jobs), Injected::None, "used up");
        assert_eq!(f.get().throttle_creates, 0);
    }

    #[test]
    fn restart_cancels_existing_connections_only() {
        let f = Faults::new();
        let old = f.connection_token();
        f.restart_connections();
        assert!(old.is_cancelled());
        assert!(!f.connection_token().is_cancelled());
    }

    #[test]
    fn latency_applies_to_the_named_collection_only() {
        let f = Faults::new();
        assert_eq!(f.latency("/apis/batch/v1/jobs"), None);
        f.set(FaultConfig {
            latency_ms: 300,
            ..Default::default()
        });
        assert_eq!(
            f.latency("/api/v1/secrets"),
            Some(Duration::from_millis(300))
        );
        f.set(FaultConfig {
            latency_ms: 300,
            latency_of: "jobs".into(),
            ..Default::default()
        });
        let slow = Some(Duration::from_millis(300));
        assert_eq!(f.latency("/apis/batch/v1/jobs"), slow);
        assert_eq!(f.latency("/apis/batch/v1/namespaces/team-a/jobs"), slow);
        assert_eq!(f.latency("/apis/batch/v1/namespaces/team-a/jobs/j1"), None);
        assert_eq!(f.latency("/api/v1/secrets"), None);
    }
}
