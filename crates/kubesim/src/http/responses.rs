//! HTTP response builders: JSON, Status errors, warnings and plain-text answers.

use super::*;

pub(super) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|e: Infallible| match e {})
        .boxed_unsync()
}

pub(super) fn json_response(code: u16, body: Bytes, warnings: &[String]) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    with_warnings(r, warnings)
}

pub(super) fn value_response(code: u16, v: &Value) -> Response<Body> {
    json_response(
        code,
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
        &[],
    )
}

pub(super) fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = value_response(e.code, &e.to_status());
    if let Some(s) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    r
}

pub(super) fn with_warnings(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&crate::schema::warning_header_value(w)) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}

pub(super) fn text_response(code: u16, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::NOT_FOUND);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// A 429 as kube-apiserver's priority-and-fairness filter writes it (`tooManyRequests` in
/// `k8s.io/apiserver/pkg/server/filters/maxinflight.go`): Go's `http.Error` text, and the wait only
/// in `Retry-After`.
pub(super) fn throttled_as_text(retry_after_seconds: u64) -> Response<Body> {
    let mut r = text_response(429, "Too many requests, please try again later.\n");
    if let Ok(v) = HeaderValue::from_str(&retry_after_seconds.to_string()) {
        r.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    r
}

pub(super) fn page_not_found() -> Response<Body> {
    text_response(404, "404 page not found\n")
}
