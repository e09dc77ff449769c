//! ValidatingAdmissionPolicy evaluation, after the API server's
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating` (`dispatcher.go`,
//! `validator.go`, `errors.go`) and the matching rules of `.../plugin/policy/matching` and
//! `.../plugin/webhook/predicates/rules` (`rules.go`).
//!
//! For each binding (in name order) whose policy exists: the policy's `matchConstraints` and the
//! binding's `matchResources` must match the request (resource rules with `*`, `res/*`, `*/sub`,
//! scope; exclude rules; namespace and object selectors), then every `matchCondition` must hold
//! (one false skips the policy; an error with none false follows `failurePolicy`), then the
//! `variables` are computed in order and the `validations` run. The first denial of a binding with
//! `Deny` is answered like `dispatcher.go` does: `admission.NewForbidden` (`<resource> "<name>" is
//! forbidden: ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>`), the
//! status reason replaced by the validation's `reason` (default `Invalid`), the code by
//! `reasonToCode` (Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413, else 422), and the
//! message appended as a cause. `Warn` adds the `Validation failed for ValidatingAdmissionPolicy
//! '<p>' with binding '<b>': <message>` warning; `Audit` is accepted and ignored (kubesim keeps no
//! audit log). Policies do not apply to admissionregistration.k8s.io objects themselves (the
//! server exempts its admission configuration resources), nor to DELETE or CONNECT, which kubesim
//! does not send through admission.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::Request;
use super::cel::{self, Context};
use crate::api::Api;
use crate::errors::ApiError;
use crate::store::TableKey;
use crate::validation::selector;

pub const GROUP: &str = "admissionregistration.k8s.io";

/// What one (policy, binding) pair decided.
enum Decision {
    Admit,
    Deny { message: String, reason: String },
}

/// Runs every binding's policy against `req`: `Ok(warnings)` when admitted.
pub fn evaluate(api: &Api, req: &Request) -> Result<Vec<String>, ApiError> {
    if req.info.group == GROUP {
        return Ok(Vec::new());
    }
    let bindings = api
        .store
        .list(
            &TableKey::new(GROUP, "validatingadmissionpolicybindings"),
            None,
            None,
        )
        .items;
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let policies = TableKey::new(GROUP, "validatingadmissionpolicies");
    let namespace_object = namespace_object(api, req);
    let mut warnings = Vec::new();
    for b in bindings {
        let binding = b.value();
        let policy_name = binding
            .pointer("/spec/policyName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(p) = api.store.get(&policies, "", policy_name) else {
            continue; // a binding to a missing policy does nothing
        };
        let policy = p.value();
        let spec = &policy["spec"];
        if !matches(
            &spec["matchConstraints"],
            req,
            namespace_object.as_ref(),
            true,
        ) {
            continue;
        }
        if let Some(m) = binding
            .pointer("/spec/matchResources")
            .filter(|m| !m.is_null())
            && !matches(m, req, namespace_object.as_ref(), false)
        {
            continue;
        }
        let Decision::Deny { message, reason } = decide(spec, req, namespace_object.as_ref())
        else {
            continue;
        };
        let p_name = crate::json::meta_str(&policy, "name");
        let b_name = crate::json::meta_str(&binding, "name");
        let actions: Vec<&str> = binding
            .pointer("/spec/validationActions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if actions.contains(&"Deny") {
            return Err(denial(req, p_name, b_name, &message, &reason));
        }
        if actions.contains(&"Warn") {
            warnings.push(format!(
                "Validation failed for ValidatingAdmissionPolicy '{p_name}' with binding '{b_name}': {message}"
            ));
        }
    }
    Ok(warnings)
}

/// The Status of a denial (dispatcher.go: NewForbidden, then reason, code and a cause replaced).
fn denial(req: &Request, policy: &str, binding: &str, message: &str, reason: &str) -> ApiError {
    let full = format!(
        "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"
    );
    let reason = if reason.is_empty() { "Invalid" } else { reason };
    let mut e = ApiError::forbidden(&req.info.group, &req.info.plural, req.name, &full);
    e.code = match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    e.reason = Some(reason.to_string());
    if let Some(Value::Object(d)) = &mut e.details {
        d.insert("causes".into(), json!([{ "message": full }]));
    }
    e
}

/// The request's namespace as an object (`namespaceObject`), for namespaced resources.
fn namespace_object(api: &Api, req: &Request) -> Option<Value> {
    if !req.info.namespaced {
        return None;
    }
    let mut ns = api
        .store
        .get(&TableKey::new("", "namespaces"), "", req.namespace)?
        .value();
    if let Value::Object(m) = &mut ns {
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Namespace"));
    }
    Some(ns)
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `rules.Matcher.Matches`: operation, group, version, resource/subresource and scope.
fn rule_matches(rule: &Value, req: &Request) -> bool {
    let has = |key: &str, want: &str| strings(&rule[key]).iter().any(|x| *x == "*" || *x == want);
    let resource = strings(&rule["resources"]).iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == req.info.plural) && (sub == "*" || sub == req.subresource)
    });
    let scope = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !req.info.namespaced,
        "Namespaced" => req.info.namespaced,
        _ => true,
    };
    has("operations", req.operation)
        && has("apiGroups", &req.info.group)
        && has("apiVersions", &req.info.version)
        && resource
        && scope
}

fn selector_matches(sel: Option<&Value>, labels: Option<&Value>) -> bool {
    let empty = json!({});
    match selector::parse(Some(sel.filter(|s| !s.is_null()).unwrap_or(&empty))) {
        Ok(s) => s.matches(labels.and_then(Value::as_object)),
        // Go fails the request on a selector it cannot convert; validation keeps them out.
        Err(()) => false,
    }
}

/// `matching.Matcher.Matches` for a policy's `matchConstraints` (`need_rules`) or a binding's
/// `matchResources` (no resource rules = every resource the policy matches).
fn matches(m: &Value, req: &Request, ns: Option<&Value>, need_rules: bool) -> bool {
    let rules = m.get("resourceRules").and_then(Value::as_array);
    let included = match rules {
        Some(r) if !r.is_empty() => r.iter().any(|r| rule_matches(r, req)),
        _ => !need_rules,
    };
    let excluded = m
        .get("excludeResourceRules")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|r| rule_matches(r, req)));
    if !included || excluded {
        return false;
    }
    // The namespace selector: a namespaced object's namespace; a Namespace itself; other
    // cluster-scoped objects always match.
    let is_namespace = req.info.group.is_empty() && req.info.plural == "namespaces";
    let ns_ok = if req.info.namespaced {
        selector_matches(
            m.get("namespaceSelector"),
            ns.and_then(|n| n.pointer("/metadata/labels")),
        )
    } else if is_namespace {
        selector_matches(
            m.get("namespaceSelector"),
            req.object.pointer("/metadata/labels"),
        )
    } else {
        true
    };
    let obj_sel = m.get("objectSelector");
    let obj_ok = selector_matches(obj_sel, req.object.pointer("/metadata/labels"))
        || req
            .old
            .is_some_and(|o| selector_matches(obj_sel, o.pointer("/metadata/labels")));
    ns_ok && obj_ok
}

/// The CEL activation: `object`, `oldObject`, `request`, `namespaceObject`, `params` (null).
fn context(req: &Request, ns: Option<&Value>) -> Context<'static, 'static> {
    let mut ctx = Context::default();
    let gvk = json!({"group": req.info.group, "version": req.info.version, "kind": req.info.kind});
    let gvr =
        json!({"group": req.info.group, "version": req.info.version, "resource": req.info.plural});
    let request = json!({
        "kind": gvk, "requestKind": gvk,
        "resource": gvr, "requestResource": gvr,
        "subResource": req.subresource,
        "name": req.name,
        "namespace": req.namespace,
        "operation": req.operation,
        "userInfo": {
            "username": req.user,
            "uid": crate::kinds::tokenreview::uid_of(req.user),
            "groups": crate::kinds::tokenreview::groups_of(req.user),
        },
        "dryRun": req.dry_run,
    });
    ctx.add_variable_from_value("request", cel::to_cel(&request));
    let typed = |o: &Value| cel::to_cel(&super::typed(req.info, o));
    ctx.add_variable_from_value("object", typed(req.object));
    ctx.add_variable_from_value(
        "oldObject",
        req.old.map(typed).unwrap_or(::cel::Value::Null),
    );
    ctx.add_variable_from_value(
        "namespaceObject",
        ns.map(cel::to_cel).unwrap_or(::cel::Value::Null),
    );
    ctx.add_variable_from_value("params", ::cel::Value::Null);
    ctx
}

/// Match conditions, variables and validations of one policy against one request.
fn decide(spec: &Value, req: &Request, ns: Option<&Value>) -> Decision {
    let fail_closed = spec.get("failurePolicy").and_then(Value::as_str) != Some("Ignore");
    let on_error = |message: String| {
        if fail_closed {
            Decision::Deny {
                message,
                reason: String::new(),
            }
        } else {
            Decision::Admit
        }
    };
    let mut ctx = context(req, ns);
    let mut condition_error = None;
    for c in spec
        .get("matchConditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let expr = c
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match cel::compile(expr).and_then(|p| cel::eval_bool(&p, &ctx)) {
            Ok(true) => {}
            Ok(false) => return Decision::Admit,
            Err(e) => {
                condition_error
                    .get_or_insert(format!("failed to evaluate match condition {name:?}: {e}"));
            }
        }
    }
    if let Some(e) = condition_error {
        return on_error(e);
    }
    // Variables: a failing one is left out, so an expression using it fails (lazily, as in cel-go).
    let mut vars: HashMap<String, ::cel::Value> = HashMap::new();
    for v in spec
        .get("variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        let expr = v
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Ok(value) = cel::compile(expr).and_then(|p| cel::eval_value(&p, &ctx)) {
            vars.insert(name.to_string(), value);
            ctx.add_variable_from_value("variables", vars.clone());
        }
    }
    if vars.is_empty() {
        ctx.add_variable_from_value("variables", vars);
    }
    for v in spec
        .get("validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let expr = v
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match cel::compile(expr).and_then(|p| cel::eval_bool(&p, &ctx)) {
            Ok(true) => {}
            Ok(false) => {
                return Decision::Deny {
                    message: failure_message(v, expr, &ctx),
                    reason: v
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("Invalid")
                        .to_string(),
                };
            }
            Err(e) => {
                return on_error(format!(
                    "expression '{}' resulted in error: {e}",
                    expr.trim()
                ));
            }
        }
    }
    Decision::Admit
}

/// validator.go: the messageExpression's result when it gives a non-empty one-line string, else
/// `message`, else `failed expression: <expression>`.
fn failure_message(v: &Value, expr: &str, ctx: &Context) -> String {
    if let Some(m) = v.get("messageExpression").and_then(Value::as_str)
        && let Ok(text) = cel::compile(m).and_then(|p| cel::eval_string(&p, ctx))
    {
        let text = text.trim();
        if !text.is_empty() && !text.contains('\n') {
            return text.to_string();
        }
    }
    match v.get("message").and_then(Value::as_str).map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed expression: {}", expr.trim()),
    }
}
