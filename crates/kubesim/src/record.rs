//! Optional recording of the resource requests a server receives, for tests that check which API
//! calls a client really makes (e.g. that Courier's table of API calls, and so its RBAC, is complete).
//! Off by default; while off it costs one uncontended lock per request.

use std::sync::Mutex;

use crate::kinds::ssar::AccessAttributes;

/// One resource request as the authorizer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The authenticated user's name.
    pub user: String,
    /// Verb, group, resource, subresource, namespace and name.
    pub attributes: AccessAttributes,
    /// Whether the authorizer allowed it (denied requests are recorded too).
    pub allowed: bool,
}

/// The recording: `None` while off.
#[derive(Debug, Default)]
pub struct RequestLog(Mutex<Option<Vec<RecordedRequest>>>);

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

    pub(crate) fn record(&self, user: &str, attributes: &AccessAttributes, allowed: bool) {
        if let Some(log) = self.lock().as_mut() {
            log.push(RecordedRequest {
                user: user.to_string(),
                attributes: attributes.clone(),
                allowed,
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
        log.record("u", &attrs("get"), true);
        assert!(log.snapshot().is_empty(), "off by default");
        log.start();
        log.record("u", &attrs("list"), true);
        log.record("v", &attrs("delete"), false);
        let seen = log.snapshot();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].attributes.verb, "list");
        assert_eq!((seen[1].user.as_str(), seen[1].allowed), ("v", false));
        assert_eq!(log.stop(), seen);
        log.record("u", &attrs("watch"), true);
        assert!(log.stop().is_empty(), "stopped");
    }
}
