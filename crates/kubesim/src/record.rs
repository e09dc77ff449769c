//! Optional recording of the resource requests a server receives, for tests that check which API
//! calls a client really makes (e.g. that Courier's table of API calls, and so its RBAC, is complete),
//! which client identity wrote what (a standby replica made no write), and in which order (a mirror
//! deleted before the origin's finalizer was released). Each request is recorded when it is
//! answered, with its status code, a sequence number (monotonic across the server's life) and the
//! time. Off by default; while off it costs one uncontended lock per request. Library:
//! `Sim::record_requests` / `Sim::recorded_requests`; admin: `POST /record/start`, `GET /record`,
//! `POST /record/stop`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::kinds::ssar::AccessAttributes;

/// One resource request as the authorizer saw it, and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedRequest {
    /// Order of answering, from 1, never reused while the server runs.
    pub seq: u64,
    /// When it was answered (RFC 3339, nanoseconds).
    pub time: String,
    /// The authenticated user's name.
    pub user: String,
    /// Verb, group, resource, subresource, namespace and name.
    #[serde(flatten)]
    pub attributes: AccessAttributes,
    /// For a create (a POST to the collection, so `name` is empty): the name of the object it
    /// created or tried to, so a test can tell a retried create from another one. Taken from the
    /// request body when an injected fault answered; else from the answer (the created object, or
    /// the Status's `details.name`). Empty when unknown.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub object: String,
    /// Whether the authorizer allowed it (denied requests are recorded too).
    pub allowed: bool,
    /// The HTTP status code of the answer (a watch: when it started).
    pub code: u16,
    /// Set when the answer was an injected fault (`crate::faults`), not the server's own: the
    /// request never reached the authorizer or storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<InjectedFault>,
}

/// A fault answer as a client saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectedFault {
    /// 500 or 429.
    pub code: u16,
    /// The `Retry-After` seconds sent with a 429.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl RecordedRequest {
    /// Whether it changed something (or tried to): create, update, patch, delete, deletecollection.
    pub fn is_write(&self) -> bool {
        matches!(
            self.attributes.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The recording: `None` while off.
#[derive(Debug, Default)]
pub struct RequestLog(Mutex<Option<Vec<RecordedRequest>>>, AtomicU64);

impl RequestLog {
    /// Starts recording (keeps what was recorded so far).
    pub fn start(&self) {
        self.lock().get_or_insert_with(Vec::new);
    }

    /// Stops recording and returns everything recorded.
    pub fn stop(&self) -> Vec<RecordedRequest> {
        self.lock().take().unwrap_or_default()
    }

    /// What was recorded so far (recording continues).
    pub fn snapshot(&self) -> Vec<RecordedRequest> {
        self.lock().clone().unwrap_or_default()
    }

    /// Whether recording is on (callers skip building a record otherwise).
    pub fn is_on(&self) -> bool {
        self.lock().is_some()
    }

    pub(crate) fn record(
        &self,
        user: &str,
        attributes: &AccessAttributes,
        object: &str,
        allowed: bool,
        code: u16,
    ) {
        self.push(user, attributes, object, allowed, code, None);
    }

    /// Records a request answered by an injected fault (`code` 500 or 429 with `retry_after`).
    pub(crate) fn record_fault(
        &self,
        user: &str,
        attributes: &AccessAttributes,
        object: &str,
        code: u16,
        retry_after: Option<u64>,
    ) {
        let fault = InjectedFault {
            code,
            retry_after_seconds: retry_after,
        };
        self.push(user, attributes, object, true, code, Some(fault));
    }

    fn push(
        &self,
        user: &str,
        attributes: &AccessAttributes,
        object: &str,
        allowed: bool,
        code: u16,
        fault: Option<InjectedFault>,
    ) {
        if let Some(log) = self.lock().as_mut() {
            log.push(RecordedRequest {
                seq: self.1.fetch_add(1, Ordering::Relaxed) + 1,
                time: crate::time::format_nano(jiff::Timestamp::now()),
                user: user.to_string(),
                attributes: attributes.clone(),
                object: object.to_string(),
                allowed,
                code,
                fault,
            });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<RecordedRequest>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(verb: &str) -> AccessAttributes {
        AccessAttributes {
            verb: verb.into(),
            group: "batch".into(),
            resource: "jobs".into(),
            ..Default::default()
        }
    }

    #[test]
    fn records_only_while_started() {
        let log = RequestLog::default();
        log.record("u", &attrs("get"), "", true, 200);
        assert!(log.snapshot().is_empty(), "off by default");
        log.start();
        log.record("u", &attrs("list"), "", true, 200);
        log.record("v", &attrs("delete"), "", false, 403);
        let seen = log.snapshot();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].attributes.verb, "list");
        assert_eq!((seen[1].user.as_str(), seen[1].allowed), ("v", false));
        assert_eq!((seen[0].seq, seen[1].seq, seen[1].code), (1, 2, 403));
        assert!(seen[1].is_write() && !seen[0].is_write());
        assert_eq!(log.stop(), seen);
        log.record("u", &attrs("watch"), "", true, 200);
        assert!(log.stop().is_empty(), "stopped");
    }

    #[test]
    fn injected_faults_are_marked() {
        let log = RequestLog::default();
        log.start();
        log.record_fault("u", &attrs("create"), "a", 429, Some(2));
        log.record("u", &attrs("create"), "a", true, 201);
        let seen = log.snapshot();
        assert_eq!(
            seen[0].fault,
            Some(InjectedFault {
                code: 429,
                retry_after_seconds: Some(2)
            })
        );
        assert_eq!((seen[0].code, seen[1].fault.clone()), (429, None));
        let json = serde_json::to_value(&seen).unwrap_or_default();
        assert_eq!(json[0]["fault"]["retryAfterSeconds"], 2);
        assert_eq!(
            (&json[0]["object"], &json[1]["object"]),
            (&json!("a"), &json!("a"))
        );
        assert!(json[1].get("fault").is_none(), "{json}");
    }
}
