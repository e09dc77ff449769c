//! The web view's HTTP server (hyper, like `http.rs`): routing, access, fragments and JSON.
//!
//! | path | what |
//! |---|---|
//! | `/clusters`, `/jobs`, `/jobs/<ns>/<name>` | the pages (`X-Courier-Fragment: live` answers only their live part) |
//! | `/api/clusters`, `/api/jobs`, `/api/jobs/<ns>/<name>` | the same view models as JSON |
//! | `/assets/app.css`, `/assets/app.js` | embedded assets |
//! | `/login`, `/logout` | sign-in with a bearer token (only when access is reviewed) |
//!
//! Read-only: every other method than GET/HEAD (and the sign-in POSTs) is refused. At most
//! [`MAX_IN_FLIGHT`] requests are served at once (the rest get 503), so memory stays bounded
//! whatever the number of viewers.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use jiff::Timestamp;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::auth::{Access, COOKIE, Caller, Reviewer, token_of};
use super::html::{self, Chrome, Nav};
use super::model::{self, JobFilter, form_decode, query_pairs};
use crate::origin::Ctx;
use crate::queue::ObjectKey;
use crate::snapshot;

/// Requests served at once.
pub const MAX_IN_FLIGHT: usize = 16;
/// The largest sign-in form accepted.
const MAX_FORM: usize = 16 * 1024;
/// The header `app.js` sends to get only the live part of a page.
pub const FRAGMENT_HEADER: &str = "x-courier-fragment";

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");

type Resp = Response<Full<Bytes>>;

struct Ui {
    shared: Arc<Ctx>,
    /// `None`: bound to loopback, no access checks.
    reviewer: Option<Reviewer>,
    slots: Semaphore,
}

/// Who is asking.
enum Who {
    /// Loopback binding: everyone may see everything.
    Local,
    Caller(Caller),
}

impl Who {
    fn name(&self) -> Option<&str> {
        match self {
            Who::Local => None,
            Who::Caller(c) => Some(&c.username),
        }
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

const HTML: &str = "text/html; charset=utf-8";

fn html_resp(status: StatusCode, body: String) -> Resp {
    respond(status, HTML, body)
}

fn json_resp(status: StatusCode, v: &impl Serialize) -> Resp {
    match serde_json::to_vec(v) {
        Ok(b) => respond(status, "application/json", b),
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("cannot encode: {e}\n"),
        ),
    }
}

fn redirect(to: &str) -> Resp {
    let mut r = respond(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// What kind of answer a request wants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Page,
    Fragment,
    Json,
}

impl Ui {
    fn chrome<'a>(&self, title: &'a str, nav: Nav, who: &'a Who) -> Chrome<'a> {
        Chrome {
            title,
            nav,
            user: who.name(),
        }
    }

    fn error(&self, want: Want, who: &Who, status: StatusCode, message: &str) -> Resp {
        match want {
            Want::Json => json_resp(status, &serde_json::json!({"error": message})),
            Want::Fragment => html_resp(status, html::esc(message)),
            Want::Page => {
                let heading = status.canonical_reason().unwrap_or("Error");
                html_resp(
                    status,
                    html::message_page(
                        &self.chrome(heading, Nav::None, who),
                        heading,
                        &html::esc(message),
                    ),
                )
            }
        }
    }

    /// The caller, or the answer to send instead (sign-in page, 401, 503).
    async fn identify(&self, req: &Request<Incoming>, want: Want) -> Result<Who, Resp> {
        let Some(reviewer) = &self.reviewer else {
            return Ok(Who::Local);
        };
        let unauthorized = |problem: Option<&str>| {
            let mut r = match want {
                Want::Page => html_resp(StatusCode::UNAUTHORIZED, html::login_page(problem)),
                _ => json_resp(
                    StatusCode::UNAUTHORIZED,
                    &serde_json::json!({"error": problem.unwrap_or("a bearer token is required")}),
                ),
            };
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"courier\""),
            );
            r
        };
        let Some(token) = token_of(req.headers()) else {
            return Err(unauthorized(None));
        };
        match reviewer.authenticate(&token).await {
            Ok(Some(c)) => Ok(Who::Caller(c)),
            Ok(None) => Err(unauthorized(Some(
                "The management cluster does not accept this token.",
            ))),
            Err(e) => {
                warn!(error = %e, "web view: cannot authenticate a request");
                Err(self.error(
                    want,
                    &Who::Local,
                    StatusCode::SERVICE_UNAVAILABLE,
                    &e.to_string(),
                ))
            }
        }
    }

    /// Which Jobs `who` may see, given the namespaces that have any.
    async fn job_access(&self, who: &Who, namespaces: BTreeSet<String>) -> Result<Access, String> {
        match (who, &self.reviewer) {
            (Who::Caller(c), Some(r)) => {
                r.job_access(c, namespaces).await.map_err(|e| e.to_string())
            }
            _ => Ok(Access::All),
        }
    }

    async fn may_list_clusters(&self, who: &Who) -> Result<bool, String> {
        match (who, &self.reviewer) {
            (Who::Caller(c), Some(r)) => r.may_list_clusters(c).await.map_err(|e| e.to_string()),
            _ => Ok(true),
        }
    }

    async fn clusters(&self, want: Want, who: &Who) -> Resp {
        match self.may_list_clusters(who).await {
            Ok(true) => {}
            Ok(false) => {
                return self.error(
                    want,
                    who,
                    StatusCode::FORBIDDEN,
                    "You may not list workerclusters (courier.dev) in the management cluster.",
                );
            }
            Err(e) => return self.error(want, who, StatusCode::SERVICE_UNAVAILABLE, &e),
        }
        let v = model::clusters_view(&snapshot::clusters(&self.shared), Timestamp::now());
        match want {
            Want::Json => json_resp(StatusCode::OK, &v),
            Want::Fragment => html_resp(StatusCode::OK, html::clusters_live(&v)),
            Want::Page => html_resp(
                StatusCode::OK,
                html::page(
                    &self.chrome("Clusters", Nav::Clusters, who),
                    &html::clusters_main(&v),
                ),
            ),
        }
    }

    async fn jobs(&self, want: Want, who: &Who, query: &str) -> Resp {
        let all = snapshot::jobs(&self.shared);
        let namespaces: BTreeSet<String> = all.iter().map(|j| j.namespace.clone()).collect();
        let access = match self.job_access(who, namespaces).await {
            Ok(a) => a,
            Err(e) => return self.error(want, who, StatusCode::SERVICE_UNAVAILABLE, &e),
        };
        let visible: Vec<_> = all
            .into_iter()
            .filter(|j| access.allows(&j.namespace))
            .collect();
        let clusters: Vec<String> = match self.may_list_clusters(who).await {
            Ok(true) => self
                .shared
                .registry
                .all()
                .iter()
                .map(|c| c.name.clone())
                .collect(),
            _ => Vec::new(),
        };
        let filter = JobFilter::from_query(query);
        let v = model::jobs_view(&visible, &clusters, &filter, Timestamp::now());
        match want {
            Want::Json => json_resp(StatusCode::OK, &v),
            Want::Fragment => html_resp(StatusCode::OK, html::jobs_live(&v)),
            Want::Page => html_resp(
                StatusCode::OK,
                html::page(&self.chrome("Jobs", Nav::Jobs, who), &html::jobs_main(&v)),
            ),
        }
    }

    async fn job(&self, want: Want, who: &Who, namespace: &str, name: &str) -> Resp {
        let not_found = format!("No Job {namespace}/{name} that Courier manages and you may see.");
        match self
            .job_access(who, BTreeSet::from([namespace.to_string()]))
            .await
        {
            Ok(a) if a.allows(namespace) => {}
            Ok(_) => return self.error(want, who, StatusCode::NOT_FOUND, &not_found),
            Err(e) => return self.error(want, who, StatusCode::SERVICE_UNAVAILABLE, &e),
        }
        let Some(e) = snapshot::explain(&self.shared, &ObjectKey::new(namespace, name)) else {
            return self.error(want, who, StatusCode::NOT_FOUND, &not_found);
        };
        let v = model::job_view(&e, &snapshot::clusters(&self.shared), Timestamp::now());
        let title = format!("{namespace}/{name}");
        match want {
            Want::Json => json_resp(StatusCode::OK, &v),
            Want::Fragment => html_resp(StatusCode::OK, html::job_live(&v)),
            Want::Page => html_resp(
                StatusCode::OK,
                html::page(&self.chrome(&title, Nav::Jobs, who), &html::job_main(&v)),
            ),
        }
    }

    async fn login(&self, req: Request<Incoming>) -> Resp {
        let Some(reviewer) = &self.reviewer else {
            return redirect("/clusters");
        };
        if req.method() == Method::GET {
            return html_resp(StatusCode::OK, html::login_page(None));
        }
        if !same_origin(req.headers()) {
            return html_resp(
                StatusCode::FORBIDDEN,
                html::login_page(Some("Sign-in must come from this page.")),
            );
        }
        let body = match Limited::new(req.into_body(), MAX_FORM).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return html_resp(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    html::login_page(Some("The form is too large.")),
                );
            }
        };
        let form = String::from_utf8_lossy(&body);
        let token = query_pairs(&form)
            .into_iter()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        // A cookie value cannot hold separators or spaces; no real token has them.
        if token.is_empty()
            || !token
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b';' && b != b',')
        {
            return html_resp(
                StatusCode::UNAUTHORIZED,
                html::login_page(Some("Paste a bearer token.")),
            );
        }
        match reviewer.authenticate(&token).await {
            Ok(Some(c)) => {
                info!(user = %c.username, "web view: signed in");
                let mut r = redirect("/jobs");
                let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            }
            Ok(None) => html_resp(
                StatusCode::UNAUTHORIZED,
                html::login_page(Some("The management cluster does not accept this token.")),
            ),
            Err(e) => html_resp(
                StatusCode::SERVICE_UNAVAILABLE,
                html::login_page(Some(&e.to_string())),
            ),
        }
    }

    async fn handle(&self, req: Request<Incoming>) -> Resp {
        let Ok(_slot) = self.slots.try_acquire() else {
            return respond(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                "busy, try again\n",
            );
        };
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let method = req.method().clone();
        match (&method, path.as_str()) {
            (&Method::GET | &Method::POST, "/login") => return self.login(req).await,
            (&Method::POST, "/logout") => {
                let mut r = redirect(if self.reviewer.is_some() {
                    "/login"
                } else {
                    "/clusters"
                });
                r.headers_mut().insert(
                    header::SET_COOKIE,
                    HeaderValue::from_static(
                        "courier_token=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                    ),
                );
                return r;
            }
            (&Method::GET | &Method::HEAD, _) => {}
            _ => {
                return respond(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "text/plain; charset=utf-8",
                    "read-only: method not allowed\n",
                );
            }
        }
        match path.as_str() {
            "/" => return redirect("/jobs"),
            "/assets/app.css" => return asset("text/css; charset=utf-8", CSS),
            "/assets/app.js" => return asset("text/javascript; charset=utf-8", JS),
            _ => {}
        }
        let (want, route) = match path.strip_prefix("/api") {
            Some(rest) => (Want::Json, rest.to_string()),
            None if req.headers().get(FRAGMENT_HEADER).is_some() => (Want::Fragment, path.clone()),
            None => (Want::Page, path.clone()),
        };
        let segments: Vec<&str> = route.trim_matches('/').split('/').collect();
        let known = matches!(
            segments.as_slice(),
            ["clusters"] | ["jobs"] | ["jobs", _, _]
        );
        if !known {
            return self.error(want, &Who::Local, StatusCode::NOT_FOUND, "No such page.");
        }
        let who = match self.identify(&req, want).await {
            Ok(w) => w,
            Err(r) => return r,
        };
        match segments.as_slice() {
            ["clusters"] => self.clusters(want, &who).await,
            ["jobs"] => self.jobs(want, &who, &query).await,
            ["jobs", ns, name] => match (form_decode(ns), form_decode(name)) {
                (Some(ns), Some(name)) => self.job(want, &who, &ns, &name).await,
                _ => self.error(want, &who, StatusCode::NOT_FOUND, "No such Job."),
            },
            _ => self.error(want, &who, StatusCode::NOT_FOUND, "No such page."),
        }
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Resp {
    let mut r = respond(StatusCode::OK, content_type, body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// A form POST came from a page of this server: its `Origin` (when the browser sends one) names
/// the host the request was sent to.
fn same_origin(h: &http::HeaderMap) -> bool {
    let Some(origin) = h.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    !host.is_empty() && origin_host == host
}

/// Serves the web view on `listener` until the controller stops. A loopback address serves
/// everyone everything; any other address requires a bearer token (see `auth.rs`).
pub async fn serve(listener: TcpListener, shared: Arc<Ctx>) {
    let local = listener
        .local_addr()
        .map(|a| a.ip().is_loopback())
        .unwrap_or(false);
    let reviewer =
        (!local).then(|| Reviewer::new(shared.mgmt.clone(), shared.tuning.request_timeout));
    let ui = Arc::new(Ui {
        shared: shared.clone(),
        reviewer,
        slots: Semaphore::new(MAX_IN_FLIGHT),
    });
    let token = shared.token.clone();
    crate::http::accept_loop(listener, token, "web view", move |req| {
        let ui = ui.clone();
        async move { ui.handle(req).await }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_posts_must_come_from_this_origin() {
        let mut h = http::HeaderMap::new();
        h.insert(header::HOST, "courier.example:8081".parse().unwrap());
        assert!(same_origin(&h), "no Origin header: a non-browser client");
        h.insert(
            header::ORIGIN,
            "http://courier.example:8081".parse().unwrap(),
        );
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_origin(&h));
    }
}
