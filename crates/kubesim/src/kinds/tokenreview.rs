//! authentication.k8s.io/v1 TokenReview (create-only, never stored): "who is this bearer token?",
//! answered from kubesim's token table.
//!
//! The recordings have no TokenReview; this follows the Kubernetes sources:
//! `pkg/registry/authentication/tokenreview/storage.go` (400 `token is required for TokenReview in
//! authentication` for an empty token; the token is authenticated as if it were a request's bearer
//! token; `status.authenticated`, `status.user` and `status.audiences` filled only on success),
//! `staging/src/k8s.io/apiserver/pkg/authentication/authenticator/audiences.go` (static tokens are
//! audience-agnostic: they answer the requested audiences that the server accepts, and nothing when
//! none is accepted) and `pkg/apis/authentication/v1` (`user` is a struct, so it is always present,
//! `{}` when unauthenticated; `authenticated`, `audiences` and `error` are omitempty). An unknown
//! opaque token is not an error: every token authenticator answers "not mine" without one, so the
//! review says `authenticated` false (omitted) with no `error`.
//!
//! Groups follow the server's group adders: every authenticated user is in `system:authenticated`,
//! and a service account `system:serviceaccount:<ns>:<name>` also in `system:serviceaccounts` and
//! `system:serviceaccounts:<ns>`. kubesim users carry no UID, so a stable one is derived from the
//! user name (the same user always gets the same UID, like a token file's UID column).

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use super::ssar::{review_info, review_metadata};
use super::{ResourceInfo, Strategy};
use crate::auth::Users;
use crate::errors::ApiError;

pub const GROUP: &str = "authentication.k8s.io";

/// The API audience the server accepts (kube-apiserver's `--api-audiences` defaults to the service
/// account issuer; this is the usual in-cluster issuer).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

pub struct TokenReviewStrategy {
    info: ResourceInfo,
}

impl Default for TokenReviewStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenReviewStrategy {
    pub fn new() -> Self {
        Self {
            info: review_info(GROUP, "TokenReview"),
        }
    }
}

impl Strategy for TokenReviewStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }
}

/// The groups the server's group adders give an authenticated user.
pub fn groups_of(username: &str) -> Vec<String> {
    let mut groups = Vec::new();
    if let Some(rest) = username.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups.push("system:authenticated".to_string());
    groups
}

/// A stable UUID-shaped UID for a user name.
pub fn uid_of(username: &str) -> String {
    let half = |salt: &str| {
        let mut h = DefaultHasher::new();
        (salt, username).hash(&mut h);
        h.finish()
    };
    let (a, b) = (half("kubesim-user-a"), half("kubesim-user-b"));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

fn strings_at(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Answers a TokenReview POST (201): the request's spec with `status` filled in.
pub fn review(body: &Value, users: &Users) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let requested = strings_at(&spec, "audiences");
    // The audiences the token is good for: the requested ones the server accepts.
    let audiences: Vec<String> = if requested.is_empty() {
        vec![API_AUDIENCE.to_string()]
    } else {
        requested
            .into_iter()
            .filter(|a| a == API_AUDIENCE)
            .collect()
    };
    let mut status = Map::new();
    match users.authenticate(token) {
        Some(user) if !audiences.is_empty() => {
            status.insert("authenticated".into(), json!(true));
            status.insert(
                "user".into(),
                json!({
                    "username": user.name,
                    "uid": uid_of(&user.name),
                    "groups": groups_of(&user.name),
                }),
            );
            status.insert("audiences".into(), json!(audiences));
        }
        _ => {
            status.insert("user".into(), json!({}));
        }
    }
    let mut out_spec = Map::new();
    out_spec.insert("token".into(), json!(token));
    if let Some(a) = spec
        .get("audiences")
        .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
    {
        out_spec.insert("audiences".into(), a.clone());
    }
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": review_metadata(body),
        "spec": out_spec,
        "status": status,
    }))
}

/// authentication.k8s.io/v1 SelfSubjectReview ("who am I?", create-only, never stored), open to
/// every authenticated user (`system:basic-user`). The recordings have none; this follows
/// `pkg/registry/authentication/selfsubjectreview/rest.go`: the answer is a new object with only
/// `metadata.creationTimestamp` (now) and `status.userInfo` (username, uid, groups; kubesim users
/// carry no `extra`), whatever the request carried.
pub struct SelfSubjectReviewStrategy {
    info: ResourceInfo,
}

impl Default for SelfSubjectReviewStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl SelfSubjectReviewStrategy {
    pub fn new() -> Self {
        Self {
            info: review_info(GROUP, "SelfSubjectReview"),
        }
    }
}

impl Strategy for SelfSubjectReviewStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }
}

/// Answers a SelfSubjectReview POST by `username` (201).
pub fn self_review(username: &str) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": {"creationTimestamp": crate::time::now_string()},
        "status": {"userInfo": {
            "username": username,
            "uid": uid_of(username),
            "groups": groups_of(username),
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::User;
    use crate::kinds::ssar::RuleSet;

    fn users() -> Users {
        let u = Users::new();
        u.add("good", User::admin("alice"));
        u.add(
            "sa",
            User {
                name: "system:serviceaccount:team-a:runner".into(),
                rules: RuleSet::none(),
            },
        );
        u
    }

    fn tr(spec: Value) -> Value {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})
    }

    #[test]
    fn a_known_token_names_its_user() {
        let out = review(&tr(json!({"token": "good"})), &users()).unwrap();
        assert_eq!(out["kind"], "TokenReview");
        assert_eq!(out["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(out["status"]["authenticated"], true);
        assert_eq!(out["status"]["user"]["username"], "alice");
        assert_eq!(
            out["status"]["user"]["groups"],
            json!(["system:authenticated"])
        );
        assert_eq!(out["status"]["audiences"], json!([API_AUDIENCE]));
        let uid = out["status"]["user"]["uid"].as_str().unwrap();
        assert_eq!(uid.len(), 36);
        assert_eq!(uid, uid_of("alice"), "stable");
        assert_ne!(uid, uid_of("bob"));
        assert_eq!(out["spec"], json!({"token": "good"}));

        let sa = review(&tr(json!({"token": "sa"})), &users()).unwrap();
        assert_eq!(
            sa["status"]["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:team-a",
                "system:authenticated"
            ])
        );
    }

    #[test]
    fn an_unknown_token_is_unauthenticated_not_an_error() {
        let out = review(&tr(json!({"token": "nope"})), &users()).unwrap();
        assert_eq!(out["status"], json!({"user": {}}));
    }

    #[test]
    fn audiences_the_server_does_not_accept_do_not_authenticate() {
        let ok = review(
            &tr(json!({"token": "good", "audiences": [API_AUDIENCE, "other"]})),
            &users(),
        )
        .unwrap();
        assert_eq!(ok["status"]["audiences"], json!([API_AUDIENCE]));
        let wrong = review(
            &tr(json!({"token": "good", "audiences": ["other"]})),
            &users(),
        )
        .unwrap();
        assert_eq!(wrong["status"], json!({"user": {}}));
        assert_eq!(wrong["spec"]["audiences"], json!(["other"]));
    }

    #[test]
    fn an_empty_token_is_a_bad_request() {
        for body in [tr(json!({})), tr(json!({"token": ""})), json!({})] {
            let e = review(&body, &users()).unwrap_err();
            assert_eq!(e.code, 400);
            assert_eq!(e.reason.as_deref(), Some("BadRequest"));
            assert_eq!(
                e.message,
                "token is required for TokenReview in authentication"
            );
        }
    }
}
