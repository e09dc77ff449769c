//! core/v1 ServiceAccounts and their `token` subresource (authentication.k8s.io/v1 TokenRequest).
//!
//! The recordings hold no ServiceAccount or TokenRequest exchange beyond discovery (which lists
//! `serviceaccounts` with the standard verbs, short name `sa`, and `serviceaccounts/token` with
//! `create` only, kind TokenRequest); the rest follows the Kubernetes sources:
//! - `pkg/apis/core/validation` `ValidateServiceAccount`: ObjectMeta with the DNS-subdomain name rule
//!   and nothing else (no spec); no defaulting is registered for v1 ServiceAccounts.
//! - `pkg/apis/authentication/v1` `SetDefaults_TokenRequestSpec`: `expirationSeconds` 3600 when unset.
//! - `pkg/apis/authentication/validation` `ValidateTokenRequest`: at least 600 seconds ("may not
//!   specify a duration less than 10 minutes"), at most 2^32.
//! - `pkg/registry/core/serviceaccount/storage/token.go`: the body's `metadata.name`, when set, must
//!   equal the ServiceAccount's; the ServiceAccount is looked up first (its ordinary 404 when
//!   missing); empty `audiences` become the server's API audiences; the answer (201) is the request
//!   with `status.token` and `status.expirationTimestamp` (now + expirationSeconds), never stored.
//!
//! Not simulated: bound object references (a token bound to a Pod or Secret), and a token outliving
//! its ServiceAccount (the real authenticator rejects it once the account is deleted).

use serde_json::{Map, Value, json};

use super::common;
use super::{ResourceInfo, Strategy};
use crate::auth::Users;
use crate::errors::{ApiError, BadValue, FieldError};

/// `authentication.k8s.io`, the group of TokenRequest.
const AUTH_GROUP: &str = "authentication.k8s.io";
/// Default lifetime of a requested token (`SetDefaults_TokenRequestSpec`).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a TokenRequest may ask for.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

pub struct ServiceAccountStrategy {
    info: ResourceInfo,
}

impl Default for ServiceAccountStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl ServiceAccountStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                plural: "serviceaccounts".into(),
                singular: "serviceaccount".into(),
                namespaced: true,
                short_names: vec!["sa".into()],
                categories: Vec::new(),
                verbs: common::standard_verbs(),
                status_subresource: false,
                storage_version_hash: Some("pbx9ZvyFpBE=".into()),
            },
        }
    }
}

impl Strategy for ServiceAccountStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn extra_subresources(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[("token", &["create"])]
    }

    fn subresource_kind(&self, sub: &str) -> Option<(&'static str, &'static str, &'static str)> {
        (sub == "token").then_some((AUTH_GROUP, "v1", "TokenRequest"))
    }
}

/// Whether a request is a TokenRequest (`POST .../serviceaccounts/<name>/token`).
pub fn is_token_request(group: &str, plural: &str, sub: Option<&str>) -> bool {
    group.is_empty() && plural == "serviceaccounts" && sub == Some("token")
}

fn invalid(name: &str, errs: &[FieldError]) -> ApiError {
    ApiError::invalid(AUTH_GROUP, "TokenRequest", name, errs)
}

/// Answers a TokenRequest for ServiceAccount `ns/name` (the caller checked that it exists): issues a
/// bound token for `system:serviceaccount:<ns>:<name>` in `users` and returns the TokenRequest the
/// server answers with (201).
pub fn token_request(ns: &str, name: &str, body: &Value, users: &Users) -> Result<Value, ApiError> {
    if let Some(n) = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && *n != name)
    {
        return Err(invalid(
            name,
            &[FieldError::invalid(
                "metadata.name",
                BadValue::Str(n.to_string()),
                "must match the service account name if specified",
            )],
        ));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64",
                crate::gojson::json_kind(v)
            ))
        })?,
    };
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            "",
            &[FieldError::invalid(
                "spec.expirationSeconds",
                BadValue::Int(seconds),
                "may not specify a duration less than 10 minutes",
            )],
        ));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            "",
            &[FieldError::invalid(
                "spec.expirationSeconds",
                BadValue::Int(seconds),
                "may not specify a duration larger than 2^32 seconds",
            )],
        ));
    }
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([super::tokenreview::API_AUDIENCE]),
    };
    let (token, expires) = users.issue(&format!("system:serviceaccount:{ns}:{name}"), seconds);
    let mut out_spec = Map::new();
    out_spec.insert("audiences".into(), audiences);
    out_spec.insert("expirationSeconds".into(), json!(seconds));
    out_spec.insert(
        "boundObjectRef".into(),
        spec.get("boundObjectRef").cloned().unwrap_or(Value::Null),
    );
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": format!("{AUTH_GROUP}/v1"),
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": out_spec,
        "status": {"token": token, "expirationTimestamp": crate::time::format(expires)},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::ssar::{AccessAttributes, Rule, RuleSet};

    fn ask(users: &Users, body: Value) -> Result<Value, ApiError> {
        token_request("courier-system", "courier-dispatcher", &body, users)
    }

    #[test]
    fn defaults_to_an_hour_and_refuses_less_than_ten_minutes() {
        let users = Users::new();
        let out = ask(&users, json!({"spec": {}})).unwrap();
        assert_eq!(out["kind"], "TokenRequest");
        assert_eq!(out["spec"]["expirationSeconds"], 3600);
        assert_eq!(
            out["spec"]["audiences"],
            json!([super::super::tokenreview::API_AUDIENCE])
        );
        assert_eq!(out["metadata"]["name"], "courier-dispatcher");
        let e = ask(&users, json!({"spec": {"expirationSeconds": 599}})).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        );
        assert!(ask(&users, json!({"spec": {"expirationSeconds": 600}})).is_ok());
        let e = ask(
            &users,
            json!({"spec": {"expirationSeconds": (1i64 << 32) + 1}}),
        )
        .unwrap_err();
        assert!(e.message.contains("larger than 2^32"), "{}", e.message);
        let e = ask(&users, json!({"metadata": {"name": "other"}})).unwrap_err();
        assert!(
            e.message
                .contains("must match the service account name if specified"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_token_is_the_service_account_until_it_expires() {
        let users = Users::new();
        let user = "system:serviceaccount:courier-system:courier-dispatcher";
        users.grant(
            user,
            RuleSet {
                allow: vec![Rule::new(&["get"], &["batch"], &["jobs"])],
                deny: Vec::new(),
            },
        );
        let out = ask(&users, json!({"spec": {"expirationSeconds": 900}})).unwrap();
        let token = out["status"]["token"].as_str().unwrap().to_string();
        let expires =
            crate::time::parse(out["status"]["expirationTimestamp"].as_str().unwrap()).unwrap();
        let left = expires.duration_since(users.now()).as_secs();
        assert!((890..=900).contains(&left), "{left}");
        let u = users.authenticate(&token).expect("authenticates");
        assert_eq!(u.name, user);
        let get = AccessAttributes {
            verb: "get".into(),
            group: "batch".into(),
            resource: "jobs".into(),
            ..Default::default()
        };
        assert!(
            u.decide(&get).allowed(),
            "the rights granted to the account"
        );
        users.advance_clock(899);
        assert!(users.authenticate(&token).is_some());
        users.advance_clock(1);
        assert!(users.authenticate(&token).is_none(), "expired");
    }
}
