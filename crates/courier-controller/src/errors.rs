//! Errors of API calls, classified the way the controller reacts to them: retry soon (conflict),
//! back off (server or transport trouble), or report a cluster as Unauthorized/Forbidden/Unreachable.
//! Messages carry the server's status message or the transport error chain, never request bodies
//! or credentials.

use std::fmt;
use std::time::Duration;

/// One failed API call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server answered with a Status.
    #[error("{code} {reason}: {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
        /// How long the server asked the client to wait before trying again: the Status's
        /// `details.retryAfterSeconds` (a 429, or a 5xx such as ServerTimeout). kube 5's
        /// `Error::Api` keeps only the body; a wait given only in the `Retry-After` header (the
        /// plain-text 429 of kube-apiserver's priority-and-fairness filter) is put there by the
        /// client's `server_wait` layer.
        retry_after: Option<Duration>,
    },
    /// No answer within the deadline.
    #[error("no answer within {}", human(*.0))]
    Timeout(Duration),
    /// Connection, TLS or protocol failure.
    #[error("{0}")]
    Transport(String),
    /// An established (pooled) connection broke under the request: the server restarted or a load
    /// balancer dropped it. Not by itself a sign that the server is down.
    #[error("{0}")]
    Dropped(String),
    /// The worker has no usable client (kubeconfig missing or refused).
    #[error("no connection to WorkerCluster {0}")]
    NotConnected(String),
    /// Calls to the worker are failing fast after a timeout or connection failure, until a probe
    /// succeeds again.
    #[error("WorkerCluster {0} is not answering; calls are paused until a probe succeeds")]
    CircuitOpen(String),
    /// Too many calls to the worker are in flight (it is slow); try again shortly.
    #[error("WorkerCluster {0} has too many calls in flight")]
    Busy(String),
    /// A response could not be decoded, or a request not built.
    #[error("{0}")]
    Other(String),
}

impl CallError {
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The wait the server asked for before this call is tried again (see `Api::retry_after`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// 409 with reason AlreadyExists (a create of a name that exists).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, CallError::Api { code: 409, reason, .. } if reason == "AlreadyExists")
    }

    /// The call never got an answer from the server (the worker may be down or hanging).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            CallError::Timeout(_) | CallError::Transport(_) | CallError::Dropped(_)
        )
    }

    /// Short label for metrics (`reason` of `courier_reconcile_errors_total`).
    pub fn metric_reason(&self) -> &'static str {
        match self {
            CallError::Api { code: 409, .. } => "conflict",
            CallError::Api { code: 404, .. } => "not_found",
            CallError::Api { code: 401, .. } => "unauthorized",
            CallError::Api { code: 403, .. } => "forbidden",
            CallError::Api { code: 422, .. } | CallError::Api { code: 400, .. } => "invalid",
            CallError::Api { code: 429, .. } => "throttled",
            CallError::Api { code, .. } if *code >= 500 => "server_error",
            CallError::Api { .. } => "api_error",
            CallError::Timeout(_) => "timeout",
            CallError::Transport(_) | CallError::Dropped(_) => "unreachable",
            CallError::NotConnected(_) | CallError::CircuitOpen(_) => "cluster_unavailable",
            CallError::Busy(_) => "cluster_busy",
            CallError::Other(_) => "other",
        }
    }

    pub fn from_kube(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => CallError::Api {
                code: s.code,
                reason: quote(&s.reason).into_owned(),
                message: quote(&s.message).into_owned(),
                // client-go's `SuggestsClientDelay`: any Status whose details ask for a delay.
                retry_after: s
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|secs| *secs > 0)
                    .map(|secs| Duration::from_secs(u64::from(secs))),
            },
            kube::Error::Service(_) if broke_established_connection(&e) => {
                CallError::Dropped(quote(&chain(&e)).into_owned())
            }
            kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::ReadEvents(_)
            | kube::Error::RustlsTls(_)
            | kube::Error::HttpError(_) => CallError::Transport(quote(&chain(&e)).into_owned()),
            kube::Error::Auth(_) => CallError::Transport(quote(&chain(&e)).into_owned()),
            other => CallError::Other(quote(&chain(&other)).into_owned()),
        }
    }
}

/// Whether the HTTP client failed on a connection it had established (not while connecting).
fn broke_established_connection(e: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper_util::client::legacy::Error>() {
            return !h.is_connect();
        }
        source = s.source();
    }
    false
}

/// An error and its sources, `a: b: c`, without repeating a source already in the text.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The most of a server's own words (a Status message, an error body, a transport error chain)
/// Courier quotes in a condition, an Event or a log line: a worker (or a proxy in front of it) may
/// answer with a page of HTML or worse, and conditions are limited in size.
pub const QUOTE_LIMIT: usize = 1024;

/// `text` cut to [`QUOTE_LIMIT`] bytes (on a character boundary), saying how much was cut. Every
/// quote of a server's words goes through here (via [`CallError::from_kube`]).
pub fn quote(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= QUOTE_LIMIT {
        return text.into();
    }
    let mut end = QUOTE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} more bytes truncated)",
        &text[..end],
        text.len() - end
    )
    .into()
}

/// Runs `fut` with a deadline, mapping both failure kinds into [`CallError`].
pub async fn with_timeout<T>(
    deadline: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(deadline, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(CallError::from_kube(e)),
        Err(_) => Err(CallError::Timeout(deadline)),
    }
}

pub fn human(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Why a reconcile stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileError {
    /// What was being done (`write intent`, `create mirror on eu-1`, ...).
    pub step: String,
    pub error: CallError,
    /// The WorkerCluster the failed call went to (`None`: the management cluster, or no call).
    pub cluster: Option<String>,
}

impl ReconcileError {
    /// `error` while doing `step` on the management cluster (or before any call).
    pub fn new(step: impl Into<String>, error: CallError) -> Self {
        Self {
            step: step.into(),
            error,
            cluster: None,
        }
    }

    /// The same error, naming the WorkerCluster the call went to.
    pub fn on(mut self, cluster: &str) -> Self {
        self.cluster = Some(cluster.to_string());
        self
    }
}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.error)
    }
}

impl std::error::Error for ReconcileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        let e = CallError::Api {
            code: 409,
            reason: "AlreadyExists".into(),
            message: "x".into(),
            retry_after: None,
        };
        assert!(e.is_already_exists() && e.is_conflict());
        assert_eq!(e.metric_reason(), "conflict");
        assert_eq!(
            CallError::Timeout(Duration::from_secs(3)).to_string(),
            "no answer within 3s"
        );
        assert!(CallError::Transport("refused".into()).is_unreachable());
        let e = CallError::Api {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: "x".into(),
            retry_after: None,
        };
        assert_eq!(e.metric_reason(), "server_error");
    }

    /// The wait a Status asks for (`details.retryAfterSeconds`) reaches the error; none without.
    #[test]
    fn a_status_retry_after_is_kept() {
        let status = |details: serde_json::Value| -> kube::Error {
            let v = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": 429, "reason": "TooManyRequests", "message": "slow down",
                "details": details});
            match serde_json::from_value::<kube::core::Status>(v) {
                Ok(s) => kube::Error::Api(Box::new(s)),
                Err(e) => panic!("{e}"),
            }
        };
        let e = CallError::from_kube(status(serde_json::json!({"retryAfterSeconds": 3})));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.metric_reason(), "throttled");
        let e = CallError::from_kube(status(serde_json::json!({})));
        assert_eq!((e.code(), e.retry_after()), (Some(429), None));
        assert_eq!(
            CallError::Timeout(Duration::from_secs(1)).retry_after(),
            None
        );
    }

    #[test]
    fn quotes_are_cut_on_a_character_boundary() {
        assert_eq!(quote("short"), "short");
        let long = "é".repeat(QUOTE_LIMIT);
        let q = quote(&long);
        assert!(q.len() < QUOTE_LIMIT + 40, "{}", q.len());
        assert!(q.ends_with(&format!(
            "({} more bytes truncated)",
            long.len() - QUOTE_LIMIT
        )));
    }
}
