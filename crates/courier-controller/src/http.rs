//! `/metrics` (Prometheus text), `/healthz` (the process serves) and `/readyz` (caches synced and,
//! with leader election, leading or standing by with a working Lease loop) over hyper.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
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

/// What one listener (metrics and health, or the web view) allows its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A client must send a request's whole header within this long, or its connection is closed
    /// (a slow or silent-after-connect client cannot hold a connection and a task for ever).
    pub header_read_timeout: Duration,
    /// Connections served at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 256,
        }
    }
}

/// Accepts connections on `listener` until `token` is cancelled and answers each request with
/// `handle`, within the default [`Limits`]. `what` names the endpoint in logs.
pub async fn accept_loop<H, Fut>(
    listener: TcpListener,
    token: tokio_util::sync::CancellationToken,
    what: &'static str,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    accept_loop_with(listener, token, what, Limits::default(), handle).await;
}

/// [`accept_loop`] with explicit limits. HTTP/1.1 only: Prometheus and browsers speak it to a plain
/// http endpoint, and it is what the header-read timeout applies to.
pub async fn accept_loop_with<H, Fut>(
    listener: TcpListener,
    token: tokio_util::sync::CancellationToken,
    what: &'static str,
    limits: Limits,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    let mut last_refusal: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            _ = token.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "{what}: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Dropping the stream closes it. Logged at most once a minute.
            if last_refusal.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                warn!(%peer, limit = limits.max_connections, "{what}: too many connections; closing new ones");
                last_refusal = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let handle = handle.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, std::convert::Infallible>(answer.await) }
            });
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                debug!(%peer, error = %e, "{what}: connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn start(limits: Limits) -> (std::net::SocketAddr, tokio_util::sync::CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let token = tokio_util::sync::CancellationToken::new();
        tokio::spawn(accept_loop_with(
            listener,
            token.clone(),
            "test",
            limits,
            |_req| async { text(StatusCode::OK, "text/plain", "ok\n".into()) },
        ));
        (addr, token)
    }

    /// Reads until the server closes the connection (or `within` passes): true if it closed.
    async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 1024];
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => {}
                Err(_) => return false,
            }
        }
    }

    async fn get_ok(addr: std::net::SocketAddr) -> bool {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            return false;
        };
        let req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        if s.write_all(req).await.is_err() {
            return false;
        }
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        read.is_ok() && out.starts_with(b"HTTP/1.1 200")
    }

    #[tokio::test]
    async fn a_client_slow_to_send_its_header_is_dropped() {
        let limits = Limits {
            header_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let (addr, token) = start(limits).await;
        let mut slow = TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            closed_within(&mut slow, Duration::from_secs(3)).await,
            "an unfinished header held the connection"
        );
        assert!(get_ok(addr).await, "a prompt client is served");
        token.cancel();
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_are_closed() {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(30),
            max_connections: 2,
        };
        let (addr, token) = start(limits).await;
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            // A started request keeps the connection (and its slot) busy.
            s.write_all(b"GET /metrics HTTP/1.1\r\n")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            held.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut third = TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            closed_within(&mut third, Duration::from_secs(2)).await,
            "a third connection was kept"
        );
        assert!(!get_ok(addr).await, "no request is served beyond the limit");
        held.clear();
        // The slots free up once the held connections are gone.
        let mut served = false;
        for _ in 0..50 {
            if get_ok(addr).await {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(served, "the limit is on connections at once, not in total");
        token.cancel();
    }
}
