//! The HTTPS front end: accept loop (with connection-level faults), bearer-token authentication,
//! authorization, routing of Kubernetes API paths, and the verbs, answering exactly as the real server
//! frames its answers.

pub mod discovery;
pub mod encoding;
pub mod openapi;
pub mod table;

mod responses;
mod routing;
mod verbs;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::watch::WatchOpts;
use crate::api::{Api, DeleteOpts, FieldValidation, ListOpts, Part, PatchKind, Served, WriteOpts};
use crate::auth::{User, Users};
use crate::errors::ApiError;
use crate::faults::{Faults, Injected, ThrottleBody};
use crate::kinds::ssar::AccessAttributes;
use crate::selectors::{FieldSelector, LabelSelector};

use responses::{error_response, full, text_response, throttled_as_text, value_response};
use routing::{Route, Target, route, verb_of};
use verbs::{read_body, resource_request};

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body accepted (the real server's limit).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Everything a request handler needs.
pub struct ServerState {
    pub api: Arc<Api>,
    pub users: Arc<Users>,
    pub faults: Arc<Faults>,
    /// `host:port` clients reach the server at (discovery's serverAddress).
    pub server_address: String,
    /// `gitVersion` reported by `/version`.
    pub version: String,
    pub requests: AtomicU64,
    /// TLS handshakes completed (connections that got as far as HTTP).
    pub handshakes: AtomicU64,
    /// Resource requests, when a test turned recording on (`Sim::record_requests`).
    pub recorded: crate::record::RequestLog,
}

/// Serves HTTPS on `listener` until `shutdown`. Follows the `refuse` fault by closing and re-binding
/// the listening socket, and the `blackhole` fault by holding new connections unanswered.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<ServerState>,
    shutdown: CancellationToken,
) {
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "kubesim listener has no address");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut faults = state.faults.subscribe();
    let mut listener = Some(listener);
    loop {
        if faults.borrow_and_update().refuse {
            listener = None;
        } else if listener.is_none() {
            listener = rebind(addr).await;
        }
        let accept = async {
            match &listener {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = faults.changed() => if r.is_err() { return },
            r = accept => match r {
                Ok((tcp, _)) => {
                    let _ = tcp.set_nodelay(true);
                    spawn_connection(tcp, acceptor.clone(), state.clone(), shutdown.clone());
                }
                Err(e) => tracing::debug!(error = %e, "accept failed"),
            },
        }
    }
}

async fn rebind(addr: SocketAddr) -> Option<TcpListener> {
    for _ in 0..50 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    tracing::error!(%addr, "could not re-bind the listening socket after lifting the refuse fault");
    None
}

fn spawn_connection(
    tcp: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<ServerState>,
    shutdown: CancellationToken,
) {
    let token = state.faults.connection_token();
    tokio::spawn(async move {
        let work = async {
            if state.faults.blackholed() {
                // Accepted, never answered: not even the TLS handshake.
                state.faults.wait_unblackholed().await;
                return;
            }
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => {
                    state
                        .handshakes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    t
                }
                Err(e) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
            };
            let svc = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(state, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), svc).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        };
        tokio::select! {
            _ = work => {}
            _ = token.cancelled() => {}
            _ = shutdown.cancelled() => {}
        }
    });
}

// ------------------------------------------------------------------------------------ requests

/// Query parameters, decoded like Go's `url.ParseQuery` (`+` is a space).
fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        out.entry(dec(k)).or_insert_with(|| dec(v));
    }
    out
}

fn is_true(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

async fn handle(state: Arc<ServerState>, req: Request<Incoming>) -> Response<Body> {
    state.requests.fetch_add(1, Ordering::Relaxed);
    let faults = &state.faults;
    if let Some(l) = faults.latency(req.uri().path()) {
        tokio::time::sleep(l).await;
    }
    if faults.blackholed() {
        faults.wait_unblackholed().await;
    }
    let injected = match faults.draw(req.method().as_str(), req.uri().path()) {
        Injected::None => None,
        Injected::Error => Some((
            ApiError::internal("injected by kubesim's fault settings"),
            None,
        )),
        Injected::Throttle(s, form) => Some((ApiError::too_many_requests(s), Some(form))),
    };
    if let Some((e, throttle_form)) = injected {
        if state.recorded.is_on() {
            record_injected(&state, req, &e).await;
        }
        return match (throttle_form, e.retry_after) {
            (Some(ThrottleBody::Text), Some(secs)) => throttled_as_text(secs),
            _ => error_response(&e),
        };
    }
    let path = req.uri().path().to_string();
    if matches!(path.as_str(), "/healthz" | "/readyz" | "/livez") {
        return text_response(200, "ok");
    }
    let user = match bearer(&req).and_then(|t| state.users.authenticate(&t)) {
        Some(u) => u,
        None => return error_response(&ApiError::unauthorized()),
    };
    if path == "/version" {
        return value_response(200, &discovery::version(&state.version));
    }
    if path == "/openapi/v2" {
        let (body, ctype) = if wants(&req, "protobuf") {
            (openapi::PROTO_BYTES.clone(), "application/octet-stream")
        } else {
            (openapi::JSON_BYTES.clone(), "application/json")
        };
        let mut r = Response::new(full(body));
        if let Ok(v) = HeaderValue::from_str(ctype) {
            r.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        return r;
    }
    match route(&state, &req, &path) {
        Route::Response(r) => r,
        Route::Resource(target) => match resource_request(&state, &user, req, target).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    }
}

/// Records a request answered by an injected fault, keyed like an ordinary one (so a test can pair
/// a `429` with the client's retry of the same call; a create with the name in its body).
async fn record_injected(state: &ServerState, req: Request<Incoming>, e: &ApiError) {
    let user = bearer(&req)
        .and_then(|t| state.users.authenticate(&t))
        .map_or_else(|| "system:anonymous".to_string(), |u| u.name);
    let path = req.uri().path().to_string();
    let attrs = match route(state, &req, &path) {
        Route::Resource(t) => {
            let watch = is_true(&parse_query(req.uri().query()), "watch");
            attributes(&t, verb_of(req.method(), t.name.is_some(), watch))
        }
        Route::Response(_) => AccessAttributes {
            verb: req.method().as_str().to_ascii_lowercase(),
            path,
            ..Default::default()
        },
    };
    let object = if attrs.verb == "create" && attrs.name.is_empty() {
        // The fault answered before the body was read; a body that is not JSON names nothing.
        read_body(req)
            .await
            .ok()
            .and_then(|(_, body)| serde_json::from_slice::<Value>(&body).ok())
            .and_then(|v| v.pointer("/metadata/name")?.as_str().map(str::to_string))
            .unwrap_or_default()
    } else {
        String::new()
    };
    state
        .recorded
        .record_fault(&user, &attrs, &object, e.code, e.retry_after);
}

/// The name of the object a create made (the answer's `metadata.name`) or was refused for (the
/// Status's `details.name`), for the request record; the answer is buffered to read it (a create's
/// answer is one small object) and handed on unchanged.
async fn created_name(
    answer: Result<Response<Body>, ApiError>,
) -> (Result<Response<Body>, ApiError>, String) {
    match answer {
        Err(e) => {
            let name = e
                .details
                .as_ref()
                .and_then(|d| d.get("name")?.as_str())
                .unwrap_or_default()
                .to_string();
            (Err(e), name)
        }
        Ok(r) => {
            let (parts, body) = r.into_parts();
            let bytes = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(never) => match never {},
            };
            let name = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.pointer("/metadata/name")?.as_str().map(str::to_string))
                .unwrap_or_default();
            (Ok(Response::from_parts(parts, full(bytes))), name)
        }
    }
}

/// The authorizer's view of a resource request.
fn attributes(t: &Target, verb: &str) -> AccessAttributes {
    let info = t.served.info();
    AccessAttributes {
        verb: verb.to_string(),
        group: info.group.clone(),
        resource: info.plural.clone(),
        subresource: t.sub.clone().unwrap_or_default(),
        namespace: t.namespace.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
        // A resource request: the path is only for non-resource URLs.
        path: String::new(),
    }
}

fn bearer(req: &Request<Incoming>) -> Option<String> {
    let h = req
        .headers()
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let t = h
        .strip_prefix("Bearer ")
        .or_else(|| h.strip_prefix("bearer "))?;
    Some(t.trim().to_string())
}

fn wants(req: &Request<Incoming>, marker: &str) -> bool {
    req.headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains(marker))
}
