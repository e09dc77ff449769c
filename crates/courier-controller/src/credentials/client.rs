//! The HTTP stack of every kube client Courier builds: the controller's worker and management
//! clients, the CLI's and the bench's.
//!
//! It is kube's own default stack (`kube::client::ClientBuilder::try_from`, kube-client 5) with one
//! difference: the TCP connector sets `TCP_NODELAY`. kube's connector leaves Nagle's algorithm on,
//! and an API call over TLS leaves the client as more than one small write (the request head and
//! body, each its own TLS record), so the second write can wait for the server's delayed ACK, up to
//! 40 ms on Linux, a round trip the status copy of a running Job would pay on both the worker and
//! the management server. Every Kubernetes client in Go has it off (Go's net package sets
//! `TCP_NODELAY` on every TCP connection by default).
//!
//! Also unlike kube's stack: no `TraceLayer`. It opened a `debug` span per request and logged an
//! `ERROR` of its own for every 5xx answer, which the controller already reports with the
//! object's key (reconcile errors, probe conditions).
//!
//! Two kinds of configuration keep kube's builder unchanged: a proxy (`proxy_url`; the proxy
//! connectors are kube's, and this build has none compiled in, so kube refuses it with its own
//! error naming the feature) and exec-plugin credentials (kube renews a client certificate the
//! plugin returns, through a field it keeps to itself). Both are opt-in: exec kubeconfigs need
//! `--allow-exec-kubeconfigs`.

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::Config;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

/// The stack's service, as kube's own builder boxes it (kube does not export its alias).
pub type ClientService = BoxService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

/// A client builder for `config` (see the module documentation); callers add their own layers
/// (`with_layer`) and `build()`.
pub fn client_builder(config: Config) -> Result<ClientBuilder<ClientService>, kube::Error> {
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return ClientBuilder::try_from(config);
    }
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let tls = config.rustls_https_connector_with_connector(tcp)?;
    let mut connector = TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed();
    Ok(ClientBuilder::new(service, config.default_namespace))
}

/// [`client_builder`] with nothing added.
pub fn client(config: Config) -> Result<kube::Client, kube::Error> {
    Ok(client_builder(config)?.build())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::os::fd::RawFd;

    /// `TCP_NODELAY` of this process's TCP socket connected to `peer`, found among its open file
    /// descriptors (the client keeps its connection to itself).
    fn nodelay_of_socket_to(peer: SocketAddr) -> Option<bool> {
        let fds = std::fs::read_dir("/proc/self/fd").ok()?;
        for entry in fds.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<RawFd>().ok())
            else {
                continue;
            };
            // SAFETY: getpeername and getsockopt only write into the buffers given, of the sizes
            // given; on a descriptor that is not a socket they fail with ENOTSOCK.
            unsafe {
                let mut addr: libc::sockaddr_in = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                if libc::getpeername(fd, (&raw mut addr).cast(), &mut len) != 0
                    || i32::from(addr.sin_family) != libc::AF_INET
                    || u16::from_be(addr.sin_port) != peer.port()
                {
                    continue;
                }
                let mut on: libc::c_int = 0;
                let mut optlen = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                if libc::getsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&raw mut on).cast(),
                    &mut optlen,
                ) == 0
                {
                    return Some(on != 0);
                }
            }
        }
        None
    }

    #[tokio::test]
    async fn the_client_connection_has_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        // A server that answers every request on the connection with an empty JSON object,
        // holding the connection open until the test has looked at it.
        let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut sock, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
            let mut buf = vec![0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let body = "{}";
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(answer.as_bytes()).await;
            let _ = seen_rx.await;
        });
        let config = Config::new(
            format!("http://{addr}")
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let client = client(config).unwrap_or_else(|e| panic!("{e}"));
        let request = http::Request::get("/version")
            .body(Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let answer: serde_json::Value = client
            .request(request)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer, serde_json::json!({}));
        assert_eq!(
            nodelay_of_socket_to(addr),
            Some(true),
            "the client's connection to {addr} must have TCP_NODELAY set"
        );
        let _ = seen_tx.send(());
        let _ = server.await;
    }
}
