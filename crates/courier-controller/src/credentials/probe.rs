//! The worker probe, as the controller runs it (the full probe, `registry::cluster`) and `courier
//! cluster add` runs it once before registering: the worker answers `/version` with a supported
//! Kubernetes version, and the credentials hold every right Courier needs (one
//! SelfSubjectAccessReview per row of
//! [`crate::api_calls::worker_rights`]). A failure comes with the `Ready` condition reason and a
//! message naming the fix; a worker's own words in it are cut to [`crate::errors::QUOTE_LIMIT`].
//! Between full probes the controller runs the cheaper [`check_one_right`] and
//! [`accepts_connections`].

use std::time::Duration;

use courier_api::reasons::{
    REASON_FORBIDDEN, REASON_UNAUTHORIZED, REASON_UNREACHABLE, REASON_UNSUPPORTED_VERSION,
};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::{Api, Client};

use crate::api_calls::Scope;
use crate::errors::{CallError, human, with_timeout};

/// The oldest worker minor version Courier supports (`1.30`; older workers' Job status lacks what
/// the status translation relies on).
pub const MIN_WORKER_MINOR: u32 = 30;

/// Why a probe failed: the `Ready=False` reason and its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProbeFailure {
    pub reason: &'static str,
    pub message: String,
}

/// What a successful probe learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFacts {
    /// `gitVersion`, e.g. `v1.36.2`.
    pub server_version: String,
}

/// Why the worker at `server` answering `info` is too old, or None. An unparsable minor version
/// (a vendor's build) passes: the rights check still runs.
pub fn version_problem(server: &str, info: &Info) -> Option<String> {
    let minor: u32 = info.minor.trim_end_matches('+').parse().unwrap_or(u32::MAX);
    (info.major == "1" && minor < MIN_WORKER_MINOR).then(|| {
        format!(
            "the worker at {server} runs Kubernetes {}; Courier supports worker clusters from \
             v1.{MIN_WORKER_MINOR} on: upgrade the cluster",
            info.git_version
        )
    })
}

/// The longest a probe call waits for a throttling worker's `Retry-After` before its next try: a
/// probe is bounded by the probe interval, and a longer wait is better spent as the cluster's backoff.
pub(crate) const MAX_PROBE_THROTTLE_WAIT: Duration = Duration::from_secs(5);

/// Runs a probe call again when it failed on a pooled connection that broke under it (a server
/// restart, a load balancer: every pooled connection is dead then, each fails once), and, twice, when
/// the server answered 5xx or 429: a probe is several calls in a row, and one transient answer
/// among them must not mark an answering worker unreachable for a whole backoff period. A 429 waits
/// what the server asked (its `Retry-After`, up to `MAX_PROBE_THROTTLE_WAIT`), or a second when it
/// named no wait (what kube-apiserver's max-in-flight filter sends). Failures to connect are
/// not retried: a dead worker costs one connection attempt per probe.
pub(crate) async fn fresh<T, F, Fut>(mut call: F) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    let mut dropped = 4;
    let mut refused: u64 = 0;
    loop {
        match call().await {
            Err(CallError::Dropped(_)) if dropped > 0 => dropped -= 1,
            Err(e) if refused < 2 && matches!(e.code(), Some(c) if c >= 500 || c == 429) => {
                refused += 1;
                let wait = if e.code() == Some(429) {
                    e.retry_after()
                        .unwrap_or(Duration::from_secs(1))
                        .min(MAX_PROBE_THROTTLE_WAIT)
                } else {
                    Duration::from_millis(100 * refused)
                };
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}

/// Where the rights Courier needs on a worker must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RightsScope<'a> {
    /// The controller runs with `--create-worker-namespaces`: the right to create namespaces is
    /// needed too.
    pub creating_namespaces: bool,
    /// The WorkerCluster's `spec.namespaces`: the Job rights are needed in each of these only
    /// (`None`: cluster-wide).
    pub namespaces: Option<&'a [String]>,
}

/// `/version`, the version gate, then a SelfSubjectAccessReview per
/// required right (per listed namespace for the Job rights when `scope` lists namespaces), each
/// call within `deadline`. `user` (the kubeconfig's user name, when known) is named in failures.
pub async fn probe(
    client: &Client,
    server: &str,
    user: Option<&str>,
    scope: RightsScope<'_>,
    deadline: Duration,
) -> Result<WorkerFacts, ProbeFailure> {
    let info = fresh(|| with_timeout(deadline, client.apiserver_version()))
        .await
        .map_err(|e| classify(server, user, &e))?;
    if let Some(message) = version_problem(server, &info) {
        return Err(ProbeFailure {
            reason: REASON_UNSUPPORTED_VERSION,
            message,
        });
    }
    // One review after the other, on the connection /version just used: concurrent requests over
    // HTTP/1.1 each open a TLS connection (measured: most of an idle controller's CPU,
    // docs/benchmarks.md).
    // (where: None = cluster-wide, the rights missing there)
    let reviews = Reviews::new(scope).map_err(|e| classify(server, user, &e))?;
    let mut missing: Vec<(Option<&str>, Vec<String>)> = Vec::new();
    for review in &reviews.rights {
        match fresh(|| allowed(client, &review.body, deadline)).await {
            Ok(true) => {}
            Ok(false) => {
                let place = review.namespace.as_deref();
                match missing.iter_mut().find(|(p, _)| *p == place) {
                    Some((_, rights)) => rights.push(review.label.clone()),
                    None => missing.push((place, vec![review.label.clone()])),
                }
            }
            Err(e) => return Err(classify(server, user, &e)),
        }
    }
    if !missing.is_empty() {
        return Err(ProbeFailure {
            reason: REASON_FORBIDDEN,
            message: missing_rights_message(server, user, scope.namespaces, &missing),
        });
    }
    Ok(WorkerFacts {
        server_version: info.git_version,
    })
}

/// The Forbidden message: which rights are missing where, and the worker chart's fix.
fn missing_rights_message(
    server: &str,
    user: Option<&str>,
    namespaces: Option<&[String]>,
    missing: &[(Option<&str>, Vec<String>)],
) -> String {
    let parts: Vec<String> = missing
        .iter()
        .map(|(place, rights)| match place {
            Some(ns) => format!("in namespace {ns}: {}", rights.join(", ")),
            None => format!("cluster-wide: {}", rights.join(", ")),
        })
        .collect();
    let fix = match namespaces {
        Some(list) => format!(
            "grant them with the worker chart (charts/courier-worker) installed with `--set \
             namespaces={{{}}}` (the Job rights in each namespace listed in the WorkerCluster's \
             spec.namespaces), and use that account's token",
            list.join(",")
        ),
        None => "grant them (charts/courier-worker creates a ServiceAccount with exactly these) \
                 and use that account's token; if the worker chart grants them only in some \
                 namespaces (its `namespaces` value), list the same ones in the WorkerCluster's \
                 spec.namespaces (`courier cluster add --namespaces`)"
            .to_string(),
    };
    format!(
        "the credentials{} for {server} lack rights Courier needs: {}; {fix}",
        of_user(user),
        parts.join("; ")
    )
}

/// One right Courier needs on a worker, and where (`None`: cluster-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Right<'a> {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub namespace: Option<&'a str>,
}

impl std::fmt::Display for Right<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.verb, self.resource)
        } else {
            write!(f, "{} {}.{}", self.verb, self.resource, self.group)
        }
    }
}

/// Every right the credentials must hold under `scope`: the Job rights in each listed namespace
/// (cluster-wide when none are listed), the others cluster-wide.
pub fn required_rights(scope: RightsScope<'_>) -> Vec<Right<'_>> {
    let mut out = Vec::new();
    for (kind, verb, group, resource) in
        crate::api_calls::worker_rights_scoped(scope.creating_namespaces)
    {
        let right = |namespace| Right {
            verb,
            group,
            resource,
            namespace,
        };
        match scope.namespaces {
            Some(list) if kind == Scope::AnyNamespace => {
                out.extend(list.iter().map(|n| right(Some(n.as_str()))));
            }
            _ => out.push(right(None)),
        }
    }
    out
}

/// The access reviews of [`required_rights`] under one scope, each encoded once: the checks
/// between full probes send one of them every probe interval, and building the typed review,
/// encoding it, building its URL and decoding the whole typed answer at every check was a
/// measurable share of an idle controller's CPU (docs/benchmarks.md, "Idle workers").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviews {
    /// The scope they were built for: `creating_namespaces` and `spec.namespaces`.
    creating_namespaces: bool,
    namespaces: Option<Vec<String>>,
    rights: Vec<Review>,
}

/// One required right's access review, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Review {
    /// The right as failures name it (`delete jobs.batch`).
    label: String,
    /// Where it must hold (`None`: cluster-wide).
    namespace: Option<String>,
    /// The SelfSubjectAccessReview, JSON-encoded.
    body: Vec<u8>,
}

impl Reviews {
    /// The reviews of every right `scope` requires, in [`required_rights`]' order.
    pub fn new(scope: RightsScope<'_>) -> Result<Self, CallError> {
        let rights = required_rights(scope)
            .into_iter()
            .map(|right| {
                let review = crate::api_calls::access_review_in(
                    right.verb,
                    right.group,
                    right.resource,
                    right.namespace,
                );
                let body = serde_json::to_vec(&review).map_err(|e| {
                    CallError::Other(format!("encoding the access review of {right}: {e}"))
                })?;
                Ok(Review {
                    label: right.to_string(),
                    namespace: right.namespace.map(str::to_string),
                    body,
                })
            })
            .collect::<Result<_, CallError>>()?;
        Ok(Self {
            creating_namespaces: scope.creating_namespaces,
            namespaces: scope.namespaces.map(<[String]>::to_vec),
            rights,
        })
    }

    /// Whether these are the reviews `scope` requires (else build them anew).
    pub fn fit(&self, scope: RightsScope<'_>) -> bool {
        self.creating_namespaces == scope.creating_namespaces
            && self.namespaces.as_deref() == scope.namespaces
    }
}

/// The check a healthy worker gets between full probes: one access review, the `turn`-th of
/// `reviews` (in turn, so every right is asked again within as many checks as there are
/// rights), on whatever connection `client` has open. One request proves the worker answers, takes
/// the credentials and still grants that right; a missing right comes back as the `Forbidden`
/// failure naming it (the full probe that follows names them all).
pub async fn check_one_right(
    client: &Client,
    server: &str,
    reviews: &Reviews,
    turn: usize,
    deadline: Duration,
) -> Result<(), ProbeFailure> {
    let Some(review) = reviews.rights.get(turn % reviews.rights.len().max(1)) else {
        return Ok(());
    };
    match fresh(|| allowed(client, &review.body, deadline)).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(ProbeFailure {
            reason: REASON_FORBIDDEN,
            message: missing_rights_message(
                server,
                None,
                reviews.namespaces.as_deref(),
                &[(review.namespace.as_deref(), vec![review.label.clone()])],
            ),
        }),
        Err(e) => Err(classify(server, None, &e)),
    }
}

/// Whether the worker's API server still takes new connections: a TCP connect to the kubeconfig
/// server's host and port (no TLS handshake, nothing sent), within `deadline`. The check between
/// full probes runs over a kept-alive connection, which keeps working for a server that has
/// stopped accepting (shutting down, its listener gone, a firewall that lets only established
/// flows through); every later reconnect (the watch's included) would fail, so such a worker
/// counts as unreachable. (Worker kubeconfigs cannot name a proxy: kube is built without its
/// proxy features, so the server's address is where every connection goes.)
pub async fn accepts_connections(server: &str, deadline: Duration) -> Result<(), CallError> {
    let uri: http::Uri = server
        .parse()
        .map_err(|e| CallError::Other(format!("the server URL {server:?} is invalid: {e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| CallError::Other(format!("the server URL {server:?} names no host")))?;
    // An IPv6 literal comes bracketed in a URL.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    match tokio::time::timeout(deadline, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(CallError::Transport(format!(
            "new connections to {host}:{port} fail: {e}"
        ))),
        Err(_) => Err(CallError::Timeout(deadline)),
    }
}

/// Where access reviews are created.
const ACCESS_REVIEWS_PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// The one field of an access review's answer Courier reads (the rest of it, the spec echoed
/// back, is skipped unread).
#[derive(serde::Deserialize)]
struct ReviewAnswer {
    status: Option<ReviewStatus>,
}

#[derive(serde::Deserialize)]
struct ReviewStatus {
    #[serde(default)]
    allowed: bool,
}

/// Whether the worker allows the review `body` ([`Reviews`]); sent as it is, through the client's
/// whole stack (authentication, the server's `Retry-After`, API errors as `CallError::Api`).
async fn allowed(client: &Client, body: &[u8], deadline: Duration) -> Result<bool, CallError> {
    let request = http::Request::post(ACCESS_REVIEWS_PATH)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_vec())
        .map_err(|e| CallError::Other(format!("building an access review request: {e}")))?;
    let text = with_timeout(deadline, client.request_text(request)).await?;
    let answer: ReviewAnswer = serde_json::from_str(&text)
        .map_err(|e| CallError::from_kube(kube::Error::SerdeError(e)))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Whether the worker chart's ValidatingAdmissionPolicy and its binding
/// ([`courier_api::WORKER_POLICY_NAME`]) both exist: `Some(false)` when either answers 404, `None`
/// when the worker does not say (403: a chart older than this right, or installed under another
/// release name, whose policy has another name; or any other failure, which the rest of the probe
/// reports).
pub async fn policy_installed(client: &Client, deadline: Duration) -> Option<bool> {
    let name = courier_api::WORKER_POLICY_NAME;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let policy = fresh(|| with_timeout(deadline, policies.get_opt(name)))
        .await
        .ok()?;
    if policy.is_none() {
        return Some(false);
    }
    let binding = fresh(|| with_timeout(deadline, bindings.get_opt(name)))
        .await
        .ok()?;
    Some(binding.is_some())
}

/// `message` of a failed probe of WorkerCluster `cluster`, with the fix for an expired bound token
/// when the worker answered 401: a token from `courier cluster add --token-ttl` expires by design.
pub fn rotate_hint(cluster: &str, reason: &str, message: String) -> String {
    if reason != REASON_UNAUTHORIZED {
        return message;
    }
    format!(
        "{message}; if it is a bound token that expired, request a new one with `courier cluster \
         rotate-token {cluster} --cluster-kubeconfig ADMIN.kubeconfig` (an admin kubeconfig of the \
         worker)"
    )
}

fn of_user(user: Option<&str>) -> String {
    user.map(|u| format!(" of user {u}")).unwrap_or_default()
}

const REACH_HINT: &str = "check the server address, that the cluster is up and that it can be reached \
                          from here";

/// The condition reason and message for a failed probe call to the worker at `server` (as `user`,
/// when known).
pub fn classify(server: &str, user: Option<&str>, e: &CallError) -> ProbeFailure {
    let by = of_user(user);
    let (reason, message) = match e {
        CallError::Api { code: 401, .. } => (
            REASON_UNAUTHORIZED,
            format!(
                "the worker at {server} rejected the credentials{by} (401 Unauthorized): the token \
                 or client certificate is invalid, expired or revoked; put valid credentials in the \
                 kubeconfig"
            ),
        ),
        CallError::Api {
            code: 403, message, ..
        } => (
            REASON_FORBIDDEN,
            format!(
                "the worker at {server} refused the credentials{by} (403 Forbidden): {message}; \
                 grant the rights charts/courier-worker defines"
            ),
        ),
        CallError::Api {
            code,
            reason,
            message,
            ..
        } => (
            REASON_UNREACHABLE,
            format!("the worker at {server} answered {code} {reason}: {message}"),
        ),
        CallError::Timeout(d) => (
            REASON_UNREACHABLE,
            format!(
                "cannot reach the worker at {server}: no answer within {}; {REACH_HINT}",
                human(*d)
            ),
        ),
        CallError::Transport(m) | CallError::Dropped(m) => {
            let hint = if m.contains("certificate") || m.contains("Certificate") {
                "the server's certificate does not verify against the kubeconfig's \
                 certificate-authority-data: use the cluster's CA"
            } else {
                REACH_HINT
            };
            (
                REASON_UNREACHABLE,
                format!("cannot reach the worker at {server}: {m}; {hint}"),
            )
        }
        other => (REASON_UNREACHABLE, other.to_string()),
    };
    ProbeFailure { reason, message }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;

    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: format!("v{major}.{}.0", minor.trim_end_matches('+')),
            ..Default::default()
        }
    }

    #[test]
    fn workers_older_than_1_30_are_refused_naming_the_fix() {
        let msg = version_problem("https://w1", &info("1", "29")).unwrap_or_default();
        assert!(
            msg.contains("v1.29.0") && msg.contains("from v1.30") && msg.contains("upgrade"),
            "{msg}"
        );
        assert_eq!(version_problem("https://w1", &info("1", "30")), None);
        assert_eq!(version_problem("https://w1", &info("1", "36+")), None);
        assert_eq!(version_problem("https://w1", &info("1", "x")), None);
    }

    /// Missing rights are named with where they are missing, and the fix names the chart value
    /// when the WorkerCluster lists its namespaces.
    #[test]
    fn missing_rights_name_the_namespace_and_the_chart_fix() {
        let list = ["team-a".to_string(), "team-b".to_string()];
        let missing = [
            (
                Some("team-b"),
                vec!["create jobs.batch".to_string(), "list jobs.batch".into()],
            ),
            (None, vec!["get namespaces".to_string()]),
        ];
        let m = missing_rights_message("https://w1", Some("courier"), Some(&list), &missing);
        assert_eq!(
            m,
            "the credentials of user courier for https://w1 lack rights Courier needs: in \
             namespace team-b: create jobs.batch, list jobs.batch; cluster-wide: get namespaces; \
             grant them with the worker chart (charts/courier-worker) installed with `--set \
             namespaces={team-a,team-b}` (the Job rights in each namespace listed in the \
             WorkerCluster's spec.namespaces), and use that account's token"
        );
        let m = missing_rights_message("https://w1", None, None, &missing[1..]);
        assert!(
            m.contains("needs: cluster-wide: get namespaces; grant them (charts/courier-worker")
                && m.contains("spec.namespaces (`courier cluster add --namespaces`)"),
            "{m}"
        );
    }

    #[test]
    fn an_unauthorized_worker_names_the_rotate_command() {
        let e = CallError::Api {
            code: 401,
            reason: "Unauthorized".into(),
            message: "Unauthorized".into(),
            retry_after: None,
        };
        let f = classify("https://w1", None, &e);
        let m = rotate_hint("eu-1", f.reason, f.message);
        assert!(m.contains("courier cluster rotate-token eu-1"), "{m}");
        let other = rotate_hint("eu-1", REASON_FORBIDDEN, "no rights".into());
        assert_eq!(other, "no rights");
    }

    #[test]
    fn a_worker_body_in_a_condition_is_cut_to_the_quote_limit() {
        // Through the one place that turns a client error into a CallError.
        let status =
            kube::core::Status::failure(&"x".repeat(1 << 20), "InternalError").with_code(500);
        let e = CallError::from_kube(kube::Error::Api(Box::new(status)));
        let f = classify("https://w1", None, &e);
        assert!(
            f.message.len() < crate::errors::QUOTE_LIMIT + 200,
            "{}",
            f.message.len()
        );
        assert!(
            f.message.contains("truncated"),
            "{}",
            &f.message[f.message.len() - 60..]
        );
    }

    /// The checks' encoded reviews are the typed reviews the full probe used to build, one per
    /// required right in order, and a change of scope is noticed.
    #[test]
    fn reviews_encode_every_required_right_once() {
        let list = ["team-a".to_string()];
        let scope = RightsScope {
            creating_namespaces: false,
            namespaces: Some(&list),
        };
        let reviews = Reviews::new(scope).unwrap_or_else(|e| panic!("{e}"));
        let rights = required_rights(scope);
        assert_eq!(reviews.rights.len(), rights.len());
        for (review, right) in reviews.rights.iter().zip(&rights) {
            let typed = crate::api_calls::access_review_in(
                right.verb,
                right.group,
                right.resource,
                right.namespace,
            );
            let decoded: SelfSubjectAccessReview =
                serde_json::from_slice(&review.body).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(decoded, typed);
            assert_eq!(review.label, right.to_string());
            assert_eq!(review.namespace.as_deref(), right.namespace);
        }
        assert!(reviews.fit(scope));
        let cluster_wide = RightsScope {
            namespaces: None,
            ..scope
        };
        assert!(!reviews.fit(cluster_wide));
        assert!(!reviews.fit(RightsScope {
            creating_namespaces: true,
            ..scope
        }));
    }

    /// Only `status.allowed` of an answer is read: a denial, an allowance, and an answer without
    /// a status (denied).
    #[test]
    fn an_answer_is_read_for_its_allowed_field_only() {
        let answer = |status: &str| {
            format!(
                r#"{{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1",
                "metadata":{{"creationTimestamp":null}},"spec":{{"resourceAttributes":
                {{"namespace":"team-a","verb":"delete","group":"batch","resource":"jobs"}}}}
                {status}}}"#
            )
        };
        let allowed = |text: &str| {
            serde_json::from_str::<ReviewAnswer>(text)
                .map(|a| a.status.is_some_and(|s| s.allowed))
                .unwrap_or_else(|e| panic!("{e}: {text}"))
        };
        assert!(allowed(&answer(
            r#","status":{"allowed":true,"reason":"RBAC: allowed by RoleBinding"}"#
        )));
        assert!(!allowed(&answer(
            r#","status":{"allowed":false,"denied":true}"#
        )));
        assert!(!allowed(&answer(r#","status":{}"#)));
        assert!(!allowed(&answer("")));
    }

    fn throttled(retry_after: Option<u64>) -> CallError {
        CallError::Api {
            code: 429,
            reason: "TooManyRequests".into(),
            message: "Too many requests, please try again later.".into(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    /// Runs `fresh` over answers `first` then success, and returns how long it waited.
    async fn waited_after(first: CallError) -> Duration {
        let start = tokio::time::Instant::now();
        let mut answers = vec![Ok(()), Err(first)];
        let r = fresh(|| std::future::ready(answers.pop().unwrap_or(Ok(())))).await;
        assert!(r.is_ok(), "{r:?}");
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_probe_call_waits_what_the_server_asked() {
        assert_eq!(
            waited_after(throttled(Some(3))).await,
            Duration::from_secs(3)
        );
        // No wait named: the second kube-apiserver's max-in-flight filter sends.
        assert_eq!(waited_after(throttled(None)).await, Duration::from_secs(1));
        // A wait longer than a probe may take is cut to the longest one allowed.
        assert_eq!(
            waited_after(throttled(Some(3600))).await,
            MAX_PROBE_THROTTLE_WAIT
        );
    }
}
