//! The HTTPS front end: accept loop (with connection-level faults), bearer-token authentication,
//! authorization, routing of Kubernetes API paths, and the verbs, answering exactly as the real server
//! frames its answers.

pub mod discovery;
pub mod encoding;
pub mod openapi;
pub mod table;

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

// ------------------------------------------------------------------------------------ responses

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|e: Infallible| match e {})
        .boxed_unsync()
}

fn json_response(code: u16, body: Bytes, warnings: &[String]) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    with_warnings(r, warnings)
}

fn value_response(code: u16, v: &Value) -> Response<Body> {
    json_response(
        code,
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
        &[],
    )
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = value_response(e.code, &e.to_status());
    if let Some(s) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    r
}

fn with_warnings(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&crate::schema::warning_header_value(w)) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}

fn text_response(code: u16, text: &'static str) -> Response<Body> {
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
fn throttled_as_text(retry_after_seconds: u64) -> Response<Body> {
    let mut r = text_response(429, "Too many requests, please try again later.\n");
    if let Ok(v) = HeaderValue::from_str(&retry_after_seconds.to_string()) {
        r.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    r
}

fn page_not_found() -> Response<Body> {
    text_response(404, "404 page not found\n")
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

/// A request for a resource: which, where, what.
struct Target {
    served: Arc<Served>,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

enum Route {
    Response(Response<Body>),
    Resource(Target),
}

fn route(state: &ServerState, req: &Request<Incoming>, path: &str) -> Route {
    let reg = &state.api.registry;
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let aggregated = wants(req, "as=APIGroupDiscoveryList");
    let discovery = |v: Value, agg: bool| {
        let mut r = value_response(200, &v);
        if agg {
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                ),
            );
        }
        Route::Response(r)
    };
    let no_resource = || Route::Response(error_response(&ApiError::no_route()));
    match segs.as_slice() {
        ["api"] if aggregated => discovery(discovery::aggregated(reg, true), true),
        ["api"] => discovery(discovery::core_versions(&state.server_address), false),
        ["api", v] => match discovery::resource_list(reg, "", v) {
            Some(d) => discovery(d, false),
            None => no_resource(),
        },
        ["apis"] if aggregated => discovery(discovery::aggregated(reg, false), true),
        ["apis"] => discovery(discovery::groups(reg), false),
        ["apis", g] => match discovery::group(reg, g) {
            Some(d) => discovery(d, false),
            None => Route::Response(page_not_found()),
        },
        ["apis", g, v] => match discovery::resource_list(reg, g, v) {
            Some(d) => discovery(d, false),
            None if reg.has_group(g) => no_resource(),
            None => Route::Response(page_not_found()),
        },
        ["api", v, rest @ ..] => resource_route(reg, "", v, rest),
        ["apis", g, v, rest @ ..] => {
            if reg.has_group(g) {
                resource_route(reg, g, v, rest)
            } else {
                Route::Response(page_not_found())
            }
        }
        _ => Route::Response(page_not_found()),
    }
}

fn resource_route(reg: &crate::api::Registry, group: &str, version: &str, rest: &[&str]) -> Route {
    let (namespace, plural, name, sub) = match rest {
        // The namespaces resource itself and its subresources.
        ["namespaces", n] => (None, "namespaces", Some(*n), None),
        ["namespaces", n, s @ ("status" | "finalize")] if group.is_empty() => {
            (None, "namespaces", Some(*n), Some(*s))
        }
        ["namespaces", ns, p] => (Some(*ns), *p, None, None),
        ["namespaces", ns, p, n] => (Some(*ns), *p, Some(*n), None),
        ["namespaces", ns, p, n, s] => (Some(*ns), *p, Some(*n), Some(*s)),
        [p] => (None, *p, None, None),
        [p, n] => (None, *p, Some(*n), None),
        [p, n, s] => (None, *p, Some(*n), Some(*s)),
        _ => return Route::Response(page_not_found()),
    };
    let Some(served) = reg.get(group, version, plural) else {
        return Route::Response(error_response(&ApiError::no_route()));
    };
    let info = served.info();
    if namespace.is_some() && !info.namespaced {
        return Route::Response(page_not_found());
    }
    if namespace.is_none() && info.namespaced && name.is_some() {
        return Route::Response(page_not_found());
    }
    if let Some(s) = sub {
        let ok = (s == "status" && info.status_subresource)
            || served
                .strategy
                .extra_subresources()
                .iter()
                .any(|(n, _)| *n == s);
        if !ok {
            return Route::Response(error_response(&ApiError::no_route()));
        }
    }
    Route::Resource(Target {
        served,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    })
}

fn verb_of(method: &Method, has_name: bool, watch: bool) -> &'static str {
    match (method, has_name) {
        (&Method::GET, _) if watch => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

async fn read_body(req: Request<Incoming>) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(c) => Ok((parts, c.to_bytes())),
        Err(_) => Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY}"),
        )),
    }
}

async fn resource_request(
    state: &ServerState,
    user: &User,
    req: Request<Incoming>,
    t: Target,
) -> Result<Response<Body>, ApiError> {
    let q = parse_query(req.uri().query());
    let watch = is_true(&q, "watch");
    let verb = verb_of(req.method(), t.name.is_some(), watch);
    let attrs = attributes(&t, verb);
    let decision = user.decide(&attrs);
    if !decision.allowed() {
        state.recorded.record(&user.name, &attrs, "", false, 403);
        return Err(crate::kinds::ssar::forbidden_error(
            &user.name,
            &attrs,
            &decision.reason,
        ));
    }
    let mut answer = authorized_request(state, user, req, t, q, verb).await;
    if state.recorded.is_on() {
        let mut object = String::new();
        if verb == "create" && attrs.name.is_empty() {
            (answer, object) = created_name(answer).await;
        }
        let code = match &answer {
            Ok(r) => r.status().as_u16(),
            Err(e) => e.code,
        };
        state
            .recorded
            .record(&user.name, &attrs, &object, true, code);
    }
    answer
}

/// A resource request the authorizer allowed.
async fn authorized_request(
    state: &ServerState,
    user: &User,
    req: Request<Incoming>,
    t: Target,
    q: HashMap<String, String>,
    verb: &str,
) -> Result<Response<Body>, ApiError> {
    let watch = verb == "watch";
    let info = t.served.info().clone();
    if t.sub.as_deref() == Some("log") {
        return pod_log(state, req.method(), &t, &q).await;
    }
    if !info.verbs.iter().any(|v| v == verb) && t.sub.is_none() {
        return Err(ApiError::method_not_supported(
            &info.group,
            &info.plural,
            verb,
        ));
    }
    encoding::refuse_protobuf_only(&t.served, &req)?;
    let ua = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let table = wants(&req, "as=Table");
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let method = req.method().clone();
    let api = &state.api;
    let s = &t.served;
    let ns = t.namespace.clone().unwrap_or_default();
    let write_opts = WriteOpts {
        dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
        field_validation: match q.get("fieldValidation").map(String::as_str) {
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            _ => FieldValidation::Warn,
        },
        manager: crate::structured::manager_name(
            q.get("fieldManager").map(String::as_str),
            ua.as_deref(),
        ),
        explicit_manager: q.contains_key("fieldManager"),
        force: is_true(&q, "force"),
        force_given: q.contains_key("force"),
        user: Some(user.name.clone()),
    };
    let part = if t.sub.as_deref() == Some("status") {
        Part::Status
    } else {
        Part::Main
    };
    let written =
        |w: crate::api::Written| json_response(w.code, api.render(s, &w.obj), &w.warnings);

    // Never-stored review kinds answer a create directly.
    if crate::kinds::sar::is_review(&info.group, &info.plural) && method == Method::POST {
        let (_, body) = read_body(req).await?;
        let body = encoding::request_body(s, &content_type, body)?;
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let out = crate::kinds::sar::answer(&info.plural, &v, user, &state.users)?;
        return Ok(value_response(201, &out));
    }

    // TokenRequest: never stored, answered for an existing ServiceAccount.
    if crate::kinds::serviceaccount::is_token_request(&info.group, &info.plural, t.sub.as_deref()) {
        if method != Method::POST {
            return Err(ApiError::method_not_supported(
                "",
                "serviceaccounts/token",
                verb,
            ));
        }
        let name = t.name.clone().unwrap_or_default();
        api.get(s, &ns, &name)?;
        let (_, body) = read_body(req).await?;
        let body = encoding::request_body(s, &content_type, body)?;
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let out = crate::kinds::serviceaccount::token_request(&ns, &name, &v, &state.users)?;
        return Ok(value_response(201, &out));
    }

    match (method, t.name.as_deref()) {
        (Method::GET, Some(name)) => {
            let st = api.get(s, &ns, name)?;
            if table {
                let meta = json!({"resourceVersion": st.rv.to_string()});
                return Ok(value_response(
                    200,
                    &table::table(api, s, &[st], meta, include_of(&q)),
                ));
            }
            Ok(json_response(200, api.render_stored(s, &st), &[]))
        }
        (Method::GET, None) => {
            let list = list_opts(&q)?;
            if watch {
                let opts = WatchOpts {
                    namespace: t.namespace.clone(),
                    list,
                    timeout: q
                        .get("timeoutSeconds")
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(std::time::Duration::from_secs),
                    bookmarks: is_true(&q, "allowWatchBookmarks"),
                    send_initial_events: is_true(&q, "sendInitialEvents"),
                };
                let rx = crate::api::watch::start(state.api.clone(), s.clone(), opts)?;
                let stream = futures::stream::unfold(rx, |mut rx| async move {
                    crate::api::watch::next_chunk(&mut rx)
                        .await
                        .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
                });
                let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return Ok(r);
            }
            let page = api.list(s, t.namespace.as_deref(), &list)?;
            let mut meta = serde_json::Map::new();
            meta.insert("resourceVersion".into(), json!(page.rv.to_string()));
            match &page.continue_token {
                Some(c) => {
                    meta.insert("continue".into(), json!(c));
                }
                None if s.is_custom() => {
                    meta.insert("continue".into(), json!(""));
                }
                None => {}
            }
            if let Some(n) = page.remaining {
                meta.insert("remainingItemCount".into(), json!(n));
            }
            if table {
                return Ok(value_response(
                    200,
                    &table::table(api, s, &page.items, Value::Object(meta), include_of(&q)),
                ));
            }
            Ok(json_response(
                200,
                list_bytes(api, s, &Value::Object(meta), &page.items),
                &[],
            ))
        }
        (Method::POST, None) => {
            let (_, body) = read_body(req).await?;
            let body = encoding::request_body(s, &content_type, body)?;
            let (obj, mut warnings) =
                crate::api::decode::decode_body(s, &body, write_opts.field_validation)?;
            let mut w = api.create(s, &ns, obj, &write_opts)?;
            warnings.append(&mut w.warnings);
            w.warnings = warnings;
            Ok(written(w))
        }
        (Method::PUT, Some(name)) => {
            let (_, body) = read_body(req).await?;
            let body = encoding::request_body(s, &content_type, body)?;
            let (obj, mut warnings) =
                crate::api::decode::decode_body(s, &body, write_opts.field_validation)?;
            let mut w = if t.sub.as_deref() == Some("finalize") {
                api.finalize_namespace(s, name, obj)?
            } else {
                api.update(s, &ns, name, obj, part, &write_opts)?
            };
            warnings.append(&mut w.warnings);
            w.warnings = warnings;
            Ok(written(w))
        }
        (Method::PATCH, Some(name)) => {
            let kind = match content_type.as_str() {
                "application/json-patch+json" => PatchKind::Json,
                "application/merge-patch+json" => PatchKind::Merge,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchKind::Apply,
                _ => {
                    return Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        "415: Unsupported Media Type",
                    )
                    .with_details(json!({})));
                }
            };
            let (_, body) = read_body(req).await?;
            Ok(written(api.patch(
                s,
                &ns,
                name,
                kind,
                &body,
                part,
                &write_opts,
            )?))
        }
        (Method::DELETE, name) => {
            let (_, body) = read_body(req).await?;
            let d = delete_opts(&q, &body)?;
            let warnings = s.strategy.delete_warnings(&d.as_json());
            let answer = match name {
                Some(name) => api
                    .delete(s, &ns, name, &d)
                    .map(|w| json_response(w.code, api.render(s, &w.obj), &warnings)),
                None => list_opts(&q)
                    .and_then(|list| api.delete_collection(s, t.namespace.as_deref(), &list, &d))
                    .map(|page| {
                        let meta = json!({"resourceVersion": page.rv.to_string()});
                        json_response(200, list_bytes(api, s, &meta, &page.items), &warnings)
                    }),
            };
            Ok(answer.unwrap_or_else(|e| with_warnings(error_response(&e), &warnings)))
        }
        (m, _) => Err(ApiError::method_not_supported(
            &info.group,
            &info.plural,
            m.as_str(),
        )),
    }
}

/// `GET pods/<name>/log` (see `crate::podlog`): plain text, streamed with `follow=true`.
async fn pod_log(
    state: &ServerState,
    method: &Method,
    t: &Target,
    q: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let info = t.served.info();
    if method != Method::GET {
        return Err(ApiError::method_not_supported(
            &info.group,
            &format!("{}/log", info.plural),
            &method.as_str().to_lowercase(),
        ));
    }
    let opts = crate::podlog::LogOptions::from_query(q)?;
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let started = crate::podlog::start(&state.api, &t.served, &ns, &name, &opts)?;
    let text_plain = |body: Body| {
        let mut r = Response::new(body);
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain"),
        );
        r
    };
    let Some((container, run, lines)) = started else {
        return Ok(text_plain(full(Bytes::new())));
    };
    let mut first = crate::podlog::render(&lines, &opts, jiff::Timestamp::now()).into_bytes();
    if let Some(l) = opts.limit_bytes.and_then(|l| usize::try_from(l).ok()) {
        first.truncate(l);
    }
    if !opts.follow || run.ended.is_some() {
        return Ok(text_plain(full(Bytes::from(first))));
    }
    let limit_left = opts.limit_bytes.map(|l| l - first.len() as i64);
    if limit_left.is_some_and(|l| l <= 0) {
        return Ok(text_plain(full(Bytes::from(first))));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let _ = tx.send(Bytes::from(first)).await;
    let follow = crate::podlog::Follow {
        api: state.api.clone(),
        served: t.served.clone(),
        ns,
        name,
        container,
        run,
        sent: lines.len(),
        opts: crate::podlog::LogOptions {
            limit_bytes: limit_left,
            ..opts
        },
    };
    tokio::spawn(crate::podlog::follow(follow, tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Ok(text_plain(StreamBody::new(stream).boxed_unsync()))
}

fn include_of(q: &HashMap<String, String>) -> &str {
    q.get("includeObject")
        .map(String::as_str)
        .unwrap_or("Metadata")
}

fn list_opts(q: &HashMap<String, String>) -> Result<ListOpts, ApiError> {
    let label = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let field = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    Ok(ListOpts {
        label,
        field,
        limit: q.get("limit").and_then(|v| v.parse().ok()),
        continue_token: q.get("continue").cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").cloned(),
    })
}

/// DeleteOptions from the body when there is one (then the query is ignored, as the real server
/// does), else from the query.
fn delete_opts(q: &HashMap<String, String>, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    if body.iter().any(|b| !b.is_ascii_whitespace()) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))?;
        return Ok(DeleteOpts {
            propagation: v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
            orphan_dependents: v.get("orphanDependents").and_then(Value::as_bool),
            precondition_uid: v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_rv: v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All")),
            grace_period: v.get("gracePeriodSeconds").and_then(Value::as_i64),
        });
    }
    Ok(DeleteOpts {
        propagation: q.get("propagationPolicy").cloned(),
        orphan_dependents: q.get("orphanDependents").map(|v| v == "true"),
        precondition_uid: None,
        precondition_rv: None,
        dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
        grace_period: q.get("gracePeriodSeconds").and_then(|v| v.parse().ok()),
    })
}

/// `{"kind":"<Kind>List","apiVersion":…,"metadata":…,"items":[…]}` assembled from stored JSON.
fn list_bytes(api: &Api, s: &Served, meta: &Value, items: &[Arc<crate::store::Stored>]) -> Bytes {
    let info = s.info();
    let mut out = Vec::with_capacity(64 + items.iter().map(|i| i.json.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(
        serde_json::to_string(&info.list_kind())
            .unwrap_or_default()
            .as_bytes(),
    );
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(
        serde_json::to_string(&info.api_version())
            .unwrap_or_default()
            .as_bytes(),
    );
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(serde_json::to_string(meta).unwrap_or_default().as_bytes());
    out.extend_from_slice(b",\"items\":[");
    for (i, st) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if s.is_custom() {
            out.extend_from_slice(&api.render_stored(s, st));
        } else {
            out.extend_from_slice(&api.render_item(s, st));
        }
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}
