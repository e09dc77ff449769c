//! `/metrics` (Prometheus text), `/healthz` (the process serves) and `/readyz` (caches synced and,
//! with leader election, leading or standing by with a working Lease loop) over hyper.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::shared::Shared;

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

fn route(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "method not allowed\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            shared.metrics_text(),
        ),
        "/healthz" | "/livez" => text(StatusCode::OK, PLAIN, "ok\n".into()),
        "/readyz" => {
            let (ready, why) = shared.readiness();
            if ready {
                text(StatusCode::OK, PLAIN, format!("ok: {why}\n"))
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    format!("not ready: {why}\n"),
                )
            }
        }
        _ => text(StatusCode::NOT_FOUND, PLAIN, "not found\n".into()),
    }
}

/// Serves until the controller stops.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let token = shared.token.clone();
    accept_loop(listener, token, "metrics endpoint", move |req| {
        let resp = route(&shared, &req);
        async move { resp }
    })
    .await;
}

/// Accepts connections on `listener` until `token` is cancelled and answers each request with
/// `handle` (HTTP/1.1 or HTTP/2). `what` names the endpoint in logs.
pub async fn accept_loop<H, Fut>(
    listener: TcpListener,
    token: tokio_util::sync::CancellationToken,
    what: &'static str,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            _ = token.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "{what}: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, std::convert::Infallible>(answer.await) }
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                debug!(%peer, error = %e, "{what}: connection ended with an error");
            }
        });
    }
}
