//! authorization.k8s.io/v1 SubjectAccessReview (create-only, never stored): "may this user do
//! that?", decided by the same rules kubesim authorizes that user's requests with, and the one
//! place the never-stored review kinds are answered from.
//!
//! The recordings have no SubjectAccessReview; this follows the Kubernetes sources:
//! `pkg/registry/authorization/subjectaccessreview/rest.go` (validate, authorize the attributes of
//! `spec.user`, fill `status.allowed/denied/reason`) and `pkg/apis/authorization/validation`
//! (`ValidateSubjectAccessReviewSpec`: exactly one of resource and non-resource attributes, and
//! `at least one of user or group must be specified`; metadata must be empty). The error is
//! qualified with the group only, like SelfSubjectAccessReview's.
//!
//! kubesim's rules belong to tokens; a review names a user, so the user's rights are the union of
//! the rules of its tokens (`Users::rules_of`). A user no token has gets no opinion (not allowed,
//! no reason), as RBAC answers for a subject nothing is bound to. Groups are echoed but grant
//! nothing: kubesim's rules are per user.

use serde_json::{Map, Value, json};

use super::ssar::{
    AccessAttributes, Decision, GROUP, attribute_errors, attributes_of, attributes_spec,
    decision_status, metadata_errors, review_info, review_metadata,
};
use super::{ResourceInfo, Strategy};
use crate::auth::{User, Users};
use crate::errors::{ApiError, BadValue, FieldError};
use crate::json::str_at;

pub struct SubjectAccessReviewStrategy {
    info: ResourceInfo,
}

impl Default for SubjectAccessReviewStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl SubjectAccessReviewStrategy {
    pub fn new() -> Self {
        Self {
            info: review_info(GROUP, "SubjectAccessReview"),
        }
    }
}

impl Strategy for SubjectAccessReviewStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }
}

fn validate(body: &Value) -> Result<(), ApiError> {
    let mut errs = attribute_errors(body);
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let user = str_at(&spec, &["user"]);
    let has_groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if user.is_empty() && !has_groups {
        errs.push(FieldError::invalid(
            "spec.user",
            BadValue::Str(user.to_string()),
            "at least one of user or group must be specified",
        ));
    }
    errs.extend(metadata_errors(body));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, "", "", &errs))
    }
}

/// Answers a SubjectAccessReview POST (201): the request's spec with `status` filled in.
pub fn review(
    body: &Value,
    rules_of: &dyn Fn(&str) -> Option<super::ssar::RuleSet>,
) -> Result<Value, ApiError> {
    validate(body)?;
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let user = str_at(&spec, &["user"]);
    let attrs: AccessAttributes = attributes_of(body);
    let decision = match rules_of(user) {
        Some(rules) if !user.is_empty() => rules.decide(&attrs),
        _ => Decision::no_opinion(),
    };
    let mut out_spec: Map<String, Value> = attributes_spec(body);
    for k in ["user", "uid"] {
        if let Some(v) = spec
            .get(k)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            out_spec.insert(k.into(), v.clone());
        }
    }
    for k in ["groups", "extra"] {
        if let Some(v) = spec.get(k).filter(|v| {
            v.as_array().is_some_and(|a| !a.is_empty())
                || v.as_object().is_some_and(|o| !o.is_empty())
        }) {
            out_spec.insert(k.into(), v.clone());
        }
    }
    Ok(json!({
        "kind": "SubjectAccessReview",
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": review_metadata(body),
        "spec": out_spec,
        "status": decision_status(&decision),
    }))
}

/// Whether a POST to this resource is one of the never-stored reviews [`answer`] handles.
pub fn is_review(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        (GROUP, "selfsubjectaccessreviews")
            | (GROUP, "subjectaccessreviews")
            | (
                super::tokenreview::GROUP,
                "tokenreviews" | "selfsubjectreviews"
            )
    )
}

/// Answers a review POST by `caller` (already authorized to create it) with the object the server
/// returns (201).
pub fn answer(plural: &str, body: &Value, caller: &User, users: &Users) -> Result<Value, ApiError> {
    match plural {
        "tokenreviews" => super::tokenreview::review(body, users),
        "selfsubjectreviews" => Ok(super::tokenreview::self_review(&caller.name)),
        "subjectaccessreviews" => review(body, &|name| users.rules_of(name)),
        _ => super::ssar::review(body, &|a: &AccessAttributes| caller.decide(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::ssar::{Rule, RuleSet};

    fn users() -> Users {
        let u = Users::new();
        u.add(
            "t-alice",
            User {
                name: "alice".into(),
                rules: RuleSet {
                    allow: vec![
                        Rule::new(&["list"], &["batch"], &["jobs"]).in_namespaces(&["team-a"]),
                    ],
                    deny: vec![
                        Rule::new(&["*"], &["batch"], &["jobs"])
                            .in_namespaces(&["secret"])
                            .named("no-secret"),
                    ],
                },
            },
        );
        u.add("admin", User::admin("root"));
        u
    }

    fn sar(user: &str, ns: &str) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "groups": ["system:authenticated"],
                        "resourceAttributes": {"verb": "list", "group": "batch", "resource": "jobs", "namespace": ns}}})
    }

    fn ask(body: &Value) -> Result<Value, ApiError> {
        let u = users();
        answer("subjectaccessreviews", body, &User::admin("caller"), &u)
    }

    #[test]
    fn decided_by_the_named_users_rules() {
        let out = ask(&sar("alice", "team-a")).unwrap();
        assert_eq!(out["kind"], "SubjectAccessReview");
        assert_eq!(out["status"], json!({"allowed": true}));
        assert_eq!(out["spec"]["user"], "alice");
        assert_eq!(out["spec"]["groups"], json!(["system:authenticated"]));
        assert_eq!(out["spec"]["resourceAttributes"]["namespace"], "team-a");
        assert_eq!(
            ask(&sar("alice", "team-b")).unwrap()["status"],
            json!({"allowed": false})
        );
        assert_eq!(
            ask(&sar("alice", "secret")).unwrap()["status"],
            json!({"allowed": false, "denied": true, "reason": "denied by no-secret"})
        );
        // Nobody with that name: no opinion, whoever asks.
        assert_eq!(
            ask(&sar("mallory", "team-a")).unwrap()["status"],
            json!({"allowed": false})
        );
        assert!(ask(&sar("root", "anything")).unwrap()["status"]["allowed"] == true);
    }

    #[test]
    fn malformed_reviews_are_invalid() {
        let e = ask(&json!({"spec": {"resourceAttributes": {"verb": "get"}}})).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            ".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
        );
        let e = ask(&json!({"spec": {"user": "alice"}})).unwrap_err();
        assert_eq!(
            e.message,
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
        let mut named = sar("alice", "team-a");
        named["metadata"] = json!({"name": "x"});
        assert!(ask(&named).unwrap_err().message.contains("metadata"));
        // Groups alone are a valid subject (they grant nothing in kubesim).
        let groups_only = json!({"spec": {"groups": ["g"], "nonResourceAttributes": {"path": "/x", "verb": "get"}}});
        assert_eq!(
            ask(&groups_only).unwrap()["status"],
            json!({"allowed": false})
        );
    }

    #[test]
    fn reviews_are_routed_by_resource() {
        assert!(is_review(GROUP, "subjectaccessreviews"));
        assert!(is_review(GROUP, "selfsubjectaccessreviews"));
        assert!(is_review("authentication.k8s.io", "tokenreviews"));
        assert!(!is_review(GROUP, "localsubjectaccessreviews"));
        assert!(!is_review("batch", "jobs"));
        // A SelfSubjectAccessReview is about the caller, not a named user.
        let ssar = json!({"spec": {"resourceAttributes": {"verb": "list", "group": "batch", "resource": "jobs"}}});
        let u = users();
        let caller = User {
            name: "nobody".into(),
            rules: RuleSet::none(),
        };
        let out = answer("selfsubjectaccessreviews", &ssar, &caller, &u).unwrap();
        assert_eq!(out["kind"], "SelfSubjectAccessReview");
        assert_eq!(out["status"], json!({"allowed": false}));
        let tr = answer(
            "tokenreviews",
            &json!({"spec": {"token": "t-alice"}}),
            &caller,
            &u,
        )
        .unwrap();
        assert_eq!(tr["status"]["user"]["username"], "alice");
    }
}
