//! The admin endpoint: plain HTTP on 127.0.0.1 (separate from the API port so faults such as a blackhole
//! never lock the operator out). JSON in, JSON out.
//!
//! | method | path | effect |
//! |---|---|---|
//! | GET | `/faults` | current `FaultConfig` |
//! | PUT | `/faults` | replace it (`{"latencyMs":50,"errorRate":0.2,"throttleRate":0,"retryAfterSeconds":1,"throttleCreates":0,"throttleCreatesOf":"","blackhole":false,"refuse":false}`) |
//! | POST | `/faults/clear` | clear every fault |
//! | POST | `/drop-watches` | end every open watch |
//! | POST | `/restart` | end every connection and watch; data is kept |
//! | POST | `/compact` | forget the watch history: older resourceVersions answer 410 |
//! | POST | `/tokens` | `{"token":"t","user":"u","rules":{"allow":[…],"deny":[…]}}` (rules default: everything) |
//! | DELETE | `/tokens/<token>` | revoke a token |
//! | GET | `/stats` | `{"requests":…,"objects":…,"resourceVersion":…}` |
//! | GET | `/runs` | pod starts per origin UID and each start: `{"counts":{uid:n},"starts":[…]}` |
//! | GET | `/creates?resource=jobs` | every object ever created (of that resource): `{"items":[…]}` |
//! | POST | `/record/start` | start recording requests (see `crate::record`) |
//! | GET | `/record` | the requests recorded so far: `{"items":[…]}` |
//! | POST | `/record/stop` | stop recording; answers what was recorded |

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::User;
use crate::faults::FaultConfig;
use crate::http::ServerState;
use crate::kinds::ssar::RuleSet;

pub async fn serve(listener: TcpListener, state: Arc<ServerState>, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}

fn reply(code: StatusCode, v: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(
        serde_json::to_vec(&v).unwrap_or_default(),
    )));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

async fn handle(state: &ServerState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resource = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("resource="))
            .map(str::to_string)
    });
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
    };
    let faults = &state.faults;
    match (method, path.as_str()) {
        (Method::GET, "/faults") => reply(StatusCode::OK, json!(faults.get())),
        (Method::PUT, "/faults") | (Method::POST, "/faults") => {
            match serde_json::from_slice::<FaultConfig>(&body) {
                Ok(cfg) => {
                    faults.set(cfg.clone());
                    reply(StatusCode::OK, json!(cfg))
                }
                Err(e) => reply(
                    StatusCode::BAD_REQUEST,
                    json!({"error": format!("invalid fault configuration: {e}")}),
                ),
            }
        }
        (Method::POST, "/faults/clear") => {
            faults.clear();
            reply(StatusCode::OK, json!(faults.get()))
        }
        (Method::POST, "/drop-watches") => {
            state.api.store.drop_watches();
            reply(StatusCode::OK, json!({"dropped": true}))
        }
        (Method::POST, "/restart") => {
            state.api.store.drop_watches();
            faults.restart_connections();
            reply(StatusCode::OK, json!({"restarted": true}))
        }
        (Method::POST, "/compact") => {
            state.api.store.compact();
            reply(
                StatusCode::OK,
                json!({"compactedAt": state.api.store.current_rv().to_string()}),
            )
        }
        (Method::POST, "/tokens") => {
            let v: Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
            };
            let (Some(token), Some(user)) = (
                v.get("token").and_then(Value::as_str),
                v.get("user").and_then(Value::as_str),
            ) else {
                return reply(
                    StatusCode::BAD_REQUEST,
                    json!({"error": "token and user are required"}),
                );
            };
            let rules = match v.get("rules") {
                None => RuleSet::allow_all(),
                Some(r) => match serde_json::from_value::<RuleSet>(r.clone()) {
                    Ok(r) => r,
                    Err(e) => {
                        return reply(
                            StatusCode::BAD_REQUEST,
                            json!({"error": format!("invalid rules: {e}")}),
                        );
                    }
                },
            };
            state.users.add(
                token,
                User {
                    name: user.to_string(),
                    rules,
                },
            );
            reply(StatusCode::OK, json!({"token": "<set>", "user": user}))
        }
        (Method::DELETE, p) if p.starts_with("/tokens/") => {
            let removed = state.users.revoke(&p["/tokens/".len()..]);
            reply(
                if removed {
                    StatusCode::OK
                } else {
                    StatusCode::NOT_FOUND
                },
                json!({"revoked": removed}),
            )
        }
        (Method::GET, "/runs") => reply(
            StatusCode::OK,
            json!({
                "counts": state.api.instruments.pod_starts(),
                "starts": state.api.instruments.pod_start_details(),
            }),
        ),
        (Method::GET, "/creates") => reply(
            StatusCode::OK,
            json!({"items": state.api.instruments.creates(resource.as_deref())}),
        ),
        (Method::POST, "/record/start") => {
            state.recorded.start();
            reply(StatusCode::OK, json!({"recording": true}))
        }
        (Method::GET, "/record") => reply(
            StatusCode::OK,
            json!({"recording": state.recorded.is_on(), "items": state.recorded.snapshot()}),
        ),
        (Method::POST, "/record/stop") => reply(
            StatusCode::OK,
            json!({"recording": false, "items": state.recorded.stop()}),
        ),
        (Method::GET, "/stats") => reply(
            StatusCode::OK,
            json!({
                "requests": state.requests.load(Ordering::Relaxed),
                "objects": state.api.store.count(),
                "resourceVersion": state.api.store.current_rv().to_string(),
            }),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({"error": format!("no admin route {path}")}),
        ),
    }
}
