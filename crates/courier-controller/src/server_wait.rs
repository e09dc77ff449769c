//! The wait a server asks for, read where the server gives it.
//!
//! kube-apiserver's priority-and-fairness filter, the usual source of a `429`, answers with a
//! plain-text body and gives the wait only in the `Retry-After` header (`tooManyRequests` in
//! `k8s.io/apiserver/pkg/server/filters/maxinflight.go`). kube 5's `Error::Api` keeps only the body,
//! so that wait would be lost and a throttled write retried after the queue's short backoff. Like
//! client-go (`newUnstructuredResponseError` in `k8s.io/client-go/rest/request.go`), this layer
//! turns such an answer into a Status with the header's seconds in `details.retryAfterSeconds`;
//! `CallError::from_kube` then sees the wait whichever form the server chose. Only error answers
//! that carry `Retry-After` are touched; every other answer passes through as it came.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::client::{Body, DynBody};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The longest error body read to add the wait to (kube-apiserver's are a few hundred bytes).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The longest server text kept as a reconstructed Status's message (a proxy may answer HTML).
const MAX_MESSAGE: usize = 512;

/// Adds [`ServerWait`] to a client's service stack.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerWaitLayer;

impl<S> tower::Layer<S> for ServerWaitLayer {
    type Service = ServerWait<S>;

    fn layer(&self, inner: S) -> ServerWait<S> {
        ServerWait { inner }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ServerWait<S> {
    inner: S,
}

impl<S> tower::Service<Request<Body>> for ServerWait<S>
where
    S: tower::Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await?;
            let Some(secs) = asked_wait(res.status(), res.headers().get(http::header::RETRY_AFTER))
            else {
                return Ok(res);
            };
            let (mut parts, body) = res.into_parts();
            let body = read_error_body(body).await?;
            let body = match with_server_wait(parts.status, &body, secs) {
                Some(status) => {
                    parts.headers.remove(http::header::CONTENT_LENGTH);
                    parts.headers.insert(
                        http::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    status
                }
                None => body,
            };
            let body: Box<DynBody> =
                Box::new(Full::new(body).map_err(|never: Infallible| match never {}));
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// An error answer's body, whole (bounded: the body of an error is small).
async fn read_error_body(body: Box<DynBody>) -> Result<Bytes, BoxError> {
    let mut out = Vec::new();
    let mut body = Box::into_pin(body);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if out.len() + data.len() > MAX_ERROR_BODY {
                return Err(format!("an error answer longer than {MAX_ERROR_BODY} bytes").into());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

/// The seconds an error answer asks the client to wait, from `Retry-After`. Only the
/// delay-seconds form: kube-apiserver never sends the HTTP-date form.
fn asked_wait(code: StatusCode, retry_after: Option<&HeaderValue>) -> Option<u32> {
    if !(code.is_client_error() || code.is_server_error()) {
        return None;
    }
    let secs: u32 = retry_after?.to_str().ok()?.trim().parse().ok()?;
    (secs > 0).then_some(secs)
}

/// The body with the wait in `details.retryAfterSeconds`, or `None` when it needs no change (a
/// Status that already names a wait). A body that is not a Status becomes one, its text the
/// message.
fn with_server_wait(code: StatusCode, body: &[u8], secs: u32) -> Option<Bytes> {
    if let Ok(mut status) = serde_json::from_slice::<Value>(body)
        && status.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(fields) = status.as_object_mut()
    {
        let details = fields.entry("details").or_insert_with(|| json!({}));
        let details = details.as_object_mut()?;
        if details
            .get("retryAfterSeconds")
            .and_then(Value::as_u64)
            .is_some_and(|s| s > 0)
        {
            return None;
        }
        details.insert("retryAfterSeconds".into(), secs.into());
        return serde_json::to_vec(&status).ok().map(Bytes::from);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() {
        format!(
            "the server answered {} and asked to wait {secs}s",
            code.as_u16()
        )
    } else {
        text.chars().take(MAX_MESSAGE).collect()
    };
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason_of(code),
        "details": {"retryAfterSeconds": secs},
        "code": code.as_u16(),
    });
    serde_json::to_vec(&status).ok().map(Bytes::from)
}

/// The Status reason kube-apiserver gives these codes (`apierrors.NewGenericServerResponse`).
fn reason_of(code: StatusCode) -> &'static str {
    match code.as_u16() {
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::CallError;
    use std::time::Duration;

    fn call_error(code: u16, body: &[u8]) -> CallError {
        let status: kube::core::Status =
            serde_json::from_slice(body).unwrap_or_else(|e| panic!("not a Status: {e}"));
        assert_eq!(status.code, code);
        CallError::from_kube(kube::Error::Api(status.boxed()))
    }

    #[test]
    fn the_wait_of_a_plain_text_429_reaches_the_error() {
        let code = StatusCode::TOO_MANY_REQUESTS;
        let body = with_server_wait(code, b"Too many requests, please try again later.\n", 3)
            .unwrap_or_else(|| panic!("rewritten"));
        let e = call_error(429, &body);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(
            e.to_string(),
            "429 TooManyRequests: Too many requests, please try again later."
        );
    }

    #[test]
    fn a_status_without_a_wait_gets_the_headers() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":503,"reason":"ServiceUnavailable","message":"etcd leader changed","details":{"name":"x"}}"#;
        let out = with_server_wait(StatusCode::SERVICE_UNAVAILABLE, body, 2)
            .unwrap_or_else(|| panic!("rewritten"));
        let e = call_error(503, &out);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        let v: Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(v["details"]["name"], "x", "other details are kept");
        assert_eq!(v["message"], "etcd leader changed");
    }

    #[test]
    fn a_status_that_names_its_wait_is_left_alone() {
        let body = br#"{"kind":"Status","code":429,"reason":"TooManyRequests","message":"m","details":{"retryAfterSeconds":7}}"#;
        assert_eq!(
            with_server_wait(StatusCode::TOO_MANY_REQUESTS, body, 1),
            None
        );
    }

    #[test]
    fn an_empty_or_long_body_gets_a_bounded_message() {
        let out = with_server_wait(StatusCode::GATEWAY_TIMEOUT, b"", 5)
            .unwrap_or_else(|| panic!("rewritten"));
        let e = call_error(504, &out);
        assert_eq!(
            e.to_string(),
            "504 Timeout: the server answered 504 and asked to wait 5s"
        );
        let html = "<html>".repeat(1000);
        let out = with_server_wait(StatusCode::BAD_GATEWAY, html.as_bytes(), 5)
            .unwrap_or_else(|| panic!("rewritten"));
        let v: Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(v["message"].as_str().map(str::len), Some(MAX_MESSAGE));
        assert_eq!(v["reason"], "Unknown");
    }

    #[test]
    fn only_error_answers_with_a_seconds_header_ask_for_a_wait() {
        let h = |s: &'static str| HeaderValue::from_static(s);
        assert_eq!(
            asked_wait(StatusCode::TOO_MANY_REQUESTS, Some(&h("4"))),
            Some(4)
        );
        assert_eq!(asked_wait(StatusCode::OK, Some(&h("4"))), None);
        assert_eq!(asked_wait(StatusCode::TOO_MANY_REQUESTS, None), None);
        assert_eq!(
            asked_wait(StatusCode::TOO_MANY_REQUESTS, Some(&h("0"))),
            None
        );
        assert_eq!(
            asked_wait(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&h("Wed, 21 Oct 2026 07:28:00 GMT"))
            ),
            None
        );
    }
}
