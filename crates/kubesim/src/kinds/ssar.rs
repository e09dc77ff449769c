//! authorization.k8s.io/v1 SelfSubjectAccessReview (create-only, never stored) and the small
//! authorizer model the server uses both to answer reviews and to refuse requests (403).
//!
//! Sources: `pkg/registry/authorization/selfsubjectaccessreview/rest.go` (validate, authorize,
//! fill `status.allowed/denied/reason/evaluationError`), `pkg/apis/authorization/validation`
//! (`ValidateSelfSubjectAccessReview`), `plugin/pkg/auth/authorizer/rbac` (`VerbMatches`,
//! `APIGroupMatches`, `ResourceMatches` with `*/subresource`, `NonResourceURLMatches`) and
//! `apiserver/pkg/endpoints/handlers/responsewriters/errors.go` (`forbiddenMessage`).

use serde_json::{Map, Value, json};

use super::{ResourceInfo, Strategy};
use crate::errors::{ApiError, BadValue, FieldError, go_quote};
use crate::json::str_at;

pub const GROUP: &str = "authorization.k8s.io";

/// What a request asks to do, as the authorizer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AccessAttributes {
    /// get, list, watch, create, update, patch, delete, deletecollection (or a custom verb).
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name (`jobs`); empty for non-resource requests.
    pub resource: String,
    pub subresource: String,
    /// Empty for cluster-scoped resources and cluster-wide lists.
    pub namespace: String,
    /// Empty for collection requests.
    pub name: String,
    /// The URL path of a non-resource request (`/healthz`); empty for resource requests.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
}

impl AccessAttributes {
    pub fn is_resource_request(&self) -> bool {
        self.path.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    NoOpinion,
}

/// An authorizer's answer: the verdict and a human reason (may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub reason: String,
}

impl Decision {
    pub fn allow(reason: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Allow,
            reason: reason.into(),
        }
    }
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Deny,
            reason: reason.into(),
        }
    }
    pub fn no_opinion() -> Self {
        Self {
            verdict: Verdict::NoOpinion,
            reason: String::new(),
        }
    }
    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }
}

/// One RBAC-style rule. Empty `resource_names` / `namespaces` match everything; `*` is a wildcard in
/// every list; `resources` also understands `jobs/status` and `*/status`; `non_resource_urls`
/// entries ending in `*` match by prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// Shown in decision reasons (`RBAC: allowed by <name>`); may be empty.
    pub name: String,
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub namespaces: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl Rule {
    /// A rule allowing `verbs` on `resources` of `groups` everywhere.
    pub fn new(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Self {
        Self {
            verbs: strings(verbs),
            api_groups: strings(groups),
            resources: strings(resources),
            ..Self::default()
        }
    }

    /// Restricts the rule to the given namespaces.
    pub fn in_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = strings(namespaces);
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    pub fn matches(&self, a: &AccessAttributes) -> bool {
        let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.is_resource_request() {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
            });
        }
        if !has(&self.api_groups, &a.group) {
            return false;
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty()
                    && r.len() == a.subresource.len() + 2
                    && r.starts_with("*/")
                    && r.ends_with(&a.subresource))
        });
        if !resource_ok {
            return false;
        }
        if !self.resource_names.is_empty() && !self.resource_names.contains(&a.name) {
            return false;
        }
        self.namespaces.is_empty() || has(&self.namespaces, &a.namespace)
    }
}

/// A token's rights: deny rules win over allow rules; nothing matching is NoOpinion (which the
/// server treats as forbidden).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RuleSet {
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl RuleSet {
    /// Everything allowed (an admin token).
    pub fn allow_all() -> Self {
        let mut everything = Rule::new(&["*"], &["*"], &["*"]);
        everything.non_resource_urls = vec!["*".into()];
        Self {
            allow: vec![everything],
            deny: Vec::new(),
        }
    }

    /// No rights at all.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn decide(&self, a: &AccessAttributes) -> Decision {
        if let Some(r) = self.deny.iter().find(|r| r.matches(a)) {
            return Decision::deny(if r.name.is_empty() {
                String::new()
            } else {
                format!("denied by {}", r.name)
            });
        }
        match self.allow.iter().find(|r| r.matches(a)) {
            Some(r) if r.name.is_empty() => Decision::allow(""),
            Some(r) => Decision::allow(format!("RBAC: allowed by {}", r.name)),
            None => Decision::no_opinion(),
        }
    }
}

/// `forbiddenMessage`: `User "u" cannot list resource "jobs" in API group "batch" in the namespace "ns"`.
pub fn forbidden_message(user: &str, a: &AccessAttributes) -> String {
    if !a.is_resource_request() {
        return format!(
            "User {} cannot {} path {}",
            go_quote(user),
            a.verb,
            go_quote(&a.path)
        );
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    if a.namespace.is_empty() {
        format!(
            "User {} cannot {} resource {} in API group {} at the cluster scope",
            go_quote(user),
            a.verb,
            go_quote(&resource),
            go_quote(&a.group)
        )
    } else {
        format!(
            "User {} cannot {} resource {} in API group {} in the namespace {}",
            go_quote(user),
            a.verb,
            go_quote(&resource),
            go_quote(&a.group),
            go_quote(&a.namespace)
        )
    }
}

/// The 403 the authorization filter answers:
/// `jobs.batch is forbidden: User "u" cannot list resource "jobs" in API group "batch" in the namespace "ns"`
/// (`: <reason>` appended when the authorizer gave one). Non-resource requests read
/// `forbidden: User "u" cannot get path "/x"`.
pub fn forbidden_error(user: &str, a: &AccessAttributes, reason: &str) -> ApiError {
    let mut why = forbidden_message(user, a);
    if !reason.is_empty() {
        why.push_str(": ");
        why.push_str(reason);
    }
    if a.is_resource_request() {
        ApiError::forbidden(&a.group, &a.resource, &a.name, &why)
    } else {
        ApiError::new(403, "Forbidden", format!("forbidden: {why}")).with_details(json!({}))
    }
}

pub struct SelfSubjectAccessReviewStrategy {
    info: ResourceInfo,
}

impl Default for SelfSubjectAccessReviewStrategy {
    fn default() -> Self {
        Self::new()
    }
}

/// What discovery says of a never-stored, create-only, cluster-scoped review kind in `group`/v1
/// (`plural` is the lower-cased kind plus `s`).
pub(crate) fn review_info(group: &str, kind: &str) -> ResourceInfo {
    let singular = kind.to_ascii_lowercase();
    ResourceInfo {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: format!("{singular}s"),
        singular,
        namespaced: false,
        short_names: Vec::new(),
        categories: Vec::new(),
        verbs: vec!["create".into()],
        status_subresource: false,
        // Not stored: discovery lists no storageVersionHash.
        storage_version_hash: None,
    }
}

impl SelfSubjectAccessReviewStrategy {
    pub fn new() -> Self {
        Self {
            info: review_info(GROUP, "SelfSubjectAccessReview"),
        }
    }
}

impl Strategy for SelfSubjectAccessReviewStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }
}

const RESOURCE_FIELDS: &[&str] = &[
    "namespace",
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "name",
];

pub(crate) fn non_empty_fields(v: &Value, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for f in fields {
        if let Some(Value::String(s)) = v.get(*f)
            && !s.is_empty()
        {
            out.insert((*f).to_string(), json!(s));
        }
    }
    out
}

/// The attribute part of `ValidateSelfSubjectAccessReview` / `ValidateSubjectAccessReviewSpec`:
/// exactly one of `resourceAttributes` and `nonResourceAttributes`.
pub(crate) fn attribute_errors(body: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ra = body
        .pointer("/spec/resourceAttributes")
        .filter(|v| !v.is_null());
    let nra = body
        .pointer("/spec/nonResourceAttributes")
        .filter(|v| !v.is_null());
    match (ra, nra) {
        (Some(_), Some(n)) => errs.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            BadValue::Raw(format!(
                "&authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
                go_quote(str_at(n, &["path"])),
                go_quote(str_at(n, &["verb"]))
            )),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => errs.push(FieldError::invalid(
            "spec.resourceAttributes",
            BadValue::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    errs
}

/// The review kinds' metadata rule: it must be empty (managedFields aside).
pub(crate) fn metadata_errors(body: &Value) -> Vec<FieldError> {
    let meta_set = body
        .get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|m| {
            m.iter().any(|(k, v)| {
                k != "managedFields"
                    && k != "creationTimestamp"
                    && !(v.is_null()
                        || v.as_str().is_some_and(str::is_empty)
                        || v.as_object().is_some_and(Map::is_empty)
                        || v.as_array().is_some_and(Vec::is_empty))
            })
        });
    if meta_set {
        vec![FieldError::invalid(
            "metadata",
            // Go prints the whole ObjectMeta struct (%#v); summarised here.
            BadValue::Raw("v1.ObjectMeta{...}".into()),
            "must be empty",
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateSelfSubjectAccessReview`. The error is qualified with the group only: the internal
/// object the registry validates has an empty kind (`.authorization.k8s.io "" is invalid: ...`).
fn validate(body: &Value) -> Result<(), ApiError> {
    let mut errs = attribute_errors(body);
    errs.extend(metadata_errors(body));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, "", "", &errs))
    }
}

/// The attributes a review asks about (`ResourceAttributesFrom` / `NonResourceAttributesFrom`).
pub fn attributes_of(body: &Value) -> AccessAttributes {
    if let Some(ra) = body
        .pointer("/spec/resourceAttributes")
        .filter(|v| v.is_object())
    {
        let s = |k: &str| str_at(ra, &[k]).to_string();
        AccessAttributes {
            verb: s("verb"),
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            namespace: s("namespace"),
            name: s("name"),
            path: String::new(),
        }
    } else {
        let n = body
            .pointer("/spec/nonResourceAttributes")
            .cloned()
            .unwrap_or(json!({}));
        AccessAttributes {
            verb: str_at(&n, &["verb"]).to_string(),
            path: str_at(&n, &["path"]).to_string(),
            ..AccessAttributes::default()
        }
    }
}

/// The attribute part of a review's spec as the server answers it (empty strings dropped, as Go's
/// `omitempty` does).
pub(crate) fn attributes_spec(body: &Value) -> Map<String, Value> {
    let mut spec = Map::new();
    if let Some(ra) = body
        .pointer("/spec/resourceAttributes")
        .filter(|v| v.is_object())
    {
        let mut m = non_empty_fields(ra, RESOURCE_FIELDS);
        for k in ["fieldSelector", "labelSelector"] {
            if let Some(v) = ra.get(k).filter(|v| !v.is_null()) {
                m.insert(k.into(), v.clone());
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(m));
    }
    if let Some(n) = body
        .pointer("/spec/nonResourceAttributes")
        .filter(|v| v.is_object())
    {
        spec.insert(
            "nonResourceAttributes".into(),
            Value::Object(non_empty_fields(n, &["path", "verb"])),
        );
    }
    spec
}

/// `SubjectAccessReviewStatus` of a decision: `allowed` always, `denied` and `reason` only when set.
pub(crate) fn decision_status(decision: &Decision) -> Value {
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision.verdict == Verdict::Allow));
    if decision.verdict == Verdict::Deny {
        status.insert("denied".into(), json!(true));
    }
    if !decision.reason.is_empty() {
        status.insert("reason".into(), json!(decision.reason));
    }
    Value::Object(status)
}

/// The answered object's metadata: empty but for the managedFields the request carried.
pub(crate) fn review_metadata(body: &Value) -> Value {
    let mut metadata = Map::new();
    if let Some(mf) = body.pointer("/metadata/managedFields") {
        metadata.insert("managedFields".into(), mf.clone());
    }
    Value::Object(metadata)
}

/// Answers a SelfSubjectAccessReview POST: validates the request, asks `decide` and returns the
/// object the server answers (201) — the request's spec with `status` filled in.
pub fn review(
    body: &Value,
    decide: &dyn Fn(&AccessAttributes) -> Decision,
) -> Result<Value, ApiError> {
    validate(body)?;
    let decision = decide(&attributes_of(body));
    Ok(json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": review_metadata(body),
        "spec": attributes_spec(body),
        "status": decision_status(&decision),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs_list(ns: &str) -> AccessAttributes {
        AccessAttributes {
            verb: "list".into(),
            group: "batch".into(),
            resource: "jobs".into(),
            namespace: ns.into(),
            ..AccessAttributes::default()
        }
    }

    #[test]
    fn forbidden_wording() {
        let e = forbidden_error("u", &jobs_list("ns"), "");
        assert_eq!(
            e.message,
            "jobs.batch is forbidden: User \"u\" cannot list resource \"jobs\" in API group \"batch\" in the namespace \"ns\""
        );
        assert_eq!(e.code, 403);
        assert_eq!(e.details, Some(json!({"group": "batch", "kind": "jobs"})));
        let mut get = jobs_list("");
        get.verb = "get".into();
        get.resource = "namespaces".into();
        get.group = String::new();
        get.name = "x".into();
        assert_eq!(
            forbidden_error("u", &get, "").message,
            "namespaces \"x\" is forbidden: User \"u\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        let mut status = jobs_list("ns");
        status.verb = "patch".into();
        status.subresource = "status".into();
        status.name = "j".into();
        assert_eq!(
            forbidden_error("system:serviceaccount:a:b", &status, "").message,
            "jobs.batch \"j\" is forbidden: User \"system:serviceaccount:a:b\" cannot patch resource \"jobs/status\" in API group \"batch\" in the namespace \"ns\""
        );
        let path = AccessAttributes {
            verb: "get".into(),
            path: "/metrics".into(),
            ..AccessAttributes::default()
        };
        assert_eq!(
            forbidden_error("u", &path, "").message,
            "forbidden: User \"u\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn rules_match_like_rbac() {
        let rules = RuleSet {
            allow: vec![
                Rule::new(&["get", "list", "watch"], &["batch"], &["jobs"]).in_namespaces(&["ns"]),
                Rule::new(&["patch"], &["batch"], &["*/status"]),
            ],
            deny: vec![
                Rule::new(&["*"], &["batch"], &["jobs"])
                    .in_namespaces(&["secret-ns"])
                    .named("no-secrets"),
            ],
        };
        assert!(rules.decide(&jobs_list("ns")).allowed());
        assert_eq!(
            rules.decide(&jobs_list("other")).verdict,
            Verdict::NoOpinion
        );
        assert_eq!(
            rules.decide(&jobs_list("secret-ns")),
            Decision::deny("denied by no-secrets")
        );
        let mut st = jobs_list("x");
        st.verb = "patch".into();
        st.subresource = "status".into();
        assert!(rules.decide(&st).allowed());
        st.subresource = String::new();
        assert!(!rules.decide(&st).allowed());
        assert!(RuleSet::allow_all().decide(&st).allowed());
        assert!(!RuleSet::none().decide(&st).allowed());
    }

    #[test]
    fn review_answers_and_validates() {
        let rules = RuleSet {
            allow: vec![Rule::new(&["list"], &["batch"], &["jobs"])],
            deny: Vec::new(),
        };
        let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": "ns", "verb": "list", "group": "batch", "resource": "jobs"}}});
        let out = review(&body, &|a| rules.decide(a)).unwrap();
        assert_eq!(out["status"], json!({"allowed": true}));
        assert_eq!(out["spec"], body["spec"]);
        let body = json!({"spec": {"resourceAttributes": {"verb": "delete", "group": "batch", "resource": "jobs"}}});
        let out = review(&body, &|a| rules.decide(a)).unwrap();
        assert_eq!(out["status"], json!({"allowed": false}));
        let denied = review(&body, &|_| Decision::deny("nope")).unwrap();
        assert_eq!(
            denied["status"],
            json!({"allowed": false, "denied": true, "reason": "nope"})
        );

        let err = review(&json!({"spec": {}}), &|a| rules.decide(a)).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
        let err = review(
            &json!({"metadata": {"name": "x"}, "spec": {"nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
            &|a| rules.decide(a),
        )
        .unwrap_err();
        assert!(
            err.message
                .ends_with("metadata: Invalid value: v1.ObjectMeta{...}: must be empty")
        );
        let nr = review(
            &json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
            &|a| RuleSet::allow_all().decide(a),
        )
        .unwrap();
        assert_eq!(nr["status"]["allowed"], true);
        assert_eq!(
            SelfSubjectAccessReviewStrategy::new().info().verbs,
            ["create"]
        );
    }
}
