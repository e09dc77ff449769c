//! The verbs on a resource: body reading, authorized requests, pod logs, and list/delete options.

use super::responses::{error_response, full, json_response, value_response, with_warnings};
use super::routing::{Target, verb_of};
use super::*;

pub(super) async fn read_body(
    req: Request<Incoming>,
) -> Result<(http::request::Parts, Bytes), ApiError> {
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

pub(super) async fn resource_request(
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
pub(super) async fn authorized_request(
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
                let watch = crate::api::watch::start(state.api.clone(), s.clone(), opts)?;
                let stream = futures::stream::unfold(watch, |mut w| async move {
                    w.next_chunk()
                        .await
                        .map(|b| (Ok::<_, Infallible>(Frame::data(b)), w))
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
pub(super) async fn pod_log(
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

pub(super) fn include_of(q: &HashMap<String, String>) -> &str {
    q.get("includeObject")
        .map(String::as_str)
        .unwrap_or("Metadata")
}

pub(super) fn list_opts(q: &HashMap<String, String>) -> Result<ListOpts, ApiError> {
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
pub(super) fn delete_opts(
    q: &HashMap<String, String>,
    body: &[u8],
) -> Result<DeleteOpts, ApiError> {
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
pub(super) fn list_bytes(
    api: &Api,
    s: &Served,
    meta: &Value,
    items: &[Arc<crate::store::Stored>],
) -> Bytes {
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
