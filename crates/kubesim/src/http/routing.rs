//! Routing of Kubernetes API paths to a resource target, and the verb a request names.

use super::responses::{error_response, page_not_found, value_response};
use super::*;

/// A request for a resource: which, where, what.
pub(super) struct Target {
    pub(super) served: Arc<Served>,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
}

pub(super) enum Route {
    Response(Response<Body>),
    Resource(Target),
}

pub(super) fn route(state: &ServerState, req: &Request<Incoming>, path: &str) -> Route {
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

pub(super) fn resource_route(
    reg: &crate::api::Registry,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Route {
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

pub(super) fn verb_of(method: &Method, has_name: bool, watch: bool) -> &'static str {
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
